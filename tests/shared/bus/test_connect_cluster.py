"""The clients of a Redis Cluster (shared/bus/connect.py) on a real one
(shared/bus/embedded_cluster.py): redis-py's reply shapes as on a single Redis, commands,
scripts and pipelines sent to the primary of their slot, bounded pools that wait, the
cluster's shape for the listener, a slot moved and a primary killed under the client;
the worker's blocking client, ``kibitz status`` and the benches' figures on a cluster."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.crc import key_slot
from redis.exceptions import ClusterDownError

from kibitz.shared.bus import keys
from kibitz.shared.bus.cluster import cluster_status
from kibitz.shared.bus.connect import (
    BlockingClusterRedis,
    ClusterRedis,
    blocking_client,
    cluster_nodes,
    command_client,
    slot_owner,
)
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from kibitz.shared.bus.jobs import WorkerBus
from kibitz.shared.bus.link import Address
from kibitz.shared.bus.stats import BlockingServerStats, ServerStats
from kibitz.shared.bus.upgrade import tag_room_keys
from tests.conftest import flush_cluster
from tests.shared.bus.conftest import replicated

GROUPS = 16


def address_of(cluster: EmbeddedCluster, key: str) -> tuple[str, int]:
    host, port = cluster.node_for_key(key).address.rsplit(":", 1)
    return host, int(port)


def at(address: Address) -> tuple[str, int]:
    return address.host, address.port


@pytest.fixture
def url(redis_cluster: EmbeddedCluster) -> Iterator[str]:
    flush_cluster(redis_cluster)
    yield f"{redis_cluster.url}?groups={GROUPS}"
    keys.configure(0)  # the other tests' layout


@pytest.fixture
async def client(url: str) -> AsyncIterator[ClusterRedis]:
    redis_client = command_client(url, pool_size=8)
    assert isinstance(redis_client, ClusterRedis)
    yield redis_client
    await redis_client.aclose()


async def test_commands_answer_as_on_a_single_redis(client: ClusterRedis) -> None:
    room = keys.room_key("abc")
    assert await client.hset(room, mapping={"version": 3, "data": "x"}) == 2
    assert await client.hgetall(room) == {"version": "3", "data": "x"}
    assert await client.hget(room, "version") == "3"
    await client.zadd(keys.live(5), {"a": 1, "b": 2})
    assert await client.zrange(keys.live(5), 0, -1, withscores=True) == [("a", 1.0), ("b", 2.0)]
    entry = await client.xadd(keys.JOBS, {"job": "1"})
    await client.xgroup_create(keys.JOBS, keys.WORKERS_GROUP, id="0")
    read: Any = await client.xreadgroup(keys.WORKERS_GROUP, "w", {keys.JOBS: ">"}, count=1)
    assert read == [[keys.JOBS, [(entry, {"job": "1"})]]]
    groups = await client.xinfo_groups(keys.JOBS)
    assert [(g["name"], g["pending"]) for g in groups] == [(keys.WORKERS_GROUP, 1)]
    assert await client.get("kibitz:{c}:nothing") is None
    assert await client.exists(room) == 1
    seconds, _ = await client.time()
    assert abs(seconds - time.time()) < 5
    assert await client.ping()
    assert await client.spublish(keys.room_channel("abc"), "hi") == 0


async def test_a_script_runs_on_its_keys_primary_and_survives_a_script_flush(
    client: ClusterRedis, redis_cluster: EmbeddedCluster
) -> None:
    script = client.register_script(
        "redis.call('INCR', KEYS[1]) return {KEYS[1], ARGV[1], redis.call('GET', KEYS[1])}"
    )
    for group in range(GROUPS):
        key = keys.live(group) + ":n"
        assert await script(keys=[key], args=["x"]) == [key, "x", "1"]
    for node in redis_cluster.primaries():
        with node.client() as direct:
            direct.script_flush()
    assert await script(keys=[keys.JOBS + ":n"], args=["y"]) == [keys.JOBS + ":n", "y", "1"]
    with pytest.raises(redis.ResponseError, match="same (key )?slot"):
        await client.register_script("return 1")(keys=[keys.JOBS, keys.live(1)])


async def test_pipelines_span_groups_and_transactions_keep_to_one_slot(
    client: ClusterRedis,
) -> None:
    async with client.pipeline(transaction=False) as pipe:
        for group in keys.groups():
            pipe.xadd(keys.archive(group), {"room": str(group)})
        for group in keys.groups():
            pipe.xlen(keys.archive(group))
        replies = await pipe.execute()
    assert replies[GROUPS:] == [1] * GROUPS
    async with client.pipeline(transaction=True) as pipe:
        pipe.incr(keys.room_key("r1") + ":n")
        pipe.get(keys.room_key("r1") + ":n")
        assert await pipe.execute() == [1, "1"]
    with pytest.raises(redis.ResponseError):
        async with client.pipeline(transaction=True) as pipe:
            pipe.incr(keys.JOBS + ":n")
            pipe.incr(keys.live(1) + ":n")
            await pipe.execute()


def getkeys_calls(cluster: EmbeddedCluster) -> list[int]:
    """``COMMAND GETKEYS`` calls so far, on each primary (INFO commandstats)."""
    calls = []
    for node in cluster.primaries():
        with node.client() as direct:
            stats: Any = direct.info("commandstats")
            calls.append(int(stats.get("cmdstat_command|getkeys", {}).get("calls", 0)))
    return calls


async def test_stream_reads_take_their_keys_without_asking_a_node(
    client: ClusterRedis, url: str, redis_cluster: EmbeddedCluster
) -> None:
    # redis-py asks a node COMMAND GETKEYS for XREADGROUP/XREAD (their keys "move"),
    # serially, even in a pipeline; connect.py reads them from the arguments.
    streams = [keys.archive(group) for group in keys.groups()]
    written = {}
    for stream in streams:
        await client.xgroup_create(stream, "readers", id="0", mkstream=True)
        written[stream] = await client.xadd(stream, {"stream": stream})
    before = getkeys_calls(redis_cluster)
    async with client.pipeline(transaction=False) as pipe:
        for stream in streams:
            pipe.xreadgroup("readers", "r1", {stream: ">"}, count=10)
        replies = await pipe.execute()
    assert replies == [[[s, [(written[s], {"stream": s})]]] for s in streams]
    read: Any = await client.xread({streams[3]: "0"}, count=1)
    assert read == [[streams[3], [(written[streams[3]], {"stream": streams[3]})]]]
    blocking = blocking_client(url)
    try:
        sync_pipe = blocking.pipeline(transaction=False)
        for stream in streams:
            sync_pipe.xreadgroup("readers", "r2", {stream: "0"}, count=10)
        assert [len(reply[0][1]) for reply in sync_pipe.execute()] == [0] * GROUPS  # r2: none
        assert blocking.xread({streams[5]: "0"})[0][0] == streams[5]
        with pytest.raises(redis.ResponseError, match="same key slot"):
            blocking.xread({streams[1]: "0", streams[2]: "0"})
    finally:
        blocking.close()
    assert getkeys_calls(redis_cluster) == before
    with pytest.raises(redis.ResponseError, match="same key slot"):
        await client.xread({streams[1]: "0", streams[2]: "0"})
    with pytest.raises(redis.ResponseError, match="same key slot"):
        async with client.pipeline(transaction=False) as pipe:
            pipe.xreadgroup("readers", "r1", {streams[1]: ">", streams[2]: ">"})
            await pipe.execute()


async def test_the_client_tells_where_each_slot_is(
    client: ClusterRedis, redis_cluster: EmbeddedCluster
) -> None:
    primaries = await cluster_nodes(client)
    expected = [n.address.rsplit(":", 1) for n in redis_cluster.primaries()]
    assert sorted(at(a) for a in primaries) == sorted((h, int(p)) for h, p in expected)
    assert all(a.password == redis_cluster.password for a in primaries)
    for room in ("a", "b", "c", "d", "e", "f"):
        channel = keys.room_channel(room)
        assert at(await slot_owner(client, channel)) == address_of(redis_cluster, channel)
    owners = await client.slot_owners()
    assert len(owners) == 16384
    assert at(owners[key_slot(keys.JOBS.encode())]) == address_of(redis_cluster, keys.JOBS)


async def test_many_commands_at_once_share_a_link_per_primary(client: ClusterRedis) -> None:
    rooms = [keys.room_key(f"room{i}") + ":n" for i in range(2000)]
    await asyncio.gather(*(client.incr(room) for room in rooms))
    values = await asyncio.gather(*(client.get(room) for room in rooms))
    assert values == ["1"] * len(rooms)
    assert len(client._links) <= 3  # one pipelined connection per primary


async def test_a_full_pool_makes_blocking_reads_wait_not_fail(url: str) -> None:
    small = command_client(url, pool_size=2, wait_s=10)
    try:
        stream = keys.JOBS + ":blocking"
        started = time.monotonic()
        reads = [small.xread({stream: "$"}, block=100) for _ in range(12)]
        assert await asyncio.gather(*reads) == [[]] * 12  # XREAD BLOCK: pooled connections
        # Two connections to that primary: six rounds of 100 ms.
        assert time.monotonic() - started >= 0.5
    finally:
        await small.aclose()


def test_the_workers_blocking_client_and_bus(url: str) -> None:
    client = blocking_client(url)
    assert isinstance(client, BlockingClusterRedis)
    bus = WorkerBus(url)
    try:
        room = "room-w"
        client.hset(keys.room_key(room), mapping={"version": 7})
        assert bus.room_version(room) == 7
        assert bus.room_version("gone") is None
        entry = client.xadd(keys.JOBS, {"job": "1"})
        client.xgroup_create(keys.JOBS, keys.WORKERS_GROUP, id="0")
        client.xreadgroup(keys.WORKERS_GROUP, "w1", {keys.JOBS: ">"}, count=1)
        lease = bus.renew_lease(entry, "w1", room)
        assert (lease.owned, lease.room_version) == (True, 7)
        lease = bus.renew_lease(entry, "w2", "gone")
        assert (lease.owned, lease.room_version) == (False, -1)
        assert bus.live_jobs_waiting() == 0
        bus.heartbeat("w1", {"done": 1}, 15)
        assert client.hget(keys.worker_key("w1"), "done") == "1"
        bus.publish_to_room(room, "progress")  # SPUBLISH: no listener, no error
        assert bus.server_time_ms() > 0
        pipe = client.pipeline(transaction=False)
        for group in keys.groups():
            pipe.zcard(keys.live(group))
        assert pipe.execute() == [0] * GROUPS
    finally:
        bus.close()
        client.close()


async def test_status_on_a_cluster_scans_nothing(client: ClusterRedis) -> None:
    store_ttl_ms = 15_000
    now_ms = int(time.time() * 1000)
    await client.zadd(keys.NODE_BEATS, {"n1": now_ms, "gone": now_ms - 2 * store_ttl_ms})
    await client.zadd(keys.AI_WORKERS_LIVE, {"w1": now_ms, "w-dead": now_ms})
    await client.hset(keys.worker_key("w1"), mapping={"name": "w1", "done": 3})
    for group in (0, 3, 9):
        await client.xadd(keys.archive(group), {"room": str(group)})
        await client.zadd(keys.live(group), {f"r{group}": 1, f"s{group}": 2})
    await client.hset(keys.AI_WAITING, "j1", "{}")
    status = await cluster_status(client)
    assert status["nodes"] == ["n1"]
    assert status["workers"] == [{"name": "w1", "done": "3"}]
    assert status["archive"] == {"backlog": 3}
    assert status["live_rooms"] == 6
    assert status["jobs"]["queued"] == 1
    assert status["groups"] == GROUPS
    assert await tag_room_keys(client) == 0


async def test_the_benches_figures_sum_the_primaries(client: ClusterRedis, url: str) -> None:
    for i in range(30):
        await client.hset(keys.room_key(f"r{i}"), "version", 1)
        await client.set(keys.events_key(f"r{i}"), "x")
    stats = ServerStats(url)
    try:
        assert await stats.room_keys() == 60
        assert await stats.used_memory() > 0
    finally:
        await stats.aclose()
    blocking = BlockingServerStats(url)
    try:
        assert blocking.ping()
        assert blocking.clients() >= 0
    finally:
        blocking.close()


# --- the cluster changes under the client (a cluster of this module's own) --------------
@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster(
        Path(tmp_path_factory.mktemp("own-cluster")), primaries=3, replicas_per_primary=1
    ).start()
    yield cluster
    cluster.stop()


@pytest.fixture
async def own_client(own_cluster: EmbeddedCluster) -> AsyncIterator[ClusterRedis]:
    own_cluster.wait_ok()
    redis_client = command_client(f"{own_cluster.url}?groups={GROUPS}")
    assert isinstance(redis_client, ClusterRedis)
    yield redis_client
    await redis_client.aclose()
    keys.configure(0)


async def test_a_moved_slot_is_followed(
    own_client: ClusterRedis, own_cluster: EmbeddedCluster
) -> None:
    room = keys.room_key("moving-" + uuid.uuid4().hex[:6])
    await own_client.hset(room, "version", 1)
    before = own_cluster.node_for_key(room)
    target = next(n for n in own_cluster.primaries() if n.address != before.address)
    script = own_client.register_script("return redis.call('HINCRBY', KEYS[1], 'version', 1)")
    await asyncio.to_thread(own_cluster.move_slot, key_slot(room.encode()), target)
    assert await own_client.hincrby(room, "version", 1) == 2  # MOVED, followed
    assert await script(keys=[room]) == 3  # NOSCRIPT there, or not: it runs
    assert at(await own_client.slot_owner(room)) == address_of(own_cluster, room)


async def test_a_killed_primary_is_replaced_and_commands_go_on(
    own_client: ClusterRedis, own_cluster: EmbeddedCluster
) -> None:
    room = keys.room_key("failover-" + uuid.uuid4().hex[:6])
    await own_client.hset(room, "version", 1)
    primary = own_cluster.node_for_key(room)
    await asyncio.to_thread(replicated, primary)  # replication is asynchronous
    own_cluster.kill(primary)
    promoted = await asyncio.to_thread(own_cluster.wait_for_failover, primary)
    deadline = time.monotonic() + 20
    while True:
        try:
            assert await own_client.hincrby(room, "version", 1) == 2
            break
        except (redis.ConnectionError, ClusterDownError, redis.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    await own_client.refresh_slots()
    host, port = promoted.address.rsplit(":", 1)
    assert at(await own_client.slot_owner(room)) == (host, int(port))
    assert (host, int(port)) in [at(a) for a in await own_client.primaries()]
    await asyncio.to_thread(own_cluster.restart, primary)  # back, as the new one's replica


#: How soon after a failover every kind of command works again on the promoted replica's
#: slots (the links, scripts, pooled reads, a worker's blocking client).
AFTER_FAILOVER_S = 2.0


def replica_caught_up(cluster: EmbeddedCluster, primary: Any, timeout_s: float = 5.0) -> None:
    """Wait until every replica of ``primary`` has acknowledged its replication offset."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = primary.admin().info("replication")
        offset = int(info["master_repl_offset"])
        acked = [int(v["offset"]) for k, v in info.items() if k.startswith("slave")]
        if acked and min(acked) >= offset:
            return
        time.sleep(0.02)
    raise AssertionError(f"the replicas of {primary} did not catch up in {timeout_s} s")


