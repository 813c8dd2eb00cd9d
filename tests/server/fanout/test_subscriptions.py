"""Fan-out that scales with nodes: a node subscribes only to the channels of the rooms it
has followers for. Two real nodes on one real Redis, real sockets on loopback.

- A node with no follower of a room is not subscribed to its channel (Redis's own
  ``PUBSUB NUMSUB`` says so) and its listener receives none of its updates (``/metrics``).
- A follower arriving there subscribes it, and the updates arrive; the last follower
  leaving unsubscribes it again.
- After a Redis restart every node subscribes again to exactly the rooms it serves, and
  moves flow to every follower.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis

from kibitz.client.connection import KibitzClient, ServerError, newer_than
from kibitz.shared.bus.embedded import EmbeddedRedis, free_port
from kibitz.shared.bus.keys import room_channel as channel
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.timeout(120)  # async tests run in asyncio mode "auto"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[EmbeddedRedis, ServerProcess, ServerProcess]]:
    """A Redis of this test's own (on a fixed port, so it can be restarted in place) and
    two nodes on it."""
    store = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=True).start()
    nodes: list[ServerProcess] = []
    try:
        nodes = [start_server(store.url), start_server(store.url)]
        yield store, nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.stop()
        store.stop()


async def metric(node: ServerProcess, name: str) -> float:
    async with aiohttp.ClientSession() as session:
        async with session.get(node.http_url + "/metrics") as resp:
            text = await resp.text()
    match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert match, f"no {name} in /metrics"
    return float(match.group(1))


def subscribers(store: EmbeddedRedis, room: str) -> int:
    with redis.Redis.from_url(store.url, decode_responses=True, socket_timeout=5) as r:
        counts: Any = r.pubsub_numsub(channel(room))
        assert r.pubsub_numpat() == 0, "a node still subscribes to a pattern"
        return int(counts[0][1])


async def eventually(what: str, check: Callable[[], Any], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.1)


async def play(mover: KibitzClient, others: list[KibitzClient], room: str) -> int:
    """One legal move by ``mover``, seen by every client in ``others``; the new version."""
    state = mover.states[room]
    version = int(state["version"])
    await mover.move(room, state["legal_moves"][0], version)
    for client in [mover, *others]:
        await client.wait_state(room, newer_than(version), timeout=10)
    return version + 1


async def test_a_node_follows_only_the_rooms_it_serves(cluster) -> None:
    store, node_a, node_b = cluster
    a = await KibitzClient.open(node_a.http_url)
    b = await KibitzClient.open(node_a.http_url)
    watcher = await KibitzClient.open(node_b.http_url)
    try:
        room = (await a.create("othello", seat=0))["room"]
        await b.join(room)
        await a.wait_state(room, lambda s: s["status"] == "playing")
        players = {0: a, 1: b}

        async def move() -> None:
            mover = players[a.states[room]["to_move"]]
            await play(mover, [players[1 - mover.tokens[room][0]]], room)

        # Only node A serves the room: only A subscribes to it, and B hears none of it.
        assert subscribers(store, room) == 1
        heard_by_b = await metric(node_b, "kibitz_fanout_room_messages")
        heard_by_a = await metric(node_a, "kibitz_fanout_room_messages")
        for _ in range(4):
            await move()
        assert await metric(node_b, "kibitz_fanout_room_messages") == heard_by_b
        assert await metric(node_b, "kibitz_fanout_rooms") == 0
        assert await metric(node_a, "kibitz_fanout_room_messages") >= heard_by_a + 4

        # A spectator on B: B subscribes, and every move reaches it.
        state = await watcher.watch(room)
        assert state["version"] == a.states[room]["version"]
        assert subscribers(store, room) == 2
        assert await metric(node_b, "kibitz_fanout_rooms") == 1
        for _ in range(3):
            await move()
            await watcher.wait_state(room, newer_than(int(state["version"])), timeout=10)
            state = watcher.states[room]
        assert state["version"] == a.states[room]["version"]

        # It leaves: B unsubscribes and hears nothing more of the room.
        await watcher.leave(room)
        await eventually("node B unsubscribed", lambda: subscribers(store, room) == 1)
        heard_by_b = await metric(node_b, "kibitz_fanout_room_messages")
        for _ in range(3):
            await move()
        assert await metric(node_b, "kibitz_fanout_room_messages") == heard_by_b
        assert await metric(node_b, "kibitz_fanout_rooms") == 0

        # Back on B, then Redis restarts: both nodes subscribe again to the room (and to
        # nothing else of it), and moves flow to all three clients.
        state = await watcher.watch(room)
        assert subscribers(store, room) == 2
        store.stop()
        await asyncio.sleep(0.5)
        store.start(timeout=30)
        for node in (node_a, node_b):
            await eventually(
                f"{node.http_url} re-subscribed",
                lambda node=node: _healthy(node),  # type: ignore[misc]
                timeout=15,
            )
        await eventually("both nodes re-subscribed", lambda: subscribers(store, room) == 2)
        assert await metric(node_b, "kibitz_fanout_resubscriptions") >= 1
        for _ in range(3):
            version = int(a.states[room]["version"])
            await _move_retrying(players[a.states[room]["to_move"]], room)
            for client in (a, b, watcher):
                await client.wait_state(room, newer_than(version), timeout=10)
        assert watcher.states[room]["version"] == a.states[room]["version"]
    finally:
        for client in (a, b, watcher):
            await client.close()


async def _healthy(node: ServerProcess) -> bool:
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(
                node.http_url + "/healthz", timeout=aiohttp.ClientTimeout(total=2)
            ) as resp:
                return resp.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False


async def _move_retrying(mover: KibitzClient, room: str) -> None:
    """A move right after Redis came back, sent again while it is ``server/unavailable``."""
    for _ in range(10):
        state = mover.states[room]
        version = int(state["version"])
        await mover.move(room, state["legal_moves"][0], version)
        try:
            await mover.wait_state(room, newer_than(version), timeout=10)
            return
        except ServerError as exc:
            if exc.code != "server/unavailable":
                raise
            await asyncio.sleep(0.3)
    raise AssertionError("the move was refused ten times")


def test_bench_load_on_a_local_cluster_spreads_the_rooms() -> None:
    """``kibitz bench load --nodes 2``: a private two-node cluster on one Redis, the games
    spread over both nodes, and each room's updates received by its own node only."""
    out = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "bench", "load", "--nodes", "2",
         "--games", "8", "--concurrency", "4", "--max-seconds", "60", "--json"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["nodes"] == 2 and result["errors"] == 0 and result["games"] == 8
    # Redis's share of a short run can fall under /proc's 10 ms resolution: 0 is a reading.
    assert result["server_cpu_ms_per_move"] > 0 and result["redis_cpu_ms_per_move"] >= 0
    # One node per room: about one update per move (plus presence), not one per node.
    assert 1.0 <= result["room_messages_per_move"] < 1.9, result


