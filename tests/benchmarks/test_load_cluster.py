"""``kibitz bench load --redis-cluster N`` and ``--redis-cpu-limit``: the private store.

The bench starts a private Redis Cluster of N primaries (1 and 2 too, where ``redis-cli
--cluster create`` wants 3), puts each redis-server in a CPU-capped control group of its
own, and reports each primary's CPU; the single private Redis stays the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from kibitz.benchmarks.cpu_limit import (
    PERIOD_US,
    CpuLimitError,
    CpuLimits,
    find_controller,
    period_us,
    quota_us,
)
from kibitz.benchmarks.load import (
    PrivateStore,
    control_slot_seconds,
    private_store,
    store_fields,
)
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded_cluster import Redis7MissingError, find_cluster_binaries


def _bench(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "bench", "load", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def _limits(cores: float) -> CpuLimits | None:
    try:
        find_controller()
    except CpuLimitError:
        return None  # not root here: the store is started uncapped
    return CpuLimits(cores)


def _need_redis7() -> None:
    try:
        find_cluster_binaries()
    except Redis7MissingError as exc:
        # A failure, not a skip, as tests/conftest.py's cluster: a missing install must
        # not pass as proven.
        pytest.fail(f"{exc} (.ci/run installs Debian's redis-server and redis-tools)")


def test_a_small_share_gets_a_longer_period_not_a_larger_share() -> None:
    assert period_us(0.5) == PERIOD_US and quota_us(0.5, period_us(0.5)) == 5000
    assert period_us(0.1) == PERIOD_US
    # 0.04 of a core: 1 ms every 25 ms (not the 1 ms every 10 ms, 0.1, of the floor).
    assert period_us(0.04) == 25_000 and quota_us(0.04, period_us(0.04)) == 1000
    assert period_us(0.0001) == 1_000_000  # the kernel's longest period
    with pytest.raises(ValueError, match="cores"):
        period_us(0)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--redis-cluster", "0"], "--redis-cluster"),
        (["--redis-cluster", "7"], "--redis-cluster"),
        (["--redis-cluster", "2", "--url", "http://127.0.0.1:9"], "--redis-cluster"),
        (["--redis-cpu-limit", "0.5", "--url", "http://127.0.0.1:9"], "--redis-cpu-limit"),
        (["--redis-cpu-limit", "0"], "--redis-cpu-limit"),
        (["--redis-replicas", "1"], "--redis-replicas"),
        (["--redis-groups", "48"], "--redis-groups"),
        (["--redis-cluster", "3", "--redis-groups", "0"], "--redis-groups"),
    ],
)
def test_store_flags_out_of_place_are_usage_errors(args: list[str], flag: str) -> None:
    out = _bench(*args, timeout=60)
    assert out.returncode == 2 and flag in out.stderr, out.stderr


@pytest.mark.parametrize("primaries", [1, 2])
def test_a_private_cluster_of_one_or_two_primaries_capped_each(
    tmp_path: Path, primaries: int
) -> None:
    """Fewer primaries than redis-cli creates: a cluster all the same (every slot served,
    a client follows it), each redis-server in a capped group of its own, all gone after."""
    _need_redis7()
    limits = _limits(0.5)
    try:
        with private_store(tmp_path, primaries, limits=limits, groups=48) as store:
            assert store.kind == "cluster" and len(store.primary_pids) == primaries
            assert store.replica_pids == []
            assert store.url.startswith("redis+cluster://:") and store.url.endswith("?groups=48")
            assert store.groups_per_primary == ([48] if primaries == 1 else [24, 24])
            assert store.control_primary in range(primaries)
            assert store.node_args() == ([], {"KIBITZ_REDIS_URL": store.url})
            password, hosts = store.url.split("://:", 1)[1].split("/", 1)[0].split("@")
            nodes = [ClusterNode(h.split(":")[0], int(h.split(":")[1])) for h in hosts.split(",")]
            client = RedisCluster(startup_nodes=nodes, password=password, decode_responses=True)
            try:
                assert len(client.get_primaries()) == primaries
                for g in range(8):
                    client.set(f"kibitz:{{g{g}}}:probe", g)
                    assert client.get(f"kibitz:{{g{g}}}:probe") == str(g)
            finally:
                client.close()
            if limits is not None:
                assert len(limits.groups) == primaries
                for pid, group in zip(store.primary_pids, limits.groups, strict=True):
                    assert str(pid) in (group / "cgroup.procs").read_text().split()
                    periods = limits.throttled(pid)
                    assert periods is not None and periods[0] >= periods[1] >= 0
            pids = list(store.primary_pids)
    finally:
        if limits is not None:
            groups = list(limits.groups)
            limits.close()
            assert not any(group.exists() for group in groups)
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


def test_the_single_redis_stays_the_baseline(tmp_path: Path) -> None:
    with private_store(tmp_path) as store:
        assert store.kind == "single" and len(store.primary_pids) == 1
        assert store.node_args() == (["--redis", store.url], {})
        assert store.groups_per_primary is None
        with redis.Redis.from_url(store.url) as client:
            assert client.ping()


def test_the_summary_has_each_primarys_cpu() -> None:
    store = PrivateStore("cluster", "redis+cluster://x", [11, 12, 13], [14, 15, 16],
                         groups_per_primary=[23, 21, 20], control_primary=1)  # fmt: skip
    args = argparse.Namespace(redis_replicas=1, redis_cpu_limit=0.05)
    out = store_fields(store, args, [1.0, 0.5, 0.5], [0.1, 0.1, 0.1], moves=1000, seconds=20.0)
    assert out["redis"] == "cluster" and out["redis_primaries"] == 3
    assert out["redis_replicas"] == 1 and out["redis_cpu_limit"] == 0.05
    assert out["redis_replica_nodes"] == 3  # counted from the store, not the option
    assert out["redis_groups_per_primary"] == [23, 21, 20] and out["redis_control_primary"] == 1
    assert out["redis_cpu_ms_per_move"] == 2.3  # primaries and replicas
    assert out["redis_cpu_ms_per_move_per_primary"] == [1.0, 0.5, 0.5]
    assert out["redis_cores"] == [0.05, 0.025, 0.025]
    assert out["redis_replica_cores"] == [0.005, 0.005, 0.005]
    single = store_fields(PrivateStore("single", "redis://x", [11]), args, [0.2], [], 100, 2.0)
    assert single["redis_replicas"] == 0 and "redis_groups_per_primary" not in single
    assert single["redis_replica_nodes"] == 0
    assert single["redis_cpu_ms_per_move_per_primary"] == [2.0]
    assert "redis_control_slot_cpu_ms_per_move" not in single


def test_the_control_slot_is_its_primary_less_its_groups_share() -> None:
    # The others: 1.0 s over 40 groups, 0.025 s a group; the control primary's 20 groups
    # are 0.5 s of its 1.2 s, so the control slot used 0.7 s.
    assert control_slot_seconds([0.6, 1.2, 0.4], [20, 20, 20], 1) == pytest.approx(0.7)
    assert control_slot_seconds([1.0], [64], 0) is None  # one primary: nothing to tell apart
    store = PrivateStore("cluster", "redis+cluster://x", [11, 12, 13],
                         groups_per_primary=[20, 20, 20], control_primary=1)  # fmt: skip
    args = argparse.Namespace(redis_replicas=0, redis_cpu_limit=None)
    out = store_fields(store, args, [0.6, 1.2, 0.4], [], moves=1000, seconds=10.0, ai_moves=500)
    assert out["redis_control_cpu_ms_per_move"] == 1.2
    assert out["redis_control_slot_cpu_ms_per_move"] == 0.7
    assert out["redis_control_slot_cpu_ms_per_ai_move"] == 1.4
    assert out["redis_cpu_ms_per_ai_move_per_primary"] == [1.2, 2.4, 0.8]


def _summary(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert out.returncode == 0, out.stderr[-3000:]
    summary: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return summary


def test_bench_with_redis_capped_reports_its_cpu() -> None:
    """The single-Redis baseline with Redis in a capped group of its own."""
    if _limits(0.5) is None:
        pytest.skip("no writable cgroup (not root)")
    summary = _summary(_bench("--games", "3", "--concurrency", "1", "--redis-cpu-limit", "0.5",
                              "--json"))  # fmt: skip
    assert summary["errors"] == 0 and summary["redis"] == "single"
    assert summary["redis_cpu_limit"] == 0.5 and summary["redis_primaries"] == 1
    cores = summary["redis_cores"]
    assert isinstance(cores, list) and len(cores) == 1 and 0 <= cores[0] <= 0.6
    assert isinstance(summary["redis_idle_cores"], list)
    assert isinstance(summary["node_idle_cores"], list) and len(summary["node_idle_cores"]) == 1
    throttled = summary["redis_throttled"]
    assert isinstance(throttled, list) and len(throttled) == 1 and 0 <= throttled[0] <= 1


@pytest.mark.parametrize("primaries", [1, 3])
def test_bench_on_a_private_cluster(primaries: int) -> None:
    """Games through nodes on a private Redis Cluster: every game played, each primary's
    CPU reported, the layout's groups spread over the primaries."""
    _need_redis7()
    summary = _summary(_bench("--redis-cluster", str(primaries), "--nodes", "2", "--games", "6",
                              "--concurrency", "3", "--json"))  # fmt: skip
    assert summary["errors"] == 0 and summary["games"] == 6
    assert summary["redis"] == "cluster" and summary["redis_primaries"] == primaries
    assert summary["redis_replicas"] == 0 and summary["redis_replica_nodes"] == 0
    groups = summary["redis_groups_per_primary"]
    assert isinstance(groups, list) and sum(groups) == keys.DEFAULT_GROUPS
    per_primary = summary["redis_cpu_ms_per_move_per_primary"]
    assert isinstance(per_primary, list) and len(per_primary) == primaries
    # Six games need not put a room on every primary: each reports its share, some do work.
    assert all(isinstance(ms, float) and ms >= 0 for ms in per_primary)
    assert sum(per_primary) > 0


