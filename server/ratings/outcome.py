"""A rated game's effect on its players' ratings (pure): who met whom, who scored what,
and the changes the record shows.

A rated record (server/domain/records.py) has ``"rated": true``, its ``time_control``
(the speed: server/domain/speeds.py) and per seat either an account (``"account"``, the
username) or the AI (``"kind": "ai"`` with its ``"level"``). Each seat is one of:

- an account whose rating the store read (``Player``, grown to the game's end), which the
  game moves;
- a fixed opponent (``Fixed``): the AI, at its level's anchor rating with ``ANCHOR_RD``
  (server/domain/anchors.py), or an account that no longer exists, at the rating the
  record says it had with the largest RD (nothing else is known of it). Fixed seats never
  change.

The game is one rating period for each player (glicko2.update with one result). A seat's
change is ``{"before", "after", "change", "rd"}`` in whole points (``change`` is
``after - before`` of the rounded values, so the numbers shown add up); null for a fixed
seat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kibitz.server.domain import glicko2
from kibitz.server.domain.anchors import ANCHOR_RD, level_rating
from kibitz.server.domain.glicko2 import Rating
from kibitz.server.domain.speeds import speed_of

SEATS = 2


class NotRated(ValueError):
    """A record that cannot be rated (not two seats, no result, unknown game or level)."""


@dataclass(frozen=True, slots=True)
class Player:
    """An account's seat: its id, its rating at the game's end before the game, and when
    its rating was last updated (None: never)."""

    account_id: int
    rating: Rating
    since_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Fixed:
    """A seat whose rating the game does not move (the AI, or a vanished account)."""

    rating: Rating


Seat = Player | Fixed


def is_rated(record: Mapping[str, Any]) -> bool:
    return record.get("rated") is True


def speed_of_record(record: Mapping[str, Any]) -> str:
    """The speed the record is rated at; NotRated for a game without ratings."""
    try:
        return speed_of(str(record["game"]), record.get("time_control"))
    except (KeyError, ValueError) as exc:
        raise NotRated(str(exc)) from None


def seats_of(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    players = record.get("players")
    if not isinstance(players, list) or len(players) != SEATS:
        raise NotRated("a rated game has two seats")
    if not all(isinstance(seat, Mapping) for seat in players):
        raise NotRated("a seat is not an object")
    return players


def account_name(seat: Mapping[str, Any]) -> str | None:
    """The username of an account's seat, or None (the AI, a guest)."""
    if seat.get("kind") == "ai":
        return None
    name = seat.get("account")
    return name if isinstance(name, str) and name else None


def ai_rating(game: str, seat: Mapping[str, Any]) -> Rating:
    """The AI seat's fixed rating: its level's anchor."""
    try:
        rating = level_rating(game, int(seat.get("level") or 0))
    except (TypeError, ValueError) as exc:
        raise NotRated(str(exc)) from None
    return Rating(float(rating), ANCHOR_RD, glicko2.DEFAULT.volatility)


def vanished_rating(seat: Mapping[str, Any]) -> Rating:
    """A vanished account's seat: the rating it started with (the record's), RD 350."""
    value = seat.get("rating")
    rating = float(value) if isinstance(value, int | float) else glicko2.CENTRE
    return Rating(rating, glicko2.MAX_RD, glicko2.DEFAULT.volatility)


def scores(record: Mapping[str, Any]) -> tuple[float, float]:
    """Each seat's score: 1 for the winner, 0 for the loser, 0.5 each for a draw."""
    result = record.get("result")
    if not isinstance(result, Mapping) or record.get("status") != "over":
        raise NotRated("the game has no result")
    winner = result.get("winner")
    if winner is None:
        return 0.5, 0.5
    if winner not in (0, 1):
        raise NotRated(f"not a winner: {winner!r}")
    return (1.0, 0.0) if winner == 0 else (0.0, 1.0)


def new_ratings(seats: Sequence[Seat], points: Sequence[float]) -> list[Rating | None]:
    """Each account's rating after the game (None for a fixed seat)."""
    out: list[Rating | None] = []
    for index, seat in enumerate(seats):
        if isinstance(seat, Fixed):
            out.append(None)
            continue
        opponent = seats[1 - index].rating
        out.append(glicko2.update(seat.rating, [(opponent, points[index])]))
    return out


def change_of(before: Rating, after: Rating) -> dict[str, int]:
    """A seat's change as the record shows it."""
    old, new = round(before.rating), round(after.rating)
    return {"before": old, "after": new, "change": new - old, "rd": round(after.rd)}


def changes_of(
    seats: Sequence[Seat], after: Sequence[Rating | None]
) -> list[dict[str, int] | None]:
    return [
        change_of(seat.rating, new) if isinstance(seat, Player) and new is not None else None
        for seat, new in zip(seats, after, strict=True)
    ]
