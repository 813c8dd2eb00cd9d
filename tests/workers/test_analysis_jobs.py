"""Analysis jobs in a real worker on a private real Redis: live moves go first (a queued
live job before any analysis job, and a live job cuts a running analysis search short),
every position gets one stored evaluation, a dead worker's analysis job is done by
another."""

from __future__ import annotations

import asyncio
import json
import signal
from typing import Any

import redis
import redis.asyncio as aioredis

from kibitz.server.services import analysis
from kibitz.shared.games import available_games, find_game
from kibitz.shared.protocol.jobs import Budget, Job, JobResult
from kibitz.workers.worker import (
    GROUP,
    JOBS,
    RESULTS,
    Worker,
    WorkerConfig,
    analyse_position,
    room_key,
)
from tests.workers.test_worker_faults import start_worker, wait_until

# Two plies of tic-tac-toe: three positions to evaluate.
RECORD: dict[str, Any] = {
    "id": "a" * 32,
    "game": "tictactoe",
    "start": "",  # filled in below from the game's own start position
    "moves": [{"move": "5"}, {"move": "1"}],
}


def _record() -> dict[str, Any]:
    game = find_game("tictactoe")
    return {**RECORD, "start": game.format_position(game.initial())}


def _chess_record(game_id: str, moves: tuple[str, ...]) -> dict[str, Any]:
    """A finished chess game from the start position, as the archive hands it over."""
    chess = find_game("chess")
    return {
        "id": game_id,
        "game": "chess",
        "start": chess.format_position(chess.initial()),
        "moves": [{"move": m} for m in moves],
    }


def _start_analysis(url: str, record: dict[str, Any]) -> str:
    async def go() -> str:
        client = aioredis.from_url(url, decode_responses=True)
        try:
            return await analysis.AnalysisQueue(client).start(record)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _live_job(r: redis.Redis) -> Job:
    """A live tic-tac-toe job for a room at version 0, queued on the live stream."""
    game = find_game("tictactoe")
    room = "b" * 32
    r.hset(room_key(room), mapping={"version": 0})
    job = Job(
        f"{room}:0", room, 0, "tictactoe", game.format_position(game.initial()), [], 8,
        Budget(depth=9, time_ms=1000),
    )  # fmt: skip
    r.xadd(JOBS, job.to_fields())
    return job


def _worker(url: str, max_jobs: int, lease_ms: int = 5000) -> Worker:
    return Worker(WorkerConfig(url, name="w1", lease_ms=lease_ms, max_jobs=max_jobs))


