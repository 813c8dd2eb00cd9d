"""Real engines as AI backends: Debian's Stockfish (installed by .ci/run) behind
``kibitz worker --engine chess=...``, with our searcher as the fallback."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import chess
import chess.engine
import pytest
import redis

from kibitz.client.connection import KibitzClient
from kibitz.shared.games import find_game
from kibitz.shared.protocol.jobs import Budget, Job, JobResult
from kibitz.workers.engines import (
    LEVEL_ELO,
    EngineFailure,
    UciEngine,
    launch,
    strength_options,
)
from kibitz.workers.worker import GROUP, JOBS, RESULTS, room_key
from tests.conftest import start_server

STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"
CHESS = find_game("chess")


@pytest.fixture(scope="module", autouse=True)
def stockfish_installed() -> None:
    if not os.access(STOCKFISH, os.X_OK):
        # A failure, not a skip: a missing engine must not pass as proven.
        pytest.fail(f"Stockfish is not installed at {STOCKFISH} (.ci/run installs Debian's)")


def start_worker(url: str, name: str, engine: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kibitz.server.cli", "worker", "--redis", url,
             "--name", name, "--engine", f"chess={engine}"],
            env={**os.environ, "KIBITZ_LOG": "INFO"}, stderr=out, stdout=out,
        )  # fmt: skip


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_until(predicate, timeout: float = 20.0, poll: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(poll)


def engine_children(pid: int) -> list[int]:
    """The engine processes a worker started (its children running stockfish)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"stockfish" in cmdline:
            found.append(int(entry.name))
    return found


# -- the engine on its own ------------------------------------------------------------------


def test_level_table_on_stockfish() -> None:
    engine = launch(STOCKFISH)
    try:
        options = engine.options
        assert strength_options(options, 1) == {"UCI_LimitStrength": True, "UCI_Elo": 1350}
        assert strength_options(options, 5) == {"UCI_LimitStrength": True, "UCI_Elo": 2000}
        assert strength_options(options, 8) == {"UCI_LimitStrength": False}
        elos = [strength_options(options, level).get("UCI_Elo") for level in range(1, 8)]
        assert elos == list(LEVEL_ELO[:7]) and elos == sorted(elos)
    finally:
        engine.close()
    # An engine with only a Skill Level option (python-chess's own option record).
    skill = {"Skill Level": chess.engine.Option("Skill Level", "spin", 20, 0, 20, None)}
    assert [strength_options(skill, level)["Skill Level"] for level in range(1, 9)] == [
        0, 1, 3, 4, 7, 9, 13, 20,
    ]  # fmt: skip
    assert strength_options({}, 3) == {}


def test_cancel_stops_the_engine_and_a_bad_path_fails() -> None:
    engine = UciEngine("chess", STOCKFISH)
    try:
        state = CHESS.initial()
        job = Job("j", "r", 0, "chess", CHESS.format_position(state), [], 8, Budget(time_ms=20_000))
        from kibitz.shared.search.limits import CancelToken

        cancel = CancelToken()
        threading.Timer(0.3, cancel.cancel).start()
        started = time.monotonic()
        played = engine.play(job, state, cancel)
        assert time.monotonic() - started < 2.0
        assert chess.Move.from_uci(played.move_text) in state.board.legal_moves
        assert played.engine.startswith("Stockfish")
    finally:
        engine.close()
    missing = UciEngine("chess", "/nonexistent/stockfish")
    with pytest.raises(EngineFailure):
        missing.play(job, CHESS.initial())


def test_a_frozen_engine_is_given_up_and_replaced() -> None:
    """An engine that stops answering (SIGSTOP mid-search) costs its job a bounded time
    (limit + 1 s, then 2 s after ``stop``); the next job gets a new engine process."""
    engine = UciEngine("chess", STOCKFISH)
    try:
        state = CHESS.initial()
        job = Job("j", "r", 0, "chess", CHESS.format_position(state), [], 8, Budget(time_ms=200))
        assert engine.start() is not None
        frozen = engine.pid
        assert frozen is not None
        threading.Timer(0.05, os.kill, (frozen, signal.SIGSTOP)).start()
        started = time.monotonic()
        with pytest.raises(EngineFailure, match="after stop"):
            engine.play(job, state)
        assert time.monotonic() - started < 5.0
        played = engine.play(job, state)
        assert engine.pid not in (None, frozen) and played.engine.startswith("Stockfish")
    finally:
        engine.close()


def test_old_results_parse_as_our_searcher() -> None:
    fields = {"result": '{"job_id": "a", "room": "b", "version": 1, "move": "e2e4"}'}
    assert JobResult.from_fields(fields).engine == "kibitz"
    result = JobResult("a", "b", 1, "e2e4", engine="Stockfish 15.1")
    assert JobResult.from_fields(result.to_fields()).engine == "Stockfish 15.1"


