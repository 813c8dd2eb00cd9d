"""The node's pipelined Redis link, against a real redis-server: replies reach the right
callers, errors keep their types, and a stalled, restarted or overloaded Redis gives
errors in bounded time, after which the link works again."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import BlockingConnectionPool
from redis.exceptions import NoScriptError

from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.link import Address, LinkedRedis, Message, RedisLink, Subscription


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    redis_server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    yield redis_server
    if redis_server.process is not None and redis_server.process.poll() is None:
        redis_server.process.send_signal(signal.SIGCONT)
    redis_server.stop()


def linked(server: EmbeddedRedis, **link_options: float) -> LinkedRedis:
    address = Address.from_url(server.url)
    assert address.password == server.password
    pool = BlockingConnectionPool.from_url(server.url, max_connections=4, decode_responses=True)
    return LinkedRedis(pool, RedisLink(address, **link_options))  # type: ignore[arg-type]


@pytest.fixture
async def client(server: EmbeddedRedis) -> AsyncIterator[LinkedRedis]:
    linked_client = linked(server, timeout_s=5.0)
    yield linked_client
    await linked_client.aclose()


def connections(server: EmbeddedRedis) -> int:
    """Clients connected to ``server``, less the one asking."""
    with redis.Redis.from_url(server.url) as admin:
        return len(admin.client_list()) - 1


async def test_concurrent_commands_get_their_own_replies_over_one_connection(
    server: EmbeddedRedis, client: LinkedRedis
) -> None:
    await asyncio.gather(*(client.set(f"k{i}", i) for i in range(2000)))
    values = await asyncio.gather(*(client.get(f"k{i}") for i in range(2000)))
    assert values == [str(i) for i in range(2000)]
    # redis-py's reply callbacks still apply: a hash comes back as a dict, a score as a float
    await client.hset("h", mapping={"a": "1", "b": "2"})
    assert await client.hgetall("h") == {"a": "1", "b": "2"}
    await client.zadd("z", {"m": 2.5})
    assert await client.zrange("z", 0, -1, withscores=True) == [("m", 2.5)]
    assert await client.script_load("return 1")  # a two-word command name
    assert connections(server) == 1


async def test_error_replies_keep_their_types_and_the_link_goes_on(
    server: EmbeddedRedis, client: LinkedRedis
) -> None:
    await client.set("text", "abc")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        await client.incr("text")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        await client.hget("text", "field")
    script = client.register_script("return redis.call('get', KEYS[1])")
    assert await script(keys=["text"]) == "abc"
    with redis.Redis.from_url(server.url) as admin:
        admin.script_flush()  # as a Redis restart does: the next call meets NOSCRIPT
    assert await script(keys=["text"]) == "abc"
    with pytest.raises(NoScriptError):
        await client.evalsha("0" * 40, 0)
    assert await client.get("text") == "abc"


async def test_blocking_reads_take_the_pool_and_do_not_hold_up_the_link(
    client: LinkedRedis,
) -> None:
    reading = asyncio.create_task(client.xread({"stream": "$"}, block=3000))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    assert await client.ping()
    assert time.monotonic() - started < 1.0
    await client.xadd("stream", {"n": "1"})
    [[stream, [(_, fields)]]] = await asyncio.wait_for(reading, 5)
    assert (stream, fields) == ("stream", {"n": "1"})


async def test_a_frozen_redis_gives_timeouts_in_bounded_time_then_the_link_recovers(
    server: EmbeddedRedis,
) -> None:
    async with linked(server, timeout_s=0.5) as client:
        await client.set("k", "v")
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        results = await asyncio.gather(
            *(client.get("k") for _ in range(20)), return_exceptions=True
        )
        assert all(isinstance(r, redis.TimeoutError) for r in results), results
        assert 0.4 < time.monotonic() - started < 3.0
        server.process.send_signal(signal.SIGCONT)
        assert await client.get("k") == "v"


async def test_a_caller_that_gives_up_leaves_the_replies_in_step(server: EmbeddedRedis) -> None:
    async with linked(server, timeout_s=5.0) as client:
        await client.mset({"a": "A", "b": "B"})
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.get("a"), 0.2)
        server.process.send_signal(signal.SIGCONT)
        assert await client.get("b") == "B"  # not the reply meant for "a"
        assert await client.get("a") == "A"


async def test_a_restarted_redis_is_reconnected_to(server: EmbeddedRedis) -> None:
    async with linked(server, timeout_s=1.0) as client:
        assert await client.ping()
        server.stop()
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError):
            await client.ping()  # tried three times, then given up
        assert time.monotonic() - started < 3.0
        server.start()
        assert await client.ping()
        assert await client.set("after", "restart")


async def test_requests_past_the_bound_wait_for_room_then_fail(server: EmbeddedRedis) -> None:
    async with linked(server, timeout_s=5.0, max_pending=3, wait_s=0.3) as client:
        await client.mset({"x": "1", "y": "2", "z": "3"})
        assert server.process is not None
        server.process.send_signal(signal.SIGSTOP)
        waiting = [asyncio.create_task(client.get(key)) for key in "xyz"]
        await asyncio.sleep(0.05)
        assert client.link.pending() == 3
        started = time.monotonic()
        with pytest.raises(redis.ConnectionError, match="No room"):
            await client.get("x")
        assert 0.25 < time.monotonic() - started < 2.0
        late = asyncio.create_task(client.get("z"))  # waits for room, then gets it
        server.process.send_signal(signal.SIGCONT)
        assert await asyncio.gather(*waiting) == ["1", "2", "3"]
        assert await asyncio.wait_for(late, 2) == "3"


def test_addresses_from_urls() -> None:
    assert Address.from_url("rediss://example.invalid:6380/0").tls
    address = Address.from_url("redis://user:secret@127.0.0.1:7000/2")
    assert not address.tls
    assert address.handshake() == [("HELLO", 3, "AUTH", "user", "secret"), ("SELECT", 2)]


async def test_the_node_uses_the_link(server: EmbeddedRedis) -> None:
    from kibitz.shared.bus.connect import command_client

    client = command_client(server.url, 8)
    try:
        assert isinstance(client, LinkedRedis)
        assert await client.ping()
    finally:
        await client.aclose()


@pytest.fixture
async def subscription(server: EmbeddedRedis) -> AsyncIterator[Subscription]:
    opened = await Subscription.open(Address.from_url(server.url), 5.0)
    yield opened
    opened.close()


async def test_a_subscription_confirms_in_order_and_delivers_messages(
    subscription: Subscription, client: LinkedRedis
) -> None:
    subscription.subscribe("a", "b")
    assert await subscription.get_message(1) == Message("subscribe", "a", 1)
    assert await subscription.get_message(1) == Message("subscribe", "b", 2)
    await client.publish("b", "hello")
    assert await subscription.get_message(1) == Message("message", "b", "hello")
    subscription.unsubscribe("a")
    assert await subscription.get_message(1) == Message("unsubscribe", "a", 1)
    await client.publish("a", "not heard")
    started = time.monotonic()
    assert await subscription.get_message(0.2) is None
    assert 0.15 < time.monotonic() - started < 1.0


async def test_a_lagging_reader_holds_the_subscription_to_its_bound(
    subscription: Subscription, client: LinkedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Subscription, "MAX_QUEUED", 10)  # read on each chunk received
    subscription.subscribe("busy")
    assert (await subscription.get_message(1)) == Message("subscribe", "busy", 1)
    for i in range(200):
        await client.publish("busy", str(i))
    await asyncio.sleep(0.2)
    assert len(subscription.queue) < 200  # the rest waits in Redis, not in this process
    received = [(await subscription.get_message(1)) for _ in range(200)]
    assert [m.data if m else None for m in received] == [str(i) for i in range(200)]


async def test_a_subscription_hands_over_what_came_then_the_error(
    server: EmbeddedRedis, subscription: Subscription
) -> None:
    subscription.subscribe("x")
    await asyncio.sleep(0.1)
    server.stop()
    await asyncio.sleep(0.1)
    assert await subscription.get_message(1) == Message("subscribe", "x", 1)
    with pytest.raises(redis.ConnectionError):
        await subscription.get_message(1)
    with pytest.raises(redis.ConnectionError):
        subscription.subscribe("y")


class _Transport:
    """A transport that keeps what is written (for a Subscription without a server)."""

    def __init__(self) -> None:
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        pass


def _push(*items: str | int) -> bytes:
    out = f">{len(items)}\r\n".encode()
    for item in items:
        if isinstance(item, int):
            out += f":{item}\r\n".encode()
        else:
            out += f"${len(item.encode())}\r\n{item}\r\n".encode()
    return out


def test_a_sharded_subscription_tells_its_confirmations_from_what_redis_dropped() -> None:
    """SSUBSCRIBE one command per slot; a ``sunsubscribe`` not asked for (a slot moved)
    and a refused SSUBSCRIBE (``MOVED``) come out as ``dropped``, and the connection
    lives on (the same against a real cluster: tests/shared/bus/test_sharded_subscription.py)."""
    subscription = Subscription(sharded=True)
    transport = _Transport()
    subscription.connection_made(transport)  # type: ignore[arg-type]
    subscription.subscribe("{a}x", "{a}y", "{b}x")  # two slots: two commands
    assert transport.written.count(b"SSUBSCRIBE") == 2
    subscription.unsubscribe("{a}x")
    feed = subscription.data_received
    feed(_push("ssubscribe", "{a}x", 1) + _push("ssubscribe", "{a}y", 2))
    feed(b"-MOVED 1234 127.0.0.1:7000\r\n")  # the {b} command, refused whole
    feed(_push("sunsubscribe", "{a}x", 1))  # the confirmation of ours
    feed(_push("smessage", "{a}y", "hello"))
    feed(_push("sunsubscribe", "{a}y", 0))  # Redis's own: its slot moved away
    assert list(subscription.queue) == [
        Message("subscribe", "{a}x", 1),
        Message("subscribe", "{a}y", 2),
        Message("dropped", "{b}x", "MOVED 1234 127.0.0.1:7000"),
        Message("unsubscribe", "{a}x", 1),
        Message("message", "{a}y", "hello"),
        Message("dropped", "{a}y", 0),
    ]
    assert subscription._error is None
    feed(b"-ERR nobody asked\r\n")  # an error for no command ends the connection
    assert isinstance(subscription._error, redis.ConnectionError)
