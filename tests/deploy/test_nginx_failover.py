"""A real load balancer: Debian's nginx, run from the shipped deploy/nginx-kibitz.conf, in
front of two ``kibitz serve`` nodes on one Redis.

One node is killed with SIGKILL in the middle of several games; the players' healing
clients reconnect through nginx (which passes them to the surviving node), resume and
finish every game. Also: the nodes see the client's address in X-Forwarded-For (the
per-address connection limit counts it, not nginx's), and a page of the site's public
origin (nginx's address, given to the nodes) is accepted, another site's refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from kibitz.client.bot import BEHIND_ERRORS, RESYNC_AFTER_S
from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server
from tests.deploy.nginx import Nginx, find_nginx, free_port

GAMES = 4
MOVES_BEFORE_KILL = 4  # plies every game has played when the node dies
GAME_TIMEOUT_S = 40.0


@pytest.fixture(scope="module")
def nginx_binary() -> str:
    binary = find_nginx()
    if binary is None:
        pytest.fail("nginx is not installed: .ci/run installs Debian's (apt-get install nginx)")
    return binary


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis for each test: the per-address counters must not see other tests' sockets
    (a killed node's count lingers until its heartbeat expires)."""
    server = EmbeddedRedis(tmp_path / "redis", persist=True).start()
    yield server
    server.stop()


def balanced(
    binary: str, redis_url: str, prefix: Path, env: dict[str, str] | None = None
) -> tuple[Nginx, list[ServerProcess]]:
    # The site's origin is nginx's address, which the nodes are told (they do not believe
    # the Host header for it).
    port = free_port()
    public = {"KIBITZ_PUBLIC_ORIGIN": f"http://127.0.0.1:{port}"}
    nodes = [
        start_server(
            redis_url, extra_env={**public, **(env or {})}, args=["--trusted-proxy", "127.0.0.1"]
        )
        for _ in range(2)
    ]
    addresses = [node.http_url.removeprefix("http://") for node in nodes]
    try:
        return Nginx(binary, prefix, addresses, port).start(), nodes
    except BaseException:
        stop_nodes(nodes)
        raise


def stop_nodes(nodes: list[ServerProcess]) -> None:
    """SIGTERM, and SIGKILL after 5 s: a node sometimes outlives SIGTERM (reported
    separately; not what these tests check), and the suite should not wait 15 s for it."""
    for node in nodes:
        if node.process.poll() is None:
            node.process.terminate()
    for node in nodes:
        try:
            node.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            node.process.kill()
            node.process.wait(timeout=5)


