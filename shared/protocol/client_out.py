"""Server to client: every message the server sends to a client, one frozen class each.

Each class is the message's schema and writes itself as the dict the codecs send
(:meth:`to_dict`): the key order of that dict is part of the wire bytes, so it is fixed
here and checked by tests/shared/protocol/test_client_out.py against the literal the
server has always sent. An optional field the message leaves out when absent (``rid``
of most replies) is written only when set.

The ``state`` snapshot (:class:`State`, with its :class:`SeatView`) is the hot path:
it is built once per room change and its dict is what the commit stores and publishes,
so the fan-out reads a snapshot's version from its head (see
:func:`kibitz.shared.protocol.node.state_version`) and appends each viewer's ``you``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kibitz.shared.protocol.codec import MAX_FRAME_BYTES, PROTOCOL_VERSION

Rid = str | int | None
ChatChannel = Literal["players", "spectators"]


def _with_rid(out: dict[str, Any], rid: Rid) -> dict[str, Any]:
    if rid is not None:
        out["rid"] = rid
    return out


@dataclass(frozen=True, slots=True)
class Welcome:
    """The first message on every connection: the protocol version, the node's opaque
    id and the largest frame accepted."""

    node: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "welcome",
            "protocol": PROTOCOL_VERSION,
            "node": self.node,
            "max_frame": MAX_FRAME_BYTES,
        }


@dataclass(frozen=True, slots=True)
class Error:
    """A refused request (or a failure): a stable ``code`` and a text for people.
    ``details``: fields some codes add after ``message`` (``rate/ai_games``: ``rooms``);
    they never replace ``type``, ``code``, ``message`` or ``rid``."""

    code: str
    message: str
    rid: Rid = None
    details: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "error", "code": self.code, "message": self.message}
        for name, value in (self.details or {}).items():
            if name not in ERROR_FIELDS:
                out[name] = value
        return _with_rid(out, self.rid)


#: The fields every error has, which ``details`` cannot replace.
ERROR_FIELDS = frozenset({"type", "code", "message", "rid"})


@dataclass(frozen=True, slots=True)
class Left:
    """The reply to ``leave``: this connection no longer follows ``room``."""

    room: str
    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        return _with_rid({"type": "left", "room": self.room}, self.rid)


@dataclass(frozen=True, slots=True)
class Seat:
    """Sent only to the player who took the seat: the token is their credential.
    ``seek``: the seek whose acceptance seated its creator (sent to the creator only)."""

    room: str
    seat: int
    token: str
    rid: Rid = None
    seek: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = _with_rid(
            {"type": "seat", "room": self.room, "seat": self.seat, "token": self.token}, self.rid
        )
        if self.seek is not None:
            out["seek"] = self.seek
        return out


@dataclass(frozen=True, slots=True)
class Thinking:
    """An AI's progress on its move (one per completed search depth, throttled).

    ``score`` is from the thinking side's point of view, in the game's units (pawns in
    chess, discs in Othello...); ``version`` is the room version it is thinking about.
    """

    room: str
    version: int
    seat: int
    depth: int
    score: float
    pv: list[str]
    nodes: int
    time_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "thinking",
            "room": self.room,
            "version": self.version,
            "seat": self.seat,
            "depth": self.depth,
            "score": self.score,
            "pv": self.pv,
            "nodes": self.nodes,
            "time_ms": self.time_ms,
        }


@dataclass(frozen=True, slots=True)
class Pong:
    """The reply to ``ping`` (``rid`` always written, null when absent). ``at``: the
    server's clock (epoch ms) when it answered, for clients that estimate their offset
    to the server's clock (the ``at`` of ``state.clock``)."""

    rid: Rid = None
    at: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "pong", "rid": self.rid}
        if self.at is not None:
            out["at"] = self.at
        return out


@dataclass(frozen=True, slots=True)
class SeatRating:
    """Who holds a seat on the rating scale: the account's name (None on an AI seat), its
    rating in the room's game and speed when the seat was taken (an AI level's fixed
    anchor in a rated game), whether that rating is provisional, and whether the player
    is a bot (a bot account, or the AI). A seat shows these four only when it has them:
    a signed-in player's seat, or the AI's seat of a rated game (never a guest's)."""

    account: str | None
    rating: int | None
    provisional: bool
    bot: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "account": self.account,
            "rating": self.rating,
            "provisional": self.provisional,
            "bot": self.bot,
        }


@dataclass(frozen=True, slots=True)
class SeatView:
    """One seat as the ``state`` snapshot shows it (no token). ``scale``: the seat's
    :class:`SeatRating` fields, written between ``engine`` and ``connected`` when set."""

    seat: int
    kind: str
    level: int | None
    name: str | None
    player: str | None
    taken: bool
    engine: str | None
    connected: bool
    gone_ms: int | None
    scale: SeatRating | None = None

    def to_dict(self) -> dict[str, Any]:
        return SeatView.message(**_fields_of(self))

    @staticmethod
    def message(
        *,
        seat: int,
        kind: str,
        level: int | None,
        name: str | None,
        player: str | None,
        taken: bool,
        engine: str | None,
        connected: bool,
        gone_ms: int | None,
        scale: SeatRating | None = None,
    ) -> dict[str, Any]:
        """The seat's dict without building the object (the hot path's encoder).
        ``connected`` and ``gone_ms`` stay last: the presence script splices them in."""
        out: dict[str, Any] = {
            "seat": seat,
            "kind": kind,
            "level": level,
            "name": name,
            "player": player,
            "taken": taken,
            "engine": engine,
        }
        if scale is not None:
            out.update(scale.to_dict())
        out["connected"] = connected
        out["gone_ms"] = gone_ms
        return out


