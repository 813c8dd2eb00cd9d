"""The quick pairing pool: the pairing rules (pure), then end to end on real nodes sharing
a Redis and a SQLite archive of this module's own, with real sockets: the closest ratings
paired, windows widening with the wait, pairing across nodes, entries gone with their
connection or their node, and bad messages refused."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.server.services.pool import (
    WINDOW_MOST,
    WINDOW_START,
    Waiting,
    choose_pairs,
    may_pair,
    pool_name,
    window,
)
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, expire_heartbeat, start_server
from tests.server.accounts.web import signup
from tests.server.services.seekers import (
    ENV,
    no_seat,
    open_as,
    post,
    set_rating,
    unique,
)

#: Every test waits in pools of its own: a clock no other test uses.
_CLOCKS = itertools.count(181_000, 1000)


def fresh_blitz() -> dict[str, int]:
    """A chess blitz time control no other test's pool has (3:01 + 2, 3:02 + 2, ...)."""
    return {"initial_ms": next(_CLOCKS), "increment_ms": 2000}


# -- the rules (pure) ------------------------------------------------------------------------


def test_a_window_widens_with_the_wait_up_to_its_most() -> None:
    assert window(0) == WINDOW_START == 100
    assert window(4_999) == 100
    assert window(5_000) == 150
    assert window(12_000) == 200
    assert window(10**9) == WINDOW_MOST == 800
    assert window(1_000, widen_every_ms=250) == 300  # a shorter step (tests)
    # Two windows at their widest reach 1600 points, and no further.
    late = 10**9
    assert choose_pairs([Waiting("x", 1000, 0), Waiting("y", 2600, 0)], late) != []
    assert choose_pairs([Waiting("x", 1000, 0), Waiting("y", 2601, 0)], late) == []


def test_the_closest_ratings_are_paired_first() -> None:
    a, b, c = Waiting("a", 1400, 0), Waiting("b", 1800, 0), Waiting("c", 1720, 0)
    assert choose_pairs([a, b, c], now_ms=0) == [(b, c)]
    # Windows overlap: 1400 and 1600 are paired at once (100 + 100 >= 200), 1400 and 1601
    # only after one of them has waited a step.
    assert may_pair(Waiting("x", 1400, 0), Waiting("y", 1600, 0), 0)
    assert not may_pair(Waiting("x", 1400, 0), Waiting("y", 1601, 0), 0)
    assert may_pair(Waiting("x", 1400, 0), Waiting("y", 1601, 100), 5_000)


def test_ties_go_to_the_longest_waiting_and_each_player_is_paired_once() -> None:
    old, new, mid = Waiting("old", 1500, 0), Waiting("new", 1500, 900), Waiting("mid", 1500, 10)
    pairs = choose_pairs([new, mid, old], now_ms=1000)
    assert pairs == [(old, mid)]  # "new" waits on: the three are one pair and one left
    four = [Waiting(str(i), 1500 + 10 * i, i) for i in range(4)]
    assert sorted((p.id, q.id) for p, q in choose_pairs(four, 10)) == [("0", "1"), ("2", "3")]


def test_one_player_is_never_paired_with_themselves_and_exclusions_hold() -> None:
    twice = [Waiting("a", 1500, 0, player="p"), Waiting("b", 1500, 0, player="p")]
    assert choose_pairs(twice, 0) == []
    same_account = [Waiting("a", 1500, 0, account_id=7), Waiting("b", 1500, 0, account_id=7)]
    assert choose_pairs(same_account, 0) == []
    a, b, c = Waiting("a", 1500, 0), Waiting("b", 1490, 0), Waiting("c", 1600, 0)
    assert choose_pairs([a, b, c], 0, excluded=frozenset({frozenset({"a", "b"})})) == [(a, c)]


def test_one_player_waiting_twice_is_paired_once_in_a_tick() -> None:
    """Two entries of one account (two tabs, before the join refused the second) or of
    one guest key: of one tick's pairs, the player is in one at most."""
    for me in ({"account_id": 7}, {"player": "p"}):
        one, two = Waiting("a1", 1500, 0, **me), Waiting("a2", 1500, 1, **me)  # type: ignore[arg-type]
        b, c = Waiting("b", 1500, 2), Waiting("c", 1500, 3)
        pairs = choose_pairs([one, two, b, c], now_ms=10)
        assert pairs == [(one, b)], me


