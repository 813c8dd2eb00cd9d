"""A bot that plays one whole game through the public protocol (``kibitz bot``).

It heals: a dead or frozen server is noticed by WebSocket pings, the bot reconnects (to
the next of its URLs when it has several) and resumes its room, transient errors are
retried with backoff, and a turn that brings no news for a while is re-synced with
``resume`` (that repairs updates lost on the server's side).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kibitz.client.connection import (
    DEFAULT_BACKOFF,
    Backoff,
    KibitzClient,
    ServerError,
    new_player_key,
)

# A wait that brings nothing for this long asks the server again (``resume`` with since).
RESYNC_AFTER_S = 10.0
# Errors that only mean our view was behind: the next state tells what to do.
BEHIND_ERRORS = frozenset({"room/stale", "move/not_your_turn", "game/over"})


@dataclass
class BotReport:
    room: str
    game: str
    seat: int
    outcome: str  # win, loss or draw, from the bot's side
    reason: str
    moves: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "room": self.room,
            "game": self.game,
            "seat": self.seat,
            "outcome": self.outcome,
            "reason": self.reason,
            "moves": self.moves,
            "game_id": self.room,  # the game's id in /api/games/{id} is its room's id
        }


async def play_game(
    url: str | Sequence[str],
    game: str,
    opponent: str = "human",
    join: str | None = None,
    seat: int | None = None,
    options: dict[str, Any] | None = None,
    seed: int | None = None,
    timeout: float = 600.0,
    *,
    ping_interval: float | None = None,
    ping_timeout: float | None = None,
    backoff: Backoff = DEFAULT_BACKOFF,
    player_key: str | None = None,
) -> BotReport:
    """Create (or join) a room and play random legal moves until the game ends.

    ``url`` may list several nodes of one cluster; the bot moves on to the next when one
    goes away. ``timeout`` bounds each wait for our turn. ``player_key`` is the bot's
    player key (a fresh one by default).
    """
    player_key = player_key or new_player_key()
    rng = random.Random(seed)
    client = await KibitzClient.open(
        url, heal=True, ping_interval=ping_interval, ping_timeout=ping_timeout, backoff=backoff
    )
    try:
        if join:
            reply = await client.join(join, seat, player_key=player_key)
        else:
            reply = await client.create(
                game, opponent, seat, options, name="bot", player_key=player_key
            )
        room, my_seat = reply["room"], reply["seat"]
        moved_from: dict[str, Any] | None = None  # the state we last played a move in

        def ready(s: dict[str, Any]) -> bool:
            """Over, or our turn in a state we have not answered yet. A resync at the
            version we played means our move may have been lost: play again."""
            if s["status"] == "over":
                return True
            if s["status"] != "playing" or s["to_move"] != my_seat:
                return False
            if moved_from is None or s["version"] != moved_from["version"]:
                return True
            return s is not moved_from and s["event"]["kind"] == "resync"

        while True:
            state = await _wait_healing(client, room, ready, timeout, backoff)
            if state["status"] == "over":
                break
            moved_from = state
            await client.move(room, rng.choice(state["legal_moves"]), state["version"])
        result = state["result"] or {}
        winner = result.get("winner")
        outcome = "draw" if winner is None else ("win" if winner == my_seat else "loss")
        return BotReport(
            room, state["game"], my_seat, outcome, result.get("reason", ""), len(state["moves"])
        )
    finally:
        await client.close()


async def _wait_healing(
    client: KibitzClient,
    room: str,
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float,
    backoff: Backoff,
) -> dict[str, Any]:
    """``wait_state`` that re-syncs the room when nothing comes for RESYNC_AFTER_S and
    after a transient error (waiting with backoff first), within ``timeout`` in all."""
    deadline = time.monotonic() + timeout
    delays = backoff.delays()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no turn in room {room} within {timeout:g} s")
        try:
            return await client.wait_state(room, predicate, timeout=min(left, RESYNC_AFTER_S))
        except TimeoutError:
            await client.resync(room)
        except ServerError as exc:
            if exc.code in BEHIND_ERRORS:
                continue  # our move raced a newer state; the next one decides
            delay = next(delays, None) if exc.transient else None
            if delay is None:
                raise
            await asyncio.sleep(delay)
            await client.resync(room)