@dataclass(frozen=True, slots=True)
class State:
    """The public ``state`` snapshot of a room (docs/protocol.md, ``state``).

    ``event`` (what changed) is set by the change that made the snapshot, ``you`` (the
    viewer's seat) by the fan-out for each viewer: both come after the fields below, in
    that order, and are written only when given; ``rated`` (true in a rated room, and
    only there) comes just before them. The values the game decides
    (``position``, ``view``, ``result``, ``clock``, ``offers`` and the move entries) are
    JSON values already.

    The snapshot is built once per room change: :meth:`message` writes its dict from
    the fields without building the object (a frozen dataclass of 21 fields costs
    several microseconds to build); :meth:`to_dict` is the same dict from an object."""

    room: str
    version: int
    game: str
    options: dict[str, Any]
    status: str
    players: list[str]
    seats: list[SeatView]
    position: str
    to_move: int | None
    legal_moves: list[str]
    moves: list[dict[str, Any]]
    last_move: dict[str, Any] | None
    result: dict[str, Any] | None
    view: Any
    clock: dict[str, Any] | None
    offers: dict[str, Any]
    next_room: str | None
    previous_room: str | None
    spectators: int
    claim_after_ms: int | None
    event: dict[str, Any] | None = None
    rated: bool = False

    def to_dict(self) -> dict[str, Any]:
        fields = _fields_of(self)
        fields["seats"] = [seat.to_dict() for seat in self.seats]
        return State.message(**fields)

    @staticmethod
    def message(
        *,
        room: str,
        version: int,
        game: str,
        options: dict[str, Any],
        status: str,
        players: list[str],
        seats: list[dict[str, Any]],
        position: str,
        to_move: int | None,
        legal_moves: list[str],
        moves: list[dict[str, Any]],
        last_move: dict[str, Any] | None,
        result: dict[str, Any] | None,
        view: Any,
        clock: dict[str, Any] | None,
        offers: dict[str, Any],
        next_room: str | None,
        previous_room: str | None,
        spectators: int,
        claim_after_ms: int | None,
        event: dict[str, Any] | None = None,
        rated: bool = False,
    ) -> dict[str, Any]:
        """The snapshot's dict, ``seats`` given as :meth:`SeatView.message` dicts;
        ``"rated": true`` after ``claim_after_ms`` in a rated room only."""
        out = {
            "type": "state",
            "room": room,
            "version": version,
            "game": game,
            "options": options,
            "status": status,
            "players": players,
            "seats": seats,
            "position": position,
            "to_move": to_move,
            "legal_moves": legal_moves,
            "moves": moves,
            "last_move": last_move,
            "result": result,
            "view": view,
            "clock": clock,
            "offers": offers,
            "next_room": next_room,
            "previous_room": previous_room,
            "spectators": spectators,
            "claim_after_ms": claim_after_ms,
        }
        if rated:
            out["rated"] = True
        if event is not None:
            out["event"] = event
        return out


def _fields_of(message: Any) -> dict[str, Any]:
    """A message object's fields by name (not copied deeply, unlike ``asdict``)."""
    return {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}


@dataclass(frozen=True, slots=True)
class ChatLines:
    """Chat lines of one channel of a room: live (one line, published by the chat
    script in these bytes: see kibitz.server.services.chat) or, after following a room,
    the ``replay`` of its last lines."""

    room: str
    channel: ChatChannel
    messages: list[dict[str, Any]]
    replay: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "chat",
            "room": self.room,
            "channel": self.channel,
            "messages": self.messages,
        }
        if self.replay:
            out["replay"] = True
        return out


@dataclass(frozen=True, slots=True)
class LobbyList:
    """The lobby: open seeks and live games; the reply to ``lobby`` (with its ``rid``)
    and the push to its subscribers as it changes."""

    seeks: list[dict[str, Any]]
    games: list[dict[str, Any]]
    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        return _with_rid({"type": "lobby", "seeks": self.seeks, "games": self.games}, self.rid)


@dataclass(frozen=True, slots=True)
class LobbyLeft:
    """The reply to ``lobby`` with ``subscribe: false``."""

    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        return _with_rid({"type": "lobby", "subscribed": False}, self.rid)


@dataclass(frozen=True, slots=True)
class SeekPosted:
    """The reply to ``seek``: the seek as the lobby shows it."""

    seek: dict[str, Any]
    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        return _with_rid({"type": "seek", "seek": self.seek}, self.rid)


@dataclass(frozen=True, slots=True)
class SeekWithdrawn:
    """The reply to ``unseek``: the seek's id."""

    seek: str
    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        return _with_rid({"type": "unseek", "seek": self.seek}, self.rid)


@dataclass(frozen=True, slots=True)
class PoolJoined:
    """The reply to ``pool_join``: the pool waited in, the rating its pairing reads, and
    how many wait there now (this player included)."""

    game: str
    clock: dict[str, int] | None
    rated: bool
    rating: int
    waiting: int
    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "pool_joined", "game": self.game, "clock": self.clock}
        out |= {"rated": self.rated, "rating": self.rating, "waiting": self.waiting}
        return _with_rid(out, self.rid)


@dataclass(frozen=True, slots=True)
class PoolLeft:
    """The reply to ``pool_leave``."""

    rid: Rid = None

    def to_dict(self) -> dict[str, Any]:
        return _with_rid({"type": "pool_left"}, self.rid)


ServerMessage = (
    Welcome | Error | Left | Seat | Thinking | Pong | State | ChatLines | LobbyList
    | LobbyLeft | SeekPosted | SeekWithdrawn | PoolJoined | PoolLeft
)  # fmt: skip
