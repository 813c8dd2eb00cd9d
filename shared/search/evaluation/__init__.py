"""Per-game evaluations, looked up by game id (one module per game)."""

from __future__ import annotations

import importlib
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.search.evaluation.base import Evaluation

#: Game id -> module in this package defining ``EVALUATION`` (an Evaluation subclass).
EVALUATION_MODULES = {
    "tictactoe": "tictactoe",
    "matches": "matches",
    "kono": "kono",
    "oware": "oware",
    "othello": "othello",
    "draughts": "draughts",
    "chess": "chess",
    "chess-board": "chess_board",  # the searcher's form of chess (search/forms.py)
}

_CACHE: dict[int, Evaluation] = {}


def evaluation_for(game: Game[Any, Any]) -> Evaluation:
    """The evaluation for ``game`` (the zero evaluation when the game has none)."""
    cached = _CACHE.get(id(game))
    if cached is not None and cached.game is game:
        return cached
    module_name = EVALUATION_MODULES.get(game.name)
    evaluation: Evaluation
    if module_name is None:
        evaluation = Evaluation(game)
    else:
        module = importlib.import_module(f"{__name__}.{module_name}")
        evaluation = module.EVALUATION(game)
    _CACHE[id(game)] = evaluation
    return evaluation


__all__ = ["Evaluation", "evaluation_for", "EVALUATION_MODULES"]