def test_live_job_goes_before_queued_analysis(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    record = _record()
    # The analysis is queued first; the live job arrives after it.
    assert _start_analysis(private_redis.url, record) == analysis.StartOutcome.STARTED
    job = _live_job(r)
    assert r.xlen(analysis.JOBS) == 3
    assert _worker(private_redis.url, max_jobs=1).run() == 0
    results = r.xrange(RESULTS)
    assert len(results) == 1 and JobResult.from_fields(results[0][1]).job_id == job.job_id
    assert r.hlen(analysis.evals_key(record["id"])) == 0  # no analysis job started yet
    assert r.xlen(analysis.JOBS) == 3
    # With the live stream empty the worker turns to the analysis: one evaluation per
    # position, the set queued for a node to store.
    worker = _worker(private_redis.url, max_jobs=3)
    assert worker.run() == 0 and worker.analysed == 3
    evals = {int(k): json.loads(v) for k, v in r.hgetall(analysis.evals_key(record["id"])).items()}
    assert sorted(evals) == [0, 1, 2]
    for ply, evaluation in evals.items():
        assert evaluation["ply"] == ply and isinstance(evaluation["score"], float | int)
        assert evaluation["best"] in {str(n) for n in range(1, 10)}
        assert evaluation["to_move"] == ply % 2
    assert r.xlen(analysis.JOBS) == 0
    finished = r.xrange(analysis.FINISHED)
    assert [fields["analysis"] for _id, fields in finished] == [record["id"]]
    assert r.hget(analysis.meta_key(record["id"]), "status") == "running"


def test_second_start_queues_nothing(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    record = _record()
    assert _start_analysis(private_redis.url, record) == analysis.StartOutcome.STARTED
    assert _start_analysis(private_redis.url, record) == analysis.StartOutcome.EXISTS
    assert r.xlen(analysis.JOBS) == 3
    assert 0 < r.pttl(analysis.meta_key(record["id"])) <= analysis.STATE_TTL_MS


def test_dead_workers_analysis_job_is_done_by_another(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    record = _record()
    _start_analysis(private_redis.url, record)
    # A worker took the first job and died: the entry is pending on it, never acked.
    taken = r.xreadgroup(GROUP, "dead", {analysis.JOBS: ">"}, count=1)
    entry_id = taken[0][1][0][0]
    assert r.xpending(analysis.JOBS, GROUP)["consumers"] == [{"name": "dead", "pending": 1}]
    # Another worker takes the two new jobs, then the dead one's once its lease ran out.
    assert _worker(private_redis.url, max_jobs=3, lease_ms=300).run() == 0
    assert r.hlen(analysis.evals_key(record["id"])) == 3
    assert r.xpending(analysis.JOBS, GROUP)["pending"] == 0
    assert r.xrange(analysis.JOBS, entry_id, entry_id) == []


def test_analysis_gone_drops_its_jobs(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    record = _record()
    _start_analysis(private_redis.url, record)
    r.delete(analysis.meta_key(record["id"]))  # stored and forgotten (or expired)
    worker = _worker(private_redis.url, max_jobs=None)
    worker._ensure_group()
    for _ in range(3):
        work = worker._next_analysis()
        assert work is not None
        worker._analyse(work)
    assert worker._next_analysis() is None and worker.analysed == 0
    assert r.xlen(analysis.JOBS) == 0
    assert not r.exists(analysis.evals_key(record["id"]))


def test_a_live_job_cuts_a_running_analysis_search_short(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    record = _chess_record("c" * 32, ("e2e4", "e7e5", "g1f3", "b8c6", "f1b5", "a7a6"))
    assert _start_analysis(private_redis.url, record) == analysis.StartOutcome.STARTED
    worker = start_worker(private_redis.url, "w1", lease_ms=5000)
    try:
        # The worker is searching an analysis job (400 ms each) when the live job comes.
        wait_until(lambda: r.xpending(analysis.JOBS, GROUP)["pending"] == 1, poll=0.005)
        job = _live_job(r)
        wait_until(lambda: r.xlen(RESULTS) == 1, timeout=20)
        assert JobResult.from_fields(r.xrange(RESULTS)[0][1]).job_id == job.job_id
        wait_until(lambda: int(r.hget("kibitz:workers:w1", "hurried") or 0) >= 1)
        # The analysis goes on afterwards: every position gets its evaluation.
        wait_until(lambda: r.hlen(analysis.evals_key(record["id"])) == 7, timeout=30)
    finally:
        worker.terminate()
        worker.wait(timeout=15)


def test_killed_worker_process_mid_analysis_job(private_redis) -> None:
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    record = _chess_record("d" * 32, ("d2d4", "d7d5", "c2c4"))
    assert _start_analysis(private_redis.url, record) == analysis.StartOutcome.STARTED
    doomed = start_worker(private_redis.url, "doomed", lease_ms=1000)
    survivor = None
    try:
        wait_until(lambda: r.xpending(analysis.JOBS, GROUP)["pending"] == 1, poll=0.005)
        doomed.send_signal(signal.SIGKILL)  # mid-search: its job stays pending on it
        doomed.wait()
        pending = r.xpending(analysis.JOBS, GROUP)
        assert pending["consumers"] == [{"name": "doomed", "pending": 1}]
        survivor = start_worker(private_redis.url, "survivor", lease_ms=1000)
        wait_until(lambda: r.hlen(analysis.evals_key(record["id"])) == 4, timeout=30)
        assert r.xpending(analysis.JOBS, GROUP)["pending"] == 0 and r.xlen(analysis.JOBS) == 0
        assert [f["analysis"] for _i, f in r.xrange(analysis.FINISHED)] == [record["id"]]
    finally:
        for proc in (doomed, survivor):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=15)


def test_every_game_is_analysed_in_its_own_unit() -> None:
    """A position after two plies of every game, evaluated as an analysis job does it:
    a best move the rules accept, a score within the game's cap, the unit of its scale."""
    for game in available_games():
        state = game.initial()
        moves = []
        for _ in range(2):
            text = game.legal_move_texts(state)[0]
            moves.append(text)
            state = game.play(state, text)
        start = game.format_position(game.initial())
        evaluation = analyse_position("e" * 32, game.name, start, moves)
        scale = analysis.scale_for(game.name)
        assert evaluation["ply"] == 2 and evaluation["to_move"] == game.to_move(state)
        assert evaluation["best"] in game.legal_move_texts(state), game.name
        assert -scale.cap <= evaluation["score"] <= scale.cap, game.name
        assert evaluation["engine"] == "kibitz"
    assert analysis.scale_for("chess").unit == "centipawns"
    assert analysis.scale_for("oware").unit == "seeds"
