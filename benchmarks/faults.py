"""``kibitz bench faults``: the AI under a flood, and the cost of a killed worker.

Two numbers that the fair queue and the renewed leases are there for, measured on a
private Redis and server with real worker processes and real WebSockets:

1. Flood: one address (or ``--flood-addresses`` of them, round robin) opens
   ``--flood-games`` level-8 chess games with the AI to move (the per-address limit
   accepts 8 per address by default; ``--max-ai-games-per-address`` raises it) and
   answers every AI move at once, so its games keep the workers busy for the whole run.
   Meanwhile another address opens ``--samples`` level-1 tic-tac-toe games, one after
   another, with the AI to move, and we time each AI first move (from sending
   ``create`` to seeing the move).
2. Killed worker: an Othello level-8 game (a 2 s search); the worker that took the job is
   killed (SIGKILL) mid-search, and we time how long until another worker owns the job
   and until the move reaches the player.

Clients use distinct loopback source addresses (127.0.0.0/8) so the server sees distinct
owners. Everything is bounded by ``--max-seconds``; the last line of output is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.jobs import JobsProbe
from kibitz.workers.worker import WorkerConfig

NEWCOMER, VICTIM = "127.0.0.3", "127.0.0.4"
CREATES_PER_CONNECTION = 20  # the server's per-connection create rate, a minute


def flooder_address(index: int) -> str:
    return f"127.0.1.{index + 1}"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "faults", help="AI first-move latency under a flood; time to replace a killed worker"
    )
    parser.add_argument("--samples", type=int, default=20, help="tic-tac-toe games timed")
    parser.add_argument("--flood-games", type=int, default=40, help="chess games the flood opens")
    parser.add_argument(
        "--flood-addresses", type=int, default=1, help="addresses the flood comes from"
    )
    parser.add_argument(
        "--max-ai-games-per-address",
        type=int,
        default=None,
        help="passed to kibitz serve (default: its own, 8); raise it to let one address "
        "hold the whole flood",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--kills", type=int, default=3, help="workers killed mid-search")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="stop after this long")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = measure(
        samples=args.samples,
        flood_games=args.flood_games,
        flood_addresses=args.flood_addresses,
        ai_games_limit=args.max_ai_games_per_address,
        workers=args.workers,
        kills=args.kills,
        max_seconds=args.max_seconds,
        seed=args.seed,
    )
    if not args.json:
        flood, killed = result["flood"], result["killed_worker"]
        print(
            f"flood: {flood['flood_games_open']} level-8 chess games from "
            f"{flood['flood_addresses']} address(es) "
            f"(refused: {flood['flood_refused']}), "
            f"{flood['flood_ai_moves']} flood AI moves during the run, {result['workers']} workers"
        )
        lat = flood["first_move_s"]
        print(
            f"level-1 tic-tac-toe AI first move from another address ({lat['n']} games): "
            f"p50 {lat['p50']} s, p99 {lat['p99']} s, max {lat['max']} s"
        )
        print(
            f"killed worker ({killed['n']} kills, lease {killed['lease_ms']} ms): job taken "
            f"over after {killed['takeover_s']} s, move on screen after {killed['move_s']} s "
            f"(median; search itself ~2 s)"
        )
    print(json.dumps(result))
    return 0 if result["errors"] == 0 else 1


def measure(
    samples: int = 20,
    flood_games: int = 40,
    flood_addresses: int = 1,
    ai_games_limit: int | None = None,
    workers: int = 2,
    kills: int = 3,
    max_seconds: float = 300.0,
    seed: int = 1,
) -> dict[str, Any]:
    """Both measurements on a private Redis, server and ``workers`` worker processes."""
    from kibitz.server.cli.serve import served
    from kibitz.shared.bus.embedded import EmbeddedRedis

    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp, persist=False) as store:
        limit = (
            [] if ai_games_limit is None else ["--max-ai-games-per-address", str(ai_games_limit)]
        )
        with served(
            ["--port", "0", "--redis", store.url, "--workers", "0", "--data-dir", tmp, *limit]
        ) as url:
            pool = WorkerPool(store.url, workers)
            try:
                pool.wait_ready()
                return asyncio.run(
                    asyncio.wait_for(
                        _measure(url, pool, samples, flood_games, flood_addresses, kills, seed),
                        timeout=max_seconds,
                    )
                )
            finally:
                pool.stop()


class WorkerPool:
    """``kibitz worker`` processes with known names, so one can be killed and replaced."""

    def __init__(self, redis_url: str, n: int) -> None:
        self.redis_url = redis_url
        self.probe = JobsProbe(redis_url)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.generation = 0
        for _ in range(n):
            self.spawn()

    def spawn(self) -> str:
        self.generation += 1
        name = f"bench-w{self.generation}"
        # The URL holds the private Redis's password: pass it in the environment.
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "kibitz.server.cli", "worker", "--name", name],
            env={**os.environ, "KIBITZ_REDIS_URL": self.redis_url, "KIBITZ_LOG": "WARNING"},
        )
        return name

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until every worker of the pool has counted itself in."""
        deadline = time.monotonic() + timeout
        while not all(self.probe.worker_counted(name) for name in self.procs):
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not start")
            time.sleep(0.05)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.probe.close()


@dataclass
class FloodStats:
    first_move_s: list[float] = field(default_factory=list)
    flood_ai_moves: int = 0
    errors: int = 0


def _summary(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 3) if ordered else 0.0

    return {
        "n": len(ordered),
        "p50": pct(0.50),
        "p99": pct(0.99),
        "max": round(ordered[-1], 3) if ordered else 0.0,
        "mean": round(statistics.fmean(ordered), 3) if ordered else 0.0,
    }


