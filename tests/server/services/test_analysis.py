"""Game analysis against a real ``kibitz serve`` with two real worker processes, real
Redis and the real archive (SQLite in the session's data directory): an evaluation per
position stored with the game and kept over a restart, moves judged, one set of jobs per
game, typed errors; and the archived record keeps which engine played. The judging itself
(pure) is checked on made-up evaluations."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import chess
import pytest
import redis

from kibitz.client.connection import KibitzClient, new_player_key, newer_than
from kibitz.server.archive.database import Archive
from kibitz.server.services import analysis
from tests.conftest import ServerProcess, start_server
from tests.server.archive.test_archive import record as game_record
from tests.server.http.test_games_api import FOOLS_MATE, archived, http_get, play_chess, until

pytestmark = pytest.mark.asyncio


@pytest.fixture(scope="module")
def server(redis_server) -> Iterator[ServerProcess]:
    """Two workers; finished games leave Redis a second after they are archived."""
    process = start_server(redis_server.url, workers=2, args=["--finished-ttl", "1"])
    yield process
    process.stop()


async def http_post(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(url) as resp:
        return resp.status, await resp.json()


async def analysis_done(url: str) -> Any:
    status, body = await http_get(url)
    return body if status == 200 and body["status"] in ("done", "failed") else None


async def test_analysis_of_a_short_game_is_stored_per_position(server, redis_server) -> None:
    base = server.http_url
    room = await play_chess(base, (new_player_key(), new_player_key()), FOOLS_MATE)
    await until(lambda: archived(base, room), "the game archived")
    url = f"{base}/api/games/{room}/analysis"
    # Never analysed: a 200 that says so (no failed request on every game page).
    status, body = await http_get(url)
    assert (status, body) == (200, {"id": room, "game": "chess", "status": "none"})
    status, first = await http_post(url)
    assert status == 202 and first["status"] in ("queued", "running")
    assert first["progress"]["total"] == len(FOOLS_MATE) + 1
    # A second request while it runs (or after) queues nothing more.
    status, second = await http_post(url)
    assert status == 200 and second["progress"]["total"] == len(FOOLS_MATE) + 1
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    assert r.xlen(analysis.JOBS) <= len(FOOLS_MATE) + 1
    started = time.monotonic()
    done = await until(lambda: analysis_done(url), "the analysis stored", seconds=60)
    print(f"analysis of {len(FOOLS_MATE)} plies: {time.monotonic() - started:.1f} s")
    assert done["status"] == "done" and done["progress"] == {"done": 5, "total": 5}
    assert done["thresholds"]["unit"] == "centipawns"
    positions = done["positions"]
    assert [p["ply"] for p in positions] == [0, 1, 2, 3, 4]
    assert all(isinstance(p["score"], int | float) for p in positions)
    assert all(isinstance(p["best"], str) for p in positions[:4])
    # The best move also as people write it: SAN, from the position it is played in.
    for p in positions[:4]:
        board = chess.Board()
        for move in FOOLS_MATE[: p["ply"]]:
            board.push_uci(move)
        assert p["best_display"] == board.san(chess.Move.from_uci(p["best"]))
    assert positions[3]["best_display"] == "Qh4#"
    assert "best_display" not in positions[4]
    # Black mated White: the final position is a proven win for Black.
    assert positions[4]["best"] is None and positions[4]["score"] == -1000
    assert positions[4]["mate"] == 0
    # 2. g4?? lets the queen mate; Black's mate was the best move.
    judged = {m["ply"]: m for m in done["moves"]}
    assert judged[3]["class"] == "blunder" and judged[3]["mark"] == "??"
    assert judged[4]["class"] is None and judged[4]["loss"] == 0
    white, black = done["accuracy"]
    assert 0 <= white < black <= 100
    # Nothing left in Redis: the database holds it, and a POST now answers it.
    assert not r.exists(analysis.meta_key(room)) and r.zscore(analysis.ACTIVE, room) is None
    status, again = await http_post(url)
    assert status == 200 and again["positions"] == positions
    # Another node started now (Redis has nothing of it) reads it from the database.
    restarted = start_server(redis_server.url, workers=0)
    try:
        status, stored = await http_get(f"{restarted.http_url}/api/games/{room}/analysis")
        assert status == 200 and stored["positions"] == positions
    finally:
        restarted.stop()


async def test_analysis_errors(server, redis_server) -> None:
    base = server.http_url
    unknown = "f" * 32
    for method in (http_get, http_post):
        status, body = await method(f"{base}/api/games/{unknown}/analysis")
        assert (status, body["code"]) == (404, "game/not_found")
    async with await KibitzClient.open(base) as a, await KibitzClient.open(base) as b:
        room = (await a.create("chess", seat=0, name="ann"))["room"]
        await b.join(room)
        await a.move(room, "e2e4", 1)
        await a.wait_state(room, newer_than(1))
        status, body = await http_post(f"{base}/api/games/{room}/analysis")
        assert (status, body["code"]) == (409, "analysis/not_finished")
        await a.resign(room)
        await a.wait_state(room, lambda s: s["status"] == "over")
    # Too many analyses under way (all nodes together): a typed refusal, nothing queued.
    r = redis.Redis.from_url(redis_server.url, decode_responses=True)
    now = int(time.time() * 1000)
    fake = {f"busy{n}": now for n in range(analysis.MAX_ACTIVE)}
    r.zadd(analysis.ACTIVE, fake)
    try:
        status, body = await http_post(f"{base}/api/games/{room}/analysis")
        assert (status, body["code"]) == (429, "analysis/busy")
        assert not r.exists(analysis.meta_key(room))
    finally:
        r.zrem(analysis.ACTIVE, *fake)
    # At most MAX_PER_ADDRESS of them asked for from one address (here: loopback).
    mine = {f"mine{n}": now for n in range(analysis.MAX_PER_ADDRESS)}
    for name in mine:
        r.hset(analysis.meta_key(name), mapping={"address": "127.0.0.1", "total": 1})
    r.zadd(analysis.ACTIVE, mine)
    try:
        status, body = await http_post(f"{base}/api/games/{room}/analysis")
        assert (status, body["code"]) == (429, "analysis/limit")
        assert not r.exists(analysis.meta_key(room))
    finally:
        r.zrem(analysis.ACTIVE, *mine)
        r.delete(*(analysis.meta_key(name) for name in mine))
    status, body = await http_post(f"{base}/api/games/{room}/analysis")
    assert status == 202 and body["progress"]["total"] == 2


async def test_archived_record_keeps_the_engine(server) -> None:
    base = server.http_url
    async with await KibitzClient.open(base) as client:
        room = (await client.create("tictactoe", "ai:1", seat=1))["room"]
        state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["seats"][0]["engine"] == "kibitz"
        await client.resign(room)
        await client.wait_state(room, lambda s: s["status"] == "over")
    await until(lambda: archived(base, room), "the game archived")
    status, record = await http_get(f"{base}/api/games/{room}")
    assert status == 200
    assert record["players"][0]["kind"] == "ai" and record["players"][0]["engine"] == "kibitz"
    assert record["players"][1]["engine"] is None


async def test_judging_on_made_up_evaluations() -> None:
    # Chess, scores in pawns from the mover's side as the searcher reports them.
    evals = {
        0: analysis.position_eval("chess", 0, 0, 0.2, "e2e4"),
        1: analysis.position_eval("chess", 1, 1, -0.3, "e7e5"),  # White +0.3
        2: analysis.position_eval("chess", 2, 0, 3.5, "d2d4"),  # Black's move lost 3.2
        3: analysis.position_eval("chess", 3, 1, 9995.0, "d8h4"),  # Black mates in 5 plies
    }
    assert evals[2]["score"] == 350 and evals[3]["score"] == -1000 and evals[3]["mate"] == -5
    summary = analysis.summarise("chess", ["e2e4", "g7g5", "f2f3"], evals)
    moves = {m["ply"]: m for m in summary["moves"]}
    assert moves[1]["class"] is None and moves[1]["loss"] == 0  # the best move
    assert moves[2]["seat"] == 1 and moves[2]["class"] == "blunder" and moves[2]["loss"] == 320
    assert moves[3]["seat"] == 0 and moves[3]["class"] == "blunder"  # +3.5 to mated
    assert summary["counts"][1]["blunder"] == 1 and summary["counts"][0]["blunder"] == 1
    white, black = summary["accuracy"]
    assert 0 < white < 100 and 0 < black < 100
    # A missing evaluation leaves its moves unjudged.
    partial = analysis.summarise("chess", ["e2e4", "g7g5", "f2f3"], {0: evals[0], 1: evals[1]})
    assert [m["ply"] for m in partial["moves"]] == [1] and partial["accuracy"][1] is None


async def test_analyses_table_in_both_databases(archive: Archive) -> None:
    evals = {
        "0": '{"ply":0,"to_move":0,"best":"5","score":0.0}',
        "1": '{"ply":1,"to_move":1,"best":"1","score":0.0}',
    }
    meta = {"game": "tictactoe", "moves": '["5"]', "total": "2", "created_ms": "5"}
    stored = analysis.finished_analysis("g1", meta, evals)
    assert stored["status"] == "done" and stored["moves"][0]["class"] is None
    await archive.save_analysis(stored)
    await archive.save_analysis(stored)  # a second node's retry: still one row
    assert await archive.get_analysis("g1") == stored
    assert await archive.get_analysis("nope") is None
    await archive.delete_analysis("g1")
    assert await archive.get_analysis("g1") is None


async def test_an_archive_at_the_first_revision_gains_the_analyses_table(tmp_path: Path) -> None:
    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config
    from sqlalchemy.ext.asyncio import create_async_engine

    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = create_async_engine(url.replace("sqlite://", "sqlite+aiosqlite://"))

    def to_0001(connection: Any) -> None:
        config = Config()
        migrations = Path(inspect.getfile(Archive)).parent / "migrations"
        config.set_main_option("script_location", str(migrations))
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")

    async with engine.begin() as conn:
        await conn.run_sync(to_0001)
        tables = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
    await engine.dispose()
    assert "games" in tables and "analyses" not in tables
    opened = await Archive.open(url)  # brings it to the newest revision
    try:
        await opened.save(game_record("old", 10))
        meta = {"game": "tictactoe", "moves": "[]", "total": "1", "created_ms": "1"}
        done = analysis.finished_analysis("old", meta, {"0": '{"ply":0,"score":0.0}'})
        await opened.save_analysis(done)
        assert (await opened.get_analysis("old"))["status"] == "done"
        assert (await opened.get("old"))["id"] == "old"
    finally:
        await opened.close()


async def test_lines_shown_in_the_games_notation() -> None:
    """An AI's expected line (``moves[].pv``) and an analysis line (``positions[].pv``) gain
    ``pv_display``: SAN from the position they start in, one text per move, ending at the
    first move that does not play."""
    from kibitz.server.http.games import with_best_display, with_line_display

    start = chess.STARTING_FEN
    moves = [
        {"move": "e2e4", "display": "e4", "seat": 0},
        {"move": "b8c6", "display": "Nc6", "seat": 1, "pv": ["b8c6", "g1f3", "c6d4"]},
        {"move": "g1f3", "display": "Nf3", "seat": 0, "pv": ["g1f3", "zz", "a7a6"]},
    ]
    record = {"id": "g", "game": "chess", "start": start, "moves": moves}
    shown = with_line_display(record)["moves"]
    assert "pv_display" not in shown[0]
    assert shown[1]["pv_display"] == ["Nc6", "Nf3", "Nd4"]
    assert shown[2]["pv_display"] == ["Nf3"]  # bounded: stops at the move that is not one
    assert shown[1]["pv"] == ["b8c6", "g1f3", "c6d4"]  # the wire line is kept
    answer = {"positions": [{"ply": 1, "best": "b8c6", "pv": ["b8c6", "g1f3", "c6d4"]}]}
    position = with_best_display(answer, record)["positions"][0]
    assert position["best_display"] == "Nc6" and position["pv_display"] == ["Nc6", "Nf3", "Nd4"]