def get_json(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


class Seat:
    """One player: a healing client through the balancer that plays random legal moves.
    ``sent`` maps a ply (the number of moves before it) to the moves sent for it: after a
    resync at the version it moved in, a player sends again (another random move), and
    the server takes at most one of them (a move names the version it was played in)."""

    def __init__(
        self, client: KibitzClient, room: str, seat: int, sent: dict[int, set[str]]
    ) -> None:
        self.client, self.room, self.seat, self.sent = client, room, seat, sent

    async def play(self, until_ply: int | None, rng: random.Random) -> dict[str, Any]:
        """Play until the game is over or ``until_ply`` plies are on the board."""
        moved_at: dict[str, Any] | None = None

        def ready(s: dict[str, Any]) -> bool:
            if s["status"] == "over" or (until_ply is not None and len(s["moves"]) >= until_ply):
                return True
            if s["status"] != "playing" or s["to_move"] != self.seat:
                return False
            # A resync at the version we moved in: our move may have been lost; play again.
            return (
                moved_at is None
                or s["version"] != moved_at["version"]
                or (s is not moved_at and s["event"]["kind"] == "resync")
            )

        while True:
            try:
                state = await self.client.wait_state(self.room, ready, timeout=RESYNC_AFTER_S)
            except TimeoutError:
                await self.client.resync(self.room)
                continue
            except ServerError as exc:
                if exc.code in BEHIND_ERRORS or exc.transient:
                    continue
                raise
            if state["status"] == "over" or (
                until_ply is not None and len(state["moves"]) >= until_ply
            ):
                return state
            moved_at = state
            move = rng.choice(state["legal_moves"])
            self.sent.setdefault(len(state["moves"]), set()).add(move)
            await self.client.move(self.room, move, state["version"])


async def test_failover_through_nginx(nginx_binary, private_redis, tmp_path) -> None:
    lb, nodes = balanced(nginx_binary, private_redis.url, tmp_path / "nginx")
    clients: list[KibitzClient] = []
    try:
        games: list[tuple[Seat, Seat, dict[int, set[str]]]] = []
        for _ in range(GAMES):
            sent: dict[int, set[str]] = {}
            a = await KibitzClient.open(lb.url, heal=True)
            b = await KibitzClient.open(lb.url, heal=True)
            clients += [a, b]
            created = await a.create("othello", "human", seat=0)
            joined = await b.join(created["room"])
            room = created["room"]
            games.append((Seat(a, room, 0, sent), Seat(b, room, joined["seat"], sent), sent))
        node_of = [str((c.welcome or {}).get("node")) for c in clients]
        assert len(set(node_of)) == 2, f"nginx should spread clients over both nodes: {node_of}"

        rng = random.Random(7)

        async def play(until: int | None) -> list[dict[str, Any]]:
            async with asyncio.timeout(GAME_TIMEOUT_S):
                return list(
                    await asyncio.gather(
                        *(s.play(until, random.Random(rng.random())) for g in games for s in g[:2])
                    )
                )

        await play(MOVES_BEFORE_KILL)
        # Kill the node that holds the first game's creator, without warning.
        welcomes = [(c.welcome or {}).get("node") for c in clients]
        victim_name = welcomes[0]
        statuses = [get_json(node.http_url + "/healthz")[1] for node in nodes]
        victim = next(n for n, s in zip(nodes, statuses, strict=True) if s["node"] == victim_name)
        survivor = next(n for n in nodes if n is not victim)
        hit = sum(1 for w in welcomes if w == victim_name)
        os.kill(victim.process.pid, signal.SIGKILL)
        victim.process.wait(timeout=10)

        finals = await play(None)
        assert all(s["status"] == "over" for s in finals)
        moved_over = [c for c, w in zip(clients, welcomes, strict=True) if w == victim_name]
        assert len(moved_over) == hit > 0
        survivor_name = get_json(survivor.http_url + "/healthz")[1]["node"]
        for client in moved_over:
            assert client.reconnects >= 1
            assert (client.welcome or {}).get("node") == survivor_name

        # The record, read through the balancer, is the game both players saw end, and each
        # of its moves is one that a player sent for that ply.
        for n, (seat_a, _seat_b, sent) in enumerate(games):
            status, record = get_json(f"{lb.url}/api/games/{seat_a.room}")
            assert status == 200, record
            assert record["status"] == "over"
            moves = [m["move"] for m in record["moves"]]
            assert len(moves) == len(sent) > MOVES_BEFORE_KILL
            assert all(move in sent[i] for i, move in enumerate(moves)), (moves, sent)
            for final in finals[2 * n : 2 * n + 2]:
                assert [m["move"] for m in final["moves"]] == moves
    finally:
        for client in clients:
            await client.close()
        lb.stop()
        stop_nodes(nodes)


async def connect_when_counted_out(ws: str, origin: str) -> Any:
    """Connect with ``Origin: origin`` once a closed socket's place is given back (the
    node counts it out just after the close; within 5 s)."""
    async with asyncio.timeout(5):
        while True:
            try:
                return await websockets.connect(ws, open_timeout=5, origin=origin)  # type: ignore[arg-type]
            except websockets.InvalidStatus as exc:
                if exc.response.status_code != 429:
                    raise
            await asyncio.sleep(0.05)


async def test_forwarded_for_and_host(nginx_binary, private_redis, tmp_path) -> None:
    limit = {"KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "3"}
    lb, nodes = balanced(nginx_binary, private_redis.url, tmp_path / "nginx", env=limit)
    ws = lb.url.replace("http://", "ws://") + "/ws"
    opened: list[Any] = []
    try:
        for _ in range(3):  # over both nodes (round robin): the limit is the cluster's
            opened.append(await websockets.connect(ws, open_timeout=5))
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(ws, open_timeout=5)
        assert refused.value.response.status_code == 429
        # A forged X-Forwarded-For does not help: nginx appends the real address last.
        with pytest.raises(websockets.InvalidStatus) as forged:
            await websockets.connect(
                ws, open_timeout=5, additional_headers={"X-Forwarded-For": "198.51.100.7"}
            )
        assert forged.value.response.status_code == 429
        # Another client address (its own loopback source) has its own allowance.
        opened.append(await websockets.connect(ws, open_timeout=5, local_addr=("127.0.0.5", 0)))
        # The site's public origin (nginx's address) is accepted...
        await opened.pop(0).close()
        same = await connect_when_counted_out(ws, lb.url)
        opened.append(same)
        welcome = json.loads(await asyncio.wait_for(same.recv(), 5))
        assert welcome["type"] == "welcome"
        # ... and another site's is not.
        with pytest.raises(websockets.InvalidStatus) as cross:
            await websockets.connect(
                ws, open_timeout=5, origin="http://elsewhere.example",  # type: ignore[arg-type]
                local_addr=("127.0.0.6", 0),
            )  # fmt: skip
        assert cross.value.response.status_code == 403
    finally:
        for sock in opened:
            await sock.close()
        lb.stop()
        stop_nodes(nodes)


def test_nginx_config_loads(nginx_binary, tmp_path) -> None:
    """``nginx -t`` on the shipped file (addresses and paths substituted) succeeds."""
    Nginx(nginx_binary, tmp_path / "nginx", ["127.0.0.1:1", "127.0.0.1:2"]).check()