def test_bench_against_the_ai_on_a_cluster() -> None:
    """Games against the AI at level 1 through a 3-primary cluster: the AI's moves counted
    beside the client's, the control slot's primary named, each primary's CPU per move
    and per AI move, and the workers' CPU."""
    _need_redis7()
    summary = _summary(_bench("--game", "othello", "--ai", "1", "--redis-cluster", "3",
                              "--games", "2", "--concurrency", "2", "--max-seconds", "8",
                              "--json", timeout=60))  # fmt: skip
    assert summary["errors"] == 0 and summary["games"] == 2 and summary["ai_level"] == 1
    assert summary["connections"] == 2  # one a game: the AI needs none
    ai_moves, human_moves = summary["ai_moves"], summary["human_moves"]
    assert isinstance(ai_moves, int) and isinstance(human_moves, int)
    assert ai_moves > 0 and ai_moves + human_moves == summary["moves"]
    assert abs(ai_moves - human_moves) <= 2  # the sides alternate (a pass is a move)
    reply = summary["ai_reply_ms"]
    assert isinstance(reply, dict) and 0 < reply["p50"] <= reply["max"]
    control = summary["redis_control_primary"]
    assert control in range(3)
    per_primary = summary["redis_cpu_ms_per_move_per_primary"]
    per_ai_move = summary["redis_cpu_ms_per_ai_move_per_primary"]
    assert isinstance(per_primary, list) and isinstance(per_ai_move, list)
    assert len(per_primary) == len(per_ai_move) == 3
    assert summary["redis_control_cpu_ms_per_move"] == per_primary[control] > 0
    slot = summary["redis_control_slot_cpu_ms_per_ai_move"]
    assert isinstance(slot, float) and 0 <= slot <= per_ai_move[control]
    assert summary["ai_workers"] == 2
    worker_ms = summary["worker_cpu_ms_per_ai_move"]
    assert isinstance(worker_ms, float) and worker_ms > 0
