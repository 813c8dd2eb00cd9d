"""A bot that plays one whole game through the public protocol (``kibitz bot``)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kibitz.client.connection import KibitzClient, newer_than


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
        }


async def play_game(
    url: str,
    game: str,
    opponent: str = "human",
    join: str | None = None,
    seat: int | None = None,
    options: dict[str, Any] | None = None,
    seed: int | None = None,
    timeout: float = 600.0,
) -> BotReport:
    """Create (or join) a room and play random legal moves until the game ends."""
    rng = random.Random(seed)
    client = await KibitzClient.open(url)
    try:
        if join:
            reply = await client.join(join, seat)
        else:
            reply = await client.create(game, opponent, seat, options, name="bot")
        room, my_seat = reply["room"], reply["seat"]
        while True:
            state = await client.wait_state(
                room,
                lambda s: (
                    s["status"] == "over" or (s["status"] == "playing" and s["to_move"] == my_seat)
                ),
                timeout=timeout,
            )
            if state["status"] == "over":
                break
            await client.move(room, rng.choice(state["legal_moves"]), state["version"])
            # Wait for our move to land before looking at the next state.
            await client.wait_state(room, newer_than(state["version"]))
        result = state["result"] or {}
        winner = result.get("winner")
        outcome = "draw" if winner is None else ("win" if winner == my_seat else "loss")
        return BotReport(
            room, state["game"], my_seat, outcome, result.get("reason", ""), len(state["moves"])
        )
    finally:
        await client.close()
