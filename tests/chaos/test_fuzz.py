"""Protocol fuzzing against a live server: over 10,000 random and malformed frames.

Hypothesis draws the frames (random bytes, random text, random JSON and msgpack values,
and structurally valid messages with wrong types and values, huge integers, unknown types,
bad tokens, tokens of other rooms and other rooms' ids). Several connections send them,
JSON and msgpack, at a little under the per-connection rate limit, reconnecting whenever
the server closes one (it does, after 20 bad frames). Meanwhile games are in progress:

- three "protected" games stand mid-game (no frame carries their tokens): afterwards their
  version, moves, seats, status, result and event log must be exactly as before, and the
  first of them is then played to its end by its own players;
- human games between two other addresses are played one after another during the fuzz
  and must each finish like in the chaos scenarios (harness.DrivenGame.verify).

And: no reply is ``server/internal`` (a bug by the protocol's own definition), no
connection is closed with 1011, and the node still answers /healthz 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import random
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import msgpack
import pytest
import websockets
import websockets.exceptions
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from kibitz.client.connection import ws_url
from kibitz.shared.protocol.client_in import CLIENT_TYPES
from tests.chaos.harness import (
    DrivenGame,
    Node,
    get_json,
    http_status,
    open_client,
    report,
    version_at_least,
    version_past,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.chaos, pytest.mark.timeout(150)]

FRAMES = 11_000  # a few are lost when the server closes a connection
CONNECTIONS = 30  # about 370 frames each: the fuzz lasts about 15 s
PER_SECOND = 27.0  # per connection: under the server's 30 a second
OTHER = ("127.0.0.9", "127.0.0.10")


def as_json(value: Any) -> str:
    return json.dumps(value)


def as_msgpack(value: Any) -> bytes | str:
    try:
        return bytes(msgpack.packb(value, use_bin_type=True))
    except (OverflowError, TypeError, ValueError):
        return json.dumps(value)  # an integer past 64 bits: send it as JSON instead


def frame_strategy(rooms: list[str], foreign_token: str) -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=2**53 - 2, max_value=2**70)
        | st.integers(min_value=-(2**70), max_value=-(2**53))
        | st.floats()
        | st.text(max_size=30)
    )
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                   max_size=4),
        max_leaves=6,
    )  # fmt: skip
    room_ids = st.sampled_from([*rooms, "zzzzzzzzzz", "0000000000", "../x", " " + rooms[0]])
    tokens = st.sampled_from([foreign_token, "not-a-token", "x" * 600, foreign_token[:-1]])
    moves = st.sampled_from(["5", "1", "e2e4", "e7e5", "d3", "pass", "32-28", "A", "a-e", "99"])
    fields = st.fixed_dictionaries(
        {},
        optional={
            "room": room_ids | st.text(max_size=12) | scalars,
            "token": tokens | st.text(max_size=40) | scalars,
            "move": moves | st.text(max_size=8) | scalars,
            "version": st.integers() | scalars,
            "since": st.integers() | scalars,
            "seat": st.sampled_from([0, 1, 2, -1, "random", True, 1.0, None]) | scalars,
            "game": st.sampled_from(["tictactoe", "chess", "othello", "nope"]) | scalars,
            "opponent": st.sampled_from(["human", "ai:1", "ai:9", "ai:0", "ai:x"]) | scalars,
            "options": st.dictionaries(st.text(max_size=8), scalars, max_size=4)
            | st.just({f"o{i}": i for i in range(17)})
            | values,
            "position": st.text(max_size=80) | scalars,
            "name": st.text(max_size=40) | scalars,
            "rid": values,
        },
    )
    types = st.sampled_from([*CLIENT_TYPES, "", "Move", "state", "error", "seat"]) | values
    messages = st.builds(lambda kind, rest: {"type": kind, **rest}, types, fields)
    # Well-typed messages that get past the parser to the rooms: wrong rooms, tokens of
    # another room, moves out of turn, stale or absurd versions.
    plausible = st.builds(
        lambda kind, fields: {"type": kind, **{k: v for k, v in fields.items() if v is not None}},
        st.sampled_from(CLIENT_TYPES),
        st.fixed_dictionaries(
            {
                "room": room_ids,
                "token": st.none() | tokens,
                "move": moves,
                "version": st.none() | st.integers(0, 100) | st.integers(0, 2**53),
                "since": st.none() | st.integers(0, 100),
                "seat": st.none() | st.integers(0, 1),
                "game": st.sampled_from(["tictactoe", "chess", "othello", "nope"]),
                "opponent": st.sampled_from(["human", "ai:1", "ai:9"]),
                "rid": st.none() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
            }
        ),
    )
    return st.one_of(
        plausible.map(as_json),
        plausible.map(as_msgpack),
        plausible.map(as_json),
        messages.map(as_json),
        messages.map(as_msgpack),
        messages.map(as_json),
        values.map(as_json),
        values.map(as_msgpack),
        st.binary(min_size=1, max_size=120),
        st.text(min_size=1, max_size=120),
    )


def draw_frames(rooms: list[str], foreign_token: str, count: int, seed_value: int) -> list[Any]:
    """``count`` frames, one per Hypothesis example (so Hypothesis keeps them distinct)."""
    frames: list[Any] = []

    @seed(seed_value)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(frame_strategy(rooms, foreign_token))
    def collect(frame: Any) -> None:
        frames.append(frame)

    collect()
    return frames


def generate_frames(rooms: list[str], foreign_token: str) -> list[Any]:
    """FRAMES frames drawn in two processes (the draws cost ~5 ms each), plus a few over
    the 64 KiB frame limit and one over the 1 MiB hard limit."""
    ctx = multiprocessing.get_context("spawn")
    half = FRAMES // 2 + 1
    with ProcessPoolExecutor(2, mp_context=ctx) as pool:
        parts = pool.map(draw_frames, [rooms] * 2, [foreign_token] * 2, [half] * 2, [1, 2])
        frames = [frame for part in parts for frame in part]
    random.Random(1).shuffle(frames)
    for i in range(6):
        frames.insert(i * len(frames) // 7, "x" * 70_000)
    frames.insert(len(frames) // 2, json.dumps({"type": "ping", "pad": "y" * (1 << 20)}))
    return frames


class Tally:
    def __init__(self) -> None:
        self.sent = 0
        self.codes: Counter[str] = Counter()
        self.closes: Counter[int | None] = Counter()
        self.undecodable = 0
        self.connections = 0
        self.refused: Counter[int] = Counter()


async def fuzz_connection(url: str, frames: list[Any], tally: Tally) -> None:
    i = 0
    deadline = time.monotonic() + 120
    while i < len(frames) and time.monotonic() < deadline:
        try:
            ws = await websockets.connect(url, open_timeout=10, max_size=None)
        except websockets.exceptions.InvalidStatus as exc:
            tally.refused[exc.response.status_code] += 1
            await asyncio.sleep(0.2)
            continue
        tally.connections += 1

        async def read(ws: Any = ws) -> None:
            with contextlib.suppress(websockets.ConnectionClosed):
                async for frame in ws:
                    try:
                        message = (
                            msgpack.unpackb(frame, raw=False)
                            if isinstance(frame, bytes)
                            else json.loads(frame)
                        )
                    except ValueError:
                        tally.undecodable += 1
                        continue
                    if message.get("type") == "error":
                        tally.codes[message.get("code")] += 1

        reader = asyncio.create_task(read())
        try:
            while i < len(frames):
                await ws.send(frames[i])
                i += 1
                tally.sent += 1
                await asyncio.sleep(1.0 / PER_SECOND)
        except websockets.ConnectionClosed:
            pass  # closed by the server (after 20 bad frames): go on on a new connection
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), 3)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader, 3)
            reader.cancel()
            tally.closes[ws.close_code] += 1


async def room_view(node: Node, room: str) -> dict:
    _s, state = await get_json(f"{node.http_url}/api/rooms/{room}")
    _s, record = await get_json(f"{node.http_url}/api/rooms/{room}/record")
    return {
        "version": state["version"],
        "status": state["status"],
        "moves": state["moves"],
        "result": state["result"],
        "seats": [{k: v for k, v in s.items() if k != "connected"} for s in state["seats"]],
        "events": record["events"],
    }


def playing_and_to_move(seat: int | None) -> Any:
    """A state in play with ``seat`` to move (any seat: None)."""
    return lambda s: s["status"] == "playing" and (seat is None or s["to_move"] == seat)


async def protected_games(cluster: Any, node: Node) -> list[DrivenGame]:
    """Three games stopped mid-game, their players connected and waiting."""
    out = []
    for game, opponent, moves in (("tictactoe", "human", 2), ("othello", "human", 4),
                                  ("chess", "ai:1", 1)):  # fmt: skip
        driven = await DrivenGame.start(cluster, game, node, node, opponent=opponent, seed=900)
        room, players = driven.room, driven.players
        human = opponent == "human"
        for _ in range(moves):
            state = await players[0].wait_state(playing_and_to_move(None if human else 0))
            version = int(state["version"])
            mover = next(p for p in players if p.seat == state["to_move"])
            await mover.wait_state(version_at_least(version))
            move = driven.rng.choice(state["legal_moves"])
            mover.sent.add((version, move))
            await mover.send({"type": "move", "room": room, "token": mover.token, "move": move,
                              "version": version})  # fmt: skip
            for p in players:
                await p.wait_state(version_past(version))
        if not human:  # the AI has answered: the human is to move
            await players[0].wait_state(playing_and_to_move(players[0].seat))
        out.append(driven)
    return out


async def test_protocol_fuzz(make_cluster) -> None:
    cluster = make_cluster(nodes=1, workers=1)
    node = cluster.nodes[0]
    problems: list[str] = []
    protected = await protected_games(cluster, node)
    before = {g.room: await room_view(node, g.room) for g in protected}
    # The fuzzer's own room: its token is the "other room's token" in the frames.
    own = await open_client(node.http_url)
    own_room = (await own.create("tictactoe"))["room"]
    started = time.monotonic()
    frames = await asyncio.to_thread(
        generate_frames, [g.room for g in protected] + [own_room], own.tokens[own_room][1]
    )
    print(
        f"{len(frames)} frames ({len(set(frames))} distinct) drawn in "
        f"{time.monotonic() - started:.1f} s"
    )
    assert len(frames) >= 10_000

    live_games: list[DrivenGame] = []
    fuzzing = True

    async def play_live_games() -> None:
        seed = 950
        while fuzzing and len(live_games) < 10:
            game = await DrivenGame.start(cluster, "othello", node, node, addrs=OTHER, seed=seed,
                                          think=(0.05, 0.15))  # fmt: skip
            live_games.append(game)
            await game.play(60)
            seed += 1

    tally = Tally()
    urls = [ws_url(node.http_url, "msgpack" if i % 3 == 2 else "json") for i in range(CONNECTIONS)]
    live = asyncio.create_task(play_live_games())
    started = time.monotonic()
    await asyncio.gather(
        *(fuzz_connection(urls[i], frames[i::CONNECTIONS], tally) for i in range(CONNECTIONS))
    )
    elapsed = time.monotonic() - started
    fuzzing = False
    await asyncio.wait_for(live, 90)
    print(
        f"fuzz: {tally.sent} frames in {elapsed:.1f} s over {tally.connections} connections; "
        f"errors {dict(tally.codes.most_common())}; closes {dict(tally.closes)}; "
        f"refused {dict(tally.refused)}; undecodable replies {tally.undecodable}"
    )
    if tally.sent < 10_000:
        problems.append(f"only {tally.sent} frames were sent")
    if tally.codes.get("server/internal"):
        problems.append(f"{tally.codes['server/internal']} replies were server/internal")
    if tally.closes.get(1011):
        problems.append(f"{tally.closes[1011]} connections closed with 1011 (internal error)")
    if tally.undecodable:
        problems.append(f"{tally.undecodable} server frames did not decode")
    if await http_status(node.http_url + "/healthz", 5.0) != 200:
        problems.append("/healthz not 200 after the fuzz")
    for game in protected:
        after = await room_view(node, game.room)
        if after != before[game.room]:
            problems.append(f"protected room {game.room} changed: {before[game.room]} -> {after}")
    # The protected players still play: the tic-tac-toe game to its end.
    first = protected[0]
    await first.play(30)
    problems += await first.verify()
    for game in live_games:
        problems += await game.verify()
    if not live_games:
        problems.append("no game was played during the fuzz")
    for game in protected + live_games:
        await game.close()
    await own.close()
    assert not problems, report(problems, cluster)
