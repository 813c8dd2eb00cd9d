"""The Python client and ``kibitz bot`` heal: a frozen or killed server node, a Redis
restart. Real server processes on a real Redis, real sockets on loopback."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kibitz.client.connection import Backoff, KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.asyncio

# X (seat 0) takes the middle column while O plays 1 and 3: X wins on its third move.
SCRIPT = [(0, "2"), (1, "1"), (0, "5"), (1, "3"), (0, "8")]
# The healing client's pings (the defaults are 5 s and 5 s: shorter here, so that the test
# waits seconds for what it proves, which holds for any values) and connect timeout.
PING_S = 1.0
PONG_WITHIN_S = 3.0
CONNECT_WITHIN_S = 2.0


@pytest.fixture
def two_nodes(redis_server: EmbeddedRedis) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two server nodes of one cluster (one Redis), each a process of its own."""
    nodes = [start_server(redis_server.url), start_server(redis_server.url)]
    try:
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)  # a frozen node cannot stop
            node.stop()


def node_name(server: ServerProcess) -> str:
    """The node name a server puts in its ``welcome`` (its /healthz says it too)."""
    with urllib.request.urlopen(server.http_url + "/healthz", timeout=10) as reply:
        name: str = json.load(reply)["node"]
    return name


async def play(client: KibitzClient, room: str, ply: int) -> None:
    """Play ply ``ply`` of SCRIPT (1-based) once the room is at it."""
    seat, move = SCRIPT[ply - 1]
    await client.wait_state(room, lambda s: len(s["moves"]) == ply - 1, timeout=30)
    await client.move(room, move, client.states[room]["version"])


@pytest.mark.parametrize("where", ["same node after SIGCONT", "second node"])
async def test_a_frozen_server_is_noticed_and_the_game_resumes(
    two_nodes: tuple[ServerProcess, ServerProcess], where: str
) -> None:
    frozen, other = two_nodes
    # a must be on the node that freezes: it connects there alone, and only then learns
    # the other node's address (a client given both may land on either under load).
    a = await KibitzClient.open(
        frozen.http_url, heal=True, ping_interval=PING_S, ping_timeout=PONG_WITHIN_S,
        connect_timeout=CONNECT_WITHIN_S,
    )  # fmt: skip
    if where == "second node":
        a.urls.append(other.http_url)
    b = await KibitzClient.open(other.http_url)
    try:
        assert a.welcome is not None and a.welcome["node"] == node_name(frozen)
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        await play(a, room, 1)
        await b.wait_state(room, lambda s: len(s["moves"]) == 1)

        assert a.reconnects == 0, "a left the node before it froze"
        frozen.process.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        await asyncio.wait_for(a.ws.wait_closed(), timeout=20)
        noticed = time.monotonic() - started
        # One ping interval until the next ping, one timeout for its pong, the close.
        assert noticed < PING_S + PONG_WITHIN_S + 3, noticed

        await play(b, room, 2)  # the opponent plays on while a's node is frozen
        await b.wait_state(room, lambda s: len(s["moves"]) == 2)
        if where.startswith("same"):
            frozen.process.send_signal(signal.SIGCONT)

        # a heals while it waits: reconnects, resumes with its token and since, plays on.
        await play(a, room, 3)
        await play(b, room, 4)
        await play(a, room, 5)
        final = await b.wait_state(room, lambda s: s["status"] == "over")
        assert [m["move"] for m in final["moves"]] == [move for _seat, move in SCRIPT]
        assert final["result"]["winner"] == 0
        assert (await a.wait_state(room, lambda s: s["status"] == "over"))["version"] == 6
        assert a.reconnects >= 1
        assert a.welcome is not None and b.welcome is not None
        # b is on the other node: a is there too after healing, unless it waited for its own.
        assert (a.welcome["node"] == b.welcome["node"]) == (where == "second node")
    finally:
        frozen.process.send_signal(signal.SIGCONT)
        await a.close()
        await b.close()


def run_bot(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "bot", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


async def test_bot_survives_its_node_killed_mid_game(
    two_nodes: tuple[ServerProcess, ServerProcess],
) -> None:
    doomed, survivor = two_nodes
    rng = random.Random(7)
    async with await KibitzClient.open(survivor.http_url) as host:
        room = (await host.create("tictactoe", seat=0))["room"]
        bot = run_bot(doomed.http_url, survivor.http_url, "--join", room,
                      "--game", "tictactoe", "--seed", "3")  # fmt: skip
        try:
            state = await host.wait_state(room, lambda s: s["status"] == "playing", timeout=30)
            killed = False
            while state["status"] != "over":
                if len(state["moves"]) == 2 and not killed:
                    doomed.process.kill()  # no goodbye: the bot's node is gone
                    doomed.process.wait()
                    killed = True
                await host.move(room, rng.choice(state["legal_moves"]), state["version"])
                state = await host.wait_state(
                    room,
                    lambda s, v=state["version"]: (
                        s["status"] == "over" or (s["version"] > v + 1 and s["to_move"] == 0)
                    ),
                    timeout=60,
                )
            out, err = await asyncio.to_thread(bot.communicate, timeout=60)
        finally:
            if bot.poll() is None:
                bot.kill()
                bot.wait()
    assert killed
    report = json.loads(out.strip().splitlines()[-1])
    assert set(report) == {"room", "game", "seat", "outcome", "reason", "moves", "game_id"}, err
    assert report["room"] == room and report["seat"] == 1
    assert report["moves"] == len(state["moves"]) >= 5
    winner = state["result"]["winner"]
    assert report["outcome"] == ("draw" if winner is None else "win" if winner == 1 else "loss")


async def test_requests_wait_out_a_redis_restart(tmp_path: Path) -> None:
    """server/unavailable while Redis is down is retried with backoff until it is back."""
    store = EmbeddedRedis(tmp_path / "redis").start()
    node = start_server(store.url)
    try:
        backoff = Backoff(attempts=10, first_s=0.2, max_s=2.0)
        async with await KibitzClient.open(node.http_url, heal=True, backoff=backoff) as client:
            room = (await client.create("tictactoe", seat=0))["room"]
            store.stop()
            restart = asyncio.create_task(asyncio.to_thread(_restart_later, store, 1.5))
            state = await client.watch(room)  # watch: idempotent, retried as it fails
            await restart
            assert state["room"] == room and state["status"] == "waiting"
            assert client.retries >= 1  # server/unavailable came, and was retried
            # After the restart the room is there and playing works again.
            guest = await client.join(room)
            assert guest["room"] == room
    finally:
        node.stop()
        store.stop()


def _restart_later(store: EmbeddedRedis, delay: float) -> None:
    time.sleep(delay)
    store.start()
