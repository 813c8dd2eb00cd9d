"""``kibitz status``: queue depths, pending jobs and live workers of a deployment.

Asks a server's ``GET /api/status``, or with ``--redis`` reads the same figures from Redis
itself (:func:`kibitz.shared.bus.cluster.cluster_status`), loading no server code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import urllib.request
from typing import Any


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status", help="show the job queue, pending jobs and live workers as JSON"
    )
    parser.add_argument(
        "url", nargs="?", default="http://127.0.0.1:8000", help="a server (default: %(default)s)"
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("KIBITZ_REDIS_URL"),
        help="read the status from Redis directly instead of asking a server (a Redis "
        "Cluster: redis+cluster://[:PASSWORD@]HOST:PORT,...[?groups=N], the deployment's N)",
    )
    parser.add_argument(
        "--redis-cluster",
        nargs="+",
        default=None,
        metavar="NODE",
        help="read it from a Redis Cluster: some of its nodes, as HOST:PORT or "
        "redis://[:PASSWORD@]HOST:PORT (the same as --redis redis+cluster://...)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.redis_cluster:
        from kibitz.shared.bus.connect import cluster_url

        try:
            args.redis = cluster_url(args.redis_cluster)
        except ValueError as exc:
            raise SystemExit(f"kibitz status: --redis-cluster: {exc}") from None
    if args.redis:
        status = asyncio.run(_from_redis(args.redis))
    else:
        try:
            with urllib.request.urlopen(args.url.rstrip("/") + "/api/status", timeout=10) as resp:
                status = json.load(resp)
        except OSError as exc:
            print(json.dumps({"error": "unreachable", "message": str(exc)}))
            return 2
    print(json.dumps(status, indent=2, sort_keys=True))
    return 0


async def _from_redis(url: str) -> dict[str, Any]:
    from kibitz.shared.bus.cluster import cluster_status
    from kibitz.shared.bus.connect import command_client

    bus = command_client(url)
    try:
        return await cluster_status(bus)
    finally:
        await bus.aclose()
