"""Who is looking for a game, and what stands between two such players.

Posting or accepting a seek and joining the quick pairing pool (server/services/seeks.py,
server/services/pool.py) share these decisions:

- a rated seek or pool needs the player signed in (``auth/required``), and so does
  accepting a seek that is rated or has a rating range;
- a player who abandoned games waits before seeking again (``seek/penalty``, with
  ``wait_ms``; the rule is the moderation service's, server/moderation/);
- two accounts of which one blocks the other are never brought together (``seek/blocked``);
- a player banned since they posted a seek or joined the pool is not given the game: the
  seek is withdrawn (its acceptor told ``auth/banned``), the pool entry taken out;
- an acceptor's rating must lie in the seek's range (``seek/out_of_range``).

A seeker's rating is the seat rating of the room they would play in (the room service's
:meth:`~kibitz.server.services.rooms.RoomService.holder`: the game and the speed of the
time control); a guest has none, and counts as GUEST_RATING where a rating is needed
(the casual pools).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.domain import room as rooms
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Event, Room, SeatAccount
from kibitz.server.moderation.rules import penalty_refusal
from kibitz.shared.protocol.client_in import player_id
from kibitz.shared.protocol.client_out import Seat
from kibitz.shared.protocol.codec import Codec, ProtocolError

#: The rating assumed for a guest, and for an account whose rating cannot be read, where
#: one is needed (a casual pool): Glicko-2's starting rating.
GUEST_RATING = 1500


class LobbySocket(Protocol):
    @property
    def closed(self) -> bool: ...


class LobbyConnection(Protocol):
    """What seeks and the pool need of a client's connection
    (server/fanout/connection.py's ``Connection``): its codec, whether it is going, and a
    way to send it a message."""

    @property
    def closing(self) -> bool: ...
    @property
    def codec(self) -> Codec: ...
    @property
    def ws(self) -> LobbySocket: ...
    def send(self, message: dict[str, Any]) -> None: ...
    def send_frame(self, frame: bytes) -> None: ...


class SeekSession(Protocol):
    """What seeks and the pool need of a connection's session
    (server/gateway/session.py's ``Session``): who it is, and a way to follow a room."""

    id: str
    address: str
    account: Account | None

    @property
    def conn(self) -> LobbyConnection: ...

    async def follow_room(self, room_id: str, seat: int | None) -> None: ...

    async def send_seat(self, seat: Seat) -> None:
        """Send the ``seat`` message (a signed-in player's token is also kept for the
        HTTP API: shared/bus/seat_keys.py)."""


class Gate(Protocol):
    """What the moderation service (server/moderation/service.py) tells seeks and the pool."""

    async def blocked(self, a: int | None, b: int | None) -> bool: ...
    async def seek_wait_ms(self, account_id: int | None) -> int: ...
    async def banned(self, account_id: int | None, address: str | None) -> str | None: ...


class Holders(Protocol):
    """Where a seeker's seat (account and rating) comes from: the room service."""

    async def holder(
        self, account: Account | None, game: str, control: dict[str, Any] | None, rated: bool
    ) -> SeatAccount | None: ...


@dataclass(frozen=True, slots=True)
class Seeker:
    """A player seeking a game: their public player id (the account's, or from a guest's
    key) and, signed in, the seat they would take (``holder``: account and rating)."""

    player: str | None
    holder: SeatAccount | None

    @property
    def account_id(self) -> int | None:
        return None if self.holder is None else self.holder.account_id

    @property
    def rating(self) -> int:
        """The rating pairing reads: the account's, else GUEST_RATING."""
        if self.holder is None or self.holder.rating is None:
            return GUEST_RATING
        return self.holder.rating

    def facts(self) -> dict[str, Any]:
        """What a seek or a pool entry keeps of the seeker (``account_id`` and ``bot`` are
        never shown; see :func:`shown`)."""
        holder = self.holder
        if holder is None:
            return {"player": self.player}
        return {
            "player": self.player,
            "account": holder.username,
            "account_id": holder.account_id,
            "bot": holder.bot,
            "rating": holder.rating,
            "provisional": holder.provisional,
        }


def shown(facts: dict[str, Any]) -> dict[str, Any]:
    """The seeker's fields the lobby shows: ``account``, ``rating`` and ``provisional``,
    only for a signed-in seeker (a guest's seek shows none of them)."""
    if facts.get("account") is None:
        return {}
    return {name: facts.get(name) for name in ("account", "rating", "provisional")}


def holder_of(facts: dict[str, Any]) -> Account | None:
    """The account a stored seek or pool entry was made by (None: a guest), enough to read
    its seat again when the room is made."""
    account_id, username = facts.get("account_id"), facts.get("account")
    if not isinstance(account_id, int) or not isinstance(username, str):
        return None
    return Account(account_id, username, str(facts.get("player")), bot=bool(facts.get("bot")))


def guest_player(player_key: str | None) -> str | None:
    return player_id(player_key) if player_key else None


async def seeker(
    holders: Holders,
    account: Account | None,
    player_key: str | None,
    game: str,
    clock: dict[str, Any] | None,
    rated: bool,
) -> Seeker:
    """The seeker ``account`` (or a guest with ``player_key``) in ``game`` at ``clock``;
    ``rated``: their rating must be read (else ``server/unavailable``); the rating is read
    for every signed-in seeker. A rated seek or pool needs an account (``auth/required``)."""
    if account is None:
        if rated:
            raise ProtocolError("auth/required", "a rated game needs you signed in")
        return Seeker(guest_player(player_key), None)
    holder = await holders.holder(account, game, clock, rated)
    return Seeker(account.player_id, holder)


def unavailable() -> ProtocolError:
    """The database could not say whether a rule holds: refused, to be tried again."""
    return ProtocolError("server/unavailable", "the players' database cannot be read now; retry")


async def check_penalty(gate: Gate | None, account: Account | None) -> None:
    """``seek/penalty`` (with ``wait_ms``) while ``account`` must wait after abandoning."""
    if gate is None or account is None:
        return
    try:
        wait_ms = await gate.seek_wait_ms(account.id)
    except (SQLAlchemyError, OSError):
        raise unavailable() from None
    if wait_ms > 0:
        raise ProtocolError("seek/penalty", penalty_refusal(wait_ms), {"wait_ms": wait_ms})


async def check_not_blocked(gate: Gate | None, a: int | None, b: int | None) -> None:
    """``seek/blocked`` when one of the two accounts blocks the other."""
    if gate is None:
        return
    try:
        blocked = await gate.blocked(a, b)
    except (SQLAlchemyError, OSError):
        raise unavailable() from None
    if blocked:
        raise ProtocolError("seek/blocked", "you cannot play this player (a block between you)")


async def banned_since(gate: Gate | None, facts: dict[str, Any]) -> bool:
    """Whether the player who posted a seek or joined the pool (its stored ``facts``:
    ``account_id``, ``address``) has been banned since: their seek may not be accepted,
    nor their entry paired."""
    if gate is None:
        return False
    account_id, address = facts.get("account_id"), facts.get("address")
    account_id = account_id if isinstance(account_id, int) else None
    address = address if isinstance(address, str) else None
    try:
        return await gate.banned(account_id, address) is not None
    except (SQLAlchemyError, OSError):
        raise unavailable() from None


def in_range(rating: int, rating_range: Any) -> bool:
    """Whether ``rating`` lies in ``rating_range`` ([min, max]; None or absent: any)."""
    if not isinstance(rating_range, list | tuple) or len(rating_range) != 2:
        return True
    return int(rating_range[0]) <= rating <= int(rating_range[1])


def check_range(acceptor: Seeker, rating_range: Any) -> None:
    """An acceptor of a seek with a rating range: signed in (``auth/required``) and in
    the range (``seek/out_of_range``)."""
    if rating_range is None:
        return
    if acceptor.holder is None:
        raise ProtocolError("auth/required", "this seek has a rating range: sign in to accept it")
    lo, hi = rating_range
    if not in_range(acceptor.rating, rating_range):
        raise ProtocolError(
            "seek/out_of_range",
            f"this seek is for ratings {lo}-{hi}; yours is {acceptor.rating}",
        )


def build_room(
    seek: dict[str, Any],
    room_id: str,
    creator_token: str,
    acceptor_token: str,
    acceptor_name: str | None,
    acceptor_player: str | None,
    now: int,
    creator_seat: int,
    first_move_ms: int,
    *,
    rated: bool = False,
    creator: SeatAccount | None = None,
    acceptor: SeatAccount | None = None,
) -> tuple[Room, Event]:
    """The room of an accepted seek (or a pool pairing: its first player as the seek),
    both players seated, at version 0 (event ``created``, by the creator's seat), with the
    seek's game, options and clock; ``rated``, and the seats of signed-in players
    (``creator``, ``acceptor``: account and rating, read just before)."""
    room, _event, seat = rooms.create_room(
        room_id,
        seek["game"],
        seek["options"],
        "human",
        creator_seat,
        seek.get("name"),
        creator_token,
        now,
        owner=seek.get("address"),
        player=seek.get("player"),
        clock=seek.get("clock"),
        first_move_ms=first_move_ms,
        rated=rated,
        holder=creator,
    )
    joined, _joined_event, _ = rooms.join_room(
        room, 1 - seat, acceptor_name, acceptor_token, now, acceptor_player, holder=acceptor
    )
    # One change, not two: the room is born with both seats taken.
    return replace(joined, version=room.version), Event("created", seat)
