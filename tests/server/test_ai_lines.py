"""An AI's line (its principal variation) is a hint while the game runs: no player or
spectator state, ``thinking`` report, resume replay or record shows it until the game is
over (a spectator may be the player on a second connection: tests/security/test_leaks.py);
then the live record and the archived game carry it on each AI move. Real server, Redis
and workers."""

from __future__ import annotations

import random
from typing import Any

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient

pytestmark = pytest.mark.asyncio


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200, url
        return await resp.json()


def lines_in(state: dict[str, Any]) -> list[Any]:
    event = state.get("event") or {}
    return [e["pv"] for e in [event, *event.get("missed", [])] if "pv" in e]


async def test_the_ais_line_is_kept_and_shown_only_after_the_game(live_server) -> None:
    url = live_server.http_url
    rng = random.Random(7)
    async with (
        await KibitzClient.open(url) as player,
        await KibitzClient.open(url) as spectator,
    ):
        room = (await player.create("tictactoe", "ai:8", seat=0))["room"]
        await spectator.watch(room)
        seen: list[dict[str, Any]] = []
        state = await player.wait_state(room, lambda s: s["to_move"] == 0)
        while state["status"] == "playing":
            seen.append(state)
            if state["version"] >= 3:  # mid-game: nothing shows the AI's line yet
                record = await get_json(f"{url}/api/rooms/{room}/record")
                assert record["events"] and not [e for e in record["events"] if "pv" in e]
                await player.resume(room, player.tokens[room][1], since=0)
                replay = await player.wait_state(room, lambda s: "missed" in (s.get("event") or {}))
                assert replay["event"]["missed"] and not lines_in(replay)
            version = state["version"]
            await player.move(room, rng.choice(state["legal_moves"]), version)
            state = await player.wait_state(
                room, lambda s, v=version: s["version"] > v + 1 or s["status"] == "over"
            )
        seen.append(state)
        assert state["status"] == "over"
        # What the spectator got while the game ran: no state, and no thinking report, has
        # the line (the last state, once it is over, may: the game has ended).
        got: list[dict[str, Any]] = []

        def note_until_over(message: dict[str, Any]) -> bool:
            got.append(message)
            return message["type"] == "state" and message["status"] == "over"

        watched = await spectator.next_message(note_until_over)
        assert not [m for m in got if m["type"] == "thinking" and m["pv"]]
        running = [m for m in got if m["type"] == "state" and m["status"] == "playing"]
        assert not [pv for m in running for pv in lines_in(m)]
        playing = [s for s in seen if s["status"] == "playing"]
        assert playing and not [pv for s in playing for pv in lines_in(s)]
        assert watched["version"] == state["version"]

    record = await get_json(f"{url}/api/rooms/{room}/record")
    ai_moves = [e for e in record["events"] if e["kind"] == "move" and e.get("seat") == 1]
    assert ai_moves and all(e["pv"] and e["pv"][0] == e["move"] for e in ai_moves)
    game = await get_json(f"{url}/api/games/{room}")
    assert game["status"] == "over"
    for move in game["moves"]:
        if move["seat"] == 1:
            assert move["pv"][0] == move["move"]
        else:
            assert "pv" not in move
