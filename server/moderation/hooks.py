"""Where the end of a rated game records an abandonment (server/moderation/rules.py,
Abandonment penalties): the decisions on a finished room, and the two hooks that call
them where the end is known.

- :func:`abandoned_by_abort`: the session's ``abort`` (server/gateway/session.py) of a
  rated game whose human opponent had joined: the aborting account, kind "abort"
  (aborting one's own rated game against the AI costs nothing: nobody waited);
- :func:`abandoned_by_claim`: the session's ``claim`` that ended a rated game because the
  opponent had left (a win or a draw claimed): the gone account, kind "timeout";
- :func:`timeout_hook`: the deadline sweeper (server/loops/deadlines.py) after a rated
  room ended on its clock: the side that did not make its first move in time (connected
  or not), kind "timeout"; or the side whose flag fell, if that player had left (the
  presence's "gone").

A failure to record is logged, never raised: the game's end stands either way.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import sqlalchemy as sa

from kibitz.server.domain import room as rooms
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Room
from kibitz.server.moderation.service import Moderation
from kibitz.shared.bus.errors import BusError
from kibitz.shared.games import find_game

log = logging.getLogger(__name__)


class Rooms(Protocol):
    """What the timeout hook reads of the room service (server/services/rooms.py)."""

    async def get(self, room_id: str) -> Room: ...

    async def presence(self, room: Room, present: int | None = None) -> rooms.Presence: ...


def aborted_by(room: Room, account: Account | None) -> int | None:
    """The account id to charge for aborting ``room``: a rated room, aborted once both
    seats were taken, by a signed-in player holding one of its seats."""
    if account is None or not getattr(room, "rated", False) or room.status != "over":
        return None
    if not room.result or room.result.get("termination") != "abort":
        return None
    if not all(seat.taken for seat in room.seats):
        return None  # nobody had joined: cancelling a waiting room costs nothing
    if any(seat.kind == "ai" for seat in room.seats):
        return None  # against the AI: nobody waited
    held = any(getattr(seat, "account_id", None) == account.id for seat in room.seats)
    return account.id if held else None


def timed_out_seat(room: Room) -> int | None:
    """The seat whose clock ended rated ``room`` (the side to move when it ended: its
    flag fell, or its first move was not made in time), else None."""
    if not getattr(room, "rated", False) or room.status != "over" or not room.result:
        return None
    if room.result.get("termination") not in ("time", "abort"):
        return None
    to_move: int = find_game(room.game).to_move(rooms.replay(room))
    return to_move


def claimed_against(room: Room, token: str) -> int | None:
    """The account id to charge for leaving rated ``room``, ended by a claim (a win or a
    draw) of the seat holding ``token``: the other seat's account."""
    if not getattr(room, "rated", False) or room.status != "over" or not room.result:
        return None
    if room.result.get("termination") != "claim":
        return None
    try:
        claimer = rooms.seat_for_token(room, token)
    except rooms.RoomError:
        return None
    gone: int | None = getattr(room.seats[1 - claimer], "account_id", None)
    return gone


def first_move_missed(room: Room) -> bool:
    """Whether ``room`` ended because its side to move did not make its first move."""
    return bool(room.result and room.result.get("termination") == "abort")


async def abandoned_by_claim(moderation: Moderation, room: Room, token: str) -> None:
    account_id = claimed_against(room, token)
    if account_id is not None:
        await _record(moderation, account_id, room.id, "timeout")


async def abandoned_by_abort(moderation: Moderation, account: Account | None, room: Room) -> None:
    account_id = aborted_by(room, account)
    if account_id is not None:
        await _record(moderation, account_id, room.id, "abort")


def timeout_hook(service: Rooms, moderation: Moderation) -> Callable[[str], Awaitable[None]]:
    """What the deadline sweeper calls with each room it ended on time."""

    async def on_time_out(room_id: str) -> None:
        room = await service.get(room_id)
        seat = timed_out_seat(room)
        if seat is None:
            return
        account_id = getattr(room.seats[seat], "account_id", None)
        if account_id is None:
            return
        if not first_move_missed(room):  # a flag fell: charged only if that player had left
            presence = await service.presence(room)
            if presence.gone_ms[seat] is None and presence.connected[seat]:
                return
        await _record(moderation, account_id, room.id, "timeout")

    return on_time_out


async def _record(moderation: Moderation, account_id: int, game_id: str, kind: str) -> None:
    try:
        if await moderation.record_abandonment(account_id, game_id, kind):
            log.info("account %d abandoned rated game %s (%s)", account_id, game_id, kind)
    except (sa.exc.SQLAlchemyError, BusError, OSError) as exc:
        log.warning("could not record an abandonment of %s: %s", game_id, type(exc).__name__)
