"""What the benches read about a Redis server itself: memory, clients, room keys, liveness.

These are measurements, not part of serving: ``kibitz bench archive`` watches the memory
and the room keys fall back once games are archived, ``kibitz bench recovery`` waits for a
restarted Redis to answer and counts the cluster's connections. Nothing here writes.

On a Redis Cluster (a ``redis+cluster://`` URL) the figures are summed over its primaries
(each primary asked on its own: a ``SCAN`` sees one primary's keys), and a room key is
one of any slot group (``kibitz:{gN}:room:...``).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
import redis.cluster as sync_cluster
from redis.asyncio import cluster as async_cluster

from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import ClusterURL, is_cluster_url

SCAN_BATCH = 1_000  # keys asked for per SCAN step
#: Every room key on a Redis Cluster, whatever its group (the tag is ``{gN}``).
CLUSTER_ROOM_PATTERN = keys.PREFIX + "{g*}:room:*"


def _cluster_options(url: ClusterURL) -> dict[str, Any]:
    return {
        "username": url.username,
        "password": url.password,
        "ssl": url.tls,
        "decode_responses": True,
    }


class ServerStats:
    """Async reads of one Redis server's figures (a cluster's primaries'), on connections
    of their own."""

    def __init__(self, url: str) -> None:
        self._redis: aioredis.Redis | None = None
        self._cluster: async_cluster.RedisCluster | None = None
        if is_cluster_url(url):
            parsed = ClusterURL.parse(url)
            nodes = [async_cluster.ClusterNode(host, port) for host, port in parsed.nodes]
            self._cluster = async_cluster.RedisCluster(
                startup_nodes=nodes, **_cluster_options(parsed)
            )
        else:
            self._redis = aioredis.from_url(url, decode_responses=True)

    async def used_memory(self) -> int:
        """Bytes the server's allocator holds for data (``INFO memory``'s ``used_memory``),
        summed over a cluster's primaries."""
        if self._cluster is not None:
            await self._cluster.initialize()
            total = 0
            for node in self._cluster.get_primaries():
                info: Any = await self._cluster.info("memory", target_nodes=node)
                total += int(info["used_memory"])
            return total
        assert self._redis is not None
        info = await self._redis.info("memory")
        return int(info["used_memory"])

    async def room_keys(self) -> int:
        """How many room keys (``kibitz:room:...``; a cluster's ``kibitz:{gN}:room:...``)
        exist now."""
        if self._cluster is not None:  # every primary's keys, one SCAN after another
            found = self._cluster.scan_iter(match=CLUSTER_ROOM_PATTERN, count=SCAN_BATCH)
            return len({key async for key in found})
        assert self._redis is not None
        pattern = keys.ROOM_PREFIX + "*"
        return len([key async for key in self._redis.scan_iter(pattern, count=SCAN_BATCH)])

    async def aclose(self) -> None:
        if self._cluster is not None:
            await self._cluster.aclose()
        if self._redis is not None:
            await self._redis.aclose()


class BlockingServerStats:
    """The same, blocking, for a bench that pokes Redis between signals to its process."""

    def __init__(self, url: str) -> None:
        self._redis: redis.Redis | None = None
        self._cluster: sync_cluster.RedisCluster | None = None
        if is_cluster_url(url):
            parsed = ClusterURL.parse(url)
            nodes = [_sync_node(host, port) for host, port in parsed.nodes]
            self._cluster = sync_cluster.RedisCluster(
                startup_nodes=nodes, **_cluster_options(parsed)
            )
        else:
            self._redis = redis.Redis.from_url(url)

    def ping(self) -> bool:
        """Whether the server (every primary of a cluster) answers (raises the bus's
        connection error if it cannot)."""
        if self._cluster is not None:
            return all(
                bool(self._cluster.ping(target_nodes=node)) for node in _primaries(self._cluster)
            )
        assert self._redis is not None
        return bool(self._redis.ping())

    def clients(self) -> int:
        """Clients connected to the server (a cluster's primaries, their replicas'
        replication links apart), this client's connections not counted."""
        if self._cluster is not None:
            total = 0
            for node in _primaries(self._cluster):
                listed: Any = self._cluster.client_list(target_nodes=node)
                total += sum(1 for c in listed if "S" not in str(c.get("flags", ""))) - 1
            return total
        assert self._redis is not None
        return len(self._redis.client_list()) - 1

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
        if self._redis is not None:
            self._redis.close()


def _sync_node(host: str, port: int) -> sync_cluster.ClusterNode:
    return sync_cluster.ClusterNode(host, port)  # type: ignore[no-untyped-call]


def _primaries(cluster: sync_cluster.RedisCluster) -> list[sync_cluster.ClusterNode]:
    nodes: list[sync_cluster.ClusterNode] = cluster.get_primaries()  # type: ignore[no-untyped-call]
    return nodes
