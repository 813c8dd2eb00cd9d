"""The AI-turn watchdog on a Redis Cluster: a failover lost the AI's job (the room is back
at the AI's turn with no job in the fair queue, the jobs stream or its group's outbox);
once its move is overdue the deadline sweeper queues it again, through the group's
outbox and the relay, and the AI moves.

A real cluster (the session's ``redis_cluster``); the test plays the worker and runs the
sweeper's ``sweep`` itself, with a short watchdog grace.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kibitz.server.loops.deadlines import DeadlineSweeper
from kibitz.server.loops.relay import OutboxSweeper
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import AsyncClient, command_client
from kibitz.shared.bus.embedded_cluster import EmbeddedCluster
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_in import Create, PlayMove
from kibitz.shared.protocol.jobs import Budget, Job, JobResult
from kibitz.shared.search import choose_move
from tests.conftest import flush_cluster

pytestmark = [pytest.mark.asyncio, pytest.mark.redis_cluster]

GROUPS = 12
GRACE_MS = 100
OVERDUE_S = (500 + GRACE_MS) / 1000 + 0.2  # level 1 thinks 500 ms (untimed)


@pytest.fixture
async def client(redis_cluster: EmbeddedCluster) -> AsyncIterator[AsyncClient]:
    flush_cluster(redis_cluster)
    opened = command_client(f"{redis_cluster.url}/?groups={GROUPS}")
    assert keys.grouped()
    yield opened
    await opened.aclose()
    keys.configure(0)


async def _jobs(client: AsyncClient) -> list[Job]:
    entries: Any = await client.xrange(keys.JOBS)
    return [Job.from_fields(fields) for _id, fields in entries]


async def test_a_job_a_failover_lost_is_queued_again_and_the_ai_moves(
    client: AsyncClient,
) -> None:
    store = RoomStore(client, node="n0")
    await store.ensure_groups()
    await store.heartbeat()
    service = RoomService(store, ai_watch_grace_ms=GRACE_MS)
    room, _seat = await service.create(
        Create(game="tictactoe", opponent="ai:1", seat=0), "x", owner="10.8.8.8"
    )
    await service.move(PlayMove(room.id, "x", "5"))
    assert [job.job_id for job in await _jobs(client)] == [f"{room.id}:1"]
    # The failover: the job is gone from the control slot, and from the outbox.
    group = keys.group_of(room.id)
    await client.delete(keys.JOBS, keys.AI_READY, keys.AI_WAITING)
    await client.delete(keys.ai_outbox(group))
    assert await client.zscore(keys.deadlines(group), room.id) is not None
    sweeper = DeadlineSweeper(service)
    await sweeper.sweep()
    assert await _jobs(client) == []  # not overdue yet
    await asyncio.sleep(OVERDUE_S)
    await sweeper.sweep()
    [again] = await _jobs(client)
    assert (again.job_id, again.version) == (f"{room.id}:1:1", 1)
    await sweeper.sweep()  # its deadline was pushed out: nothing more
    assert len(await _jobs(client)) == 1
    # The relay sweep finds the outbox entry relayed already: nothing queued twice.
    assert await OutboxSweeper(store, older_than_ms=0).sweep() == 0
    assert len(await _jobs(client)) == 1
    fresh = await service.get(room.id)
    move = choose_move(
        find_game(fresh.game), service.state_of(fresh), level=1, budget=Budget(depth=1)
    )
    result = JobResult(again.job_id, room.id, 1, move.move_text, worker="test")
    assert await service.apply_result(result) == "applied"
    moved = await service.get(room.id)
    assert (moved.version, len(moved.moves)) == (2, 2)
    assert await client.zscore(keys.deadlines(group), room.id) is None  # the human's turn
