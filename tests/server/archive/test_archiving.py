"""Finished games reach the database exactly once and rooms leave Redis: real Redis,
real ``kibitz serve`` processes, real WebSockets, a real SQLite file."""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from kibitz.client.connection import KibitzClient
from kibitz.server.archive.database import Archive
from kibitz.server.loops import archiver
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.keys import ARCHIVERS_GROUP
from tests.conftest import ServerProcess, new_postgres_database, start_server
from tests.server.test_rooms import play_random

ROOM_KEYS = ("kibitz:room:{{{}}}", "kibitz:room:{{{}}}:events", "kibitz:room:{{{}}}:presence")
#: Short lifetimes so the tests see rooms expire within seconds.
SHORT = ["--finished-ttl", "30", "--waiting-ttl", "1.5", "--idle-game-limit", "2"]


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 15.0) -> Any:
    """``check()``'s first truthy answer, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout} s: {check}")
        await asyncio.sleep(0.1)


async def archived_ttls(redis: Any, room: str) -> list[int]:
    """The room's key TTLs once the archiver has given them (it writes the database first,
    then the lifetimes and the acknowledgement in one script: a record can be read a
    moment before its keys have their TTL)."""

    async def given() -> list[int] | None:
        found = await ttls(redis, room)
        return found if found[0] > 0 else None

    answer: list[int] = await eventually(given)
    return answer


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("archive-db") / "games.sqlite3"


@pytest.fixture(scope="module")
def node(own_redis: EmbeddedRedis, db_path: Path) -> Iterator[ServerProcess]:
    server = start_server(own_redis.url, database_url=f"sqlite:///{db_path}", args=SHORT)
    yield server
    server.stop()


@pytest.fixture
async def redis(own_redis: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(own_redis.url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
async def archive(db_path: Path, node: ServerProcess) -> AsyncIterator[Archive]:
    opened = await Archive.open(f"sqlite:///{db_path}")
    yield opened
    await opened.close()


async def play_a_game(url: str) -> tuple[str, dict]:
    """Two players on ``url`` play tic-tac-toe to the end; (room, final state)."""
    async with await KibitzClient.open(url) as a, await KibitzClient.open(url) as b:
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        rng = random.Random(11)
        final, _ = await asyncio.gather(play_random(a, room, 0, rng), play_random(b, room, 1, rng))
    return room, final


async def ttls(redis: aioredis.Redis, room: str) -> list[int]:
    return [await redis.pttl(key.format(room)) for key in ROOM_KEYS]


async def test_a_finished_game_is_archived_and_its_keys_expire(node, redis, archive) -> None:
    room, final = await play_a_game(node.http_url)
    record = await eventually(lambda: archive.get(room))
    assert record["status"] == "over" and record["result"] == final["result"]
    assert [m["move"] for m in record["moves"]] == [m["move"] for m in final["moves"]]
    times = [m["at_ms"] for m in record["moves"]]
    assert times == sorted(times) and record["started_ms"] <= times[0] <= record["ended_ms"]
    # Archived, so every key of the room has a TTL (about --finished-ttl) and the lobby
    # forgot it; the archive stream holds nothing more.
    main, events, _presence = await archived_ttls(redis, room)
    assert 20_000 < main <= 30_000 and 20_000 < events <= 30_000
    assert await redis.zscore(keys.live(0), room) is None
    assert await redis.xlen(keys.archive(0)) == 0


async def test_a_waiting_room_nobody_joins_expires(node, redis) -> None:
    async with await KibitzClient.open(node.http_url) as client:
        room = (await client.create("tictactoe", seat=0))["room"]
        main, events, _ = await ttls(redis, room)
        assert 0 < main <= 1500 and 0 < events <= 1500

        # The creator's presence hash (written just after the reply) takes the room's TTL.
        async def presence_ttl() -> int:
            return max(0, await redis.pttl(ROOM_KEYS[2].format(room)))  # -2: not yet there

        assert 0 < await eventually(presence_ttl, timeout=2) <= 1500
        assert await redis.zscore(keys.live(0), room) is not None

        async def gone() -> bool:
            left = await redis.exists(*(key.format(room) for key in ROOM_KEYS))
            return left == 0 and await redis.zscore(keys.live(0), room) is None

        await eventually(gone, timeout=10)


async def test_a_waiting_room_without_a_ttl_is_swept(node, redis) -> None:
    """A room made before rooms had TTLs is deleted by the sweeper once it is too old."""
    async with await KibitzClient.open(node.http_url) as client:
        room = (await client.create("tictactoe", seat=0))["room"]
        for key in ROOM_KEYS:
            await redis.persist(key.format(room))

        async def gone() -> bool:
            return not await redis.exists(ROOM_KEYS[0].format(room)) and (
                await redis.zscore(keys.live(0), room) is None
            )

        await eventually(gone, timeout=10)


async def test_rooms_finished_before_the_archive_are_archived(own_redis, node, redis, archive):
    """A finished room with no TTL and no archive entry (as before the archive existed)
    is found by a starting node's one pass over the rooms, archived and given a TTL."""
    room, _ = await play_a_game(node.http_url)
    await eventually(lambda: archive.get(room))
    await archive.engine.dispose()
    async with archive.engine.begin() as conn:
        await conn.exec_driver_sql("DELETE FROM games")
    for key in ROOM_KEYS:
        await redis.persist(key.format(room))
    await redis.hdel(ROOM_KEYS[0].format(room), "archive")  # the mark of a queued room
    newcomer = start_server(own_redis.url, database_url=str(archive.engine.url), args=SHORT)
    try:
        await eventually(lambda: archive.get(room))
        assert (await archived_ttls(redis, room))[0] > 0
    finally:
        newcomer.stop()


