"""``choose_move``: what the worker and the server call to get a bot's move."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search.evaluation import evaluation_for
from kibitz.shared.search.levels import budget_for_level, temperature_for_level
from kibitz.shared.search.limits import CancelToken, SearchLimits, now
from kibitz.shared.search.options import SearchOptions
from kibitz.shared.search.scores import DECISIVE, plies_to_end
from kibitz.shared.search.searcher import DepthResult, Searcher

#: Reported score of a proven result: +-(DECIDED - plies to the end).
DECIDED = 10_000.0


@dataclass(slots=True)
class SearchResult:
    """A chosen move with the statistics of the search behind it.

    ``score`` is from the mover's point of view in "pawns" of the game (evaluation units);
    a proven win scores ``10000 - plies to the end`` (negative for a proven loss), and then
    ``mate_in`` holds that signed number of plies.
    """

    move: Any
    move_text: str
    score: float
    depth: int
    nodes: int
    time_ms: int
    nps: int
    pv: list[str]
    tt_hit_rate: float
    exact: bool = False
    mate_in: int | None = None
    random_pick: bool = False
    root_scores: dict[str, float] = field(default_factory=dict)


def report_score(raw: int, unit: int) -> float:
    """An internal integer score as the float shown to people and sent on the wire."""
    if abs(raw) >= DECISIVE:
        plies = plies_to_end(raw)
        return math.copysign(DECIDED - plies, raw)
    return round(raw / max(1, unit), 3)


def format_line(game: Game[Any, Any], state: Any, moves: list[Any]) -> list[str]:
    texts = []
    for move in moves:
        texts.append(game.format_move(state, move))
        state = game.apply(state, move)
    return texts


def choose_move(
    game: Game[Any, Any],
    state: Any,
    level: int,
    budget: Budget | None = None,
    seed: int = 0,
    options: SearchOptions | None = None,
    progress: Callable[[DepthResult], None] | None = None,
    cancel: CancelToken | None = None,
) -> SearchResult:
    """The bot's move at ``level`` (1..8) within ``budget`` (default: the level's budget).

    ``progress`` is called with each completed iteration (for streaming). Deterministic
    for a given seed when the budget binds on depth or nodes. Always returns
    a legal move when one exists: the best move of the deepest completed iteration, or the
    first ordered move if not even depth 1 completed. Raises ValueError in a finished game.

    ``cancel`` lets another thread stop the search early (see :class:`CancelToken`); the
    result is then the move of the deepest iteration completed so far, as when time runs
    out (a worker throws it away, or posts it when it was asked to hurry).
    """
    temperature = temperature_for_level(level, game.name)
    if budget is None:
        budget = budget_for_level(game.name, level)
    options = options or SearchOptions()
    if temperature > 0 and options.all_root_scores is False:
        options = SearchOptions(**{**_as_dict(options), "all_root_scores": True})
    start = now()
    searcher = Searcher(game, options)
    limits = SearchLimits.from_budget(budget)
    if limits.time_ms is not None:
        # The clock started at the call: table set-up (and a first import) counts too.
        spent = int((now() - start) * 1000)
        limits = SearchLimits(limits.depth, max(1, limits.time_ms - spent), limits.nodes)
    if cancel is not None:
        cancel.attach(searcher)
    last: DepthResult | None = None
    for result in searcher.iterate(state, limits):
        last = result
        if progress is not None:
            progress(result)
        if cancel is not None and cancel.cancelled:
            # iterate() sets its own deadline when it starts, so a cancel that came just
            # before that is only seen here, after one iteration.
            break
    elapsed = max(0, int((now() - start) * 1000))
    unit = evaluation_for(game).unit
    if last is None:
        moves = game.legal_moves(state)
        if not moves:
            raise ValueError(f"no legal move in {game.format_position(state)!r}: game over")
        move = moves[0]
        return SearchResult(
            move, game.format_move(state, move), 0.0, 0, searcher.nodes, elapsed,
            _nps(searcher.nodes, elapsed), [game.format_move(state, move)],
            searcher.table.hit_rate() if searcher.table else 0.0,
        )  # fmt: skip
    move, raw, picked = last.move, last.score, False
    if searcher.interrupted_best is not None and temperature == 0:
        # The unfinished iteration already found a better move than the last finished one.
        move, raw = searcher.move_out(searcher.interrupted_best), searcher.interrupted_score
    if temperature > 0 and len(last.root_scores) > 1:
        rng = random.Random((seed * 1_000_003) ^ game.hash_key(state))
        move, raw = _softmax_pick(last.root_scores, temperature * unit, unit, rng)
        picked = move != last.move
    pv = last.pv if move == last.move else [move]
    return SearchResult(
        move=move,
        move_text=game.format_move(state, move),
        score=report_score(raw, unit),
        depth=last.depth,
        nodes=searcher.nodes,
        time_ms=elapsed,
        nps=_nps(searcher.nodes, elapsed),
        pv=format_line(game, state, pv),
        tt_hit_rate=last.tt_hit_rate,
        exact=last.exact,
        mate_in=_mate_in(raw),
        random_pick=picked,
        root_scores=(
            {game.format_move(state, m): report_score(s, unit) for m, s in last.root_scores}
            if options.all_root_scores
            else {}
        ),
    )


def _as_dict(options: SearchOptions) -> dict[str, Any]:
    return {name: getattr(options, name) for name in options.__slots__}


def _nps(nodes: int, ms: int) -> int:
    return int(nodes * 1000 / ms) if ms > 0 else nodes * 1000


def _mate_in(raw: int) -> int | None:
    if abs(raw) < DECISIVE:
        return None
    plies = plies_to_end(raw)
    return plies if raw > 0 else -plies


def _softmax_pick(
    scores: list[tuple[Any, int]], temperature: float, unit: int, rng: random.Random
) -> tuple[Any, int]:
    """A root move drawn with probability proportional to exp(score / temperature).

    Scores are clamped to +-10 units so a proven win or loss weighs like a big advantage
    rather than overflowing; a proven win is still taken almost always at any level.
    """
    cap = 10 * unit
    clamped = [max(-cap, min(cap, s)) for _, s in scores]
    top = max(clamped)
    weights = [math.exp((c - top) / temperature) for c in clamped]
    pick = rng.random() * sum(weights)
    for (move, raw), weight in zip(scores, weights, strict=True):
        pick -= weight
        if pick <= 0:
            return move, raw
    return scores[-1]
