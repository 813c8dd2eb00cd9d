"""``kibitz bench clocks``: how exactly the server's clocks charge moves, and lag credits.

A private Redis and one ``kibitz serve`` node on loopback; two players on raw WebSockets
play chess (random legal moves, a new game when one ends) with a Fischer clock. Each move
comes after a known think time (drawn from ``--think-ms``), counted by the player from
the moment the state reached it to the moment it sends the move. For each timed move we
compare what the server charged (the mover's time left before the move, less its time
left after it, less the increment) with that think time: the per-move error.

Phases: ``--lag-ms`` lists simulated round trips. In a phase with lag L, each player
answers the server's ping frames L ms late and sends each move L ms after its think time
(as if the state and the move each spent L/2 on the line), so the server charges
think + L unless its lag credit makes up for it. The first phase (L = 0) is plain
loopback, where the error must stay within ``--tolerance-ms``; so must phases whose lag is
under the per-move credit cap. Every phase checks that no credit exceeds the quota
(the cap and what is left of the seat's bank, replayed from the rule in server/domain/clocks.py).

The last line is JSON: ``{"bench": "clocks", "phases": [...], "ok": true|false}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kibitz.server.domain import clocks

INITIAL_MS = 600_000
INCREMENT_MS = 1_000


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "clocks", help="error of the server's clocks per move, and lag credits vs the quota"
    )
    parser.add_argument("--moves", type=int, default=100, help="timed moves in the first phase")
    parser.add_argument(
        "--lag-moves", type=int, default=40, help="timed moves in each lagged phase"
    )
    parser.add_argument(
        "--lag-ms",
        default="0,150,800",
        help="simulated round trip of each phase, comma-separated (default: %(default)s)",
    )
    parser.add_argument(
        "--think-ms", default="20,400", help="think times drawn from MIN,MAX (default: %(default)s)"
    )
    parser.add_argument("--tolerance-ms", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quiet", action="store_true", help="no line per move")
    parser.add_argument(
        "--url", help="an existing node (http://HOST:PORT) instead of a private one"
    )
    parser.set_defaults(func=run)


class Player:
    """One raw WebSocket connection that answers pings ``lag_s`` late."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, lag_s: float) -> None:
        self.ws = ws
        self.lag_s = lag_s
        self.inbox: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        #: Wall-clock arrival (epoch ms) of each state, by (room, version): with the
        #: state's ``clock.at`` it splits the error into the trip down and the trip up.
        self.wall: dict[tuple[str, int], float] = {}
        self.reader = asyncio.create_task(self._read())
        self.pongs: set[asyncio.Task[None]] = set()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        async for msg in self.ws:
            if msg.type == aiohttp.WSMsgType.PING:
                loop.call_later(self.lag_s, self._pong, msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                wall, at = time.time() * 1000, time.monotonic()
                data = json.loads(msg.data)
                if data.get("type") == "state":
                    self.wall[(data["room"], data["version"])] = wall
                self.inbox.put_nowait((at, data))

    def _pong(self, data: bytes) -> None:
        if not self.ws.closed:
            task = asyncio.ensure_future(self.ws.pong(data))
            self.pongs.add(task)
            task.add_done_callback(self.pongs.discard)

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(message))

    async def reply(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        while True:
            _at, msg = await asyncio.wait_for(self.inbox.get(), timeout)
            if msg["type"] == "error":
                raise RuntimeError(f"server error: {msg}")
            if msg["type"] == kind:
                return msg

    async def state_after(
        self, room: str, version: int, timeout: float = 30.0
    ) -> tuple[float, dict[str, Any]]:
        """The first state of ``room`` newer than ``version``, with when it arrived."""
        while True:
            at, msg = await asyncio.wait_for(self.inbox.get(), timeout)
            if msg["type"] == "error":
                raise RuntimeError(f"server error: {msg}")
            if msg["type"] == "state" and msg["room"] == room and msg["version"] > version:
                return at, msg


@dataclass
class Phase:
    lag_ms: int
    moves: list[dict[str, Any]] = field(default_factory=list)
    games: int = 0

    def summary(self, tolerance_ms: int) -> dict[str, Any]:
        errors = [m["error_ms"] for m in self.moves]
        credits = [m["credit_ms"] for m in self.moves]
        within = all(m["credit_ms"] <= m["quota_ms"] for m in self.moves)
        abs_errors = sorted(abs(e) for e in errors)
        must_match = self.lag_ms < clocks.LAG_CREDIT_MAX_MS
        ok = within and (not must_match or (bool(errors) and abs_errors[-1] <= tolerance_ms))
        return {
            "lag_ms": self.lag_ms,
            "timed_moves": len(self.moves),
            "games": self.games,
            "error_ms": {
                "over_tolerance": sum(1 for e in abs_errors if e > tolerance_ms),
                "max_abs": abs_errors[-1] if errors else None,
                "p95_abs": abs_errors[int(0.95 * (len(abs_errors) - 1))] if errors else None,
                "mean": round(statistics.fmean(errors), 2) if errors else None,
            },
            "trip_ms": {
                "down_mean": _mean([m["down_ms"] for m in self.moves]),
                "down_max": max((m["down_ms"] for m in self.moves), default=None),
                "up_mean": _mean([m["up_ms"] for m in self.moves]),
                "up_max": max((m["up_ms"] for m in self.moves), default=None),
            },
            "credit_ms": {
                "max": max(credits, default=0),
                "mean": round(statistics.fmean(credits), 1) if credits else 0,
                "total": sum(credits),
            },
            "credits_within_quota": within,
            "error_must_be_within_tolerance": must_match,
            "ok": ok,
        }


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 2) if values else None


