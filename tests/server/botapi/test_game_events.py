"""When a commit starts or finishes a game, for every way a room starts and ends
(server/botapi/game_events.py), on rooms made and changed by the domain itself."""

from __future__ import annotations

from typing import Any

import pytest

from kibitz.server.botapi.game_events import game_change, game_info, game_lines
from kibitz.server.domain import clocks
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Room, SeatAccount
from kibitz.shared.games import find_game

ALICE = SeatAccount(1, "Alice", "pa", rating=1600)
BOB = SeatAccount(2, "Bob", "pb", rating=1500, bot=True)
T0 = 1_000_000


def settled(room: Room, now: int) -> Room:
    """The clock made consistent with the room, as the room service does on each commit."""
    to_move = find_game(room.game).to_move(rooms.replay(room))
    room.clock = clocks.settle(room.clock, to_move, room.status, now)
    return room


def started(game: str = "chess", clock: dict[str, int] | None = None) -> Room:
    """A room where Alice (white) and Bob (black) play."""
    room, event, _ = rooms.create_room(
        "r" * 10, game, {}, "human", 0, None, "tok-a", T0, holder=ALICE, clock=clock
    )
    assert game_change(event.kind, room, -1) is None  # waiting for a second player
    joined, event, _ = rooms.join_room(room, None, None, "tok-b", T0, holder=BOB)
    assert game_change(event.kind, joined, room.version) == "gameStart"
    return settled(joined, T0)


def play(room: Room, *moves: str) -> Room:
    for text in moves:
        seat = find_game(room.game).to_move(rooms.replay(room))
        new, event, _ = rooms.play_move(room, seat, text, room.version, T0 + 1)
        if new.status != "over":
            assert game_change(event.kind, new, room.version) is None
        room = settled(new, T0 + 1)
    return room


def test_a_room_made_full_at_once_starts_its_game() -> None:
    against_ai, event, _ = rooms.create_room(
        "r" * 10, "chess", {}, "ai:3", 0, None, "tok", T0, holder=ALICE
    )
    assert against_ai.status == "playing"
    assert game_change(event.kind, against_ai, -1) == "gameStart"
    # A seek, the pool or a challenge: a new room born with both seats (event created).
    full = started()
    assert game_change("created", full, -1) == "gameStart"


def test_a_rematch_starts_a_game_and_its_agreement_finishes_nothing() -> None:
    over, _ = rooms.resign(play(started(), "e2e4"), 1, T0 + 2)
    offered, event, _ = rooms.answer_offer(over, 0, "rematch", "offer", T0 + 3)
    assert game_change(event.kind, offered, over.version) is None
    agreed, event, _ = rooms.answer_offer(offered, 1, "rematch", "offer", T0 + 4)
    assert event.kind == "rematch"
    assert game_change(event.kind, agreed, offered.version) is None
    rematch, event = rooms.rematch_room(agreed, T0 + 5)
    assert game_change(event.kind, rematch, -1) == "gameStart"


def test_moves_offers_and_takebacks_change_nothing() -> None:
    room = play(started(), "e2e4", "e7e5")
    offered, event, _ = rooms.answer_offer(room, 0, "draw", "offer", T0 + 2)
    assert game_change(event.kind, offered, room.version) is None
    declined, event, _ = rooms.answer_offer(offered, 1, "draw", "decline", T0 + 3)
    assert game_change(event.kind, declined, offered.version) is None
    asked, event, _ = rooms.answer_offer(declined, 1, "takeback", "offer", T0 + 4)
    taken, event, _ = rooms.answer_offer(asked, 0, "takeback", "offer", T0 + 5)
    assert event.kind == "takeback"
    assert game_change(event.kind, taken, asked.version) is None


