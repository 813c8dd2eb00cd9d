"""Rooms end to end: real server process, real Redis, real workers, real WebSockets."""

from __future__ import annotations

import asyncio
import json
import random

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient, ServerError, newer_than

pytestmark = pytest.mark.asyncio


async def get_json(url: str) -> dict:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return await resp.json()


async def play_random(client: KibitzClient, room: str, seat: int, rng: random.Random) -> dict:
    """Play random legal moves for ``seat`` until the game is over; the final state."""
    while True:
        state = await client.wait_state(
            room,
            lambda s: s["status"] == "over" or (s["status"] == "playing" and s["to_move"] == seat),
        )
        if state["status"] == "over":
            return state
        await client.move(room, rng.choice(state["legal_moves"]), state["version"])
        await client.wait_state(room, lambda s, v=state["version"]: s["version"] > v)


async def test_health_and_games(live_server) -> None:
    health = await get_json(live_server.http_url + "/healthz")
    assert health["ok"] is True
    games = await get_json(live_server.http_url + "/api/games")
    names = [g["name"] for g in games]
    assert "tictactoe" in names and "matches" in names


async def move_counters(server) -> tuple[float, float]:
    """The node's counts of AI moves applied from workers' results and of fallback moves."""
    async with aiohttp.ClientSession() as session:
        async with session.get(server.http_url + "/metrics") as resp:
            text = await resp.text()

    def value(name: str) -> float:
        return float(next(line for line in text.splitlines() if line.startswith(name)).split()[-1])

    return value("kibitz_ai_moves_total"), value("kibitz_fallback_moves_total")


async def test_ai_game_moves_come_from_workers(live_server) -> None:
    applied_before, fallbacks_before = await move_counters(live_server)
    async with await KibitzClient.open(live_server.http_url) as client:
        reply = await client.create("tictactoe", "ai:8", seat=0)
        room = reply["room"]
        final = await play_random(client, room, 0, random.Random(1))
    assert final["result"]["winner"] in (None, 1), final["result"]
    ai_moves = [m for m in final["moves"] if m["seat"] == 1]
    assert len(ai_moves) >= 3  # O needs at least three moves to end the game
    # Each AI move was applied from a worker's result (that counter counts those only; the
    # server's own fallback moves have a counter of their own). The node counts a result
    # just after its commit, which the client may see first: read until it is counted.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        applied, fallbacks = await move_counters(live_server)
        if applied - applied_before >= len(ai_moves) or loop.time() > deadline:
            break
        await asyncio.sleep(0.1)
    assert (applied - applied_before, fallbacks - fallbacks_before) == (len(ai_moves), 0)
    # Workers write their counters with their heartbeat, at most a second apart.
    deadline = loop.time() + 5
    while True:
        status = await get_json(live_server.http_url + "/api/status")
        done = sum(int(w["done"]) for w in status["workers"])
        if done >= len(ai_moves) or loop.time() > deadline:
            break
        await asyncio.sleep(0.2)
    assert done >= len(ai_moves)


