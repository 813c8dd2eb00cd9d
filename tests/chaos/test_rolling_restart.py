"""A rolling restart: every node of a two-node cluster is stopped with SIGTERM and started
again on the same port, one after the other, while games run; on a single Redis and on a
Redis Cluster.

The players are the product's healing Python client (``KibitzClient(heal=True)`` given
both nodes' URLs): when their node says 1001 (going away) they reconnect to the other one
and resume. What we assert:

- a node given SIGTERM closes its sockets with 1001 and exits within a few seconds;
- every game finishes, its event log is complete (one event per version) and its moves
  replay under the rules to its result;
- no move is lost: every state any client saw is a prefix of the final record, and each
  move in the record was sent by that seat's own client at that version;
- every client was moved by the restarts (it reconnected at least once) and its last
  view is the final record.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from kibitz.client.connection import KibitzClient, ServerError, newer_than, ws_url
from kibitz.shared.bus.embedded import EmbeddedRedis, free_port
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from kibitz.shared.games import find_game
from tests.conftest import ServerProcess, flush_cluster, start_server

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(150)]

GAMES = 6
GAME = "othello"  # at most 60 plies: bounded
THINK_S = (0.2, 0.4)  # per move, so the games (about 20 s) outlast both restarts
DEADLINE_S = 60.0
EXIT_WITHIN_S = 10.0  # SIGTERM to exit (it drains for at most 5 s)
RESEND_S = 3.0  # a move with no answer this long is sent again (same version)
#: Refusals of a copy of a move sent again after the first copy landed.
STALE = ("room/stale", "move/not_your_turn", "game/over")


class Recording(KibitzClient):
    """The product's client, noting the moves of every state it receives."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[tuple[str, list[str]]] = []

    def _remember(self, state: dict[str, Any]) -> None:
        self.seen.append((state["room"], [m["move"] for m in state["moves"]]))
        super()._remember(state)


class Node:
    """A ``kibitz serve`` on a fixed port, restartable in place."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.port = free_port()
        self.server = self._start()

    def _start(self) -> ServerProcess:
        return start_server(self.redis_url, args=["--port", str(self.port)])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> float:
        """SIGTERM; how long the node took to exit."""
        started = time.monotonic()
        process = self.server.process
        process.terminate()
        process.wait(timeout=EXIT_WITHIN_S + 5)
        return time.monotonic() - started

    def restart(self) -> None:
        self.server = self._start()


@pytest.fixture(params=["single", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Node]]:
    """Two nodes on one Redis of their own, or on the session's Redis Cluster (emptied)."""
    store: EmbeddedRedis | None = None
    if request.param == "cluster":
        redis_cluster: EmbeddedCluster = request.getfixturevalue("redis_cluster")
        flush_cluster(redis_cluster)
        url = redis_cluster.url
    else:
        store = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=True).start()
        url = store.url
    nodes: list[Node] = []
    try:
        nodes = [Node(url), Node(url)]
        yield nodes
    finally:
        for node in nodes:
            node.server.stop()
        if store is not None:
            store.stop()


