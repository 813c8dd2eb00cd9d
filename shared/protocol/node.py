"""Node to node: what our nodes (and workers) publish to each other on Redis pub/sub.

Each payload is a class here with the parse that reads it and refuses anything else with
:class:`ProtocolError` (code ``node/invalid``), so a listener handles a typed value or
logs one clear line and drops the message:

- a room's channel (``kibitz:room:{ID}``) carries, as the JSON the clients get:
  :class:`RoomState` (a ``state`` snapshot from a commit, or a presence update: the same
  version with ``event.kind == "presence"``), :class:`RoomThinking` (an AI's progress,
  from a worker) and :class:`RoomChat` (a chat line, published by the chat script);
  :func:`parse_room_message` reads them, :func:`state_version` peeks at a snapshot's
  version without decoding it;
- the node-died channel carries a node id (:class:`NodeDied`), published by the
  heartbeat script for each node whose beat expired;
- a node's probe channel carries :data:`PROBE`, which the node publishes to itself to
  prove its subscription alive;
- the seeks channel carries :class:`SeeksChanged` (published by the seek scripts) and
  :class:`SeekAccepted` (who must be seated where), read by :func:`parse_seeks_event`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from kibitz.shared import fastjson
from kibitz.shared.protocol.codec import ProtocolError

CODE = "node/invalid"
MAX_ID = 512  # longest node, room, seek, connection id or token accepted
#: What a node publishes on its probe channel (anything heard there proves it alive).
PROBE = "1"


def _refuse(what: str) -> ProtocolError:
    return ProtocolError(CODE, f"malformed {what}")


def _load(data: str | bytes, what: str) -> dict[str, Any]:
    try:
        value = fastjson.loads(data)
    except (ValueError, RecursionError):
        raise _refuse(f"{what}: not JSON") from None
    if not isinstance(value, dict):
        raise _refuse(f"{what}: not an object")
    return value


def _whole(value: object) -> int | None:
    """``value`` if it is a whole number (not a boolean), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _id(value: object) -> str | None:
    """``value`` if it is an id (a non-empty string of at most MAX_ID), else None."""
    if isinstance(value, str) and 0 < len(value) <= MAX_ID:
        return value
    return None


# -- a room's channel -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoomState:
    """A ``state`` snapshot broadcast on the room's channel (``message``, as clients get
    it but for ``you``); ``presence``: only who is there changed (same version)."""

    room: str
    version: int
    presence: bool
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RoomThinking:
    """An AI's progress (a client_out ``thinking`` message) about ``version``."""

    room: str
    version: int
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RoomChat:
    """A chat line (a client_out ``chat`` message) for the followers of ``channel``."""

    room: str
    channel: Literal["players", "spectators"]
    message: dict[str, Any]


RoomMessage = RoomState | RoomThinking | RoomChat


def parse_room_message(data: str | bytes) -> RoomMessage:
    """A payload of a room's channel, typed; ``node/invalid`` if it is none of them."""
    message = _load(data, "room message")
    kind, room = message.get("type"), _id(message.get("room"))
    if room is None:
        raise _refuse("room message: bad room id")
    if kind == "state":
        return _room_state(room, message)
    if kind == "thinking":
        version = _whole(message.get("version"))
        if version is None:
            raise _refuse("thinking: bad version")
        return RoomThinking(room, version, message)
    if kind == "chat":
        channel, lines = message.get("channel"), message.get("messages")
        if channel not in ("players", "spectators") or not isinstance(lines, list):
            raise _refuse("chat: bad channel or lines")
        return RoomChat(room, "players" if channel == "players" else "spectators", message)
    raise _refuse(f"room message: unknown type {str(kind)[:40]!r}")


def _room_state(room: str, message: dict[str, Any]) -> RoomState:
    version, event = _whole(message.get("version")), message.get("event")
    if version is None or not isinstance(event, dict) or not isinstance(event.get("kind"), str):
        raise _refuse("state: bad version or event")
    return RoomState(room, version, event["kind"] == "presence", message)


#: How every state snapshot begins, with its version: client_out.State.message writes
#: ``type``, ``room`` and ``version`` first (tests/shared/protocol/test_node.py holds it).
_STATE_HEAD = re.compile(r'\{"type":"state","room":"[^"]*","version":([0-9]+),')


def state_version(data: str) -> int | None:
    """The version of a broadcast snapshot that is not a presence update, read from its
    head without decoding it; None for anything else (a presence update, which is sent
    again at the same version, a chat line, an AI's progress)."""
    head = _STATE_HEAD.match(data)
    if head is None or '"kind":"presence"' in data:
        return None
    return int(head[1])


# -- the node-died and probe channels ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeDied:
    """A node whose heartbeat expired: its players are gone, and it will not say so."""

    node: str

    @classmethod
    def parse(cls, data: str | bytes) -> NodeDied:
        node = _id(data.decode(errors="replace") if isinstance(data, bytes) else data)
        if node is None:
            raise _refuse("node-died: bad node id")
        return cls(node)

    def payload(self) -> str:
        return self.node


# -- the seeks channel ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeeksChanged:
    """The open seeks changed: lobbies are pushed again."""

    def payload(self) -> str:
        return '{"kind":"changed"}'


@dataclass(frozen=True, slots=True)
class SeekAccepted:
    """A seek was taken: the node of its creator's connection ``conn`` seats the creator
    in ``room`` at ``seat`` with ``token`` (sent on our own Redis only), or, if that
    connection has gone, aborts the room."""

    seek: str
    conn: str
    node: str
    room: str
    seat: int
    token: str

    def payload(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "accepted",
            "seek": self.seek,
            "conn": self.conn,
            "node": self.node,
            "room": self.room,
            "seat": self.seat,
            "token": self.token,
        }


SeeksEvent = SeeksChanged | SeekAccepted


def parse_seeks_event(data: str | bytes) -> SeeksEvent:
    """A payload of the seeks channel, typed; ``node/invalid`` if it is neither."""
    event = _load(data, "seeks event")
    kind = event.get("kind")
    if kind == "changed":
        return SeeksChanged()
    if kind != "accepted":
        raise _refuse(f"seeks event: unknown kind {str(kind)[:40]!r}")
    seek, conn, node = _id(event.get("seek")), _id(event.get("conn")), _id(event.get("node"))
    room, token, seat = _id(event.get("room")), _id(event.get("token")), _whole(event.get("seat"))
    if seek is None or conn is None or node is None or room is None or token is None:
        raise _refuse("seeks event: a missing or bad id")
    if seat not in (0, 1):
        raise _refuse("seeks event: bad seat")
    return SeekAccepted(seek, conn, node, room, 1 if seat == 1 else 0, token)
