"""``kibitz serve`` on its embedded default: private Redis, local workers, persistence."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
import weakref

import pytest

from kibitz.client.connection import KibitzClient
from kibitz.server.cli.serve import (
    LISTENING,
    event_loop_factory,
    freeze_startup_heap,
    spawn_server,
)

pytestmark = pytest.mark.asyncio


def serve_embedded(
    data_dir: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    # An empty KIBITZ_REDIS_URL means "no shared Redis": the embedded default.
    process, url, _ = spawn_server(
        ["--port", "0", "--workers", "1"],
        {"KIBITZ_REDIS_URL": "", "KIBITZ_DATA_DIR": data_dir, **(env or {})},
    )
    threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
    return process, url


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    assert proc.wait(timeout=20) == 0


async def test_embedded_default_plays_ai_and_keeps_games_across_restart(tmp_path) -> None:
    proc, url = serve_embedded(str(tmp_path))
    try:
        async with await KibitzClient.open(url) as client:
            reply = await client.create("tictactoe", "ai:8", seat=1)
            room = reply["room"]
            # The local worker answers: X's first move arrives.
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
            await client.move(room, [m for m in state["legal_moves"]][0])
            await client.wait_state(room, lambda s: len(s["moves"]) == 3, timeout=30)
        status_out = subprocess.run(
            [sys.executable, "-m", "kibitz.server.cli", "status", url],
            capture_output=True, text=True, check=True,
            env={**os.environ, "KIBITZ_REDIS_URL": ""},
        )  # fmt: skip
        status = json.loads(status_out.stdout)
        assert len(status["workers"]) == 1 and status["live_rooms"] >= 1
    finally:
        stop(proc)
    # The private Redis stopped with the server (it removes its pid file on shutdown).
    assert (tmp_path / "redis" / "appendonly.aof").exists()
    assert not (tmp_path / "redis" / "redis.pid").exists()
    # Finished games go to a SQLite file beside it (no database to set up).
    assert (tmp_path / "games.sqlite3").exists()
    proc, url = serve_embedded(str(tmp_path))
    try:
        with urllib.request.urlopen(f"{url}/api/rooms/{room}") as resp:
            again = json.load(resp)
        assert [m["move"] for m in again["moves"]] == [m["move"] for m in state["moves"]] + [
            state["legal_moves"][0],
            again["moves"][2]["move"],
        ]
    finally:
        stop(proc)


async def test_ctrl_c_in_a_terminal_stops_the_node_before_its_redis(tmp_path) -> None:
    """A terminal's Ctrl-C signals its whole foreground process group: the node, its
    workers and, unless it has a session of its own, its Redis. The node's graceful stop
    needs Redis to the end (requests finish, clients are counted out, workers sign off)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "serve", "--port", "0", "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "KIBITZ_REDIS_URL": "", "KIBITZ_DATA_DIR": str(tmp_path),
             "KIBITZ_LOG": "WARNING"},
    )  # fmt: skip
    assert proc.stdout is not None
    output: list[str] = []
    try:
        while not (output and LISTENING.search(output[-1])):
            line = proc.stdout.readline()
            assert line, "kibitz serve did not start:\n" + "".join(output)
            output.append(line)
        url = LISTENING.search(output[-1]).group(1)  # type: ignore[union-attr]
        reader = threading.Thread(target=lambda: output.extend(proc.stdout or []), daemon=True)
        reader.start()
        async with await KibitzClient.open(url) as client:  # a worker plays its move
            room = (await client.create("tictactoe", "ai:3", seat=1))["room"]
            await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
            os.killpg(proc.pid, signal.SIGINT)  # the node, its worker and (before) Redis
            assert proc.wait(timeout=30) == 0
        reader.join(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not [line for line in output if "WARNING" in line or "ERROR" in line], output
    assert not (tmp_path / "redis" / "redis.pid").exists()  # stopped by the node, last


STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"


async def test_serve_engine_reaches_the_local_workers(tmp_path) -> None:
    """``kibitz serve --engine chess=...``: the local worker it starts plays chess with that
    engine (the AI seat names it), and the game catalogue carries the levels' strength."""
    assert os.path.exists(STOCKFISH), "stockfish is installed by .ci/run"
    process, url, _ = spawn_server(
        ["--port", "0", "--workers", "1", "--engine", f"chess={STOCKFISH}"],
        {"KIBITZ_REDIS_URL": "", "KIBITZ_DATA_DIR": str(tmp_path)},
    )
    threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
    try:
        async with await KibitzClient.open(url) as client:
            room = (await client.create("chess", "ai:3", seat=1))["room"]
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
            assert state["seats"][0]["engine"] == "Stockfish 15.1"
            assert state["seats"][0]["kind"] == "ai" and state["seats"][1]["engine"] is None
        with urllib.request.urlopen(f"{url}/api/games") as resp:
            catalog = {game["name"]: game for game in json.load(resp)}
        levels = catalog["chess"]["levels"]
        assert [entry["level"] for entry in levels] == list(range(1, 9))
        assert {"elo", "elo_95", "games", "scale"} <= set(levels[0])
    finally:
        stop(process)


async def test_serve_refuses_a_bad_engine_spec(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "serve", "--port", "0",
         "--engine", "othello=/usr/games/stockfish"],
        capture_output=True, text=True, timeout=30,
        env={**os.environ, "KIBITZ_REDIS_URL": "", "KIBITZ_DATA_DIR": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode != 0
    assert "kibitz serve: --engine" in done.stderr and "chess only" in done.stderr


async def test_startup_heap_is_frozen_and_later_garbage_still_collected() -> None:
    """``kibitz serve`` freezes what start-up made (full collections then skip it); what is
    made afterwards, cycles included, is still collected."""

    class Node:
        other: object = None

    try:
        frozen = freeze_startup_heap()
        assert frozen > 0 and frozen == gc.get_freeze_count()
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()


async def test_the_node_runs_on_uvloop_unless_told_otherwise(tmp_path, monkeypatch) -> None:
    import uvloop

    monkeypatch.delenv("KIBITZ_EVENT_LOOP", raising=False)
    assert event_loop_factory() is uvloop.new_event_loop
    monkeypatch.setenv("KIBITZ_EVENT_LOOP", "asyncio")
    assert event_loop_factory() is None
    # A node on the standard library's loop plays a game through, as the suite's nodes
    # (on uvloop) do.
    proc, url = serve_embedded(str(tmp_path), {"KIBITZ_EVENT_LOOP": "asyncio"})
    try:
        async with await KibitzClient.open(url) as a, await KibitzClient.open(url) as b:
            room = (await a.create("tictactoe", seat=0))["room"]
            await b.join(room)
            players = {0: a, 1: b}
            state = await a.wait_state(room, lambda s: s["status"] == "playing")
            while state["status"] == "playing":
                mover = players[state["to_move"]]
                await mover.move(room, state["legal_moves"][0], state["version"])
                version = state["version"]
                state = await a.wait_state(room, lambda s, v=version: s["version"] > v)
            assert state["status"] == "over" and len(state["moves"]) >= 5
    finally:
        stop(proc)
