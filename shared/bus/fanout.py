"""The fan-out's own Redis commands, besides the room store's: the listener's liveness
probe, the once-per-room mark of a spectator-count broadcast, the subscriptions, and on a
Redis Cluster where each channel is served.

Decides how the hub (server/fanout/) talks to Redis for these, so that nothing there
names a Redis command: the probe is a ``PUBLISH`` on the node's own probe channel
(keys.probe_channel) sent over the node's command connection, so hearing it back on the
subscription proves the whole path alive; the mark is ``SET key 1 NX PX ttl`` on the
room's ``presence-sent`` key (keys.presence_sent_key), true for the first node to set it
within ``ttl``; the subscription is a connection of its own
(:class:`~kibitz.shared.bus.link.Subscription`). Failures are the bus's errors
(shared/bus/errors.py).

On a Redis Cluster (``keys.grouped()``) pub/sub is sharded: a channel is served by the
primary of its slot alone, ``SPUBLISH`` reaches the subscribers of that primary only, and
the hub holds one sharded subscription per primary it needs (server/fanout/shards.py).
:class:`SlotMap` tells which primary serves a channel, from ``CLUSTER SLOTS`` asked of
every node known, at once (a frozen node must not hold the answer up); a probe is
``SPUBLISH``\\ ed on a probe channel of a group that primary serves
(:meth:`FanoutBus.probe_channel_for`). :func:`publish` is the one way to publish on a
kibitz channel from Python, ``PUBLISH`` or ``SPUBLISH`` as the layout wants.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.crc import key_slot

from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import ClusterRedis
from kibitz.shared.bus.errors import BusConnectionError
from kibitz.shared.bus.link import Address, LinkedRedis, RedisLink, Subscription
from kibitz.shared.protocol.node import PROBE

SLOTS = 16384
SLOTS_TIMEOUT_S = 1.0  # longest wait for a node's CLUSTER SLOTS
CLIENT_REFRESH_S = 15.0  # longest wait for the command client to read its slot map


def publish_command() -> str:
    """The command that publishes on a kibitz channel: ``SPUBLISH`` on a Redis Cluster
    (a ``PUBLISH`` there is copied to every node of the cluster, and a sharded
    subscription does not hear it), ``PUBLISH`` on a single Redis (6.2 has no other)."""
    return "SPUBLISH" if keys.grouped() else "PUBLISH"


async def publish(client: aioredis.Redis, channel: str, message: str | bytes) -> int:
    """Publish ``message`` on ``channel`` (see :func:`publish_command`); how many
    subscribers heard it (on a cluster, those of the channel's primary)."""
    command = publish_command()
    heard: int = await client.execute_command(command, channel, message)  # type: ignore[no-untyped-call]
    return heard


def listen_address(client: aioredis.Redis) -> Address:
    """Where the hub of a node using ``client`` (shared/bus/connect.py's
    ``command_client``) subscribes: the one Redis, or on a Redis Cluster the first node
    its URL names (with the URL's credentials: the others are found from it)."""
    if isinstance(client, LinkedRedis):
        return client.link.address
    if isinstance(client, ClusterRedis):
        return client.url.address(*client.url.nodes[0])
    raise TypeError(f"no address to subscribe at for a {type(client).__name__}")


class SlotMap:
    """Which primary of a Redis Cluster serves each slot, as the cluster last said.

    :meth:`refresh` asks ``CLUSTER SLOTS`` of every node known (the seeds, then every
    node of the last answer, primaries and replicas), all at once, each within
    ``SLOTS_TIMEOUT_S``, and keeps the answer most of them give (right after a failover a
    node may not know yet). Addresses carry the seed's credentials and TLS.
    """

    def __init__(self, seeds: Sequence[Address]) -> None:
        if not seeds:
            raise ValueError("a slot map needs at least one node to ask")
        self.seeds = list(seeds)
        self._known: list[Address] = list(seeds)
        self._starts: list[int] = []  # each range's first slot, sorted
        self._ranges: list[tuple[int, int, Address]] = []

    @property
    def loaded(self) -> bool:
        return bool(self._ranges)

    @property
    def ranges(self) -> tuple[tuple[int, int, Address], ...]:
        """(first slot, last slot, primary), every range served."""
        return tuple(self._ranges)

    async def refresh(self, timeout_s: float = SLOTS_TIMEOUT_S) -> None:
        """Read the slot map again (``BusConnectionError`` if no node answers)."""
        asked = list(dict.fromkeys([*self._known, *self.seeds]))
        answers = await asyncio.gather(
            *(self._ask(address, timeout_s) for address in asked), return_exceptions=True
        )
        tables = [answer for answer in answers if isinstance(answer, tuple) and answer]
        if not tables:
            raise BusConnectionError("no node of the Redis Cluster told its slot map")
        table = Counter(tables).most_common(1)[0][0]
        self._ranges = [(start, end, owner) for start, end, owner, _ in table]
        self._starts = [start for start, _, _ in self._ranges]
        known = [address for *_, nodes in table for address in nodes]
        self._known = list(dict.fromkeys([*known, *self.seeds]))

    async def _ask(
        self, address: Address, timeout_s: float
    ) -> tuple[tuple[int, int, Address, tuple[Address, ...]], ...]:
        link = RedisLink(address, timeout_s)
        try:
            reply = await asyncio.wait_for(link.call(("CLUSTER", "SLOTS")), timeout_s)
        finally:
            await link.aclose()
        table = []
        for start, end, *nodes in reply:
            where = tuple(self._address(address, node) for node in nodes)
            table.append((int(start), int(end), where[0], where))
        return tuple(sorted(table, key=lambda row: row[0]))

    def _address(self, asked: Address, node: Sequence[Any]) -> Address:
        host = str(node[0]) if node[0] and node[0] != "?" else asked.host
        return dataclasses.replace(self.seeds[0], host=host, port=int(node[1]), path=None)

    def slot_owner(self, slot: int) -> Address | None:
        """The primary serving ``slot``, None if none does (or the map is not read yet)."""
        i = bisect.bisect_right(self._starts, slot) - 1
        if i < 0:
            return None
        start, end, owner = self._ranges[i]
        return owner if start <= slot <= end else None

    def owner(self, channel: str) -> Address | None:
        """The primary serving ``channel`` (a key's name: its slot's)."""
        return self.slot_owner(key_slot(channel.encode()))

    def primaries(self) -> set[Address]:
        return {owner for _, _, owner in self._ranges}


class HasClient(Protocol):
    """What holds the node's Redis client (the room store does)."""

    @property
    def redis(self) -> aioredis.Redis: ...


class FanoutBus:
    """One node's probes, presence marks and subscriptions (see the module's doc)."""

    def __init__(self, client: aioredis.Redis, address: Address, node: str) -> None:
        self._redis = client
        self.address = address  # where subscriptions connect, each on its own connection
        self.node = node
        #: On a single Redis, the probe's channel; on a Redis Cluster, the control slot's
        #: (that of its global channels, NODE_DIED, SEEKS_CHANNEL...).
        self.probe_channel = keys.probe_channel(node)
        #: Sharded pub/sub, one subscription per primary (a Redis Cluster).
        self.sharded = keys.grouped()
        seeds = [address]
        if isinstance(client, ClusterRedis):
            seeds += [client.url.address(host, port) for host, port in client.url.nodes]
        self.slots = SlotMap(list(dict.fromkeys(seeds)))
        self._nudge: asyncio.Task[None] | None = None  # the command client's refresh

    @classmethod
    def of(cls, holder: HasClient, address: Address, node: str) -> FanoutBus:
        """The bus for ``node``, sending commands on ``holder``'s client."""
        return cls(holder.redis, address, node)

    async def publish_probe(self, channel: str | None = None) -> None:
        """Publish the liveness probe on this node's probe channel (or ``channel``, one
        of :meth:`probe_channel_for`'s)."""
        await publish(self._redis, channel or self.probe_channel, PROBE)

    async def mark_presence_sent(self, room_id: str, ttl_ms: int) -> bool:
        """Mark ``room_id``'s spectator count as broadcast now; False if a node marked it
        within the last ``ttl_ms`` (its broadcast is newer than the caller's change)."""
        fresh = await self._redis.set(keys.presence_sent_key(room_id), "1", nx=True, px=ttl_ms)
        return bool(fresh)

    async def refresh_slots(self) -> None:
        """Read the slot map again (:class:`SlotMap`); if it changed, have the command
        client read its own again too, in the background (a client that only timed out
        on a frozen primary may not know yet that its replica took over)."""
        before = self.slots.ranges
        await self.slots.refresh()
        changed = before and before != self.slots.ranges
        if changed and isinstance(self._redis, ClusterRedis) and self._nudge is None:
            self._nudge = asyncio.create_task(self._refresh_client(self._redis))

    async def _refresh_client(self, client: ClusterRedis) -> None:
        try:
            with contextlib.suppress(Exception):  # it finds out by itself, later
                await asyncio.wait_for(client.refresh_slots(), CLIENT_REFRESH_S)
        finally:
            self._nudge = None

    async def stop(self) -> None:
        """Stop the command client's refresh, if one is under way."""
        nudge = self._nudge
        if nudge is not None:
            nudge.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await nudge

    async def subscribe(self, timeout_s: float, address: Address | None = None) -> Subscription:
        """A new subscription connection (to ``address``, by default the bus's), its
        handshake done within ``timeout_s``; sharded on a Redis Cluster."""
        return await Subscription.open(address or self.address, timeout_s, self.sharded)

    def probe_channel_for(self, address: Address) -> str | None:
        """The probe channel whose slot ``address`` serves, by the slot map: the control
        slot's if it serves that, else that of the first group it serves; None if it
        serves none of them."""
        if self.slots.owner(self.probe_channel) == address:
            return self.probe_channel
        for group in keys.groups():
            channel = keys.probe_channel(self.node, group)
            if self.slots.owner(channel) == address:
                return channel
        return None