def test_a_pool_is_a_game_a_time_control_and_rated_or_casual() -> None:
    assert pool_name("chess", {"initial_ms": 180000, "increment_ms": 2000}, True) == (
        "chess:180000+2000:rated"
    )
    assert pool_name("oware", {"days_per_move": 3}, False) == "oware:3d:casual"
    assert pool_name("tictactoe", None, False) == "tictactoe:untimed:casual"


# -- end to end ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pool") / "games.sqlite3"


@pytest.fixture(scope="module")
def cluster(own_redis: EmbeddedRedis, database: Path) -> Iterator[list[ServerProcess]]:
    """Two nodes with the default widening (every 5 s), and a third that widens every
    0.25 s (the widening test waits on it alone)."""
    url = f"sqlite:///{database}"
    fast = {**ENV, "KIBITZ_POOL_WIDEN_EVERY_S": "0.25"}
    nodes = [start_server(own_redis.url, database_url=url, extra_env=ENV) for _ in range(2)]
    nodes.append(start_server(own_redis.url, database_url=url, extra_env=fast))
    yield nodes
    for node in nodes:
        node.stop()


@pytest.fixture
def pool_hash(own_redis: EmbeddedRedis) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    yield client
    client.close()


async def rated_player(
    node: ServerProcess, database: Path, stem: str, rating: float, speed: str = "blitz"
) -> KibitzClient:
    """A signed-in client on ``node`` whose chess rating at ``speed`` is ``rating``."""
    name = unique(stem)
    cookie = await signup(node.http_url, name)
    set_rating(database, name, "chess", speed, rating)
    return await open_as(node, cookie)


async def paired(*clients: KibitzClient, timeout: float = 10.0) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(c.wait_paired(timeout) for c in clients)))


async def close_all(*clients: KibitzClient) -> None:
    for client in clients:
        await client.close()


async def test_the_two_closest_of_three_are_paired(cluster, database) -> None:
    clock = fresh_blitz()
    far = await rated_player(cluster[0], database, "far", 1400)
    high = await rated_player(cluster[1], database, "high", 1800)
    near = await rated_player(cluster[0], database, "near", 1720)
    try:
        joined = await far.pool_join("chess", clock, rated=True)
        assert joined["type"] == "pool_joined" and joined["rating"] == 1400
        assert (joined["game"], joined["clock"], joined["rated"]) == ("chess", clock, True)
        await high.pool_join("chess", clock, rated=True)
        await no_seat(far, 1.5)  # 1400 and 1800: 400 apart, windows of 100 each
        await near.pool_join("chess", clock, rated=True)
        seats = await paired(high, near)
        assert seats[0]["room"] == seats[1]["room"]
        assert {seats[0]["seat"], seats[1]["seat"]} == {0, 1}
        room = seats[0]["room"]
        state = await near.wait_state(room, lambda s: True)
        assert state["rated"] is True and state["status"] == "playing"
        assert sorted(s["rating"] for s in state["seats"]) == [1720, 1800]
        await no_seat(far, 1.0)
        # The players play the room they were given, whichever node they are on.
        mover = high if seats[0]["seat"] == 0 else near
        await mover.move(room, "e2e4")
        other = near if mover is high else high
        await other.wait_state(room, lambda s: len(s["moves"]) == 1)
        await far.pool_leave()
        with pytest.raises(ServerError) as unknown:
            await far.pool_leave()
        assert unknown.value.code == "pool/unknown"
    finally:
        await close_all(far, high, near)


async def test_the_window_widens_until_far_ratings_pair(cluster, database) -> None:
    clock = fresh_blitz()
    fast = cluster[2]  # widens every 0.25 s: 1500 and 2100 meet once each window is 300
    low = await rated_player(fast, database, "low", 1500)
    high = await rated_player(fast, database, "high", 2100)
    try:
        await low.pool_join("chess", clock, rated=True)
        await high.pool_join("chess", clock, rated=True)
        started = asyncio.get_running_loop().time()
        seats = await paired(low, high, timeout=15)
        waited = asyncio.get_running_loop().time() - started
        assert seats[0]["room"] == seats[1]["room"]
        # Four steps of 50 for the later one (1 s), a little less for the first: not at once.
        assert 0.6 <= waited < 10, waited
    finally:
        await close_all(low, high)