async def _measure(
    url: str,
    pool: WorkerPool,
    samples: int,
    flood_games: int,
    flood_addresses: int,
    kills: int,
    seed: int,
) -> dict[str, Any]:
    rng = random.Random(seed)
    flood = await _flood(url, samples, flood_games, max(1, flood_addresses), rng)
    killed = await _kill_workers(url, pool, kills)
    return {
        "workers": len(pool.procs),
        "flood": flood,
        "killed_worker": killed,
        "errors": flood["errors"] + killed["errors"],
    }


async def _flood(
    url: str, samples: int, flood_games: int, addresses: int, rng: random.Random
) -> dict[str, Any]:
    stats = FloodStats()
    # A connection may create 20 rooms a minute: the flood opens enough connections per
    # address for its share of the games, and creates round robin over them.
    per_address = -(-flood_games // addresses)
    links = max(1, -(-per_address // CREATES_PER_CONNECTION))
    flooders = [
        await KibitzClient.open(url, local_addr=(flooder_address(i % addresses), 0))
        for i in range(addresses * links)
    ]
    newcomer = await KibitzClient.open(url, local_addr=(NEWCOMER, 0))
    rooms: dict[int, list[str]] = {i: [] for i in range(len(flooders))}
    refused: dict[str, int] = {}
    try:
        for n in range(flood_games):
            lane = n % len(flooders)
            try:
                reply = await flooders[lane].create("chess", "ai:8", seat=1)
                rooms[lane].append(reply["room"])
            except ServerError as exc:  # the AI game limit
                refused[exc.code] = refused.get(exc.code, 0) + 1
        keepers = [
            asyncio.create_task(_keep_busy(client, rooms[i], rng, stats))
            for i, client in enumerate(flooders)
        ]
        await asyncio.sleep(1.0)  # the workers are deep in the flood
        for _ in range(samples):
            started = time.perf_counter()
            try:
                room = (await newcomer.create("tictactoe", "ai:1", seat=1))["room"]
                await newcomer.wait_state(room, lambda s: len(s["moves"]) >= 1, timeout=60)
                stats.first_move_s.append(time.perf_counter() - started)
                await newcomer.resign(room)
            except (TimeoutError, ServerError, ConnectionError):
                stats.errors += 1
            # Arrive at any phase of the flood's 2.5 s searches, not just after one ended.
            await asyncio.sleep(rng.uniform(0.2, 3.0))
        for keeper in keepers:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        for i, client in enumerate(flooders):  # resigned games cancel their searches
            for room in rooms[i]:
                await client.resign(room)
        await asyncio.sleep(1.0)
    finally:
        for client in flooders:
            await client.close()
        await newcomer.close()
    return {
        "flood_games_asked": flood_games,
        "flood_addresses": addresses,
        "flood_games_open": sum(len(r) for r in rooms.values()),
        "flood_refused": refused,
        "flood_ai_moves": stats.flood_ai_moves,
        "first_move_s": _summary(stats.first_move_s),
        "errors": stats.errors,
    }


async def _keep_busy(
    client: KibitzClient, rooms: list[str], rng: random.Random, stats: FloodStats
) -> None:
    """Answer each AI move at once, so every flood game always has a job in the queue.

    It reads the states the client's reader keeps (one waiter per connection: several
    ``wait_state`` calls on one client would take each other's messages).
    """
    answered: dict[str, int] = {}
    while True:
        for room in rooms:
            state = client.states.get(room)
            if state is None or state["status"] != "playing":
                continue
            version = int(state["version"])
            mine = state["to_move"] == client.tokens[room][0]
            if mine and answered.get(room) != version:
                answered[room] = version
                stats.flood_ai_moves += 1
                await client.move(room, rng.choice(state["legal_moves"]), version)
        await asyncio.sleep(0.02)


async def _kill_workers(url: str, pool: WorkerPool, kills: int) -> dict[str, Any]:
    probe = pool.probe
    takeovers: list[float] = []
    moves: list[float] = []
    errors = 0
    victim = await KibitzClient.open(url, local_addr=(VICTIM, 0))
    try:
        for _ in range(kills):
            await _until(probe.jobs_idle)
            room = (await victim.create("othello", "ai:8", seat=1))["room"]
            owner = await _until(probe.job_owner)
            await asyncio.sleep(0.3)  # mid-search
            pool.kill(owner)
            killed = time.perf_counter()
            try:
                await _until(lambda gone=owner: probe.job_owner() not in (None, gone), timeout=30)
                takeovers.append(time.perf_counter() - killed)
                await victim.wait_state(room, lambda s: len(s["moves"]) >= 1, timeout=30)
                moves.append(time.perf_counter() - killed)
            except TimeoutError:
                errors += 1
            await victim.resign(room)
            pool.spawn()
            await asyncio.to_thread(pool.wait_ready)
    finally:
        await victim.close()
    return {
        "n": len(moves),
        "lease_ms": WorkerConfig("").lease_ms,
        "takeover_s": round(statistics.median(takeovers), 3) if takeovers else None,
        "move_s": round(statistics.median(moves), 3) if moves else None,
        "takeover_all_s": [round(t, 3) for t in takeovers],
        "move_all_s": [round(t, 3) for t in moves],
        "errors": errors,
    }


async def _until(probe: Any, timeout: float = 30.0) -> Any:
    """Poll ``probe`` (a blocking Redis read) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached in time")
        await asyncio.sleep(0.01)
