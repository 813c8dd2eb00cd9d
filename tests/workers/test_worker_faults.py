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
from kibitz.server.embedded_redis import EmbeddedRedis
from kibitz.workers.worker import GROUP, JOBS, RESULTS
from tests.conftest import start_server

pytestmark = pytest.mark.asyncio


def start_worker(url: str, name: str, lease_ms: int = 1500) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", "--redis", url,
         "--name", name, "--lease-ms", str(lease_ms)],
        env={**os.environ, "KIBITZ_LOG": "WARNING"},
    )  # fmt: skip


def wait_until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


@pytest.fixture
def private_redis(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis").start()
    yield server
    server.stop()


async def test_job_of_a_killed_worker_is_reclaimed(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=0)
    doomed = survivor = None
    try:
        async with await KibitzClient.open(node.http_url) as client:
            # Othello at level 8 searches for ~2 s: long enough to kill the worker mid-job.
            room = (await client.create("othello", "ai:8", seat=1))["room"]
            doomed = start_worker(private_redis.url, "doomed")
            wait_until(lambda: _pending_consumers(r) == {"doomed": 1})
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
            assert r.xlen(RESULTS) == 0
            survivor = start_worker(private_redis.url, "survivor")
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        assert state["moves"][0]["seat"] == 0 and state["to_move"] == 1
        wait_until(lambda: _pending_consumers(r) == {})
        assert r.hget("kibitz:workers:survivor", "done") == "1"
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

    from kibitz.server.service import RoomService
    from kibitz.server.store import RoomStore
    from kibitz.shared.protocol import Create, JobResult

    client = aioredis.from_url(private_redis.url, decode_responses=True)
    service = RoomService(RoomStore(client))
    await service.store.ensure_groups()
    room, _seat = await service.create(Create(game="tictactoe", opponent="ai:8", seat=1), "tok")
    result = JobResult(f"{room.id}:0", room.id, 0, "5", worker="w1")
    assert await service.apply_result(result) is True
    assert await service.apply_result(result) is False  # the same result again
    late = JobResult(f"{room.id}:0", room.id, 0, "1", worker="w2")  # another worker, late
    assert await service.apply_result(late) is False
    stored = await service.get(room.id)
    assert [m.move for m in stored.moves] == ["5"] and stored.version == 1
    # A result for a human's turn is refused too.
    assert await service.apply_result(JobResult("x", room.id, 1, "1")) is False
    assert (await service.get(room.id)).version == 1
    await client.aclose()


async def test_failed_job_gets_a_fallback_move(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    node = start_server(private_redis.url, workers=0)
    try:
        async with await KibitzClient.open(node.http_url) as client:
            room = (await client.create("tictactoe", "ai:8", seat=1))["room"]
            # A worker reports that it could not compute the move.
            from kibitz.shared.protocol import JobResult

            r.xadd(
                RESULTS, JobResult(f"{room}:0", room, 0, None, worker="w", error="boom").to_fields()
            )
            state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=20)
        assert state["moves"][0]["seat"] == 0
    finally:
        node.stop()
        r.close()
        await asyncio.sleep(0)
