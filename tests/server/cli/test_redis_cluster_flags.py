"""``--redis-cluster`` and ``redis+cluster://`` URLs on the command line: ``kibitz serve``,
``kibitz worker`` and ``kibitz status`` build the same URL from a cluster's nodes, refuse
a malformed one (or both flags) before anything starts, and ``kibitz status`` reads a
real cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kibitz.server.cli import build_parser
from kibitz.server.cli.serve import config_from_args
from kibitz.server.cli.worker import redis_url_of
from kibitz.server.config import ConfigError
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from tests.conftest import flush_cluster


def kibitz(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KIBITZ_REDIS_URL": "", **(env or {})},
        check=False,
    )


def test_serve_builds_the_cluster_url_from_its_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KIBITZ_REDIS_URL", raising=False)
    args = build_parser().parse_args(
        ["serve", "--redis-cluster", "redis://:pw@10.0.0.1:7000", "10.0.0.2:7000"]
    )
    config = config_from_args(args)
    assert config.redis_url == "redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000"
    both = build_parser().parse_args(["serve", "--redis", "redis://h", "--redis-cluster", "h:1"])
    with pytest.raises(ConfigError, match="--redis and --redis-cluster"):
        config_from_args(both)
    bad = build_parser().parse_args(["serve", "--redis-cluster", "h:port"])
    with pytest.raises(ConfigError, match="--redis-cluster: not a host:port"):
        config_from_args(bad)
    monkeypatch.setenv("KIBITZ_REDIS_URL", "redis+cluster://h:1?groups=none")
    with pytest.raises(ConfigError, match=r"KIBITZ_REDIS_URL\): groups must be a number"):
        config_from_args(build_parser().parse_args(["serve"]))


def test_serve_prints_a_cluster_url_without_its_password(tmp_path: Path) -> None:
    done = kibitz(
        ["serve", "--print-config", "--redis-cluster", "redis://:hunter2@a:7000", "b:7001"],
        {"KIBITZ_DATA_DIR": str(tmp_path / "data")},
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" = ", 1) for line in done.stdout.splitlines())
    assert lines["redis_url"].startswith("redis+cluster://***@a:7000,b:7001  # ")
    assert "hunter2" not in done.stdout
    refused = kibitz(["serve", "--print-config"], {"KIBITZ_REDIS_URL": "redis+cluster://a:1/0"})
    assert refused.returncode == 2 and "one database" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_worker_takes_a_cluster_from_a_flag_or_its_variable() -> None:
    parse = build_parser().parse_args
    args = parse(["worker", "--redis-cluster", "a:1", "b:2"])
    assert redis_url_of(args, {"KIBITZ_REDIS_URL": "redis://other"}) == "redis+cluster://a:1,b:2"
    args = parse(["worker"])
    env = {"KIBITZ_REDIS_URL": "redis+cluster://:pw@a:1?groups=8"}
    assert redis_url_of(args, env) == env["KIBITZ_REDIS_URL"]
    with pytest.raises(SystemExit, match="is required"):
        redis_url_of(parse(["worker"]), {})
    with pytest.raises(SystemExit, match="name the shared Redis once"):
        redis_url_of(parse(["worker", "--redis", "redis://h", "--redis-cluster", "a:1"]), {})
    with pytest.raises(SystemExit, match="groups must be"):
        redis_url_of(parse(["worker", "--redis", "redis+cluster://a:1?groups=0"]), {})


def test_status_reads_a_cluster(redis_cluster: EmbeddedCluster) -> None:
    flush_cluster(redis_cluster)
    done = kibitz(["status", "--redis", f"{redis_cluster.url}?groups=8"])
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["groups"] == 8
    assert status["archive"] == {"backlog": 0} and status["live_rooms"] == 0
    assert status["nodes"] == [] and status["workers"] == []
    first, *others = [node.address for node in redis_cluster.primaries()]
    nodes = [f"redis://:{redis_cluster.password}@{first}", *others]
    done = kibitz(["status", "--redis-cluster", *nodes])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["groups"] == keys.DEFAULT_GROUPS


async def test_a_node_and_its_workers_serve_a_game_on_a_cluster(
    redis_cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    """``kibitz serve --redis-cluster ... --workers 1``: an AI game gets its move, and
    ``kibitz status`` sees the node and the worker."""
    from kibitz.client.connection import KibitzClient
    from kibitz.server.cli.serve import spawn_server

    flush_cluster(redis_cluster)
    first, *others = [node.address for node in redis_cluster.primaries()]
    nodes = [f"redis+cluster://:{redis_cluster.password}@{first}?groups=8", *others]
    process, url, _ = spawn_server(
        ["--port", "0", "--data-dir", str(tmp_path), "--workers", "1", "--redis-cluster", *nodes],
        {"KIBITZ_REDIS_URL": ""},
    )
    try:
        async with await KibitzClient.open(url) as client:
            room = (await client.create("tictactoe", "ai:1", seat=1))["room"]
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["moves"][0]["seat"] == 0
        deadline = time.monotonic() + 20
        while True:  # the worker counts the job in its next heartbeat
            done = kibitz(["status", "--redis", f"{redis_cluster.url}?groups=8"])
            status = json.loads(done.stdout)
            if [worker["done"] for worker in status["workers"]] == ["1"]:
                break
            assert time.monotonic() < deadline, status
        assert len(status["nodes"]) == 1 and status["live_rooms"] == 1
    finally:
        process.terminate()
        process.wait(timeout=20)
        keys.configure(0)
