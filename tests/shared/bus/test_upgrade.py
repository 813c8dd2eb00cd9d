"""Rooms left in Redis by a kibitz from before the tagged room keys go on after an upgrade
(shared/bus/upgrade.py): a real node renames their keys at start-up."""

from __future__ import annotations

import pytest
import redis

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.keys import ROOM_PREFIX, room_key
from kibitz.shared.bus.upgrade import tagged_name
from tests.conftest import start_server


def test_only_untagged_room_keys_get_a_new_name() -> None:
    assert tagged_name("kibitz:room:abc") == "kibitz:room:{abc}"
    assert tagged_name("kibitz:room:abc:events") == "kibitz:room:{abc}:events"
    assert tagged_name("kibitz:room:abc:chat:players") == "kibitz:room:{abc}:chat:players"
    assert tagged_name("kibitz:room:{abc}") is None  # already today's
    assert tagged_name("kibitz:room:{abc}:events") is None
    assert tagged_name("kibitz:rooms:live") is None  # not a room's key
    assert tagged_name("kibitz:room:") is None
    assert tagged_name("kibitz:room:a}b") is None


def untag(client: redis.Redis, room_id: str) -> list[str]:
    """Give a room's keys the names an older kibitz used (``kibitz:room:ID...``)."""
    old = []
    for key in client.scan_iter(match=room_key(room_id) + "*"):
        name = ROOM_PREFIX + room_id + key[len(room_key(room_id)) :]
        client.rename(key, name)
        old.append(name)
    return sorted(old)


@pytest.mark.asyncio
async def test_a_game_left_under_the_old_key_names_goes_on_after_an_upgrade(
    own_redis: EmbeddedRedis,
) -> None:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    node = start_server(own_redis.url)
    try:
        async with await KibitzClient.open(node.http_url) as a:
            async with await KibitzClient.open(node.http_url) as b:
                room = (await a.create("tictactoe", seat=0, name="ann"))["room"]
                await b.join(room)
                await a.move(room, "5")
                await b.wait_state(room, lambda s: len(s["moves"]) == 1)
                token_a, token_b = a.tokens[room][1], b.tokens[room][1]
    finally:
        node.stop()
    old = untag(client, room)
    assert f"kibitz:room:{room}" in old and f"kibitz:room:{room}:events" in old
    assert not list(client.scan_iter(match=room_key(room) + "*"))

    node = start_server(own_redis.url)  # the new version starts on the old keys
    try:
        assert not [key for key in old if client.exists(key)]  # every one renamed
        async with await KibitzClient.open(node.http_url) as a:
            await a.resume(room, token_a)
            state = await a.wait_state(room, lambda s: s["status"] == "playing")
            assert [m["move"] for m in state["moves"]] == ["5"]
            async with await KibitzClient.open(node.http_url) as b:
                b.tokens[room] = (1, token_b)
                await b.resume(room, token_b)
                await b.wait_state(room, lambda s: s["to_move"] == 1)
                await b.move(room, "1")  # the game goes on
                state = await a.wait_state(room, lambda s: len(s["moves"]) == 2)
                assert [m["move"] for m in state["moves"]] == ["5", "1"]
    finally:
        node.stop()
        client.close()
