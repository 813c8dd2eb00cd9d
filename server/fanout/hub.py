"""Connections and fan-out: who on this node follows which room.

Every room change is published by the commit script on the room's channel; each node
subscribes to the channels of the rooms it has local followers for (and only those, so
adding nodes divides the fan-out instead of repeating it) and forwards each snapshot to
its local followers. A change made on this node goes to its followers here at once
(:meth:`Hub.deliver_state`), and the broadcast's copy, which then finds them up to date,
is dropped unread. A snapshot
is encoded once per kind of viewer (seat 0, seat 1, spectator) and codec, and those same
bytes are queued for every such follower. Sends never wait on a client: each connection
has a queue of encoded frames drained by its own writer task, bounded by bytes and by how
long its oldest frame has waited; a client past either bound is disconnected (it can
reconnect and resume). Replies to a client's own requests never overflow it: the session
reads the client's next request only once its queue has drained below a soft bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import redis.asyncio as aioredis
from aiohttp import WSCloseCode, WSMsgType

from kibitz.server.gateway.lag import PING_CHECK_S, PING_INTERVAL_S, LagTracker
from kibitz.server.loops.background import raise_if_stopping, stop_tasks
from kibitz.server.services.rooms import RoomService
from kibitz.shared import fastjson
from kibitz.shared.bus import keys
from kibitz.shared.bus.keys import NODE_DIED
from kibitz.shared.bus.keys import room_channel as channel
from kibitz.shared.bus.link import Address, Subscription
from kibitz.shared.protocol import Codec, encode_bytes

log = logging.getLogger(__name__)

#: A client is too slow, and dropped, when this many bytes wait to be sent to it...
MAX_QUEUED_BYTES = 4 * 1024 * 1024
#: ...or when a frame has waited this long to be written to its socket
#: (``KIBITZ_SLOW_CLIENT_S`` sets it, for tests).
MAX_BEHIND_S = float(os.environ.get("KIBITZ_SLOW_CLIENT_S") or 10.0)
#: A client dropped for not reading gets its 1013 close frame after the whole frames
#: queued before it; it has this long to read them before its connection is cut.
SLOW_CLOSE_GRACE_S = 10.0
#: A connection's next request is read only once no more than this waits to be sent, so
#: the replies to a burst of requests go out at the pace the client reads them.
SOFT_QUEUED_BYTES = 256 * 1024
CLOSE_SLOW = 1013  # "try again later"
#: A seated client with more than this waiting in its socket is not pinged this round.
PING_BACKLOG_BYTES = 16 * 1024
PROBE_S = 1.0  # how often the listener's liveness probe is published
STALE_S = 3.5  # a listener that has not heard its probe this long is reconnected
POLL_S = 0.5  # longest wait for a pub/sub message before checking liveness
SUBSCRIBE_TIMEOUT_S = 5.0
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.1, 1.0  # a refused connect costs Redis next to nothing
#: At most one presence broadcast per room this often for spectators coming and going.
PRESENCE_EVERY_S = 2.0
RESYNC_BATCH = 50  # rooms re-read from Redis at once after a re-subscribe
SUBSCRIBE_BATCH = 500  # channels per SUBSCRIBE/UNSUBSCRIBE command
#: On SIGTERM, how long requests under way may take to finish before every client is told
#: to reconnect elsewhere (1001).
DRAIN_S = 5.0


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
    client with more than MAX_QUEUED_BYTES waiting, or behind for more than MAX_BEHIND_S,
    is dropped.
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
        self.closing = False
        self.close_task: asyncio.Future[None] | None = None  # a close under way (abort)
        #: True while a request of this client is being handled (a draining node closes
        #: the socket only once the request under way, its commit and reply, is done).
        self.busy = False
        self._idle_waiter: asyncio.Future[None] | None = None
        #: Round trips of the server's pings, kept while the connection holds a seat.
        self.lag: LagTracker | None = None

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
        more than MAX_BEHIND_S for the socket."""
        if self.direct is not None:
            self._write_direct(ws_frame(frame, self.opcode))
            return
        if self.closing or self.ws.closed:
            return
        now = time.monotonic()
        if self._frames and (
            now - self._frames[0][1] > MAX_BEHIND_S
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
        if behind > MAX_BEHIND_S or waiting + len(wire) > MAX_QUEUED_BYTES:
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
        if it has not read enough within MAX_BEHIND_S."""
        if self.waiting_bytes <= SOFT_QUEUED_BYTES:
            return True
        if self.direct is not None:
            return await self._direct_drained()
        if self.closing:
            return False
        self._drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(self._drain_waiter, timeout=MAX_BEHIND_S)
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
        deadline = time.monotonic() + MAX_BEHIND_S
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


class Hub:
    """Follows the channels of the rooms followed here on one pub/sub connection and fans
    out locally.

    A room's channel is subscribed when its first local follower arrives and unsubscribed
    when its last one leaves, so a node decodes only the updates of rooms it serves.
    :meth:`follow` returns only once Redis has confirmed the subscription: whatever the
    caller then reads of the room, no later update can be missed.

    The listener is supervised: any error, or a subscription that has gone quiet, makes it
    drop the connection and subscribe again with backoff. Quiet is detected with a round
    trip: every ``PROBE_S`` the node publishes a probe on a channel of its own through the
    command connection, and the listener must hear it back within ``STALE_S``. A frozen
    Redis or a dead TCP path therefore shows within seconds, as ``healthy`` turning False
    (``/healthz`` answers 503), instead of leaving the node deaf while it looks fine.

    Events published while the subscription was down were missed, so every re-subscription
    includes every followed room, and once it is live (its own probe heard back, which
    follows the rooms' SUBSCRIBE on the same connection) each local follower is sent its
    room as Redis holds it now; that resync is retried until it succeeds.
    """

    def __init__(self, address: Address, service: RoomService, node: str = "local") -> None:
        self.address = address  # where the listener subscribes, on a connection of its own
        self.service = service
        self.store = service.store
        self.probe_channel = keys.probe_channel(node)
        self.followers: dict[str, set[Connection]] = {}
        self.connections: set[Connection] = set()
        #: Connections holding a seat somewhere: the ones whose lag is measured.
        self.seated: set[Connection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._ready = asyncio.Event()
        self._subscribed = False
        self._heard = 0.0  # monotonic time the listener last heard its own probe
        self.reconnects = 0  # re-subscriptions after a failure, for /metrics and tests
        #: (room, seat or None for spectators) -> connections that left while Redis could
        #: not be told. At most one entry per room and seat this node had followers in.
        self._owed_leaves: dict[tuple[str, int | None], int] = {}
        #: Rooms whose spectator count changed here and will be broadcast shortly.
        self._presence_due: set[str] = set()
        #: More channels to follow (set before ``start``): channel -> its handler, called
        #: with each message's data (seeks and the lobby use one).
        self.channels: dict[str, Callable[[str], None]] = {}
        self.channels[NODE_DIED] = self._on_node_died
        #: The subscription in use (None between attempts). Only the listener reads from
        #: it; SUBSCRIBE and UNSUBSCRIBE are written to it at once, in the order made.
        self._pubsub: Subscription | None = None
        #: Rooms whose channel is subscribed on ``_pubsub`` -> done once Redis confirmed it.
        self._room_subs: dict[str, asyncio.Future[None]] = {}
        #: Channel -> the SUBSCRIBEs sent for it not yet confirmed, oldest first (Redis
        #: confirms in order, so the next confirmation is the oldest's).
        self._confirms: dict[str, deque[asyncio.Future[None]]] = {}
        self._unsubscribe_due: set[str] = set()  # rooms whose last local follower left
        self._unsubscribe_wakeup = asyncio.Event()
        self.room_messages = 0  # room updates received, for /metrics and tests
        #: Set on SIGTERM: no request is taken any more (see :meth:`drain`).
        self.draining = False

    @property
    def healthy(self) -> bool:
        """Subscribed, and the subscription delivered something (at least our own probe)
        recently."""
        return self._subscribed and time.monotonic() - self._heard < STALE_S

    @property
    def subscribed_rooms(self) -> int:
        """Rooms whose channel this node subscribes to now."""
        return len(self._room_subs)

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._listen()),
            asyncio.create_task(self._probe()),
            asyncio.create_task(self._unsubscriber()),
            asyncio.create_task(self._ping_seated()),
        ]
        await asyncio.wait_for(self._ready.wait(), timeout=10)

    async def drain(self, timeout: float = DRAIN_S) -> None:
        """Shut down gracefully (SIGTERM): take no more requests, let each connection's
        request under way finish (its commit and its reply), at most ``timeout`` seconds,
        then tell every client to reconnect elsewhere (1001) after what is queued for it.

        A request that arrives meanwhile is not handled: the client sends it again on its
        new connection (a move names its version, so it is never played twice)."""
        self.draining = True
        deadline = time.monotonic() + timeout
        await asyncio.gather(
            *(self._close_when_idle(conn, deadline) for conn in list(self.connections))
        )

    async def _close_when_idle(self, conn: Connection, deadline: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(conn.wait_idle(), max(0.0, deadline - time.monotonic()))
        await conn.close(WSCloseCode.GOING_AWAY, b"server shutting down")

    async def stop(self) -> None:
        await stop_tasks(self._tasks)
        # Tell every client to reconnect (elsewhere), all at once: one slow client must
        # not hold up the others.
        await asyncio.gather(
            *(conn.close(WSCloseCode.GOING_AWAY, b"server shutting down")
              for conn in list(self.connections))
        )  # fmt: skip

    def add(self, conn: Connection) -> None:
        self.connections.add(conn)

    async def remove(self, conn: Connection) -> None:
        """Forget ``conn``: it is counted out of the rooms it followed, and where it was
        a player, the room's followers are told (one step each, see
        :meth:`RoomService.leave`).

        Local bookkeeping goes first, so a Redis failure cannot leave a closed
        connection among the followers.
        """
        self.connections.discard(conn)
        seats = dict(conn.rooms)
        for room_id in seats:
            self._drop(conn, room_id)
        for room_id, seat in seats.items():
            try:
                await self._count_out(room_id, seat)
            except (aioredis.RedisError, OSError) as exc:
                # Owed, not forgotten: else the player would show as connected (or the
                # spectator counted) for as long as this node lives. Paid back once Redis
                # answers again.
                log.warning("could not record that a follower left %s: %s", room_id, _why(exc))
                self._owed_leaves[(room_id, seat)] = self._owed_leaves.get((room_id, seat), 0) + 1

    async def _pay_owed_leaves(self) -> None:
        """Record the departures that failed while Redis was unreachable, and say so."""
        for (room_id, seat), count in list(self._owed_leaves.items()):
            await self.store.attach(room_id, seat, -count)
            del self._owed_leaves[(room_id, seat)]
            if seat is None:
                self.spectators_changed(room_id)
            else:
                await self.service.publish_presence(room_id)

    async def follow(self, conn: Connection, room_id: str, seat: int | None) -> bool:
        """Follow ``room_id`` as ``seat`` (None: spectator); True if a player's presence
        changed (a spectator count change is broadcast later, see
        :meth:`spectators_changed`)."""
        previous = conn.rooms.get(room_id, None) if room_id in conn.rooms else "absent"
        changed = previous != seat and (isinstance(previous, int) or seat is not None)
        if previous != seat:
            if previous is None or isinstance(previous, int):
                await self.store.attach(room_id, previous, -1)
            await self.store.attach(room_id, seat, +1)
            if previous is None or seat is None:
                self.spectators_changed(room_id)
        conn.rooms[room_id] = seat
        if seat is not None:
            if conn.lag is None:
                conn.lag = LagTracker()
            self.seated.add(conn)
        elif not conn.seated:
            self.seated.discard(conn)
        self.followers.setdefault(room_id, set()).add(conn)
        await self._subscribe_room(room_id)
        return changed

    async def unfollow(self, conn: Connection, room_id: str) -> None:
        """Stop following: counted out, and where ``conn`` was a player, the room's
        followers are told."""
        if room_id not in conn.rooms:
            return
        seat = conn.rooms[room_id]
        self._drop(conn, room_id)
        await self._count_out(room_id, seat)

    async def _count_out(self, room_id: str, seat: int | None) -> None:
        """One follower of ``room_id`` on this node gone: a spectator is counted out (the
        count is broadcast later); a player is counted out and the room's followers told,
        in one step (:meth:`RoomService.leave`)."""
        if seat is None:
            await self.store.attach(room_id, None, -1)
            self.spectators_changed(room_id)
        else:
            await self.service.leave(room_id, seat)

    async def _ping_seated(self) -> None:
        """Ping each connection that holds a seat every PING_INTERVAL_S, the first time
        within PING_CHECK_S of taking it, so its lag is known when it moves (server/gateway/lag.py).
        One loop for the node: a spectator costs nothing. A client whose socket has a
        backlog is skipped (the ping would wait for it; its lag is not what is slow)."""
        while True:
            now = time.monotonic()
            for conn in list(self.seated):
                lag = conn.lag
                transport = conn.transport
                if (
                    lag is None
                    or conn.closing
                    or conn.ws.closed
                    or now - lag.last_sent < PING_INTERVAL_S
                    or transport is None
                    or transport.get_write_buffer_size() > PING_BACKLOG_BYTES
                ):
                    continue
                try:
                    async with asyncio.timeout(PING_INTERVAL_S):
                        await conn.ws.ping(lag.ping_payload(now))
                except (ConnectionError, RuntimeError, TimeoutError):
                    continue
            await asyncio.sleep(PING_CHECK_S)

    def _on_node_died(self, node: str) -> None:
        """Another node died: its players are gone, and nobody else will say so. Tell the
        followers of every room followed here (the presence read records them as gone)."""
        log.warning("node %s stopped beating; updating presence in %d rooms",
                    node, len(self.followers))  # fmt: skip
        task = asyncio.create_task(self._publish_presence_all())
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _publish_presence_all(self) -> None:
        room_ids = list(self.followers)
        try:
            for i in range(0, len(room_ids), RESYNC_BATCH):
                batch = room_ids[i : i + RESYNC_BATCH]
                await asyncio.gather(*(self.service.publish_presence(r) for r in batch))
        except (aioredis.RedisError, OSError) as exc:
            raise_if_stopping()
            log.warning("presence update after a node died failed: %s", _why(exc))

    def spectators_changed(self, room_id: str) -> None:
        """A spectator came or went: the count rides on the room's next state, and on at
        most one presence broadcast per room every PRESENCE_EVERY_S (so a thousand
        spectators arriving cost a few broadcasts, not a thousand)."""
        if room_id in self._presence_due:
            return
        self._presence_due.add(room_id)
        task = asyncio.create_task(self._publish_spectators(room_id))
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _publish_spectators(self, room_id: str) -> None:
        try:
            await asyncio.sleep(PRESENCE_EVERY_S)
            self._presence_due.discard(room_id)
            # Once per room across the cluster: a node that finds another's broadcast
            # newer than its change (the mark is younger than the wait) leaves it at that.
            fresh = await self.store.redis.set(
                keys.presence_sent_key(room_id), "1", nx=True,
                px=int(PRESENCE_EVERY_S * 900),
            )  # fmt: skip
            if fresh:
                await self.service.publish_presence(room_id)
        except (aioredis.RedisError, OSError) as exc:
            raise_if_stopping()
            log.debug("spectator count not broadcast for %s: %s", room_id, _why(exc))
        finally:
            self._presence_due.discard(room_id)

    def _drop(self, conn: Connection, room_id: str) -> None:
        conn.rooms.pop(room_id, None)
        conn.last_version.pop(room_id, None)
        if not conn.seated:
            self.seated.discard(conn)
        followers = self.followers.get(room_id)
        if followers is not None:
            followers.discard(conn)
            if not followers:
                del self.followers[room_id]
                self._unsubscribe_due.add(room_id)
                self._unsubscribe_wakeup.set()

    # -- subscriptions ------------------------------------------------------------------------

    async def _subscribe_room(self, room_id: str) -> None:
        """Have the subscription include ``room_id``'s channel, confirmed by Redis, so that
        a read of the room after this misses no later update.

        While the subscription is down this returns at once: the next one includes every
        followed room and re-syncs them all once it is live. A confirmation slower than
        SUBSCRIBE_TIMEOUT_S (a listener far behind) is not waited for; the room is
        re-synced when it comes.
        """
        self._unsubscribe_due.discard(room_id)
        pubsub = self._pubsub
        if pubsub is None:
            return
        confirmed = self._room_subs.get(room_id)
        if confirmed is None:
            confirmed = self._room_subs[room_id] = self._expect(channel(room_id))
            try:
                pubsub.subscribe(channel(room_id))
            except aioredis.ConnectionError:  # the listener hears it too, and re-syncs
                return
        if confirmed.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(confirmed), timeout=SUBSCRIBE_TIMEOUT_S)
        except TimeoutError:
            log.warning("subscription to room %s not confirmed in %.0f s; re-syncing it "
                        "once it is", room_id, SUBSCRIBE_TIMEOUT_S)  # fmt: skip
            confirmed.add_done_callback(lambda _f: self._resync_later(room_id))

    def _resync_later(self, room_id: str) -> None:
        task = asyncio.create_task(self._resync_quietly(room_id))
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _resync_quietly(self, room_id: str) -> None:
        try:
            await self.resync_room(room_id)
        except (aioredis.RedisError, OSError) as exc:
            raise_if_stopping()
            log.warning("resync of %s failed: %s", room_id, _why(exc))

    def _expect(self, name: str) -> asyncio.Future[None]:
        """A future done when Redis confirms the SUBSCRIBE to ``name`` about to be sent."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._confirms.setdefault(name, deque()).append(future)
        return future

    def _on_subscribed(self, name: str) -> None:
        waiting = self._confirms.get(name)
        if not waiting:
            return
        future = waiting.popleft()
        if not waiting:
            del self._confirms[name]
        if not future.done():
            future.set_result(None)

    async def _unsubscriber(self) -> None:
        """Unsubscribe the rooms whose last local follower left (a burst in one command),
        unless a follower came back meanwhile."""
        while True:
            await self._unsubscribe_wakeup.wait()
            await asyncio.sleep(0)  # let the departures of one moment gather
            self._unsubscribe_wakeup.clear()
            due = [r for r in self._unsubscribe_due if r not in self.followers]
            self._unsubscribe_due.clear()
            pubsub = self._pubsub
            if pubsub is None:
                continue  # the next subscription leaves them out anyway
            names = [channel(r) for r in due if self._room_subs.pop(r, None) is not None]
            if not names:
                continue
            try:  # a follow from now on subscribes again, after this
                for i in range(0, len(names), SUBSCRIBE_BATCH):
                    pubsub.unsubscribe(*names[i : i + SUBSCRIBE_BATCH])
            except aioredis.ConnectionError:
                pass  # gone: the listener hears it too, and the next one leaves them out

    def _begin(self, pubsub: Subscription) -> None:
        self._end()
        self._pubsub = pubsub

    def _end(self) -> None:
        """Forget the subscription: whoever waits for a confirmation goes on (the next
        subscription includes their rooms and re-syncs them)."""
        self._pubsub = None
        self._room_subs.clear()
        for waiting in self._confirms.values():
            for future in waiting:
                if not future.done():
                    future.set_result(None)
        self._confirms.clear()

    async def _probe(self) -> None:
        """Publish the liveness probe the listener must hear back (see the class doc);
        while Redis answers, also pay back the departures it could not be told of."""
        while True:
            try:
                await self.store.redis.publish(self.probe_channel, "1")
                if self._owed_leaves:
                    await self._pay_owed_leaves()
            except (aioredis.RedisError, OSError) as exc:
                raise_if_stopping()
                log.debug("liveness probe not sent: %s", _why(exc))
            await asyncio.sleep(PROBE_S)

    async def _listen(self) -> None:
        """Subscribe, listen, and on any failure start again, for as long as the node runs."""
        delay = BACKOFF_MIN_S
        while True:
            pubsub: Subscription | None = None
            try:
                pubsub = await Subscription.open(self.address, SUBSCRIBE_TIMEOUT_S)
                self._begin(pubsub)
                # Every followed room first; the probe's channel last, so hearing the
                # probe proves Redis has taken them all (one connection, in order).
                rooms = list(self.followers)
                for room_id in rooms:
                    self._room_subs[room_id] = self._expect(channel(room_id))
                for i in range(0, len(rooms), SUBSCRIBE_BATCH):
                    pubsub.subscribe(*(channel(r) for r in rooms[i : i + SUBSCRIBE_BATCH]))
                pubsub.subscribe(self.probe_channel, *self.channels)
                with contextlib.suppress(aioredis.RedisError, OSError):
                    await self.store.redis.publish(self.probe_channel, "1")  # no need to wait
                await self._receive(pubsub)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever broke, the cure is a fresh subscription
                raise_if_stopping()
                if self._subscribed:
                    log.warning("fan-out listener lost (%s); subscribing again", _why(exc))
                    delay = BACKOFF_MIN_S  # it was live: start the backoff afresh
                else:
                    log.info("fan-out listener not up (%s); retrying", _why(exc))
            finally:
                self._subscribed = False
                self._end()
                if pubsub is not None:
                    pubsub.close()
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(BACKOFF_MAX_S, delay * 2)

    async def _receive(self, pubsub: Subscription) -> None:
        """Deliver messages until the subscription fails or goes quiet.

        Any message proves the subscription alive: under heavy load our probe may queue
        behind thousands of room updates, and that is a busy node, not a deaf one. Only
        silence, while a probe is published every second, means the path is dead.
        """
        started = time.monotonic()
        while True:
            message = await pubsub.get_message(timeout=POLL_S)
            now = time.monotonic()
            if message is not None:
                if self._subscribed:
                    self._heard = now
                kind, name = message.kind, message.channel
                if kind == "subscribe":
                    self._on_subscribed(name)
                elif kind != "message":
                    pass  # an unsubscribe's confirmation
                elif name == self.probe_channel:
                    if not self._subscribed:
                        self._heard = now
                        self._on_live()
                elif name in self.channels:
                    try:
                        self.channels[name](message.data)
                    except Exception:  # one bad message must not cost the subscription
                        log.exception("could not handle a message on %s", name)
                else:
                    self.room_messages += 1
                    self._deliver(name, message.data)
            last_sign = self._heard if self._subscribed else started
            if now - max(last_sign, started) > STALE_S:
                raise TimeoutError(f"nothing heard for {STALE_S:.1f} s")

    def _on_live(self) -> None:
        """The new subscription works end to end: repair what was missed, if anything."""
        self._subscribed = True
        if self._ready.is_set():
            self.reconnects += 1
            log.warning("fan-out listener live again; re-syncing %d rooms", len(self.followers))
            task = asyncio.create_task(self._resync_until_done())
            self._tasks.append(task)
            task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)
        self._ready.set()

    async def _resync_until_done(self) -> None:
        delay = BACKOFF_MIN_S
        while True:
            try:
                await self._resync_all()
                return
            except (aioredis.RedisError, OSError) as exc:
                raise_if_stopping()
                log.warning("resync failed (%s); retrying", _why(exc))
                await asyncio.sleep(delay)
                delay = min(BACKOFF_MAX_S, delay * 2)

    async def _resync_all(self) -> None:
        """Send every followed room as Redis holds it now, in bounded batches."""
        room_ids = list(self.followers)
        for i in range(0, len(room_ids), RESYNC_BATCH):
            batch = room_ids[i : i + RESYNC_BATCH]
            await asyncio.gather(*(self.resync_room(room_id) for room_id in batch))

    async def resync_room(self, room_id: str) -> None:
        """Send ``room_id``'s current state to its local followers, whatever they saw.

        Forced: after a Redis restart that lost its last second of writes, the truth may
        be an older version than a client has seen, and the client must get it.
        """
        room = await self.store.load(room_id)
        followers = self.followers.get(room_id)
        if room is None or not followers:
            return
        await self._restate_presence(room_id, followers)
        snap = await self.service.snapshot(room)
        snap["event"] = {"kind": "resync"}
        frames = StateFrames(snap)
        for conn in _players_first(room_id, followers):
            conn.send_state(room_id, frames, force=True)

    async def _restate_presence(self, room_id: str, followers: set[Connection]) -> None:
        """Write this node's player counts for ``room_id`` as they are, not as increments:
        a Redis that restarted may have lost them (or this node's updates during the gap)."""
        counts: dict[int | None, int] = {0: 0, 1: 0, None: 0}
        for conn in followers:
            counts[conn.rooms.get(room_id)] += 1
        for seat, count in counts.items():
            self._owed_leaves.pop((room_id, seat), None)  # settled by this absolute count
            await self.store.restate(room_id, seat, count)

    def deliver_state(self, room_id: str, snapshot: dict[str, Any]) -> None:
        """A snapshot this node committed, to the room's followers here, players first,
        without waiting for its broadcast: an opponent on this node sees the move one
        Redis hop sooner, and the broadcast is not decoded (see :func:`_up_to_date`)."""
        followers = self.followers.get(room_id)
        if followers:
            frames = StateFrames(snapshot)
            for conn in _players_first(room_id, followers):
                conn.send_state(room_id, frames)

    def _deliver(self, channel: str, data: str) -> None:
        room_id = channel[len(keys.ROOM_PREFIX) + 1 : -1]  # kibitz:room:{ID}
        followers = self.followers.get(room_id)
        if not followers or _up_to_date(room_id, followers, data):
            return
        try:
            message = fastjson.loads(data)
            if message.get("type") == "thinking":
                # An AI's progress: only for followers at the version it is about. Its
                # principal variation is a hint to the person playing it, who can watch
                # their own game from a second, token-less connection: so no connection
                # gets it (``pv`` []), players and spectators alike. Every room with an
                # AI seat has a person in the other seat (room.create, rematches keep the
                # seats' kinds). The line of each AI move is shown once the game is over
                # (the event's ``pv``, see room.hide_lines). Encoded once per codec.
                _send_at_version(room_id, followers, {**message, "pv": []})
                return
            if message.get("type") == "chat":
                # A chat line: only for the followers of its channel (players or
                # spectators), each codec encoded once.
                players = message["channel"] == "players"
                lines: dict[Codec, bytes] = {}
                for conn in followers:
                    if (conn.rooms.get(room_id) is not None) == players:
                        if conn.codec not in lines:
                            lines[conn.codec] = encode_bytes(message, conn.codec)
                        conn.send_frame(lines[conn.codec])
                return
            self.deliver_state(room_id, message)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("dropping a malformed message on %s: %s", channel, exc)