async def healthy(url: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
                async with s.get(url + "/healthz") as resp:
                    if resp.status == 200:
                        return
        assert time.monotonic() < deadline, f"{url} not healthy within {timeout} s"
        await asyncio.sleep(0.2)


class Game:
    def __init__(self, room: str, players: dict[int, Recording], rng: random.Random) -> None:
        self.room = room
        self.players = players
        self.rng = rng
        self.sent: dict[int, set[tuple[int, str]]] = {0: set(), 1: set()}

    async def play_seat(self, seat: int, deadline: float) -> None:
        client, room = self.players[seat], self.room

        def my_turn_or_over(s: dict[str, Any]) -> bool:
            return s["status"] == "over" or (s["status"] == "playing" and s["to_move"] == seat)

        while True:
            try:
                state = await client.wait_state(room, my_turn_or_over, timeout=_left(deadline))
            except ServerError as exc:  # the late answer to a copy sent again: no matter
                if exc.code not in STALE:
                    raise
                continue
            if state["status"] == "over":
                return
            await asyncio.sleep(self.rng.uniform(*THINK_S))
            version = int(state["version"])
            move = self.rng.choice(state["legal_moves"])
            # Sent again until a newer version shows: a copy may go down with a closing
            # socket. It names its version, so the server plays it at most once.
            while True:
                assert time.monotonic() < deadline, f"{room} seat {seat}: no time left"
                self.sent[seat].add((version, move))
                with contextlib.suppress(ConnectionError, websockets.ConnectionClosed):
                    await client.move(room, move, version)
                try:
                    await client.wait_state(room, newer_than(version), timeout=RESEND_S)
                    break
                except TimeoutError:
                    continue
                except ServerError as exc:
                    if exc.code in STALE:
                        break  # a copy landed (or the game ended): act on the newer state
                    if exc.code not in ("server/unavailable", "room/busy", "server/busy"):
                        raise
                    await asyncio.sleep(0.2)

    async def record(self, urls: list[str]) -> dict[str, Any]:
        for url in urls:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
                    async with s.get(f"{url}/api/rooms/{self.room}/record") as resp:
                        if resp.status == 200:
                            return dict(await resp.json())
        raise AssertionError(f"no node served the record of {self.room}")

    def problems(self, record: dict[str, Any]) -> list[str]:
        where = f"room {self.room}"
        out: list[str] = []
        moves = record["moves"]
        if record["status"] != "over" or record["result"] is None:
            out.append(f"{where}: not finished ({record['status']})")
        versions = [e["version"] for e in record["events"]]
        if versions != list(range(len(versions))):
            out.append(f"{where}: event log has gaps or repeats: {versions}")
        game = find_game(record["game"])
        state = game.parse_position(record["start"])
        for move in moves:
            state = game.play(state, move)
        outcome = game.outcome(state)
        if outcome is None or outcome.winner != record["result"]["winner"]:
            out.append(f"{where}: the rules say {outcome}, the record {record['result']}")
        for event in record["events"]:
            if event["kind"] == "move":
                sent = self.sent[event["seat"]]
                if (event["version"] - 1, event["move"]) not in sent:
                    out.append(f"{where}: {event['move']} at v{event['version']} not sent by "
                               f"seat {event['seat']}")  # fmt: skip
        for seat, client in self.players.items():
            for room, seen in client.seen:
                if room == self.room and seen != moves[: len(seen)]:
                    out.append(f"{where} seat {seat}: saw {seen}, not a prefix of {moves}")
                    break
            last = client.states[self.room]
            if [m["move"] for m in last["moves"]] != moves:
                out.append(f"{where} seat {seat}: its last view is not the record")
            if client.reconnects < 1:
                out.append(f"{where} seat {seat}: never moved by the restarts")
        return out


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


async def test_restarting_every_node_loses_no_move(cluster: list[Node]) -> None:
    urls = [node.url for node in cluster]
    rng = random.Random(7)
    games: list[Game] = []
    clients: list[Recording] = []
    try:
        for i in range(GAMES):
            home, away = urls[i % 2], urls[1 - i % 2]
            a = await Recording.open([home, away], heal=True)
            b = await Recording.open([away, home], heal=True)
            clients += [a, b]
            room = (await a.create(GAME, seat=0))["room"]
            await b.join(room)
            await a.wait_state(room, lambda s: s["status"] == "playing")
            games.append(Game(room, {0: a, 1: b}, random.Random(rng.random())))
        deadline = time.monotonic() + DEADLINE_S
        tasks = [asyncio.create_task(g.play_seat(seat, deadline)) for g in games for seat in (0, 1)]

        await asyncio.sleep(2.0)
        for i, node in enumerate(cluster):
            unfinished = [g.room for g in games if g.players[0].states[g.room]["status"] != "over"]
            assert len(unfinished) == GAMES, f"games over before node {i} restarted: too short"
            # A plain socket on the node: its close code is the node's goodbye.
            watcher = await websockets.connect(ws_url(node.url))
            await watcher.recv()  # welcome
            took = await asyncio.to_thread(node.stop)
            await asyncio.wait_for(watcher.wait_closed(), 5)
            assert watcher.close_code == 1001, f"node {i} closed with {watcher.close_code}"
            assert took < EXIT_WITHIN_S, f"node {i} took {took:.1f} s to exit on SIGTERM"
            print(f"node {i}: exited {took:.2f} s after SIGTERM")
            await asyncio.to_thread(node.restart)
            await healthy(node.url)

        results = await asyncio.gather(*tasks, return_exceptions=True)
        problems = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
        for game in games:
            problems += game.problems(await game.record(urls))
        reconnects = [c.reconnects for c in clients]
        print(f"reconnects per client: {reconnects}")
        assert not problems, "\n".join(problems) + "\n" + _logs(cluster)
    finally:
        for client in clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2)


def _logs(cluster: list[Node]) -> str:
    return "\n".join(f"--- node {i}\n" + "".join(n.server.log[-40:]) for i, n in enumerate(cluster))
