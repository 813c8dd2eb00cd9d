"""The registry of games: one entry per game module, looked up by its id.

Adding a game is writing one module that defines ``GAME`` (an instance of
:class:`~kibitz.shared.games.base.Game`, with its rules and its
:class:`~kibitz.shared.games.policy.GamePolicy`) and adding its id here.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from kibitz.shared.games.base import Game, GameError
from kibitz.shared.games.policy import DEFAULT_POLICY, GamePolicy

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


def policy_for(name: str) -> GamePolicy:
    """The policy of the game registered as ``name``; the default policy for a name that
    is not registered (the server's behaviour for a game it has no entry for)."""
    if name not in GAME_MODULES:
        return DEFAULT_POLICY
    return find_game(name).policy
