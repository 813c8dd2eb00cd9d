"""``kibitz bench load``: many concurrent human-vs-human games through real WebSockets.

Each game is two Python clients playing random legal moves. We measure the time from
sending a move to the opponent receiving the new state (the latency a player feels),
and the sustained rate of moves. Loops are bounded in games and in time, and the
target must be a loopback address unless ``--allow-remote`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from kibitz.client.connection import KibitzClient, ServerError, newer_than


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "load", help="concurrent games over WebSockets: latency, moves/s"
    )
    parser.add_argument("--url", help="a running server (default: start one on a private Redis)")
    parser.add_argument("--game", default="tictactoe")
    parser.add_argument("--games", type=int, default=200, help="games to play in all")
    parser.add_argument("--concurrency", type=int, default=50, help="games at once")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop after this long")
    parser.add_argument("--codec", choices=("json", "msgpack"), default="json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --url")
    parser.set_defaults(func=run)


@dataclass
class LoadStats:
    latencies_ms: list[float] = field(default_factory=list)
    games: int = 0
    moves: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def count_error(self, exc: BaseException) -> None:
        kind = exc.code if isinstance(exc, ServerError) else type(exc).__name__
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def summary(self, seconds: float) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))], 2) if lat else 0.0

        return {
            "games": self.games,
            "moves": self.moves,
            "errors": self.errors,
            "error_kinds": self.error_kinds,
            "seconds": round(seconds, 2),
            "moves_per_s": round(self.moves / seconds, 1) if seconds else 0.0,
            "latency_ms": {
                "p50": pct(0.50),
                "p95": pct(0.95),
                "p99": pct(0.99),
                "max": round(lat[-1], 2) if lat else 0.0,
                "mean": round(statistics.fmean(lat), 2) if lat else 0.0,
            },
        }


async def play_one(url: str, game: str, codec: str, rng: random.Random, stats: LoadStats) -> None:
    # A browser waits minutes for a handshake; websockets' 10 s default would count a
    # node that is slow under a herd of simultaneous connections as failing.
    a = await KibitzClient.open(url, codec=codec, open_timeout=60)  # type: ignore[arg-type]
    b = await KibitzClient.open(url, codec=codec, open_timeout=60)  # type: ignore[arg-type]
    try:
        room = (await a.create(game, seat=0))["room"]
        await b.join(room)
        players = {0: a, 1: b}
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        while state["status"] == "playing":
            mover, other = players[state["to_move"]], players[1 - state["to_move"]]
            version = state["version"]
            started = time.perf_counter()
            await mover.move(room, rng.choice(state["legal_moves"]), version)
            state = await other.wait_state(room, newer_than(version))
            stats.latencies_ms.append((time.perf_counter() - started) * 1000)
            stats.moves += 1
            await mover.wait_state(room, newer_than(version))
        stats.games += 1
    finally:
        await a.close()
        await b.close()


async def drive(url: str, args: argparse.Namespace) -> dict[str, Any]:
    stats = LoadStats()
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.max_seconds
    remaining = args.games
    started = time.perf_counter()

    async def lane() -> None:
        nonlocal remaining
        while remaining > 0 and time.monotonic() < deadline:
            remaining -= 1
            try:
                await asyncio.wait_for(
                    play_one(url, args.game, args.codec, random.Random(rng.random()), stats),
                    timeout=max(1.0, deadline - time.monotonic()),
                )
            except (TimeoutError, ConnectionError, OSError, ServerError) as exc:
                stats.count_error(exc)  # counted, and the bench goes on

    await asyncio.gather(*(lane() for _ in range(max(1, args.concurrency))))
    out = stats.summary(time.perf_counter() - started)
    out.update(game=args.game, concurrency=args.concurrency, codec=args.codec)
    return out


def run(args: argparse.Namespace) -> int:
    if args.url:
        host = urlparse(args.url).hostname or ""
        if not args.allow_remote and host not in ("127.0.0.1", "localhost", "::1"):
            print("kibitz bench load: --url must be a loopback address", file=sys.stderr)
            return 2
        result = asyncio.run(drive(args.url, args))
    else:
        result = _with_private_server(args)
    if args.json:
        print(json.dumps(result))
    else:
        lat = result["latency_ms"]
        print(
            f"{result['games']} games, {result['moves']} moves in {result['seconds']} s "
            f"({result['moves_per_s']} moves/s, {result['concurrency']} games at once, "
            f"{result['errors']} errors)"
        )
        print(
            f"move -> opponent sees it: p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
            f"p99 {lat['p99']} ms, max {lat['max']} ms"
        )
    return 0 if result["errors"] == 0 else 1


def _with_private_server(args: argparse.Namespace) -> dict[str, Any]:
    from kibitz.server.cli.serve import spawn_server
    from kibitz.server.embedded_redis import EmbeddedRedis

    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp, persist=False) as redis:
        # All the bench's clients share one loopback address: lift the per-address limits.
        unlimited = ["--max-connections-per-address", "1000000", "--max-creates-per-minute",
                     "1000000", "--max-ai-games-per-address", "1000000"]  # fmt: skip
        proc, url, _ = spawn_server(
            ["--port", "0", "--redis", redis.url, "--workers", "0", "--data-dir", tmp, *unlimited]
        )
        threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
        try:
            return asyncio.run(drive(url, args))
        finally:
            proc.terminate()
            proc.wait(timeout=15)
