"""``kibitz bench workers``: AI jobs per second with 1, 2, ... worker processes.

Workers are meant to scale linearly: each is an independent process taking jobs from the
shared stream. This bench measures it on a private Redis with real ``kibitz worker``
processes. The same fixed set of jobs (positions a few random plies into the game, each
searched to a fixed depth, so every job is the same work whatever the machine) is put on
the jobs stream for each pool size; we time from the first job queued until the last
result is on the results stream. Each job's room is a bare record at the job's version,
which is all a worker looks at before it searches.

The workers and Redis share the machine with nothing else of ours: on a 2-core machine, 2
workers can at best double the rate of 1. The last line of output is JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from typing import Any

from kibitz.benchmarks.faults import WorkerPool
from kibitz.shared.bus.jobs import JobsProbe
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget, Job

#: Fixed-depth searches of about 0.1-0.3 s each on this machine.
DEPTHS = {"othello": 7, "chess": 4, "draughts": 6, "oware": 9}
OPENING_PLIES = 6


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "workers", help="AI jobs per second with 1, 2, ... worker processes on one Redis"
    )
    parser.add_argument("--game", default="othello", choices=sorted(DEPTHS))
    parser.add_argument("--jobs", type=int, default=60, help="jobs per pool size")
    parser.add_argument(
        "--workers", default="1,2", help="pool sizes to measure, comma-separated (default 1,2)"
    )
    parser.add_argument("--depth", type=int, default=None, help="search depth of every job")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="bound per pool")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sizes = [int(x) for x in args.workers.split(",") if x.strip()]
    if not sizes or any(not 1 <= n <= 16 for n in sizes) or not 1 <= args.jobs <= 10_000:
        print("--workers: sizes 1-16; --jobs: 1-10000", file=sys.stderr)
        return 2
    depth = args.depth or DEPTHS[args.game]
    positions = _positions(args.game, args.jobs, args.seed)
    from kibitz.shared.bus.embedded import EmbeddedRedis

    rates: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp, persist=False) as store:
        probe = JobsProbe(store.url)
        for size in sizes:
            seconds = _measure(
                probe, store.url, size, args.game, positions, depth, args.max_seconds
            )
            rates[size] = len(positions) / seconds if seconds else 0.0
            if not args.json:
                print(f"{size} worker(s): {len(positions)} jobs in {seconds:.2f} s, "
                      f"{rates[size]:.2f} jobs/s")  # fmt: skip
        probe.close()
    base = rates.get(sizes[0]) or 0.0
    result: dict[str, Any] = {
        "game": args.game,
        "depth": depth,
        "jobs": len(positions),
        "jobs_per_s": {str(n): round(rate, 3) for n, rate in rates.items()},
        "speedup": {str(n): round(rate / base, 3) if base else None for n, rate in rates.items()},
    }
    print(json.dumps(result))
    return 0


def _positions(game_id: str, count: int, seed: int) -> list[tuple[str, list[str]]]:
    """``count`` (start position, moves) pairs a few random plies in."""
    game = find_game(game_id)
    rng = random.Random(seed)
    start = game.format_position(game.initial())
    out: list[tuple[str, list[str]]] = []
    while len(out) < count:
        state, moves = game.initial(), []
        for _ in range(OPENING_PLIES):
            if game.outcome(state) is not None:
                break
            move = rng.choice(game.legal_move_texts(state))
            state = game.play(state, move)
            moves.append(move)
        if game.outcome(state) is None:
            out.append((start, moves))
    return out


def _measure(
    probe: JobsProbe,
    url: str,
    size: int,
    game: str,
    positions: list[tuple[str, list[str]]],
    depth: int,
    max_seconds: float,
) -> float:
    pool = WorkerPool(url, size)
    try:
        pool.wait_ready()
        probe.clear_results()
        jobs = []
        for position, moves in positions:
            room = "bench" + uuid.uuid4().hex[:10]
            jobs.append(
                Job(
                    job_id=uuid.uuid4().hex,
                    room=room,
                    version=0,
                    game=game,
                    position=position,
                    moves=moves,
                    level=7,
                    budget=Budget(depth=depth, time_ms=60_000, nodes=None),
                )
            )
        probe.seed_rooms([job.room for job in jobs], version=0, ttl_s=3600)
        started = time.perf_counter()
        probe.queue_jobs(jobs)
        deadline = time.monotonic() + max_seconds
        while probe.results_count() < len(jobs):
            if time.monotonic() > deadline:
                raise SystemExit(f"{size} worker(s): timed out after {max_seconds} s")
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        failed = [f for f in probe.results() if json.loads(f["result"]).get("error")]
        if failed:
            raise SystemExit(f"{size} worker(s): {len(failed)} jobs failed: {failed[0]}")
        return seconds
    finally:
        pool.stop()
