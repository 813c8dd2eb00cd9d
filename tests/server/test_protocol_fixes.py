"""Protocol fixes from issue 7 (bursts, rate-limit rids, resume past the replay window,
watch on your own room, leave's reply, the HTTP room shapes): a real server process,
real Redis, real WebSockets."""

from __future__ import annotations

import asyncio
import json
import socket

import aiohttp
import pytest
import websockets
from websockets.frames import Frame, Opcode

from kibitz.client.connection import KibitzClient, ws_url
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def server(redis_server) -> ServerProcess:
    process = start_server(redis_server.url)
    yield process
    process.stop()


async def get_json(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.json()


def send_in_one_write(ws: websockets.ClientConnection, messages: list[dict]) -> None:
    """Write ``messages`` as masked text frames in a single write to the socket, so they
    arrive on the server together (one read), as a client pipelining requests sends them."""
    data = b"".join(
        Frame(Opcode.TEXT, json.dumps(m).encode()).serialize(mask=True, extensions=[])
        for m in messages
    )
    ws.transport.write(data)


@pytest.mark.parametrize("count", [65, 100, 150])
async def test_a_burst_of_pings_in_one_write_is_all_answered(server, count) -> None:
    async with websockets.connect(ws_url(server.http_url), max_size=2**22) as ws:
        await ws.recv()  # welcome
        send_in_one_write(ws, [{"type": "ping", "rid": i} for i in range(count)])
        rids = []
        async with asyncio.timeout(30):
            while len(rids) < count:
                message = json.loads(await ws.recv())
                assert message["type"] == "pong", message
                rids.append(message["rid"])
        assert rids == list(range(count))


async def test_leave_is_answered(server) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        room = (await a.create("tictactoe"))["room"]
        reply = await a.request({"type": "leave", "room": room})
        assert reply == {"type": "left", "room": room, "rid": reply["rid"]}
        # Also for a room this connection did not follow: leaving is idempotent.
        again = await a.request({"type": "leave", "room": room})
        assert again["type"] == "left" and again["room"] == room


async def test_watch_on_your_own_room_keeps_your_seat(server) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        async with await KibitzClient.open(server.http_url) as b:
            room = (await a.create("tictactoe", seat=0))["room"]
            await b.join(room)
            state = await a.watch(room)
            assert state["you"] == 0
            assert state["seats"][0]["connected"] is True
            # Still the player: moves are taken, and later states still say ``you`` 0.
            await a.move(room, "5")
            state = await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            assert state["seats"][0]["connected"] is True
            mine = await a.wait_state(room, lambda s: len(s["moves"]) == 1)
            assert mine["you"] == 0


async def test_resume_far_behind_says_what_it_lists(server) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        async with await KibitzClient.open(server.http_url) as b:
            # Matches from 120 sticks, one at a time: many versions quickly.
            room = (await a.create("matches", seat=0, options={"count": 120}))["room"]
            await b.join(room)
            players = {0: a, 1: b}
            for ply in range(60):
                mover = players[ply % 2]
                await mover.move(room, "1")
                await mover.wait_state(room, lambda s, n=ply + 1: len(s["moves"]) == n)
            state = await b.wait_state(room, lambda s: len(s["moves"]) == 60)
            version = state["version"]
        async with await KibitzClient.open(server.http_url) as late:
            # Within the window: everything, no ``missed_from``.
            await late.resume(room, since=version - 50)
            near = await late.wait_state(room, lambda s: s["event"]["kind"] == "resync")
            assert "missed_from" not in near["event"]
            assert [e["version"] for e in near["event"]["missed"]] == list(
                range(version - 49, version + 1)
            )
        async with await KibitzClient.open(server.http_url) as later:
            await later.resume(room, since=1)
            far = await later.wait_state(room, lambda s: s["event"]["kind"] == "resync")
            assert far["event"]["missed_from"] == version - 50
            assert [e["version"] for e in far["event"]["missed"]] == list(
                range(version - 49, version + 1)
            )


async def test_http_room_has_the_shape_of_a_state(server) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        room = (await a.create("tictactoe", seat=0))["room"]
        watched = await a.watch(room)  # our own room: you 0
        status, body = await get_json(f"{server.http_url}/api/rooms/{room}")
        assert status == 200
        assert body["you"] is None and body["event"] == {"kind": "resync"}
        assert set(body) == set(watched)
        status, body = await get_json(f"{server.http_url}/api/rooms/nosuchroom")
        assert status == 404 and body["code"] == "room/unknown"


async def test_rooms_are_listed_a_page_at_a_time(server) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        made = {(await a.create("tictactoe", seat=0))["room"] for _ in range(7)}
        seen: list[str] = []
        url = f"{server.http_url}/api/rooms?limit=3"
        for _ in range(100):  # bounded
            status, body = await get_json(url)
            assert status == 200 and len(body["rooms"]) <= 3
            seen += [r["room"] for r in body["rooms"]]
            for entry in body["rooms"]:
                assert {"clock", "spectators", "moves", "seats", "game"} <= set(entry)
            if body["next"] is None:
                break
            url = f"{server.http_url}/api/rooms?limit=3&before={body['next']}"
        assert len(seen) == len(set(seen))  # no room twice
        assert made <= set(seen)
        status, body = await get_json(f"{server.http_url}/api/rooms")
        times = [r["updated_ms"] for r in body["rooms"]]
        assert times == sorted(times, reverse=True) and len(times) <= 100
        for bad in ("limit=0", "limit=x", "before=%%%", "before=bm90YXJvb20"):
            status, body = await get_json(f"{server.http_url}/api/rooms?{bad}")
            assert status == 400 and body["code"] == "query/invalid", bad
        status, body = await get_json(f"{server.http_url}/api/rooms?limit=500")
        assert status == 200 and len(body["rooms"]) <= 100


async def test_a_client_that_stops_reading_is_still_dropped(server) -> None:
    """A client that sends requests but reads nothing is cut off once its replies have
    waited MAX_BEHIND_S (10 s) to drain, so it cannot hold the server's memory; the
    others, who read, are not."""
    async with await KibitzClient.open(server.http_url) as a:
        room = (await a.create("tictactoe", seat=0))["room"]
        # 100 long spectator lines, so that each ``watch`` is answered with ~35 KB.
        for _ in range(20):
            async with await KibitzClient.open(server.http_url) as talker:
                await talker.watch(room)
                for _ in range(5):
                    await talker.chat(room, "y" * 300)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window
        host, port = server.http_url.removeprefix("http://").split(":")
        sock.connect((host, int(port)))
        ws = await websockets.connect(
            ws_url(server.http_url), sock=sock, max_queue=1, ping_interval=None
        )
        # 600 watches in one write, and from here on the client reads nothing.
        send_in_one_write(ws, [{"type": "watch", "room": room}] * 600)
        loop = asyncio.get_running_loop()
        started = loop.time()
        while loop.time() - started < 25:  # bounded
            await asyncio.sleep(0.5)
            assert (await a.request({"type": "ping"}))["type"] == "pong"  # a reads: fine
            status, _ = await get_json(f"{server.http_url}/api/rooms/{room}")
            assert status == 200
            if any("stopped reading" in line or "slow client" in line for line in server.log):
                break
        assert any("stopped reading" in line or "slow client" in line for line in server.log)
        assert loop.time() - started >= 10  # not before MAX_BEHIND_S
        received = 0
        async with asyncio.timeout(20):
            with pytest.raises(websockets.ConnectionClosed):
                while True:
                    await ws.recv()
                    received += 1
        assert received < 2 * 600  # it never got all its replies


async def until_pong(ws: websockets.ClientConnection, rid: str) -> list[dict]:
    """Every message up to and including the ``pong`` with ``rid``."""
    seen = []
    async with asyncio.timeout(10):
        while True:
            seen.append(json.loads(await ws.recv()))
            if seen[-1]["type"] == "pong" and seen[-1]["rid"] == rid:
                return seen


async def test_a_change_is_answered_with_its_state_before_the_next_pong(server) -> None:
    """A move, an action or a resign, then a ping: the state the change led to arrives
    before the pong (the doc's way to learn that a request has been handled)."""
    async with (
        websockets.connect(ws_url(server.http_url)) as x,
        websockets.connect(ws_url(server.http_url)) as o,
    ):
        await x.recv(), await o.recv()  # welcomes
        await x.send(json.dumps({"type": "create", "game": "tictactoe", "seat": 0}))
        seat = json.loads(await x.recv())
        room, token = seat["room"], seat["token"]
        await o.send(json.dumps({"type": "join", "room": room}))
        await o.send(json.dumps({"type": "ping", "rid": "joined"}))
        assert "seat" in [m["type"] for m in await until_pong(o, "joined")]
        requests = [
            {"type": "move", "room": room, "token": token, "move": "5", "version": 1},
            {"type": "draw", "room": room, "token": token},
            {"type": "draw", "room": room, "token": token, "action": "accept"},  # offer/none
            {"type": "resign", "room": room, "token": token},
        ]
        expected = ["move", "draw_offer", "offer/none", "resign"]
        for n, request in enumerate(requests):
            await x.send(json.dumps({**request, "rid": f"r{n}"}))
            await x.send(json.dumps({"type": "ping", "rid": f"p{n}"}))
            answers = [m for m in await until_pong(x, f"p{n}") if m["type"] != "pong"]
            kinds = [m["event"]["kind"] for m in answers if m["type"] == "state"]
            kinds += [m["code"] for m in answers if m["type"] == "error"]
            # (x accepting its own offer is refused: there is nothing to accept)
            assert expected[n] in kinds, (request, answers)
