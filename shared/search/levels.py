"""Bot levels 1..8: a search budget per game plus, on low levels, controlled randomness.

Weak levels search shallowly and then pick a root move by a softmax over the exact root
scores (temperature in units of the game's "pawn"), so they mostly play sensible moves and
sometimes human-looking mistakes. Levels 7 and 8 always play the best move found; level 8
searches on the clock (and solves small games outright).

Each game states its own depths, level-8 time and temperatures on its policy
(``GamePolicy.level_depths``, ``level8_time_ms``, ``level_temperatures`` in
``shared/games/policy.py``); a name that is not a registered game gets the defaults.
"""

from __future__ import annotations

from kibitz.shared.games.registry import policy_for
from kibitz.shared.protocol.jobs import Budget

MIN_LEVEL, MAX_LEVEL = 1, 8

#: Time cap in ms of levels 1-7 (a safety net for their depths); level 8's time is the
#: game's ``level8_time_ms``.
_TIMES = (500, 600, 700, 1000, 1000, 1200, 1500)


def _check(level: int) -> None:
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise ValueError(f"level must be {MIN_LEVEL}-{MAX_LEVEL}, not {level!r}")


def budget_for_level(game: str, level: int) -> Budget:
    """The search budget of bot level ``level`` (1 weakest .. 8 strongest) in ``game``."""
    _check(level)
    policy = policy_for(game)
    time_ms = policy.level8_time_ms if level == MAX_LEVEL else _TIMES[level - 1]
    return Budget(depth=policy.level_depths[level - 1], time_ms=time_ms, nodes=None)


def temperature_for_level(level: int, game: str | None = None) -> float:
    """Softmax temperature (in evaluation units) of ``level`` in ``game``; 0 means the
    deterministic best move."""
    _check(level)
    return policy_for(game or "").level_temperatures[level - 1]
