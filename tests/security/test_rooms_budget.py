"""Rooms cost a budget, and rooms nobody plays leave: the attack of issue 19, item 1.

Once ``create`` was refused (``rate/limited``), one address went on making rooms with seek
and accept, or with rematches, and those rooms (untimed games nobody moved in) stayed live
for three days, filled the lobby and, once ended, the archive. Here, against a real
``kibitz serve`` on loopback with a budget of BUDGET rooms a minute: the seek and accept
loop and the rematch loop stop at the budget with ``rate/limited`` and change nothing when
refused; a game nobody moved in is aborted within its short lifetime, leaves the live list
and Redis and never reaches the archive; an untimed game whose players have all gone is
ended as abandoned within its limit and archived once; so is a correspondence game nobody
moved in (aborted), while one with moves keeps its days-per-move clock. The budget is a
sliding minute: rooms made just before and just after a minute boundary count together.

Each test plays from its own loopback address (127.0.0.N), so their budgets are apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from kibitz.client.connection import KibitzClient, ServerError, new_player_key
from kibitz.server.services.limits import AddressLimiter, LimitExceeded, Limits
from kibitz.shared.bus import keys as bus_keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.limits import AddressCounters
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, start_server
from tests.security.conftest import BOUNDARY_BUDGET

pytestmark = pytest.mark.asyncio

BUDGET = BOUNDARY_BUDGET  # rooms a minute per address
UNSTARTED_S = 2.0  # an untimed game nobody moved in is aborted after this
ABANDON_S = 2.0  # every player of an untimed game gone this long: abandoned
ABANDON_AI_S = 3.0  # the same for the human of a game against the AI
FINISHED_S = 3.0  # an aborted or archived room's keys live this long
SWEEP_S = 2.0  # the archiver sweeps about once a second (after a blocking read)
ENV = {
    "KIBITZ_MAX_CREATES_PER_MINUTE": str(BUDGET),
    "KIBITZ_UNSTARTED_TTL": str(UNSTARTED_S),
    "KIBITZ_ABANDON_AFTER": str(ABANDON_S),
    "KIBITZ_ABANDON_AI_AFTER": str(ABANDON_AI_S),
    "KIBITZ_FINISHED_TTL": str(FINISHED_S),
}
ROOM_KEYS = ("kibitz:room:{{{}}}", "kibitz:room:{{{}}}:events", "kibitz:room:{{{}}}:presence")


@pytest.fixture(scope="module")
def node(
    own_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    db: Path = tmp_path_factory.mktemp("budget-db") / "games.sqlite3"
    server = start_server(own_redis.url, extra_env=ENV, database_url=f"sqlite:///{db}")
    yield server
    server.stop()


@pytest.fixture
async def redis(own_redis: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(own_redis.url, decode_responses=True)
    yield client
    await client.aclose()


async def client(node: ServerProcess, address: str) -> KibitzClient:
    """A connection from ``address`` (any 127.0.0.N is loopback)."""
    return await KibitzClient.open(node.http_url, local_addr=(address, 0))


async def get_json(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.json()


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float) -> Any:
    """``check()``'s first truthy answer, polled every 0.1 s until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await check()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"still false after {timeout} s"
        await asyncio.sleep(0.1)


async def refused(request: Awaitable[Any]) -> str | None:
    """The error code ``request`` was refused with, or None if it went through."""
    try:
        await request
    except ServerError as exc:
        return exc.code
    return None


async def test_seek_and_accept_from_one_address_stop_at_the_budget(node, redis) -> None:
    seeker, acceptor = await client(node, "127.0.0.11"), await client(node, "127.0.0.11")
    other = await client(node, "127.0.0.12")
    try:
        made, refusal, seek = 0, None, None
        for _ in range(3 * BUDGET):  # bounded: well past the budget
            try:
                seek = await seeker.seek("tictactoe")
            except ServerError as exc:
                refusal = exc.code
                break
            live = await redis.zcard(bus_keys.live(0))
            refusal = await refused(acceptor.accept_seek(seek["id"]))
            if refusal is not None:
                # Refused, nothing changed: no room, and the seek is still open.
                assert await redis.zcard(bus_keys.live(0)) == live
                _, listed = await get_json(node.http_url + "/api/seeks")
                assert seek["id"] in [s["id"] for s in listed["seeks"]]
                break
            made += 1
        assert refusal == "rate/limited", f"{made} rooms and no refusal"
        # A seek costs its poster one room and an accept the acceptor one: here, the same
        # address paid twice a room.
        assert made == BUDGET // 2
        # The refused accept left the seek to others: another address takes it.
        assert seek is not None
        seat = await other.accept_seek(seek["id"])
        assert seat["room"]
        # And this address can neither post nor accept any more this minute.
        assert await refused(seeker.seek("tictactoe")) == "rate/limited"
        assert await refused(acceptor.create("tictactoe")) == "rate/limited"
    finally:
        for c in (seeker, acceptor, other):
            await c.close()


