"""Who on this node follows which room, and which of them gets each room message.

Decides the routing of a room's messages to the node's followers: a ``state`` snapshot
goes to every follower, players first, each in its own seat's encoding (encoded once per
kind of viewer, see frames.py), and not to one that has that version already; an AI's
``thinking`` only to the followers at the version it is about, its line hidden; a chat
line only to the followers of its channel (players or spectators). A broadcast every
follower here already has (this node committed it and delivered it at once) is dropped
unread: its version is read from the snapshot's head
(kibitz.shared.protocol.node.state_version). Each message is read as its typed node
payload (kibitz.shared.protocol.node); a malformed one is logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kibitz.server.fanout.connection import Connection
from kibitz.server.fanout.frames import StateFrames
from kibitz.server.fanout.lag import LagTracker
from kibitz.shared.bus import keys
from kibitz.shared.protocol.codec import Codec, ProtocolError, encode_bytes
from kibitz.shared.protocol.node import RoomChat, RoomThinking, parse_room_message, state_version

log = logging.getLogger(__name__)


class Followers:
    """The node's connections, and for each room the connections that follow it.

    ``on_emptied`` is told of each room whose last local follower left (the listener
    unsubscribes its channel)."""

    def __init__(self, on_emptied: Callable[[str], None]) -> None:
        self.rooms: dict[str, set[Connection]] = {}
        self.connections: set[Connection] = set()
        #: Connections holding a seat somewhere: the ones whose lag is measured.
        self.seated: set[Connection] = set()
        self._on_emptied = on_emptied

    def add(self, conn: Connection, room_id: str, seat: int | None) -> None:
        """``conn`` follows ``room_id`` as ``seat`` (None: a spectator)."""
        conn.rooms[room_id] = seat
        if seat is not None:
            if conn.lag is None:
                conn.lag = LagTracker()
            self.seated.add(conn)
        elif not conn.seated:
            self.seated.discard(conn)
        self.rooms.setdefault(room_id, set()).add(conn)

    def drop(self, conn: Connection, room_id: str) -> None:
        """``conn`` follows ``room_id`` no more."""
        conn.rooms.pop(room_id, None)
        conn.last_version.pop(room_id, None)
        if not conn.seated:
            self.seated.discard(conn)
        followers = self.rooms.get(room_id)
        if followers is not None:
            followers.discard(conn)
            if not followers:
                del self.rooms[room_id]
                self._on_emptied(room_id)

    def deliver_state(self, room_id: str, snapshot: dict[str, Any]) -> None:
        """A snapshot to the room's followers here, players first (a snapshot this node
        committed goes at once, without waiting for its broadcast: an opponent on this
        node sees the move one Redis hop sooner, and the broadcast is not decoded)."""
        followers = self.rooms.get(room_id)
        if followers:
            frames = StateFrames(snapshot)
            for conn in players_first(room_id, followers):
                conn.send_state(room_id, frames)

    def deliver(self, channel: str, data: str) -> None:
        """A message heard on a room's channel, to the followers here it is for."""
        room_id = keys.room_id_of(channel)  # kibitz:room:{ID}, kibitz:{gN}:room:ID
        followers = self.rooms.get(room_id) if room_id is not None else None
        if room_id is None or not followers or up_to_date(room_id, followers, data):
            return
        try:
            message = parse_room_message(data)
        except ProtocolError as exc:
            log.error("dropping a malformed message on %s: %s", channel, exc.message)
            return
        if isinstance(message, RoomThinking):
            # An AI's progress: only for followers at the version it is about. Its
            # principal variation is a hint to the person playing it, who can watch
            # their own game from a second, token-less connection: so no connection
            # gets it (``pv`` []), players and spectators alike. Every room with an
            # AI seat has a person in the other seat (room.create, rematches keep the
            # seats' kinds). The line of each AI move is shown once the game is over
            # (the event's ``pv``, see room.hide_lines). Encoded once per codec.
            _send_at_version(room_id, followers, {**message.message, "pv": []})
        elif isinstance(message, RoomChat):
            _send_chat(room_id, followers, message)
        else:
            self.deliver_state(room_id, message.message)


def up_to_date(room_id: str, followers: set[Connection], data: str) -> bool:
    """Whether a broadcast snapshot would be skipped by every follower here (each has
    its version, or a later one, as after :meth:`Followers.deliver_state`). A presence
    update is never skipped here; nor is anything that is not a state. The version is
    read from the snapshot's head (:func:`state_version`: the fast path relies on how a
    snapshot begins; one that begins otherwise is decoded whole)."""
    version = state_version(data)
    if version is None:
        return False
    return all(conn.last_version.get(room_id, -1) >= version for conn in followers)


def _send_at_version(room_id: str, followers: set[Connection], message: dict[str, Any]) -> None:
    """``message`` (about one version of the room) to the followers at that version,
    players first, encoded once per codec."""
    encoded: dict[Codec, bytes] = {}
    for conn in players_first(room_id, followers):
        if conn.last_version.get(room_id) == message["version"]:
            if conn.codec not in encoded:
                encoded[conn.codec] = encode_bytes(message, conn.codec)
            conn.send_frame(encoded[conn.codec])


def _send_chat(room_id: str, followers: set[Connection], chat: RoomChat) -> None:
    """A chat line only to the followers of its channel (players or spectators), each
    codec encoded once."""
    players = chat.channel == "players"
    lines: dict[Codec, bytes] = {}
    sender = _sender_key(chat.message)
    for conn in followers:
        if (conn.rooms.get(room_id) is not None) == players:
            if sender is not None and sender in conn.hidden:
                continue  # a blocked (or blocking) account's line
            if conn.codec not in lines:
                lines[conn.codec] = encode_bytes(chat.message, conn.codec)
            conn.send_frame(lines[conn.codec])


def _sender_key(message: dict[str, Any]) -> str | None:
    """The signed-in sender of a chat message's line (lower case), if any."""
    lines = message.get("messages")
    line = lines[0] if isinstance(lines, list) and lines else None
    account = line.get("account") if isinstance(line, dict) else None
    return account.lower() if isinstance(account, str) else None


def players_first(room_id: str, followers: set[Connection]) -> list[Connection]:
    """A room's followers, its players before its spectators: a player waits on the
    update to move, a spectator only watches."""
    players = [conn for conn in followers if conn.rooms.get(room_id) is not None]
    spectators = [conn for conn in followers if conn.rooms.get(room_id) is None]
    return players + spectators
