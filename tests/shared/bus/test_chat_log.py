"""The rooms' chat lists (shared/bus/chat.py) and the benches' server figures
(shared/bus/stats.py), against a real Redis."""

from __future__ import annotations

import json

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.link import LinkedRedis
from kibitz.shared.bus.stats import BlockingServerStats, ServerStats

pytestmark = pytest.mark.asyncio

ROOM = "chatroom01"


def line(text: str) -> str:
    return json.dumps({"seat": None, "name": "kib", "text": text, "at": 1})


async def test_lines_are_numbered_and_capped(client: LinkedRedis) -> None:
    log = ChatLog(client)
    await client.hset(keys.room_key(ROOM), mapping={"data": "{}", "version": 1})
    for i in range(7):
        stored = await log.append(ROOM, "spectators", line(f"l{i}"), 5, 60_000)
        assert stored is not None and json.loads(stored)["id"] == i + 1
    kept = [json.loads(text) for text in await log.lines(ROOM, "spectators")]
    assert [(entry["id"], entry["text"]) for entry in kept] == [
        (i + 1, f"l{i}") for i in range(2, 7)
    ]
    both = await log.both(ROOM)
    assert both.players == [] and len(both.spectators) == 5
    assert await client.ttl(keys.chat_key(ROOM, "spectators")) == -1  # the room has none


async def test_a_line_to_a_room_that_is_gone_stores_nothing(client: LinkedRedis) -> None:
    log = ChatLog(client)
    assert await log.append(ROOM, "players", line("hello?"), 5, 60_000) is None
    assert await client.exists(keys.chat_key(ROOM, "players")) == 0


async def test_a_channel_not_of_ours_is_refused(client: LinkedRedis) -> None:
    log = ChatLog(client)
    await client.hset(keys.room_key(ROOM), mapping={"data": "{}", "version": 1})
    with pytest.raises(ValueError, match="no chat channel"):
        await log.append(ROOM, "everyone", line("hi"), 5, 60_000)
    with pytest.raises(ValueError):
        await log.lines(ROOM, "../x")
    assert await client.keys(keys.room_key(ROOM) + ":chat:*") == []


async def test_the_rearchive_mark_is_cleared(client: LinkedRedis) -> None:
    log = ChatLog(client)
    await client.hset(keys.room_key(ROOM), mapping={"data": "{}", "version": 1, "archive": "q"})
    await log.append(ROOM, "players", line("gg"), 5, 60_000)
    assert await client.exists(keys.rearchive_key(ROOM)) == 1
    assert await client.xlen(keys.archive(0)) == 1
    await log.clear_rearchive_mark(ROOM)
    assert await client.exists(keys.rearchive_key(ROOM)) == 0
    await log.append(ROOM, "players", line("again"), 5, 60_000)
    assert await client.xlen(keys.archive(0)) == 2


async def test_the_benches_read_the_servers_figures(
    own_redis: EmbeddedRedis, client: LinkedRedis
) -> None:
    await client.hset(keys.room_key(ROOM), "version", 1)
    await client.set(keys.events_key(ROOM), "x")
    await client.set("kibitz:seeks", "not a room")
    stats = ServerStats(own_redis.url)
    try:
        assert await stats.room_keys() == 2
        assert await stats.used_memory() > 0
    finally:
        await stats.aclose()
    blocking = BlockingServerStats(own_redis.url)
    try:
        assert blocking.ping() is True
        assert blocking.clients() >= 1  # this test's own client at least
    finally:
        blocking.close()
