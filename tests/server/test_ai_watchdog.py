"""The AI-turn watchdog on a single Redis: a room at an AI's turn whose job was lost (Redis
lost its last writes: a restart from an AOF missing its last second) still gets its AI
move once the move is overdue; a move that comes in time is never queued again; a slow
job's late result and its second attempt's move one AI move between them; the attempts
are bounded; a job still waiting in the fair queue is not queued twice.

A real Redis and the room service in-process; the test plays the worker (it reads the
jobs stream and posts each job's result through ``RoomService.apply_result``, as the
results loop does) and runs the deadline sweeper's ``sweep`` itself. The watchdog's grace
is short (``GRACE_MS``) so nothing waits the production 20 s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kibitz.server.loops.deadlines import DeadlineSweeper
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import AsyncClient, command_client
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_in import Create, PlayMove
from kibitz.shared.protocol.jobs import Budget, Job, JobResult
from kibitz.shared.search import choose_move

pytestmark = pytest.mark.asyncio

GRACE_MS = 100
THINK_MS = 500  # the level-1 AI's time budget (shared/search/levels.py): untimed games
OVERDUE_S = (THINK_MS + GRACE_MS) / 1000 + 0.15  # past the watchdog's deadline
OWNER = "10.7.7.7"


@pytest.fixture
async def client(own_redis: EmbeddedRedis) -> AsyncIterator[AsyncClient]:
    redis = command_client(own_redis.url)
    await redis.flushall()
    yield redis
    await redis.aclose()


async def _service(client: AsyncClient, attempts: int = 5) -> RoomService:
    store = RoomStore(client, node="n0")
    await store.ensure_groups()
    await store.heartbeat()
    return RoomService(store, ai_watch_grace_ms=GRACE_MS, ai_watch_attempts=attempts)


@pytest.fixture
async def service(client: AsyncClient) -> RoomService:
    return await _service(client)


async def _ai_turn(service: RoomService) -> str:
    """An untimed tic-tac-toe game against the level-1 AI, the human's first move made:
    the AI's turn (version 1), its job queued."""
    room, _seat = await service.create(
        Create(game="tictactoe", opponent="ai:1", seat=0), "x", owner=OWNER
    )
    await service.move(PlayMove(room.id, "x", "5"))
    return room.id


async def _stream_jobs(client: AsyncClient) -> list[Job]:
    entries: Any = await client.xrange(keys.JOBS)
    return [Job.from_fields(fields) for _id, fields in entries]


async def _waiting_ids(client: AsyncClient) -> set[str]:
    return set(await client.hkeys(keys.AI_WAITING))


async def _take_jobs(client: AsyncClient) -> list[Job]:
    """What a worker does with the jobs on the stream before it answers: takes them
    (acknowledged and deleted)."""
    jobs = await _stream_jobs(client)
    await client.delete(keys.JOBS)
    return jobs


async def _answer(service: RoomService, job: Job) -> str:
    """A worker's result for ``job``: a legal move of the room (as it is now: a room
    that moved on refuses the result whatever its move)."""
    room = await service.get(job.room)
    found = choose_move(
        find_game(room.game), service.state_of(room), level=1, budget=Budget(depth=1), seed=0
    )
    result = JobResult(job.job_id, job.room, job.version, found.move_text, worker="test")
    return await service.apply_result(result)


async def _lose_jobs(client: AsyncClient, how: str) -> None:
    """The queued jobs are lost: gone from Redis (the fair queue's entries and the jobs
    stream), or read and acknowledged by a worker whose result never came back."""
    if how == "deleted":
        await client.delete(keys.JOBS, keys.AI_READY, keys.AI_WAITING)
        return
    read: Any = await client.xreadgroup(keys.WORKERS_GROUP, "w-lost", {keys.JOBS: ">"})
    taken = [entry_id for _stream, entries in read for entry_id, _fields in entries]
    assert taken
    await client.xack(keys.JOBS, keys.WORKERS_GROUP, *taken)
    await client.xdel(keys.JOBS, *taken)


async def _deadline(client: AsyncClient, room_id: str) -> float | None:
    score: Any = await client.zscore(keys.deadlines(0), room_id)
    return None if score is None else float(score)


@pytest.mark.parametrize("how", ["deleted", "acked"])
async def test_a_lost_ai_job_is_queued_again_once_the_move_is_overdue(
    service: RoomService, client: AsyncClient, how: str
) -> None:
    room_id = await _ai_turn(service)
    [job] = await _stream_jobs(client)
    assert job.job_id == f"{room_id}:1"
    # At the AI's turn the room is due when its move is overdue (untimed: no clock).
    deadline = await _deadline(client, room_id)
    assert deadline is not None
    assert abs(deadline - (service.clock_ms() + THINK_MS + GRACE_MS)) < 1_000
    await _lose_jobs(client, how)
    sweeper = DeadlineSweeper(service)
    await sweeper.sweep()
    assert await _stream_jobs(client) == []  # not overdue yet: nothing queued
    await asyncio.sleep(OVERDUE_S)
    assert await sweeper.sweep() == 0  # nothing ended
    [again] = await _take_jobs(client)
    assert again.job_id == f"{room_id}:1:1"
    assert (again.room, again.version, again.moves) == (room_id, 1, job.moves)
    # Its deadline was pushed out: a sweep now queues nothing more.
    assert (await _deadline(client, room_id) or 0) > service.clock_ms()
    await sweeper.sweep()
    assert await _stream_jobs(client) == [] and await _waiting_ids(client) == set()
    assert await _answer(service, again) == "applied"
    room = await service.get(room_id)
    assert (room.version, room.status, len(room.moves)) == (2, "playing", 2)
    assert await _deadline(client, room_id) is None  # the human's turn, untimed


