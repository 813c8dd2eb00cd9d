"""Sharded pub/sub on a real Redis Cluster (3 primaries, a replica each, node timeout 1 s):
the sharded Subscription (shared/bus/link.py) and the hub's listener on a cluster
(server/fanout/shards.py, placement.py), through a slot move, a primary killed and a
primary frozen.

Each fault test starts a cluster of its own (its faults change the cluster)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.crc import key_slot

from kibitz.server.fanout.listener import PROBE_S, STALE_S
from kibitz.server.fanout.shards import ShardedListener
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import command_client
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster, EmbeddedClusterNode
from kibitz.shared.bus.fanout import FanoutBus, SlotMap, listen_address, publish
from kibitz.shared.bus.link import Address, Message, Subscription

pytestmark = [pytest.mark.redis_cluster, pytest.mark.timeout(120)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    started = EmbeddedCluster(
        tmp_path / "cluster", primaries=3, replicas_per_primary=1, node_timeout_ms=1000
    ).start()
    try:
        yield started
    finally:
        for node in started.nodes:
            if node.frozen:
                started.thaw(node)
        started.stop()


@pytest.fixture
async def client(cluster: EmbeddedCluster) -> AsyncIterator[Any]:
    redis = command_client(cluster.url, timeout_s=2.0)  # configures the cluster layout
    assert keys.grouped()
    yield redis
    await redis.aclose()


def address_of(cluster: EmbeddedCluster, node: EmbeddedClusterNode) -> Address:
    return Address(host="127.0.0.1", port=node.port, password=cluster.password)


def rooms_on_each_primary(cluster: EmbeddedCluster, per_primary: int = 1) -> list[str]:
    """Room ids whose channels are spread over the primaries, ``per_primary`` each."""
    wanted = {node.port: per_primary for node in cluster.primaries()}
    rooms, i = [], 0
    while any(wanted.values()):
        room_id, i = f"room{i}", i + 1
        port = cluster.node_for_key(keys.room_channel(room_id)).port
        if wanted[port]:
            wanted[port] -= 1
            rooms.append(room_id)
    return rooms


async def next_message(subscription: Subscription, timeout_s: float = 5.0) -> Message:
    message = await subscription.get_message(timeout_s)
    assert message is not None, f"no message in {timeout_s} s"
    return message


async def eventually(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.05)


# -- the sharded Subscription ---------------------------------------------------------------


async def test_a_sharded_subscription_confirms_delivers_and_tells_what_it_lost(
    cluster: EmbeddedCluster, client: Any
) -> None:
    primary = cluster.primaries()[0]
    here = [f"kibitz:{keys.group_tag(g)}:x" for g in keys.groups()]
    here = [c for c in here if cluster.node_for_key(c).port == primary.port][:2]
    elsewhere = next(
        c for c in (f"kibitz:{keys.group_tag(g)}:y" for g in keys.groups())
        if cluster.node_for_key(c).port != primary.port
    )  # fmt: skip
    assert len(here) == 2 and key_slot(here[0].encode()) != key_slot(here[1].encode())
    subscription = await Subscription.open(address_of(cluster, primary), 5.0, sharded=True)
    try:
        subscription.subscribe(*here, elsewhere)  # two slots here: one SSUBSCRIBE each
        assert await next_message(subscription) == Message("subscribe", here[0], 1)
        assert await next_message(subscription) == Message("subscribe", here[1], 2)
        refused = await next_message(subscription)  # MOVED: served by another primary
        assert (refused.kind, refused.channel) == ("dropped", elsewhere)
        assert "MOVED" in refused.data
        assert await publish(client, here[1], "hello") == 1  # SPUBLISH
        assert await next_message(subscription) == Message("message", here[1], "hello")
        subscription.unsubscribe(here[0])
        assert await next_message(subscription) == Message("unsubscribe", here[0], 1)
        # The slot of here[1] moves away: Redis tells with a sunsubscribe of its own.
        target = next(n for n in cluster.primaries() if n.port != primary.port)
        await asyncio.to_thread(cluster.move_slot, key_slot(here[1].encode()), target)
        dropped = await next_message(subscription)
        assert (dropped.kind, dropped.channel) == ("dropped", here[1])
        await publish(client, here[1], "not here")
        assert await subscription.get_message(0.3) is None
    finally:
        subscription.close()


async def test_the_slot_map_names_each_channels_primary(
    cluster: EmbeddedCluster, client: Any
) -> None:
    slots = SlotMap([listen_address(client)])
    await slots.refresh()
    assert slots.primaries() == {address_of(cluster, n) for n in cluster.primaries()}
    for room_id in rooms_on_each_primary(cluster, 2):
        name = keys.room_channel(room_id)
        assert slots.owner(name) == address_of(cluster, cluster.node_for_key(name))


# -- the listener on a cluster -----------------------------------------------------------------


class Followers:
    """What the listener reads of the hub's followers: the rooms, and where messages go."""

    def __init__(self, rooms: Iterable[str] = ()) -> None:
        self.rooms: dict[str, set[object]] = {room_id: {object()} for room_id in rooms}
        self.heard: list[tuple[str, str]] = []

    def deliver(self, channel: str, data: str) -> None:
        self.heard.append((channel, data))


