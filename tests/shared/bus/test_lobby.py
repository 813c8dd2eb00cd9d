"""The lobby's Redis data (shared/bus/lobby.py): seeks and the live rooms, against a real
Redis, driven directly as a node's Seeks service and ``GET /api/rooms`` drive them."""

from __future__ import annotations

import asyncio
import json

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.link import LinkedRedis
from kibitz.shared.bus.lobby import LiveEntry, LiveRooms, SeekBoard

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def client(client: LinkedRedis) -> LinkedRedis:
    """The bus tests' client (tests/shared/bus/conftest.py), with one live node."""
    await client.set(keys.node_key("node-a"), "1")
    return client


def seek(seek_id: str, conn: str = "c1", address: str = "10.0.0.1", node: str = "node-a") -> str:
    record = {"id": seek_id, "node": node, "conn": conn, "address": address, "player": None}
    return json.dumps(record)


async def test_an_address_may_hold_only_so_many_seeks(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    assert [(await board.add(f"s{i}", seek(f"s{i}"), "10.0.0.1", 2)).count for i in range(2)] == [
        1,
        2,
    ]
    refused = await board.add("s2", seek("s2"), "10.0.0.1", 2)
    assert not refused.admitted and refused.count == 2
    assert await client.hlen(keys.SEEKS) == 2  # nothing added
    other = await board.add("t0", seek("t0", address="10.0.0.2"), "10.0.0.2", 2)
    assert other.admitted and other.count == 1


async def test_posting_prunes_dead_nodes_and_broken_entries(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await client.hset(keys.SEEKS, mapping={"x": "not json", "y": seek("y", node="gone")})
    assert (await board.add("s0", seek("s0"), "10.0.0.1", 1)).admitted
    assert sorted(await client.hkeys(keys.SEEKS)) == ["s0"]


async def test_of_two_acceptors_exactly_one_takes_the_seek(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await board.add("s0", seek("s0"), "10.0.0.1", 3)
    results = await asyncio.gather(*(board.take("s0", f"taker{i}", None) for i in range(8)))
    statuses = sorted(r.status for r in results)
    assert statuses == ["taken"] + ["unknown"] * 7
    taken = next(r for r in results if r.status == "taken")
    assert json.loads(taken.seek)["id"] == "s0"
    assert await client.hlen(keys.SEEKS) == 0


async def test_ones_own_seek_is_refused_and_stays(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await board.add("s0", seek("s0", conn="c1"), "10.0.0.1", 3)
    assert (await board.take("s0", "c1", None)).status == "own"
    assert (await board.take("nope", "c2", None)).status == "unknown"
    assert await client.hexists(keys.SEEKS, "s0")


async def test_a_dead_nodes_seek_cannot_be_taken(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await client.hset(keys.SEEKS, "s9", seek("s9", node="gone"))
    assert (await board.take("s9", "c2", None)).status == "unknown"
    assert not await client.hexists(keys.SEEKS, "s9")


async def test_a_connection_withdraws_only_its_own_seeks(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await board.add("s0", seek("s0", conn="c1"), "10.0.0.1", 5)
    await board.add("s1", seek("s1", conn="c2"), "10.0.0.1", 5)
    assert await board.remove("c1", ["s0", "s1", "missing"]) == 1
    assert await client.hkeys(keys.SEEKS) == ["s1"]
    assert await board.remove("c1", []) == 0


async def test_changes_and_announcements_reach_the_channel(
    own_redis: EmbeddedRedis, client: LinkedRedis
) -> None:
    import redis.asyncio as aioredis

    listener = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
    pubsub = listener.pubsub()
    await pubsub.subscribe(keys.SEEKS_CHANNEL)
    try:
        board = SeekBoard(client)
        await board.add("s0", seek("s0"), "10.0.0.1", 3)
        await board.announce({"kind": "accepted", "seek": "s0"})
        heard: list[str] = []
        for _ in range(50):  # bounded: 5 s
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if message is not None:
                heard.append(message["data"])
            if len(heard) == 2:
                break
        assert heard == ['{"kind":"changed"}', '{"kind":"accepted","seek":"s0"}']
    finally:
        await pubsub.aclose()
        await listener.aclose()


async def test_the_lobby_lists_live_nodes_seeks_only(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await board.add("s0", seek("s0"), "10.0.0.1", 3)
    await client.hset(keys.SEEKS, mapping={"d": seek("d", node="gone"), "x": "[1", "n": "5"})
    assert [s["id"] for s in await board.live_seeks()] == ["s0"]


async def test_live_rooms_read_newest_first_within_bounds(client: LinkedRedis) -> None:
    await client.zadd(keys.live(0), {"old": 100, "a": 500, "b": 500, "c": 900})
    live = LiveRooms(client)
    assert await live.newest(None, 200, 0, 10) == [
        LiveEntry("c", 900),
        LiveEntry("b", 500),
        LiveEntry("a", 500),
    ]
    assert await live.newest(500, 0, 1, 2) == [LiveEntry("a", 500), LiveEntry("old", 100)]


async def test_a_seek_is_read_before_it_is_taken_while_its_node_lives(client: LinkedRedis) -> None:
    board = SeekBoard(client)
    await board.add("s0", seek("s0"), "10.0.0.1", 3)
    read = await board.get("s0")
    assert read is not None and read["id"] == "s0"
    assert await client.hexists(keys.SEEKS, "s0")  # reading changes nothing
    assert await board.get("nope") is None
    await client.hset(keys.SEEKS, "s9", seek("s9", node="gone"))
    assert await board.get("s9") is None
    await client.hset(keys.SEEKS, "s8", "not json")
    assert await board.get("s8") is None
