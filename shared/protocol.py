"""The wire schema: every message between clients, servers and workers.

This module is the single source of truth for message types; docs/protocol.md documents
it for client authors. Messages are dicts with a ``type`` field, carried as JSON text
frames or, when the client connects with ``?codec=msgpack``, as msgpack binary frames.

Direction names say who sends what:

- ``ClientMessage``: client -> server (parsed here, at the edge, into dataclasses).
- server -> client messages are built by the ``*_message`` helpers below.
- ``Job``: server -> worker (through the ``jobs`` stream); ``JobResult``: worker -> server.

Anything that does not parse raises :class:`ProtocolError` with a stable ``code``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import msgpack

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 64 * 1024
MAX_TEXT = 512  # longest move, room id, token or option string accepted
MAX_POSITION = 4096  # longest position text (with its repetition history) accepted

#: A player key: the secret a client keeps to be the same player across rooms.
PLAYER_KEY = re.compile(r"[A-Za-z0-9_-]{16,128}")

Codec = Literal["json", "msgpack"]
#: Fields of a Redis stream entry, typed loosely to match redis-py's signatures.
StreamFields = dict[Any, Any]


class ProtocolError(ValueError):
    """A message that cannot be accepted, with a stable machine-readable code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- codecs -----------------------------------------------------------------------------


def encode(message: dict[str, Any], codec: Codec) -> str | bytes:
    if codec == "msgpack":
        data: bytes = msgpack.packb(message, use_bin_type=True)
        return data
    return json.dumps(message, separators=(",", ":"))


def encode_bytes(message: dict[str, Any], codec: Codec) -> bytes:
    """``message`` as the payload of one WebSocket frame: msgpack, or JSON as UTF-8 (to be
    sent as a text frame). Bytes, so one encoding can be written to many sockets as is."""
    frame = encode(message, codec)
    return frame.encode() if isinstance(frame, str) else frame


def decode(frame: str | bytes) -> dict[str, Any]:
    """A client frame as a dict: text frames are JSON, binary frames msgpack."""
    size = len(frame.encode() if isinstance(frame, str) else frame)
    if size > MAX_FRAME_BYTES:
        raise ProtocolError("frame/too_large", f"frame of {size} bytes > {MAX_FRAME_BYTES}")
    kind = "JSON" if isinstance(frame, str) else "msgpack"
    try:
        if isinstance(frame, str):
            data = json.loads(frame)
            # What we read must be something we can write back in either codec: this
            # refuses lone surrogates, integers past 64 bits and absurd nesting.
            msgpack.packb(data, use_bin_type=True)
        else:
            data = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # msgpack's ExtraData, FormatError and StackError are ValueErrors too.
        text = str(exc)[:200]
        raise ProtocolError("frame/malformed", f"frame is not valid {kind}: {text}") from None
    if not isinstance(data, dict):
        raise ProtocolError("frame/malformed", "a message must be an object with a 'type'")
    return data


# -- field readers ----------------------------------------------------------------------


def _text(
    data: dict[str, Any], name: str, *, required: bool = True, max_length: int = MAX_TEXT
) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise ProtocolError("message/invalid", f"{data.get('type')!r} needs field {name!r}")
        return None
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise ProtocolError("message/invalid", f"field {name!r} must be a non-empty string")
    return value


