"""One WebSocket client of the node, and the write path to it with its backpressure.

Decides when a client is too slow and dropped: sends never wait on a client; each
connection's frames wait in its socket's transport buffer (or, with per-message deflate,
in a queue drained by its own writer task), bounded by bytes (``MAX_QUEUED_BYTES``) and
by how long the oldest has waited (``max_behind_s``: the node config's
``slow_client_s``, 10 s); a client past either bound is closed with 1013 and can reconnect
and resume. Replies to a client's own requests never overflow it: the session reads the
client's next request only once its queue has drained below ``SOFT_QUEUED_BYTES``
(:meth:`Connection.drained`). Also decides which versions of a room a client is sent
(never an older one, the same one again only to resync or for presence) and when a
draining node may close it (no request under way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Protocol

from aiohttp import WSCloseCode, WSMsgType

from kibitz.server.fanout.frames import StateFrames, opcode_for, ws_frame
from kibitz.server.fanout.lag import LagTracker
from kibitz.shared.protocol.codec import Codec, encode_bytes

log = logging.getLogger(__name__)

#: A client is too slow, and dropped, when this many bytes wait to be sent to it...
MAX_QUEUED_BYTES = 4 * 1024 * 1024
#: ...or when a frame has waited this long to be written to its socket (the default of
#: :attr:`Connection.max_behind_s`; the node sets each connection's from its config's
#: ``slow_client_s``, ``KIBITZ_SLOW_CLIENT_S``, through the hub).
MAX_BEHIND_S = 10.0
#: A client dropped for not reading gets its 1013 close frame after the whole frames
#: queued before it; it has this long to read them before its connection is cut.
SLOW_CLOSE_GRACE_S = 10.0
#: A connection's next request is read only once no more than this waits to be sent, so
#: the replies to a burst of requests go out at the pace the client reads them.
SOFT_QUEUED_BYTES = 256 * 1024
CLOSE_SLOW = 1013  # "try again later"


class Socket(Protocol):
    """What a :class:`Connection` needs of its WebSocket: server/gateway/edge.py's own, or, for an
    upgrade on a kept-alive HTTP connection, aiohttp's ``WebSocketResponse``."""

    @property
    def closed(self) -> bool: ...

    @property
    def compress(self) -> int | bool: ...

    async def send_frame(
        self, message: bytes, opcode: WSMsgType, compress: int | None = None
    ) -> None: ...

    async def ping(self, message: bytes = b"") -> None: ...

    async def close(self, *, code: int = WSCloseCode.OK, message: bytes = b"") -> bool: ...


