"""The one stream consumer (shared/bus/consumer.py) against a real Redis: a consumer
process killed mid-entry leaves the entry to another, poison is buried after its tries
(or at once when unparsable) and acknowledged, the dead-letter stream is bounded, entries
deleted meanwhile and a lost group are got over."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from kibitz.shared.bus.consumer import (
    BlockingConsumer,
    ConsumerPolicy,
    Entry,
    GroupedConsumer,
    StreamConsumer,
    Unparsable,
    consumer_of,
    read_entries,
)
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.errors import BusConnectionError, BusResponseError

pytestmark = pytest.mark.asyncio

GROUP = "testers"
ROUNDS = 200  # every loop below is bounded in rounds ...
LOOP_S = 10.0  # ... and in time


@pytest.fixture
async def client(redis_server: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    connection = aioredis.from_url(redis_server.url, decode_responses=True)
    yield connection
    await connection.aclose()


def _stream() -> str:
    return f"kibitz:test:consumer:{uuid.uuid4().hex[:8]}"


def _policy(stream: str, **overrides: object) -> ConsumerPolicy:
    settings: dict[str, object] = {
        "stream": stream, "group": GROUP, "claim_idle_ms": 50, "count": 10, "block_ms": None,
    }  # fmt: skip
    settings.update(overrides)
    return ConsumerPolicy(**settings)  # type: ignore[arg-type]


async def _pending(client: aioredis.Redis, stream: str) -> int:
    info = await client.xpending(stream, GROUP)
    return int(info["pending"])


# A consumer process that takes one entry and dies before acknowledging it.
_DIES_MID_ENTRY = """
import os, sys
import redis
from kibitz.shared.bus.consumer import BlockingConsumer, ConsumerPolicy
url, stream, group = sys.argv[1:4]
policy = ConsumerPolicy(stream, group, claim_idle_ms=60_000, count=1, block_ms=5_000)
consumer = BlockingConsumer(redis.Redis.from_url(url, decode_responses=True), policy, "doomed")
entries = consumer.read()
print(entries[0].id if entries else "", flush=True)
os.kill(os.getpid(), 9)
"""


async def test_an_entry_of_a_consumer_that_died_is_claimed_by_another(
    client: aioredis.Redis, redis_server: EmbeddedRedis
) -> None:
    stream = _stream()
    consumer = StreamConsumer(client, _policy(stream, claim_idle_ms=300), "survivor")
    await consumer.ensure_group()
    entry_id = await client.xadd(stream, {"n": "1"})
    doomed = subprocess.run(
        [sys.executable, "-c", _DIES_MID_ENTRY, redis_server.url, stream, GROUP],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert doomed.returncode == -9 and doomed.stdout.strip() == entry_id
    assert (await client.xpending(stream, GROUP))["consumers"] == [{"name": "doomed", "pending": 1}]
    assert await consumer.claim() == []  # not idle long enough yet: still the dead one's
    handled: list[tuple[Entry, int]] = []

    async def handle(entry: Entry) -> None:
        handled.append((entry, await consumer.deliveries(entry)))

    deadline = time.monotonic() + LOOP_S
    for _ in range(ROUNDS):
        await consumer.round(handle)
        if handled or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert [(e.id, e.fields, e.claimed, n) for e, n in handled] == [
        (entry_id, {"n": "1"}, True, 2)  # its second delivery: the dead one had the first
    ]
    assert await _pending(client, stream) == 0 and await client.xlen(stream) == 0


async def _rounds_until(consumer: StreamConsumer, handler, done) -> None:  # type: ignore[no-untyped-def]
    """Rounds of ``consumer`` until ``done()``, as a loop runs them."""
    deadline = time.monotonic() + LOOP_S
    for _ in range(ROUNDS):
        await consumer.round(handler)
        if await done() or time.monotonic() > deadline:
            return
        await asyncio.sleep(0.06)  # past claim_idle_ms


async def test_a_poison_entry_goes_to_the_dead_letters_after_its_tries(
    client: aioredis.Redis,
) -> None:
    stream, dead = _stream(), _stream()
    policy = _policy(stream, max_deliveries=3, on_failure="retry", dead_letters=dead)
    consumer = StreamConsumer(client, policy, "c1")
    await consumer.ensure_group()
    poison = await client.xadd(stream, {"n": "poison"})
    good = await client.xadd(stream, {"n": "good"})
    tries: dict[str, int] = {}

    async def handle(entry: Entry) -> None:
        tries[entry.fields["n"]] = tries.get(entry.fields["n"], 0) + 1
        if entry.fields["n"] == "poison":
            raise ValueError("cannot handle this")

    async def buried() -> bool:
        return await client.xlen(dead) > 0

    await _rounds_until(consumer, handle, buried)
    assert tries == {"poison": 3, "good": 1}  # max_deliveries tries, then no more
    letters = await client.xrange(dead)
    assert [fields for _id, fields in letters] == [{"n": "poison", "reason": "too many attempts"}]
    assert await _pending(client, stream) == 0  # acknowledged ...
    assert await client.xrange(stream, poison, poison) == []  # ... and deleted
    assert await client.xrange(stream, good, good) == []


async def test_an_unparsable_entry_is_buried_at_once(client: aioredis.Redis) -> None:
    stream, dead = _stream(), _stream()
    consumer = StreamConsumer(client, _policy(stream, max_deliveries=3, dead_letters=dead), "c1")
    await consumer.ensure_group()
    await client.xadd(stream, {"job": "not json"})
    tries = 0

    async def handle(entry: Entry) -> None:
        nonlocal tries
        tries += 1
        raise Unparsable("malformed job entry")

    assert await consumer.round(handle) == 1
    assert tries == 1
    letters = await client.xrange(dead)
    assert [f for _i, f in letters] == [{"job": "not json", "reason": "malformed job entry"}]
    assert await _pending(client, stream) == 0 and await client.xlen(stream) == 0


async def test_give_up_drops_a_failing_entry_without_dead_letters(client: aioredis.Redis) -> None:
    """The results' policy: a result that cannot be applied is logged and dropped at
    once; the next ones are handled."""
    stream = _stream()
    consumer = StreamConsumer(client, _policy(stream, on_failure="give_up"), "c1")
    await consumer.ensure_group()
    await client.xadd(stream, {"n": "bad"})
    await client.xadd(stream, {"n": "good"})
    seen: list[str] = []

    async def handle(entry: Entry) -> None:
        seen.append(entry.fields["n"])
        if entry.fields["n"] == "bad":
            raise KeyError("no such room")

    await consumer.round(handle)
    assert seen == ["bad", "good"]
    assert await _pending(client, stream) == 0 and await client.xlen(stream) == 0


async def test_a_transient_failure_leaves_the_entry_pending(client: aioredis.Redis) -> None:
    stream = _stream()
    consumer = StreamConsumer(client, _policy(stream, on_failure="give_up"), "c1")
    await consumer.ensure_group()
    entry_id = await client.xadd(stream, {"n": "1"})

    async def handle(entry: Entry) -> None:
        raise BusConnectionError("redis went away")

    with pytest.raises(BusConnectionError):
        await consumer.round(handle)
    assert await _pending(client, stream) == 1
    assert len(await client.xrange(stream, entry_id, entry_id)) == 1


async def test_the_dead_letter_stream_is_bounded(client: aioredis.Redis) -> None:
    """Trimmed approximately, as Redis does it cheaply: at most one stream node (100
    entries by default) over the bound, the newest kept."""
    stream, dead = _stream(), _stream()
    buried = 400
    policy = _policy(stream, dead_letters=dead, dead_letters_maxlen=10, count=buried)
    consumer = StreamConsumer(client, policy, "c1")
    await consumer.ensure_group()
    for n in range(buried):
        await client.xadd(stream, {"n": str(n)})

    async def handle(entry: Entry) -> None:
        raise Unparsable("bad")

    await consumer.round(handle)
    letters = await client.xrange(dead)
    assert 10 <= len(letters) <= 10 + 100
    assert letters[-1][1]["n"] == str(buried - 1)
    assert await client.xlen(stream) == 0 and await _pending(client, stream) == 0


async def test_an_entry_deleted_while_pending_is_acknowledged_not_handed_out(
    client: aioredis.Redis,
) -> None:
    stream = _stream()
    consumer = StreamConsumer(client, _policy(stream), "c1")
    await consumer.ensure_group()
    entry_id = await client.xadd(stream, {"n": "1"})
    await client.xreadgroup(GROUP, "gone", {stream: ">"}, count=1)
    await client.xdel(stream, entry_id)  # trimmed away meanwhile
    await asyncio.sleep(0.1)
    assert await consumer.claim() == []
    assert await _pending(client, stream) == 0


async def test_a_lost_group_is_made_again(client: aioredis.Redis) -> None:
    stream = _stream()
    consumer = StreamConsumer(client, _policy(stream), "c1")
    await consumer.ensure_group()
    await client.delete(stream)  # Redis lost its data
    assert await consumer.claim() == [] and await consumer.read() == []
    entry_id = await client.xadd(stream, {"n": "1"})
    assert [e.id for e in await consumer.read()] == [entry_id]


async def test_the_blocking_consumer_buries_after_its_tries(redis_server: EmbeddedRedis) -> None:
    """The worker's side: the same limit, checked before a try (a worker that died on
    the entry counts as a try)."""
    import redis

    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    stream, dead = _stream(), _stream()
    policy = _policy(stream, count=1, max_deliveries=2, dead_letters=dead)
    consumer = BlockingConsumer(client, policy, "w1")
    consumer.ensure_group()
    consumer.ensure_group()  # twice is fine
    entry_id = client.xadd(stream, {"n": "1"})
    client.xreadgroup(GROUP, "ghost", {stream: ">"}, count=1)
    client.xclaim(stream, GROUP, "ghost", 0, [entry_id])  # delivered twice: two workers died
    time.sleep(0.1)
    entries = consumer.claim()
    assert [e.id for e in entries] == [entry_id] and consumer.deliveries(entries[0]) == 3
    assert consumer.exhausted(entries[0])
    consumer.bury(entries[0], "too many attempts", worker="w1")
    assert [f for _i, f in client.xrange(dead)] == [
        {"n": "1", "reason": "too many attempts", "worker": "w1"}
    ]
    assert client.xlen(stream) == 0 and client.xpending(stream, GROUP)["pending"] == 0
    client.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_a_policy_refuses_unbounded_settings() -> None:
    with pytest.raises(ValueError):
        ConsumerPolicy("s", "g", claim_idle_ms=10, count=0, block_ms=None)
    with pytest.raises(ValueError):
        ConsumerPolicy("s", "g", claim_idle_ms=10, count=10, block_ms=None, max_deliveries=0)
    with pytest.raises(ValueError):
        ConsumerPolicy("s", "g", 10, 10, None, dead_letters="d", dead_letters_maxlen=0)


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")
def test_a_read_reply_is_parsed_in_either_protocol() -> None:
    """RESP2 (a single Redis's pooled connections) and RESP3 as redis-py gives it (the
    cluster client's): the same entries, each naming its stream; deleted ones left out."""
    resp2 = [["s1", [("1-0", {"n": "1"}), ("2-0", None)]], ["s2", [("1-0", {"n": "2"})]]]
    resp3 = {"s1": [[("1-0", {"n": "1"}), ("2-0", {})]], "s2": [[("1-0", {"n": "2"})]]}
    expected = [Entry("1-0", {"n": "1"}, stream="s1"), Entry("1-0", {"n": "2"}, stream="s2")]
    assert read_entries(resp2) == read_entries(resp3) == expected
    assert read_entries(None) == read_entries({}) == []


async def test_a_grouped_consumer_reads_and_acknowledges_each_stream(
    client: aioredis.Redis,
) -> None:
    """The grouped consumer (a Redis Cluster's per-group streams) on one Redis: every
    stream's entries handed out once, each acknowledged on its own stream, a dead
    consumer's claimed from each."""
    streams = [_stream() for _ in range(3)]
    policy = _policy("unused", count=6, claim_idle_ms=100, block_ms=200)
    dead = GroupedConsumer(client, policy, "dead", streams, poll_s=0.05, claim_every_s=0)
    live = GroupedConsumer(client, policy, "live", streams, poll_s=0.05, claim_every_s=0)
    await dead.ensure_group()
    await live.ensure_group()  # twice is fine
    assert dead.per_stream == 2
    for n in range(4):
        for stream in streams:
            await client.xadd(stream, {"n": str(n)})
    taken = await dead.read()  # at most two of each stream, then it dies
    assert sorted(e.stream for e in taken) == sorted(streams * 2)
    handled: list[tuple[str, str]] = []

    async def handle(entry: Entry) -> None:
        handled.append((entry.stream, entry.fields["n"]))

    deadline = time.monotonic() + LOOP_S
    while len(handled) < 12 and time.monotonic() < deadline:
        await live.round(handle)
    assert sorted(handled) == sorted((s, str(n)) for s in streams for n in range(4))
    for stream in streams:
        assert await _pending(client, stream) == 0 and await client.xlen(stream) == 0


async def test_one_stream_gets_the_blocking_consumer(client: aioredis.Redis) -> None:
    stream = _stream()
    one = consumer_of(client, _policy("unused"), "c1", [stream])
    assert isinstance(one, StreamConsumer) and one.policy.stream == stream
    await one.ensure_group()
    await client.xadd(stream, {"n": "1"})
    (entry,) = await one.read()
    assert entry.stream == stream
    await one.ack_entries(entry)
    assert await _pending(client, stream) == 0
    assert isinstance(consumer_of(client, _policy("u"), "c", [stream, _stream()]), GroupedConsumer)


async def test_an_idle_grouped_consumer_polls_less_often(client: aioredis.Redis) -> None:
    """Empty passes: the wait doubles from poll_s up to idle_poll_s; an entry brings the
    short wait back."""
    streams = [_stream() for _ in range(2)]
    policy = _policy("unused", block_ms=400)
    consumer = GroupedConsumer(client, policy, "c", streams, poll_s=0.05, idle_poll_s=0.2)
    await consumer.ensure_group()
    passes = 0
    read_once = consumer.read_once

    async def counted() -> list[Entry]:
        nonlocal passes
        passes += 1
        return await read_once()

    consumer.read_once = counted  # type: ignore[method-assign]
    started = time.monotonic()
    while time.monotonic() - started < 1.2:
        assert await consumer.read() == []
    # Waits 0.05, 0.1, then 0.2 each: about 8 passes in 1.2 s (24 at 0.05 s).
    assert 5 <= passes <= 11
    await client.xadd(streams[1], {"n": "1"})
    assert [entry.stream for entry in await consumer.read()] == [streams[1]]
    assert consumer._wait == 0.05


async def test_a_stream_refused_does_not_hold_the_others_up(client: aioredis.Redis) -> None:
    """One stream Redis refuses (its shard down, on a cluster; here a key of another
    type): the others are still read; every stream refused raises."""
    streams = [_stream() for _ in range(2)]
    consumer = GroupedConsumer(client, _policy("unused"), "c", streams)
    await consumer.ensure_group()
    await client.delete(streams[0])
    await client.set(streams[0], "not a stream")
    await client.xadd(streams[1], {"n": "1"})
    assert [entry.stream for entry in await consumer.read()] == [streams[1]]
    await client.delete(streams[1])
    await client.set(streams[1], "not a stream either")
    with pytest.raises(BusResponseError):
        await consumer.read()
