"""The bytes a follower of a room gets: one snapshot encoded once per kind of viewer.

Decides how a ``state`` snapshot becomes frames: followers differ only in ``you`` (their
seat, or None for a spectator) and codec, so a snapshot is encoded at most six times
however many follow the room, and each encoding is wrapped once as a whole WebSocket
frame that the same bytes go to every such follower in.
"""

from __future__ import annotations

import struct
from typing import Any

from aiohttp import WSMsgType

from kibitz.shared.protocol.codec import Codec, encode_bytes


class StateFrames:
    """One room snapshot and its encodings, each made on first use and then shared.

    Followers differ only in ``you`` (their seat, or None for a spectator) and codec, so a
    snapshot is encoded at most six times however many follow the room.
    """

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.snapshot = snapshot
        self._frames: dict[tuple[int | None, Codec], bytes] = {}
        self._wire: dict[tuple[int | None, Codec], bytes] = {}
        self._json: bytes | None = None  # the snapshot as JSON, without "you"

    def frame(self, you: int | None, codec: Codec) -> bytes:
        """The message's bytes in ``codec`` for a viewer in seat ``you``."""
        key = (you, codec)
        frame = self._frames.get(key)
        if frame is None:
            if codec == "json" and "you" not in self.snapshot:
                # JSON is encoded once: each viewer's copy ends with its own "you" (the
                # same bytes as encoding it with "you" as the last key).
                if self._json is None:
                    self._json = encode_bytes(self.snapshot, codec)
                seat = b"null" if you is None else b"%d" % you
                frame = b'%s,"you":%s}' % (self._json[:-1], seat)
            else:
                frame = encode_bytes({**self.snapshot, "you": you}, codec)
            self._frames[key] = frame
        return frame

    def wire(self, you: int | None, codec: Codec) -> bytes:
        """The same as a whole WebSocket frame, ready for the socket."""
        key = (you, codec)
        wire = self._wire.get(key)
        if wire is None:
            wire = self._wire[key] = ws_frame(self.frame(you, codec), opcode_for(codec))
        return wire


def opcode_for(codec: Codec) -> WSMsgType:
    return WSMsgType.BINARY if codec == "msgpack" else WSMsgType.TEXT


def ws_frame(payload: bytes, opcode: int) -> bytes:
    """One whole server-to-client WebSocket frame: final, unmasked, uncompressed (RFC 6455
    section 5.2). Built once, the same bytes go to every follower of a room."""
    first = 0x80 | opcode
    size = len(payload)
    if size < 126:
        header = struct.pack("!BB", first, size)
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, 126, size)
    else:
        header = struct.pack("!BBQ", first, 127, size)
    return header + payload
