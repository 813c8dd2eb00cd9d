"""The cluster's status as Redis holds it: :func:`cluster_status`.

It decides what ``kibitz status`` and ``GET /api/status`` report, read from the keys of
the job and result streams, the workers' and nodes' heartbeats, the fair queue, the
archive stream, the analyses and the live-rooms index (every name from
:mod:`kibitz.shared.bus.keys`).
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys

#: Heartbeat keys read per SCAN step.
SCAN_COUNT = 100


async def cluster_status(redis: aioredis.Redis) -> dict[str, Any]:
    """Queue depths, pending jobs, live workers and nodes, as ``kibitz status`` prints them."""
    out: dict[str, Any] = {"jobs": {}, "results": {}, "workers": []}
    for name, stream in (("jobs", keys.JOBS), ("results", keys.RESULTS)):
        out[name] = await _stream_status(redis, stream)
    async for key in redis.scan_iter(match=keys.WORKERS + "*", count=SCAN_COUNT):
        info = await redis.hgetall(key)
        if info:
            out["workers"].append(info)
    out["nodes"] = sorted(
        [key.removeprefix(keys.NODES) async for key in redis.scan_iter(keys.NODES + "*")]
    )
    # Jobs waiting in the fair queue for a worker (the stream holds only those handed out).
    out["jobs"]["queued"] = await redis.hlen(keys.AI_WAITING)
    # Finished games not yet in the database (each leaves once an archiver has written it).
    out["archive"] = {"backlog": await redis.xlen(keys.ARCHIVE)}
    # Game analyses under way and their position jobs not yet done.
    out["analysis"] = {
        "active": await redis.zcard(keys.ANALYSIS_ACTIVE),
        "jobs": await redis.xlen(keys.ANALYSIS_JOBS),
    }
    out["live_rooms"] = await redis.zcard(keys.LIVE)
    return out


async def _stream_status(redis: aioredis.Redis, stream: str) -> dict[str, int]:
    """A stream's length, and its groups' pending entries and lag."""
    length = await redis.xlen(stream)
    groups = await redis.xinfo_groups(stream) if length or await redis.exists(stream) else []
    return {
        "length": length,
        "pending": sum(int(g["pending"]) for g in groups),
        "lag": sum(int(g.get("lag") or 0) for g in groups),
    }