async def test_every_kind_of_command_follows_a_killed_primary_within_2_s(
    own_client: ClusterRedis, own_cluster: EmbeddedCluster
) -> None:
    """Once the replica of a primary killed with -9 has taken over, the client does not
    go on dialing the dead address: a one-shot command (a link), a script (EVALSHA), a
    pooled stream read and a worker's blocking client all succeed on its slots within
    AFTER_FAILOVER_S."""
    room_id = "killed-" + uuid.uuid4().hex[:6]
    room, stream = keys.room_key(room_id), keys.archive(keys.group_of(room_id))  # one slot
    script = own_client.register_script("return redis.call('HINCRBY', KEYS[1], 'version', 1)")
    blocking = blocking_client(f"{own_cluster.url}?groups={GROUPS}")
    primary = own_cluster.node_for_key(room)
    try:
        await own_client.hset(room, "version", 1)
        await own_client.xgroup_create(stream, "g", id="0", mkstream=True)
        # Every kind has a connection to the primary (and its slot map) before the kill.
        await own_client.hincrby(room, "version", 1)
        await script(keys=[room])
        await own_client.xreadgroup("g", "c", {stream: ">"}, count=1, block=10)
        await asyncio.to_thread(blocking.hincrby, room, "version", 1)
        # Replication is asynchronous: kill only once the replica has every write above.
        await asyncio.to_thread(replica_caught_up, own_cluster, primary)
        own_cluster.kill(primary)
        await asyncio.to_thread(own_cluster.wait_for_failover, primary)
        promoted = time.monotonic()

        async def soon(what: str, call: Any) -> float:
            while True:
                try:
                    await call()
                    return time.monotonic() - promoted
                except (redis.ConnectionError, redis.TimeoutError, ClusterDownError) as exc:
                    took = time.monotonic() - promoted
                    assert took < AFTER_FAILOVER_S, f"{what} still failing: {exc}"
                    await asyncio.sleep(0.05)

        took = await asyncio.gather(
            soon("a one-shot command", lambda: own_client.hincrby(room, "version", 1)),
            soon("a script", lambda: script(keys=[room])),
            soon("a pooled read", lambda: own_client.xreadgroup("g", "c", {stream: ">"}, block=10)),
            soon("the blocking client", lambda: asyncio.to_thread(blocking.hget, room, "version")),
        )  # fmt: skip
        assert max(took) < AFTER_FAILOVER_S, took
    finally:
        blocking.close()
        await asyncio.to_thread(own_cluster.restart, primary)  # back, as a replica


