"""The deadline sweeper (server/loops/deadlines.py).

Which slot groups a node owns (rendezvous hashing: a pure function). On a real Redis
Cluster (the session's ``redis_cluster``, the default 64 slot groups): a sweeper reads its
own groups every tick and every group once a second, so a room of its own group ends
within a tick or two of its deadline and a room of another live node's group within about
a second, while the commands it sends (INFO commandstats, summed over the primaries) are
its share at the fast ticks; a failed read of the live nodes keeps the last list. On a
single Redis (the module's ``own_redis``) it is still one read a tick.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from kibitz.server.loops.deadlines import (
    BACKUP_INTERVAL_S,
    MEMBERSHIP_INTERVAL_S,
    SWEEP_INTERVAL_S,
    DeadlineSweeper,
    owned_groups,
)
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import AsyncClient, command_client
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from kibitz.shared.protocol.client_in import Create, Join
from tests.conftest import flush_cluster

GROUPS = 64  # the default layout
CLOCK = {"initial_ms": 60_000, "increment_ms": 0}
FIRST_MOVE_MS = 300  # a first move not made this long after the join: the game aborts
SETTLE_S = 10.0  # the longest wait for the sweeper to take its groups


# -- who owns which group: a pure function ---------------------------------------------


def _owners(nodes: list[str], groups: int) -> dict[int, str]:
    """group -> its owner among ``nodes``, each node asked for its own groups."""
    owners: dict[int, str] = {}
    for node in nodes:
        for group in owned_groups(node, nodes, groups):
            assert group not in owners, f"group {group}: owned by {owners[group]} and {node}"
            owners[group] = node
    return owners


def test_every_group_has_exactly_one_owner_among_the_live_nodes() -> None:
    for count in (1, 2, 3, 5, 13):
        nodes = [f"node-{i}" for i in range(count)]  # names of one length
        assert sorted(_owners(nodes, GROUPS)) == list(range(GROUPS))


def test_the_node_itself_counts_as_live() -> None:
    assert owned_groups("a", [], GROUPS) == frozenset(range(GROUPS))
    assert owned_groups("a", ["b"], GROUPS) == owned_groups("a", ["a", "b"], GROUPS)


def test_the_groups_are_shared_about_evenly() -> None:
    nodes = [f"n{i}" for i in range(8)]
    shares = [len(owned_groups(node, nodes, 1024)) for node in nodes]
    assert sum(shares) == 1024
    assert all(0.7 * 128 <= share <= 1.3 * 128 for share in shares), shares


def test_a_node_joining_moves_only_its_share() -> None:
    nodes = [f"n{i}" for i in range(8)]
    before = _owners(nodes, 1024)
    after = _owners([*nodes, "n8"], 1024)
    moved = {group for group in before if before[group] != after[group]}
    assert moved == {group for group, owner in after.items() if owner == "n8"}
    assert 0.7 * 1024 / 9 <= len(moved) <= 1.3 * 1024 / 9
    # And leaving again moves them back: nothing else changes.
    assert _owners(nodes, 1024) == before


def test_the_owners_are_the_same_in_every_process() -> None:
    code = (
        "from kibitz.server.loops.deadlines import owned_groups\n"
        "print(sorted(owned_groups('node-a', ['node-b', 'node-c'], 64)))"
    )
    printed = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout  # fmt: skip
        for seed in ("1", "2")
    }
    assert printed == {f"{sorted(owned_groups('node-a', ['node-b', 'node-c'], 64))}\n"}


# -- on a Redis Cluster --------------------------------------------------------------------


class CountingSweeper(DeadlineSweeper):
    """A sweeper that counts its sweeps: those of every group, and those of its own."""

    full = 0
    fast = 0

    async def sweep(self, groups: frozenset[int] | None = None) -> int:
        if groups is None:
            self.full += 1
        else:
            assert groups == self.owned
            self.fast += 1
        return await super().sweep(groups)


@pytest.fixture
async def cluster_client(redis_cluster: EmbeddedCluster) -> AsyncIterator[AsyncClient]:
    """A node's client on the emptied cluster, with the default 64 slot groups."""
    flush_cluster(redis_cluster)
    opened = command_client(f"{redis_cluster.url}/?groups={GROUPS}")
    assert keys.group_count() == GROUPS
    yield opened
    await opened.aclose()
    keys.configure(0)


