"""Faults of a Redis Cluster while games are played on it (two nodes, two workers).

Each test starts a cluster of its own (3 primaries, a replica each, node timeout 1 s),
plays Othello games (human pairs across and on one node, two against the AI: the chaos
harness's ``mixed_games``, plus more pairs until the primary the fault hits serves one of
them), injects one fault a couple of seconds in, and then checks, as the chaos suite does
(harness.DrivenGame.verify): every game finishes with every move, each client's view is
what Redis holds, and every committed version reached each client within
DELIVERY_BOUND_S of its commit or of the end of the fault. And after the fault:

- no AI job is lost or stuck: the AI games finished, and the groups' AI outboxes, the
  fair queue and the workers' pending jobs are empty;
- no archive entry is lost: every game is in the database;
- the per-address connection limit still holds across the nodes;
- every node answers /healthz 200.

The faults: the primary of the control slot (jobs, results, the fair queue, heartbeats;
it serves rooms too) killed with SIGKILL (its replica takes over); a primary frozen
(SIGSTOP) past the node timeout until its replica took over, then resumed (it comes back
as a replica); the slots of two rooms (a human pair's, an AI game's) moved to another
primary mid-game (MIGRATE, as ``redis-cli --cluster reshard`` does); one node's link to
one primary cut (a partition, held for CUT_S by the proxy in front of that primary) and
restored; and a failover that loses the writes its primary acknowledged last (its
replica's link held back by the proxy).

What a failover may lose: replication is asynchronous, so the writes a primary
acknowledged in its last moment may not have reached its replica. A lost commit leaves
the room at an older version than some client saw: the client's next move is refused
as stale or its resume is answered with a resync, so it converges on what Redis holds
(verify checks the final views), and the printout counts the states clients saw that
Redis lost. An archive entry lost with its commit is written again by the next commit
that ends the game; the archive write is idempotent (the game id is the key).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from kibitz.server.archive.database import Archive
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded_cluster import EmbeddedClusterNode
from tests.chaos.harness import (
    DELIVERY_BOUND_S,
    Cluster,
    DrivenGame,
    HealthProbe,
    async_wait_until,
    connection_limit_problems,
    healthy_again,
    mixed_games,
    play_all,
    report,
)
from tests.cluster.conftest import CONNECTION_LIMIT, LIMIT_ADDRESS

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(150)]

#: How long one node's link to one primary stays cut (past the node's 5 s command
#: timeout, so that commands on it fail rather than just wait).
CUT_S = 6.0
MORE_GAMES = 6  # at most this many more pairs to get a room onto the primary a fault hits


async def games_with_one_on(
    cluster: Cluster, seed: int, wanted: Callable[[], EmbeddedClusterNode]
) -> tuple[list[DrivenGame], EmbeddedClusterNode]:
    """``mixed_games``, plus human pairs until primary ``wanted()`` serves one; (the
    games, that primary)."""
    a, b = cluster.nodes
    games = await mixed_games(cluster, a, b, seed=seed)
    target = await asyncio.to_thread(wanted)
    for i in range(MORE_GAMES):
        if any(cluster.primary_of_room(g.room).node_id == target.node_id for g in games):
            break
        games.append(
            await DrivenGame.start(
                cluster, "othello", (a, b)[i % 2], (b, a)[i % 2], seed=seed + 10 + i
            )
        )
    on_target = [g.room for g in games if cluster.primary_of_room(g.room).node_id == target.node_id]
    assert on_target, f"none of {len(games)} rooms on {target}"
    print(f"{len(games)} games, {len(on_target)} on {target}: {on_target}")
    return games, target


def ai_work_left(cluster: Cluster) -> list[str]:
    """AI jobs not yet done: in a group's outbox, waiting in the fair queue, or pending on
    a worker."""
    r = cluster.sync_redis()
    left = []
    try:
        for group in keys.groups():
            if n := r.xlen(keys.ai_outbox(group)):
                left.append(f"{keys.ai_outbox(group)}: {n}")
        if n := r.hlen(keys.AI_WAITING):
            left.append(f"{keys.AI_WAITING}: {n}")
        if r.exists(keys.JOBS):
            pending = int(r.xpending(keys.JOBS, keys.WORKERS_GROUP)["pending"])
            if pending:
                left.append(f"{keys.JOBS}: {pending} pending")
    finally:
        r.close()
    return left


async def after_the_fault(cluster: Cluster, games: list[DrivenGame]) -> list[str]:
    """What must hold once the games are over (see the module's docstring)."""
    problems: list[str] = []
    for node in cluster.nodes:
        if not await healthy_again(node):
            problems.append(f"node {node.name}: /healthz not 200 after the fault")
    left: list[str] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = await asyncio.to_thread(ai_work_left, cluster)
        if not left:
            break
        await asyncio.sleep(0.5)
    if left:
        problems.append(f"AI work left after every game ended: {left}")
    assert cluster.database_url is not None
    archive = await Archive.open(cluster.database_url)
    try:
        rooms = [g.room for g in games]

        async def archived() -> bool:
            return all([await archive.get(room) is not None for room in rooms])

        try:
            await async_wait_until(archived, 20, "every game in the database")
        except AssertionError:
            missing = [room for room in rooms if await archive.get(room) is None]
            problems.append(f"games never archived: {missing}")
    finally:
        await archive.close()
    problems += await connection_limit_problems(cluster, CONNECTION_LIMIT, LIMIT_ADDRESS)
    print(f"states seen by clients that Redis lost: {lost_states(games)}")
    return problems


def lost_states(games: list[DrivenGame]) -> int:
    """The states clients were sent that Redis no longer holds (a failover lost them)."""
    return sum(
        1
        for g in games
        for p in g.players
        for _t, _v, moves in p.seen
        if g.record is not None and moves != g.record["moves"][: len(moves)]
    )


async def test_control_primary_killed_mid_game(make_fault_cluster) -> None:
    cluster = make_fault_cluster()
    games, victim = await games_with_one_on(cluster, 1000, cluster.control_primary)

    async def kill() -> None:
        t0 = time.time()
        promoted = await asyncio.to_thread(cluster.kill_primary, victim)
        cluster.fault_window(t0, time.time())
        print(f"{victim} killed; {promoted} took over in {time.time() - t0:.1f} s")

    problems = await play_all(games, timeout=90, fault=kill)
    problems += await after_the_fault(cluster, games)
    assert not problems, report(problems, cluster)


async def test_primary_frozen_past_the_node_timeout(make_fault_cluster) -> None:
    cluster = make_fault_cluster()

    def a_room_primary() -> EmbeddedClusterNode:
        control = cluster.control_primary()
        return next(p for p in cluster.rc.primaries() if p.node_id != control.node_id)

    games, victim = await games_with_one_on(cluster, 1100, a_room_primary)

    async def freeze() -> None:
        t0 = time.time()
        cluster.freeze_primary(victim)
        promoted = await asyncio.to_thread(cluster.rc.wait_for_failover, victim)
        frozen_s = time.time() - t0
        cluster.thaw_primary(victim)
        await asyncio.to_thread(cluster.rc.wait_ok)
        cluster.fault_window(t0, time.time())
        print(f"{victim} frozen {frozen_s:.1f} s until {promoted} took over; back as a replica")

    problems = await play_all(games, timeout=90, fault=freeze)
    problems += await after_the_fault(cluster, games)
    assert not problems, report(problems, cluster)


async def test_room_slots_moved_to_another_primary_mid_game(make_fault_cluster) -> None:
    cluster = make_fault_cluster()
    a, b = cluster.nodes
    games = await mixed_games(cluster, a, b, seed=1200)
    moved = [games[0], games[2]]  # a pair across the nodes, a game against the AI

    async def move() -> None:
        t0 = time.time()
        for game in moved:
            before = cluster.primary_of_room(game.room)
            after = await asyncio.to_thread(cluster.move_room_slot, game.room)
            print(f"room {game.room} (group {keys.group_of(game.room)}): {before} -> {after}")
        cluster.fault_window(t0, time.time())

    problems = await play_all(games, timeout=90, fault=move)
    problems += await after_the_fault(cluster, games)
    assert not problems, report(problems, cluster)


async def test_node_link_to_one_primary_cut_and_restored(make_fault_cluster) -> None:
    cluster = make_fault_cluster(proxy_primaries=True)
    a, b = cluster.nodes
    games = await mixed_games(cluster, a, b, seed=1300)
    victim = cluster.primary_of_room(games[0].room)  # a pair with its creator on node A
    probe = HealthProbe(cluster.nodes).start()
    window: list[float] = []

    async def cut() -> None:
        t0 = time.time()
        await asyncio.to_thread(cluster.cut_link, a, victim)
        await asyncio.sleep(CUT_S)
        await asyncio.to_thread(cluster.restore_link, a, victim)
        t1 = time.time()
        cluster.fault_window(t0, t1)
        window.extend((t0, t1))

    try:
        problems = await play_all(games, timeout=90, fault=cut)
    finally:
        await probe.stop()
    t0, t1 = window
    print(f"node A's link to {victim} cut {t0:.1f} .. {t1:.1f}")
    print(f"node A /healthz during the cut: {sorted(set(map(str, probe.statuses(0, t0, t1))))}")
    after_a = [t for t, i, s in probe.samples if i == 0 and t >= t1 and s == 200]
    if not after_a or after_a[0] - t1 > DELIVERY_BOUND_S:
        problems.append(f"node A: /healthz not 200 within {DELIVERY_BOUND_S} s of the restore")
    during_b = probe.statuses(1, t0, t1)
    if any(s != 200 for s in during_b):
        problems.append(f"node B (its links intact) was unhealthy during A's cut: {during_b}")
    problems += await after_the_fault(cluster, games)
    assert not problems, report(problems, cluster)


#: How long the replica of the primary killed in the test below is kept from replicating.
LAG_S = 2.0


async def test_a_failover_that_loses_acknowledged_writes_is_repaired(make_fault_cluster) -> None:
    """Replication is asynchronous: a primary acknowledges writes its replica may not
    have. Here its replica is kept from them (its replication link held by the proxy for
    LAG_S while human pairs play), then the primary is killed and the replica, missing
    those commits, takes over. Clients were sent versions Redis no longer holds; the
    nodes must resync them to what Redis holds, and every game goes on from there to its
    end (each client's last view is the record; later commits reach them in time)."""
    cluster = make_fault_cluster(proxy_primaries=True)
    a, b = cluster.nodes
    games = [
        await DrivenGame.start(cluster, "othello", x, y, seed=1400 + i)
        for i, (x, y) in enumerate(((a, b), (b, a), (a, a), (b, b)))
    ]

    def a_room_primary() -> EmbeddedClusterNode:
        control = cluster.control_primary()
        for game in games:
            primary = cluster.primary_of_room(game.room)
            if primary.node_id != control.node_id:
                return primary
        raise AssertionError("every room is on the control slot's primary")

    victim = await asyncio.to_thread(a_room_primary)
    replica = (await asyncio.to_thread(cluster.rc.replicas_of, victim))[0]
    proxy = cluster.proxy_of(victim)
    assert replica.pid is not None
    lag: dict[str, int] = {}

    def offset(node: EmbeddedClusterNode) -> int:
        client = node.client()
        try:
            return int(client.info("replication")["master_repl_offset"])
        finally:
            client.close()

    async def lose_writes() -> None:
        t0 = time.time()
        await asyncio.to_thread(proxy.block, replica.pid)
        await asyncio.sleep(LAG_S)
        lag["bytes"] = await asyncio.to_thread(lambda: offset(victim) - offset(replica))
        await asyncio.to_thread(cluster.rc.kill, victim)
        await asyncio.to_thread(proxy.cut_pid, replica.pid)  # what it held never arrives
        await asyncio.to_thread(proxy.unblock, replica.pid)
        promoted = await asyncio.to_thread(cluster.rc.wait_for_failover, victim)
        cluster.fault_window(t0, time.time())
        print(f"{victim} killed {lag['bytes']} bytes ahead of {replica}; {promoted} took over")

    problems = await play_all(games, timeout=90, fault=lose_writes, fault_after=1.5)
    problems += await after_the_fault(cluster, games)
    lost = lost_states(games)
    if not lag.get("bytes") or not lost:
        problems.append(
            f"the failover lost nothing clients saw (replica {lag.get('bytes')} bytes "
            f"behind, {lost} states lost): the test did not test the repair"
        )
    assert not problems, report(problems, cluster)
