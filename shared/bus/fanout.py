"""The fan-out's own Redis commands, besides the room store's: the listener's liveness
probe, the once-per-room mark of a spectator-count broadcast, and the subscription.

Decides how the hub (server/fanout/) talks to Redis for these, so that nothing there
names a Redis command: the probe is a ``PUBLISH`` on the node's own probe channel
(keys.probe_channel) sent over the node's command connection, so hearing it back on the
subscription proves the whole path alive; the mark is ``SET key 1 NX PX ttl`` on the
room's ``presence-sent`` key (keys.presence_sent_key), true for the first node to set it
within ``ttl``; the subscription is a connection of its own
(:class:`~kibitz.shared.bus.link.Subscription`). Failures are the bus's errors
(shared/bus/errors.py).
"""

from __future__ import annotations

from typing import Protocol

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.link import Address, Subscription
from kibitz.shared.protocol.node import PROBE


class HasClient(Protocol):
    """What holds the node's Redis client (the room store does)."""

    @property
    def redis(self) -> aioredis.Redis: ...


class FanoutBus:
    """One node's probe, presence marks and subscriptions (see the module's doc)."""

    def __init__(self, client: aioredis.Redis, address: Address, node: str) -> None:
        self._redis = client
        self.address = address  # where subscriptions connect, each on its own connection
        self.probe_channel = keys.probe_channel(node)

    @classmethod
    def of(cls, holder: HasClient, address: Address, node: str) -> FanoutBus:
        """The bus for ``node``, sending commands on ``holder``'s client."""
        return cls(holder.redis, address, node)

    async def publish_probe(self) -> None:
        """Publish the liveness probe on this node's probe channel."""
        await self._redis.publish(self.probe_channel, PROBE)

    async def mark_presence_sent(self, room_id: str, ttl_ms: int) -> bool:
        """Mark ``room_id``'s spectator count as broadcast now; False if a node marked it
        within the last ``ttl_ms`` (its broadcast is newer than the caller's change)."""
        fresh = await self._redis.set(keys.presence_sent_key(room_id), "1", nx=True, px=ttl_ms)
        return bool(fresh)

    async def subscribe(self, timeout_s: float) -> Subscription:
        """A new subscription connection, its handshake done within ``timeout_s``."""
        return await Subscription.open(self.address, timeout_s)
