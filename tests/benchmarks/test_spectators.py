"""``kibitz bench load --spectators N --spectator-procs P``: spectators in child processes."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kibitz.benchmarks.spectators import SpectatorError, Spectators
from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.games import find_game
from tests.conftest import ServerProcess, start_server

MARKER = f"KIBITZ_SPECTATORS_TEST={uuid.uuid4().hex}"  # in the environment of the bench's tree


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    name, value = MARKER.split("=")
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "bench", "load", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, name: value},
    )  # fmt: skip


def _left_behind() -> list[int]:
    """Processes the bench started that are still alive (their environment has MARKER)."""
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if MARKER.encode() in environ.read_bytes().split(b"\0"):
                left.append(int(environ.parent.name))
        except OSError:  # gone, or not ours
            continue
    return left


def _moves_of_the_game(game: str, seed: int = 1) -> int:
    """The moves of the bench's game: it plays ``rng.choice`` of the legal moves' texts,
    its random generator seeded with ``--seed`` (1 by default)."""
    rules, rng, moves = find_game(game), random.Random(seed), 0
    state = rules.initial()
    while legal := rules.legal_move_texts(state):
        state = rules.play(state, rng.choice(legal))
        moves += 1
    return moves


def test_spectators_in_two_processes_time_every_move() -> None:
    out = _bench("--spectators", "40", "--spectator-procs", "2", "--game", "tictactoe",
                 "--json", "--max-seconds", "60")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == 0, result
    assert result["spectators"] == 40 and result["spectator_procs"] == 2
    # Every move was timed: the bench counts a move once all 40 spectators have it.
    assert result["games"] == 1 and result["moves"] == _moves_of_the_game("tictactoe") > 0
    fanout = result["fanout_ms"]
    assert 0 < fanout["p50"] <= fanout["max"]
    assert result["fanout_client_cpu_ms_per_move"] > 0
    # No spectators' process outlives the bench.
    assert _left_behind() == []


def test_one_spectators_process_times_every_move() -> None:
    out = _bench("--spectators", "8", "--spectator-procs", "1", "--game", "tictactoe",
                 "--json", "--max-seconds", "60")  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["errors"] == 0 and result["spectator_procs"] == 1
    assert result["moves"] == _moves_of_the_game("tictactoe") > 0
    assert result["fanout_ms"]["p50"] > 0


@pytest.mark.parametrize("procs", ["0", "17"])
def test_spectator_procs_out_of_range_is_a_usage_error(procs: str) -> None:
    out = _bench("--spectators", "4", "--spectator-procs", procs, timeout=60)
    assert out.returncode == 2
    assert "--spectator-procs" in out.stderr


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis) -> Iterator[ServerProcess]:
    """A server without workers (the spectators only watch)."""
    started = start_server(redis_server.url)
    yield started
    started.stop()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_error_message_fails_the_spectators(server: ServerProcess) -> None:
    # Watching a room that does not exist: the server answers with an error message.
    async with Spectators("no-such-room", "json", [server.http_url], 6, 2, 60) as spectators:
        spectators.start()
        with pytest.raises(ServerError):
            await spectators.ready(timeout=30)
    # They exit by themselves (not terminated): the first with its error, the other one
    # with the same error or stopped by the bench as it closes.
    assert not any(child.is_alive() for child in spectators.children)
    assert all(child.exitcode in (0, 1) for child in spectators.children)
    assert any(child.exitcode == 1 for child in spectators.children)


async def test_a_refused_connection_fails_the_spectators_promptly() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    async with Spectators("some-room", "json", [url], 4, 2, 60) as spectators:
        spectators.start()
        with pytest.raises(SpectatorError, match="ConnectionRefusedError"):
            await spectators.ready(timeout=30)
    assert time.monotonic() - started < 20
    assert not any(child.is_alive() for child in spectators.children)


async def test_a_server_gone_mid_run_fails_the_spectators_promptly(
    redis_server: EmbeddedRedis,
) -> None:
    doomed = start_server(redis_server.url)
    try:
        a = await KibitzClient.open(doomed.http_url, open_timeout=30)
        b = await KibitzClient.open(doomed.http_url, open_timeout=30)
        try:
            room = (await a.create("tictactoe", seat=0))["room"]
            await b.join(room)
            state = await a.wait_state(room, lambda s: s["status"] == "playing")
            async with Spectators(room, "json", [doomed.http_url], 6, 2, 60) as spectators:
                spectators.start()
                await spectators.ready(timeout=30)
                doomed.stop()  # mid-run: the spectators' sockets close
                started = time.monotonic()
                with pytest.raises(SpectatorError):
                    await spectators.all_have(state["version"] + 1, timeout=30)
                assert time.monotonic() - started < 10
        finally:
            await a.close()
            await b.close()
    finally:
        doomed.stop()
    assert not any(child.is_alive() for child in spectators.children)
