"""The game-agnostic searcher, per-game evaluations and bot levels.

Public API (used by the worker, the server and the CLI)::

    budget_for_level(game, level) -> Budget
    choose_move(game, state, level, budget=None, seed=0) -> SearchResult
    Searcher(game, options).iterate(state, limits) -> Iterator[DepthResult]
"""

from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search.choose import SearchResult, choose_move, report_score
from kibitz.shared.search.levels import (
    MAX_LEVEL,
    MIN_LEVEL,
    budget_for_level,
    temperature_for_level,
)
from kibitz.shared.search.limits import CancelToken, SearchLimits
from kibitz.shared.search.options import TECHNIQUES, SearchOptions
from kibitz.shared.search.searcher import DepthResult, Searcher


def iterate(game, state, limits=None, options=None):  # type: ignore[no-untyped-def]
    """Iterative deepening as a generator: one DepthResult per completed depth."""
    return Searcher(game, options).iterate(state, limits)


__all__ = [
    "Budget",
    "CancelToken",
    "DepthResult",
    "MAX_LEVEL",
    "MIN_LEVEL",
    "SearchLimits",
    "SearchOptions",
    "SearchResult",
    "Searcher",
    "TECHNIQUES",
    "budget_for_level",
    "choose_move",
    "iterate",
    "report_score",
    "temperature_for_level",
]
