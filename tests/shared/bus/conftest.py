"""Fixtures of the bus's tests: the node's own kind of client (the pipelined link) on
the module's private Redis (``own_redis``, tests/conftest.py), emptied for each test. A
module that needs another client defines its own ``client``.

For the tests on a Redis Cluster: ``clients``, two nodes' clients on the session's
``redis_cluster``, emptied for each test, with the key layout of ``GROUPS`` slot groups."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import AsyncClient, command_client
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster, EmbeddedClusterNode
from kibitz.shared.bus.link import LinkedRedis
from tests.conftest import flush_cluster

GROUPS = 12  # slot groups: enough to land on all three primaries


@pytest.fixture
async def client(own_redis: EmbeddedRedis) -> AsyncIterator[LinkedRedis]:
    """The node's own kind of client (pipelined link), on an empty Redis."""
    redis = command_client(own_redis.url)
    await redis.flushall()
    yield redis
    await redis.aclose()


def replicated(primary: EmbeddedClusterNode) -> None:
    """WAIT until a replica of ``primary`` has every write so far (at most 10 s; a
    replica restarted just before may still be syncing)."""
    with primary.client() as client:
        assert client.wait(1, 10_000) >= 1, f"no replica of {primary.address} caught up"


def grouped_url(cluster: EmbeddedCluster) -> str:
    """The URL of ``cluster`` with the key layout of ``GROUPS`` slot groups."""
    return f"{cluster.url}/?groups={GROUPS}"


@pytest.fixture
async def clients(redis_cluster: EmbeddedCluster) -> AsyncIterator[list[AsyncClient]]:
    """Two nodes' clients on an emptied cluster (the layout: GROUPS slot groups)."""
    flush_cluster(redis_cluster)
    opened = [command_client(grouped_url(redis_cluster)) for _ in range(2)]
    assert keys.grouped() and keys.group_count() == GROUPS
    yield opened
    for client in opened:
        await client.aclose()