def test_arena_peer_plays_legal_moves() -> None:
    from kibitz.server.cli.arena import make_player

    player = make_player(CHESS, "stockfish:1350", True, 1)
    try:
        state = CHESS.initial()
        for _ in range(4):
            move = player.choose(state, Budget(time_ms=30))
            assert move in CHESS.legal_moves(state)
            state = CHESS.apply(state, move)
    finally:
        player.inner.close()
    with pytest.raises(ValueError):
        make_player(CHESS, "stockfish:900", True, 1)


# -- a worker process with --engine ---------------------------------------------------------


def test_worker_moves_are_stockfish_moves_at_a_fixed_depth(private_redis, tmp_path) -> None:
    """Jobs at depth 9 for one room: every move the worker posts is the move python-chess
    gets from its own Stockfish for the same positions, in the same order (same room:
    one ``ucinewgame``, so the hash carries over alike)."""
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    r.xgroup_create(JOBS, GROUP, id="0", mkstream=True)
    worker = start_worker(private_redis.url, "sf", STOCKFISH, tmp_path / "worker.log")
    reference = chess.engine.SimpleEngine.popen_uci(STOCKFISH)
    try:
        board = chess.Board()
        moves: list[str] = []
        for version in range(8):
            r.hset(room_key("fixed"), "version", version)
            job = Job(f"fixed:{version}", "fixed", version, "chess", board.root().fen(),
                      list(moves), 8, Budget(depth=9))  # fmt: skip
            r.xadd(JOBS, job.to_fields())
            wait_until(lambda n=version: r.xlen(RESULTS) > n)
            _id, fields = r.xrange(RESULTS)[version]
            result = JobResult.from_fields(fields)
            expected = reference.play(board, chess.engine.Limit(depth=9), game="fixed")
            assert result.engine == "Stockfish 15.1" and result.error is None
            assert result.move == expected.move.uci(), f"ply {version}"
            assert result.depth >= 9
            board.push_uci(result.move)
            moves.append(result.move)
    finally:
        reference.quit()
        stop(worker)
        r.close()


@pytest.mark.asyncio
async def test_room_shows_the_engine_and_a_killed_one_falls_back(private_redis, tmp_path) -> None:
    """A chess room against the AI: the engine plays and the seat says so; the engine
    killed mid-search still gets the room a move (our searcher's), and the next job has
    a new engine process."""
    node = start_server(private_redis.url, workers=0)
    worker = start_worker(private_redis.url, "sf", STOCKFISH, tmp_path / "worker.log")
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    try:
        wait_until(lambda: len(engine_children(worker.pid)) == 1)
        first_engine = engine_children(worker.pid)[0]
        async with await KibitzClient.open(node.http_url) as client:
            # A timed game: the AI's think time comes with a deadline (level 7: 1.5 s).
            room = (await client.create(
                "chess", "ai:7", seat=1, clock={"initial_ms": 60_000, "increment_ms": 0}
            ))["room"]  # fmt: skip
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=20)
            assert state["seats"][0]["engine"] == "Stockfish 15.1"
            assert state["seats"][1]["engine"] is None  # the human
            await client.move(room, state["legal_moves"][0])
            # The AI's second job: kill its engine mid-search.
            wait_until(lambda: r.xpending(JOBS, GROUP)["pending"] == 1, poll=0.005)
            await asyncio.sleep(0.3)
            os.kill(first_engine, signal.SIGKILL)
            killed_at = time.monotonic()
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 3, timeout=20)
            assert time.monotonic() - killed_at < 5
            assert state["seats"][0]["engine"] == "kibitz"  # our searcher stood in
            assert state["status"] == "playing"
            await client.move(room, state["legal_moves"][0])
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 5, timeout=20)
            assert state["seats"][0]["engine"] == "Stockfish 15.1"
            restarted = engine_children(worker.pid)
            assert len(restarted) == 1 and restarted != [first_engine]
            # Resigning while the engine thinks (2.5 s at level 8, untimed) stops it.
            other = (await client.create("chess", "ai:8", seat=1))["room"]
            wait_until(lambda: r.xpending(JOBS, GROUP)["pending"] == 1, poll=0.005)
            started = time.monotonic()
            await asyncio.sleep(0.2)
            await client.resign(other)
            wait_until(lambda: r.hget("kibitz:workers:sf", "dropped") == "1", poll=0.01)
            assert time.monotonic() - started < 1.5
            assert engine_children(worker.pid) == restarted  # stopped, not killed
    finally:
        stop(worker)
        node.stop()
        r.close()
    log = (tmp_path / "worker.log").read_text()
    assert "failed on job" in log and "our searcher plays" in log


@pytest.mark.asyncio
async def test_missing_engine_is_logged_and_our_searcher_plays(private_redis, tmp_path) -> None:
    node = start_server(private_redis.url, workers=0)
    worker = start_worker(private_redis.url, "nosf", "/nonexistent/stockfish", tmp_path / "w.log")
    try:
        async with await KibitzClient.open(node.http_url) as client:
            room = (await client.create("chess", "ai:1", seat=1))["room"]
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=20)
        assert state["seats"][0]["engine"] == "kibitz"
    finally:
        stop(worker)
        node.stop()
    log = (tmp_path / "w.log").read_text()
    assert "could not be started" in log and "/nonexistent/stockfish" in log