async def test_spectator_receives_every_move_in_order(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    spectator = await KibitzClient.open(live_server.http_url)
    try:
        room = (await a.create("tictactoe", "human", seat=0))["room"]
        first = await spectator.watch(room)
        assert first["status"] == "waiting" and first["you"] is None
        await b.join(room)
        rng = random.Random(7)
        results = await asyncio.gather(play_random(a, room, 0, rng), play_random(b, room, 1, rng))
        final = results[0]
        seen = []
        while True:
            state = await spectator.next_message(lambda m: m["type"] == "state")
            if state["event"]["kind"] in ("presence", "resync"):
                continue  # same version again: a player connected, or a resend
            seen.append(state["version"])
            if state["status"] == "over":
                break
        # The spectator saw each version exactly once, in order, up to the end.
        assert seen == list(range(first["version"] + 1, final["version"] + 1))
        assert state["moves"] == final["moves"]
        assert "token" not in json.dumps(state)
    finally:
        for c in (a, b, spectator):
            await c.close()


async def test_matches_strongest_ai_moving_first_wins(live_server) -> None:
    async with await KibitzClient.open(live_server.http_url) as client:
        reply = await client.create("matches", "ai:8", seat=1, options={"count": 20})
        final = await play_random(client, reply["room"], 1, random.Random(3))
    assert final["result"]["winner"] == 0
    assert final["moves"][0] == {"move": "3", "display": "3", "seat": 0}


async def test_double_variant_and_msgpack(live_server) -> None:
    async with await KibitzClient.open(live_server.http_url, codec="msgpack") as client:
        reply = await client.create(
            "matches", "ai:3", seat=0, options={"variant": "double", "count": 12}
        )
        state = await client.wait_state(reply["room"], lambda s: s["to_move"] == 0)
        assert state["legal_moves"] == ["1"]
        final = await play_random(client, reply["room"], 0, random.Random(5))
    assert final["status"] == "over"


async def test_join_full_room_and_watch(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    c = await KibitzClient.open(live_server.http_url)
    try:
        room = (await a.create("tictactoe"))["room"]
        joined = await b.join(room)
        assert joined["seat"] == 1 - a.tokens[room][0]
        with pytest.raises(ServerError) as err:
            await c.join(room)
        assert err.value.code == "room/full"
        state = await c.watch(room)
        assert state["status"] == "playing"
    finally:
        for x in (a, b, c):
            await x.close()


async def test_resume_replays_missed_versions(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    try:
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        seat_b, token_b = b.tokens[room]
        seen = (await b.wait_state(room, lambda s: s["status"] == "playing"))["version"]
        await b.close()  # b drops off; a plays on
        await a.move(room, "5")
        await a.wait_state(room, lambda s: s["version"] == seen + 1)
        b2 = await KibitzClient.open(live_server.http_url)
        b2.tokens[room] = (seat_b, token_b)
        await b2.resume(room, token_b, since=seen)
        state = await b2.wait_state(room, lambda s: s["event"]["kind"] == "resync")
        assert state["version"] == seen + 1
        assert state["you"] == seat_b and state["last_move"]["move"] == "5"
        # The resync names what b missed, version by version.
        missed = state["event"]["missed"]
        assert [(e["version"], e["kind"], e["move"]) for e in missed] == [(seen + 1, "move", "5")]
        await b2.move(room, "1")
        after = await b2.wait_state(room, lambda s: s["version"] == seen + 2)
        assert after["moves"][-1] == {"move": "1", "display": "1", "seat": seat_b}
        await b2.close()
    finally:
        await a.close()


async def test_two_nodes_share_rooms(redis_server) -> None:
    from tests.conftest import start_server

    node1, node2 = start_server(redis_server.url), start_server(redis_server.url)
    try:
        a = await KibitzClient.open(node1.http_url)
        b = await KibitzClient.open(node2.http_url)
        watcher = await KibitzClient.open(node2.http_url)
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        await watcher.watch(room)
        rng = random.Random(11)
        final, _ = await asyncio.gather(play_random(a, room, 0, rng), play_random(b, room, 1, rng))
        seen = await watcher.wait_state(room, lambda s: s["status"] == "over")
        assert seen["moves"] == final["moves"]
        assert a.welcome["node"] != b.welcome["node"]
        for c in (a, b, watcher):
            await c.close()
    finally:
        node1.stop()
        node2.stop()


async def test_presence_follows_players_connecting_and_leaving(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    try:
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)

        def connected(state: dict) -> list[bool]:
            return [seat["connected"] for seat in state["seats"]]

        await a.wait_state(room, lambda s: connected(s) == [True, True])
        await b.close()
        state = await a.wait_state(room, lambda s: connected(s) == [True, False])
        assert state["event"]["kind"] == "presence"
        assert state["version"] == 1  # presence is not a room change
    finally:
        await a.close()


async def test_a_node_dies_and_its_players_resume_on_another(redis_server) -> None:
    from tests.conftest import start_server

    node1, node2 = start_server(redis_server.url), start_server(redis_server.url)
    clients: list[KibitzClient] = []
    try:
        a = await KibitzClient.open(node1.http_url)
        b = await KibitzClient.open(node2.http_url)
        clients += [a, b]
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        await a.move(room, "5")
        seen = (await a.wait_state(room, lambda s: len(s["moves"]) == 1))["version"]
        node1.process.kill()  # no goodbye: the node is gone
        node1.process.wait()
        with pytest.raises(ConnectionError):
            await a.next_message(timeout=10)
        a2 = await KibitzClient.open(node2.http_url)
        clients.append(a2)
        a2.tokens[room] = a.tokens[room]
        await a2.resume(room, a.tokens[room][1], since=seen)
        await b.move(room, "1")
        state = await a2.wait_state(room, lambda s: len(s["moves"]) == 2)
        assert state["you"] == 0 and state["to_move"] == 0
        await a2.move(room, "9", state["version"])
        final = await b.wait_state(room, lambda s: len(s["moves"]) == 3)
        assert [m["move"] for m in final["moves"]] == ["5", "1", "9"]
    finally:
        for c in clients:
            await c.close()
        node1.stop()
        node2.stop()


async def test_record_of_a_chess_game_with_pgn(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    try:
        room = (await a.create("chess", seat=0, name="ann"))["room"]
        await b.join(room)
        plies = [(a, "f2f3"), (b, "e7e5"), (a, "g2g4"), (b, "d8h4")]
        for version, (mover, move) in enumerate(plies, start=1):
            await mover.move(room, move, version)
            await mover.wait_state(room, newer_than(version))
        record = await get_json(f"{live_server.http_url}/api/rooms/{room}/record")
    finally:
        await a.close()
        await b.close()
    assert record["result"] == {"winner": 1, "reason": "checkmate", "termination": "checkmate"}
    assert record["display"] == ["f3", "e5", "g4", "Qh4#"]
    kinds = [e["kind"] for e in record["events"]]
    assert kinds == ["created", "joined"] + ["move"] * 4
    assert [e["version"] for e in record["events"]] == list(range(6))
    pgn = record["pgn"]
    assert '[White "ann"]' in pgn and '[Result "0-1"]' in pgn
    assert "1. f3 e5 2. g4 Qh4# 0-1" in pgn


async def test_followers_see_the_ai_thinking(live_server) -> None:
    """Everyone at the version sees the AI's progress; its principal variation is a hint
    to the human playing it, who may also be the spectator (a second connection), so
    nobody gets the line while the game runs (``pv`` [])."""

    async def progress(client: KibitzClient, room: str) -> list[dict]:
        thinking = []
        while True:
            message = await client.next_message(
                lambda m: m["type"] == "thinking" or (m["type"] == "state" and m["moves"])
            )
            if message["type"] == "state":
                return thinking
            thinking.append(message)

    async with await KibitzClient.open(live_server.http_url) as client:
        async with await KibitzClient.open(live_server.http_url) as spectator:
            # Level 8 searches for about two seconds; level 1 would be done at once.
            room = (await client.create("othello", "ai:8", seat=1))["room"]
            await spectator.watch(room)
            thinking, watched = await asyncio.gather(
                progress(client, room), progress(spectator, room)
            )
    # Several progress reports come first.
    assert thinking and watched, "no progress was published"
    for reports in (thinking, watched):
        assert all(t["room"] == room and t["version"] == 0 and t["seat"] == 0 for t in reports)
        depths = [t["depth"] for t in reports]
        assert depths == sorted(depths) and depths[-1] >= 3
    assert all(t["pv"] == [] for t in thinking)  # the player: no hint
    assert all(t["pv"] == [] for t in watched)  # nor a spectator (tests/security/test_leaks.py)
    assert [t["depth"] for t in watched][-1] == [t["depth"] for t in thinking][-1]


async def test_a_game_from_a_given_position_with_a_pass(live_server) -> None:
    # Othello: White (seat 1) to move has no move but Black does, so White must pass.
    rows = ["." * 8] * 8
    rows[0] = "bw......"
    position = "".join(rows) + " w"
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    try:
        reply = await a.request(
            {"type": "create", "game": "othello", "seat": 1, "position": position}
        )
        room = reply["room"]
        a.tokens[room] = (reply["seat"], reply["token"])
        await b.join(room)
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        assert state["to_move"] == 1 and state["legal_moves"] == ["pass"]
        await a.move(room, "pass", state["version"])
        state = await b.wait_state(room, newer_than(state["version"]))
        assert state["to_move"] == 0 and state["moves"][-1]["move"] == "pass"
        with pytest.raises(ServerError) as err:
            await a.request({"type": "create", "game": "othello", "position": "nonsense"})
        assert err.value.code == "position/invalid"
    finally:
        await a.close()
        await b.close()
