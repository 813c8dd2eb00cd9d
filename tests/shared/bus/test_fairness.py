"""The fair AI queue and the per-owner AI game limit, against a real Redis.

Workers are played by hand here where the order of admission is the point: the test
reads the stream as the ``workers`` group does, finishes a job the way a worker does
(XACK + XDEL) and runs the same dispatch script a worker runs after each job.
"""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.server.domain.room import Room, RoomError, create_room
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import fair_queue as fairness
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.keys import WORKERS_GROUP
from kibitz.shared.protocol.client_in import Create, Resign
from kibitz.shared.protocol.jobs import Job
from tests.conftest import start_server

# -- the policy, pure ---------------------------------------------------------------------


def _drain(model: fairness.FairModel) -> list[str]:
    order = []
    while (job := model.dispatch()) is not None:
        order.append(job)
    return order


def test_a_newcomer_goes_ahead_of_a_flooders_backlog() -> None:
    model = fairness.FairModel()
    for i in range(40):
        model.enqueue("flooder", f"f{i:02}", 2500)
    assert model.dispatch() == "f00"  # a worker was free
    model.enqueue("newcomer", "n", 500)
    assert _drain(model) == ["n", *(f"f{i:02}" for i in range(1, 40))]


def test_owners_share_in_proportion_to_cost() -> None:
    # Cheap jobs go out more often: each owner gets about the same amount of work done.
    model = fairness.FairModel()
    for i in range(3):
        model.enqueue("a", f"a{i}", 1000)
    for i in range(4):
        model.enqueue("b", f"b{i}", 500)
    assert _drain(model) == ["b0", "a0", "b1", "b2", "a1", "b3", "a2"]


def test_with_many_flooders_a_newcomer_still_goes_next() -> None:
    model = fairness.FairModel()
    owners = [f"o{k}" for k in range(5)]
    for i in range(8):
        for owner in owners:
            model.enqueue(owner, f"{owner}-{i}", 2500)
    for arrival in range(25):
        probe = fairness.FairModel()
        probe.clock, probe.owners, probe.ready = model.clock, dict(model.owners), dict(model.ready)
        probe.enqueue("newcomer", "n", 500)
        assert probe.dispatch() == "n", arrival
        model.dispatch()


def test_flooders_take_turns() -> None:
    model = fairness.FairModel()
    for i in range(3):
        for owner in ("a", "b"):
            model.enqueue(owner, f"{owner}{i}", 2500)
    assert _drain(model) == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_when_the_queue_runs_empty_everybody_is_even() -> None:
    model = fairness.FairModel()
    for i in range(3):
        model.enqueue("a", f"a{i}", 3000)
    assert _drain(model) == ["a0", "a1", "a2"]
    assert model.enqueue("a", "a3", 1000) == model.enqueue("b", "b0", 1000)


def test_no_owner_runs_further_ahead_than_the_lead_cap() -> None:
    model = fairness.FairModel()
    starts = [model.enqueue("a", f"a{i:04}", fairness.MAX_COST_MS) for i in range(1000)]
    assert max(starts) == fairness.MAX_LEAD_MS
    model.enqueue("b", "b", 1)
    assert model.dispatch() == "b"
    assert fairness.job_cost_ms(None) == fairness.DEFAULT_COST_MS
    assert fairness.job_cost_ms(60_000) == fairness.MAX_COST_MS


def test_old_records_and_jobs_without_an_owner_still_load() -> None:
    room, _event, _seat = create_room("abcdef", "tictactoe", {}, "ai:1", 0, None, "t", 1)
    data = room.to_json_dict()
    del data["owner"]
    assert Room.from_json_dict(data).owner is None
    fields = {
        "job": json.dumps(
            {"job_id": "r:0", "room": "r", "version": 0, "game": "tictactoe", "position": "",
             "moves": [], "level": 1, "budget": {"depth": 1, "time_ms": None, "nodes": None},
             "seed": 0}
        )
    }  # fmt: skip
    assert Job.from_fields(fields).owner == ""


# -- the Lua, on a real Redis -------------------------------------------------------------