async def _live_stores(client: AsyncClient, names: list[str]) -> list[RoomStore]:
    """A store per node name, each node beaten once (live for NODE_TTL_S)."""
    stores = [RoomStore(client, node=name) for name in names]
    await stores[0].ensure_groups()
    for store in stores:
        await store.heartbeat()
    return stores


async def _settled(sweeper: DeadlineSweeper, owned: frozenset[int]) -> None:
    """Wait until the running ``sweeper`` sweeps ``owned`` at its fast ticks."""
    until = time.monotonic() + SETTLE_S
    while sweeper.owned != owned:
        assert time.monotonic() < until, f"the sweeper owns {sweeper.owned}"
        await asyncio.sleep(0.02)


def _calls(cluster: EmbeddedCluster, command: str) -> int:
    """Calls of ``command`` so far, summed over the primaries (INFO commandstats)."""
    total = 0
    for node in cluster.primaries():
        with node.client() as direct:
            stats: Any = direct.info("commandstats")
            total += int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
    return total


async def _waiting_rooms(service: RoomService, mine: frozenset[int]) -> tuple[str, str]:
    """Two waiting timed rooms (no deadline yet): one in a group of ``mine``, one not."""
    found: dict[bool, str] = {}
    for _ in range(200):
        room, _seat = await service.create(Create(game="tictactoe", seat=0, clock=CLOCK), "x")
        found.setdefault(keys.group_of(room.id) in mine, room.id)
        if len(found) == 2:
            return found[True], found[False]
    raise AssertionError("no room in each node's groups in 200 tries")


async def _lateness_ms(service: RoomService, deadlines: Mapping[str, float]) -> dict[str, int]:
    """How long after its deadline each room ended (by the Redis clock), as polled."""
    late: dict[str, int] = {}
    until = time.monotonic() + 15.0
    while len(late) < len(deadlines) and time.monotonic() < until:
        for room_id, deadline_ms in deadlines.items():
            if room_id not in late and (await service.get(room_id)).status != "playing":
                late[room_id] = service.clock_ms() - int(deadline_ms)
        await asyncio.sleep(0.02)
    assert late.keys() == deadlines.keys(), f"not ended: {set(deadlines) - set(late)}"
    return late


@pytest.mark.asyncio
@pytest.mark.redis_cluster
async def test_a_room_of_another_live_nodes_group_ends_within_the_backup_interval(
    cluster_client: AsyncClient,
) -> None:
    a, _b = await _live_stores(cluster_client, ["node-a", "node-b"])
    owned = owned_groups("node-a", ["node-b"], GROUPS)
    assert 0 < len(owned) < GROUPS
    service = RoomService(a, first_move_ms=FIRST_MOVE_MS)
    mine, theirs = await _waiting_rooms(service, owned)
    sweeper = DeadlineSweeper(service)  # only node A sweeps
    task = asyncio.create_task(sweeper.run())
    try:
        await _settled(sweeper, owned)
        deadlines: dict[str, float] = {}
        for room_id in (mine, theirs):
            await service.join(Join(room=room_id), "o")
            score = await cluster_client.zscore(keys.deadlines(keys.group_of(room_id)), room_id)
            assert score is not None
            deadlines[room_id] = score
        late = await _lateness_ms(service, deadlines)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sweeper.ended == 2
    assert late[mine] < 500, late  # a fast tick of its owner
    assert late[theirs] < (BACKUP_INTERVAL_S + 1.5) * 1000, late  # a backup sweep