async def test_accounts_that_block_each_other_are_not_paired(cluster, database) -> None:
    clock = fresh_blitz()
    names = [unique(stem) for stem in ("pblocker", "pblocked", "pthird")]
    cookies = [await signup(cluster[0].http_url, name) for name in names]
    for name, rating in zip(names, (1500, 1510, 1560), strict=True):
        set_rating(database, name, "chess", "blitz", rating)
    assert await post(cluster[0].http_url, f"/api/players/{names[1]}/block", cookies[0]) == 200
    blocker, blocked = await open_as(cluster[0], cookies[0]), await open_as(cluster[1], cookies[1])
    third = await open_as(cluster[1], cookies[2])
    try:
        await blocker.pool_join("chess", clock, rated=True)
        await blocked.pool_join("chess", clock, rated=True)
        await no_seat(blocker, 2.0)  # 10 points apart, yet never a pair
        await third.pool_join("chess", clock, rated=True)
        seat = await third.wait_paired(10)
        state = await third.wait_state(seat["room"], lambda s: True)
        accounts = {s["account"] for s in state["seats"]}
        assert names[2] in accounts and len(accounts & set(names[:2])) == 1
    finally:
        await close_all(blocker, blocked, third)


async def test_players_on_two_nodes_are_paired(cluster) -> None:
    first, second = await open_as(cluster[0]), await open_as(cluster[1])
    try:
        clock = {"initial_ms": 60_000, "increment_ms": 1000}
        joined = await first.pool_join("tictactoe", clock, name="ann")
        assert joined["rating"] == 1500 and joined["rated"] is False  # a guest: 1500
        await second.pool_join("tictactoe", clock, name="bob")
        seats = await paired(first, second)
        assert seats[0]["room"] == seats[1]["room"]
        room = seats[0]["room"]
        state = await second.wait_state(room, lambda s: True)
        assert sorted(s["name"] for s in state["seats"]) == ["ann", "bob"]
        assert "rated" not in state
        mover = first if seats[0]["seat"] == 0 else second
        await mover.move(room, "5")
        other = second if mover is first else first
        moved = await other.wait_state(room, lambda s: len(s["moves"]) == 1)
        assert moved["moves"][0]["move"] == "5"
    finally:
        await close_all(first, second)


async def test_a_closed_connection_leaves_the_pool(cluster, pool_hash) -> None:
    clock = {"initial_ms": 61_000, "increment_ms": 1000}
    gone = await open_as(cluster[0])
    await gone.pool_join("tictactoe", clock)
    assert pool_hash.hlen(keys.POOL) >= 1
    await gone.close()
    for _ in range(50):  # bounded: 5 s
        if not any(f":{61_000}+" in v for v in pool_hash.hvals(keys.POOL)):
            break
        await asyncio.sleep(0.1)
    assert not any(f":{61_000}+" in v for v in pool_hash.hvals(keys.POOL))
    late, later = await open_as(cluster[1]), await open_as(cluster[0])
    try:
        await late.pool_join("tictactoe", clock)
        await no_seat(late, 2.0)  # nobody to pair with: the first player went
        await later.pool_join("tictactoe", clock)
        seats = await paired(late, later)
        assert seats[0]["room"] == seats[1]["room"]
    finally:
        await close_all(late, later)


