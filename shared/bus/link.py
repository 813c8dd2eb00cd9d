"""One pipelined connection for a node's Redis commands.

A node sends thousands of short commands a second (a move is one script call), and most
of redis-py's cost per command is around the command, not in it: taking a connection
from the pool and giving it back, a timeout context per read, retry and observability
wrappers, and packing the command in Python. :class:`RedisLink` sends every such command
down one connection instead, without waiting for the replies to those before it: Redis
answers in order, so each reply goes to the oldest request still waiting. hiredis (C)
packs the commands and parses the replies.

:class:`LinkedRedis` is redis-py's client with that path underneath: its command methods,
reply callbacks and script objects are redis-py's own, and only ``execute_command`` goes
through the link. What cannot share a connection stays on the client's pool: blocking
reads (``XREADGROUP ... BLOCK``), transactions and pipelines, pub/sub, and commands that
change the connection's own state.

Failures keep the meaning they had with the pool:

- A request not answered within ``timeout_s`` fails with ``redis.TimeoutError``, and so
  does every request sent after it on the same connection, which is then dropped: a
  stalled Redis gives errors, not hung handlers. These are not retried, since they may
  have run.
- A broken connection fails what is waiting on it with ``redis.ConnectionError``; the
  next request reconnects. A request that meets a broken connection is tried again, at
  most ``RETRIES`` more times, after a short backoff, as the pool's ``Retry`` did.
- At most ``max_pending`` requests wait for replies; more wait (up to ``wait_s``) for
  room, then fail with ``redis.ConnectionError``, like a request for a pooled connection
  when all are busy.

A caller that gives up (cancelled, or ``asyncio.wait_for`` ran out) leaves its request
in place: its reply is read and dropped, so the replies never get out of step.
"""

from __future__ import annotations

import asyncio
import inspect
import ssl
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, cast

import hiredis
import redis.asyncio as aioredis
from redis._parsers.base import BaseParser  # redis-py's mapping of error replies to classes
from redis.asyncio.connection import parse_url
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.commands.core import AsyncScript
from redis.crc import key_slot
from redis.exceptions import DataError, NoScriptError, ResponseError

P = TypeVar("P", bound=asyncio.Protocol)

RETRIES = 2
BACKOFF_S = (0.1, 0.2)

#: Commands that must not share the link: they block, or change the state of the
#: connection they run on. They go through the client's pool as before.
POOLED = frozenset(
    {
        "AUTH", "BLMOVE", "BLMPOP", "BLPOP", "BRPOP", "BRPOPLPUSH", "BZMPOP", "BZPOPMAX",
        "BZPOPMIN", "CLIENT", "DISCARD", "EXEC", "HELLO", "MONITOR", "MULTI", "PSUBSCRIBE",
        "QUIT", "RESET", "SELECT", "SSUBSCRIBE", "SUBSCRIBE", "UNWATCH", "WAIT", "WAITAOF",
        "WATCH", "XREAD", "XREADGROUP",
    }
)  # fmt: skip


def error_of(reply: ResponseError) -> Exception:
    """The exception redis-py raises for this error reply (its own parser decides)."""
    error: Exception = BaseParser.parse_error(str(reply))  # type: ignore[no-untyped-call]
    return error


def pack(args: Sequence[Any]) -> bytes:
    """One command in Redis's wire format (``DataError`` for a value Redis cannot take,
    such as None or a bool, as redis-py says)."""
    try:
        packed: bytes = hiredis.pack_command(tuple(args))
    except TypeError as exc:
        raise DataError(f"Invalid input in {str(args[0])!r}: {exc}") from None
    return packed