@pytest.mark.asyncio
@pytest.mark.redis_cluster
@pytest.mark.parametrize("nodes", [2, 4])
async def test_the_fast_ticks_read_only_the_nodes_own_groups(
    cluster_client: AsyncClient, redis_cluster: EmbeddedCluster, nodes: int
) -> None:
    names = [f"node-{letter}" for letter in "abcd"[:nodes]]
    a, *_others = await _live_stores(cluster_client, names)
    owned = owned_groups("node-a", names, GROUPS)
    sweeper = CountingSweeper(RoomService(a))
    task = asyncio.create_task(sweeper.run())
    try:
        await _settled(sweeper, owned)
        reads_before = _calls(redis_cluster, "zrangebyscore")
        fast_before, full_before = sweeper.fast, sweeper.full
        await asyncio.sleep(3.0)
        reads = _calls(redis_cluster, "zrangebyscore") - reads_before
        fast, full = sweeper.fast - fast_before, sweeper.full - full_before
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert fast >= 5 and full >= 1, (fast, full)
    assert full <= 3.0 / BACKUP_INTERVAL_S + 1
    # A fast tick reads the node's groups, a backup sweep every group, and the read of the
    # live nodes is one more (its script's); a tick under way at either end, one more.
    expected = fast * len(owned) + full * GROUPS
    membership = 3.0 / MEMBERSHIP_INTERVAL_S + 1
    assert expected - GROUPS <= reads <= expected + membership + GROUPS, (reads, expected)
    # Every group at every tick, as each node read before: far more.
    old = (fast + full) * GROUPS
    assert reads < (0.7 if nodes == 2 else 0.45) * old, (reads, old, len(owned))


@pytest.mark.asyncio
@pytest.mark.redis_cluster
async def test_a_failed_read_of_the_live_nodes_keeps_the_last_list(
    cluster_client: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    a, _b = await _live_stores(cluster_client, ["node-a", "node-b"])
    sweeper = DeadlineSweeper(RoomService(a))
    await sweeper.read_live_nodes()
    owned = owned_groups("node-a", ["node-b"], GROUPS)
    assert (sweeper.live, sweeper.owned) == (("node-a", "node-b"), owned)
    # The node beats cannot be read (a key of the wrong type: Redis refuses the script).
    await cluster_client.delete(keys.NODE_BEATS)
    await cluster_client.set(keys.NODE_BEATS, "not a sorted set")
    with caplog.at_level(logging.DEBUG, logger="kibitz.server.loops.deadlines"):
        for _ in range(3):
            await sweeper.read_live_nodes()
    assert (sweeper.live, sweeper.owned) == (("node-a", "node-b"), owned)
    failed = [r for r in caplog.records if "could not read the live nodes" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
    assert await sweeper.sweep(sweeper.owned) == 0  # the sweep goes on
    # Readable again, with node B gone: node A owns every group.
    await cluster_client.delete(keys.NODE_BEATS)
    await a.heartbeat()
    await sweeper.read_live_nodes()
    assert (sweeper.live, sweeper.owned) == (("node-a",), frozenset(range(GROUPS)))


# -- on a single Redis ---------------------------------------------------------------------


@pytest.mark.asyncio
async def test_on_a_single_redis_every_tick_is_one_read(own_redis: EmbeddedRedis) -> None:
    client = command_client(own_redis.url)
    try:
        await client.flushall()
        store = RoomStore(client, node="node-a")
        await store.heartbeat()
        sweeper = CountingSweeper(RoomService(store))
        task = asyncio.create_task(sweeper.run())
        try:
            until = time.monotonic() + SETTLE_S
            while sweeper.full == 0:
                assert time.monotonic() < until
                await asyncio.sleep(0.02)
            before: Any = await client.info("commandstats")
            ticks_before = sweeper.full
            await asyncio.sleep(1.0)
            after: Any = await client.info("commandstats")
            ticks = sweeper.full - ticks_before
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        await client.aclose()

    def delta(command: str) -> int:
        calls = [int(s.get(f"cmdstat_{command}", {}).get("calls", 0)) for s in (before, after)]
        return calls[1] - calls[0]

    assert sweeper.fast == 0 and ticks >= 1.0 / SWEEP_INTERVAL_S / 4, ticks
    assert ticks - 1 <= delta("zrangebyscore") <= ticks + 1  # one read a tick
    assert delta("evalsha") == delta("eval") == 0  # no read of the live nodes
    assert sweeper.owned is None