async def test_a_poison_archive_entry_is_dropped(node, redis) -> None:
    entry = await redis.xadd(keys.archive(0), {"room": "nosuchroom"})

    async def dropped() -> bool:
        return not await redis.xrange(keys.archive(0), entry, entry)

    await eventually(dropped)
    assert int((await redis.xpending(keys.archive(0), ARCHIVERS_GROUP))["pending"]) == 0


async def test_games_ending_together_are_archived_together_beside_a_poison_entry(
    node, redis, archive
) -> None:
    poison = await redis.xadd(keys.archive(0), {"room": "nosuchroom"})
    games = await asyncio.gather(*(play_a_game(node.http_url) for _ in range(8)))
    for room, final in games:
        record = await eventually(lambda room=room: archive.get(room))
        assert record["result"] == final["result"]
    assert not await redis.xrange(keys.archive(0), poison, poison)
    assert int((await redis.xpending(keys.archive(0), ARCHIVERS_GROUP))["pending"]) == 0


async def test_a_started_game_loses_its_waiting_ttl(node, redis) -> None:
    async with (
        await KibitzClient.open(node.http_url) as a,
        await KibitzClient.open(node.http_url) as b,
    ):
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        assert await ttls(redis, room) == [-1, -1, -1]
        await a.resign(room)
        await a.wait_state(room, lambda s: s["status"] == "over")


async def test_an_idle_game_is_abandoned_and_archived(node, redis, archive) -> None:
    async with (
        await KibitzClient.open(node.http_url) as a,
        await KibitzClient.open(node.http_url) as b,
    ):
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        await a.move(room, state["legal_moves"][0])
        # Nobody moves again: past --idle-game-limit (2 s) a sweeper ends the game.
        over = await b.wait_state(room, lambda s: s["status"] == "over", timeout=15)
    assert over["result"] == {"winner": None, "reason": "abandoned", "termination": "abandon"}
    assert over["event"]["kind"] == "over"
    record = await eventually(lambda: archive.get(room))
    assert record["result"] == {"winner": None, "reason": "abandoned", "termination": "abandon"}
    assert len(record["moves"]) == 1 and record["ended_ms"] - record["moves"][0]["at_ms"] >= 2000
    assert (await archived_ttls(redis, room))[0] > 0


async def test_a_node_killed_before_archiving_leaves_the_game_to_another(tmp_path) -> None:
    """The victim reads the archive entry, then stalls before writing (fault injection)
    and is killed with SIGKILL; a second node claims the entry and archives the game once."""
    url = f"sqlite:///{tmp_path / 'games.sqlite3'}"
    with EmbeddedRedis(tmp_path / "redis", persist=False) as own:
        client = aioredis.from_url(own.url, decode_responses=True)
        victim = start_server(own.url, database_url=url, args=SHORT,
                              extra_env={"KIBITZ_ARCHIVE_DELAY_MS": "600000"})  # fmt: skip
        survivor = None
        try:
            room, final = await play_a_game(victim.http_url)

            async def taken() -> bool:
                pending = await client.xpending(keys.archive(0), ARCHIVERS_GROUP)
                return int(pending["pending"]) == 1

            await eventually(taken)  # the victim holds the entry, unacknowledged
            victim.process.send_signal(signal.SIGKILL)
            victim.process.wait(timeout=10)
            archive = await Archive.open(url)
            try:
                assert await archive.get(room) is None
                survivor = start_server(own.url, database_url=url, args=SHORT)
                record = await eventually(lambda: archive.get(room), timeout=20)
                assert record["result"] == final["result"]
                page = await archive.list(limit=100)
                assert [r["id"] for r in page.records] == [room]  # one row, this game
            finally:
                await archive.close()
            pending = await client.xpending(keys.archive(0), ARCHIVERS_GROUP)
            assert int(pending["pending"]) == 0 and await client.xlen(keys.archive(0)) == 0
            assert await client.pttl(keys.room_key(room)) > 0
        finally:
            victim.stop()
            if survivor is not None:
                survivor.stop()
            await client.aclose()


async def test_a_node_archives_to_postgresql(postgres, tmp_path) -> None:
    url = new_postgres_database(postgres)  # postgresql://..., turned into asyncpg's
    with EmbeddedRedis(tmp_path / "redis", persist=False) as own:
        server = start_server(own.url, database_url=url, args=SHORT)
        archive = await Archive.open(url)
        try:
            room, final = await play_a_game(server.http_url)
            record = await eventually(lambda: archive.get(room))
            assert record["result"] == final["result"]
        finally:
            await archive.close()
            server.stop()


def test_on_a_single_redis_the_archiver_reads_its_one_stream_blocking() -> None:
    """The single Redis keeps today's one stream and blocking reads (a Redis Cluster's
    per-group streams: tests/shared/bus/test_consumer_cluster.py)."""
    assert archiver.streams() == ["kibitz:archive"]
    policy = archiver.policy()
    assert policy.stream == "kibitz:archive" and policy.block_ms == archiver.BLOCK_MS
    assert policy.group == "archivers" and policy.count == archiver.BATCH