#: How every state snapshot begins (store.snapshot_parts keeps the order of
#: room.snapshot's keys), with its version.
_STATE_HEAD = re.compile(r'\{"type":"state","room":"[^"]*","version":([0-9]+),')


def _up_to_date(room_id: str, followers: set[Connection], data: str) -> bool:
    """Whether a broadcast snapshot would be skipped by every follower here (each has
    its version, or a later one, as after :meth:`Hub.deliver_state`), read from its
    head without decoding it. A presence update, which is sent again at the same
    version, is never skipped here; nor is anything that is not a state."""
    head = _STATE_HEAD.match(data)
    if head is None or '"kind":"presence"' in data:
        return False
    version = int(head[1])
    return all(conn.last_version.get(room_id, -1) >= version for conn in followers)


def _send_at_version(room_id: str, followers: set[Connection], message: dict[str, Any]) -> None:
    """``message`` (about one version of the room) to the followers at that version,
    players first, encoded once per codec."""
    encoded: dict[Codec, bytes] = {}
    for conn in _players_first(room_id, followers):
        if conn.last_version.get(room_id) == message["version"]:
            if conn.codec not in encoded:
                encoded[conn.codec] = encode_bytes(message, conn.codec)
            conn.send_frame(encoded[conn.codec])


def _players_first(room_id: str, followers: set[Connection]) -> list[Connection]:
    """A room's followers, its players before its spectators: a player waits on the
    update to move, a spectator only watches."""
    players = [conn for conn in followers if conn.rooms.get(room_id) is not None]
    spectators = [conn for conn in followers if conn.rooms.get(room_id) is None]
    return players + spectators


def _why(exc: BaseException) -> str:
    """An error's kind and text, without connection details that may hold addresses."""
    return type(exc).__name__