def _ended_by(how: str) -> tuple[str, Room, int]:
    """A started game ended ``how``: (event kind, room, the version it was at)."""
    if how == "mate":
        room = play(started(), "f2f3", "e7e5", "g2g4")
        new, event, _ = rooms.play_move(room, 1, "d8h4", room.version, T0 + 2)
    elif how == "rules":  # a game's own end: three in a row
        room = play(started("tictactoe"), "1", "4", "2", "5")
        new, event, _ = rooms.play_move(room, 0, "3", room.version, T0 + 2)
    elif how == "resign":
        room = play(started(), "e2e4")
        new, event = rooms.resign(room, 0, T0 + 2)
    elif how == "abort":
        room = started()
        new, event = rooms.abort(room, 1, T0 + 2)
    elif how == "draw":
        room = play(started(), "e2e4", "e7e5")
        offered, _, _ = rooms.answer_offer(room, 0, "draw", "offer", T0 + 2)
        room, (new, event, _) = offered, rooms.answer_offer(offered, 1, "draw", "offer", T0 + 3)
    elif how == "flag":
        room = play(started(clock={"initial_ms": 60_000, "increment_ms": 0}), "e2e4", "e7e5")
        new, event = rooms.expire(room, T0 + 10**8, T0 + 10**8)
    elif how == "no-first-move":
        room = started(clock={"initial_ms": 60_000, "increment_ms": 0})
        new, event = rooms.expire(room, T0 + 10**8, T0 + 10**8)
    elif how == "abandon":
        room = play(started(), "e2e4")
        new, event = rooms.abandon(room, T0 + 2)
    elif how == "abandon-unmoved":
        room = started()
        new, event = rooms.abandon(room, T0 + 2)
    elif how == "claim":
        room = play(started(), "e2e4")
        new, event = rooms.claim(room, 0, "win", T0, 1000, T0 + 5000)
    else:
        raise AssertionError(how)
    return event.kind, new, room.version


WAYS = ["mate", "rules", "resign", "abort", "draw", "flag", "no-first-move", "abandon",
        "abandon-unmoved", "claim"]  # fmt: skip


@pytest.mark.parametrize("how", WAYS)
def test_every_way_a_game_ends_finishes_it_once(how: str) -> None:
    kind, over, version = _ended_by(how)
    assert over.status == "over"
    assert game_change(kind, over, version) == "gameFinish"
    # Whatever the finished room takes next finishes nothing again.
    offered, event, _ = rooms.answer_offer(over, 0, "rematch", "offer", T0 + 10**9)
    assert game_change(event.kind, offered, over.version) is None


def test_a_waiting_room_called_off_never_started_nor_finished() -> None:
    room, _, _ = rooms.create_room("r" * 10, "chess", {}, "human", 0, None, "t", T0, holder=ALICE)
    aborted, event = rooms.abort(room, 0, T0 + 1)
    assert aborted.status == "over"
    assert game_change(event.kind, aborted, room.version) is None


def snapshot_of(room: Room) -> dict[str, Any]:
    return rooms.snapshot(room, rooms.replay(room))


def test_each_account_seat_gets_its_own_line() -> None:
    room = started(clock={"initial_ms": 180_000, "increment_ms": 2000})
    lines = dict(game_lines("gameStart", room, snapshot_of(room)))
    white, black = lines[1], lines[2]
    assert white["type"] == black["type"] == "gameStart"
    g = white["game"]
    assert g["gameId"] == g["id"] == room.id and g["fullId"] == room.id + "w"
    assert (g["color"], g["isMyTurn"], g["hasMoved"], g["lastMove"]) == ("white", True, False, "")
    assert g["opponent"] == {"id": "bob", "username": "Bob", "rating": 1500}
    assert g["fen"] == "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
    assert g["variant"] == {"key": "standard", "name": "Standard", "short": "Std"}
    assert g["speed"] == g["perf"] == "blitz"
    assert g["status"] == {"id": 20, "name": "started"}
    assert g["secondsLeft"] == 180 and g["rated"] is False
    assert g["compat"] == {"bot": True, "board": True}
    assert "winner" not in g and "source" not in g
    b = black["game"]
    assert (b["color"], b["isMyTurn"], b["fullId"]) == ("black", False, room.id + "b")
    assert b["opponent"] == {"id": "alice", "username": "Alice", "rating": 1600}


def test_a_finished_game_names_its_winner_and_how() -> None:
    _, over, _ = _ended_by("resign")
    lines = dict(game_lines("gameFinish", over, snapshot_of(over)))
    for account in (1, 2):
        g = lines[account]["game"]
        assert g["status"] == {"id": 31, "name": "resign"}
        assert g["winner"] == "black" and g["isMyTurn"] is False
    assert lines[1]["game"]["hasMoved"] is True and lines[2]["game"]["hasMoved"] is False
    assert lines[1]["game"]["lastMove"] == "e2e4"


def test_against_the_ai_only_the_account_seat_is_told() -> None:
    room, _, _ = rooms.create_room("r" * 10, "othello", {}, "ai:2", 1, None, "t", T0, holder=ALICE)
    lines = game_lines("gameStart", room, snapshot_of(room))
    assert [account for account, _ in lines] == [1]
    g = game_info(room, snapshot_of(room), 1)
    assert g["opponent"] == {"username": "AI level 2", "aiLevel": 2}
    assert g["source"] == "ai" and g["color"] == "black"
    assert g["variant"]["key"] == "othello" and g["speed"] == "correspondence"
    assert "secondsLeft" not in g
