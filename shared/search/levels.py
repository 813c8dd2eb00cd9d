"""Bot levels 1..8: a search budget per game plus, on low levels, controlled randomness.

Weak levels search shallowly and then pick a root move by a softmax over the exact root
scores (temperature in units of the game's "pawn"), so they mostly play sensible moves and
sometimes human-looking mistakes. Levels 7 and 8 always play the best move found; level 8
searches on the clock (and solves small games outright).
"""

from __future__ import annotations

from kibitz.shared.protocol import Budget

MIN_LEVEL, MAX_LEVEL = 1, 8

#: Games whose whole tree the searcher can solve in well under a second.
SMALL_GAMES = frozenset({"tictactoe", "matches", "kono"})

#: Depth per level (index 0 = level 1); level 8 is time-bound, so None. Small games and
#: Othello: level 2 searches 2 plies (at 1, like level 1, the self-play ladder found them
#: equal: tic-tac-toe 10.5 / 20, Othello 4.5 / 10).
_DEPTHS: dict[str, tuple[int | None, ...]] = {
    "small": (1, 2, 2, 3, 3, 4, 6, None),
    "othello": (1, 2, 2, 3, 4, 5, 6, None),
    "oware": (1, 2, 3, 4, 5, 6, 8, None),
    "draughts": (1, 1, 2, 3, 4, 5, 6, None),
    "chess": (1, 2, 2, 2, 3, 4, 5, None),
}
#: Time cap per level in ms (a safety net for the depth-bound levels; the budget of level 8).
_TIMES = (500, 600, 700, 1000, 1000, 1200, 1500, 2000)
_LEVEL8_TIME = {"chess": 2500, "othello": 2000, "draughts": 2000, "oware": 1500}
#: Softmax temperature per level, in evaluation units (0 = always the best move).
_TEMPERATURES = (3.0, 1.5, 0.8, 0.4, 0.2, 0.08, 0.0, 0.0)
#: Per-game temperatures where calibration (``kibitz calibrate``) retuned them. Chess, third
#: schedule (with its depths above): the first put 400 Elo or more between adjacent levels
#: 1-6; the second (depths 1, 2, 2, 3, 3, 3, 4; temperatures 0.7, 0.45, 0.3, 0.2, 0.13, 0.08)
#: measured levels 5 and 6 equal and level 1 600 below level 2. Measured strength per level:
#: ``strength.py``; the runs: docs/search.md (*Calibration*).
_GAME_TEMPERATURES: dict[str, tuple[float, ...]] = {
    "chess": (0.7, 0.7, 0.45, 0.3, 0.2, 0.08, 0.0, 0.0),
    # Othello: levels 1 and 2 (both depth 1) played alike (4.5 / 10); level 2 now searches
    # 2 plies and level 3 keeps depth 2 with less randomness.
    "othello": (3.0, 1.5, 0.5, 0.4, 0.2, 0.08, 0.0, 0.0),
}


def _check(level: int) -> None:
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise ValueError(f"level must be {MIN_LEVEL}-{MAX_LEVEL}, not {level!r}")


def budget_for_level(game: str, level: int) -> Budget:
    """The search budget of bot level ``level`` (1 weakest .. 8 strongest) in ``game``."""
    _check(level)
    kind = "small" if game in SMALL_GAMES else game
    depth = _DEPTHS.get(kind, _DEPTHS["draughts"])[level - 1]
    time_ms = _TIMES[level - 1]
    if level == MAX_LEVEL:
        time_ms = _LEVEL8_TIME.get(game, 2000)
    return Budget(depth=depth, time_ms=time_ms, nodes=None)


def temperature_for_level(level: int, game: str | None = None) -> float:
    """Softmax temperature (in evaluation units) of ``level`` in ``game``; 0 means the
    deterministic best move."""
    _check(level)
    return _GAME_TEMPERATURES.get(game or "", _TEMPERATURES)[level - 1]
