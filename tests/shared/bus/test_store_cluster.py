"""The room store and the scripts on a real Redis Cluster (the session's ``redis_cluster``:
3 primaries, each with a replica): rooms spread over slot groups on every primary commit
in one script each (no CROSSSLOT anywhere, and MONITOR shows no script touching a key it
was not handed), an AI job goes from its group's outbox to the one fair queue and the
jobs stream exactly once (relayed by its node, relayed again by the sweep), the sweep
relays a dead node's outbox entry and repairs a relay a failover lost, presence counts a
live node and not a dead one, the per-address and per-owner limits hold across nodes and
groups, the lobby merges the groups in order, the control-slot scripts (seeks, pools,
connections, the workers' fair queue steps) run there, and the server's room service
plays against the AI on it.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import pytest
import redis

from kibitz.server.domain.room import RoomError
from kibitz.server.loops.relay import OutboxSweeper
from kibitz.server.services.room_store import RoomStore as ServerRoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import fair_queue as fairness
from kibitz.shared.bus import keys
from kibitz.shared.bus import store as store_module
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.connect import AsyncClient, blocking_client, command_client
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from kibitz.shared.bus.limits import AddressCounters
from kibitz.shared.bus.lobby import LiveRooms, SeekBoard
from kibitz.shared.bus.pool import PoolBoard, PoolLimits
from kibitz.shared.bus.store import (
    NODE_TTL_MS,
    AiGames,
    AiGamesLimit,
    OutboxEntry,
    QueueFull,
    RoomStore,
    StaleVersion,
)
from kibitz.shared.protocol.client_in import Create, PlayMove
from tests.shared.bus.conftest import GROUPS, grouped_url
from tests.shared.bus.test_store import _job, _plan

pytestmark = [pytest.mark.asyncio, pytest.mark.redis_cluster]


@pytest.fixture
async def stores(clients: list[AsyncClient]) -> list[RoomStore]:
    """Two live nodes' stores (each has beaten once)."""
    made = [
        RoomStore(client, node=f"n{i}-{uuid.uuid4().hex[:4]}") for i, client in enumerate(clients)
    ]
    for store in made:
        await store.ensure_groups()
        await store.heartbeat()
    return made


def _rooms_in_every_group() -> list[str]:
    """One room id in each slot group."""
    found: dict[int, str] = {}
    while len(found) < GROUPS:
        room_id = "c" + uuid.uuid4().hex[:10]
        found.setdefault(keys.group_of(room_id), room_id)
    return [found[group] for group in sorted(found)]


def _room_in_group(group: int, other_than: AbstractSet[str] = frozenset()) -> str:
    while True:
        room_id = "c" + uuid.uuid4().hex[:10]
        if keys.group_of(room_id) == group and room_id not in other_than:
            return room_id


async def _jobs(client: AsyncClient) -> list[dict[str, Any]]:
    entries: Any = await client.xrange(keys.JOBS)
    return [json.loads(fields["job"]) for _id, fields in entries]