class Harness:
    """A ShardedListener with the hub's loops around it (listen, probe, unsubscriber)."""

    def __init__(self, client: Any, rooms: Iterable[str] = ()) -> None:
        self.bus = FanoutBus(client, listen_address(client), "n1")
        self.followers = Followers(rooms)
        self.resynced: list[str] = []
        self.resync_alls = 0
        self.died: list[str] = []
        self.listener = ShardedListener(
            self.bus, self.followers, self._resync_all,  # type: ignore[arg-type]
            self.resynced.extend, self.resynced.append,
        )  # fmt: skip
        self.listener.channels[keys.NODE_DIED] = self.died.append
        self.tasks: list[asyncio.Task[None]] = []

    def _resync_all(self) -> None:
        self.resync_alls += 1

    async def _probe(self) -> None:
        while True:
            await self.listener.probe()
            await asyncio.sleep(PROBE_S)

    async def start(self) -> None:
        for body in (self.listener.listen, self._probe, self.listener.unsubscriber):
            self.tasks.append(asyncio.create_task(body()))
        await asyncio.wait_for(self.listener.ready.wait(), 10)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def shard_of(self, room_id: str) -> Any:
        return self.listener.placement.where.get(keys.room_channel(room_id))

    def subscribed_at(self, room_id: str) -> Address | None:
        """The primary the room's channel is subscribed at (None: nowhere)."""
        address: Address | None = getattr(self.shard_of(room_id), "address", None)
        return address

    async def follow(self, room_id: str) -> None:
        self.followers.rooms[room_id] = {object()}
        await self.listener.subscribe_room(room_id)

    async def hears(self, client: Any, room_id: str, text: str, timeout_s: float = 10) -> None:
        """Publish ``text`` on the room's channel until the listener hears it."""
        channel = keys.room_channel(room_id)
        deadline = time.monotonic() + timeout_s
        while (channel, text) not in self.followers.heard:
            if time.monotonic() > deadline:
                raise AssertionError(f"{room_id} did not hear {text!r} in {timeout_s} s")
            with contextlib.suppress(Exception):  # a failover under way
                await publish(client, channel, text)
            await asyncio.sleep(0.1)


@pytest.fixture
async def harness(client: Any) -> AsyncIterator[Harness]:
    made = Harness(client)
    yield made
    await made.stop()


async def follow_a_room_on_each_primary(cluster: EmbeddedCluster, harness: Harness) -> list[str]:
    """Start ``harness`` and follow one room on each primary (each subscription confirmed);
    those rooms."""
    rooms = rooms_on_each_primary(cluster)
    await harness.start()
    for room_id in rooms:
        await harness.follow(room_id)
    return rooms


async def room_follows_the_failover(
    cluster: EmbeddedCluster, harness: Harness, room_id: str, lost: EmbeddedClusterNode
) -> None:
    """Wait for the failover of primary ``lost`` (the primary of ``room_id``'s channel),
    then until the listener has the room subscribed at the promoted replica."""
    promoted = await asyncio.to_thread(cluster.wait_for_failover, lost, 30)
    await eventually(
        lambda: harness.subscribed_at(room_id) == address_of(cluster, promoted),
        15,
        "the room subscribed at the promoted replica",
    )


async def test_rooms_on_every_primary_and_the_global_channels_are_heard(
    cluster: EmbeddedCluster, client: Any, harness: Harness
) -> None:
    rooms = rooms_on_each_primary(cluster, 2)
    harness.followers.rooms[rooms[0]] = {object()}  # followed before the start
    await harness.start()
    assert harness.listener.healthy
    for room_id in rooms[1:]:
        await harness.follow(room_id)  # confirmed when it returns
    for room_id in rooms:
        assert await publish(client, keys.room_channel(room_id), f"v-{room_id}") == 1
    assert await publish(client, keys.NODE_DIED, "n9") == 1  # on the control slot
    expected = {(keys.room_channel(r), f"v-{r}") for r in rooms}
    await eventually(lambda: expected <= set(harness.followers.heard), 5, "every room heard")
    await eventually(lambda: harness.died == ["n9"], 5, "the global channel heard")
    shards = harness.listener.placement.shards
    assert set(shards) == {address_of(cluster, n) for n in cluster.primaries()}
    assert harness.listener.subscribed_rooms == len(rooms)
    # One room's last follower leaves: it is unsubscribed on its primary alone.
    del harness.followers.rooms[rooms[0]]
    harness.listener.room_emptied(rooms[0])
    await eventually(lambda: harness.shard_of(rooms[0]) is None, 5, "unsubscribed")
    await asyncio.sleep(0.2)  # Redis takes the SUNSUBSCRIBE
    assert await publish(client, keys.room_channel(rooms[0]), "late") == 0
    assert harness.resynced == [] and harness.resync_alls == 0 and harness.listener.healthy


