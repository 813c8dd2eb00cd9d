"""A node's link to Redis stalls: it notices, then recovers and re-syncs its clients.

Scenario 3: node A reaches Redis through a loopback TCP proxy, node B directly. Players
sit on both (pairs across the nodes, a pair on A, AI games on each). The proxy stops
forwarding for 10 s (connections stay open: no error, just silence). Node A must notice
(its /healthz answers 503 at some point during the stall) and, once the proxy forwards
again, be healthy within a few seconds and deliver to its clients again, re-synced;
every game finishes with the game properties of harness.DrivenGame.verify. Node B is not
affected: its /healthz stays 200 throughout.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.chaos.harness import (
    DELIVERY_BOUND_S,
    DrivenGame,
    HealthProbe,
    play_all,
    report,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(150)]

FREEZE_S = 10.0


async def test_node_link_to_redis_frozen(make_cluster) -> None:
    cluster = make_cluster(nodes=2, workers=2, proxied=(0,))
    a, b = cluster.nodes
    assert a.proxy is not None and b.proxy is None
    games = [
        await DrivenGame.start(cluster, "othello", a, b, seed=301),
        await DrivenGame.start(cluster, "othello", b, a, seed=302),
        await DrivenGame.start(cluster, "othello", a, a, seed=303),
        await DrivenGame.start(cluster, "othello", a, opponent="ai:1", seed=304),
        await DrivenGame.start(cluster, "othello", b, opponent="ai:1", seed=305, seat=1),
    ]
    probe = HealthProbe(cluster.nodes).start()
    window: list[float] = []

    async def freeze_link() -> None:
        assert a.proxy is not None
        t0 = time.time()
        await asyncio.to_thread(a.proxy.freeze)
        await asyncio.sleep(FREEZE_S)
        await asyncio.to_thread(a.proxy.unfreeze)
        t1 = time.time()
        cluster.fault_window(t0, t1)
        window.extend((t0, t1))

    try:
        problems = await play_all(games, timeout=100, fault=freeze_link)
        await asyncio.sleep(max(0.0, window[1] + DELIVERY_BOUND_S + 0.5 - time.time()))
    finally:
        await probe.stop()
    t0, t1 = window
    during_a = probe.statuses(0, t0, t1)
    print(f"node A /healthz during the stall: {during_a}")
    if 503 not in during_a:
        problems.append(f"node A never answered /healthz 503 during the stall: {during_a}")
    after_a = [t for t, i, s in probe.samples if i == 0 and t >= t1 and s == 200]
    if not after_a or after_a[0] - t1 > DELIVERY_BOUND_S:
        problems.append(f"node A: /healthz not 200 within {DELIVERY_BOUND_S} s of the unfreeze")
    during_b = probe.statuses(1, t0, t1)
    if any(s != 200 for s in during_b):
        problems.append(f"node B (direct link) was unhealthy during A's stall: {during_b}")
    assert not problems, report(problems, cluster)
