"""Games on a real Redis Cluster, end to end: two nodes, two workers, 3 primaries.

- Rooms: players on different nodes play whole games in rooms spread over all three
  primaries; a spectator of each room (on either node) sees every version once, in order;
  the lobby lists the rooms of every group.
- Archive: each of those games reaches the database once, and every group's archive
  stream is left empty with nothing pending.
- Clocks: a flag falls on time in rooms on each primary (the sweeper reads every group).
- Fairness: one address floods the AI with level-8 chess games (in rooms of many groups)
  up to its AI-game limit, counted across the groups; a newcomer's AI moves are not
  starved (test_abuse.py's bound).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

import pytest
import redis

from kibitz.client.connection import KibitzClient
from kibitz.server.archive.database import Archive
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded_cluster import EmbeddedClusterNode
from tests.chaos.harness import (
    Cluster,
    DrivenGame,
    Node,
    Player,
    async_wait_until,
    get_json,
    new_rid,
    open_client,
    play_all,
    report,
)
from tests.chaos.test_abuse import AI_MOVE_BOUND_S, ai_move_delays
from tests.server.test_clocks import GRACE_S, first_moves, wait_over

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]

PRIMARIES = 3


def primaries_of(cluster: Cluster, rooms: list[str]) -> dict[str, list[str]]:
    """Primary address -> the rooms it serves."""
    out: dict[str, list[str]] = {}
    for room in rooms:
        out.setdefault(cluster.primary_of_room(room).address, []).append(room)
    return out


class Spectator:
    """A client watching one room: every state it is sent, in order."""

    def __init__(self, client: KibitzClient, room: str, first: dict[str, Any]) -> None:
        self.client = client
        self.room = room
        self.first = first
        self.versions: list[int] = []
        self.last = first
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            state = await self.client.next_message(
                lambda m: m["type"] == "state" and m["room"] == self.room, timeout=3600
            )
            self.last = state
            if state["event"]["kind"] not in ("presence", "resync"):
                self.versions.append(int(state["version"]))
            if state["status"] == "over":
                return

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task
        await self.client.close()


async def lobby_rooms(node: Node, rooms: list[str], timeout: float = 5.0) -> set[str]:
    """The rooms ``GET /api/rooms`` lists on ``node`` once it lists all of ``rooms`` (or
    when ``timeout`` has passed)."""
    deadline = time.monotonic() + timeout
    while True:
        status, page = await get_json(node.http_url + "/api/rooms?limit=100")
        listed = {r["room"] for r in page.get("rooms", [])} if status == 200 else set()
        if set(rooms) <= listed or time.monotonic() > deadline:
            return listed
        await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
async def spread_games(game_cluster: Cluster) -> dict[str, Any]:
    """Human games across the two nodes until every primary serves at least two of them,
    each with a spectator, played to the end: what the tests below check."""
    cluster = game_cluster
    a, b = cluster.nodes
    games: list[DrivenGame] = []
    spectators: list[Spectator] = []
    while len(games) < 24:
        by_primary = primaries_of(cluster, [g.room for g in games])
        if len(by_primary) == PRIMARIES and min(map(len, by_primary.values())) >= 2:
            break
        i = len(games)
        creator, joiner = (a, b) if i % 2 == 0 else (b, a)
        games.append(
            await DrivenGame.start(
                cluster, "tictactoe", creator, joiner, seed=900 + i, think=(0.0, 0.05)
            )
        )
        watcher = await open_client((b, a)[i % 2].http_url)
        spectators.append(Spectator(watcher, games[-1].room, await watcher.watch(games[-1].room)))
    lobby = await lobby_rooms(b, [g.room for g in games])
    problems = await play_all(games, timeout=60)
    for spectator in spectators:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(spectator.task), 10)
        await spectator.close()
    return {
        "games": games,
        "spectators": spectators,
        "problems": problems,
        "lobby": lobby,
        "by_primary": primaries_of(cluster, [g.room for g in games]),
    }


async def test_games_in_rooms_on_every_primary_and_their_spectators(
    game_cluster: Cluster, spread_games: dict[str, Any]
) -> None:
    problems = list(spread_games["problems"])
    by_primary = spread_games["by_primary"]
    print({address: len(rooms) for address, rooms in by_primary.items()})
    if len(by_primary) != PRIMARIES:
        problems.append(f"rooms on {len(by_primary)} primaries, not {PRIMARIES}: {by_primary}")
    groups = {keys.group_of(g.room) for g in spread_games["games"]}
    print(f"{len(spread_games['games'])} games in {len(groups)} groups")
    for spectator, game in zip(spread_games["spectators"], spread_games["games"], strict=True):
        assert game.record is not None
        final = game.record["events"][-1]["version"]
        start = int(spectator.first["version"])
        if spectator.versions != list(range(start + 1, final + 1)):
            problems.append(
                f"room {game.room}: the spectator saw versions {spectator.versions}, "
                f"not {start + 1}..{final}"
            )
        if [m["move"] for m in spectator.last["moves"]] != game.record["moves"]:
            problems.append(f"room {game.room}: the spectator's last view differs from Redis")
    missing = [g.room for g in spread_games["games"] if g.room not in spread_games["lobby"]]
    if missing:
        problems.append(f"the lobby left out rooms (of other groups?): {missing}")
    assert not problems, report(problems, game_cluster)


async def test_every_finished_game_is_archived_once(
    game_cluster: Cluster, spread_games: dict[str, Any]
) -> None:
    rooms = [g.room for g in spread_games["games"]]
    assert game_cluster.database_url is not None
    archive = await Archive.open(game_cluster.database_url)
    try:

        async def all_archived() -> bool:
            return all([await archive.get(room) is not None for room in rooms])

        await async_wait_until(all_archived, 20, "every game in the database")
        for game in spread_games["games"]:
            record = await archive.get(game.room)
            assert record is not None and game.record is not None
            assert [m["move"] for m in record["moves"]] == game.record["moves"], game.room
            assert record["result"] == game.record["result"], game.room
        page = await archive.list(limit=100)
        ids = [r["id"] for r in page.records]
        assert sorted(i for i in ids if i in rooms) == sorted(rooms)  # each once
    finally:
        await archive.close()
    # Every group's archive stream is emptied and acknowledged (the archiver reads each).
    r = game_cluster.sync_redis()
    try:

        def drained() -> list[str]:
            left = []
            for group in keys.groups():
                stream = keys.archive(group)
                if not r.exists(stream):
                    continue
                try:
                    pending = int(r.xpending(stream, keys.ARCHIVERS_GROUP)["pending"])
                except redis.ResponseError as exc:  # NOGROUP: no archiver reads it
                    left.append(f"{stream}: {exc}")
                    continue
                if r.xlen(stream) or pending:
                    left.append(f"{stream}: {r.xlen(stream)} entries, {pending} pending")
            return left

        deadline = time.monotonic() + 10
        while (left := await asyncio.to_thread(drained)) and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert not left, left
    finally:
        r.close()


# -- clocks -------------------------------------------------------------------------------

CLOCK_PLAYERS = "127.0.0.33"


async def rooms_on_every_primary(
    cluster: Cluster, node: Node, clock: dict[str, int]
) -> list[tuple[KibitzClient, str, EmbeddedClusterNode]]:
    """Rooms created on ``node`` (a client each) until one sits on each primary."""
    chosen: dict[str, tuple[KibitzClient, str, EmbeddedClusterNode]] = {}
    spare: list[KibitzClient] = []
    for _ in range(40):
        client = await open_client(node.http_url, CLOCK_PLAYERS)  # its own creates/minute
        room = (await client.create("tictactoe", "human", seat=0, clock=clock))["room"]
        primary = cluster.primary_of_room(room)
        if primary.address in chosen:
            spare.append(client)
        else:
            chosen[primary.address] = (client, room, primary)
        if len(chosen) == PRIMARIES:
            break
    for client in spare:
        await client.close()
    assert len(chosen) == PRIMARIES, f"rooms on {len(chosen)} primaries only"
    return list(chosen.values())


async def test_flags_fall_on_time_in_rooms_of_every_primary(game_cluster: Cluster) -> None:
    a, b = game_cluster.nodes
    clock = {"initial_ms": 1_000, "increment_ms": 0}
    rooms = await rooms_on_every_primary(game_cluster, a, clock)
    joiners = [await KibitzClient.open(b.http_url) for _ in rooms]
    try:
        for (_creator, room, _p), joiner in zip(rooms, joiners, strict=True):
            await joiner.join(room)
        pairs = [(c, j, room) for (c, room, _p), j in zip(rooms, joiners, strict=True)]
        await asyncio.gather(*(first_moves(c, j, room, ("1", "5")) for c, j, room in pairs))
        started = time.monotonic()
        # Nobody moves again: X's flag falls, read back through either node.
        finals = await asyncio.gather(
            *(wait_over((a, b)[i % 2].http_url, room, 10) for i, (_c, _j, room) in enumerate(pairs))
        )
        took = time.monotonic() - started
        flagged = {"winner": 1, "reason": "X ran out of time", "termination": "time"}
        assert [f["result"] for f in finals] == [flagged] * len(finals)
        print(f"flags on {[p.address for _c, _r, p in rooms]} fell within {took:.2f} s")
        assert took <= 1.0 + GRACE_S + 1.5, took
    finally:
        for client in [*(c for c, _r, _p in rooms), *joiners]:
            await client.close()


# -- fairness -----------------------------------------------------------------------------

FLOODER = "127.0.0.31"
NEWCOMER = "127.0.0.32"
AI_GAMES_PER_ADDRESS = 8  # the product's default (the harness's nodes keep it)


async def test_a_newcomer_is_not_starved_by_a_flood_over_many_groups(game_cluster: Cluster) -> None:
    cluster = game_cluster
    a, b = cluster.nodes
    problems: list[str] = []

    async def create(i: int) -> tuple[Node, KibitzClient, dict[str, Any]]:
        node = (a, b)[i % 2]
        client = await open_client(node.http_url, FLOODER)
        rid = new_rid()
        await client.send({"type": "create", "game": "chess", "opponent": "ai:8", "seat": 1,
                           "rid": rid})  # fmt: skip
        reply = await client.next_message(lambda m: m.get("rid") == rid, timeout=15)
        return node, client, reply

    flood: list[DrivenGame] = []
    refused: list[str | None] = []
    for i in range(AI_GAMES_PER_ADDRESS + 2):
        node, client, reply = await create(i)
        if reply["type"] == "seat":
            game = DrivenGame(cluster, reply["room"], "chess", random.Random(i), (0.0, 0.05))
            game.players.append(Player(game, 1, reply["token"], client, node.http_url, FLOODER))
            flood.append(game)
        else:
            refused.append(reply.get("code"))
            await client.close()
    by_primary = primaries_of(cluster, [g.room for g in flood])
    print(f"flood: {len(flood)} games on {len(by_primary)} primaries, refused {refused}")
    if len(flood) != AI_GAMES_PER_ADDRESS or refused != ["rate/ai_games"] * 2:
        problems.append(
            f"the AI-game limit over groups: {len(flood)} accepted (limit "
            f"{AI_GAMES_PER_ADDRESS}), refusals {refused}"
        )
    if len(by_primary) < 2:
        problems.append(f"the flood's rooms are all on one primary: {by_primary}")
    flooders = [asyncio.create_task(g.play(60)) for g in flood]
    try:
        await asyncio.sleep(1.0)  # both workers are deep in level-8 searches by now
        newcomer = await DrivenGame.start(
            cluster, "tictactoe", a, opponent="ai:1", addrs=(NEWCOMER, None), seed=950,
            think=(0.2, 0.4),
        )  # fmt: skip
        await newcomer.play(40)
    finally:
        for task in flooders:
            task.cancel()
        await asyncio.gather(*flooders, return_exceptions=True)
    problems += await newcomer.verify()
    problems += ai_move_delays(newcomer, AI_MOVE_BOUND_S)
    await newcomer.close()
    for game in flood:
        player = game.players[0]
        with contextlib.suppress(Exception):
            if player.state is not None and player.state["status"] != "over":
                await player.send({"type": "resign", "room": game.room, "token": player.token})
            await player.wait_state(lambda s: s["status"] == "over", 15)
        await game.close()
    assert not problems, report(problems, cluster)