async def test_a_frozen_primary_is_left_for_its_replica(own_cluster: EmbeddedCluster) -> None:
    """A primary that hangs (SIGSTOP) times commands out, which are not retried; once its
    replica has taken over the commands go there, though the old one never answers."""
    client = command_client(f"{own_cluster.url}?groups={GROUPS}", timeout_s=1.0)
    assert isinstance(client, ClusterRedis)
    room = keys.room_key("frozen-" + uuid.uuid4().hex[:6])
    frozen = None
    try:
        own_cluster.wait_ok()
        await client.hset(room, "version", 1)
        frozen = own_cluster.node_for_key(room)
        await asyncio.to_thread(replicated, frozen)  # a replica restarted just before syncs
        own_cluster.freeze(frozen)
        with pytest.raises(redis.TimeoutError):
            await client.hincrby(room, "version", 1)
        await asyncio.to_thread(own_cluster.wait_for_failover, frozen)
        deadline = time.monotonic() + 15
        while True:
            try:
                version = await client.hget(room, "version")
                break
            except (redis.ConnectionError, redis.TimeoutError, ClusterDownError):
                assert time.monotonic() < deadline, "still on the frozen primary"
                await asyncio.sleep(0.2)
        assert version in ("1", "2")  # the increment that timed out may have run, or not
    finally:
        await client.aclose()
        keys.configure(0)
        if frozen is not None:
            own_cluster.thaw(frozen)
            await asyncio.to_thread(own_cluster.wait_ok)