def _int(data: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError("message/invalid", f"field {name!r} must be an integer {lo}-{hi}")
    return value


def _rid(data: dict[str, Any]) -> str | int | None:
    rid = data.get("rid")
    if rid is None or (isinstance(rid, int | str) and not isinstance(rid, bool)):
        if isinstance(rid, str) and len(rid) > MAX_TEXT:
            raise ProtocolError("message/invalid", "field 'rid' is too long")
        if isinstance(rid, int) and abs(rid) > 2**53:
            raise ProtocolError("message/invalid", "field 'rid' is too large")
        return rid
    raise ProtocolError("message/invalid", "field 'rid' must be a string or an integer")


# -- client -> server -------------------------------------------------------------------

Opponent = str  # "human" or "ai:LEVEL" with LEVEL 1-8
MAX_LEVEL = 8


@dataclass(frozen=True, slots=True)
class Create:
    """Create a room and take a seat in it."""

    game: str
    options: dict[str, Any] = field(default_factory=dict)
    opponent: Opponent = "human"
    seat: int | None = None  # 0 (moves first), 1, or None for a random seat
    name: str | None = None
    position: str | None = None  # start from this position text instead of the initial one
    player_key: str | None = None  # the client's secret player key (see player_id)
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Join:
    """Take a free seat in a room (the given one, or any)."""

    room: str
    seat: int | None = None
    name: str | None = None
    player_key: str | None = None  # the client's secret player key (see player_id)
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Watch:
    """Follow a room as a spectator."""

    room: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    """Reattach to a room after a reconnection; with a token, as that seat's player."""

    room: str
    token: str | None = None
    since: int | None = None
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class PlayMove:
    """Play a move for the seat that owns ``token``."""

    room: str
    token: str
    move: str
    version: int | None = None  # if given, the move is refused unless the room is there
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Resign:
    room: str
    token: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Leave:
    """Stop receiving a room's updates (the seat, if any, is kept)."""

    room: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Ping:
    rid: str | int | None = None


ClientMessage = Create | Join | Watch | Resume | PlayMove | Resign | Leave | Ping
CLIENT_TYPES = ("create", "join", "watch", "resume", "move", "resign", "leave", "ping")


def player_id(player_key: str) -> str:
    """The public id of the player who holds ``player_key``: 32 hex digits.

    The key is a secret the client keeps (a browser in localStorage); the id is derived
    from it one way, so showing the id to everyone gives nobody the key.
    """
    digest = hashlib.sha256(("kibitz-player:" + player_key).encode()).digest()
    return digest[:16].hex()


def _player_key(data: dict[str, Any]) -> str | None:
    value = data.get("player_key")
    if value is None:
        return None
    if not isinstance(value, str) or not PLAYER_KEY.fullmatch(value):
        raise ProtocolError(
            "message/invalid",
            "field 'player_key' must be 16 to 128 characters of A-Z, a-z, 0-9, '-' and '_'",
        )
    return value


def parse_opponent(value: object) -> Opponent:
    if value is None or value == "human":
        return "human"
    if isinstance(value, str) and value.startswith("ai:"):
        level = value[3:]
        if level.isdigit() and 1 <= int(level) <= MAX_LEVEL:
            return f"ai:{int(level)}"
    raise ProtocolError(
        "message/invalid", f"opponent must be 'human' or 'ai:1' to 'ai:{MAX_LEVEL}', not {value!r}"
    )


def parse_client_message(data: dict[str, Any]) -> ClientMessage:
    """Validate a decoded client frame into its typed message."""
    kind = data.get("type")
    rid = _rid(data)
    if kind == "create":
        options = data.get("options") or {}
        if not isinstance(options, dict) or len(options) > 16:
            raise ProtocolError("message/invalid", "field 'options' must be an object")
        seat = data.get("seat")
        if seat == "random":
            seat = None
        seat = _int({"seat": seat}, "seat", 0, 1)
        return Create(
            game=str(_text(data, "game")),
            options=options,
            opponent=parse_opponent(data.get("opponent")),
            seat=seat,
            name=_text(data, "name", required=False),
            position=_text(data, "position", required=False, max_length=MAX_POSITION),
            player_key=_player_key(data),
            rid=rid,
        )
    if kind == "join":
        return Join(
            room=str(_text(data, "room")),
            seat=_int(data, "seat", 0, 1),
            name=_text(data, "name", required=False),
            player_key=_player_key(data),
            rid=rid,
        )
    if kind == "watch":
        return Watch(room=str(_text(data, "room")), rid=rid)
    if kind == "resume":
        return Resume(
            room=str(_text(data, "room")),
            token=_text(data, "token", required=False),
            since=_int(data, "since", 0, 2**53),
            rid=rid,
        )
    if kind == "move":
        return PlayMove(
            room=str(_text(data, "room")),
            token=str(_text(data, "token")),
            move=str(_text(data, "move")),
            version=_int(data, "version", 0, 2**53),
            rid=rid,
        )
    if kind == "resign":
        return Resign(room=str(_text(data, "room")), token=str(_text(data, "token")), rid=rid)
    if kind == "leave":
        return Leave(room=str(_text(data, "room")), rid=rid)
    if kind == "ping":
        return Ping(rid=rid)
    raise ProtocolError(
        "message/unknown_type",
        f"unknown message type {kind!r}; expected one of {', '.join(CLIENT_TYPES)}",
    )


# -- server -> client -------------------------------------------------------------------


def welcome_message(node: str) -> dict[str, Any]:
    return {
        "type": "welcome",
        "protocol": PROTOCOL_VERSION,
        "node": node,
        "max_frame": MAX_FRAME_BYTES,
    }


def error_message(code: str, message: str, rid: str | int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if rid is not None:
        out["rid"] = rid
    return out


def seat_message(room: str, seat: int, token: str, rid: str | int | None = None) -> dict[str, Any]:
    """Sent only to the player who took the seat: the token is their credential."""
    out: dict[str, Any] = {"type": "seat", "room": room, "seat": seat, "token": token}
    if rid is not None:
        out["rid"] = rid
    return out


def thinking_message(
    room: str,
    version: int,
    seat: int,
    depth: int,
    score: float,
    pv: list[str],
    nodes: int,
    time_ms: int,
) -> dict[str, Any]:
    """An AI's progress on its move (one per completed search depth, throttled).

    ``score`` is from the thinking side's point of view, in the game's units (pawns in
    chess, discs in Othello...); ``version`` is the room version it is thinking about.
    """
    return {
        "type": "thinking",
        "room": room,
        "version": version,
        "seat": seat,
        "depth": depth,
        "score": score,
        "pv": pv,
        "nodes": nodes,
        "time_ms": time_ms,
    }


def pong_message(rid: str | int | None = None) -> dict[str, Any]:
    return {"type": "pong", "rid": rid}


# -- server <-> worker ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Budget:
    """Search limits; any of them may be None (unbounded), not all of them."""

    depth: int | None = None
    time_ms: int | None = None
    nodes: int | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """One AI move to compute, for ``room`` at ``version``.

    ``position`` is the game's start position and ``moves`` the moves played since, so
    the worker rebuilds the exact state, repetition history included. ``owner`` is the
    address that created the room ("" for rooms made before owners were recorded): jobs
    are queued fairly per owner.
    """

    job_id: str
    room: str
    version: int
    game: str
    position: str
    moves: list[str]
    level: int
    budget: Budget
    seed: int = 0
    owner: str = ""

    def to_fields(self) -> StreamFields:
        """Flat string fields for a Redis stream entry."""
        return {"job": json.dumps(asdict(self), separators=(",", ":"))}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> Job:
        try:
            data = json.loads(fields["job"])
            budget = Budget(**data.pop("budget"))
            job = cls(budget=budget, **data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError("job/invalid", f"malformed job entry: {exc}") from None
        if (
            not isinstance(job.position, str)
            or not isinstance(job.version, int)
            or not isinstance(job.moves, list)
            or not isinstance(job.owner, str)
        ):
            raise ProtocolError("job/invalid", "malformed job entry: bad field types")
        return job


@dataclass(frozen=True, slots=True)
class JobResult:
    """The move a worker found for a job (or an error text when it could not)."""

    job_id: str
    room: str
    version: int
    move: str | None
    score: float = 0.0
    depth: int = 0
    nodes: int = 0
    time_ms: int = 0
    worker: str = ""
    error: str | None = None

    def to_fields(self) -> StreamFields:
        return {"result": json.dumps(asdict(self), separators=(",", ":"))}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> JobResult:
        try:
            result = cls(**json.loads(fields["result"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError("result/invalid", f"malformed result entry: {exc}") from None
        expected: dict[str, tuple[type, ...]] = {
            "job_id": (str,),
            "room": (str,),
            "version": (int,),
            "move": (str, type(None)),
            "score": (int, float),
            "depth": (int,),
            "nodes": (int,),
            "time_ms": (int,),
            "worker": (str,),
            "error": (str, type(None)),
        }
        for name, types in expected.items():
            value = getattr(result, name)
            if not isinstance(value, types) or isinstance(value, bool):
                raise ProtocolError("result/invalid", f"result field {name!r} has a bad type")
        return result
