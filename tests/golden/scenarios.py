"""The fixed sequence of games of the golden test.

Each scenario plays one story over real WebSockets, step by step (each step waits for
every frame it causes, see tests/golden/driver.py), then reads the room over HTTP while
its clients are still connected. What it saw goes into a :class:`Played`: the per-client
frame logs and the HTTP answers, plus the HTTP reads to make once the finished rooms have
been archived and have left Redis (so they come from the database).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp

from tests.golden.driver import (
    Client,
    Transcript,
    barrier,
    chat,
    error,
    http,
    kind,
    state,
)

#: Fixed player keys, so the public player ids in the transcripts are fixed too.
ANN_KEY = "golden-ann-key-0000000000000001"
BOB_KEY = "golden-bob-key-0000000000000002"


@dataclass
class Played:
    """What a scenario saw, and what to read once its finished rooms are archived."""

    name: str
    transcript: Transcript
    finished: list[str] = field(default_factory=list)  # rooms to wait out of Redis
    archived_paths: list[str] = field(default_factory=list)


class Table:
    """The clients of one scenario, logged in one transcript."""

    def __init__(self, name: str, base: str, ids: dict[str, str]) -> None:
        self.base = base
        self.ws_url = "ws" + base[4:] + "/ws"
        self.played = Played(name, Transcript(ids))
        self.clients: list[Client] = []

    async def client(self, name: str) -> Client:
        c = Client(name, self.ws_url, self.played.transcript.ids)
        self.clients.append(c)
        await c.connect()
        return c

    async def finish(self, session: aiohttp.ClientSession, live_paths: list[str]) -> Played:
        """Barrier, stop logging, read the live HTTP answers, close the clients."""
        await barrier(self.clients)
        t = self.played.transcript
        for c in self.clients:
            c.recording = False
        for c in self.clients:
            t.add(f"## client {c.name}")
            t.lines.extend(c.lines)
        t.add("## http, live")
        for path in live_paths:
            await http(session, self.base, "GET", path, t)
        for c in self.clients:
            await c.close()
        return self.played


async def seat_two(
    table: Table, game: str, extra: dict[str, object] | None = None
) -> tuple[Client, Client, str, str, str]:
    """ann creates ``game`` in seat 0, bob joins: (ann, bob, room, ann's token, bob's)."""
    ann = await table.client("ann")
    await ann.send(
        {
            "type": "create",
            "game": game,
            "seat": 0,
            "name": "ann",
            "player_key": ANN_KEY,
            "rid": 1,
            **(extra or {}),
        }
    )
    seat = await ann.expect(kind("seat", rid=1))
    room, ann_token = seat["room"], seat["token"]
    await ann.expect(state(0, "created"))
    bob = await table.client("bob")
    await bob.send({"type": "join", "room": room, "name": "bob", "player_key": BOB_KEY, "rid": 1})
    bob_token = (await bob.expect(kind("seat", rid=1)))["token"]
    await bob.expect(state(1, "joined"))
    await ann.expect(state(1, "joined"))
    return ann, bob, room, ann_token, bob_token


async def move(
    mover: Client,
    others: list[Client],
    room: str,
    token: str,
    text: str,
    version: int,
    event: str = "move",
) -> None:
    """``mover`` plays ``text`` at ``version``; everyone sees version + 1."""
    await mover.send(
        {"type": "move", "room": room, "token": token, "move": text, "version": version}
    )
    for c in [mover, *others]:
        await c.expect(state(version + 1, event))


async def tictactoe_rematch(
    base: str, ids: dict[str, str], session: aiohttp.ClientSession
) -> Played:
    """A tic-tac-toe game won by X, refused messages of every kind on the way, then a
    rematch offered and accepted, and both players following the new room."""
    table = Table("tictactoe_rematch", base, ids)
    ann, bob, room, ta, tb = await seat_two(table, "tictactoe")
    await bob.send({"type": "move", "room": room, "token": tb, "move": "5", "rid": 2})
    await bob.expect(error("move/not_your_turn"))
    await move(ann, [bob], room, ta, "1", 1)
    await bob.send({"type": "move", "room": room, "token": tb, "move": "1", "rid": 3})
    await bob.expect(error("move/illegal"))
    await bob.send({"type": "move", "room": room, "token": tb, "move": "4", "version": 1, "rid": 4})
    await bob.expect(error("room/stale"))
    await bob.send({"type": "move", "room": room, "token": tb, "move": "x1", "rid": 5})
    await bob.expect(error("move/invalid"))
    await bob.send({"type": "move", "room": room, "token": "not-a-token", "move": "4", "rid": 6})
    await bob.expect(error("auth/token"))
    await move(bob, [ann], room, tb, "4", 2)
    await move(ann, [bob], room, ta, "2", 3)
    await move(bob, [ann], room, tb, "5", 4)
    await move(ann, [bob], room, ta, "3", 5)
    await bob.send({"type": "move", "room": room, "token": tb, "move": "6", "rid": 7})
    await bob.expect(error("game/over"))
    await ann.send("not json")
    await ann.expect(error("frame/malformed"))
    await ann.send({"type": "dance", "rid": 8})
    await ann.expect(error("message/unknown_type"))
    await ann.send({"type": "move", "room": room, "move": "4", "rid": 9})
    await ann.expect(error("message/invalid"))
    await ann.send({"type": "watch", "room": "nosuchroom", "rid": 10})
    await ann.expect(error("room/unknown"))
    await bob.send_maybe_twice(
        {"type": "rematch", "room": room, "token": tb, "action": "offer", "rid": 11},
        state(7, "rematch_offer"),
        state(7, "resync"),
    )
    await ann.expect(state(7, "rematch_offer"))
    await ann.send_maybe_twice(
        {"type": "rematch", "room": room, "token": ta, "action": "accept", "rid": 12},
        state(8, "rematch"),
        state(8, "resync"),
    )
    agreed = next(f for f in reversed(ann.frames) if f.get("version") == 8)
    await bob.expect(state(8, "rematch"))
    new_room = agreed["next_room"]
    # A player who follows a room again is "connected" again: a presence broadcast, to
    # the resumer too, in no fixed order with its reply.
    await ann.send_unordered(
        {"type": "resume", "room": new_room, "token": ta, "rid": 13},
        state(0, "resync"),
        state(0, "presence"),
    )
    await bob.send_unordered(
        {"type": "resume", "room": new_room, "token": tb, "rid": 14},
        state(0, "resync"),
        state(0, "presence"),
    )
    await ann.expect(state(0, "presence"))
    await ann.send({"type": "leave", "room": room, "rid": 15})
    await ann.expect(kind("left", rid=15))
    await bob.expect(state(8, "presence"))  # ann, a player of the old room, left it
    played = await table.finish(
        session,
        [
            f"/api/games/{room}",
            f"/api/games/{room}/export?format=json",
            f"/api/games/{room}/export?format=pgn",
            f"/api/games/{room}/positions",
            f"/api/rooms/{room}",
            f"/api/rooms/{room}/record",
            f"/api/rooms/{new_room}",
            f"/api/games/{new_room}",
        ],
    )
    played.finished.append(room)
    played.archived_paths += [
        f"/api/games/{room}",
        f"/api/games/{room}/export?format=json",
        f"/api/games/{room}/positions",
        f"/api/rooms/{room}",
    ]
    return played


async def chess_draw_declined_resign(
    base: str, ids: dict[str, str], session: aiohttp.ClientSession
) -> Played:
    """A timed chess game: three moves, a draw offered and declined, the offer refused
    when made again, a reply, then White resigns."""
    table = Table("chess_draw_declined_resign", base, ids)
    clock = {"initial_ms": 300_000, "increment_ms": 2_000}
    ann, bob, room, ta, tb = await seat_two(table, "chess", {"clock": clock})
    await move(ann, [bob], room, ta, "e2e4", 1)
    await move(bob, [ann], room, tb, "e7e5", 2)
    await move(ann, [bob], room, ta, "g1f3", 3)
    await ann.send({"type": "draw", "room": room, "token": ta, "action": "offer", "rid": 2})
    for c in (ann, bob):
        await c.expect(state(5, "draw_offer"))
    await bob.send({"type": "draw", "room": room, "token": tb, "action": "decline", "rid": 2})
    for c in (bob, ann):
        await c.expect(state(6, "draw_decline"))
    await ann.send({"type": "draw", "room": room, "token": ta, "action": "offer", "rid": 3})
    await ann.expect(error("offer/not_allowed"))
    await bob.send({"type": "draw", "room": room, "token": tb, "action": "accept", "rid": 3})
    await bob.expect(error("offer/none"))
    await ann.send({"type": "abort", "room": room, "token": ta, "rid": 4})
    await ann.expect(error("abort/too_late"))
    await move(bob, [ann], room, tb, "b8c6", 6)
    await ann.send({"type": "resign", "room": room, "token": ta, "rid": 5})
    for c in (ann, bob):
        await c.expect(state(8, "resign"))
    await bob.send({"type": "resign", "room": room, "token": tb, "rid": 4})
    await bob.expect(error("game/over"))
    paths = [
        f"/api/games/{room}",
        f"/api/games/{room}/export?format=pgn",
        f"/api/games/{room}/export?format=json",
        f"/api/games/{room}/export?format=pdn",
        f"/api/games/{room}/positions",
        f"/api/rooms/{room}/record",
    ]
    played = await table.finish(session, paths)
    played.finished.append(room)
    played.archived_paths += paths[:5]
    return played


async def othello_takeback_abort(
    base: str, ids: dict[str, str], session: aiohttp.ClientSession
) -> Played:
    """Othello: a move each, abort refused, a takeback of both agreed, a takeback with
    nothing to take back refused, then the game aborted (and so never archived)."""
    table = Table("othello_takeback_abort", base, ids)
    ann, bob, room, ta, tb = await seat_two(table, "othello")
    first = ann.frames[-1]["legal_moves"][0]
    await move(ann, [bob], room, ta, first, 1)
    reply = bob.frames[-1]["legal_moves"][0]
    await move(bob, [ann], room, tb, reply, 2)
    await ann.send({"type": "abort", "room": room, "token": ta, "rid": 2})
    await ann.expect(error("abort/too_late"))
    await ann.send({"type": "takeback", "room": room, "token": ta, "rid": 3})
    for c in (ann, bob):
        await c.expect(state(4, "takeback_offer"))
    await bob.send({"type": "takeback", "room": room, "token": tb, "action": "accept", "rid": 2})
    for c in (bob, ann):
        await c.expect(state(5, "takeback"))
    await bob.send({"type": "takeback", "room": room, "token": tb, "rid": 3})
    await bob.expect(error("offer/not_allowed"))
    await ann.send({"type": "abort", "room": room, "token": ta, "rid": 4})
    for c in (ann, bob):
        await c.expect(state(6, "abort"))
    return await table.finish(
        session,
        [
            f"/api/games/{room}",
            f"/api/games/{room}/export?format=json",
            f"/api/rooms/{room}",
        ],
    )


async def draughts_resign(base: str, ids: dict[str, str], session: aiohttp.ClientSession) -> Played:
    """International draughts: four plies (each the first legal move), then Black
    resigns; read back as PDN."""
    table = Table("draughts_resign", base, ids)
    ann, bob, room, ta, tb = await seat_two(table, "draughts")
    players = [(ann, bob, ta), (bob, ann, tb)]
    for ply in range(4):
        mover, other, token = players[ply % 2]
        text = mover.frames[-1]["legal_moves"][0]
        await move(mover, [other], room, token, text, ply + 1)
    await bob.send({"type": "resign", "room": room, "token": tb, "rid": 2})
    for c in (bob, ann):
        await c.expect(state(6, "resign"))
    paths = [
        f"/api/games/{room}",
        f"/api/games/{room}/export?format=pdn",
        f"/api/games/{room}/export?format=json",
        f"/api/games/{room}/export?format=pgn",
    ]
    played = await table.finish(session, paths)
    played.finished.append(room)
    played.archived_paths += paths
    return played


async def chat_spectator_resume(
    base: str, ids: dict[str, str], session: aiohttp.ClientSession
) -> Played:
    """Matches: a spectator watches (and the count reaches everyone), chat on both
    channels, a player drops, misses a move and resumes with ``since``; the spectator
    resumes too; then a resignation."""
    table = Table("chat_spectator_resume", base, ids)
    ann, bob, room, ta, tb = await seat_two(table, "matches")
    kib = await table.client("kib")
    await kib.send({"type": "watch", "room": room, "rid": 1})
    await kib.expect(state(1, "resync"))
    for c in (ann, bob, kib):  # the spectator count, at most every 2 s
        await c.expect(
            lambda f: (
                f.get("type") == "state"
                and f.get("spectators") == 1
                and f["event"]["kind"] == "presence"
            ),
            "presence (1 spectator)",
        )
    await ann.send({"type": "chat", "room": room, "token": ta, "text": "good luck!", "rid": 2})
    for c in (ann, bob):
        await c.expect(chat("good luck!"))
    await bob.send({"type": "chat", "room": room, "token": tb, "text": "you too", "rid": 2})
    for c in (ann, bob):
        await c.expect(chat("you too"))
    await kib.send(
        {
            "type": "chat",
            "room": room,
            "name": "kib",
            "text": "<b>hello</b> \u00e9\u00e8 \u2654",
            "rid": 2,
        }
    )
    await kib.expect(chat("<b>hello</b> \u00e9\u00e8 \u2654"))
    await ann.send({"type": "chat", "room": room, "text": "psst", "rid": 3})
    await ann.expect(error("chat/invalid"))
    await kib.send({"type": "chat", "room": room, "text": "", "rid": 3})
    await kib.expect(error("chat/invalid"))
    await move(ann, [bob, kib], room, ta, "3", 1)
    await move(bob, [ann, kib], room, tb, "2", 2)
    await bob.drop()
    for c in (ann, kib):
        await c.expect(
            lambda f: (
                f.get("type") == "state"
                and f["event"]["kind"] == "presence"
                and f["seats"][1]["connected"] is False
            ),
            "presence (bob gone)",
        )
    await move(ann, [kib], room, ta, "1", 3)
    await bob.connect()
    await bob.send_unordered(
        {"type": "resume", "room": room, "token": tb, "since": 3, "rid": 5},
        state(4, "resync"),
        state(4, "presence"),
        kind("chat", replay=True),
    )
    for c in (ann, kib):
        await c.expect(
            lambda f: (
                f.get("type") == "state"
                and f["event"]["kind"] == "presence"
                and f["seats"][1]["connected"] is True
            ),
            "presence (bob back)",
        )
    await kib.send({"type": "resume", "room": room, "since": 2, "rid": 4})
    await kib.expect(state(4, "resync"))
    await kib.expect(kind("chat", replay=True))
    await bob.send({"type": "chat", "room": room, "token": tb, "text": "back", "rid": 6})
    for c in (ann, bob):
        await c.expect(chat("back"))
    await bob.send({"type": "resign", "room": room, "token": tb, "rid": 7})
    for c in (bob, ann, kib):
        await c.expect(state(5, "resign"))
    paths = [f"/api/games/{room}", f"/api/games/{room}/export?format=json"]
    played = await table.finish(session, [*paths, f"/api/rooms/{room}"])
    played.finished.append(room)
    played.archived_paths += paths
    return played


Scenario = Callable[[str, dict[str, str], aiohttp.ClientSession], Awaitable[Played]]
#: In the order they are played (the archive listing depends on it).
SCENARIOS: list[Scenario] = [
    tictactoe_rematch,
    chess_draw_declined_resign,
    othello_takeback_abort,
    draughts_resign,
    chat_spectator_resume,
]
