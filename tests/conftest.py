"""Shared fixtures: a real Redis (the product's embedded launcher), a real server process
on loopback with real worker processes, a real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from kibitz.benchmarks.local_postgres import LocalPostgres, find_pg_bin
from kibitz.server.cli.serve import spawn_server
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.embedded_cluster import (
    EmbeddedCluster,
    Redis7MissingError,
    find_cluster_binaries,
)
from kibitz.shared.bus.store import NODE_TTL_S


@pytest.fixture(autouse=True)
def key_layout(request: pytest.FixtureRequest) -> None:
    """The key layout is chosen per process (``keys.configure``, called when a client
    connects): a test not marked ``redis_cluster`` starts on the single-Redis layout, so a
    cluster test before it cannot leave its layout behind."""
    if request.node.get_closest_marker("redis_cluster") is None:
        keys.configure(0)


@pytest.fixture(scope="session", autouse=True)
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Servers keep their SQLite game archive in --data-dir (KIBITZ_DATA_DIR): one
    temporary directory for the session, not the user's own."""
    path = tmp_path_factory.mktemp("data")
    before = os.environ.get("KIBITZ_DATA_DIR")
    os.environ["KIBITZ_DATA_DIR"] = str(path)
    yield path
    if before is None:
        os.environ.pop("KIBITZ_DATA_DIR", None)
    else:
        os.environ["KIBITZ_DATA_DIR"] = before


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """A private PostgreSQL server for the session (initdb in a temporary directory, on a
    free loopback port; as root it runs as the postgres user)."""
    if find_pg_bin() is None:
        # A failure, not a skip: a missing install must not pass as proven.
        pytest.fail("PostgreSQL is not installed (.ci/run installs Debian's postgresql)")
    server = LocalPostgres().start()
    yield server
    server.stop()


def new_postgres_database(server: LocalPostgres) -> str:
    """A fresh, empty database on ``server``; its URL."""
    return server.create_database("t_" + uuid.uuid4().hex[:12])


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), persist=True).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A Redis of the test module's own: no other test's server reads or counts there."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("own-redis"), persist=False).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A private Redis Cluster for the session: 3 primaries, each with a replica, node
    timeout 1 s (the product's launcher, shared/bus/embedded_cluster.py). Tests that
    kill, freeze or reshard start a cluster of their own."""
    try:
        find_cluster_binaries()
    except Redis7MissingError as exc:
        # A failure, not a skip: a missing install must not pass as proven.
        pytest.fail(f"{exc} (.ci/run installs Debian's redis-server and redis-tools)")
    cluster = EmbeddedCluster(
        tmp_path_factory.mktemp("redis-cluster"),
        primaries=3,
        replicas_per_primary=1,
        node_timeout_ms=1000,
    ).start()
    yield cluster
    cluster.stop()


def flush_cluster(cluster: EmbeddedCluster) -> None:
    """Empty ``cluster``: FLUSHALL on every primary (their replicas follow)."""
    for node in cluster.primaries():
        with node.client() as client:
            client.flushall()


@dataclass
class ServerProcess:
    """A ``kibitz serve`` child process; ``http_url`` is where it listens."""

    process: subprocess.Popen[str]
    http_url: str
    log: list[str] = field(default_factory=list)

    @property
    def ws_url(self) -> str:
        return "ws" + self.http_url[4:] + "/ws"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


#: Every test client comes from loopback, so the per-address limits would count the whole
#: suite as one abuser. Test servers lift them unless a test sets its own (``extra_env``).
UNLIMITED = {
    "KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "1000000",
    "KIBITZ_MAX_CREATES_PER_MINUTE": "1000000",
    "KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "1000000",
    "KIBITZ_MAX_SOCKETS_PER_ADDRESS": "0",  # no cap at accept
    "KIBITZ_SIGNUPS_PER_ADDRESS": "1000000",
    "KIBITZ_LOGIN_FAILURES_PER_ADDRESS": "1000000",
}


def start_server(
    redis_url: str,
    workers: int = 0,
    extra_env: dict[str, str] | None = None,
    database_url: str | None = None,
    args: Sequence[str] = (),
) -> ServerProcess:
    """Run ``kibitz serve`` on a free loopback port and wait until it listens.

    ``database_url``: where it archives finished games (default: SQLite in the session's
    data directory); ``args``: more ``kibitz serve`` flags."""
    flags = ["--host", "127.0.0.1", "--port", "0", "--redis", redis_url]
    flags += ["--workers", str(workers), *args]
    if database_url:
        flags += ["--database", database_url]
    process, url, log = spawn_server(flags, {**UNLIMITED, **(extra_env or {})})
    server = ServerProcess(process, url, log)
    # Keep draining its output so the pipe never fills up.
    threading.Thread(
        target=lambda: [log.append(x) for x in process.stdout or []], daemon=True
    ).start()
    return server


@pytest.fixture(scope="session")
def live_server(redis_server: EmbeddedRedis) -> Iterator[ServerProcess]:
    """The server with two real worker processes, on the session's Redis."""
    server = start_server(redis_server.url, workers=2)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def node_name(server: ServerProcess) -> str:
    """The name a server node goes by in Redis and in its ``welcome`` (its /healthz says it)."""
    with urllib.request.urlopen(server.http_url + "/healthz", timeout=10) as reply:
        name: str = json.load(reply)["node"]
    return name


def expire_heartbeat(redis_url: str, node: str) -> None:
    """Bring a killed node's heartbeat to where NODE_TTL_S of silence would leave it, at
    once: its key gone, and its last beat old enough that the next beat of any other node
    announces it dead. Tests of what happens after a node dies use it instead of waiting
    about 16 s; it first checks that the key would have expired by itself (a TTL within
    NODE_TTL_S) and that the node had beaten."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        ttl_ms = int(client.pttl(keys.node_key(node)))
        assert 0 < ttl_ms <= NODE_TTL_S * 1000, f"node {node}'s heartbeat has TTL {ttl_ms} ms"
        seconds, micros = client.time()
        long_ago_ms = seconds * 1000 + micros // 1000 - (NODE_TTL_S + 2) * 1000
        client.delete(keys.node_key(node))
        moved = client.zadd(keys.NODE_BEATS, {node: long_ago_ms}, xx=True, ch=True)
        assert moved == 1, f"node {node} has no beat in {keys.NODE_BEATS}"
    finally:
        client.close()
