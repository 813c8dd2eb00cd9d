"""Chaos fixtures: a fresh cluster per test (see harness.py).

Some scenarios run twice, on a single Redis and on a Redis Cluster: those named in
``ON_BOTH`` get ``make_cluster``'s Redis parametrized (ids ``single`` and ``cluster``; the
cluster case is marked ``redis_cluster``). The test itself is unchanged: ``make_cluster``
builds the Redis Cluster, and the global key names the test module imported from
``keys`` (``JOBS``, ``RESULTS``...) are rebound to the cluster's for that test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kibitz.shared.bus import keys
from tests.chaos.harness import WORKER_LEASE_MS, Cluster

#: Scenarios that run on a single Redis and on a Redis Cluster: a bounded choice, as each
#: cluster case adds its run time to CI's (measured on the cluster: races ~11 s, worker
#: killed ~21 s, link frozen ~26 s, a node killed with AI results pending ~30 s, a
#: connection flood ~17 s). On a cluster, test_node_link_to_redis_frozen freezes
#: the node's links to every primary (harness.NodeLinks). The cluster's own faults (a
#: primary killed or frozen, slots moved, one link cut) are in tests/cluster/test_faults.py.
ON_BOTH = frozenset(
    {
        "test_joins_and_moves_race_through_two_nodes",  # test_races.py
        "test_worker_killed_mid_search",  # test_process_faults.py
        "test_node_link_to_redis_frozen",  # test_network_faults.py
        "test_node_killed_with_ai_results_pending",  # test_process_faults.py
        "test_connection_flood_from_one_address",  # test_abuse.py
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.name in ON_BOTH and "redis_mode" in metafunc.fixturenames:
        metafunc.parametrize(
            "redis_mode",
            ["single", pytest.param("cluster", marks=pytest.mark.redis_cluster)],
            indirect=True,
        )


@pytest.fixture
def redis_mode(request: pytest.FixtureRequest) -> str:
    """``single`` or ``cluster``: what ``make_cluster`` starts (``single`` unless the test
    is one of ``ON_BOTH``)."""
    return str(getattr(request, "param", "single"))


@pytest.fixture
def make_cluster(
    tmp_path, redis_mode: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(nodes=2, workers=2, proxied=(), redis_cluster=False)``: Redis (a
    Redis Cluster with ``redis_cluster``, or when the test runs in ``cluster`` mode),
    nodes (those whose index is in ``proxied`` reach Redis through a proxy,
    ``node.proxy``) and workers."""
    made: list[Cluster] = []

    def make(
        nodes: int = 2, workers: int = 2, proxied: tuple[int, ...] = (),
        lease_ms: int = WORKER_LEASE_MS, redis_cluster: bool | None = None,
    ) -> Cluster:  # fmt: skip
        on_cluster = redis_mode == "cluster" if redis_cluster is None else redis_cluster
        cluster = Cluster(
            tmp_path / f"cluster{len(made)}",
            redis_cluster=on_cluster,
            proxy_primaries=on_cluster and bool(proxied),
        )
        made.append(cluster)
        cluster.start()
        if on_cluster:
            rebind_global_key_names(request, monkeypatch)
        for i in range(nodes):
            cluster.add_node(via_proxy=i in proxied)
        for i in range(workers):
            cluster.add_worker(f"w{i}", lease_ms)
        return cluster

    yield make
    for cluster in made:
        cluster.close()


def rebind_global_key_names(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test module's copies of global key names (``from keys import JOBS``) take the
    cluster's values (``keys.configure`` rebinds ``keys.JOBS``, not the copies) for this
    test; monkeypatch puts them back after it."""
    module = request.module
    for name, value in list(vars(module).items()):
        if not name.isupper() or not isinstance(value, str) or not value.startswith("kibitz:"):
            continue
        now = getattr(keys, name, None)
        if isinstance(now, str) and now != value:
            monkeypatch.setattr(module, name, now)
