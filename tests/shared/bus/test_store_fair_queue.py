"""The fair queue's scripts as the workers run them (the synchronous client), driven
directly against a real Redis: a worker's beat counts it in and prunes the silent ones,
dispatch admits up to the window and drops a job whose room moved on, and a search yields
to a waiting newcomer once (and only when its owner is backlogged)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
import redis

from kibitz.shared.bus import fair_queue as fairness
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.fair_queue import FairQueue


@pytest.fixture
def client(own_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    r = redis.Redis.from_url(own_redis.url, decode_responses=True)
    for key in (keys.AI_READY, keys.AI_WAITING, keys.AI_OWNERS, keys.AI_CLOCK,
                keys.AI_WORKERS_LIVE, keys.JOBS):  # fmt: skip
        r.delete(key)
    yield r
    r.close()


def _queue(r: redis.Redis, owner: str, start: int, version: int = 0) -> str:
    """A job of a room at ``version`` waiting in the fair queue with start tag ``start``."""
    room = "q" + uuid.uuid4().hex[:8]
    r.hset(keys.room_key(room), mapping={"version": version, "data": "{}"})
    job_id = f"{room}:{version}"
    job = {"job_id": job_id, "room": room, "version": version, "owner": owner}
    r.zadd(keys.AI_READY, {job_id: start})
    r.hset(keys.AI_WAITING, job_id, json.dumps(job))
    return job_id


def _running(r: redis.Redis, owner: str) -> None:
    r.xadd(keys.JOBS, {"job": json.dumps({"room": "x", "owner": owner})})


def test_a_workers_beat_counts_it_in_and_prunes_the_silent(client: redis.Redis) -> None:
    fair = FairQueue(client)
    client.zadd(keys.AI_WORKERS_LIVE, {"long-gone": 0})
    assert fair.beat("w1") == 1  # the silent one pruned, w1 counted
    assert fair.beat("w2") == 2
    fair.leave("w1")
    assert client.zrange(keys.AI_WORKERS_LIVE, 0, -1) == ["w2"]


def test_dispatch_fills_the_window_and_drops_a_moved_on_room(client: redis.Redis) -> None:
    fair = FairQueue(client)
    fair.beat("w1")
    fair.beat("w2")
    stale = _queue(client, "a", 0)
    client.hset(keys.room_key(stale.split(":")[0]), "version", 5)  # moved on while queued
    first, second, third = (_queue(client, "b", tag) for tag in (1, 2, 3))
    assert fair.dispatch() == (2, 1)  # two workers: two sent; the stale job dropped
    sent = [json.loads(f["job"])["job_id"] for _id, f in client.xrange(keys.JOBS)]
    assert sent == [first, second]
    assert fair.waiting() == 1 and client.zrange(keys.AI_READY, 0, -1) == [third]
    assert fair.dispatch() == (0, 0)  # the window is full


def test_a_backlogged_search_yields_once_to_a_newcomer(client: redis.Redis) -> None:
    fair = FairQueue(client)
    fair.beat("w1")
    _running(client, "flooder")  # the only worker runs the flooder's search
    assert not fair.should_yield("flooder")  # nobody waits
    _queue(client, "flooder", 0)
    assert not fair.should_yield("flooder")  # only its own job waits
    _queue(client, "newcomer", 1)
    assert fair.should_yield("flooder")
    assert not fair.should_yield("flooder")  # that newcomer has had its yield
    assert not fair.should_yield("newcomer")  # a lone lane is never cut short


def test_a_lone_players_search_never_yields(client: redis.Redis) -> None:
    fair = FairQueue(client)
    fair.beat("w1")
    _running(client, "lone")
    _queue(client, "other", 0)
    assert not fair.should_yield("lone")  # "lone" has nothing else running or waiting
    assert fairness.YIELD_AFTER_MS > 0
