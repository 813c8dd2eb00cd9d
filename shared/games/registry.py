"""The registry of games: one entry per game module, looked up by its id.

Adding a game is writing one module that defines ``GAME`` (an instance of
:class:`~kibitz.shared.games.base.Game`) and adding its id here.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from kibitz.shared.games.base import Game, GameError

#: Game id -> module (relative to this package) that defines ``GAME``.
GAME_MODULES: dict[str, str] = {
    "tictactoe": "tictactoe",
    "matches": "matches",
    "kono": "kono",
    "oware": "oware",
    "othello": "othello",
    "draughts": "draughts",
    "chess": "chess",
}


class UnknownGameError(GameError):
    code = "game/unknown"


@cache
def find_game(name: str) -> Game[Any, Any]:
    """The game registered as ``name``; raises UnknownGameError."""
    module_name = GAME_MODULES.get(name)
    if module_name is None:
        raise UnknownGameError(f"unknown game {name!r}; known games: {', '.join(GAME_MODULES)}")
    module = importlib.import_module(f"{__package__}.{module_name}")
    game: Game[Any, Any] = module.GAME
    return game


def available_games() -> list[Game[Any, Any]]:
    """Every registered game whose module is present, in registry order."""
    games = []
    for name in GAME_MODULES:
        try:
            games.append(find_game(name))
        except ModuleNotFoundError:
            continue
    return games
