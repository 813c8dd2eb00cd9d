"""``kibitz worker``: AI worker processes for a shared Redis."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal

from kibitz.workers import lifeline
from kibitz.workers.engines import parse_engine_specs
from kibitz.workers.worker import WorkerConfig, run_worker


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "worker",
        help="run AI worker processes",
        description="Take AI search jobs from the Redis queue; start more on any machine.",
    )
    parser.add_argument(
        "--redis",
        default=None,
        metavar="URL",
        help="the shared Redis, or a Redis Cluster as redis+cluster://[:PASSWORD@]HOST:PORT,"
        "HOST:PORT[?groups=N] (default: $KIBITZ_REDIS_URL, which is better for a URL with "
        "a password: every user can read a command line, not the environment)",
    )
    parser.add_argument(
        "--redis-cluster",
        nargs="+",
        default=None,
        metavar="NODE",
        help="a shared Redis Cluster instead of --redis: some of its nodes, as HOST:PORT or "
        "redis://[:PASSWORD@]HOST:PORT; the same as --redis redis+cluster://... (a password "
        "is better in $KIBITZ_REDIS_URL)",
    )
    parser.add_argument("--concurrency", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--lease-ms",
        type=int,
        default=5_000,
        help="idle time after which another worker takes a job over (a live worker renews "
        "its lease while it searches, so only a dead or frozen worker's job waits this long)",
    )
    parser.add_argument("--max-jobs", type=int, default=None, help="exit after this many jobs")
    parser.add_argument("--name", default="", help="consumer name (default: host-pid)")
    parser.add_argument(
        "--engine",
        action="append",
        metavar="GAME=COMMAND",
        help="serve GAME's jobs with this UCI engine (chess=/usr/games/stockfish; repeatable); "
        "levels map to its strength settings, and a failing engine falls back to our searcher",
    )
    parser.set_defaults(func=run)


def redis_url_of(args: argparse.Namespace, environ: dict[str, str] | None = None) -> str:
    """The worker's Redis: --redis, else --redis-cluster's nodes, else $KIBITZ_REDIS_URL
    (SystemExit for none, both flags, or a cluster URL that does not parse)."""
    from kibitz.shared.bus.connect import ClusterURL, cluster_url, is_cluster_url

    env = os.environ if environ is None else environ
    if args.redis and args.redis_cluster:
        raise SystemExit("kibitz worker: --redis and --redis-cluster: name the shared Redis once")
    try:
        url = cluster_url(args.redis_cluster) if args.redis_cluster else args.redis
        url = url or env.get("KIBITZ_REDIS_URL")
        if url and is_cluster_url(url):
            ClusterURL.parse(url)
    except ValueError as exc:
        raise SystemExit(f"kibitz worker: {exc}") from None
    if not url:
        raise SystemExit(
            "kibitz worker: --redis URL, --redis-cluster NODE... (or KIBITZ_REDIS_URL) is required"
        )
    return url


def run(args: argparse.Namespace) -> int:
    args.redis = redis_url_of(args)
    try:
        engines = parse_engine_specs(args.engine)
    except ValueError as exc:
        raise SystemExit(f"kibitz worker: {exc}") from None
    config = WorkerConfig(args.redis, args.name, args.lease_ms, args.max_jobs, engines)
    if args.concurrency <= 1:
        return run_worker(config)
    # A pool started by a node dies with it, and each child with the pool (lifeline.py).
    lifeline.hold()
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=run_worker,
            args=(
                WorkerConfig(
                    args.redis,
                    f"{args.name}{i}" if args.name else "",
                    args.lease_ms,
                    args.max_jobs,
                    engines,
                ),
            ),
        )
        for i in range(args.concurrency)
    ]
    for proc in procs:
        proc.start()

    def forward(signum: int, _frame: object) -> None:
        for proc in procs:
            if proc.is_alive() and proc.pid:
                os.kill(proc.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for proc in procs:
        proc.join()
    return max((proc.exitcode or 0) for proc in procs)
