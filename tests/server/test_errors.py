"""Every bad input gets a clear, typed error and leaves the room unchanged."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
import websockets
from websockets.frames import Frame, Opcode

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.protocol.codec import MAX_FRAME_BYTES

pytestmark = pytest.mark.asyncio


async def room_json(server, room: str) -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server.http_url}/api/rooms/{room}") as resp:
            return await resp.json()


@pytest.fixture
async def game(live_server):
    """A human tic-tac-toe game between a and b, X (seat 0) has played 5."""
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    room = (await a.create("tictactoe", seat=0))["room"]
    await b.join(room)
    await a.move(room, "5")
    await a.wait_state(room, lambda s: s["moves"])
    before = await room_json(live_server, room)
    yield a, b, room, before
    await a.close()
    await b.close()


async def expect_error(client: KibitzClient, message: dict, code: str) -> str:
    with pytest.raises(ServerError) as err:
        await client.request(message)
    assert err.value.code == code, err.value
    return err.value.message


async def test_illegal_move(live_server, game) -> None:
    a, b, room, before = game
    token = b.tokens[room][1]
    text = await expect_error(
        b, {"type": "move", "room": room, "token": token, "move": "5"}, "move/illegal"
    )
    assert "'5'" in text
    text = await expect_error(
        b, {"type": "move", "room": room, "token": token, "move": "x9"}, "move/invalid"
    )
    assert "'x9'" in text
    assert await room_json(live_server, room) == before


async def test_move_out_of_turn(live_server, game) -> None:
    a, b, room, before = game
    token = a.tokens[room][1]
    text = await expect_error(
        a, {"type": "move", "room": room, "token": token, "move": "1"}, "move/not_your_turn"
    )
    assert "O's turn" in text
    assert await room_json(live_server, room) == before


async def test_wrong_token(live_server, game) -> None:
    a, b, room, before = game
    await expect_error(
        b, {"type": "move", "room": room, "token": "not-a-token", "move": "1"}, "auth/token"
    )
    await expect_error(b, {"type": "resign", "room": room, "token": "nope"}, "auth/token")
    assert await room_json(live_server, room) == before


async def test_stale_version(live_server, game) -> None:
    a, b, room, before = game
    token = b.tokens[room][1]
    await expect_error(
        b, {"type": "move", "room": room, "token": token, "move": "1", "version": 1}, "room/stale"
    )
    assert await room_json(live_server, room) == before


async def test_unknown_room(live_server) -> None:
    async with await KibitzClient.open(live_server.http_url) as c:
        await expect_error(c, {"type": "watch", "room": "nosuchroom"}, "room/unknown")
        await expect_error(c, {"type": "join", "room": "nosuchroom"}, "room/unknown")
        await expect_error(
            c, {"type": "move", "room": "no such room!", "token": "t", "move": "1"}, "room/unknown"
        )
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{live_server.http_url}/api/rooms/nosuchroom") as resp:
            assert resp.status == 404
            assert (await resp.json())["code"] == "room/unknown"


async def test_bad_messages(live_server, game) -> None:
    a, b, room, before = game
    await expect_error(a, {"type": "teleport"}, "message/unknown_type")
    await expect_error(a, {"type": "move", "room": room}, "message/invalid")
    await expect_error(a, {"type": "create", "game": "go"}, "game/unknown")
    await expect_error(
        a, {"type": "create", "game": "matches", "options": {"count": -3}}, "options/invalid"
    )
    await expect_error(
        a, {"type": "create", "game": "matches", "opponent": "ai:99"}, "message/invalid"
    )
    assert await room_json(live_server, room) == before


async def test_malformed_json_keeps_connection(live_server, game) -> None:
    a, b, room, before = game
    await a.send_raw("{not json")
    reply = await a.next_message(lambda m: m["type"] == "error")
    assert reply["code"] == "frame/malformed"
    await a.send_raw("[1, 2]")
    reply = await a.next_message(lambda m: m["type"] == "error")
    assert reply["code"] == "frame/malformed"
    await a.send_raw(b"\xc1\xc1")  # not msgpack
    reply = await a.next_message(lambda m: m["type"] == "error")
    assert reply["code"] == "frame/malformed"
    assert (await a.request({"type": "ping"}))["type"] == "pong"
    assert await room_json(live_server, room) == before


async def test_oversized_frame_closes_with_1009(live_server, game) -> None:
    a, b, room, before = game
    async with websockets.connect(live_server.ws_url, max_size=2**22) as ws:
        json.loads(await ws.recv())  # welcome
        await ws.send(json.dumps({"type": "ping", "pad": "x" * (MAX_FRAME_BYTES + 10)}))
        reply = json.loads(await ws.recv())
        assert reply["code"] == "frame/too_large"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd.code == 1009
    async with websockets.connect(live_server.ws_url, max_size=2**22) as ws:
        await ws.recv()
        with pytest.raises(websockets.ConnectionClosed) as closed:
            # Past the hard limit: closed at once, maybe before the frame is all sent.
            await ws.send("x" * (2 * 1024 * 1024))
            while True:
                await ws.recv()
        assert closed.value.rcvd.code == 1009
    assert await room_json(live_server, room) == before


async def test_flooding_is_rate_limited(live_server) -> None:
    """Past a burst of 60, messages are read at 30 a second; a client still over the rate
    after 10 s of that gets ``rate/limited`` (with its rid) and, after 20, a 1008 close."""
    codes: list[str] = []
    pongs = 0
    rids = []
    async with websockets.connect(live_server.ws_url) as ws:
        await ws.recv()
        frames = [{"type": "ping", "rid": i} for i in range(500)]  # bounded: 500 pings
        ws.transport.write(
            b"".join(
                Frame(Opcode.TEXT, json.dumps(f).encode()).serialize(mask=True, extensions=[])
                for f in frames
            )
        )
        started = asyncio.get_running_loop().time()
        with pytest.raises(websockets.ConnectionClosed) as closed:
            async with asyncio.timeout(60):
                while True:
                    message = json.loads(await ws.recv())
                    if message["type"] == "error":
                        codes.append(message["code"])
                        rids.append(message.get("rid"))
                    else:
                        pongs += 1
        elapsed = asyncio.get_running_loop().time() - started
        assert closed.value.rcvd.code == 1008
    assert set(codes) == {"rate/limited"} and len(codes) == 20
    assert rids == list(range(pongs, pongs + 20))  # each error names its request
    # 60 at once, then 30 a second (never faster) for 10 s, then refused.
    assert pongs >= 60 + 30 * 10 * 0.9, pongs
    assert pongs <= 60 + 30 * elapsed + 5, (pongs, elapsed)
    assert elapsed >= 9.5, elapsed


async def test_nested_and_unencodable_frames(live_server, game) -> None:
    a, b, room, before = game
    await a.send_raw("[" * 20000 + "]" * 20000)
    assert (await a.next_message(lambda m: m["type"] == "error"))["code"] == "frame/malformed"
    await a.send_raw('{"type": "ping", "rid": "\\ud800"}')  # a lone surrogate
    assert (await a.next_message(lambda m: m["type"] == "error"))["code"] == "frame/malformed"
    await a.send_raw('{"type": "ping", "rid": 123456789012345678901234567890}')  # > 64 bits
    assert (await a.next_message(lambda m: m["type"] == "error"))["code"] == "frame/malformed"
    await a.send_raw('{"type": "ping", "rid": 1152921504606846976}')  # 2**60: too big a rid
    assert (await a.next_message(lambda m: m["type"] == "error"))["code"] == "message/invalid"
    assert (await a.request({"type": "ping"}))["type"] == "pong"
    assert await room_json(live_server, room) == before


async def test_room_creation_is_limited_per_connection(live_server) -> None:
    async with await KibitzClient.open(live_server.http_url) as c:
        for _ in range(20):
            await c.create("tictactoe")
        await expect_error(c, {"type": "create", "game": "tictactoe"}, "rate/limited")
        assert (await c.request({"type": "ping"}))["type"] == "pong"
