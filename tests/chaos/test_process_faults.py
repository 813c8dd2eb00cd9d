"""Processes die: a node with AI results pending on it, a worker in the middle of a search.

Scenario 4: node A is killed with SIGKILL while results of the ``servers`` consumer group
are pending on it (delivered to A, not yet acknowledged). To get there deterministically
A is first stopped with SIGSTOP, which leaves its blocked XREADGROUP in Redis to receive
results, until XPENDING shows some under A's name; then SIGKILL. Another node must claim
and apply them (the architecture's claim idle is 10 s), A's players reconnect to B and
resume, and every game finishes (harness.DrivenGame.verify).

Scenario 5: a worker is killed with SIGKILL mid-search (the job pending under its name,
no result yet). With leases of 5 s the job must be finished by another worker within the
lease plus the search's time budget (plus a little slack), and the games finish.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from kibitz.server.loops.results import BLOCK_MS, CLAIM_IDLE_MS
from kibitz.shared.bus.keys import JOBS, RESULTS, SERVERS_GROUP, WORKERS_GROUP
from kibitz.shared.search import budget_for_level
from tests.chaos.harness import (
    DELIVERY_BOUND_S,
    WORKER_LEASE_MS,
    ChaosError,
    DrivenGame,
    async_wait_until,
    play_all,
    report,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(150)]

RESULTS_CLAIM_IDLE_S = 10.0  # docs/architecture.md: claimed by the others after 10 s


async def test_node_killed_with_ai_results_pending(make_cluster) -> None:
    cluster = make_cluster(nodes=2, workers=2)
    a, b = cluster.nodes
    r = cluster.sync_redis()
    games = [
        # Humans on B keep AI jobs coming while A is stopped; they think long enough (about
        # 15 s a game) that results still flow if the first tries miss.
        *[
            await DrivenGame.start(
                cluster, "othello", b, opponent=ai, seed=seed, seat=seat, think=(0.3, 0.6)
            )
            for ai, seed, seat in (("ai:1", 401, 0), ("ai:1", 402, 1), ("ai:2", 403, 0))
        ],
        # Players on A must move to B when A dies.
        await DrivenGame.start(cluster, "othello", a, opponent="ai:1", seed=404),
        await DrivenGame.start(cluster, "othello", a, b, seed=405),
    ]
    caught: dict[str, object] = {}

    def pending_on_a() -> list[dict]:
        return r.xpending_range(RESULTS, SERVERS_GROUP, "-", "+", 100, consumername=a.name)

    async def kill_a_with_results_pending() -> None:
        # A's blocked XREADGROUP gives up after BLOCK_MS, so each try lasts a little longer
        # than that; tries go on while the games on B still make AI moves.
        tries = 0
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up and any(g.in_progress() for g in games[:3]):
            tries += 1
            t0 = time.time()
            a.server.process.send_signal(signal.SIGSTOP)
            deadline = time.monotonic() + BLOCK_MS / 1000 + 0.3
            pending: list[dict] = []
            while time.monotonic() < deadline and not pending:
                await asyncio.sleep(0.02)
                pending = await asyncio.to_thread(pending_on_a)
            if pending:
                results = []
                for p in pending:
                    for _id, fields in r.xrange(RESULTS, p["message_id"], p["message_id"]):
                        data = json.loads(fields["result"])
                        results.append((data["room"], int(data["version"])))
                await asyncio.to_thread(cluster.kill_node, a, signal.SIGKILL)
                t_kill = time.time()
                cluster.fault_window(t0, t_kill)
                caught.update(results=results, t_kill=t_kill)
                return
            a.server.process.send_signal(signal.SIGCONT)
            cluster.fault_window(t0, time.time())
            await asyncio.sleep(0.3)
        raise ChaosError(
            f"could not catch AI results pending on node A ({tries} tries; games on B "
            f"live: {[g.in_progress() for g in games[:3]]})"
        )

    problems = await play_all(games, timeout=100, fault=kill_a_with_results_pending)
    results = caught["results"]
    t_kill = caught["t_kill"]
    assert isinstance(results, list) and isinstance(t_kill, float)
    print(f"results pending on A when it was killed: {results}")
    # The other node claims A's entries once they have been idle CLAIM_IDLE_MS; the games
    # may all be over before that (a result A never applied is replaced by a fallback).
    deadline = time.monotonic() + CLAIM_IDLE_MS / 1000 + 5
    while pending_on_a() and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    if pending_on_a():
        problems.append(f"results still pending on dead node A: {pending_on_a()}")
    records = {g.room: g.record for g in games}
    bound = RESULTS_CLAIM_IDLE_S + DELIVERY_BOUND_S
    for room, version in results:
        record = records.get(room)
        if record is None:
            continue  # a result for a room of another test run cannot happen; ignore
        after = [e for e in record["events"] if e["version"] == version + 1]
        if not after or after[0]["kind"] != "move":
            problems.append(f"room {room}: the pending AI move for v{version} was never applied")
        elif after[0]["at"] / 1000.0 - t_kill > bound:
            late = after[0]["at"] / 1000.0 - t_kill
            problems.append(
                f"room {room}: the AI move pending on A was applied {late:.1f} s after A died "
                f"(bound {bound} s)"
            )
    r.close()
    assert not problems, report(problems, cluster)


#: White (the AI) mates a lone king with two rooks: a few moves, each a full search.
ROOKS_MATE = "8/8/8/3k4/8/8/8/KR5R w - - 0 1"


async def test_worker_killed_mid_search(make_cluster) -> None:
    cluster = make_cluster(nodes=1, workers=2)
    node = cluster.nodes[0]
    r = cluster.sync_redis()
    chess = await DrivenGame.start(
        cluster, "chess", node, opponent="ai:8", seat=1, position=ROOKS_MATE, seed=501
    )
    games = [
        chess,
        await DrivenGame.start(cluster, "othello", node, opponent="ai:1", seed=502),
        await DrivenGame.start(
            cluster, "tictactoe", node, opponent="ai:5", seed=503, think=(0.5, 1.0)
        ),  # fmt: skip
    ]
    search_s = (budget_for_level("chess", 8).time_ms or 0) / 1000.0
    bound = WORKER_LEASE_MS / 1000.0 + search_s + 2.5
    measured: dict[str, float] = {}

    def chess_job_holder() -> str | None:
        for p in r.xpending_range(JOBS, WORKERS_GROUP, "-", "+", 100):
            for _id, fields in r.xrange(JOBS, p["message_id"], p["message_id"]):
                if json.loads(fields["job"])["room"] == chess.room:
                    return str(p["consumer"])
        return None

    async def kill_the_searching_worker() -> None:
        deadline = time.monotonic() + 10
        holder = None
        while holder is None:
            if time.monotonic() > deadline:
                raise ChaosError("the chess job was never taken by a worker")
            holder = await asyncio.to_thread(chess_job_holder)
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # well into the search
        still = await asyncio.to_thread(chess_job_holder)
        version = int(chess.players[0].current()["version"])  # type: ignore[index]
        if still != holder or version != 0:
            raise ChaosError(f"the search ended before the kill ({holder} -> {still}, v{version})")
        await asyncio.to_thread(cluster.kill_worker, holder)
        t_kill = time.monotonic()
        player = chess.players[0]
        await async_wait_until(
            lambda: any(v >= 1 for _t, v, _m in player.seen), bound + 20, "the AI's first move"
        )
        measured["reclaim_s"] = time.monotonic() - t_kill

    problems = await play_all(games, timeout=100, fault=kill_the_searching_worker, fault_after=0)
    reclaim = measured.get("reclaim_s")
    print(f"AI move of the killed worker's job arrived {reclaim} s after the kill")
    if reclaim is None or reclaim > bound:
        problems.append(
            f"the killed worker's job was finished {reclaim} s after the kill (bound {bound:.1f} s:"
            f" lease {WORKER_LEASE_MS} ms + search {search_s} s + 2.5 s)"
        )
    r.close()
    assert not problems, report(problems, cluster)
