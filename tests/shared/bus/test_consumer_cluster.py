"""The grouped stream consumer (shared/bus/consumer.py ``GroupedConsumer``) on a real
Redis Cluster (the session's ``redis_cluster``: 3 primaries, each with a replica): one
consumer group read on every slot group's stream, the streams spread over the primaries.
Two consumers (two nodes) hand every entry out exactly once; a dead consumer's entries
are claimed by the other, from each stream; every acknowledgement goes to its own
stream's group; a lost group is made again. And the archiver on the cluster: every
group's archive entries written to the database, an entry written twice (a failover
replayed it, a node queued it again) archived once."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import key_slot

from kibitz.server.archive.database import Archive
from kibitz.server.loops import archiver as archiver_module
from kibitz.server.loops.archiver import Archiver, Lifetimes
from kibitz.server.loops.deadlines import DeadlineSweeper
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.account_events import AccountEvents
from kibitz.shared.bus.analysis import AnalysisStore
from kibitz.shared.bus.bans import BanMirror
from kibitz.shared.bus.challenges import Challenges
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.connect import AsyncClient, command_client
from kibitz.shared.bus.consumer import (
    ConsumerPolicy,
    Entry,
    GroupedConsumer,
    StreamConsumer,
    consumer_of,
)
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster, EmbeddedClusterNode
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.seat_keys import SeatKeys
from kibitz.shared.protocol.client_in import Create, Join, PlayMove
from tests.shared.bus.conftest import grouped_url

pytestmark = [pytest.mark.asyncio, pytest.mark.redis_cluster]

GROUP = "testers"
LOOP_S = 15.0  # every loop below is bounded in time
LOGGER = "kibitz.shared.bus.consumer"


def _streams() -> list[str]:
    return [keys.archive(group) for group in keys.groups()]


def _policy(**overrides: Any) -> ConsumerPolicy:
    settings: dict[str, Any] = {
        "stream": "unused", "group": GROUP, "claim_idle_ms": 200, "count": 24,
        "block_ms": 300,
    }  # fmt: skip
    settings.update(overrides)
    return ConsumerPolicy(**settings)


async def _pending(client: AsyncClient, stream: str) -> int:
    info: Any = await client.xpending(stream, GROUP)
    return int(info["pending"])


async def test_the_streams_of_the_groups_lie_on_every_primary(
    clients: list[AsyncClient], redis_cluster: EmbeddedCluster
) -> None:
    owners = {redis_cluster.node_for_key(stream).address for stream in _streams()}
    assert len(owners) == len(redis_cluster.primaries()) == 3


async def test_two_consumers_handle_every_entry_of_every_group_once(
    clients: list[AsyncClient],
) -> None:
    streams = _streams()
    consumers = [
        GroupedConsumer(client, _policy(), f"node{i}", streams, poll_s=0.05)
        for i, client in enumerate(clients)
    ]
    await consumers[0].ensure_group()
    await consumers[1].ensure_group()  # the groups exist: nothing changes
    written: set[tuple[str, str]] = set()
    for n in range(180):
        stream = streams[n % len(streams)]
        written.add((stream, str(await clients[0].xadd(stream, {"n": str(n)}))))
    handled: Counter[tuple[str, str]] = Counter()
    by: Counter[str] = Counter()

    def handler(name: str) -> Any:
        async def handle(entry: Entry) -> None:
            handled[(entry.stream, entry.id)] += 1
            by[name] += 1
            await asyncio.sleep(0)  # let the other consumer in between

        return handle

    async def run(consumer: GroupedConsumer) -> None:
        deadline = time.monotonic() + LOOP_S
        while sum(handled.values()) < len(written) and time.monotonic() < deadline:
            await consumer.round(handler(consumer.consumer))

    await asyncio.gather(*(run(consumer) for consumer in consumers))
    assert set(handled) == written
    assert max(handled.values()) == 1  # exactly once each
    assert by["node0"] > 0 and by["node1"] > 0  # both took part
    for stream in streams:  # acknowledged and deleted on each group's stream
        assert await clients[0].xlen(stream) == 0
        assert await _pending(clients[0], stream) == 0


async def test_a_pass_is_bounded_and_a_busy_stream_is_read_again_at_once(
    clients: list[AsyncClient],
) -> None:
    streams = _streams()
    consumer = GroupedConsumer(clients[0], _policy(count=24), "node0", streams)
    await consumer.ensure_group()
    assert consumer.per_stream == 2  # ceil(24 / 12)
    for n in range(10):
        await clients[0].xadd(streams[3], {"n": str(n)})
    started = time.monotonic()
    got: list[Entry] = []
    while len(got) < 10:
        batch = await consumer.read()
        assert 0 < len(batch) <= 2  # a busy stream: no wait for the poll
        got += batch
    assert time.monotonic() - started < consumer.poll_s * 2
    assert [entry.fields["n"] for entry in got] == [str(n) for n in range(10)]
    await consumer.ack_entries(*got)
    started = time.monotonic()
    assert await consumer.read() == []  # nothing: polled for block_ms, then given up
    assert time.monotonic() - started >= 0.25


async def test_a_dead_consumers_entries_are_claimed_from_every_stream(
    clients: list[AsyncClient],
) -> None:
    streams = _streams()
    # Idle 1 s before a claim: long enough that a loaded machine still claims nothing early.
    policy = _policy(count=100, claim_idle_ms=1000)
    dead = GroupedConsumer(clients[0], policy, "dead", streams)
    await dead.ensure_group()
    for stream in streams:
        await clients[0].xadd(stream, {"room": stream})
    taken = await dead.read()  # and then it dies, nothing acknowledged
    assert {entry.stream for entry in taken} == set(streams)
    survivor = GroupedConsumer(clients[1], policy, "survivor", streams)
    assert await survivor.claim() == []  # not idle long enough yet
    assert await survivor.read() == []  # nothing new: the dead one has them all
    claimed: list[Entry] = []
    deadline = time.monotonic() + LOOP_S
    while len(claimed) < len(streams) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        claimed += await survivor.claim()
    assert all(entry.claimed for entry in claimed)
    assert {(e.stream, e.id) for e in claimed} == {(e.stream, e.id) for e in taken}
    assert all(entry.fields["room"] == entry.stream for entry in claimed)
    await survivor.ack_entries(*claimed)
    for stream in streams:
        assert await _pending(clients[0], stream) == 0
        assert await clients[0].xlen(stream) == 0


async def test_an_acknowledgement_goes_to_its_own_streams_group(
    clients: list[AsyncClient],
) -> None:
    streams = _streams()
    first, second = streams[0], streams[1]
    assert keys.group_tag(0) in first and keys.group_tag(1) in second
    consumer = GroupedConsumer(clients[0], _policy(), "node0", [first, second])
    await consumer.ensure_group()
    for stream in (first, second):  # the same entry id in two streams
        await clients[0].xadd(stream, {"n": "1"}, id="5-1")
    entries = await consumer.read()
    assert sorted((e.stream, e.id) for e in entries) == [(first, "5-1"), (second, "5-1")]
    (of_second,) = [entry for entry in entries if entry.stream == second]
    await consumer.ack_entries(of_second)
    assert await _pending(clients[0], second) == 0 and await clients[0].xlen(second) == 0
    assert await _pending(clients[0], first) == 1 and await clients[0].xlen(first) == 1
    with pytest.raises(ValueError):  # an entry of a stream not read here
        await consumer.ack_entries(Entry("5-1", {"n": "1"}, stream=streams[2]))


async def test_a_lost_group_on_one_stream_is_made_again(clients: list[AsyncClient]) -> None:
    streams = _streams()
    consumer = GroupedConsumer(clients[0], _policy(block_ms=None), "node0", streams)
    await consumer.ensure_group()
    await clients[0].delete(streams[5])  # Redis lost this stream (and its group)
    await clients[0].xadd(streams[6], {"n": "1"})
    # The pass finds that group gone and makes it again; the other streams are read.
    entries = await consumer.read()
    assert [(entry.stream, entry.fields) for entry in entries] == [(streams[6], {"n": "1"})]
    assert await consumer.claim() == []
    await clients[0].xadd(streams[5], {"n": "2"})
    assert [entry.stream for entry in await consumer.read()] == [streams[5]]


async def test_one_stream_is_read_by_todays_blocking_consumer(
    clients: list[AsyncClient],
) -> None:
    """consumer_of: one stream (the single Redis's archive, the results) keeps the one
    blocking consumer; several streams get the grouped one."""
    one = consumer_of(clients[0], _policy(), "node0", [keys.RESULTS])
    assert isinstance(one, StreamConsumer) and one.policy.stream == keys.RESULTS
    await one.ensure_group()
    await clients[0].xadd(keys.RESULTS, {"n": "1"})
    (entry,) = await one.read()  # the cluster client's reply shape (RESP3) parsed
    assert entry.stream == keys.RESULTS and entry.fields == {"n": "1"}
    await one.ack_entries(entry)
    assert await clients[0].xlen(keys.RESULTS) == 0
    assert isinstance(consumer_of(clients[0], _policy(), "n", _streams()), GroupedConsumer)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """A cluster of this test's own (it moves a slot): 3 primaries, no replicas."""
    cluster = EmbeddedCluster(tmp_path / "cluster", primaries=3, replicas_per_primary=0)
    cluster.start()
    yield cluster
    cluster.stop()


async def test_a_stream_whose_slot_moves_is_followed(own_cluster: EmbeddedCluster) -> None:
    """A group's slot moved to another primary while its entries are read: the consumer
    follows it (redirected, then its slot map renewed); every entry handled once, each
    acknowledged where its stream now lives, a pending one claimed there."""
    client = command_client(grouped_url(own_cluster))
    try:
        streams = _streams()
        moved = streams[0]
        consumer = GroupedConsumer(client, _policy(count=100), "node0", streams, poll_s=0.05)
        other = GroupedConsumer(client, _policy(count=100), "node1", streams, poll_s=0.05)
        await consumer.ensure_group()
        for n in range(3):
            await client.xadd(moved, {"n": str(n)})
        before = await consumer.read()
        assert [e.fields["n"] for e in before] == ["0", "1", "2"]
        await consumer.ack_entries(before[0])  # one done, two left pending on "node0"
        source = own_cluster.node_for_key(moved)
        target = next(p for p in own_cluster.primaries() if p.address != source.address)
        await asyncio.to_thread(own_cluster.move_slot, key_slot(moved.encode()), target)
        assert own_cluster.node_for_key(moved).address == target.address
        for n in range(3, 6):
            await client.xadd(moved, {"n": str(n)})
        after = await consumer.read()
        assert [e.fields["n"] for e in after] == ["3", "4", "5"]
        await consumer.ack_entries(before[1], *after)  # acknowledged on the new primary
        await asyncio.sleep(0.25)  # "node0" is gone: its last entry is idle past 200 ms
        claimed = await other.claim()
        assert [(e.stream, e.fields["n"]) for e in claimed] == [(moved, "2")]
        await other.ack_entries(*claimed)
        assert await client.xlen(moved) == 0 and await _pending(client, moved) == 0
    finally:
        await client.aclose()


#: The command timeout of the client of the test below, which freezes a primary: a read
#: pass waits this long for it.
FROZEN_TIMEOUT_S = 2.0


def _hold_failover(cluster: EmbeddedCluster, primary: EmbeddedClusterNode, held: bool) -> None:
    """Whether the replicas of ``primary`` may take over from it."""
    for replica in cluster.replicas_of(primary):
        with replica.client() as node:
            node.config_set("cluster-replica-no-failover", "yes" if held else "no")


async def _write(client: AsyncClient, streams: list[str], n: str) -> set[tuple[str, str]]:
    return {(stream, str(await client.xadd(stream, {"n": n}))) for stream in streams}


def _warnings(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


async def _hand_out_until(
    consumer: GroupedConsumer, handed: Counter[tuple[str, str]], wanted: set[tuple[str, str]]
) -> None:
    """Read and claim (each entry counted in ``handed``, then acknowledged) until every
    entry of ``wanted`` has been handed out, for at most 30 s."""
    deadline = time.monotonic() + 30
    while not wanted <= set(handed) and time.monotonic() < deadline:
        entries = await consumer.read() + await consumer.claim()
        handed.update((entry.stream, entry.id) for entry in entries)
        await consumer.ack_entries(*entries)


def _live(entries: set[tuple[str, str]], down: set[str]) -> set[tuple[str, str]]:
    """The ``(stream, id)`` of ``entries`` not on the streams of a primary down."""
    return {(stream, entry_id) for stream, entry_id in entries if stream not in down}


async def test_a_primary_down_holds_up_only_its_own_streams(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One primary killed (-9), later another frozen, while every primary's streams hold
    entries. Until the killed one's replica takes over (held back here until the test
    lets it), and while the frozen one answers nothing, the passes (making the groups,
    claims, reads) hand out the other primaries' entries, and each read pass those
    written meanwhile, and leave the down primary's where they are, said in one warning,
    not one per pass; an acknowledgement on it raises, once the others' are done. After
    the failover (the thaw) its entries are handed out too, and those written since:
    none lost, none handed out twice. (What the first read after the fault, pipelined,
    read on the live primaries is lost on the way back: claimed. So is what the frozen
    primary reads when it wakes, its reader gone.)"""
    caplog.set_level(logging.INFO, logger=LOGGER)
    cluster = EmbeddedCluster(tmp_path / "cluster", primaries=3, replicas_per_primary=1)
    cluster.start()
    client = command_client(grouped_url(cluster), timeout_s=FROZEN_TIMEOUT_S)
    streams = _streams()
    consumer = GroupedConsumer(client, _policy(count=100), "node0", streams, poll_s=0.05)
    handed: Counter[tuple[str, str]] = Counter()

    async def while_down(down: set[str], stranded: Entry) -> set[tuple[str, str]]:
        """The entries written to the live streams now are handed out by the next read
        pass, which waits for the primary down FROZEN_TIMEOUT_S at most; acknowledging
        them with ``stranded`` (on the primary down) fails for that one alone."""
        now = await _write(client, [s for s in streams if s not in down], "while down")
        started = time.monotonic()
        entries = await consumer.read_once()
        assert time.monotonic() - started < 2.5 * FROZEN_TIMEOUT_S
        assert {(entry.stream, entry.id) for entry in entries} == now
        handed.update((entry.stream, entry.id) for entry in entries)
        with pytest.raises(BusError):
            await consumer.ack_entries(*entries, stranded)
        for stream in set(streams) - down:  # the others acknowledged all the same
            assert await client.xlen(stream) == 0 and await _pending(client, stream) == 0
        return now

    try:
        await consumer.ensure_group()
        written = await _write(client, streams, "before the kill")
        for primary in cluster.primaries():  # replicated before the crash
            with primary.client() as node:
                assert node.wait(1, 5000) == 1

        killed = cluster.node_for_key(streams[0])
        on_killed = {s for s in streams if cluster.node_for_key(s).address == killed.address}
        stranded = next(Entry(i, {}, stream=s) for s, i in written if s in on_killed)
        await asyncio.to_thread(_hold_failover, cluster, killed, True)
        cluster.kill(killed)
        await _hand_out_until(consumer, handed, _live(written, on_killed))
        assert set(handed) == _live(written, on_killed)
        written |= await while_down(on_killed, stranded)
        await consumer.ensure_group()  # (as a restarted archiver does)
        assert await consumer.claim() == []
        [warning] = _warnings(caplog)  # every pass failed on it: said once
        assert f"{len(on_killed)} of {len(streams)} streams" in warning

        await asyncio.to_thread(_hold_failover, cluster, killed, False)
        await asyncio.to_thread(cluster.wait_for_failover, killed)
        written |= await _write(client, streams, "after the failover")
        await _hand_out_until(consumer, handed, written)
        assert set(handed) == written and max(handed.values()) == 1
        assert _warnings(caplog, logging.INFO)  # every stream answers again

        caplog.clear()
        frozen = next(p for p in cluster.primaries() if p.address != killed.address)
        on_frozen = {s for s in streams if cluster.node_for_key(s).address == frozen.address}
        before = await _write(client, streams, "before the freeze")
        stranded = next(Entry(i, {}, stream=s) for s, i in before if s in on_frozen)
        await asyncio.to_thread(_hold_failover, cluster, frozen, True)
        cluster.freeze(frozen)
        try:
            await _hand_out_until(consumer, handed, _live(before, on_frozen))
            assert set(handed) & before == _live(before, on_frozen)
            written |= before | await while_down(on_frozen, stranded)
            assert len(_warnings(caplog)) == 1
        finally:
            cluster.thaw(frozen)
        await asyncio.to_thread(cluster.wait_ok)
        written |= await _write(client, streams, "after the thaw")
        await _hand_out_until(consumer, handed, written)
        assert set(handed) == written and max(handed.values()) == 1
        for stream in streams:
            assert await client.xlen(stream) == 0 and await _pending(client, stream) == 0
    finally:
        await client.aclose()
        cluster.stop()


# -- the archiver on the cluster ------------------------------------------------------------


@pytest.fixture
async def archive(tmp_path: Path) -> AsyncIterator[Archive]:
    opened = await Archive.open(f"sqlite:///{tmp_path / 'games.sqlite3'}")
    yield opened
    await opened.close()


async def _finished_game(service: RoomService) -> str:
    """A finished tic-tac-toe game: "x" takes the top row."""
    room, _seat = await service.create(Create(game="tictactoe", seat=0), "x")
    await service.join(Join(room=room.id), "o")
    for token, square in (("x", "1"), ("o", "4"), ("x", "2"), ("o", "5"), ("x", "3")):
        await service.move(PlayMove(room.id, token, square))
    assert (await service.get(room.id)).status == "over"
    return room.id


async def test_the_archiver_archives_every_groups_games_and_a_replayed_entry_once(
    clients: list[AsyncClient], archive: Archive
) -> None:
    services = []
    for i, client in enumerate(clients):
        store = RoomStore(client, node=f"n{i}")
        await store.ensure_groups()
        await store.heartbeat()
        services.append(RoomService(store))
    rooms = [await _finished_game(services[i % 2]) for i in range(8)]
    groups = {keys.group_of(room) for room in rooms}
    assert len(groups) > 1  # several groups' streams
    # A failover replayed one entry (or a node queued it again): it is there twice.
    twice = rooms[0]
    await clients[0].xadd(keys.archive(keys.group_of(twice)), {"room": twice})
    # And one in another group's stream than its room's (no writer does that): it is
    # acknowledged on its own stream all the same.
    elsewhere = keys.archive((keys.group_of(rooms[1]) + 1) % keys.group_count())
    await clients[0].xadd(elsewhere, {"room": rooms[1]})
    archivers = [
        Archiver(client, service, archive, ChatLog(client), f"n{i}", Lifetimes())
        for i, (client, service) in enumerate(zip(clients, services, strict=True))
    ]
    for archiver in archivers:
        assert isinstance(archiver.stream, GroupedConsumer)
    tasks = [asyncio.create_task(archiver.run()) for archiver in archivers]
    try:
        deadline = time.monotonic() + LOOP_S
        while time.monotonic() < deadline:
            backlog = [await clients[0].xlen(keys.archive(g)) for g in keys.groups()]
            if not any(backlog):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)  # a sweep of every group's lobby too
        assert not any(task.done() for task in tasks)  # no archiver failed
    finally:
        for task in tasks:
            task.cancel()
        _done, stuck = await asyncio.wait(tasks, timeout=5.0)
        assert not stuck  # an archiver stops when cancelled
    for group in keys.groups():
        assert await clients[0].xlen(keys.archive(group)) == 0
        assert await _pending_of(clients[0], keys.archive(group)) == 0
    for room in rooms:
        assert await archive.get(room) is not None
        assert await clients[0].zscore(keys.live(keys.group_of(room)), room) is None
    page = await archive.list(limit=50)  # the entry written twice: one game
    assert sorted(record["id"] for record in page.records) == sorted(rooms)


@pytest.mark.parametrize("batch", [100, 3])
async def test_the_sweep_visits_every_groups_lobby(
    clients: list[AsyncClient], archive: Archive, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Waiting rooms past their lifetime and without a TTL (made before rooms had one),
    spread over the groups: the sweep pages through each group's lobby in turn, at most
    SWEEP_BATCH rooms a round, and forgets them all."""
    monkeypatch.setattr(archiver_module, "SWEEP_BATCH", batch)
    store = RoomStore(clients[0], node="n0")
    await store.ensure_groups()
    await store.heartbeat()
    service = RoomService(store)
    rooms = []
    for _ in range(10):
        room, _seat = await service.create(Create(game="tictactoe", seat=0), "x")
        await clients[0].persist(keys.room_key(room.id))
        rooms.append(room.id)
    assert len({keys.group_of(room) for room in rooms}) > 2
    await asyncio.sleep(0.01)
    lifetimes = Lifetimes(waiting_ttl_ms=1, unstarted_ttl_ms=1)
    sweeper = Archiver(clients[0], service, archive, ChatLog(clients[0]), "n0", lifetimes)
    forgotten, rounds = 0, 0
    while forgotten < len(rooms) and rounds < 20:
        forgotten += await sweeper.sweep()
        rounds += 1
    assert forgotten == len(rooms)
    assert rounds >= len(rooms) // batch
    for room in rooms:
        assert await clients[0].zscore(keys.live(keys.group_of(room)), room) is None
        assert not await clients[0].exists(keys.room_key(room))


async def _pending_of(client: AsyncClient, stream: str) -> int:
    try:
        info: Any = await client.xpending(stream, keys.ARCHIVERS_GROUP)
    except Exception:  # no group on a stream never written
        return 0
    return int(info["pending"])


async def test_the_deadline_sweeper_ends_the_due_rooms_of_every_group(
    clients: list[AsyncClient],
) -> None:
    store = RoomStore(clients[0], node="n0")
    await store.ensure_groups()
    await store.heartbeat()
    service = RoomService(store, first_move_ms=300)  # a first move not made: aborted
    clock = {"initial_ms": 60_000, "increment_ms": 0}
    rooms = []
    for _ in range(10):
        room, _seat = await service.create(Create(game="tictactoe", seat=0, clock=clock), "x")
        await service.join(Join(room=room.id), "o")
        rooms.append(room.id)
    assert len({keys.group_of(room) for room in rooms}) > 1
    sweeper = DeadlineSweeper(service, interval_s=0.05)
    await service.sync_clock()
    deadline = time.monotonic() + LOOP_S
    while sweeper.ended < len(rooms) and time.monotonic() < deadline:
        await sweeper.sweep()
        await asyncio.sleep(0.05)
    assert sweeper.ended == len(rooms)
    for room in rooms:
        assert (await service.get(room)).status != "playing"
        assert await clients[0].zscore(keys.deadlines(keys.group_of(room)), room) is None


# -- the account keys: every script, transaction and multi-key command on one slot ----------


async def test_the_account_keys_and_analyses_run_on_a_cluster(
    clients: list[AsyncClient], redis_cluster: EmbeddedCluster
) -> None:
    client = clients[0]
    now = int(time.time() * 1000)
    # The account events' channel: SPUBLISH, heard by a sharded subscriber of its primary.
    with redis_cluster.node_for_key(keys.ACCOUNT_EVENTS).client() as node:
        subscription = node.pubsub()
        subscription.ssubscribe(keys.ACCOUNT_EVENTS)
        assert subscription.get_sharded_message(timeout=2.0)["type"] == "ssubscribe"
        events = AccountEvents(client)
        await events.publish([2, 1], {"type": "challenge"})
        message = subscription.get_sharded_message(timeout=2.0)
        assert message["type"] == "smessage" and '"to":[1,2]' in message["data"]
        # A newer stream of the same token (a transaction on one key) closes the older.
        assert await events.opened(7, "token", "s1", now) is None
        assert await events.opened(7, "token", "s2", now) == "s1"
        assert '"close": "s1"' in subscription.get_sharded_message(timeout=2.0)["data"]
        subscription.close()
    assert await events.online([7, 8], now) == {7}
    # A room's seat keys (a transaction beside the room's keys, on its group's slot).
    seats = SeatKeys(client)
    await seats.put("room1", {0: "a", 1: "b"})
    assert await seats.all("room1") == {0: "a", 1: "b"}
    # The bans' mirror (a transaction on one key).
    bans = BanMirror(client)
    await bans.replace({"account:1": "{}"}, now)
    assert await bans.lookup(["account:1", "account:2"]) == ["{}", None]
    # A challenge: its record and both accounts' lists.
    challenges = Challenges(client)
    record = {"id": "c1", "challenger": {"account_id": 1}, "dest": {"account_id": 2}}
    await challenges.create(record, now)
    assert [c["id"] for c in await challenges.incoming(2, now)] == ["c1"]
    assert (await challenges.accept("c1") or {}).get("status") == "accepted"
    assert await challenges.outgoing(1, now) == []
    # Analyses: the per-address cap is read from the state hashes the script is handed.
    store = AnalysisStore(client)
    started = [
        await store.start(
            game_id=f"g{i}",
            game="tictactoe",
            start="",
            moves=["5"],
            address="1.2.3.4",
            now_ms=now,
            max_active=16,
            max_per_address=2,
        )  # fmt: skip
        for i in range(3)
    ]
    assert started == ["started", "started", "limited"]
    await store.forget("g0")
    assert await store.meta("g0") == {}
