"""The cluster's status as Redis holds it: :func:`cluster_status`.

It decides what ``kibitz status`` and ``GET /api/status`` report, read from the keys of
the job and result streams, the workers' and nodes' heartbeats, the fair queue, the
archive streams, the analyses and the live-rooms indexes (every name from
:mod:`kibitz.shared.bus.keys`).

On a single Redis the heartbeats are found by ``SCAN``. On a Redis Cluster a ``SCAN``
sees one primary, so nothing is scanned: the nodes are those of the control slot's
``NODE_BEATS`` that beat within a heartbeat's lifetime, the workers those of
``AI_WORKERS_LIVE`` whose heartbeat hash still exists, and the archive backlog and the live
rooms are summed over the slot groups (one pipeline, a round trip per cluster node). The
report then also says how many slot groups there are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.store import live_nodes

#: Heartbeat keys read per SCAN step.
SCAN_COUNT = 100


async def cluster_status(redis: aioredis.Redis) -> dict[str, Any]:
    """Queue depths, pending jobs, live workers and nodes, as ``kibitz status`` prints them."""
    out: dict[str, Any] = {"jobs": {}, "results": {}, "workers": []}
    for name, stream in (("jobs", keys.JOBS), ("results", keys.RESULTS)):
        out[name] = await _stream_status(redis, stream)
    if keys.grouped():
        out["workers"] = await _live_workers(redis)
        out["nodes"] = await live_nodes(redis)
    else:
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
    out["archive"] = {"backlog": await _over_groups(redis, "xlen", keys.archive)}
    # Game analyses under way and their position jobs not yet done.
    out["analysis"] = {
        "active": await redis.zcard(keys.ANALYSIS_ACTIVE),
        "jobs": await redis.xlen(keys.ANALYSIS_JOBS),
    }
    out["live_rooms"] = await _over_groups(redis, "zcard", keys.live)
    if keys.grouped():
        out["groups"] = keys.group_count()
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


async def _over_groups(redis: aioredis.Redis, command: str, key: Callable[[int], str]) -> int:
    """The sum of a count (``xlen``, ``zcard``) over every group's key: one command on a
    single Redis, one pipeline over a cluster."""
    if not keys.grouped():
        return int(await getattr(redis, command)(key(0)))
    async with redis.pipeline(transaction=False) as pipe:
        for group in keys.groups():
            getattr(pipe, command)(key(group))
        counts: list[Any] = await pipe.execute()
    return sum(int(count) for count in counts)


async def _live_workers(redis: aioredis.Redis) -> list[dict[str, str]]:
    """The heartbeats of the workers counted in the fair queue's window whose heartbeat
    hash is still there (a Redis Cluster's list: no SCAN)."""
    names: Any = await redis.zrange(keys.AI_WORKERS_LIVE, 0, -1)
    if not names:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hgetall(keys.worker_key(name))
        beats: list[Any] = await pipe.execute()
    return [dict(beat) for beat in beats if beat]
