"""Fair scheduling, renewed leases and cancellation, with real server and worker processes.

Owners are told apart by their address: every client here connects from its own
loopback address (all of 127.0.0.0/8 is loopback).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from typing import Any

import pytest
import redis

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.workers.worker import JOBS
from tests.conftest import ServerProcess, start_server
from tests.workers.test_worker_faults import _pending_consumers, start_worker, wait_until

LEASE_MS = 5000  # the default


class Cluster:
    """A server, N worker processes and a Redis client, torn down in ``close``."""

    def __init__(self, redis_url: str, workers: int) -> None:
        self.r = redis.Redis.from_url(redis_url, decode_responses=True)
        self.node: ServerProcess = start_server(redis_url, workers=0)
        self.workers = {
            f"w{i}": start_worker(redis_url, f"w{i}", lease_ms=LEASE_MS) for i in range(workers)
        }
        wait_until(lambda: self.r.zcard(keys.AI_WORKERS_LIVE) == workers)

    async def open(self, host: str) -> KibitzClient:
        return await KibitzClient.open(self.node.http_url, local_addr=(host, 0))

    def stat(self, worker: str, field: str) -> int:
        return int(self.r.hget(f"kibitz:workers:{worker}", field) or 0)

    def close(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.node.stop()
        self.r.close()


@pytest.fixture
def cluster_of(private_redis: EmbeddedRedis):
    made: list[Cluster] = []

    def make(workers: int) -> Cluster:
        made.append(Cluster(private_redis.url, workers))
        return made[-1]

    yield make
    for cluster in made:
        cluster.close()


def _latest(client: KibitzClient, room: str) -> dict[str, Any]:
    """The last state of ``room`` this client received (it follows the room)."""
    return client.states[room]


def _moves(state: dict[str, Any]) -> int:
    moves = state["moves"]
    assert isinstance(moves, list)
    return len(moves)


async def test_a_flood_does_not_delay_another_owners_ai_move(cluster_of) -> None:
    cluster = cluster_of(2)
    flooder = await cluster.open("127.0.0.31")
    newcomer = await cluster.open("127.0.0.32")
    try:
        # Eight strong chess games (the per-address limit), the AI to move in each:
        # 8 searches of 2.5 s, 10 s of work for two workers.
        flood = [(await flooder.create("chess", "ai:8", seat=1))["room"] for _ in range(8)]
        await asyncio.sleep(0.3)  # both workers are searching
        latencies = []
        for _ in range(3):
            started = time.monotonic()
            room = (await newcomer.create("tictactoe", "ai:1", seat=1))["room"]
            await newcomer.wait_state(room, lambda s: _moves(s) == 1, timeout=30)
            latencies.append(time.monotonic() - started)
            await newcomer.resign(room)
        # First come, first served would have made the first one wait for ~8 searches
        # (10 s); fair queueing plus a flood search yielding its worker: well under 2.5 s.
        assert max(latencies) < 2.5, latencies
        waiting = [room for room in flood if _moves(_latest(flooder, room)) == 0]
        assert len(waiting) >= 2, "the flood was over before the newcomer came: no test"
        # The flood is still served, all of it.
        for room in flood:
            await flooder.wait_state(room, lambda s: _moves(s) == 1, timeout=60)
    finally:
        await flooder.close()
        await newcomer.close()


async def test_a_backlogged_owners_search_yields_to_a_newcomer(cluster_of) -> None:
    cluster = cluster_of(1)
    heavy = await cluster.open("127.0.0.71")
    newcomer = await cluster.open("127.0.0.72")
    try:
        first = (await heavy.create("chess", "ai:8", seat=1))["room"]
        second = (await heavy.create("chess", "ai:8", seat=1))["room"]  # waits its turn
        wait_until(lambda: _pending_consumers(cluster.r) == {"w0": 1}, poll=0.005)
        started = time.monotonic()
        room = (await newcomer.create("tictactoe", "ai:1", seat=1))["room"]
        await newcomer.wait_state(room, lambda s: _moves(s) == 1, timeout=20)
        # The running 2.5 s search stopped after its first second, not at its end.
        assert time.monotonic() - started < 2.0
        wait_until(lambda: cluster.stat("w0", "hurried") == 1)
        # The hurried search still played its move; the heavy owner's games go on.
        for flood_room in (first, second):
            await heavy.wait_state(flood_room, lambda s: _moves(s) == 1, timeout=20)
    finally:
        await heavy.close()
        await newcomer.close()


async def test_a_lone_players_search_is_never_cut_short(cluster_of) -> None:
    cluster = cluster_of(1)
    player = await cluster.open("127.0.0.73")
    newcomer = await cluster.open("127.0.0.74")
    try:
        room = (await player.create("chess", "ai:8", seat=1))["room"]
        wait_until(lambda: _pending_consumers(cluster.r) == {"w0": 1}, poll=0.005)
        other = (await newcomer.create("tictactoe", "ai:1", seat=1))["room"]
        await newcomer.wait_state(other, lambda s: _moves(s) == 1, timeout=20)
        await player.wait_state(room, lambda s: _moves(s) == 1, timeout=20)
        assert cluster.stat("w0", "hurried") == 0
    finally:
        await player.close()
        await newcomer.close()


async def test_a_frozen_workers_job_is_finished_by_another_within_the_lease(cluster_of) -> None:
    cluster = cluster_of(2)
    r = cluster.r
    client = await cluster.open("127.0.0.41")
    try:
        # Othello at level 8 searches for 2 s.
        room = (await client.create("othello", "ai:8", seat=1))["room"]
        wait_until(lambda: sum(_pending_consumers(r).values()) == 1, poll=0.005)
        [name] = _pending_consumers(r)
        frozen = cluster.workers[name]
        [survivor] = set(cluster.workers) - {name}
        frozen.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        state = await client.wait_state(room, lambda s: _moves(s) == 1, timeout=30)
        took = time.monotonic() - stopped
        # The lease (5 s) + the survivor's idle round (1 s) + the search (2 s) + slack.
        assert took < LEASE_MS / 1000 + 1 + 2 + 2, took
        assert state["moves"][0]["seat"] == 0
        wait_until(lambda: cluster.stat(survivor, "done") == 1)
        # Thawed, the frozen worker finds its job taken over and posts nothing.
        frozen.send_signal(signal.SIGCONT)
        wait_until(lambda: cluster.stat(name, "dropped") == 1, timeout=15)
        assert cluster.stat(name, "done") == 0
        assert _moves(_latest(client, room)) == 1
        assert _pending_consumers(r) == {} and r.xlen(JOBS) == 0
    finally:
        await client.close()


async def test_resigning_during_the_search_cancels_it(cluster_of) -> None:
    cluster = cluster_of(1)
    r = cluster.r
    client = await cluster.open("127.0.0.51")
    try:
        # Chess at level 8 would search for 2.5 s.
        room = (await client.create("chess", "ai:8", seat=1))["room"]
        wait_until(lambda: _pending_consumers(r) == {"w0": 1}, poll=0.005)
        started = time.monotonic()
        await asyncio.sleep(0.2)
        await client.resign(room)
        wait_until(lambda: cluster.stat("w0", "dropped") == 1, timeout=10, poll=0.01)
        # Stopped within a lease tick (0.25 s), well before the search's own 2.5 s.
        assert time.monotonic() - started < 1.5
        assert cluster.stat("w0", "done") == 0
        state = await client.wait_state(room, lambda s: s["status"] == "over")
        assert _moves(state) == 0
        assert _pending_consumers(r) == {} and r.xlen(JOBS) == 0
        # The worker goes on with the next game.
        other = (await client.create("tictactoe", "ai:1", seat=1))["room"]
        await client.wait_state(other, lambda s: _moves(s) == 1, timeout=20)
    finally:
        await client.close()


async def test_a_job_resigned_while_queued_never_reaches_a_worker(cluster_of) -> None:
    cluster = cluster_of(1)
    r = cluster.r
    client = await cluster.open("127.0.0.61")
    try:
        first = (await client.create("chess", "ai:8", seat=1))["room"]
        second = (await client.create("chess", "ai:8", seat=1))["room"]
        assert r.hexists(keys.AI_WAITING, f"{second}:0")  # one worker: the window is full
        await client.resign(second)
        await client.wait_state(first, lambda s: _moves(s) == 1, timeout=20)
        wait_until(lambda: r.hlen(keys.AI_WAITING) == 0 and r.zcard(keys.AI_READY) == 0)
        wait_until(lambda: cluster.stat("w0", "done") == 1)
        assert cluster.stat("w0", "dropped") == 0  # dropped by dispatch, not by the worker
        assert _moves(_latest(client, second)) == 0
        assert r.xlen(JOBS) == 0
    finally:
        await client.close()


def test_workers_count_themselves_in_and_out(private_redis: EmbeddedRedis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    worker = start_worker(private_redis.url, "counted", lease_ms=LEASE_MS)
    try:
        wait_until(lambda: r.zscore(keys.AI_WORKERS_LIVE, "counted") is not None)
        worker.terminate()
        assert worker.wait(timeout=15) == 0
        assert r.zscore(keys.AI_WORKERS_LIVE, "counted") is None
    finally:
        if worker.poll() is None:
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
        r.close()
