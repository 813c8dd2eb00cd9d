"""What a worker sends Redis per job, counted on a private real Redis (INFO commandstats,
which counts the commands run inside scripts too): the heartbeat and the look for dead
workers' jobs go by time, not by job, and a quick search posts its move without checking
its lease (nobody can have taken over a job held for less than the lease)."""

from __future__ import annotations

import time

import redis

from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.games import find_game
from kibitz.shared.protocol.jobs import Budget, Job
from kibitz.workers.worker import (
    BEAT_EVERY_S,
    JOBS,
    RESULTS,
    Worker,
    WorkerConfig,
    reclaim_every_s,
    room_key,
)

JOBS_COUNT = 60
LEASE_MS = 5_000


def _calls(r: redis.Redis, command: str) -> int:
    stats = r.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def _queue_quick_jobs(r: redis.Redis, count: int) -> None:
    """``count`` depth-1 tic-tac-toe jobs, each for a room of its own at version 0."""
    game = find_game("tictactoe")
    start = game.format_position(game.initial())
    for i in range(count):
        room = f"{i:032x}"
        r.hset(room_key(room), mapping={"version": 0})
        job = Job(f"{room}:0", room, 0, "tictactoe", start, [], 1, Budget(depth=1, time_ms=100))
        r.xadd(JOBS, job.to_fields())


def test_heartbeat_and_reclaim_go_by_time_not_by_job(private_redis: EmbeddedRedis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    try:
        _queue_quick_jobs(r, JOBS_COUNT)
        worker = Worker(WorkerConfig(private_redis.url, name="w1", lease_ms=LEASE_MS))
        worker.config.max_jobs = JOBS_COUNT
        r.config_resetstat()
        started = time.monotonic()
        assert worker.run() == 0
        took = time.monotonic() - started
        assert worker.done == JOBS_COUNT and r.xlen(RESULTS) == JOBS_COUNT

        # One beat (the worker's hash: HSET + EXPIRE; its place in the dispatch window:
        # ZADD) per BEAT_EVERY_S, and one look for dead workers' jobs per reclaim period,
        # however many jobs went by meanwhile.
        beats = took / BEAT_EVERY_S + 1
        assert _calls(r, "expire") <= beats, (_calls(r, "expire"), took)
        assert _calls(r, "zadd") <= beats, (_calls(r, "zadd"), took)
        assert _calls(r, "xautoclaim") <= took / reclaim_every_s(LEASE_MS) + 1, took
        # Every job was quicker than half its lease: its lease was not checked (XPENDING,
        # XCLAIM) before its move was posted; its room's version was.
        assert _calls(r, "xpending") == _calls(r, "xclaim") == 0
        assert took < 5, took  # so each of the above is well under one per job
        # Fairness needs the dispatch after every job: it stays.
        assert _calls(r, "evalsha") >= JOBS_COUNT
    finally:
        r.close()
