"""The per-address counters of the bus (shared/bus/limits.py), against a real Redis.

No server runs here: the counters are driven directly, as a node's limiter drives them,
and the keys they leave are read with a plain client.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.limits import CONNS_TTL_S, AddressCounters
from kibitz.shared.bus.link import LinkedRedis

pytestmark = pytest.mark.asyncio

ADDRESS = "192.0.2.7"  # documentation range


async def test_the_sliding_window_never_admits_more_than_the_budget(
    client: LinkedRedis,
) -> None:
    """Hammered by concurrent counts for three windows, no span of one window holds more
    admitted rooms than the budget (scores are Redis's own clock, read as admitted)."""
    counters = AddressCounters(client, "node-a")
    budget, window_ms = 5, 400
    key = keys.address_creates_key(ADDRESS)
    admitted: list[int] = []
    refused = 0
    stop = time.monotonic() + 3 * window_ms / 1000
    for _ in range(2_000):  # bounded: also by time
        if time.monotonic() >= stop:
            break
        counts = await asyncio.gather(
            *(counters.count_create(ADDRESS, budget, window_ms) for _ in range(4))
        )
        for counted in counts:
            if counted.admitted:
                member = counted.handle.rpartition(" ")[2]
                score = await client.zscore(key, member)
                assert score is not None and counted.total <= budget
                admitted.append(int(score))
            else:
                refused += 1
                assert counted.total == budget and counted.handle == ""
        await asyncio.sleep(0.01)
    assert refused > 0 and len(admitted) > budget  # the window did slide
    most = max(sum(1 for t in admitted if s - window_ms < t <= s) for s in admitted)
    assert most <= budget, f"{most} admitted within {window_ms} ms (budget {budget})"
    assert await client.zcard(key) <= budget
    assert 0 < await client.pttl(key) <= window_ms


async def test_a_refund_gives_back_one_room_once(client: LinkedRedis) -> None:
    counters = AddressCounters(client, "node-a")
    counted = [await counters.count_create(ADDRESS, 3, 60_000) for _ in range(3)]
    assert [c.total for c in counted] == [1, 2, 3] and all(c.admitted for c in counted)
    assert not (await counters.count_create(ADDRESS, 3, 60_000)).admitted
    assert await counters.refund_create(counted[0].handle) is True
    assert await counters.refund_create(counted[0].handle) is False  # once only
    assert (await counters.count_create(ADDRESS, 3, 60_000)).admitted
    assert not (await counters.count_create(ADDRESS, 3, 60_000)).admitted


async def test_a_handle_not_of_ours_refunds_nothing(client: LinkedRedis) -> None:
    """A handle naming another key (or none) is refused and changes nothing."""
    counters = AddressCounters(client, "node-a")
    counted = await counters.count_create(ADDRESS, 3, 60_000)
    member = counted.handle.rpartition(" ")[2]
    await client.zadd("kibitz:rooms:live", {member: 1})
    for bad in ("", member, f"kibitz:rooms:live {member}", f"{keys.room_key('r')} {member}"):
        assert await counters.refund_create(bad) is False
    assert await client.zcard("kibitz:rooms:live") == 1
    assert await client.zcard(keys.address_creates_key(ADDRESS)) == 1


async def test_connections_count_over_live_nodes_only(client: LinkedRedis) -> None:
    """Connections of an address on two nodes add up; past the limit a connection is
    refused and counted out; a node without a heartbeat stops counting."""
    a, b = AddressCounters(client, "node-a"), AddressCounters(client, "node-b")
    await client.set(keys.node_key("node-a"), "1")
    await client.set(keys.node_key("node-b"), "1")
    key = keys.address_connections_key(ADDRESS)
    assert [(await a.connect(ADDRESS, 3)).total for _ in range(2)] == [1, 2]
    assert (await b.connect(ADDRESS, 3)).total == 3
    refused = await b.connect(ADDRESS, 3)
    assert not refused.admitted and refused.total == 4
    assert await client.hgetall(key) == {"node-a": "2", "node-b": "1"}
    assert 0 < await client.ttl(key) <= CONNS_TTL_S
    await client.delete(keys.node_key("node-b"))  # node-b died: its place is given back
    assert (await a.connect(ADDRESS, 3)).total == 3
    assert await client.hgetall(key) == {"node-a": "3"}
    for _ in range(3):
        await a.disconnect(ADDRESS)
    assert await client.exists(key) == 0  # the last field went at zero