async def test_rooms_in_every_group_commit_on_every_primary(
    stores: list[RoomStore], clients: list[AsyncClient], redis_cluster: EmbeddedCluster
) -> None:
    rooms = _rooms_in_every_group()
    owners = {redis_cluster.node_for_key(keys.room_key(room)).address for room in rooms}
    assert len(owners) == 3  # the groups lie on every primary
    for i, room_id in enumerate(rooms):
        store = stores[i % 2]
        await store.commit_plan(_plan(room_id, -1, 0, status="waiting"))
        plan = _plan(room_id, 0, 1)
        plan = type(plan)(**{**_asdict(plan), "deadline_ms": 1_000 + i})
        presence = await store.commit_plan(plan)
        assert presence.spectators == 0
        with pytest.raises(StaleVersion):
            await store.commit_plan(_plan(room_id, 0, 1))
        assert await store.version(room_id) == 1
        assert (await store.events_since(room_id, 0))[0]["version"] == 1
    # Every group's lobby and deadlines, merged.
    assert set(await stores[0].live_room_ids(limit=100)) == set(rooms)
    assert await stores[1].due_rooms(10_000, limit=5) == rooms[:5]  # earliest first
    await stores[0].drop_deadline(rooms[0])
    assert (await stores[0].due_rooms(10_000, limit=1)) == rooms[1:2]
    # Presence scripts, archive, forget: all in the room's slot.
    room_id = rooms[3]
    await stores[0].attach(room_id, 0, 1)
    await stores[1].attach(room_id, None, 1)
    counts = await stores[0].presence_counts(room_id, (True, True))
    assert counts.connected == (True, False) and counts.spectators == 1
    assert await stores[1].publish_snapshot(room_id, 1, "hh", _plan(room_id, 0, 1).snapshot, 0)
    await stores[0].commit_plan(_plan(room_id, 1, 2, status="over"))
    group = keys.group_of(room_id)
    entries: Any = await clients[0].xrange(keys.archive(group))
    assert [fields["room"] for _id, fields in entries] == [room_id]
    chat = ChatLog(clients[1])
    assert await chat.append(room_id, "players", '{"text":"gg"}', 10, 60_000) is not None
    assert await clients[0].xlen(keys.archive(group)) == 2  # queued again for its chat
    await stores[0].archived(room_id, entries[0][0], 60_000)
    assert room_id not in await stores[0].live_room_ids(limit=100)
    assert await stores[1].forget(rooms[4], 1)
    assert await stores[1].version(rooms[4]) is None
    assert await stores[0].scan_room_records(0, 100) == (0, [])  # nothing to scan there


def _asdict(plan: Any) -> dict[str, Any]:
    return {name: getattr(plan, name) for name in plan.__dataclass_fields__}


async def test_the_snapshot_goes_out_sharded_on_the_room_slot(
    stores: list[RoomStore], redis_cluster: EmbeddedCluster
) -> None:
    room_id = _rooms_in_every_group()[5]
    channel = keys.room_channel(room_id)
    node = redis_cluster.node_for_key(channel)
    with node.client() as raw:
        pubsub = raw.pubsub()
        pubsub.ssubscribe(channel)
        assert pubsub.get_message(timeout=2.0)["type"] == "ssubscribe"
        await stores[0].commit_plan(_plan(room_id, -1, 0, status="waiting"))
        message = _next_message(pubsub)
        assert message["type"] == "smessage"
        assert json.loads(message["data"])["version"] == 0
        await stores[1].publish(room_id, {"type": "state", "room": room_id})
        assert _next_message(pubsub)["type"] == "smessage"
        pubsub.close()


def _next_message(pubsub: redis.client.PubSub) -> dict[str, Any]:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.5)
        if message is not None:
            return dict(message)
    raise AssertionError("no message")