async def test_a_dead_nodes_entry_is_not_paired(cluster, own_redis, database, pool_hash) -> None:
    """A node killed outright cannot take its players out of the pools: their entries stop
    counting once its heartbeat expires (15 s; brought forward here), and are pruned."""
    doomed = start_server(own_redis.url, database_url=f"sqlite:///{database}", extra_env=ENV)
    clock = {"initial_ms": 62_000, "increment_ms": 1000}
    try:
        stranded = await open_as(doomed)
        node = stranded.welcome["node"] if stranded.welcome else ""
        await stranded.pool_join("tictactoe", clock)
        doomed.process.kill()  # no goodbye: SIGKILL
        doomed.process.wait()
        stranded.ws.transport.abort()
        expire_heartbeat(own_redis.url, node)
        assert not pool_hash.exists(keys.node_key(node))
        waiting = await open_as(cluster[0])
        try:
            await waiting.pool_join("tictactoe", clock)
            await no_seat(waiting, 2.5)
            assert not any(node in v for v in pool_hash.hvals(keys.POOL))  # pruned
        finally:
            await waiting.close()
    finally:
        doomed.stop()


async def test_bad_pool_messages_are_refused_with_their_codes(cluster) -> None:
    async with await open_as(cluster[0]) as guest:
        for message, code in (
            ({"type": "pool_join"}, "message/invalid"),
            ({"type": "pool_join", "game": "go"}, "game/unknown"),
            ({"type": "pool_join", "game": "chess", "clock": {"initial_ms": 5}}, "clock/invalid"),
            ({"type": "pool_join", "game": "chess", "rated": "yes"}, "message/invalid"),
            ({"type": "pool_join", "game": "chess", "rated": True}, "auth/required"),
            ({"type": "pool_leave"}, "pool/unknown"),
        ):
            with pytest.raises(ServerError) as bad:
                await guest.request(message)
            assert bad.value.code == code, (message, bad.value)
        await guest.pool_join("othello", {"initial_ms": 63_000, "increment_ms": 0})
        with pytest.raises(ServerError) as twice:
            await guest.pool_join("othello", {"initial_ms": 64_000, "increment_ms": 0})
        assert twice.value.code == "pool/already"
        await guest.pool_leave()


async def test_an_address_may_wait_in_only_so_many_pools(cluster, pool_hash) -> None:
    clients = [await open_as(cluster[i % 2]) for i in range(11)]
    try:
        for i, client in enumerate(clients[:10]):  # ten pools: nobody to pair with
            await client.pool_join("oware", {"initial_ms": 100_000 + 1000 * i})
        with pytest.raises(ServerError) as full:
            await clients[10].pool_join("oware", {"initial_ms": 200_000})
        assert full.value.code == "pool/full"
        await clients[0].pool_leave()
        await clients[10].pool_join("oware", {"initial_ms": 200_000})
    finally:
        await close_all(*clients)


async def test_a_player_whose_entry_was_lost_is_told_it_waits_no_more(cluster, pool_hash) -> None:
    """A pairing node that dies between taking a pair and telling the players' nodes
    leaves them waiting on nothing: their node tells them ``pool_left`` (unasked) once
    their entry has been gone LOST_AFTER_MS (10 s) without a pairing."""
    clock = {"initial_ms": 65_000, "increment_ms": 1000}
    async with await open_as(cluster[1]) as player:
        await player.pool_join("tictactoe", clock)
        [entry_id] = [k for k, v in pool_hash.hgetall(keys.POOL).items() if ":65000+" in v]
        pool_hash.hdel(keys.POOL, entry_id)  # what the dead pairing node's take left
        left = await player.next_message(lambda m: m["type"] == "pool_left", timeout=20)
        assert "rid" not in left
        again = await player.pool_join("tictactoe", clock)  # free to join again
        assert again["type"] == "pool_joined"
        await player.pool_leave()


async def test_one_account_waits_once_whatever_its_tabs(cluster) -> None:
    """Two connections of one account (two tabs, two nodes): the second join is refused
    ``pool/already``, so one tick cannot pair the account twice."""
    cookie = await signup(cluster[0].http_url, unique("tabs"))
    first, second = await open_as(cluster[0], cookie), await open_as(cluster[1], cookie)
    clock = fresh_blitz()
    try:
        await first.pool_join("chess", clock)
        for other in (clock, fresh_blitz()):  # the same pool, or another
            with pytest.raises(ServerError) as twice:
                await second.pool_join("chess", other)
            assert twice.value.code == "pool/already"
        await first.pool_leave()
        await second.pool_join("chess", clock)  # once left, the other tab may wait
        await second.pool_leave()
    finally:
        await close_all(first, second)