async def test_an_ai_move_in_time_is_never_queued_again(
    service: RoomService, client: AsyncClient
) -> None:
    """The normal game: the worker answers at once, every AI turn; the watchdog never
    queues anything, however long the sweeper runs, and nothing is moved twice."""
    room_id = await _ai_turn(service)
    sweeper = DeadlineSweeper(service)
    played = 0
    for _turn in range(3):
        jobs = await _take_jobs(client)
        assert [job.job_id for job in jobs] == [f"{room_id}:{jobs[0].version}"]
        assert await _answer(service, jobs[0]) == "applied"
        played += 1
        assert await _answer(service, jobs[0]) == "ignored"  # a duplicate result
        room = await service.get(room_id)
        if room.status != "playing":
            break
        assert await _deadline(client, room_id) is None  # the human's turn
        state = service.state_of(room)
        game = find_game(room.game)
        human = choose_move(game, state, level=1, budget=Budget(depth=1), seed=1)
        if (await service.move(PlayMove(room_id, "x", human.move_text))).status != "playing":
            break
    await asyncio.sleep(OVERDUE_S)
    await sweeper.sweep()
    room = await service.get(room_id)
    ai_moves = sum(1 for move in room.moves[1::2])
    assert ai_moves == played
    assert await service.store.ai_watch_mark(room_id) is None
    # The AI's job of the last turn (if the game went on) was queued once, by its commit.
    assert all(job.job_id == f"{room_id}:{job.version}" for job in await _stream_jobs(client))
    assert await _waiting_ids(client) == set()


async def test_a_slow_jobs_result_and_the_next_attempts_make_one_ai_move(
    service: RoomService, client: AsyncClient
) -> None:
    room_id = await _ai_turn(service)
    [slow] = await _take_jobs(client)  # a worker has it, and takes its time
    await asyncio.sleep(OVERDUE_S)
    await DeadlineSweeper(service).sweep()
    [again] = await _take_jobs(client)
    assert again.job_id == f"{room_id}:1:1"
    assert await _answer(service, slow) == "applied"
    assert await _answer(service, again) == "ignored"  # the room moved on: refused
    room = await service.get(room_id)
    assert (room.version, len(room.moves)) == (2, 2)


async def test_the_watchdog_gives_up_after_its_attempts(
    client: AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    service = await _service(client, attempts=2)
    room_id = await _ai_turn(service)
    sweeper = DeadlineSweeper(service)
    queued = []
    for _attempt in range(2):
        await _lose_jobs(client, "deleted")
        await asyncio.sleep(OVERDUE_S)
        await sweeper.sweep()
        queued += [job.job_id for job in await _stream_jobs(client)]
    assert queued == [f"{room_id}:1:1", f"{room_id}:1:2"]
    await _lose_jobs(client, "deleted")
    await asyncio.sleep(OVERDUE_S)
    with caplog.at_level(logging.ERROR, logger="kibitz.server.services.rooms"):
        await sweeper.sweep()
    assert await _stream_jobs(client) == []
    assert any("after 2 attempts" in r.getMessage() for r in caplog.records)
    # Left to its clock: an untimed game leaves the deadlines (the abandon rules end it).
    assert await _deadline(client, room_id) is None
    room = await service.get(room_id)
    assert (room.version, room.status) == (1, "playing")
    await asyncio.sleep(OVERDUE_S)
    await sweeper.sweep()
    assert await _stream_jobs(client) == []


async def test_a_job_still_waiting_in_the_queue_is_not_queued_again(
    service: RoomService, client: AsyncClient
) -> None:
    """No worker takes anything: the first game's job is on the stream (a window of one),
    the second's waits in the fair queue. Overdue, the second is left waiting (its
    deadline pushed out); only the first, not waiting, is queued again (into the queue)."""
    first = await _ai_turn(service)
    second = await _ai_turn(service)
    assert [job.job_id for job in await _stream_jobs(client)] == [f"{first}:1"]
    assert await _waiting_ids(client) == {f"{second}:1"}
    before = time.time()
    await asyncio.sleep(OVERDUE_S)
    await DeadlineSweeper(service).sweep()
    assert await _waiting_ids(client) == {f"{second}:1", f"{first}:1:1"}
    assert await service.store.ai_watch_mark(second) is None
    assert (await _deadline(client, second) or 0) > before * 1000 + THINK_MS + GRACE_MS
