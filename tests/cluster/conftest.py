"""Fixtures of the tests on a real Redis Cluster (tests/cluster/).

Every test here is marked ``redis_cluster`` (so tests/conftest.py's ``key_layout`` leaves
this process on the cluster's key layout) and runs on the session's EmbeddedCluster
(``redis_cluster``: 3 primaries, a replica each), emptied before each module's nodes
start; the fault tests start a cluster of their own (a killed primary, a moved slot...
would change the shared one).

For tests written for a single Redis and run here too (test_single_redis_tests.py):
``redis_server`` is the cluster (its ``url`` is the ``redis+cluster://`` URL) and
``live_server`` a node with two workers on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from tests.chaos.harness import Cluster
from tests.conftest import ServerProcess, flush_cluster, start_server

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.redis_cluster)


@pytest.fixture(autouse=True)
def cluster_layout() -> None:
    """This process reads what the nodes write: the key layout of a cluster URL without
    ``?groups=`` (shared/bus/connect.py)."""
    keys.configure(keys.DEFAULT_GROUPS)


@dataclass
class ClusterAsRedis:
    """What tests written for ``redis_server`` (an EmbeddedRedis) use of it: its URL."""

    cluster: EmbeddedCluster

    @property
    def url(self) -> str:
        return self.cluster.url


@pytest.fixture(scope="module")
def redis_server(redis_cluster: EmbeddedCluster) -> ClusterAsRedis:
    """The session's Redis Cluster, in the place of tests/conftest.py's single Redis."""
    keys.configure(keys.DEFAULT_GROUPS)
    flush_cluster(redis_cluster)
    return ClusterAsRedis(redis_cluster)


@pytest.fixture(scope="module")
def live_server(redis_server: ClusterAsRedis) -> Iterator[ServerProcess]:
    """A node with two real worker processes, on the Redis Cluster."""
    server = start_server(redis_server.url, workers=2)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def game_cluster(
    redis_cluster: EmbeddedCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """The chaos harness on the session's Redis Cluster (emptied first): two nodes, two
    workers, the product's per-address limits, one SQLite archive of its own
    (``cluster.database_url``)."""
    keys.configure(keys.DEFAULT_GROUPS)
    flush_cluster(redis_cluster)
    tmp = tmp_path_factory.mktemp("game-cluster")
    cluster = Cluster(
        tmp, redis_cluster=redis_cluster, database_url=f"sqlite:///{tmp / 'games.sqlite3'}"
    ).start()
    try:
        cluster.add_node()
        cluster.add_node()
        cluster.add_worker("w0")
        cluster.add_worker("w1")
        yield cluster
    finally:
        cluster.close()


#: The per-address connection limit of the fault tests' nodes, and the address that
#: checks it holds after each fault (the players connect from 127.0.0.1).
CONNECTION_LIMIT = 24
LIMIT_ADDRESS = "127.0.0.41"


@pytest.fixture
def make_fault_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``make_fault_cluster(proxy_primaries=False)``: a Redis Cluster of the test's own
    (3 primaries, a replica each, node timeout 1 s), two nodes (per-address connection
    limit ``CONNECTION_LIMIT``, a SQLite archive of their own) and two workers."""
    made: list[Cluster] = []

    def make(proxy_primaries: bool = False) -> Cluster:
        tmp = tmp_path / f"cluster{len(made)}"
        tmp.mkdir()
        cluster = Cluster(
            tmp, redis_cluster=True, proxy_primaries=proxy_primaries,
            database_url=f"sqlite:///{tmp / 'games.sqlite3'}",
            node_env={"KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": str(CONNECTION_LIMIT)},
        )  # fmt: skip
        made.append(cluster)
        cluster.start()
        cluster.add_node()
        cluster.add_node()
        cluster.add_worker("w0")
        cluster.add_worker("w1")
        return cluster

    yield make
    for cluster in made:
        cluster.close()
