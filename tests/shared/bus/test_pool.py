"""The pools' Redis data (shared/bus/pool.py) against a real Redis, driven as a node's
Pool service drives it: joins within their bounds, pairs taken once, entries of dead
nodes and closed connections gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.link import LinkedRedis
from kibitz.shared.bus.pool import PoolBoard, PoolLimits

LIMITS = PoolLimits(per_address=2, per_pool=3, total=5)


@pytest.fixture
async def client(client: LinkedRedis) -> LinkedRedis:
    """The bus tests' client (tests/shared/bus/conftest.py), with one live node."""
    await client.set(keys.node_key("node-a"), "1")
    return client


def entry(
    entry_id: str,
    pool: str = "chess:180000+2000:rated",
    conn: str | None = None,
    address: str | None = None,
    node: str = "node-a",
) -> dict[str, Any]:
    return {
        "id": entry_id,
        "pool": pool,
        "conn": conn or f"conn-{entry_id}",
        "address": address or f"10.0.0.{len(entry_id)}-{entry_id}",
        "node": node,
        "pairing_rating": 1500,
        "joined_ms": 1,
    }


async def test_joins_are_bounded_per_connection_address_pool_and_in_all(client) -> None:
    board = PoolBoard(client)
    assert (await board.join(entry("a", address="x"), LIMITS)).status == "joined"
    assert (await board.join(entry("b", conn="conn-a"), LIMITS)).status == "already"
    assert (await board.join(entry("c", address="x"), LIMITS)).status == "joined"
    assert (await board.join(entry("d", address="x"), LIMITS)).status == "address_full"
    third = await board.join(entry("e"), LIMITS)
    assert third.status == "joined" and third.waiting == 3
    assert (await board.join(entry("f"), LIMITS)).status == "pool_full"
    for name, pool in (("g", "oware:untimed:casual"), ("h", "othello:untimed:casual")):
        assert (await board.join(entry(name, pool=pool), LIMITS)).status == "joined"
    last = await board.join(entry("i", pool="kono:untimed:casual"), LIMITS)
    assert last.status == "all_full"
    assert sorted(await client.hkeys(keys.POOL)) == ["a", "c", "e", "g", "h"]


async def test_of_nodes_pairing_at_once_one_takes_a_pair(client) -> None:
    board = PoolBoard(client)
    for name in "abc":
        await board.join(entry(name), LIMITS)
    # Eight takers at once, for two overlapping pairs: each entry is taken once.
    results = await asyncio.gather(
        *(board.take(*(("a", "b") if i % 2 else ("b", "c"))) for i in range(8))
    )
    taken = [r for r in results if r is not None]
    assert len(taken) == 1
    left = await client.hkeys(keys.POOL)
    assert len(left) == 1 and left[0] in "ac"
    assert await board.take("a", "a") is None


async def test_dead_nodes_entries_are_neither_listed_nor_taken(client) -> None:
    board = PoolBoard(client)
    await board.join(entry("a"), LIMITS)
    await client.hset(keys.POOL, "z", '{"id": "z", "node": "gone", "pool": "p"}')
    await client.hset(keys.POOL, "junk", "not json")
    assert await board.take("a", "z") is None
    assert await client.hexists(keys.POOL, "a")  # both or neither
    assert not await client.hexists(keys.POOL, "z")  # pruned
    await client.hset(keys.POOL, "z", '{"id": "z", "node": "gone", "pool": "p"}')
    assert [e["id"] for e in await board.live()] == ["a"]
    assert sorted(await client.hkeys(keys.POOL)) == ["a"]


async def test_a_connection_takes_out_only_its_own_entries(client) -> None:
    board = PoolBoard(client)
    await board.join(entry("a", conn="c1"), LIMITS)
    await board.join(entry("b", conn="c2"), LIMITS)
    assert await board.leave("c1", ["a", "b"]) == 1
    assert await client.hkeys(keys.POOL) == ["b"]
    assert await board.leave("c1", []) == 0
    taken = await board.take("b", "b")
    assert taken is None
    await board.restore([entry("a", conn="c1")])
    assert sorted(await client.hkeys(keys.POOL)) == ["a", "b"]


async def test_one_player_waits_once_whatever_its_connections(client) -> None:
    board = PoolBoard(client)
    mine = {"player": "p" * 32}
    assert (await board.join({**entry("a"), **mine}, LIMITS)).status == "joined"
    assert (await board.join({**entry("b"), **mine}, LIMITS)).status == "already"
    other = {**entry("c", pool="oware:untimed:casual"), **mine}
    assert (await board.join(other, LIMITS)).status == "already"  # any pool
    assert (await board.join({**entry("d"), "player": None}, LIMITS)).status == "joined"
    assert (await board.join({**entry("e"), "player": None}, LIMITS)).status == "joined"
    assert sorted(await client.hkeys(keys.POOL)) == ["a", "d", "e"]


async def test_a_pair_put_back_leaves_out_an_entry_whose_connection_left(client) -> None:
    """A pairing that could not make its room puts the pair back, but not an entry whose
    connection left (closed) while the pair was out: it would be paired for nobody."""
    board = PoolBoard(client)
    await board.join(entry("a"), LIMITS)
    await board.join(entry("b"), LIMITS)
    taken = await board.take("a", "b")
    assert taken is not None
    assert await board.leave("conn-a", ["a"]) == 0  # out being paired: nothing to remove
    await board.restore(list(taken))
    assert await client.hkeys(keys.POOL) == ["b"]
    assert await client.zcard(keys.POOL_GONE) == 0  # the note is used up
