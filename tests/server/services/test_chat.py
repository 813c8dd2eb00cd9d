"""Room chat end to end: two channels kept apart, text stored exactly, limits, replay and
the room's lifetime. Real server processes (two nodes), real Redis, real WebSockets."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio as aioredis

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.server.domain.room import Room, Seat
from kibitz.server.services.chat import ChatStore, record_chat, settle_record_chat
from kibitz.shared.bus import keys
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.keys import archive, room_key
from tests.conftest import ServerProcess

pytestmark = pytest.mark.asyncio


def is_chat(room: str, channel: str | None = None, replay: bool = False):
    def match(m: dict) -> bool:
        return (
            m["type"] == "chat"
            and m["room"] == room
            and (channel is None or m["channel"] == channel)
            and bool(m.get("replay")) == replay
        )

    return match


async def no_chat(client: KibitzClient, room: str, wait: float = 0.5) -> None:
    """Nothing from ``room``'s chat reaches ``client`` within ``wait`` (a ping round trip
    after it proves the server has sent whatever it was going to)."""
    await asyncio.sleep(wait)
    await client.request({"type": "ping"})
    while not client.inbox.empty():
        message = client.inbox.get_nowait()
        assert not (message["type"] == "chat" and message["room"] == room), message


async def game(nodes: list[ServerProcess]) -> tuple[KibitzClient, KibitzClient, KibitzClient, str]:
    """Players a (node 0) and b (node 1), spectator s (node 1), in a tic-tac-toe room."""
    a = await KibitzClient.open(nodes[0].http_url)
    b = await KibitzClient.open(nodes[1].http_url)
    s = await KibitzClient.open(nodes[1].http_url)
    room = (await a.create("tictactoe", seat=0, name="ann"))["room"]
    await b.join(room)
    await s.watch(room)
    return a, b, s, room


async def test_players_and_spectators_chat_apart_across_nodes(nodes) -> None:
    a, b, s, room = await game(nodes)
    s2 = await KibitzClient.open(nodes[0].http_url, "msgpack")  # the other codec
    await s2.watch(room)
    try:
        await a.chat(room, "good luck")
        line = await b.next_message(is_chat(room, "players"))
        [message] = line["messages"]
        assert message["text"] == "good luck" and message["seat"] == 0
        assert message["name"] == "ann" and isinstance(message["at"], int)
        assert (await a.next_message(is_chat(room, "players")))["messages"] == [message]
        await s.chat(room, "X is winning", name="kib")
        seen = await s2.next_message(is_chat(room, "spectators"))
        assert seen["messages"][0]["text"] == "X is winning"
        assert seen["messages"][0]["seat"] is None and seen["messages"][0]["name"] == "kib"
        # The players never see the spectators' line; the spectators never the players'.
        await no_chat(a, room)
        await no_chat(b, room)
        while not s.inbox.empty():
            message = s.inbox.get_nowait()
            if message["type"] == "chat":
                assert message["channel"] == "spectators", message
        # A player cannot post to the spectators (it has a seat: it would be a hint line).
        with pytest.raises(ServerError) as refused:
            await a.request({"type": "chat", "room": room, "text": "psst"})
        assert refused.value.code == "chat/invalid"
        # Nor can someone who does not follow the room.
        async with await KibitzClient.open(nodes[0].http_url) as stranger:
            with pytest.raises(ServerError) as refused:
                await stranger.chat(room, "hello")
            assert refused.value.code == "chat/invalid"
            with pytest.raises(ServerError) as refused:
                await stranger.request(
                    {"type": "chat", "room": room, "text": "hi", "token": "not-a-token"}
                )
            assert refused.value.code == "auth/token"
    finally:
        for client in (a, b, s, s2):
            await client.close()


async def test_text_is_stored_and_returned_exactly(nodes) -> None:
    a, b, s, room = await game(nodes)
    try:
        texts = [
            "<script>alert('x')</script>",
            "<b>bold</b> & &amp; \"quoted\" 'single'",
            "héllo wörld 🎉 ♞ 中文 \\n not a newline",
            "x" * 300,
        ]
        for text in texts:
            await a.chat(room, text)
        got = []
        while len(got) < len(texts):
            got += (await b.next_message(is_chat(room, "players")))["messages"]
        assert [m["text"] for m in got] == texts
        ids = [m["id"] for m in got]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        # As kept in Redis too, and as the replay after a resume gives it.
        async with await KibitzClient.open(nodes[0].http_url) as again:
            again.tokens[room] = b.tokens[room]
            await again.resume(room, b.tokens[room][1])
            replay = await again.next_message(is_chat(room, "players", replay=True))
            assert [m["text"] for m in replay["messages"]] == texts
    finally:
        for client in (a, b, s):
            await client.close()


@pytest.mark.parametrize(
    "text",
    ["", "   ", "x" * 301, "line\nbreak", "tab\there", "bell\x07", "nul\x00", "rtl\u202eevil"],
)
async def test_bad_lines_are_refused(nodes, text) -> None:
    a, b, s, room = await game(nodes)
    try:
        with pytest.raises(ServerError) as refused:
            await a.chat(room, text)
        assert refused.value.code == "chat/invalid", refused.value
        with pytest.raises(ServerError) as refused:
            await a.request({"type": "chat", "room": room, "text": 42})
        assert refused.value.code == "chat/invalid"
        await no_chat(b, room, wait=0.1)
    finally:
        for client in (a, b, s):
            await client.close()


async def test_chat_is_rate_limited_per_connection(nodes) -> None:
    a, b, s, room = await game(nodes)
    try:
        for i in range(5):
            await a.chat(room, f"line {i}")
        with pytest.raises(ServerError) as refused:
            await a.chat(room, "one too many")
        assert refused.value.code == "chat/rate"
        assert "wait" in refused.value.message
        # Another connection has its own allowance.
        await b.chat(room, "still fine")
        got = []
        while "still fine" not in got:
            got += [m["text"] for m in (await a.next_message(is_chat(room)))["messages"]]
        assert "one too many" not in got
    finally:
        for client in (a, b, s):
            await client.close()


async def test_resume_and_watch_replay_the_last_hundred_lines(nodes, redis_server) -> None:
    a, b, s, room = await game(nodes)
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    try:
        # 105 lines from a few connections (5 each, the rate limit).
        sent = []
        for batch in range(21):
            async with await KibitzClient.open(nodes[batch % 2].http_url) as talker:
                talker.tokens[room] = a.tokens[room]
                for i in range(5):
                    text = f"line {batch * 5 + i}"
                    await talker.chat(room, text)
                    sent.append(text)
        await s.chat(room, "spectator line", name="kib")
        key = keys.chat_key(room, "players")
        assert r.llen(key) == 100
        assert r.ttl(key) == -1  # a playing room's keys have no TTL, nor has its chat
        async with await KibitzClient.open(nodes[1].http_url) as back:
            await back.resume(room, b.tokens[room][1], since=0)
            replay = await back.next_message(is_chat(room, "players", replay=True))
            assert [m["text"] for m in replay["messages"]] == sent[-100:]
        async with await KibitzClient.open(nodes[0].http_url) as watcher:
            await watcher.watch(room)  # the replay came before watch's reply: it is kept
            lines = watcher.chats[(room, "spectators")]
            assert [m["text"] for m in lines] == ["spectator line"]
            assert (room, "players") not in watcher.chats
        # The chat ends with the room: once the game is over and archived, it gets the
        # room's remaining lifetime.
        await a.resign(room)
        await a.wait_state(room, lambda st: st["status"] == "over")
        for _ in range(100):  # bounded: 10 s
            if r.ttl(key) > 0:
                break
            await asyncio.sleep(0.1)
        assert 0 < r.pttl(key) <= r.pttl(keys.room_key(room)) + 1000
    finally:
        r.close()
        for client in (a, b, s):
            await client.close()


async def test_check_text_and_rate_are_pure() -> None:
    from kibitz.server.services.chat import RATE_LINES, RATE_WINDOW_S, ChatRate, check_text
    from kibitz.shared.protocol.codec import ProtocolError

    assert check_text("<i>hi</i> & 🎉") == "<i>hi</i> & 🎉"  # kept exactly
    for bad in ("", " \u00a0 ", "a\u2028b", "a\u0085b", "a\x1bb", "y" * 301):
        with pytest.raises(ProtocolError) as refused:
            check_text(bad)
        assert refused.value.code == "chat/invalid"
    rate = ChatRate()
    for i in range(RATE_LINES):
        rate.take(100.0 + i)
    with pytest.raises(ProtocolError) as limited:
        rate.take(100.0 + RATE_WINDOW_S - 0.5)
    assert limited.value.code == "chat/rate"
    rate.take(100.0 + RATE_WINDOW_S)  # the first line has left the window


async def test_a_joining_player_gets_the_players_chat_so_far(nodes) -> None:
    async with await KibitzClient.open(nodes[0].http_url) as a:
        room = (await a.create("tictactoe", seat=0, name="ann"))["room"]
        await a.chat(room, "anyone?")
        async with await KibitzClient.open(nodes[1].http_url) as b:
            await b.join(room)
            replay = await b.next_message(is_chat(room, "players", replay=True))
            assert [m["text"] for m in replay["messages"]] == ["anyone?"]


async def test_a_line_after_the_end_queues_the_room_for_the_archive_once(own_redis) -> None:
    """In a finished room (its ``archive`` field set), a line queues the room on the
    archive stream again, with its remaining lifetime, and a burst queues one entry
    until the archiver reads the chat (which clears the mark); the record's chat holds
    both channels in the order said. Before the end, lines queue nothing."""
    client = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
    try:
        store = ChatStore(ChatLog(client))
        seats = [Seat("human", None, "h", "ann"), Seat("human", None, "g", "bob")]
        room = Room(id="chatroom01", game="tictactoe", options={}, start="", seats=seats)
        await client.hset(room_key(room.id), mapping={"data": "{}", "version": 3})
        await store.post(room, "players", 0, "ann", "during the game")
        await asyncio.sleep(0.01)
        assert await client.xlen(archive(0)) == 0
        await client.hset(room_key(room.id), "archive", "queued")  # the game ended
        await client.pexpire(room_key(room.id), 60_000)  # and was archived
        await store.post(room, "spectators", None, "kib", "after")
        await asyncio.sleep(0.01)  # lines said in the same millisecond: the players' first
        await store.post(room, "players", 1, "bob", "gg")
        entries = await client.xrange(archive(0))
        assert len(entries) == 1
        assert entries[0][1]["room"] == room.id and 0 < int(entries[0][1]["ttl_ms"]) <= 60_000
        lines = await settle_record_chat(store.log, room.id)
        said = [(line["channel"], line["text"]) for line in lines]
        assert said == [("players", "during the game"), ("spectators", "after"), ("players", "gg")]
        await store.post(room, "players", 0, "ann", "thanks")  # read since: queued again
        assert await client.xlen(archive(0)) == 2
        assert len(await record_chat(store.log, room.id)) == 4
    finally:
        await client.aclose()
