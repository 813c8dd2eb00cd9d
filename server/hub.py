"""Connections and fan-out: who on this node follows which room.

Every room change is published by the commit script on the room's channel; each node
listens to all room channels and forwards a snapshot to its local followers. Sends never
wait on a client: each connection has a bounded queue drained by its own writer task,
and a client whose queue overflows is disconnected (it can reconnect and resume).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import redis.asyncio as aioredis
from aiohttp import WSCloseCode, web

from kibitz.server.service import RoomService
from kibitz.server.store import PREFIX
from kibitz.shared.protocol import Codec, encode

log = logging.getLogger(__name__)

SEND_QUEUE = 64  # messages; past this the client is too slow and is dropped
CLOSE_SLOW = 1013  # "try again later"
ROOM_PATTERN = PREFIX + "room:*"


class Connection:
    """One WebSocket client: its codec, send queue and the rooms it follows."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        codec: Codec,
        transport: asyncio.BaseTransport | None = None,
    ) -> None:
        self.ws = ws
        self.transport = transport
        self.codec = codec
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(SEND_QUEUE)
        self.rooms: dict[str, int | None] = {}  # room id -> seat played (None: spectator)
        self.last_version: dict[str, int] = {}
        self.closing = False
        self.writer = asyncio.create_task(self._write())

    def send(self, message: dict[str, Any]) -> None:
        """Queue a message; never blocks. Drops the client if it is too slow."""
        if self.closing or self.ws.closed:
            return
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            log.warning("dropping a slow client (%d queued messages)", SEND_QUEUE)
            self.abort(CLOSE_SLOW, b"too slow")

    def send_state(self, room_id: str, snapshot: dict[str, Any]) -> None:
        """Send a room snapshot with this viewer's seat, skipping versions already sent."""
        version = int(snapshot["version"])
        last = self.last_version.get(room_id, -1)
        kind = snapshot.get("event", {}).get("kind")
        # Versions only go forward; the same version again only to resync or for presence.
        if version < last or (version == last and kind not in ("resync", "presence")):
            return
        self.last_version[room_id] = version
        self.send({**snapshot, "you": self.rooms.get(room_id)})

    async def close(self, code: int = WSCloseCode.OK, message: bytes = b"") -> None:
        """Flush what is queued (briefly), then close with ``code``."""
        if self.closing:
            return
        self.closing = True
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)
        if not self.writer.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self.writer), timeout=1.0)
        self.writer.cancel()
        await self._close_socket(code, message)

    def abort(self, code: int, message: bytes) -> None:
        """Close without flushing (a slow or broken client), from synchronous code."""
        if self.closing:
            return
        self.closing = True
        self.writer.cancel()
        asyncio.ensure_future(self._close_socket(code, message))

    async def _close_socket(self, code: int, message: bytes) -> None:
        # A client that reads nothing can stall the closing handshake: give it two
        # seconds, then drop the TCP connection.
        try:
            await asyncio.wait_for(self.ws.close(code=code, message=message), timeout=2.0)
        except (TimeoutError, ConnectionError, RuntimeError):
            if isinstance(self.transport, asyncio.Transport):
                self.transport.abort()

    async def _write(self) -> None:
        try:
            while True:
                message = await self.queue.get()
                if message is None:
                    return
                frame = encode(message, self.codec)
                if isinstance(frame, bytes):
                    await self.ws.send_bytes(frame)
                else:
                    await self.ws.send_str(frame)
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            return
        except Exception:
            log.exception("could not send to a client; closing it")
            self.closing = False
            self.abort(WSCloseCode.INTERNAL_ERROR, b"internal error")


class Hub:
    """Follows all room channels on one pub/sub connection and fans out locally."""

    def __init__(self, redis: aioredis.Redis, service: RoomService) -> None:
        self.redis = redis  # its own client: the listener waits on it indefinitely
        self.service = service
        self.store = service.store
        self.followers: dict[str, set[Connection]] = {}
        self.connections: set[Connection] = set()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())
        await asyncio.wait_for(self._ready.wait(), timeout=10)

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for conn in list(self.connections):
            await conn.close(WSCloseCode.GOING_AWAY, b"server shutting down")
        await self.redis.aclose()

    def add(self, conn: Connection) -> None:
        self.connections.add(conn)

    async def remove(self, conn: Connection) -> list[str]:
        """Forget ``conn``; the rooms where it was a player (their presence changed).

        Local bookkeeping goes first, so a Redis failure cannot leave a closed
        connection among the followers.
        """
        self.connections.discard(conn)
        seats = dict(conn.rooms)
        for room_id in seats:
            self._drop(conn, room_id)
        played = [room_id for room_id, seat in seats.items() if seat is not None]
        for room_id in played:
            try:
                await self.store.attach(room_id, seats[room_id] or 0, -1)
            except (aioredis.RedisError, OSError) as exc:
                log.warning("could not record that a player left %s: %s", room_id, exc)
        return played

    async def follow(self, conn: Connection, room_id: str, seat: int | None) -> bool:
        """Follow ``room_id`` as ``seat`` (None: spectator); True if presence changed."""
        previous = conn.rooms.get(room_id, None) if room_id in conn.rooms else "absent"
        changed = previous != seat and (isinstance(previous, int) or seat is not None)
        if previous != seat:
            if isinstance(previous, int):
                await self.store.attach(room_id, previous, -1)
            if seat is not None:
                await self.store.attach(room_id, seat, +1)
        conn.rooms[room_id] = seat
        self.followers.setdefault(room_id, set()).add(conn)
        return changed

    async def unfollow(self, conn: Connection, room_id: str) -> bool:
        """Stop following; True if ``conn`` was a player there (presence changed)."""
        if room_id not in conn.rooms:
            return False
        seat = conn.rooms[room_id]
        self._drop(conn, room_id)
        if seat is not None:
            await self.store.attach(room_id, seat, -1)
        return seat is not None

    def _drop(self, conn: Connection, room_id: str) -> None:
        conn.rooms.pop(room_id, None)
        conn.last_version.pop(room_id, None)
        followers = self.followers.get(room_id)
        if followers is not None:
            followers.discard(conn)
            if not followers:
                del self.followers[room_id]

    async def _listen(self) -> None:
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(ROOM_PATTERN)
                if self._ready.is_set():
                    # Reconnected: events published meanwhile were missed; resend.
                    asyncio.create_task(self._resync_all())
                self._ready.set()
                async for message in pubsub.listen():
                    if message.get("type") != "pmessage":
                        continue
                    self._deliver(message["channel"], message["data"])
            except asyncio.CancelledError:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
                raise
            except (aioredis.ConnectionError, OSError) as exc:
                log.warning("pub/sub connection lost (%s); reconnecting", exc)
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _resync_all(self) -> None:
        for room_id, followers in list(self.followers.items()):
            room = await self.store.load(room_id)
            if room is None or not followers:
                continue
            snap = await self.service.snapshot(room)
            snap["event"] = {"kind": "resync"}
            for conn in list(followers):
                conn.send_state(room_id, snap)

    def _deliver(self, channel: str, data: str) -> None:
        room_id = channel[len(PREFIX + "room:") :]
        followers = self.followers.get(room_id)
        if not followers:
            return
        message = json.loads(data)
        if message.get("type") == "thinking":
            # An AI's progress: only for followers who are at the version it is about.
            for conn in list(followers):
                if conn.last_version.get(room_id) == message["version"]:
                    conn.send(message)
            return
        for conn in list(followers):
            conn.send_state(room_id, message)
