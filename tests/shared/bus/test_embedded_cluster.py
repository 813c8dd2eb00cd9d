"""The private Redis Cluster (shared/bus/embedded_cluster.py) on real redis-server 7
processes: its shape, a cluster client through its URL, a primary killed or frozen and
replaced by its replica, a slot moved with its keys, and nothing left running after stop.

The session's cluster (``redis_cluster``, tests/conftest.py) serves the tests that only
read and write; the destructive ones share a cluster of this module's own."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.retry import Retry

from kibitz.shared.bus.embedded_cluster import (
    SLOTS,
    EmbeddedCluster,
    EmbeddedClusterNode,
    Redis7MissingError,
)
from tests.conftest import flush_cluster
from tests.shared.bus.conftest import replicated

NODE_TIMEOUT_MS = 1000


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A cluster for the tests that kill, freeze and move: 3 primaries, 3 replicas."""
    cluster = EmbeddedCluster(
        tmp_path_factory.mktemp("own-cluster"), node_timeout_ms=NODE_TIMEOUT_MS
    ).start()
    yield cluster
    cluster.stop()


def client_from_url(url: str) -> RedisCluster:
    """A cluster client from ``redis+cluster://:PASSWORD@host:port,host:port``."""
    scheme, _, rest = url.partition("://")
    assert scheme == "redis+cluster"
    userinfo, _, hosts = rest.rpartition("@")
    password = userinfo.partition(":")[2]
    nodes = [ClusterNode(host, int(port)) for host, _, port in
             (address.rpartition(":") for address in hosts.split(","))]  # fmt: skip
    return RedisCluster(startup_nodes=nodes, password=password, decode_responses=True)


def client_of_live_nodes(cluster: EmbeddedCluster) -> RedisCluster:
    nodes = [ClusterNode("127.0.0.1", node.port) for node in cluster.nodes if node.live]
    return RedisCluster(startup_nodes=nodes, password=cluster.password, decode_responses=True)


def read_on_replica(node: EmbeddedClusterNode, key: str) -> str | None:
    with node.client() as client:
        client.execute_command("READONLY")
        value: str | None = client.get(key)
        return value


def written_and_replicated(
    cluster: EmbeddedCluster, key: str
) -> tuple[EmbeddedClusterNode, EmbeddedClusterNode]:
    """Write "written before" at ``key`` and WAIT until the replica of its primary has it:
    that primary and its one replica."""
    client = client_of_live_nodes(cluster)
    client.set(key, "written before")
    client.close()
    primary = cluster.node_for_key(key)
    [replica] = cluster.replicas_of(primary)
    replicated(primary)
    return primary, replica


def timed_failover(
    cluster: EmbeddedCluster,
    fault: Callable[[EmbeddedClusterNode], None],
    primary: EmbeddedClusterNode,
) -> tuple[EmbeddedClusterNode, float]:
    """Apply ``fault`` (kill, freeze) to ``primary`` and wait for its replica to take over:
    the promoted replica, and the seconds from the fault to the failover."""
    started = time.monotonic()
    fault(primary)
    promoted = cluster.wait_for_failover(primary, timeout=20)
    return promoted, time.monotonic() - started


def gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_starts_with_three_primaries_and_three_replicas(redis_cluster: EmbeddedCluster) -> None:
    primaries, replicas = redis_cluster.primaries(), redis_cluster.replicas()
    assert len(primaries) == 3 and len(replicas) == 3
    assert sorted(primaries + replicas, key=lambda n: n.index) == redis_cluster.nodes
    assert [node.role for node in primaries] == ["primary"] * 3
    assert [node.role for node in replicas] == ["replica"] * 3
    assert all(len(redis_cluster.replicas_of(node)) == 1 for node in primaries)
    owners = {redis_cluster.primary_for_slot(slot) for slot in (0, 5000, 10000, SLOTS - 1)}
    assert owners == set(primaries)
    for node in redis_cluster.nodes:
        with node.client() as client:
            info = client.execute_command("CLUSTER", "INFO")
            assert "cluster_state:ok" in info
            assert f"cluster_slots_assigned:{SLOTS}" in info
            assert f"cluster_slots_ok:{SLOTS}" in info
            assert "cluster_known_nodes:6" in info
            assert int(client.info("server")["redis_version"].split(".")[0]) >= 7
    ports = [f"127.0.0.1:{n.port}" for n in primaries]
    assert redis_cluster.display_url == "redis+cluster://" + ",".join(ports)
    assert redis_cluster.url == f"redis+cluster://:{redis_cluster.password}@" + ",".join(ports)


