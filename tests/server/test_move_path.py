"""The move path: one Redis round trip per move on a room the node has, a cached copy that
is never trusted past the commit's version check, and presence read by the commit script
and spliced into the published snapshot.

Two RoomService instances on one real Redis play the part of two nodes.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from kibitz.server.domain.room import RoomError
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.keys import NODES, presence_key
from kibitz.shared.bus.keys import room_channel as channel
from kibitz.shared.bus.store import snapshot_parts
from kibitz.shared.protocol.client_in import Create, Join, PlayMove


@pytest.fixture
def redis_url(tmp_path) -> Iterator[str]:
    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    yield server.url
    server.stop()


@pytest.fixture
async def nodes(redis_url: str) -> AsyncIterator[tuple[RoomService, RoomService]]:
    clients = [aioredis.from_url(redis_url, decode_responses=True) for _ in range(2)]
    services = []
    for i, client in enumerate(clients):
        store = RoomStore(client, node=f"n{i}")
        await store.ensure_groups()
        await store.heartbeat()
        services.append(RoomService(store))
    yield services[0], services[1]
    for client in clients:
        await client.aclose()


async def _game(a: RoomService) -> str:
    """A tic-tac-toe game between "x" (seat 0) and "o" (seat 1), made on node ``a``."""
    room, _seat = await a.create(Create(game="tictactoe", seat=0), "x")
    await a.join(Join(room=room.id), "o")
    return room.id


class Monitor:
    """Counts the commands clients send Redis (not those run inside scripts), by name."""

    def __init__(self, url: str) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._client = redis.Redis.from_url(url)
        self._monitor = self._client.monitor().__enter__()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for command in self._monitor.listen():
                if command.get("client_type") != "lua":
                    self.counts[command["command"].split()[0].upper()] += 1
        except (redis.ConnectionError, ValueError, OSError):
            return

    def close(self) -> None:
        self._monitor.__exit__()
        self._client.close()


async def _counted(url: str, action: Any) -> collections.Counter[str]:
    """The commands ``action()`` sends, with a marker PING before and after so the count
    is exactly the action's."""
    marker = aioredis.from_url(url)
    monitor = Monitor(url)
    try:
        await asyncio.sleep(0.2)
        await marker.ping()
        await asyncio.sleep(0.2)
        monitor.counts.clear()
        await action()
        await asyncio.sleep(0.3)
        return collections.Counter(monitor.counts)
    finally:
        monitor.close()
        await marker.aclose()


async def test_a_move_on_a_room_the_node_has_is_one_round_trip(nodes, redis_url) -> None:
    a, _b = nodes
    room_id = await _game(a)
    counts = await _counted(redis_url, lambda: a.move(PlayMove(room_id, "x", "5")))
    assert counts == {"EVALSHA": 1}, counts  # the commit, nothing else
    assert (await a.get(room_id)).version == 2


async def test_a_stale_copy_is_read_again_and_never_refuses_a_good_move(nodes) -> None:
    a, b = nodes
    room_id = await _game(a)
    # Node b plays x's move: node a's copy is now one version behind.
    await b.move(PlayMove(room_id, "x", "5"))
    assert a.cached(room_id) is not None and a.cached(room_id).version == 1
    # On a's old copy it is x's turn, not o's: the refusal is checked against Redis.
    moved = await a.move(PlayMove(room_id, "o", "1"))
    assert moved.version == 3 and [m.move for m in moved.moves] == ["5", "1"]


async def test_a_move_decided_on_a_stale_copy_is_decided_again(nodes) -> None:
    a, b = nodes
    room_id = await _game(a)
    await b.move(PlayMove(room_id, "x", "5"))
    # x moves again through node a, whose copy still says it is x's turn: the commit finds
    # the copy old, the move is decided again on the room as Redis has it, and refused.
    with pytest.raises(RoomError) as refused:
        await a.move(PlayMove(room_id, "x", "9"))
    assert refused.value.code == "move/not_your_turn"
    room = await b.get(room_id)
    assert room.version == 2 and [m.move for m in room.moves] == ["5"]


async def test_a_room_gone_from_redis_is_not_played_from_the_cache(nodes) -> None:
    a, _b = nodes
    room_id = await _game(a)
    assert await a.store.forget(room_id, (await a.get(room_id)).version)
    with pytest.raises(RoomError) as refused:
        await a.move(PlayMove(room_id, "x", "5"))
    assert refused.value.code == "room/unknown"


