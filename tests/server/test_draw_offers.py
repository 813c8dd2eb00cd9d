"""A draw can be offered only in a game that can end drawn (issue 22): the game states it
(``GamePolicy.draw_offers``), the server refuses a draw offer in a game without drawn
endings with ``offer/not_allowed``, and ``GET /api/games`` says it as ``draws``.

First the game facts and the room decision (pure), then the same through a real server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Room, RoomError
from kibitz.shared.games import available_games, find_game
from kibitz.shared.games.base import Game

TIMEOUT = 30


def drawn_endings(game: Game[Any, Any], start: Any, limit: int = 200_000) -> int:
    """How many finished positions reachable from ``start`` are drawn (a bounded search
    over every line; the games it is used on are small)."""
    seen: set[Any] = set()
    todo = [start]
    drawn = 0
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        assert len(seen) <= limit, "the search grew past its bound"
        outcome = game.outcome(state)
        if outcome is not None:
            drawn += outcome.winner is None
            continue
        todo.extend(game.apply(state, move) for move in game.legal_moves(state))
    return drawn


def test_the_games_that_state_no_draw_have_no_drawn_ending() -> None:
    no_draws = [g.name for g in available_games() if not g.policy.draw_offers]
    assert no_draws == ["matches"]
    matches = find_game("matches")
    for count in range(1, 40):
        assert drawn_endings(matches, matches.initial({"count": count})) == 0, count
    for count in range(10, 40):
        start = matches.initial({"count": count, "variant": "double"})
        assert drawn_endings(matches, start) == 0, count
    # The check can see a drawn ending where there is one.
    tictactoe = find_game("tictactoe")
    assert tictactoe.policy.draw_offers
    assert drawn_endings(tictactoe, tictactoe.initial()) > 0


def human_room(game: str) -> Room:
    room, _, _ = rooms.create_room("room1", game, {}, "human", 0, "ann", "tok-a", 1)
    room, _, _ = rooms.join_room(room, 1, "bob", "tok-b", 2)
    return rooms.play_move(room, 0, "1", None, 3)[0]


def refusal(room: Room, seat: int, kind: str, action: str) -> RoomError:
    with pytest.raises(RoomError) as err:
        rooms.answer_offer(room, seat, kind, action, 4)  # type: ignore[arg-type]
    return err.value


def test_a_draw_offer_in_matches_is_refused_and_other_offers_stand() -> None:
    room = human_room("matches")
    for seat in (0, 1):
        err = refusal(room, seat, "draw", "offer")
        assert err.code == "offer/not_allowed" and "no drawn ending" in err.message
    assert refusal(room, 1, "draw", "accept").code == "offer/none"
    # A takeback is still an offer of the game.
    asked, event, _ = rooms.answer_offer(room, 0, "takeback", "offer", 4)
    assert event.kind == "takeback_offer" and asked.offers == {"takeback": 0}
    # Against the computer too: refused before the AI is asked.
    ai_room, _, _ = rooms.create_room("room2", "matches", {}, "ai:1", 0, "ann", "t", 1)
    ai_room = rooms.play_move(ai_room, 0, "1", None, 2)[0]
    assert refusal(ai_room, 0, "draw", "offer").code == "offer/not_allowed"
    # A game with draws is unchanged.
    offered, event, _ = rooms.answer_offer(human_room("tictactoe"), 0, "draw", "offer", 4)
    assert event.kind == "draw_offer" and offered.offers == {"draw": 0}


@pytest.mark.asyncio
async def test_the_server_refuses_and_the_catalogue_says_draws(live_server: Any) -> None:
    url = live_server.http_url
    async with aiohttp.ClientSession() as session, session.get(f"{url}/api/games") as resp:
        assert resp.status == 200
        games = await resp.json()
    draws = {entry["name"]: entry["draws"] for entry in games}
    assert draws == {g.name: g.name != "matches" for g in available_games()}

    a = await KibitzClient.open(url)
    b = await KibitzClient.open(url)
    try:
        async with asyncio.timeout(TIMEOUT):
            room = (await a.create("matches", seat=0, name="ann"))["room"]
            await b.join(room)
            await a.wait_state(room, lambda s: s["status"] == "playing")
            with pytest.raises(ServerError) as err:
                await a.draw(room)
            assert err.value.code == "offer/not_allowed"
            await a.resign(room)
            over = await b.wait_state(room, lambda s: s["status"] == "over")
            assert over["offers"]["draw"] is None
    finally:
        await a.close()
        await b.close()