def test_a_worker_on_the_cluster_searches_fresh_jobs_and_drops_stale_ones(
    redis_cluster: EmbeddedCluster, url: str
) -> None:
    from kibitz.shared.bus.jobs import JobsProbe
    from kibitz.shared.games import find_game
    from kibitz.shared.protocol.jobs import Budget, Job, JobResult

    game = find_game("tictactoe")
    start = game.format_position(game.initial())
    probe = JobsProbe(url)
    rooms = ["stale"] + [f"fresh{i}" for i in range(4)]  # taken in this order
    jobs = [
        Job(uuid.uuid4().hex, room, 0, "tictactoe", start, [], 3, Budget(depth=2)) for room in rooms
    ]
    probe.seed_rooms(rooms[1:], version=0, ttl_s=600)
    probe.seed_rooms(rooms[:1], version=5, ttl_s=600)  # moved on before a worker came
    probe.queue_jobs(jobs)
    # The nodes as --redis-cluster takes them: the first with the password (a URL), and
    # the groups of the deployment (the layout must be the same as the test's).
    first, *others = [node.address for node in redis_cluster.primaries()]
    nodes = [f"redis+cluster://:{redis_cluster.password}@{first}?groups={GROUPS}", *others]
    worker = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", "--redis-cluster", *nodes,
         "--max-jobs", "4", "--name", "cw"],
        env={**os.environ, "KIBITZ_LOG": "WARNING"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while probe.results_count() < 4:
            assert worker.poll() is None or probe.results_count() >= 4, "the worker stopped"
            assert time.monotonic() < deadline, "no results from the worker"
            time.sleep(0.05)
        results = [JobResult.from_fields(fields) for fields in probe.results()]
        assert sorted(r.room for r in results) == sorted(rooms[1:])
        assert all(r.move for r in results)
        deadline = time.monotonic() + 20
        while not probe.jobs_idle():  # the stale job acknowledged, not searched
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        if worker.poll() is None:
            worker.terminate()
        worker.wait(timeout=20)
        probe.close()
