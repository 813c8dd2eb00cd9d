"""Clocks end to end: real server processes, real Redis, real WebSockets on loopback.

The flag falls with nobody sending anything, on whichever node is alive; a move that
beats the flag is played, one that does not loses; a first move not made in time aborts;
a flag against a side whose opponent cannot win is a draw; an AI seat manages its time.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import replace

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.asyncio

FIRST_MOVE_S = 2.0  # the test servers' first-move timeout (KIBITZ_FIRST_MOVE_TIMEOUT)
GRACE_S = 0.5  # clocks.LAG_CREDIT_MAX_MS: the sweeper waits this long past the flag


@pytest.fixture(scope="module")
def timed_server(redis_server) -> Iterator[ServerProcess]:
    server = start_server(
        redis_server.url, extra_env={"KIBITZ_FIRST_MOVE_TIMEOUT": str(FIRST_MOVE_S)}
    )
    yield server
    server.stop()


async def get_json(url: str) -> dict:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return await resp.json()


async def wait_over(url: str, room: str, timeout: float) -> dict:
    """Poll ``GET /api/rooms/{room}`` on ``url`` until the game is over."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = await get_json(f"{url}/api/rooms/{room}")
        if state.get("status") == "over":
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"room {room} not over after {timeout} s: {state}")


async def two_players(
    url_a: str, url_b: str, game: str, clock: dict, position: str | None = None
) -> tuple[KibitzClient, KibitzClient, str]:
    a = await KibitzClient.open(url_a)
    b = await KibitzClient.open(url_b)
    room = (await a.create(game, "human", seat=0, clock=clock, position=position))["room"]
    await b.join(room)
    await a.wait_state(room, lambda s: s["status"] == "playing")
    return a, b, room


async def first_moves(a: KibitzClient, b: KibitzClient, room: str, moves: tuple[str, str]):
    """Both sides' first (untimed) moves; returns the state where seat 0's clock runs."""
    await a.move(room, moves[0])
    state = await b.wait_state(room, lambda s: len(s["moves"]) == 1)
    assert state["clock"]["running"] is None and state["clock"]["first_move_by"] is not None
    await b.move(room, moves[1])
    state = await a.wait_state(room, lambda s: len(s["moves"]) == 2)
    assert state["clock"]["running"] == 0 and state["clock"]["first_move_by"] is None
    return state


async def test_flag_falls_on_the_surviving_node_after_the_players_node_is_killed(
    redis_server,
) -> None:
    node_a = start_server(redis_server.url)
    node_b = start_server(redis_server.url)
    node_c = start_server(redis_server.url)  # B and C both sweep: one of them ends it
    try:
        a, b, room = await two_players(
            node_a.ws_url, node_a.ws_url, "tictactoe", {"initial_ms": 2_000, "increment_ms": 0}
        )
        state = await first_moves(a, b, room, ("1", "5"))
        assert state["clock"]["remaining_ms"][1] == 2_000
        assert 1_990 <= state["clock"]["remaining_ms"][0] <= 2_000
        clock_started = time.monotonic()
        # The node holding both players dies before the flag falls; nobody sends anything.
        node_a.process.send_signal(signal.SIGKILL)
        node_a.process.wait(timeout=10)
        assert time.monotonic() - clock_started < 1.5
        final = await wait_over(node_b.http_url, room, timeout=10)
        took = time.monotonic() - clock_started
        assert final["result"] == {
            "winner": 1,
            "reason": "X ran out of time",
            "termination": "time",
        }
        assert final["clock"]["remaining_ms"][0] == 0 and final["clock"]["running"] is None
        assert 2.0 <= took <= 2.0 + GRACE_S + 1.5, took
        record = await get_json(f"{node_b.http_url}/api/rooms/{room}/record")
        kinds = [e["kind"] for e in record["events"]]
        assert kinds.count("flag") == 1 and kinds[-1] == "flag", kinds
        assert (await get_json(f"{node_c.http_url}/api/rooms/{room}"))["version"] == final[
            "version"
        ]
        for client in (a, b):
            await client.close()
    finally:
        for node in (node_a, node_b, node_c):
            node.stop()


