"""One address tries to take everything; everybody else plays on.

Scenario 7, AI flood: one address (127.0.0.1) asks for 40 level-8 chess games against the
AI, each on its own connection, and plays them as fast as it can. The per-address limit
on unfinished AI games refuses the rest with ``rate/ai_games``. Meanwhile another address
(127.0.0.9) plays level-1 tic-tac-toe against the AI: with fair scheduling per owner each
of its AI moves must arrive within AI_MOVE_BOUND_S of its own move (2 s, plus the time a
worker may still need to finish the level-8 search it is in: searches are not preempted).

Scenario 8, connection flood: 2,000 WebSocket connections from one address, opened
concurrently in batches. Past the per-address limit the upgrade is refused with HTTP 429
and a JSON ``rate/connections`` error; the node stays healthy and a game between two other
addresses is not disturbed; once the flood's connections close, the address gets as many
connections again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from typing import Any

import pytest
import websockets
import websockets.exceptions

from kibitz.client.connection import ws_url
from kibitz.shared.search import budget_for_level
from tests.chaos.harness import (
    DrivenGame,
    HealthProbe,
    Node,
    Player,
    healthy_again,
    http_status,
    new_rid,
    open_client,
    report,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(150)]

FLOOD_GAMES = 40
OTHER = ("127.0.0.9", "127.0.0.10")
LEVEL8_CHESS_S = (budget_for_level("chess", 8).time_ms or 0) / 1000.0
AI_MOVE_BOUND_S = 2.0 + LEVEL8_CHESS_S / 2  # ~2 s, and half a level-8 search of slack
CONNECTIONS = 2000
BATCH = 100


def configured_limit(name: str) -> int | None:
    """The product's default per-address limit, if the product has named it."""
    try:
        from kibitz.server.services.limits import Limits  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    value = getattr(Limits(), name, None)
    return int(value) if value is not None else None


async def test_ai_flood_from_one_address(make_cluster) -> None:
    cluster = make_cluster(nodes=2, workers=2)
    a, b = cluster.nodes
    limit = configured_limit("ai_games_per_address")
    problems: list[str] = []

    # The flood: each create on a connection of its own, spread over both nodes.
    async def create(i: int) -> tuple[Node, Any, dict]:
        node = (a, b)[i % 2]
        client = await open_client(node.http_url)
        rid = new_rid()
        await client.send({"type": "create", "game": "chess", "opponent": "ai:8", "seat": 1,
                           "rid": rid})  # fmt: skip
        reply = await client.next_message(lambda m: m.get("rid") == rid, timeout=15)
        return node, client, reply

    flood_games: list[DrivenGame] = []
    refused: list[str | None] = []
    for start in range(0, FLOOD_GAMES, 10):
        batch = await asyncio.gather(*(create(i) for i in range(start, start + 10)))
        for node, client, reply in batch:
            if reply["type"] == "seat":
                rng = random.Random(len(flood_games))
                game = DrivenGame(cluster, reply["room"], "chess", rng, (0.0, 0.05))
                game.players.append(Player(game, 1, reply["token"], client, node.http_url))
                flood_games.append(game)
            else:
                refused.append(reply.get("code"))
                await client.close()
    print(f"AI flood: {len(flood_games)} games accepted, refused: {set(refused)}")
    if not refused or any(code != "rate/ai_games" for code in refused):
        problems.append(f"flood of {FLOOD_GAMES} AI games: refusals {refused}")
    if limit is not None and len(flood_games) > limit:
        problems.append(f"{len(flood_games)} AI games accepted from one address (limit {limit})")

    flooders = [asyncio.create_task(g.play(120)) for g in flood_games]
    try:
        victims = [
            await DrivenGame.start(cluster, "tictactoe", node, opponent="ai:1", seat=0,
                                   addrs=(OTHER[0], None), seed=700 + i, think=(0.2, 0.4))
            for i, node in enumerate((a, b))
        ]  # fmt: skip
        await asyncio.sleep(1.0)  # the queue is full of level-8 searches by now
        window = (time.time(), 0.0)
        await asyncio.gather(*(v.play(40) for v in victims))
        window = (window[0], time.time())
    finally:
        for task in flooders:
            task.cancel()
        await asyncio.gather(*flooders, return_exceptions=True)

    for victim in victims:
        problems += await victim.verify()
        problems += ai_move_delays(victim, AI_MOVE_BOUND_S)
        await victim.close()
    # The flood's games end by resignation (those the AI has not won yet).
    for game in flood_games:
        player = game.players[0]
        with contextlib.suppress(Exception):
            if player.state is not None and player.state["status"] != "over":
                await player.send({"type": "resign", "room": game.room, "token": player.token})
            await player.wait_state(lambda s: s["status"] == "over", 15)
        game.problems.clear()  # their players were stopped on purpose
        problems += await game.verify(allow_resign=True)
        await game.close()
    # The flood was real: the workers kept searching its games while the victims played.
    flood_ai_moves = sum(
        1
        for game in flood_games
        if game.record is not None
        for e in game.record["events"]
        if e["kind"] == "move" and e["seat"] == 0 and window[0] <= e["at"] / 1000.0 <= window[1]
    )
    print(f"flood AI moves during the victims' games: {flood_ai_moves}")
    if flood_ai_moves < 2:
        problems.append(f"only {flood_ai_moves} flood AI moves while the victims played")
    assert not problems, report(problems, cluster)