async def test_the_commit_splices_presence_into_what_it_publishes(nodes, redis_url) -> None:
    a, b = nodes
    room_id = await _game(a)
    # Seat 0's player is connected on node a, a spectator watches on node b; seat 1's
    # player left long ago (its recorded time stands).
    await a.store.attach(room_id, 0, +1)
    await b.store.attach(room_id, None, +1)
    await a.store.redis.hset(presence_key(room_id), "gone:1", "1234")
    listener = aioredis.from_url(redis_url, decode_responses=True)
    pubsub = listener.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(channel(room_id))
    try:
        await a.move(PlayMove(room_id, "x", "5"))
        message = None
        for _ in range(50):
            message = await pubsub.get_message(timeout=0.1)
            if message is not None:
                break
        assert message is not None
        published = json.loads(message["data"])
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await listener.aclose()
    answer = a.committed_state(room_id, 2)
    assert answer is not None and published == answer  # the node's copy is what went out
    assert [(s["connected"], s["gone_ms"]) for s in published["seats"]] == [
        (True, None),
        (False, 1234),
    ]
    assert published["spectators"] == 1 and published["event"]["kind"] == "move"


async def test_a_seat_found_gone_without_a_time_gets_one(nodes) -> None:
    """A player whose node died has connections counted on a node with no heartbeat: the
    commit shows the seat gone, from now, and records that time."""
    a, _b = nodes
    room_id = await _game(a)
    await a.store.redis.hset(presence_key(room_id), "1:dead-node", 1)
    await a.move(PlayMove(room_id, "x", "5"))
    seats = a.committed_state(room_id, 2)["seats"]  # type: ignore[index]
    recorded = await a.store.redis.hget(presence_key(room_id), "gone:1")
    assert seats[1]["connected"] is False and seats[1]["gone_ms"] == int(recorded)
    assert not await a.store.redis.exists(NODES + "dead-node")


def test_snapshot_parts_join_back_to_the_snapshot() -> None:
    snap: dict[str, Any] = {
        "type": "state",
        "version": 4,
        "seats": [
            {"seat": 0, "name": 'a "quoted" é', "connected": True, "gone_ms": None},
            {"seat": 1, "name": None, "connected": False, "gone_ms": 17},
        ],
        "moves": [{"move": "1", "display": "1", "seat": 0}],
        "spectators": 3,
    }
    head, s0, s1 = snapshot_parts(snap)
    joined = (
        head + b',"seats":[' + s0 + b',"connected":true,"gone_ms":null},'
        + s1 + b',"connected":false,"gone_ms":17}],"spectators":3}'
    )  # fmt: skip
    assert json.loads(joined) == snap


async def _published(url: str, room_id: str, action: Any) -> list[dict[str, Any]]:
    """What is published on the room's channel while ``action()`` runs."""
    listener = aioredis.from_url(url, decode_responses=True)
    pubsub = listener.pubsub(ignore_subscribe_messages=True)
    await pubsub.subscribe(channel(room_id))
    try:
        await action()
        messages = []
        deadline = asyncio.get_running_loop().time() + 0.5
        while asyncio.get_running_loop().time() < deadline:
            message = await pubsub.get_message(timeout=0.1)
            if message is not None:
                messages.append(json.loads(message["data"]))
        return messages
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await listener.aclose()


async def test_a_player_leaving_is_counted_out_and_told_in_one_round_trip(nodes, redis_url) -> None:
    a, _b = nodes
    room_id = await _game(a)
    await a.store.attach(room_id, 0, +2)  # two connections of seat 0's player
    await a.store.attach(room_id, 1, +1)
    # One of seat 0's goes: the followers are told, at the room's version; it is still there.
    told = await _published(redis_url, room_id, lambda: a.leave(room_id, 0))
    assert len(told) == 1 and told[0]["event"] == {"kind": "presence"}
    assert told[0]["version"] == 1
    assert [s["connected"] for s in told[0]["seats"]] == [True, True]
    # Seat 1's only one goes: counted out, and gone since now, in one round trip.
    counts = await _counted(redis_url, lambda: a.leave(room_id, 1))
    assert counts == {"EVALSHA": 1}, counts
    presence = await a.store.redis.hgetall(presence_key(room_id))
    assert "1:n0" not in presence and int(presence["gone:1"]) > 0 and presence["0:n0"] == "1"


async def test_a_leave_on_an_old_copy_is_counted_out_and_told_as_the_room_is(
    nodes, redis_url
) -> None:
    a, b = nodes
    room_id = await _game(a)
    await a.store.attach(room_id, 1, +1)
    await b.move(PlayMove(room_id, "x", "5"))  # node a's copy is one version behind
    told = await _published(redis_url, room_id, lambda: a.leave(room_id, 1))
    assert [m["version"] for m in told] == [2]  # not the old version: the room as it is
    assert told[0]["seats"][1]["connected"] is False and told[0]["seats"][1]["gone_ms"] > 0
    assert "1:n0" not in await a.store.redis.hgetall(presence_key(room_id))
