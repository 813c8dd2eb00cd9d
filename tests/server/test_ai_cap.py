"""The cap on games against the computer counts what a person is actually playing.

Issue 21: trying the games against the computer one after another, going back to the
lobby each time, a new user was refused an eighth game ("this address already has 8
unfinished games against the AI") without being told which games counted; and everyone
behind one shared address shared those 8. Against real ``kibitz serve`` processes on a
real Redis, with clients on loopback addresses of their own (127.0.0.N):

- games whose human has been gone longer than the grace (``KIBITZ_AI_GAME_GRACE``) do
  not count, while connected ones, and ones left less than the grace ago, do;
- the refusal (``rate/ai_games``, as before) names the games that count, in its text and
  as the error's ``rooms``;
- a signed-in player counts per account: the same account on two addresses shares one
  cap, while guests behind one address share theirs (as before) without blocking an
  account playing from that address;
- an untimed game against the computer whose human has been gone for the (shortened)
  day is ended: abandoned once someone moved, aborted if nobody did, and leaves the cap.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient, new_player_key
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.store import AI_GAMES_KEPT, AI_GAMES_LISTED
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, expire_heartbeat, node_name, start_server
from tests.server.accounts.web import signup

pytestmark = pytest.mark.asyncio

CAP = 8
GRACE_S = 2.0  # the brief node's grace: a game left this long stops counting
ABANDON_AI_S = 3.0  # the sweeping node's "day": an AI game left this long is ended
SWEEP_S = 2.0  # the archiver sweeps about once a second (after a blocking read)
_rids = itertools.count(1)


@pytest.fixture(scope="module")
def nodes(
    own_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two nodes of one cluster with the default cap: one with the default grace (ten
    minutes), one with a grace of GRACE_S."""
    db: Path = tmp_path_factory.mktemp("ai-cap-db") / "games.sqlite3"
    env = {"KIBITZ_MAX_AI_GAMES_PER_ADDRESS": str(CAP)}
    short = {**env, "KIBITZ_AI_GAME_GRACE": str(GRACE_S)}
    patient = start_server(own_redis.url, extra_env=env, database_url=f"sqlite:///{db}")
    try:
        brief = start_server(own_redis.url, extra_env=short, database_url=f"sqlite:///{db}")
    except BaseException:
        patient.stop()
        raise
    yield patient, brief
    brief.stop()
    patient.stop()


@pytest.fixture
def patient(nodes: tuple[ServerProcess, ServerProcess]) -> ServerProcess:
    return nodes[0]


@pytest.fixture
def brief(nodes: tuple[ServerProcess, ServerProcess]) -> ServerProcess:
    return nodes[1]


async def client(node: ServerProcess, address: str, cookie: str | None = None) -> KibitzClient:
    """A connection from ``address`` (any 127.0.0.N is loopback), signed in by ``cookie``."""
    headers = {"Cookie": f"kibitz_session={cookie}"} if cookie else None
    return await KibitzClient.open(
        node.http_url, local_addr=(address, 0), additional_headers=headers
    )


async def create_ai(player: KibitzClient) -> dict[str, Any]:
    """``create`` a tic-tac-toe game against level 1 (the human first): the reply, a
    ``seat`` or the ``error`` with all its fields."""
    rid = f"cap-{next(_rids)}"
    message = {"type": "create", "game": "tictactoe", "opponent": "ai:1", "seat": 0, "rid": rid}
    await player.send(message)
    reply = await player.next_message(lambda m: m.get("rid") == rid, timeout=15)
    if reply["type"] == "seat":
        player.tokens[reply["room"]] = (reply["seat"], reply["token"])
    return reply


async def open_games(player: KibitzClient, count: int) -> list[str]:
    """``count`` new AI games, each admitted: their room ids."""
    rooms = []
    for _ in range(count):
        reply = await create_ai(player)
        assert reply["type"] == "seat", reply
        rooms.append(reply["room"])
    return rooms