def ai_move_delays(game: DrivenGame, bound: float) -> list[str]:
    """Each AI move reached the human within ``bound`` s of the human's own move."""
    assert game.record is not None
    player = game.players[0]
    out = []

    def first_seen(version: int) -> float | None:
        return next((t for t, v, _m in player.seen if v >= version), None)

    for event in game.record["events"]:
        if event["kind"] != "move" or event["seat"] == player.seat:
            continue
        before, after = first_seen(event["version"] - 1), first_seen(event["version"])
        if before is None or after is None:
            out.append(f"room {game.room}: AI move v{event['version']} not seen by the human")
        elif after - before > bound:
            out.append(
                f"room {game.room}: AI move v{event['version']} came {after - before:.1f} s "
                f"after the human's move (bound {bound:.1f} s)"
            )
    delays = [
        round((first_seen(e["version"]) or 0) - (first_seen(e["version"] - 1) or 0), 2)
        for e in game.record["events"]
        if e["kind"] == "move" and e["seat"] != player.seat
    ]
    print(f"room {game.room}: AI move delays {delays}")
    return out


async def open_many(url: str, count: int) -> tuple[list[Any], list[tuple[int, Any]], list[str]]:
    """Open ``count`` WebSockets, BATCH at a time: (opened, refused (status, body), other)."""
    opened: list[Any] = []
    refused: list[tuple[int, Any]] = []
    other: list[str] = []

    async def one() -> None:
        try:
            ws = await websockets.connect(url, open_timeout=30, max_queue=4)
        except websockets.exceptions.InvalidStatus as exc:
            body: Any = exc.response.body
            with contextlib.suppress(ValueError, TypeError):
                body = json.loads(body)
            refused.append((exc.response.status_code, body))
        except Exception as exc:  # counted, then asserted on
            other.append(repr(exc))
        else:
            opened.append(ws)

    for start in range(0, count, BATCH):
        await asyncio.gather(*(one() for _ in range(min(BATCH, count - start))))
    return opened, refused, other


async def test_connection_flood_from_one_address(make_cluster) -> None:
    cluster = make_cluster(nodes=1, workers=0)
    node = cluster.nodes[0]
    limit = configured_limit("connections_per_address")
    url = ws_url(node.http_url)
    victim = await DrivenGame.start(cluster, "othello", node, node, addrs=OTHER, seed=800,
                                    think=(0.15, 0.3))  # fmt: skip
    probe = HealthProbe([node], every=0.5, timeout=3.0).start()
    playing = asyncio.create_task(victim.play(120))
    problems: list[str] = []
    opened: list[Any] = []
    try:
        started = time.monotonic()
        opened, refused, other = await open_many(url, CONNECTIONS)
        print(
            f"{CONNECTIONS} connections in {time.monotonic() - started:.1f} s: {len(opened)} "
            f"opened, {len(refused)} refused, {len(other)} other"
        )
        if other:
            problems.append(f"{len(other)} connections failed otherwise: {other[:3]}")
        if not refused:
            problems.append(f"none of {CONNECTIONS} connections from one address was refused")
        if limit is not None and len(opened) > limit:
            problems.append(f"{len(opened)} connections accepted from one address (limit {limit})")
        wrong = [
            r for r in refused
            if r[0] != 429 or not isinstance(r[1], dict) or r[1].get("type") != "error"
            or r[1].get("code") != "rate/connections"
        ]  # fmt: skip
        if wrong:
            problems.append(f"{len(wrong)} refusals were not 429 rate/connections: {wrong[:3]}")
        if await http_status(node.http_url + "/healthz", 5.0) != 200:
            problems.append("node unhealthy while flooded")
        await asyncio.wait_for(playing, 120)
    finally:
        await probe.stop()
        await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    bad = [s for _t, _i, s in probe.samples if s != 200]
    if bad:
        problems.append(f"/healthz answered {bad} during the flood")
    problems += await victim.verify()
    await victim.close()

    # The closed connections are counted out: the address gets as many again.
    again: list[Any] = []
    try:
        deadline = time.monotonic() + 10
        while True:
            again, refused_again, other_again = await open_many(url, max(1, len(opened)))
            if len(again) == max(1, len(opened)) or time.monotonic() > deadline:
                break
            await asyncio.gather(*(ws.close() for ws in again), return_exceptions=True)
            await asyncio.sleep(1.0)
        if len(again) != max(1, len(opened)):
            problems.append(
                f"after closing {len(opened)} connections only {len(again)} could open again "
                f"({len(refused_again)} refused, {other_again[:2]})"
            )
    finally:
        await asyncio.gather(*(ws.close() for ws in again), return_exceptions=True)
    if not await healthy_again(node):
        problems.append("node unhealthy after the flood")
    assert not problems, report(problems, cluster)
