"""What the benches read about a Redis server itself: memory, clients, room keys, liveness.

These are measurements, not part of serving: ``kibitz bench archive`` watches the memory
and the room keys fall back once games are archived, ``kibitz bench recovery`` waits for a
restarted Redis to answer and counts the cluster's connections. Nothing here writes.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis

from kibitz.shared.bus import keys

SCAN_BATCH = 1_000  # keys asked for per SCAN step


class ServerStats:
    """Async reads of one Redis server's figures, on a connection of its own."""

    def __init__(self, url: str) -> None:
        self._redis = aioredis.from_url(url, decode_responses=True)

    async def used_memory(self) -> int:
        """Bytes the server's allocator holds for data (``INFO memory``'s ``used_memory``)."""
        info: Any = await self._redis.info("memory")
        return int(info["used_memory"])

    async def room_keys(self) -> int:
        """How many room keys (``kibitz:room:...``) exist now."""
        pattern = keys.ROOM_PREFIX + "*"
        return len([key async for key in self._redis.scan_iter(pattern, count=SCAN_BATCH)])

    async def aclose(self) -> None:
        await self._redis.aclose()


class BlockingServerStats:
    """The same, blocking, for a bench that pokes Redis between signals to its process."""

    def __init__(self, url: str) -> None:
        self._redis = redis.Redis.from_url(url)

    def ping(self) -> bool:
        """Whether the server answers (raises the bus's connection error if it cannot)."""
        return bool(self._redis.ping())

    def clients(self) -> int:
        """Clients connected to the server, this connection not counted."""
        return len(self._redis.client_list()) - 1

    def close(self) -> None:
        self._redis.close()