def refused(reply: dict[str, Any]) -> list[str]:
    """The rooms a ``rate/ai_games`` refusal names (asserting it is one)."""
    assert reply["type"] == "error" and reply["code"] == "rate/ai_games", reply
    rooms = reply["rooms"]
    assert isinstance(rooms, list)
    for room in rooms:
        assert room in reply["message"]
    return rooms


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float, every_s: float = 0.2
) -> Any:
    """``check()``'s first truthy answer, polled every ``every_s`` until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await check()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"still false after {timeout} s"
        await asyncio.sleep(every_s)


# -- what counts ----------------------------------------------------------------------------


async def test_connected_games_count_and_the_refusal_names_them(patient: ServerProcess) -> None:
    async with await client(patient, "127.0.0.81") as player:
        rooms = await open_games(player, CAP)
        reply = await create_ai(player)
        assert sorted(refused(reply)) == sorted(rooms)
        assert f"at most {CAP}" in reply["message"]
        assert "this address" in reply["message"]
        # Finishing one frees its place; the refusal comes back with the new one in it.
        await player.resign(rooms[0])
        [fresh] = await open_games(player, 1)
        assert sorted(refused(await create_ai(player))) == sorted([*rooms[1:], fresh])


async def test_games_left_less_than_the_grace_ago_still_count(patient: ServerProcess) -> None:
    async with await client(patient, "127.0.0.82") as first:
        rooms = await open_games(first, CAP)
    # Gone, but only just (the default grace is ten minutes): a new connection from the
    # same address, and another node, are refused with the same games.
    async with await client(patient, "127.0.0.82") as again:
        assert sorted(refused(await create_ai(again))) == sorted(rooms)


async def test_games_left_past_the_grace_do_not_block_a_new_one(brief: ServerProcess) -> None:
    async with await client(brief, "127.0.0.83") as first:
        left = await open_games(first, CAP)
        await first.move(left[0], "5")  # a game with a move counts alike
    gone_at = time.monotonic()
    async with await client(brief, "127.0.0.83") as again:
        assert sorted(refused(await create_ai(again))) == sorted(left)  # within the grace

        async def admitted() -> str | None:
            reply = await create_ai(again)
            return reply["room"] if reply["type"] == "seat" else None

        # Each try costs one of the connection's 20 creates a minute: few tries.
        await asyncio.sleep(GRACE_S)
        first_new = await eventually(admitted, 10, every_s=0.5)
        assert time.monotonic() - gone_at >= GRACE_S - 0.5
        # The left games stay resumable, but only the ones being played count now.
        playing = [first_new, *await open_games(again, CAP - 1)]
        assert sorted(refused(await create_ai(again))) == sorted(playing)
        # Coming back to a left game makes it count again.
        await again.resume(left[1], token=first.tokens[left[1]][1])
        await again.resign(playing[0])
        assert left[1] in refused(await create_ai(again))


async def test_games_left_are_kept_only_up_to_a_bound(own_redis: EmbeddedRedis) -> None:
    """Leaving games is no way around the cap: an owner keeps at most AI_GAMES_KEPT
    unfinished ones in all (the sweeper ends the left ones after a day), and past that
    the refusal names some of them, at most AI_GAMES_LISTED. On a node of its own whose
    cap is half AI_GAMES_KEPT, so that two rounds of leaving games reach the bound (with
    the module's CAP it takes eight, each waiting out the grace)."""
    wide = AI_GAMES_KEPT // 2
    env = {"KIBITZ_MAX_AI_GAMES_PER_ADDRESS": str(wide), "KIBITZ_AI_GAME_GRACE": str(GRACE_S)}
    node = start_server(own_redis.url, extra_env=env)
    try:
        left: list[str] = []
        tokens: dict[str, str] = {}
        for _ in range(AI_GAMES_KEPT // wide):  # ``wide`` at a time, left for the grace
            for _ in range(wide // CAP):  # CAP rooms a connection (it may create 20 a minute)
                async with await client(node, "127.0.0.90") as player:
                    left += await open_games(player, CAP)
                    tokens |= {room: token for room, (_seat, token) in player.tokens.items()}
            await asyncio.sleep(GRACE_S + 0.3)
        async with await client(node, "127.0.0.90") as again:
            reply = await create_ai(again)
            named = refused(reply)
            assert len(named) == AI_GAMES_LISTED and set(named) <= set(left)
            assert f"{AI_GAMES_KEPT} unfinished games" in reply["message"]
            # One ended makes room for one more.
            again.tokens[named[0]] = (0, tokens[named[0]])
            await again.resume(named[0], token=tokens[named[0]])
            await again.resign(named[0])
            assert (await create_ai(again))["type"] == "seat"
    finally:
        node.stop()


async def test_games_on_a_node_that_died_count_again_once_resumed(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A node dies with a player's connections: nobody records their departure, and the
    games they played there stop counting once the node's heartbeat has expired (the
    player is no longer connected to them anywhere), not before; resumed on another node,
    one counts again. The expiry is brought forward (``expire_heartbeat``) rather than
    waited for."""
    folder = tmp_path_factory.mktemp("ai-cap-died")
    redis = EmbeddedRedis(folder / "redis", persist=False).start()
    env = {"KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "2"}
    nodes: list[ServerProcess] = []
    try:
        for _ in range(2):
            nodes.append(start_server(redis.url, extra_env=env))
        dying, staying = nodes
        dead = node_name(dying)
        player = await client(dying, "127.0.0.91")
        rooms = await open_games(player, 2)
        tokens = {room: player.tokens[room][1] for room in rooms}
        async with await client(staying, "127.0.0.91") as other:
            assert sorted(refused(await create_ai(other))) == sorted(rooms)
            dying.process.kill()
            dying.process.wait()
            # While the dead node's heartbeat lives, its games still count...
            assert sorted(refused(await create_ai(other))) == sorted(rooms)
            expire_heartbeat(redis.url, dead)

            async def admitted() -> str | None:
                reply = await create_ai(other)
                return reply["room"] if reply["type"] == "seat" else None

            fresh = await eventually(admitted, 10, every_s=0.5)  # ...and then no longer
            other.tokens[rooms[0]] = (0, tokens[rooms[0]])
            await other.resume(rooms[0], token=tokens[rooms[0]])
            assert sorted(refused(await create_ai(other))) == sorted([rooms[0], fresh])
        await player.close()
    finally:
        for node in nodes:
            node.stop()
        redis.stop()


# -- whose games count together -------------------------------------------------------------


async def test_two_guests_behind_one_address_share_its_cap(patient: ServerProcess) -> None:
    async with (
        await client(patient, "127.0.0.84") as one,
        await client(patient, "127.0.0.84") as other,
    ):
        rooms = await open_games(one, CAP // 2) + await open_games(other, CAP - CAP // 2)
        assert sorted(refused(await create_ai(one))) == sorted(rooms)
        assert sorted(refused(await create_ai(other))) == sorted(rooms)


async def sign_up(node: ServerProcess, name: str) -> str:
    """A new account (through the accounts API): its session cookie's value."""
    return await signup(node.http_url, name)


@pytest.fixture
async def account(patient: ServerProcess) -> AsyncIterator[str]:
    yield await sign_up(patient, "cap" + new_player_key()[:8].replace("-", "x").replace("_", "y"))


async def test_a_signed_in_player_on_two_addresses_shares_one_cap(
    nodes: tuple[ServerProcess, ServerProcess], account: str
) -> None:
    patient, brief = nodes
    async with (
        await client(patient, "127.0.0.85", account) as home,
        await client(brief, "127.0.0.86", account) as school,
    ):
        rooms = await open_games(home, 5) + await open_games(school, CAP - 5)
        reply = await create_ai(home)
        assert sorted(refused(reply)) == sorted(rooms)
        assert "you are" in reply["message"]
        assert sorted(refused(await create_ai(school))) == sorted(rooms)
        # Neither address is charged for the account's games: a guest there plays.
        async with await client(patient, "127.0.0.86") as guest:
            assert (await create_ai(guest))["type"] == "seat"


async def test_an_account_is_not_blocked_by_the_guests_of_its_address(
    patient: ServerProcess, account: str
) -> None:
    async with await client(patient, "127.0.0.87") as guest:
        rooms = await open_games(guest, CAP)
        assert sorted(refused(await create_ai(guest))) == sorted(rooms)
        async with await client(patient, "127.0.0.87", account) as member:
            mine = await open_games(member, CAP)
            assert sorted(refused(await create_ai(member))) == sorted(mine)
        assert sorted(refused(await create_ai(guest))) == sorted(rooms)


# -- the sweeper ends what is left ----------------------------------------------------------


@pytest.fixture(scope="module")
def sweeping(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A node whose "day" is ABANDON_AI_S, on a Redis of its own (a node's sweeper ends
    the games of every node by its own lifetimes), with a cap of 2."""
    folder = tmp_path_factory.mktemp("ai-cap-sweep")
    redis = EmbeddedRedis(folder / "redis", persist=False).start()
    env = {"KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "2", "KIBITZ_ABANDON_AI_AFTER": str(ABANDON_AI_S)}
    try:
        node = start_server(redis.url, extra_env=env, database_url=f"sqlite:///{folder}/g.db")
    except BaseException:
        redis.stop()
        raise
    yield node
    node.stop()
    redis.stop()


async def test_an_ai_game_left_for_the_day_is_ended_and_leaves_the_cap(
    sweeping: ServerProcess,
) -> None:
    """Abandoned with a move, aborted (never archived) without one; a game whose human
    is still there is left alone, and still counts."""
    key = new_player_key()
    async with (
        await client(sweeping, "127.0.0.89") as watcher,
        await client(sweeping, "127.0.0.88") as stays,
    ):
        async with await client(sweeping, "127.0.0.88") as human:
            played = (await human.create("tictactoe", "ai:1", seat=0, player_key=key))["room"]
            await human.move(played, "5")
            await human.wait_state(played, lambda s: len(s["moves"]) == 1, timeout=10)
            untouched = (await human.create("tictactoe", "ai:1", seat=0, player_key=key))["room"]
            for room in (played, untouched):
                await watcher.watch(room)
        left = time.monotonic()
        limit = ABANDON_AI_S + 2 * SWEEP_S + 5
        # Left less than the grace ago (ten minutes here): both still count.
        assert sorted(refused(await create_ai(stays))) == sorted([played, untouched])
        over = await watcher.wait_state(played, lambda s: s["status"] == "over", limit)
        assert time.monotonic() - left >= ABANDON_AI_S - 0.5
        assert (over["result"]["winner"], over["result"]["reason"]) == (None, "abandoned")
        aborted = await watcher.wait_state(untouched, lambda s: s["status"] == "over", limit)
        assert aborted["result"]["termination"] == "abort"
        # Ended, they left the cap: two new games; the one connected is never ended.
        kept = await open_games(stays, 2)
        await asyncio.sleep(ABANDON_AI_S + 2 * SWEEP_S)
        assert sorted(refused(await create_ai(stays))) == sorted(kept)

        async def archived() -> list[str]:
            url = f"{sweeping.http_url}/api/games?player={player_id(key)}"
            async with aiohttp.ClientSession() as http, http.get(url) as reply:
                return [game["id"] for game in (await reply.json())["games"]]

        assert await eventually(archived, 10) == [played]  # the aborted one never is