@pytest.fixture
async def service(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    client = aioredis.from_url(server.url, decode_responses=True)
    store = RoomStore(client)
    await store.ensure_groups()
    yield RoomService(store, ai_games_per_owner=8)
    await client.aclose()
    server.stop()


async def _ai_room(service: RoomService, owner: str, game: str, level: int) -> str:
    room, _seat = await service.create(
        Create(game=game, opponent=f"ai:{level}", seat=1), "tok-" + owner, owner=owner
    )
    return room.id


async def _take_and_finish(r: aioredis.Redis, service: RoomService) -> str | None:
    """Act as a worker for one job: read it, finish it, admit the next ones."""
    batches = await r.xreadgroup(WORKERS_GROUP, "hand", {keys.JOBS: ">"}, count=1)
    if not batches:
        return None
    entry_id, fields = batches[0][1][0]
    await r.xack(keys.JOBS, WORKERS_GROUP, entry_id)
    await r.xdel(keys.JOBS, entry_id)
    await service.store.dispatch()
    return str(Job.from_fields(fields).room)


async def test_the_stream_is_fed_in_fair_order(service: RoomService) -> None:
    r = service.store.redis
    flood = [await _ai_room(service, "10.0.0.1", "chess", 8) for _ in range(5)]
    newcomer = await _ai_room(service, "10.0.0.2", "tictactoe", 1)
    # No worker is live: the window is one job, so one job sits in the stream and the
    # others wait in the fair queue.
    assert await r.xlen(keys.JOBS) == 1
    assert await r.hlen(keys.AI_WAITING) == 5 == await r.zcard(keys.AI_READY)
    started = [await _take_and_finish(r, service) for _ in range(6)]
    assert started == [flood[0], newcomer, *flood[1:]]
    # The same order as the policy's Python model.
    model = fairness.FairModel()
    for room in flood:
        model.enqueue("10.0.0.1", room, fairness.job_cost_ms(2500))
        if room == flood[0]:
            model.dispatch()
    model.enqueue("10.0.0.2", newcomer, fairness.job_cost_ms(500))
    assert [flood[0], *_drain(model)] == started
    assert await _take_and_finish(r, service) is None
    # Everything cleaned: queue empty; only owners still "ahead of the clock" remain.
    assert await r.hlen(keys.AI_WAITING) == 0 == await r.zcard(keys.AI_READY)
    assert await r.zcard(keys.AI_OWNERS) <= 2


async def test_the_window_is_the_number_of_live_workers(service: RoomService) -> None:
    r = service.store.redis
    fair = fairness.AsyncFairQueue(r)
    for name in ("w1", "w2", "w3"):
        await r.zadd(keys.AI_WORKERS_LIVE, {name: 0})  # beats from long ago: not live
    await r.zadd(keys.AI_WORKERS_LIVE, {"w4": (await _redis_ms(r)), "w5": await _redis_ms(r)})
    for _ in range(4):
        await _ai_room(service, "10.0.0.1", "chess", 8)
    assert await r.xlen(keys.JOBS) == 2  # two live workers, two jobs admitted
    assert await fair.waiting() == 2
    assert await r.zcard(keys.AI_WORKERS_LIVE) == 2  # the dead ones were pruned


async def _redis_ms(r: aioredis.Redis) -> int:
    seconds, micros = await r.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def test_a_job_whose_room_moved_on_is_dropped_not_dispatched(service: RoomService) -> None:
    r = service.store.redis
    first = await _ai_room(service, "10.0.0.1", "chess", 8)
    second = await _ai_room(service, "10.0.0.1", "chess", 8)
    assert await r.hexists(keys.AI_WAITING, f"{second}:0")
    await service.resign(Resign(room=second, token="tok-10.0.0.1"))  # while queued
    assert await _take_and_finish(r, service) == first
    assert await r.xlen(keys.JOBS) == 0  # the second job was dropped, never sent
    assert await r.hlen(keys.AI_WAITING) == 0 == await r.zcard(keys.AI_READY)
    assert (await service.get(second)).moves == []


async def test_the_ai_game_limit_refuses_and_changes_nothing(service: RoomService) -> None:
    r = service.store.redis
    service.ai_games_per_owner = 2
    rooms = [await _ai_room(service, "10.0.0.1", "othello", 3) for _ in range(2)]
    before = {key: await r.type(key) async for key in r.scan_iter("kibitz:*")}
    lobby = await r.zcard(keys.live(0))
    with pytest.raises(RoomError) as refused:
        await _ai_room(service, "10.0.0.1", "othello", 3)
    assert refused.value.code == "rate/ai_games" and "at most 2" in refused.value.message
    after = {key: await r.type(key) async for key in r.scan_iter("kibitz:*")}
    assert after == before and await r.zcard(keys.live(0)) == lobby
    assert await r.zcard(keys.ai_games_key("10.0.0.1")) == 2
    # Other owners, and games without an AI, are not affected.
    await _ai_room(service, "10.0.0.2", "othello", 3)
    await service.create(Create(game="othello"), "tok", owner="10.0.0.1")
    # A finished game frees its place.
    await service.resign(Resign(room=rooms[0], token="tok-10.0.0.1"))
    assert await r.zcard(keys.ai_games_key("10.0.0.1")) == 1
    await _ai_room(service, "10.0.0.1", "othello", 3)


async def test_a_full_queue_refuses_the_move_and_changes_nothing(
    service: RoomService, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = service.store.redis
    monkeypatch.setattr(fairness, "MAX_WAITING", 2)
    for owner in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):  # one sent, two waiting
        await _ai_room(service, owner, "chess", 8)
    before = sorted([key async for key in r.scan_iter("kibitz:*")])
    with pytest.raises(RoomError) as refused:
        await _ai_room(service, "10.0.0.4", "chess", 8)
    assert refused.value.code == "server/busy"
    assert sorted([key async for key in r.scan_iter("kibitz:*")]) == before
    assert await r.hlen(keys.AI_WAITING) == 2


async def test_the_ai_game_limit_over_websockets(tmp_path) -> None:
    """Through a real server: the ninth AI game from one address is refused with
    ``rate/ai_games``; another address still gets one."""
    server = EmbeddedRedis(tmp_path / "redis", persist=False).start()
    # The default limit (test servers lift it unless told).
    node = start_server(server.url, workers=0, extra_env={"KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "8"})
    try:
        async with (
            await KibitzClient.open(node.http_url, local_addr=("127.0.0.21", 0)) as greedy,
            await KibitzClient.open(node.http_url, local_addr=("127.0.0.22", 0)) as other,
        ):
            for _ in range(8):
                await greedy.create("tictactoe", "ai:1", seat=0)
            rooms_before = len(await _lobby(node.http_url))
            with pytest.raises(ServerError) as refused:
                await greedy.create("tictactoe", "ai:1", seat=0)
            assert refused.value.code == "rate/ai_games"
            assert len(await _lobby(node.http_url)) == rooms_before
            await other.create("tictactoe", "ai:1", seat=0)
    finally:
        node.stop()
        server.stop()


async def _lobby(url: str) -> list[dict[str, object]]:
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(url + "/api/rooms") as reply:
        return list((await reply.json())["rooms"])