async def play_phase(
    url: str, lag_ms: int, moves: int, args: argparse.Namespace, rng: random.Random
) -> Phase:
    phase = Phase(lag_ms)
    low, high = (int(x) for x in args.think_ms.split(","))
    lag_s = lag_ms / 1000
    async with aiohttp.ClientSession() as session:
        players = []
        for _ in range(2):
            ws = await session.ws_connect(url.rstrip("/") + "/ws", autoping=False)
            players.append(Player(ws, lag_s))
        banks = [clocks.LAG_BANK_MAX_MS, clocks.LAG_BANK_MAX_MS]
        try:
            while len(phase.moves) < moves:
                phase.games += 1
                banks = [clocks.LAG_BANK_MAX_MS, clocks.LAG_BANK_MAX_MS]
                await play_game(players, phase, moves, (low, high), lag_s, banks, args, rng)
        finally:
            for player in players:
                player.reader.cancel()
                await player.ws.close()
    return phase


async def play_game(
    players: list[Player],
    phase: Phase,
    moves: int,
    think: tuple[int, int],
    lag_s: float,
    banks: list[int],
    args: argparse.Namespace,
    rng: random.Random,
) -> None:
    control = {"initial_ms": INITIAL_MS, "increment_ms": INCREMENT_MS}
    await players[0].send(
        {"type": "create", "game": "chess", "opponent": "human", "seat": 0, "clock": control}
    )
    seat0 = await players[0].reply("seat")
    room = seat0["room"]
    await players[1].send({"type": "join", "room": room})
    seat1 = await players[1].reply("seat")
    tokens = [seat0["token"], seat1["token"]]
    # Each player's newest state; the game starts once both have seen it playing.
    states: list[dict[str, Any]] = [{}, {}]
    arrived = [0.0, 0.0]
    for i, player in enumerate(players):
        while states[i].get("status") != "playing":
            arrived[i], states[i] = await player.state_after(room, states[i].get("version", -1))
    last_clocks = [INITIAL_MS, INITIAL_MS]
    while len(phase.moves) < moves:
        mover = states[0]["to_move"]
        state = states[mover]
        if state["status"] != "playing":
            return
        timed = state["clock"]["running"] == mover
        planned_ms = rng.randint(*think)
        # Think from the moment the state arrived, then the line's delay for the move.
        await asyncio.sleep(max(0.0, arrived[mover] + planned_ms / 1000 - time.monotonic()))
        thought_ms = (time.monotonic() - arrived[mover]) * 1000
        await asyncio.sleep(lag_s)
        move = rng.choice(state["legal_moves"])
        await players[mover].send(
            {"type": "move", "room": room, "token": tokens[mover], "move": move,
             "version": state["version"]}
        )  # fmt: skip
        for i, player in enumerate(players):
            arrived[i], states[i] = await player.state_after(room, state["version"])
        event = states[mover]["event"]
        if event.get("kind") != "move":
            raise RuntimeError(f"the move was not played: {event}")
        after = event["clocks_ms"]
        credit = int(event.get("credit_ms", 0))
        if timed:
            quota = min(clocks.LAG_CREDIT_MAX_MS, banks[mover])
            charged = last_clocks[mover] - (after[mover] - INCREMENT_MS)
            # The state left the server at clock.at (its turn started just before): the
            # trip down is until it arrived here; the rest of the error is the trip up.
            down = players[mover].wall[(room, state["version"])] - state["clock"]["at"]
            row = {
                "ply": len(states[mover]["moves"]),
                "seat": mover,
                "think_ms": round(thought_ms, 1),
                "charged_ms": charged,
                "error_ms": round(charged - thought_ms, 1),
                "down_ms": round(down, 1),
                "up_ms": round(charged - thought_ms - down + credit, 1),
                "credit_ms": credit,
                "quota_ms": quota,
                "remaining_ms": after[mover],
            }
            phase.moves.append(row)
            if not args.quiet:
                print(
                    f"lag {phase.lag_ms:4} ms  ply {row['ply']:3}  {('W', 'B')[mover]}  "
                    f"think {thought_ms:7.1f}  charged {charged:5}  error {row['error_ms']:+6.1f}"
                    f"  credit {credit:3} (quota {quota:4})  down {down:5.1f}  "
                    f"up {row['up_ms']:6.1f}  left {after[mover]}"
                )
        # The bank as the rule keeps it (server/domain/clocks.py), untimed first moves included.
        banks[mover] = min(clocks.LAG_BANK_MAX_MS, banks[mover] - credit + clocks.LAG_BANK_GAIN_MS)
        last_clocks = list(after)
        if states[mover]["status"] != "playing":
            return


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    lags = [int(x) for x in args.lag_ms.split(",") if x.strip()]
    phases = []
    for index, lag in enumerate(lags):
        moves = args.moves if index == 0 else args.lag_moves
        phase = await play_phase(url, lag, moves, args, rng)
        phases.append(phase.summary(args.tolerance_ms))
    return {
        "bench": "clocks",
        "control": {"initial_ms": INITIAL_MS, "increment_ms": INCREMENT_MS},
        "rule": {
            "credit_cap_ms": clocks.LAG_CREDIT_MAX_MS,
            "bank_max_ms": clocks.LAG_BANK_MAX_MS,
            "bank_gain_ms": clocks.LAG_BANK_GAIN_MS,
        },
        "tolerance_ms": args.tolerance_ms,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "phases": phases,
        "ok": all(p["ok"] for p in phases),
    }


def run(args: argparse.Namespace) -> int:
    if args.url:
        result = asyncio.run(measure(args.url, args))
    else:
        from kibitz.server.cli.serve import served
        from kibitz.shared.bus.embedded import EmbeddedRedis

        with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp, persist=False) as redis:
            with served(
                ["--port", "0", "--redis", redis.url, "--workers", "0", "--data-dir", tmp,
                 "--max-connections-per-address", "100000",
                 "--max-creates-per-minute", "100000"]
            ) as url:  # fmt: skip
                result = asyncio.run(measure(url, args))
    for phase in result["phases"]:
        err = phase["error_ms"]
        print(
            f"lag {phase['lag_ms']:4} ms: {phase['timed_moves']} timed moves in "
            f"{phase['games']} game(s); error max |{err['max_abs']}| ms, p95 |{err['p95_abs']}|,"
            f" mean {err['mean']:+}, {err['over_tolerance']} over {args.tolerance_ms}; "
            f"credit max {phase['credit_ms']['max']} ms, mean "
            f"{phase['credit_ms']['mean']}; within quota: {phase['credits_within_quota']}"
        )
    print(json.dumps(result))
    return 0 if result["ok"] else 1