async def test_following_and_leaving_in_quick_succession_misses_nothing(cluster) -> None:
    """Watch, leave and watch again as fast as the socket goes, from two clients on the
    node that does not host the players, so SUBSCRIBE and UNSUBSCRIBE of the same channel
    interleave: after each watch, the next move reaches the watcher."""
    store, node_a, node_b = cluster
    a = await KibitzClient.open(node_a.http_url)
    b = await KibitzClient.open(node_a.http_url)
    watchers = [await KibitzClient.open(node_b.http_url) for _ in range(2)]
    try:
        room = (await a.create("othello", seat=0))["room"]
        await b.join(room)
        await a.wait_state(room, lambda s: s["status"] == "playing")
        players = {0: a, 1: b}
        for _ in range(6):
            for _ in range(5):  # leaves not awaited: they race the next watch
                for w in watchers:
                    await w.leave(room)
                await asyncio.gather(*(w.watch(room) for w in watchers))
            mover = players[a.states[room]["to_move"]]
            version = await play(mover, [players[1 - mover.tokens[room][0]]], room)
            for w in watchers:
                await w.wait_state(room, lambda s, v=version: s["version"] >= v, timeout=10)
        assert subscribers(store, room) == 2
        for w in watchers:
            await w.leave(room)
        await eventually("node B unsubscribed", lambda: subscribers(store, room) == 1)
    finally:
        for client in (a, b, *watchers):
            await client.close()
