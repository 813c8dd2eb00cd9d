"""Chaos fixtures: a fresh cluster per test (see harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.chaos.harness import WORKER_LEASE_MS, Cluster


@pytest.fixture
def make_cluster(tmp_path) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(nodes=2, workers=2, proxied=())``: Redis, nodes (those whose index
    is in ``proxied`` reach Redis through a TcpProxy, ``node.proxy``) and workers."""
    made: list[Cluster] = []

    def make(
        nodes: int = 2, workers: int = 2, proxied: tuple[int, ...] = (),
        lease_ms: int = WORKER_LEASE_MS,
    ) -> Cluster:  # fmt: skip
        cluster = Cluster(tmp_path / f"cluster{len(made)}")
        made.append(cluster)
        cluster.start()
        for i in range(nodes):
            cluster.add_node(via_proxy=i in proxied)
        for i in range(workers):
            cluster.add_worker(f"w{i}", lease_ms)
        return cluster

    yield make
    for cluster in made:
        cluster.close()