def test_the_password_is_private(redis_cluster: EmbeddedCluster) -> None:
    node = redis_cluster.nodes[0]
    config = node.directory / "redis.conf"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert redis_cluster.password in config.read_text()
    assert node.pid is not None
    cmdline = Path(f"/proc/{node.pid}/cmdline").read_bytes()
    assert redis_cluster.password.encode() not in cmdline
    anonymous = redis.Redis(port=node.port, retry=Retry(NoBackoff(), 0))
    with anonymous, pytest.raises(redis.AuthenticationError):
        anonymous.ping()


def test_a_cluster_client_from_the_url_writes_and_reads(redis_cluster: EmbeddedCluster) -> None:
    flush_cluster(redis_cluster)
    client = client_from_url(redis_cluster.url)
    try:
        keys = [f"embedded-cluster:{i}" for i in range(60)]
        for key in keys:
            client.set(key, key.upper())
        assert [client.get(key) for key in keys] == [key.upper() for key in keys]
        # The keys are spread over all three primaries, each where node_for_key says.
        holders = {redis_cluster.node_for_key(key) for key in keys}
        assert holders == set(redis_cluster.primaries())
        for key in keys[:5]:
            with redis_cluster.node_for_key(key).client() as direct:
                assert direct.get(key) == key.upper()
        # Sharded pub/sub, the reason for Redis 7.
        assert client.execute_command("SPUBLISH", "embedded-cluster:{chan}", "hi") == 0
    finally:
        client.close()
    flush_cluster(redis_cluster)
    client = client_from_url(redis_cluster.url)
    assert client.dbsize() == 0  # summed over the primaries
    client.close()


def test_a_killed_primary_is_replaced_by_its_replica(own_cluster: EmbeddedCluster) -> None:
    key = "killed:{k}"
    primary, replica = written_and_replicated(own_cluster, key)

    promoted, took = timed_failover(own_cluster, own_cluster.kill, primary)
    assert promoted is replica and promoted.role == "primary"
    assert own_cluster.node_for_key(key) is promoted
    assert took < 10, f"failover took {took:.1f} s"
    client = client_of_live_nodes(own_cluster)
    assert client.get(key) == "written before"
    client.close()

    own_cluster.restart(primary)  # back on its port and directory, as the new replica
    assert primary.role == "replica"
    assert own_cluster.replicas_of(promoted) == [primary]
    assert read_on_replica(primary, key) == "written before"


def test_a_frozen_primary_is_replaced_past_the_node_timeout(own_cluster: EmbeddedCluster) -> None:
    key = "frozen:{f}"
    primary, replica = written_and_replicated(own_cluster, key)

    promoted, took = timed_failover(own_cluster, own_cluster.freeze, primary)
    assert promoted is replica
    assert NODE_TIMEOUT_MS / 1000 < took < 10, f"failover took {took:.1f} s"
    client = client_of_live_nodes(own_cluster)
    assert client.get(key) == "written before"
    client.set(key, "written while frozen")
    client.close()

    own_cluster.thaw(primary)  # it finds itself outvoted and follows its old replica
    own_cluster.wait_ok(timeout=20)
    assert primary.role == "replica"
    assert own_cluster.replicas_of(promoted) == [primary]
    replicated(promoted)
    assert read_on_replica(primary, key) == "written while frozen"


def test_move_slot_moves_a_slot_with_its_keys(own_cluster: EmbeddedCluster) -> None:
    keys = [f"moved:{{m}}:{i}" for i in range(250)]  # more than one MIGRATE batch
    slot = key_slot(b"{m}")
    client = client_of_live_nodes(own_cluster)  # its slot map is from before the move
    for key in keys:
        client.set(key, key)
    source = own_cluster.primary_for_slot(slot)
    target = next(node for node in own_cluster.primaries() if node is not source)

    own_cluster.move_slot(slot, target)
    assert own_cluster.primary_for_slot(slot) is target
    assert own_cluster.primary_for_slot(slot + 1) is source or slot + 1 == SLOTS
    with target.client() as direct:
        assert direct.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == len(keys)
    with source.client() as direct:
        assert direct.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    assert [client.get(key) for key in keys] == keys  # it follows MOVED
    client.close()
    fresh = client_of_live_nodes(own_cluster)
    assert fresh.get(keys[-1]) == keys[-1]
    fresh.close()


