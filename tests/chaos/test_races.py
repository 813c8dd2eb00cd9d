"""Scenario 6: joins and moves racing through two nodes.

- Two clients, one on each node, ask for the same free seat at the same moment: exactly
  one gets it (a ``seat`` reply), the other gets ``room/full`` or ``room/seat_taken``, and
  the room holds exactly the creator and the winner; the loser holds no token.
- A player's move is sent twice at once, through two connections on two nodes (the second
  resumed with the same token), with and without a pinned ``version``: exactly one
  applies (the room moves on by one version), the other is refused.
Every game is then played to its end and checked like the other scenarios.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time

import pytest

from kibitz.client.connection import KibitzClient
from tests.chaos.harness import (
    ChaosError,
    Cluster,
    DrivenGame,
    Node,
    Player,
    error_for,
    get_json,
    new_rid,
    open_client,
    report,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(120)]

ROOMS = 8
REFUSED = {"room/full", "room/seat_taken"}
DUPLICATE_REFUSED = {"room/stale", "move/not_your_turn", "move/illegal", "game/over"}


async def reply_to(client: KibitzClient, rid: str, timeout: float = 10.0) -> dict:
    return await client.next_message(lambda m: m.get("rid") == rid, timeout=timeout)


async def join_race(cluster: Cluster, a: Node, b: Node, index: int) -> DrivenGame:
    creator = await open_client(a.http_url)
    reply = await creator.request({"type": "create", "game": "tictactoe", "seat": 0})
    room = reply["room"]
    game = DrivenGame(cluster, room, "tictactoe", random.Random(600 + index), (0.05, 0.15))
    game.players.append(Player(game, 0, reply["token"], creator, a.http_url))
    rivals = [await open_client(a.http_url), await open_client(b.http_url)]
    rids = [new_rid(), new_rid()]
    message: dict = {"type": "join", "room": room}
    if index % 2:
        message["seat"] = 1
    pairs = list(zip(rivals, rids, strict=True))
    await asyncio.gather(*(c.send({**message, "rid": r}) for c, r in pairs))
    replies = await asyncio.gather(*(reply_to(c, r) for c, r in pairs))
    winners = [i for i, rep in enumerate(replies) if rep["type"] == "seat"]
    codes = [rep.get("code") for rep in replies if rep["type"] == "error"]
    if len(winners) != 1 or len(codes) != 1 or codes[0] not in REFUSED:
        game.problems.append(f"room {room}: join race replies {replies}")
    for i, rival in enumerate(rivals):
        if i in winners[:1]:
            won = replies[i]
            node = (a, b)[i]
            player = Player(game, won["seat"], won["token"], rival, node.http_url)
            game.players.append(player)
            await player.wait_state(lambda s: s["status"] == "playing")
        else:
            await rival.close()
    return game


async def duplicate_moves(
    cluster: Cluster, a: Node, b: Node, pinned: bool, seed: int
) -> DrivenGame:
    """X's every move is sent through two nodes at once; O plays normally."""
    x = await open_client(a.http_url)
    created = await x.request({"type": "create", "game": "tictactoe", "seat": 0})
    room, token = created["room"], created["token"]
    game = DrivenGame(cluster, room, "tictactoe", random.Random(seed), (0.05, 0.15))
    px = Player(game, 0, token, x, a.http_url)
    o = await open_client(b.http_url)
    joined = await o.request({"type": "join", "room": room})
    po = Player(game, 1, joined["token"], o, b.http_url)
    game.players += [px, po]
    # X's second connection, on the other node, resumed with X's token.
    twin = Player(game, 0, token, await open_client(b.http_url), b.http_url)
    await twin.send({"type": "resume", "room": room, "token": token})
    resynced = await twin.wait_state(lambda s: s["event"]["kind"] == "resync")
    assert resynced["you"] == 0
    deadline = time.monotonic() + 60
    o_task = asyncio.create_task(po.run(deadline))
    try:
        while True:
            state = await px.wait_state(
                lambda s: s["status"] == "over" or (s["status"] == "playing" and s["to_move"] == 0)
            )
            if state["status"] == "over":
                break
            version = int(state["version"])
            move = game.rng.choice(state["legal_moves"])
            px.sent.add((version, move))
            rids = [new_rid(), new_rid()]
            base = {"type": "move", "room": room, "token": token, "move": move}
            if pinned:
                base["version"] = version
            await asyncio.gather(
                px.send({**base, "rid": rids[0]}), twin.send({**base, "rid": rids[1]})
            )
            errors = []
            for player, rid in ((px, rids[0]), (twin, rids[1])):
                with contextlib.suppress(TimeoutError):
                    errors.append(await player.next(error_for(rid), 1.0))
            _status, now = await get_json(f"{a.http_url}/api/rooms/{room}")
            applied = [m for m in now["moves"][len(state["moves"]) :] if m["seat"] == 0]
            codes = [e["code"] for e in errors]
            if len(errors) != 1 or codes[0] not in DUPLICATE_REFUSED or len(applied) != 1:
                game.problems.append(
                    f"room {room} v{version}: duplicate {move!r} (pinned={pinned}): "
                    f"errors {codes}, X moves applied after v{version}: {applied}"
                )
    finally:
        await asyncio.wait_for(o_task, 30)
        await twin.close()
    return game


async def test_joins_and_moves_race_through_two_nodes(make_cluster) -> None:
    cluster = make_cluster(nodes=2, workers=0)
    a, b = cluster.nodes
    join_games = await asyncio.gather(*(join_race(cluster, a, b, i) for i in range(ROOMS)))
    dup_games = await asyncio.gather(
        duplicate_moves(cluster, a, b, pinned=True, seed=650),
        duplicate_moves(cluster, a, b, pinned=False, seed=651),
    )
    deadline = time.monotonic() + 60

    async def finish(game: DrivenGame) -> None:
        if len(game.players) != 2:
            raise ChaosError(f"room {game.room}: no seat for the race winner")
        await game.play(max(1.0, deadline - time.monotonic()))

    await asyncio.gather(*(finish(g) for g in join_games), return_exceptions=True)
    problems: list[str] = []
    for game in [*join_games, *dup_games]:
        problems += await game.verify()
        await game.close()
    assert not problems, report(problems, cluster)
