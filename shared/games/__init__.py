"""Pure rules of every game kibitz serves, behind one interface (see ``base``)."""

from kibitz.shared.games.base import (
    TERMINATIONS,
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
    Termination,
)
from kibitz.shared.games.policy import DEFAULT_POLICY, AnalysisScale, GamePolicy, Notation
from kibitz.shared.games.registry import (
    GAME_MODULES,
    UnknownGameError,
    available_games,
    find_game,
    policy_for,
)

__all__ = [
    "DEFAULT_POLICY",
    "GAME_MODULES",
    "AnalysisScale",
    "Game",
    "GameError",
    "GamePolicy",
    "GameOverError",
    "IllegalMoveError",
    "InvalidMoveError",
    "InvalidOptionError",
    "InvalidPositionError",
    "MoveFacts",
    "Notation",
    "OptionSpec",
    "Outcome",
    "TERMINATIONS",
    "Termination",
    "UnknownGameError",
    "available_games",
    "find_game",
    "policy_for",
]