async def test_a_move_just_before_the_flag_wins_and_one_after_loses(timed_server) -> None:
    url = timed_server.ws_url
    a, b, room = await two_players(url, url, "tictactoe", {"initial_ms": 2_000})
    try:
        state = await first_moves(a, b, room, ("1", "5"))
        seen = time.monotonic()  # ~ when X's clock started, on loopback
        await asyncio.sleep(1.8 - (time.monotonic() - seen))  # 200 ms to spare
        await a.move(room, "2", state["version"])
        played = await b.wait_state(room, lambda s: len(s["moves"]) == 3 or s["status"] == "over")
        assert played["status"] == "playing", played["result"]
        assert played["event"]["kind"] == "move"
        left_x = played["clock"]["remaining_ms"][0]
        assert 0 < left_x <= 200 + 30, left_x  # 2000 - 1800, give or take the loopback
        assert played["clock"]["running"] == 1
        # O waits past its flag (but within the sweeper's grace) and then moves: too late.
        seen = time.monotonic()
        await asyncio.sleep(2.0 + 0.2 - (time.monotonic() - seen))
        await b.move(room, "3")
        final = await a.wait_state(room, lambda s: s["status"] == "over", timeout=10)
        assert final["event"]["kind"] == "flag" and final["event"]["seat"] == 1
        assert final["result"] == {
            "winner": 0,
            "reason": "O ran out of time",
            "termination": "time",
        }
        assert len(final["moves"]) == 3  # the late move was not played
    finally:
        await a.close()
        await b.close()


async def test_first_move_not_made_in_time_aborts(timed_server) -> None:
    url = timed_server.ws_url
    a, b, room = await two_players(url, url, "tictactoe", {"initial_ms": 60_000})
    try:
        state = a.states[room]
        assert state["clock"]["first_move_by"] - state["clock"]["at"] == pytest.approx(
            FIRST_MOVE_S * 1000, abs=50
        )
        started = time.monotonic()
        final = await b.wait_state(room, lambda s: s["status"] == "over", timeout=10)
        assert FIRST_MOVE_S <= time.monotonic() - started + 0.1 <= FIRST_MOVE_S + GRACE_S + 1.5
        assert final["event"]["kind"] == "abort"
        assert final["result"] == {
            "winner": None,
            "reason": "aborted: X did not move in time",
            "termination": "abort",
        }
        assert final["moves"] == []
        # Black's first move has its own deadline, counted from White's first move.
        c, d, room2 = await two_players(url, url, "tictactoe", {"initial_ms": 60_000})
        await c.move(room2, "1")
        final = await c.wait_state(room2, lambda s: s["status"] == "over", timeout=10)
        assert final["event"] == {"kind": "abort", "seat": 1, "result": final["result"]}
        assert final["result"]["reason"] == "aborted: O did not move in time"
        await c.close()
        await d.close()
    finally:
        await a.close()
        await b.close()


async def test_flag_against_a_side_whose_opponent_cannot_win_is_a_draw(timed_server) -> None:
    url = timed_server.ws_url
    # White: king and queen; Black: a lone king, who cannot mate whatever happens.
    position = "8/8/8/4k3/8/8/8/4K2Q w - - 0 1"
    a, b, room = await two_players(url, url, "chess", {"initial_ms": 1_000}, position)
    try:
        await first_moves(a, b, room, ("h1h2", "e5e6"))
        final = await a.wait_state(room, lambda s: s["status"] == "over", timeout=10)
        assert final["event"]["kind"] == "flag"
        assert final["result"] == {
            "winner": None,
            "reason": "draw: White ran out of time and Black cannot win",
            "termination": "time",
        }
        # The archive keeps the time control and the clocks after each move.
        record = await get_json(f"{timed_server.http_url}/api/games/{room}")
        assert record["time_control"] == {"initial_ms": 1_000, "increment_ms": 0}
        assert [m["clocks_ms"] for m in record["moves"]] == [[1_000, 1_000], [1_000, 1_000]]
        async with aiohttp.ClientSession() as session:
            url = f"{timed_server.http_url}/api/games/{room}/export?format=pgn"
            async with session.get(url) as resp:
                pgn = await resp.text()
        assert "[%clk 0:00:01]" in pgn and '[Result "1/2-1/2"]' in pgn, pgn
    finally:
        await a.close()
        await b.close()


