"""The fan-out's own Redis commands (shared/bus/fanout.py) against a real Redis: the probe
is heard back on a subscription, the presence mark is won by one node per window, and a
Redis that is not there gives the bus's errors, in bounded time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis.asyncio import BlockingConnectionPool

from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis, free_port
from kibitz.shared.bus.errors import BusConnectionError, BusError
from kibitz.shared.bus.fanout import FanoutBus
from kibitz.shared.bus.link import Address, LinkedRedis, Message, RedisLink, Subscription
from kibitz.shared.protocol.node import PROBE

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    redis_server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    yield redis_server
    redis_server.stop()


def client_for(url: str, timeout_s: float = 5.0) -> LinkedRedis:
    pool = BlockingConnectionPool.from_url(url, max_connections=2, decode_responses=True)
    return LinkedRedis(pool, RedisLink(Address.from_url(url), timeout_s=timeout_s))


@pytest.fixture
async def client(server: EmbeddedRedis) -> AsyncIterator[LinkedRedis]:
    linked = client_for(server.url)
    yield linked
    await linked.aclose()


async def next_message(subscription: Subscription, timeout_s: float = 5.0) -> Message:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = await subscription.get_message(timeout=0.2)
        if message is not None:
            return message
    raise AssertionError(f"no message in {timeout_s} s")


async def test_the_probe_is_heard_back_on_the_nodes_subscription(
    server: EmbeddedRedis, client: LinkedRedis
) -> None:
    bus = FanoutBus(client, Address.from_url(server.url), "n1")
    assert bus.probe_channel == keys.probe_channel("n1")
    subscription = await bus.subscribe(5.0)
    try:
        subscription.subscribe(bus.probe_channel)
        confirmed = await next_message(subscription)
        assert (confirmed.kind, confirmed.channel) == ("subscribe", bus.probe_channel)
        await bus.publish_probe()
        heard = await next_message(subscription)
        assert heard == Message("message", bus.probe_channel, PROBE)
    finally:
        subscription.close()


async def test_a_presence_mark_is_won_by_one_node_per_window(
    server: EmbeddedRedis, client: LinkedRedis
) -> None:
    address = Address.from_url(server.url)
    first, second = FanoutBus(client, address, "n1"), FanoutBus(client, address, "n2")
    assert await first.mark_presence_sent("r1", 400)
    assert not await second.mark_presence_sent("r1", 400)  # another node's is newer
    assert not await first.mark_presence_sent("r1", 400)
    assert await second.mark_presence_sent("r2", 400)  # per room
    ttl = await client.pttl(keys.presence_sent_key("r1"))
    assert 0 < ttl <= 400  # bounded: the mark goes by itself
    await asyncio.sleep(0.5)
    assert await second.mark_presence_sent("r1", 400)  # the window has passed


async def test_a_redis_that_is_not_there_gives_the_bus_errors_in_bounded_time() -> None:
    url = f"redis://127.0.0.1:{free_port()}"
    client = client_for(url, timeout_s=1.0)
    bus = FanoutBus(client, Address.from_url(url), "n1")
    started = time.monotonic()
    try:
        with pytest.raises(BusConnectionError):
            await bus.subscribe(1.0)
        with pytest.raises(BusError):
            await bus.publish_probe()
        with pytest.raises(BusError):
            await bus.mark_presence_sent("r1", 400)
    finally:
        await client.aclose()
    assert time.monotonic() - started < 10.0
