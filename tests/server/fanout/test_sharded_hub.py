"""The hub on a Redis Cluster (a real one: 3 primaries, a replica each): it listens with
one sharded subscription per primary (server/fanout/shards.py), its probe loop proves
each, and the global channels (the control slot's) reach their handlers. The listener's
faults (a slot moved, a primary killed or frozen) are tested in
tests/shared/bus/test_sharded_subscription.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from kibitz.server.fanout.hub import Hub
from kibitz.server.fanout.shards import ShardedListener
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import command_client
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from kibitz.shared.bus.fanout import listen_address, publish

pytestmark = [pytest.mark.redis_cluster, pytest.mark.timeout(90)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    started = EmbeddedCluster(tmp_path_factory.mktemp("hub-cluster"), primaries=3).start()
    yield started
    started.stop()


@pytest.fixture
async def client(cluster: EmbeddedCluster) -> AsyncIterator[Any]:
    redis = command_client(cluster.url, timeout_s=2.0)
    yield redis
    await redis.aclose()


async def test_the_hub_listens_on_every_primary_it_needs(
    cluster: EmbeddedCluster, client: Any
) -> None:
    service = SimpleNamespace(store=SimpleNamespace(redis=client))
    hub = Hub(listen_address(client), service, "n1")  # type: ignore[arg-type]
    assert isinstance(hub.listener, ShardedListener)
    assert hub.listener.probe_channel == "kibitz:{c}:probe:n1"  # the control slot's
    heard: list[str] = []
    hub.channels[keys.SEEKS_CHANNEL] = heard.append
    tasks: list[asyncio.Task[None]] = []

    def spawn(name: str, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
        tasks.append(asyncio.create_task(body(), name=name))

    try:
        await hub.start(spawn)
        assert hub.healthy
        # The global channels live on the control slot: SPUBLISH reaches the handler.
        assert await publish(client, keys.SEEKS_CHANNEL, '{"kind":"changed"}') == 1
        deadline = time.monotonic() + 5
        while not heard and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert heard == ['{"kind":"changed"}']
        # Each probe is heard back: the hub stays healthy past the staleness bound.
        await asyncio.sleep(4.0)
        assert hub.healthy and hub.reconnects == 0
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await hub.stop()
