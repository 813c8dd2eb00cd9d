"""Seeks and the lobby end to end: open challenges accepted across nodes, exactly once,
gone with their creator; the lobby's push. Real server processes (two nodes), real
Redis, real WebSockets."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient, ServerError
from tests.conftest import ServerProcess, expire_heartbeat, node_name, start_server

pytestmark = pytest.mark.asyncio


async def get_json(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.json()


async def listed(node: ServerProcess) -> list[str]:
    status, body = await get_json(node.http_url + "/api/seeks")
    assert status == 200
    return [seek["id"] for seek in body["seeks"]]


async def test_a_seek_accepted_on_another_node_seats_both(nodes) -> None:
    async with await KibitzClient.open(nodes[0].http_url) as creator:
        async with await KibitzClient.open(nodes[1].http_url) as acceptor:
            clock = {"initial_ms": 180_000, "increment_ms": 2000}
            seek = await creator.seek("chess", clock=clock, seat=0, name="ann")
            assert seek["game"] == "chess" and seek["seat"] == 0 and seek["name"] == "ann"
            assert seek["clock"] == clock
            assert set(seek) == {
                "id", "game", "options", "clock", "seat", "name", "player", "created_ms"
            }  # fmt: skip
            assert seek["id"] in await listed(nodes[1])
            seat = await acceptor.accept_seek(seek["id"], name="bob")
            assert seat["seat"] == 1 and "seek" not in seat
            room = seat["room"]
            mine = await creator.wait_seek_accepted(seek["id"])
            assert mine["room"] == room and mine["seat"] == 0 and mine["token"]
            # Both follow the room as its players, from one version-0 state.
            for client, you in ((creator, 0), (acceptor, 1)):
                state = await client.wait_state(room, lambda s: True)
                assert state["status"] == "playing" and state["you"] == you
                assert state["version"] == 0
                assert [s["name"] for s in state["seats"]] == ["ann", "bob"]
                if "clock" in state:  # the time control came from the seek
                    assert state["clock"]["initial_ms"] == 180_000
            assert seek["id"] not in await listed(nodes[0])
            await creator.move(room, "e2e4")
            state = await acceptor.wait_state(room, lambda s: len(s["moves"]) == 1)
            assert state["moves"][0]["move"] == "e2e4"
            await acceptor.move(room, "e7e5")
            await creator.wait_state(room, lambda s: len(s["moves"]) == 2)
            # The seek was used up.
            with pytest.raises(ServerError) as gone:
                await acceptor.accept_seek(seek["id"])
            assert gone.value.code == "seek/unknown"


async def test_a_seek_goes_when_its_creator_disconnects(nodes) -> None:
    creator = await KibitzClient.open(nodes[0].http_url)
    seek = await creator.seek("tictactoe")
    assert seek["seat"] == "random"
    assert seek["id"] in await listed(nodes[1])
    await creator.close()
    for _ in range(50):  # bounded: 5 s
        if seek["id"] not in await listed(nodes[1]):
            break
        await asyncio.sleep(0.1)
    assert seek["id"] not in await listed(nodes[1])
    async with await KibitzClient.open(nodes[1].http_url) as late:
        with pytest.raises(ServerError) as gone:
            await late.accept_seek(seek["id"])
        assert gone.value.code == "seek/unknown"


async def test_two_accepting_at_once_make_one_room(nodes, redis_server) -> None:
    import redis

    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    for _ in range(5):
        async with await KibitzClient.open(nodes[0].http_url) as creator:
            seek = await creator.seek("tictactoe", seat=1)
            live_before = r.zcard("kibitz:rooms:live")
            racers = [await KibitzClient.open(nodes[i % 2].http_url) for i in range(4)]
            try:
                results = await asyncio.gather(
                    *(c.accept_seek(seek["id"]) for c in racers), return_exceptions=True
                )
                wins = [x for x in results if isinstance(x, dict)]
                losses = [x for x in results if isinstance(x, ServerError)]
                assert len(wins) == 1 and len(losses) == 3, results
                assert {e.code for e in losses} == {"seek/unknown"}
                assert wins[0]["seat"] == 0
                accepted = await creator.wait_seek_accepted(seek["id"])
                assert accepted["room"] == wins[0]["room"] and accepted["seat"] == 1
                assert r.zcard("kibitz:rooms:live") == live_before + 1
            finally:
                for c in racers:
                    await c.close()
    r.close()


async def test_own_seek_unseek_and_limits(nodes) -> None:
    async with await KibitzClient.open(nodes[0].http_url) as c:
        seek = await c.seek("matches", options={"count": 15})
        assert seek["options"]["count"] == 15
        with pytest.raises(ServerError) as own:
            await c.accept_seek(seek["id"])
        assert own.value.code == "seek/own"
        await c.unseek(seek["id"])
        assert seek["id"] not in await listed(nodes[1])
        with pytest.raises(ServerError) as unknown:
            await c.unseek(seek["id"])
        assert unknown.value.code == "seek/unknown"
        # Bad games, options and clocks are refused like a create's.
        for message, code in (
            ({"type": "seek", "game": "go"}, "game/unknown"),
            ({"type": "seek", "game": "matches", "options": {"count": -1}}, "options/invalid"),
            ({"type": "seek", "game": "chess", "clock": {"initial_ms": 5}}, "clock/invalid"),
            ({"type": "seek", "game": "chess", "seat": 2}, "message/invalid"),
        ):
            with pytest.raises(ServerError) as bad:
                await c.request(message)
            assert bad.value.code == code, (message, bad.value)
        ids = [(await c.seek("tictactoe"))["id"] for _ in range(3)]
        with pytest.raises(ServerError) as limit:
            await c.seek("tictactoe")
        assert limit.value.code == "seek/limit"
    async with await KibitzClient.open(nodes[1].http_url) as other:
        for seek_id in ids:  # gone with the connection
            with pytest.raises(ServerError) as gone:
                await other.accept_seek(seek_id)
            assert gone.value.code == "seek/unknown"


async def test_a_player_cannot_accept_its_own_seek_from_another_connection(nodes) -> None:
    key = "k" * 20
    async with await KibitzClient.open(nodes[0].http_url) as first:
        seek = await first.seek("tictactoe", player_key=key)
        assert seek["player"] is not None
        async with await KibitzClient.open(nodes[1].http_url) as second:
            with pytest.raises(ServerError) as own:
                await second.accept_seek(seek["id"], player_key=key)
            assert own.value.code == "seek/own"


async def test_the_lobby_pushes_seeks_and_games(nodes) -> None:
    async with await KibitzClient.open(nodes[1].http_url) as watcher:
        first = await watcher.lobby()
        assert first["type"] == "lobby" and "seeks" in first and "games" in first
        async with await KibitzClient.open(nodes[0].http_url) as creator:
            seek = await creator.seek("othello", seat=0, name="ann")

            def lists(seek_id: str, present: bool):
                return lambda m: (
                    m["type"] == "lobby"
                    and (any(s["id"] == seek_id for s in m.get("seeks", [])) == present)
                )

            pushed = await watcher.next_message(lists(seek["id"], True), timeout=5)
            [entry] = [s for s in pushed["seeks"] if s["id"] == seek["id"]]
            assert entry["name"] == "ann" and entry["game"] == "othello"
            async with await KibitzClient.open(nodes[0].http_url) as acceptor:
                seat = await acceptor.accept_seek(seek["id"])
                room = seat["room"]

                def has_game(m: dict) -> bool:
                    return m["type"] == "lobby" and any(g["room"] == room for g in m["games"])

                pushed = await watcher.next_message(has_game, timeout=10)
                assert all(s["id"] != seek["id"] for s in pushed["seeks"])
                [game] = [g for g in pushed["games"] if g["room"] == room]
                assert game["game"] == "othello" and game["moves"] == 0
                assert [s["name"] for s in game["seats"]] == ["ann", None]
                assert "clock" in game and "spectators" in game
        # Unsubscribed: no more pushes.
        reply = await watcher.lobby(subscribe=False)
        assert reply == {"type": "lobby", "subscribed": False, "rid": reply["rid"]}
        async with await KibitzClient.open(nodes[0].http_url) as creator:
            await creator.seek("othello")
            await asyncio.sleep(1.5)
            await watcher.request({"type": "ping"})
            while not watcher.inbox.empty():
                assert watcher.inbox.get_nowait()["type"] != "lobby"


async def test_pushes_are_throttled(nodes) -> None:
    async with await KibitzClient.open(nodes[1].http_url) as watcher:
        await watcher.lobby()
        async with await KibitzClient.open(nodes[0].http_url) as creator:
            started = asyncio.get_running_loop().time()
            for _ in range(6):  # twelve changes in quick succession
                seek = await creator.seek("tictactoe")
                await creator.unseek(seek["id"])
            await asyncio.sleep(1.0)
            elapsed = asyncio.get_running_loop().time() - started
        pushes = 0
        await watcher.request({"type": "ping"})
        while not watcher.inbox.empty():
            pushes += watcher.inbox.get_nowait()["type"] == "lobby"
        assert pushes <= 2 * elapsed + 1, (pushes, elapsed)


async def test_a_dead_nodes_seeks_stop_counting(nodes, redis_server) -> None:
    """A node killed outright cannot withdraw its seeks: they stop counting once its
    heartbeat expires (15 s; brought forward here), and the lobby elsewhere drops them."""
    doomed = start_server(redis_server.url)
    dead = node_name(doomed)
    try:
        creator = await KibitzClient.open(doomed.http_url)
        seek = await creator.seek("tictactoe")
        async with await KibitzClient.open(nodes[0].http_url) as watcher:
            first = await watcher.lobby()
            assert seek["id"] in [s["id"] for s in first["seeks"]]
            doomed.process.kill()  # no goodbye: SIGKILL
            doomed.process.wait()
            expire_heartbeat(redis_server.url, dead)
            gone = await watcher.next_message(
                lambda m: m["type"] == "lobby" and all(s["id"] != seek["id"] for s in m["seeks"]),
                timeout=30,
            )
            assert gone["type"] == "lobby"
            assert seek["id"] not in await listed(nodes[1])
            with pytest.raises(ServerError) as unknown:
                await watcher.accept_seek(seek["id"])
            assert unknown.value.code == "seek/unknown"
        creator.ws.transport.abort()
    finally:
        doomed.stop()


async def test_the_accepted_room_is_born_with_both_seated() -> None:
    from kibitz.server.services.seeks import build_room

    seek = {
        "id": "s1", "game": "chess", "options": {}, "seat": "random", "name": "ann",
        "player": "a" * 32, "address": "10.0.0.1",
        "clock": {"initial_ms": 60_000, "increment_ms": 0},
    }  # fmt: skip
    room, event = build_room(seek, "room1234", "t-creator", "t-acceptor", "bob", None, 1000, 1,
                             30_000)  # fmt: skip
    assert room.version == 0 and room.status == "playing"
    assert event.kind == "created" and event.seat == 1
    assert [s.name for s in room.seats] == ["bob", "ann"]
    assert room.seats[1].player == "a" * 32 and room.owner == "10.0.0.1"
    assert room.clock is not None and room.clock["initial_ms"] == 60_000
    # The /api/rooms cursor's round trip and refusals: tests/server/domain/test_cursor.py.