async def test_rematches_from_one_address_stop_at_the_budget(node) -> None:
    a, b = await client(node, "127.0.0.21"), await client(node, "127.0.0.21")
    try:
        room = (await a.create("tictactoe", seat=0))["room"]  # one room of the budget
        await b.join(room)
        rematches, refusal = 0, None
        for _ in range(3 * BUDGET):  # bounded: well past the budget
            await a.wait_state(room, lambda s: s["status"] == "playing", timeout=10)
            await a.abort(room)
            await b.wait_state(room, lambda s: s["status"] == "over", timeout=10)
            await a.rematch(room)
            refusal = await refused(b.rematch(room, "accept"))
            if refusal is not None:
                break
            rematches += 1
            await a.wait_state(room, lambda s: bool(s.get("next_room")), timeout=10)
            await b.wait_state(room, lambda s: bool(s.get("next_room")), timeout=10)
            new = a.states[room]["next_room"]
            await a.follow_rematch(room)
            await b.follow_rematch(room)
            room = new
        assert refusal == "rate/limited", f"{rematches} rematches and no refusal"
        assert rematches == BUDGET - 1
        # Refused, nothing changed: no rematch room, and the offer still stands.
        _, state = await get_json(f"{node.http_url}/api/rooms/{room}")
        assert state["next_room"] is None
    finally:
        await a.close()
        await b.close()


async def room_gone(redis: aioredis.Redis, room: str) -> bool:
    keys = [key.format(room) for key in ROOM_KEYS]
    return await redis.exists(*keys) == 0 and await redis.zscore(bus_keys.live(0), room) is None


async def test_a_game_nobody_moved_in_is_aborted_and_never_archived(node, redis) -> None:
    key_a, key_b = new_player_key(), new_player_key()
    seeker, acceptor = await client(node, "127.0.0.31"), await client(node, "127.0.0.32")
    watcher = await client(node, "127.0.0.33")
    try:
        seek = await seeker.seek("tictactoe", player_key=key_a)
        room = (await acceptor.accept_seek(seek["id"], player_key=key_b))["room"]
        await seeker.wait_seek_accepted(seek["id"])
        await watcher.watch(room)
        assert await redis.zscore(bus_keys.live(0), room) is not None
    finally:
        await seeker.close()
        await acceptor.close()
    try:
        # Nobody moves, both players have gone: within its lifetime (and a sweep) it is
        # aborted, as a first move not made in time is.
        over = await watcher.wait_state(
            room, lambda s: s["status"] == "over", timeout=UNSTARTED_S + 2 * SWEEP_S + 5
        )
        assert over["event"]["kind"] == "abort"
        assert over["result"]["winner"] is None
        assert over["result"]["reason"].startswith("aborted")
        assert over["moves"] == []
    finally:
        await watcher.close()
    # Off the live list at once, out of Redis after the finished-room lifetime...
    _, page = await get_json(node.http_url + "/api/rooms")
    assert room not in [r["room"] for r in page["rooms"]]
    await eventually(lambda: room_gone(redis, room), FINISHED_S + 5)
    # ... and never in the archive.
    status, _ = await get_json(f"{node.http_url}/api/games/{room}")
    assert status == 404
    for key in (key_a, key_b):
        _, listed = await get_json(f"{node.http_url}/api/games?player={player_id(key)}")
        assert listed["games"] == []


async def test_an_untimed_game_whose_players_are_gone_is_abandoned_and_archived_once(
    node, redis
) -> None:
    key_a, key_b = new_player_key(), new_player_key()
    a, b = await client(node, "127.0.0.41"), await client(node, "127.0.0.42")
    try:
        room = (await a.create("tictactoe", seat=0, player_key=key_a))["room"]
        await b.join(room, player_key=key_b)
        await a.move(room, "5")
        await b.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=10)
        await b.move(room, "1")
        await a.wait_state(room, lambda s: len(s["moves"]) == 2, timeout=10)
    finally:
        await a.close()
        await b.close()
    left = time.monotonic()

    async def archived() -> list[dict[str, Any]]:
        _, listed = await get_json(f"{node.http_url}/api/games?player={player_id(key_a)}")
        return [g for g in listed["games"] if g["id"] == room]

    # Both gone: within the limit (and a sweep) it ends as abandoned, far short of the
    # idle-game limit (three days), and reaches the archive once.
    [record] = await eventually(archived, ABANDON_S + 2 * SWEEP_S + 5)
    assert time.monotonic() - left >= ABANDON_S - 0.5
    assert (record["result"]["winner"], record["result"]["reason"]) == (None, "abandoned")
    assert [m["move"] for m in record["moves"]] == ["5", "1"]
    assert await redis.zscore(bus_keys.live(0), room) is None
    _, listed = await get_json(f"{node.http_url}/api/games?player={player_id(key_b)}")
    assert [g["id"] for g in listed["games"]].count(room) == 1


