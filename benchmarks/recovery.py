"""``kibitz bench recovery``: how long nodes stay deaf after Redis restarts or stalls.

A private cluster on loopback: one Redis (append-only file on) and two ``kibitz serve``
nodes. Each game has one player on each node. For each fault (Redis stopped with SIGTERM
and restarted, killed with SIGKILL and restarted, frozen with SIGSTOP for ``--stall-s``),
we note when Redis is back (it answers PING, or it was sent SIGCONT), then every game's
player on node 1 moves (retrying while the node answers ``server/unavailable``) and we
time until the opponent on node 2 sees the move. The worst game is the figure that
counts: it includes the node noticing the fault, re-subscribing and re-syncing.

Bounded: a few games, three faults, and every wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.stats import BlockingServerStats

FAULTS = ("restart-term", "restart-kill", "stall")
#: A tic-tac-toe game that does not end before its sixth move (three faults, two moves each).
MOVES = ["1", "2", "3", "5", "4", "6", "8", "7", "9"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "recovery", help="time for nodes to deliver again after Redis restarts and stalls"
    )
    parser.add_argument("--games", type=int, default=10, help="games in progress during faults")
    parser.add_argument("--stall-s", type=float, default=10.0, help="how long Redis is frozen")
    parser.add_argument(
        "--watchers", type=int, default=600, help="simultaneous watch messages for the pool figure"
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


class Cluster:
    """One Redis on a fixed port and data directory (so it can be restarted) and two nodes."""

    def __init__(self, root: Path) -> None:
        from kibitz.shared.bus.embedded import EmbeddedRedis

        self.root = root  # also the nodes' --data-dir (their SQLite game archive)
        self.redis = EmbeddedRedis(root / "redis", persist=True).start()
        self.nodes: list[tuple[subprocess.Popen[str], str]] = []

    def start_nodes(self, count: int) -> None:
        from kibitz.server.cli.serve import spawn_server

        for _ in range(count):
            proc, url, _ = spawn_server(
                ["--port", "0", "--redis", self.redis.url, "--workers", "0",
                 "--data-dir", str(self.root),
                 "--max-connections-per-address", "100000",
                 "--max-creates-per-minute", "100000"]
            )  # fmt: skip
            threading.Thread(
                target=lambda p=proc: [None for _ in p.stdout or []], daemon=True
            ).start()
            self.nodes.append((proc, url))

    def redis_process(self) -> subprocess.Popen[bytes]:
        assert self.redis.process is not None
        return self.redis.process

    def stop_redis(self, sig: signal.Signals) -> None:
        proc = self.redis_process()
        proc.send_signal(sig)
        proc.wait(timeout=15)
        self.redis.process = None

    def stop(self) -> None:
        for proc, _ in self.nodes:
            proc.terminate()
        for proc, _ in self.nodes:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.redis.stop()


async def healthz(url: str) -> int:
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "/healthz", timeout=aiohttp.ClientTimeout(total=3)) as r:
                return r.status
    except (aiohttp.ClientError, TimeoutError):
        return 0


async def move_until_accepted(client: KibitzClient, room: str, move: str, deadline: float) -> None:
    """Send ``move`` until the node takes it (it answers server/unavailable while deaf)."""
    _seat, token = client.tokens[room]
    rid = f"move-{room}-{move}"

    def has_move(state: dict[str, Any] | None) -> bool:
        return state is not None and any(m["move"] == move for m in state["moves"])

    while not has_move(client.states.get(room)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"move {move} in {room} never accepted")
        await client.send({"type": "move", "room": room, "token": token, "move": move, "rid": rid})
        try:
            reply = await client.next_message(
                lambda m: (
                    m.get("rid") == rid
                    or (m["type"] == "state" and m["room"] == room and has_move(m))
                ),
                timeout=max(0.1, deadline - time.monotonic()),
            )
        except TimeoutError:
            continue
        if reply["type"] == "error":
            if reply["code"] != "server/unavailable":
                raise ServerError(reply["code"], reply["message"])
            await asyncio.sleep(0.1)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp))
        try:
            cluster.start_nodes(2)
            (_, url1), (_, url2) = cluster.nodes
            games: list[tuple[str, KibitzClient, KibitzClient]] = []
            for _ in range(args.games):
                a = await KibitzClient.open(url1)
                b = await KibitzClient.open(url2)
                room = (await a.create("tictactoe", seat=0))["room"]
                await b.join(room)
                games.append((room, a, b))
            out: dict[str, Any] = {"games": args.games, "stall_s": args.stall_s}
            played = 0
            for fault in FAULTS:
                await asyncio.sleep(1.5)  # everything before the fault is on disk
                if fault == "stall":
                    cluster.redis_process().send_signal(signal.SIGSTOP)
                    await asyncio.sleep(args.stall_s)
                    health_during = await healthz(url1)
                    cluster.redis_process().send_signal(signal.SIGCONT)
                else:
                    sig = signal.SIGTERM if fault == "restart-term" else signal.SIGKILL
                    await asyncio.to_thread(cluster.stop_redis, sig)
                    await asyncio.sleep(1.0)  # down for a moment, as in a real restart
                    health_during = await healthz(url1)
                    await asyncio.to_thread(cluster.redis.start)
                back = time.monotonic()
                server = BlockingServerStats(cluster.redis.url)
                server.ping()
                server.close()
                move = MOVES[played]
                delays = await asyncio.gather(
                    *(deliver(room, a, b, move, back) for room, a, b in games)
                )
                played += 1
                # And the other way, node 2 to node 1, now that both have recovered.
                move = MOVES[played]
                await asyncio.gather(
                    *(deliver(room, b, a, move, time.monotonic()) for room, a, b in games)
                )
                played += 1
                out[fault] = {
                    "delivered_ms": {
                        "p50": round(statistics.median(delays), 1),
                        "max": round(max(delays), 1),
                    },
                    "healthz_during": health_during,
                    "healthz_after": await healthz(url1),
                }
            out["pool"] = await pool_under_watchers(cluster, url1, games[0][0], args.watchers)
            for _room, a, b in games:
                await a.close()
                await b.close()
            return out
        finally:
            cluster.stop()


async def pool_under_watchers(
    cluster: Cluster, url: str, room: str, watchers: int
) -> dict[str, int]:
    """Peak Redis connections of the whole cluster while ``watchers`` clients send ``watch``
    to one node at the same moment (every one must get the room's state)."""
    server = BlockingServerStats(cluster.redis.url)
    clients: list[KibitzClient] = []
    for start in range(0, watchers, 100):
        clients += await asyncio.gather(
            *(KibitzClient.open(url) for _ in range(min(100, watchers - start)))
        )
    baseline = server.clients()
    peak = baseline
    sampling = True

    async def sample() -> None:
        nonlocal peak
        while sampling:
            peak = max(peak, server.clients())
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    states = await asyncio.gather(*(c.watch(room) for c in clients), return_exceptions=True)
    sampling = False
    await sampler
    errors = sum(1 for s in states if isinstance(s, BaseException))
    await asyncio.gather(*(c.close() for c in clients))
    server.close()
    return {"watchers": watchers, "errors": errors, "redis_connections_before": baseline,
            "redis_connections_peak": peak, "nodes": len(cluster.nodes)}  # fmt: skip


async def deliver(
    room: str, mover: KibitzClient, watcher: KibitzClient, move: str, since: float
) -> float:
    """Milliseconds from ``since`` until ``watcher`` sees ``mover``'s ``move``."""
    deadline = since + 60
    await move_until_accepted(mover, room, move, deadline)
    await watcher.wait_state(room, lambda s: any(m["move"] == move for m in s["moves"]), timeout=60)
    return (time.monotonic() - since) * 1000


def run(args: argparse.Namespace) -> int:
    result = asyncio.run(measure(args))
    if not args.json:
        for fault in FAULTS:
            row = result[fault]
            print(
                f"{fault:13} a move reaches the other node's player "
                f"{row['delivered_ms']['p50']} ms (median), {row['delivered_ms']['max']} ms "
                f"(worst of {args.games} games) after Redis is back; "
                f"/healthz during: {row['healthz_during']}, after: {row['healthz_after']}"
            )
        pool = result["pool"]
        print(
            f"{pool['watchers']} simultaneous watch messages to one node: "
            f"{pool['errors']} errors; Redis connections of the 2-node cluster "
            f"{pool['redis_connections_before']} before, peak {pool['redis_connections_peak']}"
        )
    print(json.dumps(result))
    return 0