@dataclass(frozen=True)
class Address:
    """Where to connect, from a ``redis://``, ``rediss://`` (TLS, checked against the
    system's certificate authorities) or ``unix://`` URL."""

    host: str = "127.0.0.1"
    port: int = 6379
    path: str | None = None  # a Unix socket
    username: str | None = None
    password: str | None = None
    db: int = 0
    tls: bool = False

    @classmethod
    def from_url(cls, url: str) -> Address:
        options = parse_url(url)  # ValueError for another scheme
        return cls(
            host=options.get("host") or "127.0.0.1",
            port=int(options.get("port") or 6379),
            path=options.get("path"),
            username=options.get("username"),
            password=options.get("password"),
            db=int(options.get("db") or 0),
            tls=url.startswith("rediss://"),
        )

    async def connect(
        self, protocol: Callable[[], P], timeout_s: float
    ) -> tuple[asyncio.BaseTransport, P]:
        """A connection to this address speaking ``protocol``, ready for the handshake;
        ``redis.ConnectionError`` if none is made within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        if self.path:
            connecting = loop.create_unix_connection(protocol, self.path)
        elif self.tls:
            context = ssl.create_default_context()
            connecting = loop.create_connection(protocol, self.host, self.port, ssl=context)
        else:
            connecting = loop.create_connection(protocol, self.host, self.port)
        try:
            return await asyncio.wait_for(connecting, timeout_s)
        except (OSError, TimeoutError) as exc:
            raise aioredis.ConnectionError(f"Cannot connect to Redis: {exc!r}") from exc

    def handshake(self) -> list[tuple[str | int, ...]]:
        """RESP3, as redis-py 8 speaks by default (its reply callbacks expect its
        shapes), with the credentials in the same command."""
        commands: list[tuple[str | int, ...]] = [("HELLO", 3)]
        if self.password is not None:
            commands[0] += ("AUTH", self.username or "default", self.password)
        if self.db:
            commands.append(("SELECT", self.db))
        return commands


class _Wire(asyncio.Protocol):
    """One connection: requests out in order, replies matched to them in order."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(encoding="utf-8", replyError=ResponseError)
        self.waiting: deque[tuple[asyncio.Future[Any], float]] = deque()
        self.closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []  # requests of this turn of the event loop, sent at its end
        self._loop = asyncio.get_running_loop()
        #: Called when replies (or a failure) make room for more requests.
        self.on_space: Callable[[], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (Checked by what it does, not by its class: uvloop's are not asyncio's.)
        transport = cast(asyncio.Transport, transport)
        self.transport = transport

    def send(self, packed: bytes) -> asyncio.Future[Any]:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise aioredis.ConnectionError("Connection closed.")
        future: asyncio.Future[Any] = self._loop.create_future()
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(packed)
        self.waiting.append((future, self._loop.time()))
        if self._timer is None:
            self._timer = self._loop.call_later(self.timeout_s, self._check_timeout)
        return future

    def _flush(self) -> None:
        """One write for all the requests made since the last: one system call, and
        Redis reads them at once."""
        out, self._out = self._out, []
        if self.transport is not None and not self.closed:
            self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                future, _ = self.waiting.popleft()
                if future.done():  # its caller gave up
                    continue
                if isinstance(reply, ResponseError):
                    future.set_exception(error_of(reply))
                else:
                    future.set_result(reply)
        except (hiredis.ProtocolError, IndexError) as exc:  # garbage, or a reply unasked for
            self.fail(aioredis.ConnectionError(f"Bad reply from Redis: {exc!r}"))
            return
        if self.on_space is not None:
            self.on_space()

    def _check_timeout(self) -> None:
        self._timer = None
        if not self.waiting:
            return
        due = self.waiting[0][1] + self.timeout_s
        if self._loop.time() >= due:
            self.fail(aioredis.TimeoutError("Timeout reading from Redis"))
        else:
            self._timer = self._loop.call_at(due, self._check_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(aioredis.ConnectionError("Connection closed by server."))

    def fail(self, error: Exception) -> None:
        """Drop the connection and fail every request waiting on it with ``error``."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.transport is not None:
            self.transport.abort()
        while self.waiting:
            future, _ = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)
        if self.on_space is not None:
            self.on_space()


class RedisLink:
    """Commands to one Redis, multiplexed on one connection (see the module's doc)."""

    def __init__(
        self, address: Address, timeout_s: float, max_pending: int = 4096, wait_s: float = 20.0
    ) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.max_pending = max_pending
        self.wait_s = wait_s
        self._wire: _Wire | None = None
        self._connecting: asyncio.Lock | None = None
        self._room_waiters: deque[asyncio.Future[None]] = deque()

    async def call(self, args: Sequence[Any]) -> Any:
        """Send one command and return its decoded reply (an error reply is raised)."""
        packed = pack(args)
        attempt = 0
        while True:
            try:
                return await (await self._ready()).send(packed)
            except aioredis.ConnectionError:
                if attempt == RETRIES:
                    raise
                await asyncio.sleep(BACKOFF_S[attempt])
                attempt += 1

    async def _ready(self) -> _Wire:
        """The connection, once it is up and has room for one more request."""
        while True:
            wire = self._wire
            if wire is None or wire.closed:
                wire = await self._connect()
            if len(wire.waiting) < self.max_pending:
                return wire
            await self._wait_for_room()

    async def _wait_for_room(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._room_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, self.wait_s)
        except TimeoutError:
            raise aioredis.ConnectionError(
                f"No room on the Redis link: {self.max_pending} requests waiting"
            ) from None
        finally:
            if waiter in self._room_waiters:
                self._room_waiters.remove(waiter)

    def _make_room(self) -> None:
        if not self._room_waiters:
            return
        wire = self._wire
        free = self.max_pending - (len(wire.waiting) if wire and not wire.closed else 0)
        while free > 0 and self._room_waiters:
            waiter = self._room_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    async def _connect(self) -> _Wire:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._wire is not None and not self._wire.closed:
                return self._wire  # another caller connected while this one waited
            _, wire = await self.address.connect(lambda: _Wire(self.timeout_s), self.timeout_s)
            try:
                for command in self.address.handshake():
                    await wire.send(pack(command))
            except BaseException:
                wire.fail(aioredis.ConnectionError("The Redis handshake failed."))
                raise
            wire.on_space = self._make_room
            self._wire = wire
            return wire

    async def aclose(self) -> None:
        if self._wire is not None:
            self._wire.fail(aioredis.ConnectionError("The Redis link is closed."))
            self._wire = None

    def pending(self) -> int:
        """Requests sent and not yet answered."""
        wire = self._wire
        return len(wire.waiting) if wire is not None and not wire.closed else 0


class LinkedRedis(aioredis.Redis):
    """redis-py's asyncio client, its one-shot commands sent over a :class:`RedisLink`."""

    link: RedisLink

    def __init__(self, pool: aioredis.ConnectionPool, link: RedisLink) -> None:
        if pool.connection_kwargs.get("protocol") not in (None, 3, "3"):
            raise ValueError("the link speaks RESP3: its pool must too, for the same replies")
        super().__init__(connection_pool=pool)
        self.auto_close_connection_pool = True  # as Redis.from_pool: closing the client closes it
        self.link = link

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        name = args[0]
        if not isinstance(name, str) or NEVER_DECODE in options:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if " " in name:  # "SCRIPT LOAD": the words go as separate arguments
            args = (*name.split(), *args[1:])
        if args[0].upper() in POOLED:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        try:
            reply = await self.link.call(args)
        except ResponseError:
            if EMPTY_RESPONSE in options:
                return options[EMPTY_RESPONSE]
            raise
        options.pop(EMPTY_RESPONSE, None)
        options.pop("keys", None)
        callback = self.response_callbacks.get(name)
        if callback is None:
            return reply
        result = callback(reply, **options)
        return await result if inspect.isawaitable(result) else result

    # redis-py's asyncio client returns an AsyncScript too; its stubs say Script.
    def register_script(self, script: str | bytes | memoryview) -> AsyncScript:  # type: ignore[override]
        return LinkedScript(self, script)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await self.link.aclose()
        await super().aclose(close_connection_pool)


class LinkedScript(AsyncScript):
    """A Lua script called straight over the link: ``EVALSHA``, and on ``NOSCRIPT`` (a
    restarted Redis has forgotten it) ``SCRIPT LOAD`` and again."""

    def __init__(self, client: LinkedRedis, script: str | bytes | memoryview) -> None:
        super().__init__(client, script)
        self.link = client.link

    async def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Iterable[Any] | None = None,
        client: Any = None,
    ) -> Any:
        if client is not None:  # a pipeline, say: redis-py's way
            return await super().__call__(keys, args, client)
        keys = keys or ()
        command = (len(keys), *keys, *(args or ()))
        try:
            return await self.link.call(("EVALSHA", self.sha, *command))
        except NoScriptError:
            self.sha = await self.link.call(("SCRIPT", "LOAD", self.script))
            return await self.link.call(("EVALSHA", self.sha, *command))


class Message(NamedTuple):
    """What a subscription receives: a ``message`` on ``channel`` (``data`` is its
    payload), or the confirmation of a ``subscribe`` or ``unsubscribe`` (``data`` is how
    many channels the connection then has). A sharded subscription (Redis Cluster) names
    its ``smessage``, ``ssubscribe`` and ``sunsubscribe`` the same way, and adds
    ``dropped``: Redis no longer delivers ``channel`` here (its slot moved to another
    node, which Redis tells with a ``sunsubscribe`` of its own, or the ``SSUBSCRIBE``
    was refused, as ``MOVED`` to another node); ``data`` says why."""

    kind: str
    channel: str
    data: Any


class _Sent(NamedTuple):
    """A sharded (un)subscription sent and not yet wholly answered: its channels, in the
    order Redis confirms them."""

    kind: str  # "ssubscribe" or "sunsubscribe"
    channels: deque[str]


class Subscription(asyncio.Protocol):
    """A pub/sub connection read by hiredis, for the hub's listener (server/fanout/listener.py).

    ``subscribe`` and ``unsubscribe`` write at once, in the order they are called, and
    return: Redis confirms each channel with a message, in order. Messages wait in a
    queue of at most ``MAX_QUEUED``; past that the socket is not read until the hub
    catches up, and Redis holds the rest (up to its pub/sub output limit, past which it
    drops the connection, which the hub notices and answers with a fresh subscription).

    A ``sharded`` subscription (to one primary of a Redis Cluster) speaks ``SSUBSCRIBE``
    and ``SUNSUBSCRIBE``, one command per slot (Redis refuses channels of several slots in
    one), and keeps each command's channels until Redis has answered for them, so that it
    can tell a ``sunsubscribe`` confirming its own ``SUNSUBSCRIBE`` from one Redis pushes
    when a slot leaves the node, and which channels an error reply (``MOVED``) refused:
    both are handed on as ``dropped`` (see :class:`Message`), and the connection lives on.
    """

    MAX_QUEUED = 10_000

    def __init__(self, sharded: bool = False) -> None:
        self.sharded = sharded
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader(encoding="utf-8", replyError=ResponseError)
        self.queue: deque[Message] = deque()
        self._replies: deque[asyncio.Future[Any]] = deque()  # the handshake's
        self._sent: deque[_Sent] = deque()  # sharded commands not yet wholly answered
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None
        self._paused = False

    @classmethod
    async def open(cls, address: Address, timeout_s: float, sharded: bool = False) -> Subscription:
        transport, subscription = await address.connect(lambda: cls(sharded), timeout_s)
        try:
            for command in address.handshake():
                await asyncio.wait_for(subscription._request(command), timeout_s)
        except BaseException:
            subscription.close()
            raise
        return subscription

    def _request(self, command: Sequence[Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies.append(future)
        self._write(command)
        return future

    def subscribe(self, *channels: str) -> None:
        if self.sharded:
            self._write_sharded("ssubscribe", channels)
        else:
            self._write(("SUBSCRIBE", *channels))

    def unsubscribe(self, *channels: str) -> None:
        if self.sharded:
            self._write_sharded("sunsubscribe", channels)
        else:
            self._write(("UNSUBSCRIBE", *channels))

    def _write_sharded(self, kind: str, channels: Sequence[str]) -> None:
        by_slot: dict[int, list[str]] = {}
        for name in channels:
            by_slot.setdefault(key_slot(name.encode()), []).append(name)
        packed = b"".join(pack((kind.upper(), *names)) for names in by_slot.values())
        self._write_packed(packed)
        self._sent.extend(_Sent(kind, deque(names)) for names in by_slot.values())

    def _write(self, command: Sequence[Any]) -> None:
        self._write_packed(pack(command))

    def _write_packed(self, packed: bytes) -> None:
        if self._error is not None or self.transport is None or self.transport.is_closing():
            raise self._error or aioredis.ConnectionError("The subscription is closed.")
        self.transport.write(packed)

    async def get_message(self, timeout: float) -> Message | None:
        """The next message, None if none comes within ``timeout`` seconds; the error
        that ended the connection once every message before it has been taken."""
        if not self.queue and self._error is None:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = loop.call_later(timeout, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        if not self.queue:
            if self._error is not None:
                raise self._error
            return None
        message = self.queue.popleft()
        if self._paused and len(self.queue) <= self.MAX_QUEUED // 2 and self.transport:
            self._paused = False
            self.transport.resume_reading()
        return message

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (Checked by what it does, not by its class: uvloop's are not asyncio's.)
        transport = cast(asyncio.Transport, transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            while (reply := self.reader.gets()) is not False:
                if self._replies:
                    future = self._replies.popleft()
                    if not future.done():
                        if isinstance(reply, ResponseError):
                            future.set_exception(error_of(reply))
                        else:
                            future.set_result(reply)
                elif self.sharded:
                    self._take_sharded(reply)
                elif isinstance(reply, list) and len(reply) >= 3:
                    self.queue.append(Message(reply[0], reply[1], reply[-1]))
                elif isinstance(reply, ResponseError):
                    raise error_of(reply)
        except Exception as exc:  # garbage on the wire, or an error reply
            self._end(aioredis.ConnectionError(f"Bad reply on the subscription: {exc!r}"))
            return
        if len(self.queue) >= self.MAX_QUEUED and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()
        _wake(self._waiter)

    def _take_sharded(self, reply: Any) -> None:
        """One reply on a sharded subscription, queued as its :class:`Message`."""
        sent = self._sent[0] if self._sent else None
        if isinstance(reply, ResponseError):
            if sent is None:
                raise error_of(reply)
            self._sent.popleft()  # refused whole: none of its channels is (un)subscribed
            kind = "dropped" if sent.kind == "ssubscribe" else "unsubscribe"
            self.queue.extend(Message(kind, name, str(reply)) for name in sent.channels)
            return
        if not isinstance(reply, list) or len(reply) < 3:
            return
        kind, name, data = reply[0], reply[1], reply[-1]
        if kind == "smessage":
            self.queue.append(Message("message", name, data))
            return
        answered = sent is not None and sent.kind == kind and sent.channels[0] == name
        if answered and sent is not None:
            sent.channels.popleft()
            if not sent.channels:
                self._sent.popleft()
        if kind == "ssubscribe":
            self.queue.append(Message("subscribe", name, data))
        elif kind == "sunsubscribe":  # not asked for: Redis's own, the slot has moved
            self.queue.append(Message("unsubscribe" if answered else "dropped", name, data))

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(aioredis.ConnectionError("Connection closed by server."))

    def _end(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        while self._replies:
            future = self._replies.popleft()
            if not future.done():
                future.set_exception(error)
        _wake(self._waiter)
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Drop the connection at once (Redis may be frozen: nothing is waited for)."""
        self._end(aioredis.ConnectionError("The subscription is closed."))


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
