"""The per-address counters in Redis: open connections and rooms made in a sliding window.

What the limits are, and what happens past them, is decided by the server
(``server/services/limits.py``); this module keeps the counts, each in one atomic script, so
every node of a cluster sees the same totals. Every key here expires on its own:

- ``addr:{address}:conns``    hash: node -> open WebSocket connections from that address
                              on that node; only live nodes (heartbeat keys; on a Redis
                              Cluster the control slot's ``node-beats``, handed to the
                              script) count, so a node that dies does not hold its
                              clients' places for ever; it expires ``CONNS_TTL_S`` after
                              the last change
- ``addr:{address}:creates``  sorted set: one member per room counted, scored by when
                              (Redis time, ms); members older than the window are dropped
                              as it is counted, so it holds at most the budget, and the key
                              expires a window after the last room

On a Redis Cluster these keys are on the control slot, so the limits are global: one
total for all nodes, as on a single Redis.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source
from kibitz.shared.bus.store import control_beats, nodes_arg

CONNS_TTL_S = 86_400  # a connection hash nobody touches for a day is gone, miscounted or not
_HANDLE_SEP = " "  # between the key and the member in a count's handle


@dataclass(frozen=True, slots=True)
class Count:
    """One counting step: whether it was admitted, and the total it saw (this one included
    when admitted, the total that refused it otherwise)."""

    admitted: bool
    total: int


@dataclass(frozen=True, slots=True)
class CreateCount(Count):
    """A room counted: ``handle`` (opaque; empty when refused) gives it back once."""

    handle: str = ""


def _count(reply: object) -> Count:
    total = int(str(reply))
    return Count(admitted=total >= 0, total=abs(total))


class AddressCounters:
    """The cluster-wide per-address counters of one node (``node``: its heartbeat name)."""

    def __init__(self, redis: aioredis.Redis, node: str) -> None:
        self.node = node
        self._connect = redis.register_script(source("nodes_lib", "address_connect"))
        self._disconnect = redis.register_script(source("address_disconnect"))
        self._count_create = redis.register_script(source("address_count_create"))
        self._refund_create = redis.register_script(source("address_refund_create"))

    async def connect(self, address: str, limit: int) -> Count:
        """Count a new connection of ``address`` on this node, unless the address's live
        connections, all nodes together, would pass ``limit`` (then nothing is counted)."""
        reply = await self._connect(
            keys=[keys.address_connections_key(address), *control_beats()],
            args=[self.node, limit, nodes_arg(), CONNS_TTL_S],
        )
        return _count(reply)

    async def disconnect(self, address: str) -> None:
        """Count out a connection of ``address`` on this node."""
        await self._disconnect(keys=[keys.address_connections_key(address)], args=[self.node])

    async def count_create(self, address: str, budget: int, window_ms: int) -> CreateCount:
        """Count a room of ``address`` unless ``budget`` rooms were counted in the last
        ``window_ms`` (by Redis's clock); then nothing is counted."""
        key = keys.address_creates_key(address)
        member = secrets.token_hex(8)
        counted = _count(await self._count_create(keys=[key], args=[window_ms, budget, member]))
        handle = f"{key}{_HANDLE_SEP}{member}" if counted.admitted else ""
        return CreateCount(counted.admitted, counted.total, handle)

    async def refund_create(self, handle: str) -> bool:
        """Give back the room counted with ``handle``; False if it was given back already,
        has left the window, or the handle is not one of ours (nothing changes)."""
        key, _, member = handle.rpartition(_HANDLE_SEP)
        if not _is_creates_key(key):
            return False
        return int(await self._refund_create(keys=[key], args=[member])) == 1


def _is_creates_key(key: str) -> bool:
    return key.startswith(keys.address_creates_key("")[: -len(":creates")]) and key.endswith(
        ":creates"
    )
