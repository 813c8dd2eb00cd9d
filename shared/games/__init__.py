"""Pure rules of every game kibitz serves, behind one interface (see ``base``)."""

from kibitz.shared.games.base import (
    Game,
    GameError,
    GameOverError,
    IllegalMoveError,
    InvalidMoveError,
    InvalidOptionError,
    InvalidPositionError,
    MoveFacts,
    OptionSpec,
    Outcome,
)
from kibitz.shared.games.registry import GAME_MODULES, UnknownGameError, available_games, find_game

__all__ = [
    "GAME_MODULES",
    "Game",
    "GameError",
    "GameOverError",
    "IllegalMoveError",
    "InvalidMoveError",
    "InvalidOptionError",
    "InvalidPositionError",
    "MoveFacts",
    "OptionSpec",
    "Outcome",
    "UnknownGameError",
    "available_games",
    "find_game",
]