async def test_an_ai_job_is_relayed_and_dispatched_exactly_once(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    room_id = _rooms_in_every_group()[7]
    group = keys.group_of(room_id)
    relayed: list[OutboxEntry] = []
    for store in stores:
        store.relay = _capturing(store.relay, relayed)  # type: ignore[method-assign]
    await stores[0].commit_plan(_plan(room_id, -1, 0, status="waiting"))
    await stores[0].commit_plan(_plan(room_id, 0, 1, job=_job(room_id, 1)))
    # The node relayed it at once: the job is on the stream. Its entry stays in the
    # outbox until the sweep relays it again (nothing new) and deletes it.
    assert [entry.job_id for entry in relayed] == [f"{room_id}:1"]
    assert [job["job_id"] for job in await _jobs(clients[0])] == [f"{room_id}:1"]
    assert await clients[0].xlen(keys.ai_outbox(group)) == 1
    assert await OutboxSweeper(stores[1], older_than_ms=0).sweep() == 0
    assert await clients[0].xlen(keys.ai_outbox(group)) == 0
    # Relayed again (a sweep that raced another): once.
    assert await stores[1].relay(relayed) == 0
    assert len(await _jobs(clients[0])) == 1
    assert await clients[0].hlen(keys.AI_WAITING) == 0
    # Dispatch reads no room on the cluster: a second job waits behind the window, and
    # relayed twice at once it waits once.
    await stores[1].commit_plan(_plan(room_id, 1, 2, job=_job(room_id, 2)))
    second = relayed[-1]
    assert second.job_id == f"{room_id}:2"
    assert await stores[0].relay([second, second]) == 0
    assert len(await _jobs(clients[0])) == 1 and await clients[0].hlen(keys.AI_WAITING) == 1
    await clients[0].zadd(keys.AI_WORKERS_LIVE, {"w1": int(time.time() * 1000)})
    await clients[0].zadd(keys.AI_WORKERS_LIVE, {"w2": int(time.time() * 1000)})
    assert await stores[0].dispatch() == (1, 0)
    assert [job["version"] for job in await _jobs(clients[0])] == [1, 2]
    # A job id that comes back in a new entry (a failover lost the commit that made it,
    # and the room was played again) is queued again.
    job = _job(room_id, 2)
    again = OutboxEntry(group, "1-1", job.job_id, job.to_fields()["job"], "10.9.9.9", 100)
    assert await stores[0].relay([again]) == 1


async def test_the_sweep_repairs_a_relay_a_failover_lost(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    """The control slot's primary acknowledged the relay and died before its replica had
    it: the fair queue and the relay's memory are as before the relay. The entry is still
    in the outbox, so the sweep queues its job."""
    room_id = _rooms_in_every_group()[10]
    await stores[0].commit_plan(_plan(room_id, -1, 0, status="waiting"))
    await stores[0].commit_plan(_plan(room_id, 0, 1, job=_job(room_id, 1)))
    assert len(await _jobs(clients[0])) == 1
    await clients[0].delete(keys.JOBS, fairness.relayed_key(), keys.AI_CLOCK)  # lost
    assert await OutboxSweeper(stores[1], older_than_ms=0).sweep() == 1
    assert [job["job_id"] for job in await _jobs(clients[0])] == [f"{room_id}:1"]
    assert await clients[0].xlen(keys.ai_outbox(keys.group_of(room_id))) == 0


def _capturing(relay: Any, into: list[OutboxEntry]) -> Any:
    async def capture(entries: Any, **options: Any) -> int:
        into.extend(entries)
        return int(await relay(entries, **options))

    return capture


async def test_the_sweep_relays_what_a_dead_node_left(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    room_id = _rooms_in_every_group()[2]
    group = keys.group_of(room_id)

    async def dies(entries: Any, **options: Any) -> int:
        raise ConnectionError("the node died before its relay")

    dead = stores[0]
    dead.relay = dies  # type: ignore[method-assign]
    await dead.commit_plan(_plan(room_id, -1, 0, status="waiting"))
    await dead.commit_plan(_plan(room_id, 0, 1, job=_job(room_id, 1)))
    assert await clients[0].xlen(keys.ai_outbox(group)) == 1
    assert await _jobs(clients[0]) == []
    sweeper = OutboxSweeper(stores[1], older_than_ms=2_000)
    assert await sweeper.sweep() == 0  # too young: its node may relay it yet
    sweeper.older_than_ms = 0
    assert await sweeper.sweep() == 1
    assert [job["job_id"] for job in await _jobs(clients[0])] == [f"{room_id}:1"]
    assert await clients[0].xlen(keys.ai_outbox(group)) == 0
    assert await sweeper.sweep() == 0


async def test_presence_counts_a_live_node_and_not_a_dead_one(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    room_id = _rooms_in_every_group()[9]
    group = keys.group_of(room_id)
    await stores[0].commit_plan(_plan(room_id, -1, 0, status="waiting"))
    await stores[0].attach(room_id, 0, 1)
    await stores[1].attach(room_id, 1, 1)
    counts = await stores[0].presence_counts(room_id, (True, True))
    assert counts.connected == (True, True)
    # Node 1 stops beating: its last beat falls past the TTL in the group's copy.
    now: Any = await clients[0].time()
    stale = int(now[0]) * 1000 - NODE_TTL_MS - 1_000
    await clients[0].zadd(keys.group_node_beats(group), {stores[1].node: stale})
    counts = await stores[0].presence_counts(room_id, (True, True))
    assert counts.connected == (True, False)
    assert counts.gone_ms[1] is not None  # recorded gone from now
    # Its next beat brings it back, in every group.
    await stores[1].heartbeat()
    counts = await stores[0].presence_counts(room_id, (True, True))
    assert counts.connected == (True, True)
    beats: Any = await clients[0].zscore(keys.group_node_beats(GROUPS - 1), stores[1].node)
    assert beats is not None
    # Node 1 leaves cleanly: gone from every copy of the beats, never to be announced.
    await stores[1].leave()
    for beats_key in (keys.NODE_BEATS, *map(keys.group_node_beats, range(GROUPS))):
        assert await clients[0].zscore(beats_key, stores[1].node) is None
    assert await clients[0].exists(keys.node_key(stores[1].node)) == 0
    assert await stores[0].heartbeat() == 0


async def test_the_address_limit_holds_across_nodes(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    a = AddressCounters(clients[0], stores[0].node)
    b = AddressCounters(clients[1], stores[1].node)
    assert (await a.connect("10.0.0.1", 3)).admitted
    assert (await b.connect("10.0.0.1", 3)).admitted
    assert (await a.connect("10.0.0.1", 3)).total == 3
    refused = await b.connect("10.0.0.1", 3)
    assert not refused.admitted and refused.total == 4
    # Node a dies (its beat is old): its connections stop counting.
    now: Any = await clients[0].time()
    stale = int(now[0]) * 1000 - NODE_TTL_MS - 1_000
    await clients[0].zadd(keys.NODE_BEATS, {stores[0].node: stale})
    assert (await b.connect("10.0.0.1", 3)).total == 2
    created = await a.count_create("10.0.0.1", 1, 60_000)
    assert created.admitted and not (await b.count_create("10.0.0.1", 1, 60_000)).admitted
    assert await b.refund_create(created.handle)


async def test_the_ai_games_cap_counts_every_group(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    owner = "10.7.7.7"
    made: set[str] = set()
    for group in range(3):  # three groups, on different primaries or not
        room_id = _room_in_group(group, made)
        made.add(room_id)
        await stores[group % 2].commit_plan(
            _plan(room_id, -1, 0, status="waiting", ai_games=AiGames(owner, "create", limit=3))
        )
    room_id = _room_in_group(3, made)
    with pytest.raises(AiGamesLimit) as refused:
        await stores[0].commit_plan(
            _plan(room_id, -1, 0, status="waiting", ai_games=AiGames(owner, "create", limit=3))
        )
    assert refused.value.games == 3 and set(refused.value.rooms) == made
    assert await stores[0].version(room_id) is None
    # Two creates at once in two more groups, with room for one: one passes.
    await stores[0].commit_plan(
        _plan(sorted(made)[0], 0, 1, status="over", ai_games=AiGames(owner, "end"))
    )
    racing = [_room_in_group(4, made), _room_in_group(5, made)]
    outcomes = await asyncio.gather(
        *(
            store.commit_plan(
                _plan(r, -1, 0, status="waiting", ai_games=AiGames(owner, "create", limit=3))
            )
            for store, r in zip(stores, racing, strict=True)
        ),
        return_exceptions=True,
    )
    assert sum(isinstance(o, AiGamesLimit) for o in outcomes) == 1


async def test_the_lobby_merges_the_groups_newest_first(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    rooms = _rooms_in_every_group()
    now = int(time.time() * 1000)
    for i, room_id in enumerate(rooms):
        await clients[0].zadd(keys.live(keys.group_of(room_id)), {room_id: now - 1000 * i})
    lobby = LiveRooms(clients[1])
    page = await lobby.newest(None, now - 60_000, 0, 5)
    assert [entry.room_id for entry in page] == rooms[:5]
    page = await lobby.newest(None, now - 60_000, 5, 4)
    assert [entry.room_id for entry in page] == rooms[5:9]
    assert [e.room_id for e in await lobby.newest(now - 2500, now - 60_000, 0, 2)] == rooms[3:5]
    assert await stores[0].live_room_ids(limit=3) == rooms[:3]
    idle = await stores[0].live_rooms_idle_since(now - 5500, 0, 100)
    assert set(idle) == set(rooms[6:])
    first, second = (
        await stores[0].live_rooms_idle_since(now - 5500, 0, 3),
        await stores[0].live_rooms_idle_since(now - 5500, 3, 100),
    )
    assert sorted(first + second) == sorted(idle)
    group = keys.group_of(rooms[-1])
    assert await stores[0].live_rooms_idle_since(now, 0, 100, group=group) == [rooms[-1]]


async def test_seeks_and_pools_run_on_the_control_slot(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    seeks = [SeekBoard(client) for client in clients]
    seek = {"node": stores[0].node, "conn": "c1", "address": "10.1.1.1", "player": "p1"}
    assert (await seeks[0].add("s1", json.dumps(seek), "10.1.1.1", 2)).admitted
    assert (await seeks[1].take("s1", "c1", None)).status == "own"
    assert (await seeks[1].take("s1", "c2", "p2")).status == "taken"
    assert (await seeks[0].add("s2", json.dumps(seek), "10.1.1.1", 2)).admitted
    assert await seeks[0].remove("c1", ["s2"]) == 1
    await seeks[1].announce({"kind": "accepted"})
    pools = [PoolBoard(client) for client in clients]
    limits = PoolLimits(per_address=2, per_pool=10, total=10)
    for i, pool in enumerate(pools):
        entry = {
            "id": f"e{i}", "pool": "blitz", "node": stores[i].node, "conn": f"c{i}",
            "address": f"10.2.2.{i}", "player": f"p{i}",
        }  # fmt: skip
        assert (await pool.join(entry, limits)).status == "joined"
    assert len(await pools[0].live()) == 2
    taken = await pools[1].take("e0", "e1")
    assert taken is not None and await pools[0].live() == []
    assert await pools[0].restore(list(taken)) == 2
    assert await pools[1].leave("c0", ["e0"]) == 1
    await pools[0].announce({"kind": "accepted"})
    # The fair queue's yield marker is a declared key there too.
    assert fairness.yielded_key().startswith("kibitz:{c}:")


class _Monitor:
    """MONITOR of one primary, read by a thread until :meth:`stop`: its lines."""

    def __init__(self, node: Any) -> None:
        self.client = node.client()
        self.lines: list[str] = []
        self._monitor = self.client.monitor().__enter__()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        connection = self._monitor.connection
        while not self._stop.is_set():
            try:
                if connection.can_read(timeout=0.1):
                    self.lines.append(str(connection.read_response()))
            except (redis.ConnectionError, OSError, ValueError):
                return

    def stop(self) -> list[str]:
        time.sleep(0.3)  # the last lines in
        self._stop.set()
        self._thread.join(2.0)
        self.client.close()
        return self.lines


def _words(line: str) -> list[str]:
    return [w.encode().decode("unicode_escape") for w in re.findall(r'"((?:[^"\\]|\\.)*)"', line)]


async def test_every_script_touches_only_keys_it_is_handed(
    stores: list[RoomStore], clients: list[AsyncClient], redis_cluster: EmbeddedCluster
) -> None:
    """MONITOR on every primary while the whole store works: each command a script runs
    names only keys of its EVALSHA (a Redis Cluster would let a script read an undeclared
    key of its own slot: this is the check that none does)."""
    monitors = [_Monitor(node) for node in redis_cluster.primaries()]
    try:
        for case in (
            lambda: test_rooms_in_every_group_commit_on_every_primary(
                stores, clients, redis_cluster
            ),
            lambda: test_an_ai_job_is_relayed_and_dispatched_exactly_once(stores, clients),
            lambda: test_presence_counts_a_live_node_and_not_a_dead_one(stores, clients),
            lambda: test_the_address_limit_holds_across_nodes(stores, clients),
            lambda: test_the_ai_games_cap_counts_every_group(stores, clients),
            lambda: test_seeks_and_pools_run_on_the_control_slot(stores, clients),
            lambda: OutboxSweeper(stores[0], older_than_ms=0).sweep(),
        ):
            await case()
            for store in stores:  # alive again (a case may have made one look dead)
                await store.heartbeat()
    finally:
        seen = [monitor.stop() for monitor in monitors]
    getkeys = redis_cluster.primaries()[0].client()
    scripts = checked = 0
    for lines in seen:
        handed: set[str] | None = None
        for line in lines:
            words = _words(line)
            if not words:
                continue
            if " lua] " not in line:
                name = words[0].upper()
                if name in {"EVALSHA", "EVAL"}:
                    scripts += 1
                    handed = set(words[3 : 3 + int(words[2])])
                else:
                    handed = None
                continue
            assert handed is not None, line
            name = words[0].upper()
            if name in {"TIME", "PUBLISH"}:
                continue
            if name == "SPUBLISH":
                assert words[1] in handed or keys.room_id_of(words[1]) or "{c}" in words[1]
                continue
            touched = set(getkeys.command_getkeys(*words))
            assert touched <= handed, (line, handed)
            checked += 1
    getkeys.close()
    assert scripts > 50 and checked > 200


async def test_the_workers_fair_queue_steps_run_on_the_control_slot(
    stores: list[RoomStore], clients: list[AsyncClient], redis_cluster: EmbeddedCluster
) -> None:
    """The sync client of the workers: beat, dispatch (no room read: the job goes out) and
    should_yield (its marker a declared sorted set, one yield per newcomer)."""
    worker = blocking_client(grouped_url(redis_cluster))
    try:
        fair = fairness.FairQueue(worker)
        assert fair.beat("w1") == 1
        owner_room, other_room = _room_in_group(1), _room_in_group(2)
        for room_id in (owner_room, other_room):
            await stores[0].commit_plan(_plan(room_id, -1, 0, status="waiting"))
        # The flooder's two jobs, then a newcomer's: one worker, so one job runs.
        await stores[0].commit_plan(_plan(owner_room, 0, 1, job=_job(owner_room, 1, "f")))
        flood = _job(owner_room, 2, "f")
        await stores[0].relay(
            [OutboxEntry(0, "0-1", flood.job_id, flood.to_fields()["job"], "f", 100)]
        )
        await stores[1].commit_plan(_plan(other_room, 0, 1, job=_job(other_room, 1, "n")))
        assert fair.dispatch() == (0, 0)  # the window (one worker) is full
        assert fair.should_yield("f") is True
        assert fair.should_yield("f") is False  # the newcomer was claimed
        assert await clients[0].zcard(fairness.yielded_key()) == 1
        await clients[0].delete(keys.JOBS)
        assert fair.dispatch() == (1, 0)
        # (the two waiting jobs tie: the queue ran empty before the flooder's second)
        assert len(await _jobs(clients[0])) == 1
        assert fair.waiting() == 1
        fair.leave("w1")
    finally:
        worker.close()


async def test_a_full_outbox_refuses_the_commit(
    stores: list[RoomStore], clients: list[AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outbox at its bound (nobody relays: Redis away from the control slot) refuses a
    commit with a job, writing nothing, rather than trimming a job away."""
    monkeypatch.setattr(store_module, "OUTBOX_KEPT", 1)

    async def away(entries: Any, **options: Any) -> int:
        raise ConnectionError("the control slot is away")

    stores[0].relay = away  # type: ignore[method-assign]
    room_id = _room_in_group(4)
    await stores[0].commit_plan(_plan(room_id, -1, 0, status="waiting"))
    await stores[0].commit_plan(_plan(room_id, 0, 1, job=_job(room_id, 1)))
    with pytest.raises(QueueFull):
        await stores[0].commit_plan(_plan(room_id, 1, 2, job=_job(room_id, 2)))
    assert await stores[0].version(room_id) == 1
    assert await clients[0].xlen(keys.ai_outbox(4)) == 1
    # And a fair queue seen full by the last relay refuses before the commit is sent.
    stores[1].ai_waiting = fairness.MAX_WAITING
    with pytest.raises(QueueFull):
        await stores[1].commit_plan(_plan(room_id, 1, 2, job=_job(room_id, 2)))


async def test_games_against_the_ai_through_the_room_service(
    stores: list[RoomStore], clients: list[AsyncClient]
) -> None:
    """The server's room service on the cluster: AI rooms of one owner spread over the
    groups, each move's job on the stream once, the owner's cap over every group."""
    service = RoomService(ServerRoomStore(clients[0], node=stores[0].node))
    made = []
    for _ in range(3):
        room, _seat = await service.create(
            Create(game="tictactoe", opponent="ai:1", seat=0), "x", owner="10.5.5.5"
        )
        made.append(room.id)
        await service.move(PlayMove(room.id, "x", "1"))
    # One job a move, dispatched (one: no worker beats, a window of one) or waiting.
    waiting: Any = await clients[0].hvals(keys.AI_WAITING)
    queued = await _jobs(clients[0]) + [json.loads(job) for job in waiting]
    assert sorted(job["room"] for job in queued) == sorted(made)
    with pytest.raises(RoomError) as refused:
        for _ in range(12):  # the default cap (8) across the groups
            await service.create(
                Create(game="tictactoe", opponent="ai:1", seat=0), "x", owner="10.5.5.5"
            )
    assert refused.value.code == "rate/ai_games"


# --- one primary down (a cluster of the test's own: 3 primaries, no replica) -----------
@pytest.fixture
def lone_primaries(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    """A cluster of 3 primaries without replicas: a primary frozen or killed stays down
    (no failover), its slot groups unreachable."""
    cluster = EmbeddedCluster(tmp_path, primaries=3, replicas_per_primary=0).start()
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("fault", ["frozen", "killed"])
async def test_one_primary_down_stops_no_other_group(
    lone_primaries: EmbeddedCluster, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The readers merged over every group (the deadline sweep, the lobby, the outbox
    # sweep) and the heartbeat's per-group beats skip the groups of a primary that is
    # down, not every group. A short timeout: a frozen primary answers nothing.
    client = command_client(grouped_url(lone_primaries), timeout_s=0.3)
    store = RoomStore(client, node="n-" + uuid.uuid4().hex[:4])
    try:
        rooms = _rooms_in_every_group()
        now = int(time.time() * 1000)
        for i, room_id in enumerate(rooms):
            group = keys.group_of(room_id)
            await client.zadd(keys.deadlines(group), {room_id: now - 1000 + i})
            await client.zadd(keys.live(group), {room_id: now - i})
        control = lone_primaries.node_for_key(keys.NODE_BEATS).address
        victim = next(n for n in lone_primaries.primaries() if n.address != control)

        def up(room_id: str) -> bool:
            return lone_primaries.node_for_key(keys.room_key(room_id)).address != victim.address

        reachable = [room for room in rooms if up(room)]
        assert 0 < len(reachable) < len(rooms)
        (lone_primaries.freeze if fault == "frozen" else lone_primaries.kill)(victim)
        try:
            caplog.clear()
            assert await store.due_rooms(now, 50) == reachable  # earliest first
            failed = [r for r in caplog.records if "deadline sweep" in r.getMessage()]
            assert len(failed) == 1 and failed[0].levelname == "WARNING"
            assert (
                f"{len(rooms) - len(reachable)} of {GROUPS} slot groups" in failed[0].getMessage()
            )
            page = await LiveRooms(client).newest(None, now - 60_000, 0, 100)
            assert [entry.room_id for entry in page] == reachable  # newest first
            assert await store.live_room_ids() == reachable
            assert await store.relay_stale() == 0
            await store.heartbeat()
            for room_id in rooms:
                beats = keys.group_node_beats(keys.group_of(room_id))
                if up(room_id):
                    assert await client.zscore(beats, store.node) is not None
        finally:
            if fault == "frozen":
                lone_primaries.thaw(victim)
        if fault == "frozen":  # thawed: every group again
            assert sorted(await store.due_rooms(now, 50)) == sorted(rooms)
    finally:
        await client.aclose()
