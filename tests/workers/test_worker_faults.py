"""Workers die, results repeat: no job is lost and no room changes twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest
import redis

from kibitz.client.connection import KibitzClient
from kibitz.workers.worker import GROUP, JOBS, RESULTS
from tests.conftest import start_server

pytestmark = pytest.mark.asyncio


def start_worker(url: str, name: str, lease_ms: int = 1500) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", "--redis", url,
         "--name", name, "--lease-ms", str(lease_ms)],
        env={**os.environ, "KIBITZ_LOG": "WARNING"},
    )  # fmt: skip


def wait_until(predicate, timeout: float = 20.0, poll: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(poll)


async def test_job_of_a_killed_worker_is_reclaimed(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=0)
    doomed = survivor = None
    try:
        async with await KibitzClient.open(node.http_url) as client:
            # Othello at level 8 searches for ~2 s: long enough to kill the worker mid-job.
            room = (await client.create("othello", "ai:8", seat=1))["room"]
            doomed = start_worker(private_redis.url, "doomed")
            wait_until(lambda: _pending_consumers(r) == {"doomed": 1}, poll=0.005)
            doomed.send_signal(signal.SIGSTOP)  # frozen mid-search, then gone for good
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
            assert r.xlen(RESULTS) == 0
            survivor = start_worker(private_redis.url, "survivor")
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["moves"][0]["seat"] == 0 and state["to_move"] == 1
        wait_until(lambda: _pending_consumers(r) == {})
        # The survivor's heartbeat reports the job it took over.
        wait_until(lambda: r.hget("kibitz:workers:survivor", "done") == "1")
    finally:
        for proc in (doomed, survivor):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        node.stop()
        r.close()


def _pending_consumers(r: redis.Redis) -> dict[str, int]:
    info = r.xpending(JOBS, GROUP)
    return {c["name"]: int(c["pending"]) for c in info["consumers"]} if info["pending"] else {}


async def test_duplicate_and_late_results_change_nothing(private_redis) -> None:
    import redis.asyncio as aioredis

    from kibitz.server.services.room_store import RoomStore
    from kibitz.server.services.rooms import RoomService
    from kibitz.shared.protocol.client_in import Create
    from kibitz.shared.protocol.jobs import JobResult

    client = aioredis.from_url(private_redis.url, decode_responses=True)
    service = RoomService(RoomStore(client))
    await service.store.ensure_groups()
    room, _seat = await service.create(Create(game="tictactoe", opponent="ai:8", seat=1), "tok")
    result = JobResult(f"{room.id}:0", room.id, 0, "5", worker="w1")
    assert await service.apply_result(result) == "applied"
    assert await service.apply_result(result) == "ignored"  # the same result again
    late = JobResult(f"{room.id}:0", room.id, 0, "1", worker="w2")  # another worker, late
    assert await service.apply_result(late) == "ignored"
    stored = await service.get(room.id)
    assert [m.move for m in stored.moves] == ["5"] and stored.version == 1
    # A result for a human's turn is refused too.
    assert await service.apply_result(JobResult("x", room.id, 1, "1")) == "ignored"
    assert (await service.get(room.id)).version == 1
    await client.aclose()


async def test_failed_job_gets_a_fallback_move(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=0)
    try:
        async with await KibitzClient.open(node.http_url) as client:
            room = (await client.create("tictactoe", "ai:8", seat=1))["room"]
            # A worker reports that it could not compute the move.
            from kibitz.shared.protocol.jobs import JobResult

            r.xadd(
                RESULTS, JobResult(f"{room}:0", room, 0, None, worker="w", error="boom").to_fields()
            )
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=20)
        assert state["moves"][0]["seat"] == 0
    finally:
        node.stop()
        r.close()
        await asyncio.sleep(0)


async def test_poison_results_do_not_stop_ai_games(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=1)
    try:
        r.xadd(RESULTS, {"result": "not json"})
        r.xadd(RESULTS, {"result": '{"job_id": 1, "room": [], "version": "x", "move": 5}'})
        r.xadd(RESULTS, {"something": "else"})
        async with await KibitzClient.open(node.http_url) as client:
            room = (await client.create("tictactoe", "ai:8", seat=1))["room"]
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["moves"][0]["seat"] == 0
        wait_until(lambda: r.xlen(RESULTS) == 0)  # every entry was consumed
    finally:
        node.stop()
        r.close()


async def test_job_failing_too_often_goes_to_dead_letters(private_redis) -> None:
    from kibitz.workers.worker import DEAD, MAX_DELIVERIES

    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=0)
    worker = None
    try:
        async with await KibitzClient.open(node.http_url) as client:
            room = (await client.create("tictactoe", "ai:8", seat=1))["room"]
            # A consumer takes the job and never finishes it, again and again (as if each
            # worker that tried it crashed).
            entries = r.xreadgroup(GROUP, "ghost", {JOBS: ">"}, count=1)
            entry_id = entries[0][1][0][0]
            for _ in range(MAX_DELIVERIES):
                r.xclaim(JOBS, GROUP, "ghost", 0, [entry_id])
            worker = start_worker(private_redis.url, "last", lease_ms=100)
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["moves"][0]["seat"] == 0  # the fallback move: the game goes on
        dead = r.xrange(DEAD)
        assert len(dead) == 1 and dead[0][1]["reason"] == "too many attempts"
        wait_until(lambda: _pending_consumers(r) == {})
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=10)
        node.stop()
        r.close()


async def test_worker_concurrency_runs_several_consumers(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=0)
    pool = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", "--redis", private_redis.url,
         "--concurrency", "2", "--name", "pool"],
        env={**os.environ, "KIBITZ_LOG": "WARNING"},
    )  # fmt: skip
    try:
        wait_until(lambda: len(list(r.scan_iter("kibitz:workers:pool*"))) == 2)
        async with await KibitzClient.open(node.http_url) as client:
            room = (await client.create("tictactoe", "ai:8", seat=1))["room"]
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["moves"][0]["seat"] == 0
        pool.terminate()  # SIGTERM reaches both processes; they leave cleanly
        assert pool.wait(timeout=20) == 0
        wait_until(lambda: not list(r.scan_iter("kibitz:workers:pool*")))
    finally:
        if pool.poll() is None:
            pool.kill()
        node.stop()
        r.close()