async def test_a_game_against_the_ai_whose_player_is_gone_is_abandoned(node, redis) -> None:
    """No workers here: the AI's reply never comes, and the human leaves. The AI seat is
    never gone; the human's absence alone ends the game, after its own limit."""
    key = new_player_key()
    async with await client(node, "127.0.0.51") as human:
        room = (await human.create("tictactoe", "ai:1", seat=0, player_key=key))["room"]
        await human.move(room, "5")
        await human.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=10)
    left = time.monotonic()

    async def archived() -> list[dict[str, Any]]:
        _, listed = await get_json(f"{node.http_url}/api/games?player={player_id(key)}")
        return [g for g in listed["games"] if g["id"] == room]

    [record] = await eventually(archived, ABANDON_AI_S + 2 * SWEEP_S + 5)
    assert time.monotonic() - left >= ABANDON_AI_S - 0.5
    assert (record["result"]["winner"], record["result"]["reason"]) == (None, "abandoned")
    assert await redis.zscore(bus_keys.live(0), room) is None


async def test_a_correspondence_game_nobody_moved_in_is_aborted_when_its_players_are_gone(
    node, redis
) -> None:
    """Days per move gave the first move 14 days: two connections could leave a playing
    room behind for two weeks. Once both players are gone for the abandon limit it is
    aborted like an untimed one; a correspondence game with a move keeps its clock."""
    clock = {"days_per_move": 14}
    a, b = await client(node, "127.0.0.71"), await client(node, "127.0.0.72")
    watcher = await client(node, "127.0.0.73")
    try:
        idle = (await a.create("chess", seat=0, clock=clock))["room"]
        await b.join(idle)
        played = (await a.create("chess", seat=0, clock=clock))["room"]
        await b.join(played)
        await a.move(played, "e2e4")
        await b.wait_state(played, lambda s: len(s["moves"]) == 1, timeout=10)
        await watcher.watch(idle)
        await watcher.watch(played)
    finally:
        await a.close()
        await b.close()
    left = time.monotonic()
    try:
        over = await watcher.wait_state(
            idle, lambda s: s["status"] == "over", timeout=ABANDON_S + 2 * SWEEP_S + 5
        )
        assert time.monotonic() - left >= ABANDON_S - 0.5
        assert over["event"]["kind"] == "abort"
        assert over["result"]["reason"].startswith("aborted")
        # Swept more than once since: the game with a move is still on its clock.
        await asyncio.sleep(2 * SWEEP_S)
        assert watcher.states[played]["status"] == "playing"
        assert await redis.zscore(bus_keys.live(0), played) is not None
    finally:
        await watcher.close()
    assert await redis.zscore(bus_keys.live(0), idle) is None
    assert await redis.zscore(bus_keys.deadlines(0), idle) is None  # its 14-day first move is off
    assert await redis.zscore(bus_keys.deadlines(0), played) is not None  # its move's days run
    await eventually(lambda: room_gone(redis, idle), FINISHED_S + 5)
    status, _ = await get_json(f"{node.http_url}/api/games/{idle}")
    assert status == 404


async def test_the_room_budget_holds_across_a_minute_boundary(
    boundary_rooms: Future[list[float]],
) -> None:
    """A fixed clock minute let one address make the budget just before a minute boundary
    and again just after it. Rooms are made as fast as allowed from a little before a
    boundary to a little after it: no 60 s span may hold more than the budget (plus one)."""
    made = await asyncio.wrap_future(boundary_rooms)
    assert made, "no room made at all"
    most = max(sum(1 for t in made if start <= t < start + 60) for start in made)
    assert most <= BUDGET + 1, f"{most} rooms within 60 s (budget {BUDGET})"


async def test_a_refunded_room_is_given_back_to_the_budget(own_redis) -> None:
    """A room counted and then not made (the seek was gone) costs nothing: exactly one
    more room fits after a refund, and a refund of a count already gone is harmless."""
    redis = aioredis.from_url(own_redis.url, decode_responses=True)
    counters = AddressCounters(redis, "test-node")
    limiter = AddressLimiter(counters, Limits(creates_per_minute=BUDGET))
    address = "192.0.2.81"  # documentation range: never a test client's
    try:
        counted = [await limiter.count_create(address) for _ in range(BUDGET)]
        with pytest.raises(LimitExceeded):
            await limiter.count_create(address)
        await limiter.refund_create(counted[0])
        await limiter.refund_create(counted[0])  # twice: gives back one room only
        await limiter.count_create(address)
        with pytest.raises(LimitExceeded) as refusal:
            await limiter.count_create(address)
        assert refusal.value.code == "rate/limited"
    finally:
        await redis.aclose()
