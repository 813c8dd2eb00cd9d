"""Which rating a game counts for: its speed, from the game and its time control (pure).

A rule of the domain: the exports (export.py) name a rated game's speed, rooms, seeks and
the pool pick the rating a seat shows, and server/ratings/ applies it to the database.

A game whose policy says ``chess_speeds`` (chess and draughts) has the chess sites'
speeds, from the estimated game duration ``initial + 40 x increment`` (seconds): under 180
bullet, under 480 blitz, under 1500 rapid, else classical; a clock of days per move, or
none, is correspondence. The other games have two: "timed" (any Fischer clock) and
"correspondence" (days per move, or untimed). ``SPEEDS[game]`` lists a game's speeds, fastest first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kibitz.shared.games.registry import GAME_MODULES, find_game

BULLET, BLITZ, RAPID, CLASSICAL = "bullet", "blitz", "rapid", "classical"
TIMED, CORRESPONDENCE = "timed", "correspondence"

#: The games rated at the chess sites' speeds (their policy's ``chess_speeds``).
CHESS_LIKE = frozenset(name for name in GAME_MODULES if find_game(name).policy.chess_speeds)
#: Moves an estimated game lasts: the increment counts this many times.
ESTIMATED_MOVES = 40
#: (speed, the estimated duration in seconds it is under), fastest first.
LIMITS_S: tuple[tuple[str, float], ...] = ((BULLET, 180), (BLITZ, 480), (RAPID, 1500))

#: Every game's speeds, fastest first.
SPEEDS: dict[str, tuple[str, ...]] = {
    game: (BULLET, BLITZ, RAPID, CLASSICAL, CORRESPONDENCE)
    if game in CHESS_LIKE
    else (TIMED, CORRESPONDENCE)
    for game in GAME_MODULES
}


class SpeedError(ValueError):
    """A game we do not rate, or a clock that is not a time control."""


def estimated_s(clock: Mapping[str, Any]) -> float:
    """A Fischer clock's estimated game duration in seconds."""
    try:
        initial = float(clock["initial_ms"]) / 1000
        increment = float(clock.get("increment_ms", 0)) / 1000
    except (KeyError, TypeError, ValueError):
        raise SpeedError(f"not a time control: {clock!r}") from None
    return initial + ESTIMATED_MOVES * increment


def speed_of(game: str, clock: Mapping[str, Any] | None) -> str:
    """The speed a game of ``game`` with ``clock`` (None: untimed, ``{"initial_ms",
    "increment_ms"}`` or ``{"days_per_move"}``) is rated at; SpeedError for a game that
    is not registered or a clock that is neither."""
    if game not in SPEEDS:
        raise SpeedError(f"no ratings for the game {game!r}")
    if clock is None or "days_per_move" in clock:
        return CORRESPONDENCE
    duration = estimated_s(clock)
    if game not in CHESS_LIKE:
        return TIMED
    return next((speed for speed, limit in LIMITS_S if duration < limit), CLASSICAL)