class Connection:
    """One WebSocket client: its codec, how frames reach it and the rooms it follows.

    Without compression (the default) frames are written straight to the socket's
    transport, whose buffer is the send queue: a room's frame is built once and the same
    bytes are handed to every follower, with no task or copy per connection. With
    per-message deflate negotiated, frames go through a queue and the socket's own
    ``send_frame`` (it compresses per connection). Either way the bounds are the same: a
    client with more than MAX_QUEUED_BYTES waiting, or behind for more than
    ``max_behind_s``, is dropped.
    """

    def __init__(
        self,
        ws: Socket,
        codec: Codec,
        transport: asyncio.Transport | None = None,
    ) -> None:
        self.ws = ws
        self.transport = transport
        self.codec = codec
        self.opcode = opcode_for(codec)
        #: The transport frames are written to directly (None: through ``ws.send_frame``).
        self.direct: asyncio.WriteTransport | None = (
            transport if transport is not None and not ws.compress else None
        )
        #: Since when the direct transport has had bytes waiting, as last seen.
        self._behind_since: float | None = None
        #: Frames not yet written, each with the time it was queued; the head is the one
        #: being written (it leaves once the socket has taken it). A list, not a deque:
        #: most connections hold none, and an empty deque costs 600 bytes.
        self._frames: list[tuple[bytes, float]] = []
        self.queued_bytes = 0
        #: Writes the queue out and ends when it is empty (an idle connection has none).
        self.writer: asyncio.Task[None] | None = None
        #: The session's reader waiting for the queue to drain below SOFT_QUEUED_BYTES.
        self._drain_waiter: asyncio.Future[None] | None = None
        self.rooms: dict[str, int | None] = {}  # room id -> seat played (None: spectator)
        self.last_version: dict[str, int] = {}
        #: Usernames (lower case) whose chat lines this client is not sent: the accounts
        #: its account blocks or is blocked by (server/moderation/; set by its session).
        self.hidden: frozenset[str] = frozenset()
        self.closing = False
        self.close_task: asyncio.Future[None] | None = None  # a close under way (abort)
        #: True while a request of this client is being handled (a draining node closes
        #: the socket only once the request under way, its commit and reply, is done).
        self.busy = False
        self._idle_waiter: asyncio.Future[None] | None = None
        #: Round trips of the server's pings, kept while the connection holds a seat.
        self.lag: LagTracker | None = None
        #: A frame waiting this long to be written drops the client (Hub.add sets it).
        self.max_behind_s = MAX_BEHIND_S

    @property
    def seated(self) -> bool:
        return any(seat is not None for seat in self.rooms.values())

    def begin_request(self) -> None:
        self.busy = True

    def end_request(self) -> None:
        self.busy = False
        _release(self._idle_waiter)

    async def wait_idle(self) -> None:
        """Return once no request of this client is being handled."""
        while self.busy:
            self._idle_waiter = asyncio.get_running_loop().create_future()
            try:
                await self._idle_waiter
            finally:
                self._idle_waiter = None

    def send(self, message: dict[str, Any]) -> None:
        """Encode and queue a message for this client alone; never blocks."""
        self.send_frame(encode_bytes(message, self.codec))

    def send_frame(self, frame: bytes) -> None:
        """Queue a message already encoded in this client's codec; never blocks. Drops the
        client if it is too slow: more than MAX_QUEUED_BYTES waiting, or a frame waiting
        more than ``max_behind_s`` for the socket."""
        if self.direct is not None:
            self._write_direct(ws_frame(frame, self.opcode))
            return
        if self.closing or self.ws.closed:
            return
        now = time.monotonic()
        if self._frames and (
            now - self._frames[0][1] > self.max_behind_s
            or self.queued_bytes + len(frame) > MAX_QUEUED_BYTES
        ):
            log.warning(
                "dropping a slow client (%d bytes queued, %.1f s behind)",
                self.queued_bytes,
                now - self._frames[0][1],
            )
            self.abort(CLOSE_SLOW, b"too slow")
            return
        self._frames.append((frame, now))
        self.queued_bytes += len(frame)
        if self.writer is None:
            self.writer = asyncio.create_task(self._write())

    def _write_direct(self, wire: bytes) -> None:
        transport = self.direct
        assert transport is not None
        if self.closing or self.ws.closed or transport.is_closing():
            return
        now = time.monotonic()
        waiting = transport.get_write_buffer_size()
        if waiting == 0:
            self._behind_since = None
        behind = now - self._behind_since if self._behind_since is not None else 0.0
        if behind > self.max_behind_s or waiting + len(wire) > MAX_QUEUED_BYTES:
            log.warning("dropping a slow client (%d bytes queued, %.1f s behind)",
                        waiting, behind)  # fmt: skip
            self.abort(CLOSE_SLOW, b"too slow")
            return
        transport.write(wire)
        if self._behind_since is None and transport.get_write_buffer_size():
            self._behind_since = now

    @property
    def waiting_bytes(self) -> int:
        """Bytes queued for this client and not yet taken by its socket."""
        if self.direct is not None:
            return self.direct.get_write_buffer_size()
        return self.queued_bytes

    async def drained(self) -> bool:
        """Wait until no more than SOFT_QUEUED_BYTES wait to be sent (the session calls
        this before reading the client's next request). False, with the client dropped,
        if it has not read enough within ``max_behind_s``."""
        if self.waiting_bytes <= SOFT_QUEUED_BYTES:
            return True
        if self.direct is not None:
            return await self._direct_drained()
        if self.closing:
            return False
        self._drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._drain_waiter, timeout=self.max_behind_s)
        except TimeoutError:
            log.warning("dropping a client that stopped reading (%d bytes queued)",
                        self.queued_bytes)  # fmt: skip
            self.abort(CLOSE_SLOW, b"too slow")
            return False
        finally:
            self._drain_waiter = None
        return not self.closing

    async def _direct_drained(self) -> bool:
        # The transport has no "drained" callback of its own to wait on (aiohttp's
        # protocol owns it): look every 10 ms while a client is this far behind (rare).
        deadline = time.monotonic() + self.max_behind_s
        while self.waiting_bytes > SOFT_QUEUED_BYTES and not self.closing:
            if time.monotonic() > deadline:
                log.warning("dropping a client that stopped reading (%d bytes queued)",
                            self.waiting_bytes)  # fmt: skip
                self.abort(CLOSE_SLOW, b"too slow")
                return False
            await asyncio.sleep(0.01)
        return not self.closing

    def send_state(
        self, room_id: str, state: dict[str, Any] | StateFrames, force: bool = False
    ) -> None:
        """Send a room snapshot with this viewer's seat, skipping versions already sent
        (unless ``force``: a resync after a fault sends the truth, whatever was sent).

        Pass a :class:`StateFrames` when many followers get the same snapshot, so it is
        encoded once for all of them."""
        frames = state if isinstance(state, StateFrames) else StateFrames(state)
        snapshot = frames.snapshot
        version = int(snapshot["version"])
        last = self.last_version.get(room_id, -1)
        kind = snapshot.get("event", {}).get("kind")
        # Versions only go forward; the same version again only to resync or for presence.
        if not force and (
            version < last or (version == last and kind not in ("resync", "presence"))
        ):
            return
        self.last_version[room_id] = version
        if self.direct is not None:
            self._write_direct(frames.wire(self.rooms.get(room_id), self.codec))
        else:
            self.send_frame(frames.frame(self.rooms.get(room_id), self.codec))

    async def close(self, code: int = WSCloseCode.OK, message: bytes = b"") -> None:
        """Flush what is queued (briefly), then close with ``code``."""
        if self.closing:
            if self.close_task is not None:  # aborted: let its close frame go out
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.close_task)
            return
        self.closing = True
        writer = self.writer
        if writer is not None:  # flush what is queued, briefly
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(writer), timeout=1.0)
            writer.cancel()
        await self._close_socket(code, message)

    def abort(self, code: int, message: bytes) -> None:
        """Close without flushing (a slow or broken client), from synchronous code."""
        if self.closing:
            return
        self.closing = True
        if self.writer is not None:
            self.writer.cancel()
        _release(self._drain_waiter)  # a reader waiting for the queue to drain stops waiting
        self.close_task = asyncio.ensure_future(self._close_socket(code, message))

    async def _close_socket(self, code: int, message: bytes) -> None:
        # A client that reads nothing can stall the closing handshake: give it two
        # seconds (one dropped for not reading: SLOW_CLOSE_GRACE_S more to read what was
        # queued before the close frame), then drop the TCP connection.
        timeout = 2.0 + (SLOW_CLOSE_GRACE_S if code == CLOSE_SLOW else 0.0)
        try:
            await asyncio.wait_for(self.ws.close(code=code, message=message), timeout=timeout)
        except (TimeoutError, ConnectionError, RuntimeError):
            if self.transport is not None:
                self.transport.abort()

    async def _write(self) -> None:
        try:
            while self._frames:
                frame = self._frames[0][0]
                await self.ws.send_frame(frame, self.opcode)
                del self._frames[0]
                self.queued_bytes -= len(frame)
                if self.queued_bytes <= SOFT_QUEUED_BYTES:
                    _release(self._drain_waiter)
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            return
        except Exception:
            log.exception("could not send to a client; closing it")
            self.closing = False
            self.abort(WSCloseCode.INTERNAL_ERROR, b"internal error")
        finally:
            # The queue is empty (or the connection is done): the next frame starts a
            # new writer. No await separates the emptiness check from this.
            self.writer = None


def _release(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
