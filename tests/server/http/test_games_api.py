"""Games over HTTP against real ``kibitz serve`` processes, real Redis and the real
archive (SQLite in the session's data directory): one URL for a game while it is live
and once it is archived, exports read back by python-chess and pydraughts, the list of a
player's games, and all of it again after a restart."""

from __future__ import annotations

import asyncio
import io
import random
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import chess.pgn
import pytest
from draughts import Board as DraughtsBoard
from draughts import Move as DraughtsMove
from draughts.PDN import PDNReader

from kibitz.client.connection import KibitzClient, ServerError, new_player_key, newer_than
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.asyncio

FOOLS_MATE = ["f2f3", "e7e5", "g2g4", "d8h4"]


@pytest.fixture(scope="module")
def server(redis_server) -> Iterator[ServerProcess]:
    """A server that drops finished games from Redis a second after archiving them, so a
    test sees both sources of a game's record."""
    process = start_server(redis_server.url, args=["--finished-ttl", "1"])
    yield process
    process.stop()


async def http_get(url: str) -> tuple[int, Any]:
    """Status and body (JSON when the server says so, else text)."""
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


async def until(check, what: str, seconds: float = 30.0) -> Any:
    """Poll ``check`` (async, truthy when done) for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def archived(base: str, room: str) -> bool:
    """True once Redis has let go of the room (so the record can only be the database's)."""
    status, _ = await http_get(f"{base}/api/rooms/{room}")
    return status == 404


async def play_chess(base: str, keys: tuple[str, str], plies: list[str]) -> str:
    """Two players (with these player keys) play ``plies`` in a new chess room; its id."""
    a = await KibitzClient.open(base)
    b = await KibitzClient.open(base)
    try:
        room = (await a.create("chess", seat=0, name="ann", player_key=keys[0]))["room"]
        await b.join(room, player_key=keys[1])
        for version, move in enumerate(plies, start=1):
            mover = a if version % 2 else b
            await mover.move(room, move, version)
            await mover.wait_state(room, newer_than(version))
        return room
    finally:
        await a.close()
        await b.close()


async def play_draughts(base: str, seed: int, plies: int) -> tuple[str, list[str]]:
    """Random moves for ``plies`` plies, then White resigns; the room and its moves."""
    rng = random.Random(seed)
    clients = [await KibitzClient.open(base), await KibitzClient.open(base)]
    try:
        room = (await clients[0].create("draughts", seat=0))["room"]
        await clients[1].join(room)
        moves = []
        for version in range(1, plies + 1):
            state = await clients[0].wait_state(room, lambda s, v=version: s["version"] >= v)
            if state["status"] == "over":
                break
            mover = clients[state["to_move"]]
            move = rng.choice(state["legal_moves"])
            await mover.move(room, move, state["version"])
            moves.append(move)
        # The last move must be in before the resignation, which comes from the other
        # connection and could otherwise overtake it.
        await clients[0].wait_state(
            room, lambda s: s["version"] > len(moves) or s["status"] == "over"
        )
        await clients[0].resign(room)
        await clients[0].wait_state(room, lambda s: s["status"] == "over")
        return room, moves
    finally:
        for client in clients:
            await client.close()


def pgn_moves_and_result(text: str) -> tuple[list[str], str]:
    game = chess.pgn.read_game(io.StringIO(text))
    assert game is not None and not game.errors
    return [m.uci() for m in game.mainline_moves()], game.headers["Result"]


def pdn_moves_and_result(text: str) -> tuple[list[str], str]:
    [game] = PDNReader(pdn_text=text).games
    board = DraughtsBoard(variant="standard")
    for move in game.moves:  # each one must be legal for pydraughts too
        board.push(DraughtsMove(board, pdn_move=move))
    return game.moves, game.game_ending


async def test_a_game_keeps_its_url_from_live_to_archived(server) -> None:
    keys = (new_player_key(), new_player_key())
    a = await KibitzClient.open(server.http_url)
    b = await KibitzClient.open(server.http_url)
    try:
        room = (await a.create("chess", seat=0, name="ann", player_key=keys[0]))["room"]
        await b.join(room, player_key=keys[1])
        await a.move(room, "e2e4", 1)
        state = await b.wait_state(room, newer_than(1))
        status, live = await http_get(f"{server.http_url}/api/games/{room}")
        assert status == 200
        assert live["status"] == "playing" and live["result"] is None and live["ended_ms"] is None
        assert [m["move"] for m in live["moves"]] == ["e2e4"]
        assert live["moves"][0]["display"] == "e4" and live["moves"][0]["clocks_ms"] is None
        assert [p["player"] for p in live["players"]] == [player_id(k) for k in keys]
        assert live["players"][0]["name"] == "ann"
        # The public views show the ids, never the keys.
        assert [s["player"] for s in state["seats"]] == [player_id(k) for k in keys]
        _, snapshot = await http_get(f"{server.http_url}/api/rooms/{room}")
        assert all(key not in repr(snapshot) for key in keys)
        await b.resign(room)
        await a.wait_state(room, lambda s: s["status"] == "over")
    finally:
        await a.close()
        await b.close()
    await until(lambda: archived(server.http_url, room), "the room to leave Redis")
    status, done = await http_get(f"{server.http_url}/api/games/{room}")
    assert status == 200
    assert done["status"] == "over" and done["result"] == {
        "winner": 0,
        "reason": "Black resigned",
        "termination": "resignation",
    }
    assert done["moves"] == live["moves"] and done["players"] == live["players"]
    assert done["ended_ms"] >= done["started_ms"]


async def test_pgn_of_a_finished_chess_game_reads_back(server) -> None:
    room = await play_chess(server.http_url, (new_player_key(), new_player_key()), FOOLS_MATE)
    for source in ("redis", "database"):
        if source == "database":
            await until(lambda: archived(server.http_url, room), "the room to leave Redis")
        status, text = await http_get(f"{server.http_url}/api/games/{room}/export?format=pgn")
        assert status == 200, text
        assert pgn_moves_and_result(text) == (FOOLS_MATE, "0-1")
        assert '[White "ann"]' in text and '[Termination "checkmate"]' in text


async def test_pdn_of_a_draughts_game_reads_back_in_pydraughts(server) -> None:
    room, moves = await play_draughts(server.http_url, seed=3, plies=30)
    status, text = await http_get(f"{server.http_url}/api/games/{room}/export?format=pdn")
    assert status == 200, text
    assert pdn_moves_and_result(text) == (moves, "0-2")
    status, body = await http_get(f"{server.http_url}/api/games/{room}/export?format=json")
    assert status == 200 and [m["move"] for m in body["moves"]] == moves


async def test_positions_for_the_game_page(server) -> None:
    room = await play_chess(server.http_url, (new_player_key(), new_player_key()), FOOLS_MATE)
    status, body = await http_get(f"{server.http_url}/api/games/{room}/positions")
    assert status == 200
    positions = body["positions"]
    assert [p["ply"] for p in positions] == list(range(len(FOOLS_MATE) + 1))
    assert positions[0]["position"].startswith("rnbqkbnr/pppppppp/")
    assert positions[-1]["view"]["check"] and positions[-1]["to_move"] == 0


async def test_unknown_games_and_formats_are_refused(server) -> None:
    for game_id in ("nosuchgame", "x", "a-very-long-id-" + "z" * 60):
        status, body = await http_get(f"{server.http_url}/api/games/{game_id}")
        assert (status, body["type"], body["code"]) == (404, "error", "game/not_found")
        status, body = await http_get(f"{server.http_url}/api/games/{game_id}/export")
        assert (status, body["code"]) == (404, "game/not_found")
    async with await KibitzClient.open(server.http_url) as client:
        room = (await client.create("tictactoe", "ai:1"))["room"]
    for fmt in ("pgn", "pdn", "sgf"):
        status, body = await http_get(f"{server.http_url}/api/games/{room}/export?format={fmt}")
        assert (status, body["code"]) == (400, "export/format")
        assert "json" in body["message"]


async def test_list_a_players_games_in_pages(server) -> None:
    key = new_player_key()
    me = player_id(key)
    rooms = []
    for _ in range(3):
        rooms.append(await play_chess(server.http_url, (key, new_player_key()), FOOLS_MATE))
    # And one where the player sits second.
    rooms.append(await play_chess(server.http_url, (new_player_key(), key), FOOLS_MATE))

    async def listed() -> Any:
        _, body = await http_get(f"{server.http_url}/api/games?player={me}&limit=100")
        return body if len(body["games"]) == len(rooms) else None

    body = await until(listed, "four archived games")
    assert [g["id"] for g in body["games"]] == rooms[::-1] and body["next"] is None
    assert all(me in (g["players"][0]["player"], g["players"][1]["player"]) for g in body["games"])
    seen, cursor = [], None
    for _ in range(len(rooms)):
        url = f"{server.http_url}/api/games?player={me}&game=chess&limit=3"
        status, page = await http_get(url + (f"&before={cursor}" if cursor else ""))
        assert status == 200 and len(page["games"]) <= 3
        seen += [g["id"] for g in page["games"]]
        cursor = page["next"]
        if cursor is None:
            break
    assert seen == rooms[::-1]
    _, none = await http_get(f"{server.http_url}/api/games?player={me}&game=draughts")
    assert none == {"games": [], "next": None}
    _, capped = await http_get(f"{server.http_url}/api/games?limit=100000")
    assert capped["games"] and len(capped["games"]) <= 100


@pytest.mark.parametrize(
    "query",
    [
        "player=not-an-id",
        "player=" + "A" * 32,
        "game=go",
        "limit=0",
        "limit=-3",
        "limit=ten",
        "before=%25%25%25",
        "before=" + "x" * 300,
    ],
)
async def test_bad_list_parameters(server, query: str) -> None:
    status, body = await http_get(f"{server.http_url}/api/games?{query}")
    assert (status, body["code"]) == (400, "query/invalid"), body


async def test_the_game_catalogue_is_still_there(server) -> None:
    status, games = await http_get(f"{server.http_url}/api/games")
    assert status == 200 and {"chess", "draughts"} <= {g["name"] for g in games}
    # Every level of every game has its rating in rated play, chess's level 1 included.
    for entry in games:
        ratings = [level["rating"] for level in entry["levels"]]
        assert len(ratings) == 8 and all(isinstance(r, int) for r in ratings), entry["name"]
        assert ratings == sorted(ratings) and ratings[0] > 0, entry["name"]
        assert {"level", "elo", "elo_95", "games", "scale"} <= set(entry["levels"][0])


async def test_same_key_same_player_on_two_connections(server) -> None:
    key, other = new_player_key(), new_player_key()
    a = await KibitzClient.open(server.http_url)
    b = await KibitzClient.open(server.http_url)
    try:
        first = (await a.create("tictactoe", "ai:1", player_key=key))["room"]
        second = (await b.create("othello", "ai:1", player_key=key))["room"]
        third = (await b.create("othello", "ai:1", player_key=other))["room"]
        ids = []
        for room in (first, second, third):
            _, record = await http_get(f"{server.http_url}/api/games/{room}")
            ids.append({p["player"] for p in record["players"]} - {None})
        assert ids == [{player_id(key)}, {player_id(key)}, {player_id(other)}]
        assert len(player_id(key)) == 32 and player_id(key) != player_id(other)
        # No key, no id; a malformed key is refused.
        anonymous = (await a.create("tictactoe", "ai:1"))["room"]
        _, record = await http_get(f"{server.http_url}/api/games/{anonymous}")
        assert [p["player"] for p in record["players"]] == [None, None]
        for bad in ("short", "x" * 129, "has spaces in it ok", "sl/ash" * 4):
            with pytest.raises(ServerError) as refused:
                await a.request({"type": "create", "game": "tictactoe", "player_key": bad})
            assert refused.value.code == "message/invalid"
    finally:
        await a.close()
        await b.close()


async def test_records_and_exports_survive_a_restart(redis_server) -> None:
    """Games on the same Redis and database are served the same by a new process, both
    one still in Redis and one only in the database."""
    first = start_server(redis_server.url)  # finished games stay in Redis for an hour
    try:
        in_redis = await play_chess(
            first.http_url, (new_player_key(), new_player_key()), FOOLS_MATE
        )
        draughts_room, draughts_moves = await play_draughts(first.http_url, seed=5, plies=20)
        _, before = await http_get(f"{first.http_url}/api/games/{in_redis}")
    finally:
        first.stop()
    second = start_server(redis_server.url, args=["--finished-ttl", "1"])
    try:
        status, after = await http_get(f"{second.http_url}/api/games/{in_redis}")
        assert status == 200 and after == before
        _, text = await http_get(f"{second.http_url}/api/games/{in_redis}/export?format=pgn")
        assert pgn_moves_and_result(text) == (FOOLS_MATE, "0-1")
        only_in_db = await play_chess(
            second.http_url, (new_player_key(), new_player_key()), FOOLS_MATE
        )
        await until(lambda: archived(second.http_url, only_in_db), "the room to leave Redis")
    finally:
        second.stop()
    third = start_server(redis_server.url)
    try:
        assert await archived(third.http_url, only_in_db)
        _, text = await http_get(f"{third.http_url}/api/games/{only_in_db}/export?format=pgn")
        assert pgn_moves_and_result(text) == (FOOLS_MATE, "0-1")
        _, text = await http_get(f"{third.http_url}/api/games/{draughts_room}/export?format=pdn")
        assert pdn_moves_and_result(text) == (draughts_moves, "0-2")
    finally:
        third.stop()