async def test_a_moved_slot_is_followed_to_its_new_primary(
    cluster: EmbeddedCluster, client: Any, harness: Harness
) -> None:
    rooms = await follow_a_room_on_each_primary(cluster, harness)
    moved = rooms[0]
    source = cluster.node_for_key(keys.room_channel(moved))
    target = next(n for n in cluster.primaries() if n.port != source.port)
    others = {r: harness.shard_of(r) for r in rooms[1:]}
    await asyncio.to_thread(cluster.move_slot, key_slot(keys.room_channel(moved).encode()), target)
    # Redis pushes a sunsubscribe; the listener places the channel at the new owner and
    # re-syncs the room once Redis confirms it there.
    await eventually(
        lambda: harness.subscribed_at(moved) == address_of(cluster, target),
        10,
        "the channel subscribed at its new primary",
    )
    await eventually(lambda: harness.resynced == [moved], 5, "the moved room re-synced")
    await harness.hears(client, moved, "after the move")
    assert {r: harness.shard_of(r) for r in rooms[1:]} == others  # untouched
    assert harness.resync_alls == 0
    await eventually(lambda: harness.listener.healthy, 5, "healthy")


async def test_a_killed_primary_is_replaced_and_its_rooms_follow(
    cluster: EmbeddedCluster, client: Any, harness: Harness
) -> None:
    rooms = await follow_a_room_on_each_primary(cluster, harness)
    victim_room = rooms[0]
    victim = cluster.node_for_key(keys.room_channel(victim_room))
    survivors = {r: harness.shard_of(r) for r in rooms[1:]}
    cluster.kill(victim)
    await eventually(lambda: not harness.listener.healthy, STALE_S + 2, "the loss seen")
    await room_follows_the_failover(cluster, harness, victim_room, victim)
    await eventually(lambda: victim_room in harness.resynced, 5, "the room re-synced")
    await harness.hears(client, victim_room, "after the failover")
    for room_id in rooms[1:]:
        await harness.hears(client, room_id, "the others go on")
    assert {r: harness.shard_of(r) for r in rooms[1:]} == survivors  # untouched
    assert set(harness.resynced) == {victim_room}  # the others were not touched
    assert harness.resync_alls == 0
    await eventually(lambda: harness.listener.healthy, 10, "healthy again")


async def test_the_probe_finds_a_frozen_primary(
    cluster: EmbeddedCluster, client: Any, harness: Harness
) -> None:
    rooms = await follow_a_room_on_each_primary(cluster, harness)
    frozen_room = rooms[0]
    frozen = cluster.node_for_key(keys.room_channel(frozen_room))
    frozen_shard = harness.shard_of(frozen_room)
    cluster.freeze(frozen)
    started = time.monotonic()
    # Its connection stays open, but its probe is not heard back: the shard is dropped.
    await eventually(lambda: not harness.listener.healthy, STALE_S + 2, "the silence seen")
    await eventually(
        lambda: harness.shard_of(frozen_room) is not frozen_shard, STALE_S + 2, "dropped"
    )
    assert time.monotonic() - started < STALE_S + 2
    await room_follows_the_failover(cluster, harness, frozen_room, frozen)
    await harness.hears(client, frozen_room, "after the freeze")
    await eventually(lambda: frozen_room in harness.resynced, 5, "the room re-synced")
    cluster.thaw(frozen)  # it comes back as a replica: nothing changes for the listener
    await asyncio.sleep(1.0)
    await harness.hears(client, frozen_room, "after the thaw")
    await eventually(lambda: harness.listener.healthy, 10, "healthy again")


async def test_a_lost_connection_is_made_again_and_its_rooms_re_synced(
    cluster: EmbeddedCluster, client: Any, harness: Harness
) -> None:
    rooms = await follow_a_room_on_each_primary(cluster, harness)
    cut_room = rooms[0]
    node = cluster.node_for_key(keys.room_channel(cut_room))
    before = harness.shard_of(cut_room)
    others = {r: harness.shard_of(r) for r in rooms[1:]}
    with node.client() as admin:
        assert admin.execute_command("CLIENT", "KILL", "TYPE", "pubsub") >= 1
    await eventually(
        lambda: harness.shard_of(cut_room) not in (None, before), 10, "subscribed again"
    )
    assert harness.shard_of(cut_room).address == before.address  # the same primary
    await eventually(lambda: harness.resynced == [cut_room], 5, "its room re-synced")
    await harness.hears(client, cut_room, "after the cut")
    assert {r: harness.shard_of(r) for r in rooms[1:]} == others
    await eventually(lambda: harness.listener.healthy, 5, "healthy")