def own_slots(node: EmbeddedClusterNode) -> int:
    """How many slots ``node`` serves, by its own CLUSTER NODES."""
    with node.client() as client:
        text = client.execute_command("CLUSTER", "NODES")
    line = next(line for line in text.splitlines() if "myself" in line)
    count = 0
    for item in line.split()[8:]:
        if not item.startswith("["):
            first, _, last = item.partition("-")
            count += int(last or first) - int(first) + 1
    return count


def test_reshard_moves_a_number_or_ranges_of_slots(own_cluster: EmbeddedCluster) -> None:
    target = own_cluster.primaries()[0]
    before = own_slots(target)
    own_cluster.reshard(6, target)  # by redis-cli, from all the others
    assert own_slots(target) == before + 6
    first = next(s for s in range(SLOTS) if own_cluster.primary_for_slot(s) is not target)
    own_cluster.reshard([(first, first + 1)], target)
    assert own_cluster.primary_for_slot(first) is target
    assert own_cluster.primary_for_slot(first + 1) is target


def test_one_primary_is_a_cluster_of_one_node(tmp_path: Path) -> None:
    """Fewer primaries than redis-cli creates, joined by hand: exactly one node, no
    replica, serving all 16384 slots."""
    with EmbeddedCluster(tmp_path / "c", primaries=1, replicas_per_primary=0) as cluster:
        assert len(cluster.nodes) == 1
        assert cluster.primaries() == cluster.nodes and cluster.replicas() == []
        assert cluster.nodes[0].role == "primary"
        assert own_slots(cluster.nodes[0]) == SLOTS
        client = client_from_url(cluster.url)
        try:
            client.set("one:{x}", "1")
            assert client.get("one:{x}") == "1"
        finally:
            client.close()


def test_two_primaries_with_a_replica_each_are_four_nodes(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path / "c", primaries=2, replicas_per_primary=1) as cluster:
        assert len(cluster.nodes) == 4
        primaries, replicas = cluster.primaries(), cluster.replicas()
        assert primaries == cluster.nodes[:2] and replicas == cluster.nodes[2:]
        assert [cluster.replicas_of(p) for p in primaries] == [[replicas[0]], [replicas[1]]]
        assert [own_slots(p) for p in primaries] == [SLOTS // 2, SLOTS // 2]
        with primaries[0].client() as client:
            assert "cluster_known_nodes:4" in client.execute_command("CLUSTER", "INFO")


def test_no_primary_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1 primary"):
        EmbeddedCluster(tmp_path / "c", primaries=0)


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    placed: list[int] = []
    cluster = EmbeddedCluster(tmp_path / "c", replicas_per_primary=0, place_pid=placed.append)
    with cluster:
        pids = [node.pid for node in cluster.nodes]
        assert placed == pids and len(pids) == 3
        cluster.freeze(cluster.nodes[0])  # a frozen node must not outlive stop either
    assert all(gone(pid) for pid in placed)


def test_a_failed_start_leaves_no_process(tmp_path: Path) -> None:
    placed: list[int] = []

    def place(pid: int) -> None:
        placed.append(pid)
        if len(placed) == 4:
            raise RuntimeError("no CPU cap for this one")

    with pytest.raises(RuntimeError, match="no CPU cap"):
        EmbeddedCluster(tmp_path / "c", place_pid=place).start()
    assert len(placed) == 4 and all(gone(pid) for pid in placed)


def test_a_redis_older_than_7_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\necho 'Redis server v=6.2.14 sha=00000000:0'\n")
    os.chmod(fake, 0o755)
    monkeypatch.setenv("KIBITZ_REDIS_CLUSTER_SERVER", str(fake))
    with pytest.raises(Redis7MissingError, match="6.2.14"):
        EmbeddedCluster(tmp_path / "c").start()