# -- the AI's clock ---------------------------------------------------------------------------


async def test_worker_cuts_a_timed_search_to_the_jobs_deadline(redis_server) -> None:
    """The job's deadline is on the Redis server's clock; what the job spent waiting is
    not searched, and a job past its deadline gets a one-ply search."""
    import redis as sync_redis

    from kibitz.shared.protocol.jobs import Budget, Job
    from kibitz.workers.worker import CLOCK_MARGIN_MS, MIN_SEARCH_MS, Worker, WorkerConfig

    worker = Worker(WorkerConfig(redis_server.url, name="clock-test"))
    seconds, micros = sync_redis.Redis.from_url(redis_server.url).time()
    now_ms = seconds * 1000 + micros // 1000
    job = Job("r:1", "r", 1, "chess", "startpos", [], 8, Budget(None, 2_000, None))
    assert worker._on_the_clock(job) is job  # untimed: the level's budget
    soon = worker._on_the_clock(replace(job, deadline_ms=now_ms + 500))
    assert 400 <= soon.budget.time_ms <= 500 - CLOCK_MARGIN_MS, soon.budget
    assert soon.budget.depth is None
    late = worker._on_the_clock(replace(job, deadline_ms=now_ms - 1_000))
    assert late.budget == Budget(depth=1, time_ms=MIN_SEARCH_MS, nodes=None)
    later = worker._on_the_clock(replace(job, deadline_ms=now_ms + 60_000))
    assert later.budget.time_ms == 2_000  # never more than the level's budget


AI_GAMES = 20
AI_GAME = "othello"  # at most 60 plies: a game ends in bounded time, and level 8 searches
AI_LEVEL = 8  # on the clock (2 s a move untimed), so without time management it flags


async def play_ai_game(url: str, index: int) -> dict:
    """One 1+0 game against the AI at level 8; the human side plays random moves at
    once. Returns the final state."""
    rng = random.Random(index)
    async with await KibitzClient.open(url) as client:
        seat = index % 2  # half the games the AI moves first
        room = (
            await client.create(AI_GAME, f"ai:{AI_LEVEL}", seat=seat, clock={"initial_ms": 60_000})
        )["room"]
        while True:
            state = await client.wait_state(
                room,
                lambda s: (
                    s["status"] == "over" or (s["status"] == "playing" and s["to_move"] == seat)
                ),
                timeout=120,
            )
            if state["status"] == "over":
                return state
            await client.move(room, rng.choice(state["legal_moves"]), state["version"])
            await client.wait_state(room, lambda s, v=state["version"]: s["version"] > v)


async def test_ai_never_flags_at_one_minute(live_server) -> None:
    """20 concurrent 1+0 games against level 8 on the live server's two workers: the
    AI's jobs wait in the queue for each other, and that time counts against its clock."""
    started = time.monotonic()
    finals = await asyncio.gather(*(play_ai_game(live_server.ws_url, i) for i in range(AI_GAMES)))
    took = time.monotonic() - started
    for i, final in enumerate(finals):
        ai_seat = 1 - i % 2
        reason = final["result"]["reason"]
        assert "ran out of time" not in reason or final["result"]["winner"] == ai_seat, reason
        assert final["event"]["kind"] != "abort", final["result"]
        assert final["clock"]["remaining_ms"][ai_seat] > 0
    left = [f["clock"]["remaining_ms"][1 - i % 2] for i, f in enumerate(finals)]
    print(f"{AI_GAMES} games in {took:.1f} s; AI time left (ms): min {min(left)}, "
          f"median {sorted(left)[len(left) // 2]}")  # fmt: skip
    assert took < 150
