"""Every way a room's game ends sets ``result.termination`` beside the winner and reason.

Pure room commands (no Redis, no sockets): the rules' end, a resignation, a flag, a draw
agreed, an abort, a claim (win and draw), a game abandoned (after moves) or lapsed (before
any). And a room that ended before terminations existed is still read right.
"""

from __future__ import annotations

from kibitz.server.domain import clocks
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Room
from kibitz.shared.games import TERMINATIONS

T0 = 1_700_000_000_000


def human_game(moves: tuple[str, ...] = (), clock: dict[str, int] | None = None) -> Room:
    """A tic-tac-toe game between ann (X) and bob (O) after ``moves``."""
    room, _, _ = rooms.create_room(
        "roomt", "tictactoe", {}, "human", 0, "ann", "tok-a", T0, clock=clock
    )
    room, _, _ = rooms.join_room(room, 1, "bob", "tok-b", T0)
    for i, move in enumerate(moves):
        room, _, _ = rooms.play_move(room, i % 2, move, None, T0)
    return room


def ending(room: Room) -> tuple[int | None, str, str]:
    assert room.status == "over" and room.result is not None
    assert list(room.result) == ["winner", "reason", "termination"]  # the wire's key order
    assert room.result["termination"] in TERMINATIONS
    return room.result["winner"], room.result["reason"], room.result["termination"]


def test_the_rules_end_carries_the_games_termination() -> None:
    won = human_game(("1", "4", "2", "5", "3"))
    assert ending(won) == (0, "three in a row", "line")
    full = human_game(("1", "2", "3", "5", "4", "6", "8", "7", "9"))
    assert ending(full) == (None, "board full", "board-full")


def test_resignation() -> None:
    resigned, event = rooms.resign(human_game(("5",)), 1, T0)
    assert event.kind == "resign"
    assert ending(resigned) == (0, "O resigned", "resignation")


def test_flag() -> None:
    room = human_game(clock={"initial_ms": 1_000})
    room.clock = clocks.settle(room.clock, 0, room.status, T0)
    room, _, _ = rooms.play_move(room, 0, "1", None, T0, clock_ms=T0 + 100)
    room, _, _ = rooms.play_move(room, 1, "5", None, T0, clock_ms=T0 + 200)
    assert room.clock is not None
    flagged, event = rooms.expire(room, T0 + 1_200 + clocks.grace_ms(room.clock, 0), T0)
    assert event.kind == "flag"
    assert ending(flagged) == (1, "X ran out of time", "time")


def test_draw_agreed() -> None:
    offered, _, _ = rooms.answer_offer(human_game(("5",)), 0, "draw", "offer", T0)
    drawn, event, _ = rooms.answer_offer(offered, 1, "draw", "accept", T0)
    assert event.kind == "draw"
    assert ending(drawn) == (None, "draw agreed", "agreement")


def test_abort() -> None:
    aborted, event = rooms.abort(human_game(("5",)), 1, T0)
    assert event.kind == "abort" and rooms.is_aborted(aborted)
    assert ending(aborted) == (None, "aborted", "abort")


def test_claims() -> None:
    room = human_game(("5",))
    won, event = rooms.claim(room, 0, "win", T0 - 60_000, 30_000, T0)
    assert event.kind == "claim"
    assert ending(won) == (0, "O left the game", "claim")
    drawn, _ = rooms.claim(room, 1, "draw", T0 - 60_000, 30_000, T0)
    assert ending(drawn) == (None, "draw: X left the game", "claim")


def test_abandoned_after_moves_and_lapsed_before_any() -> None:
    abandoned, event = rooms.abandon(human_game(("5",)), T0)
    assert event.kind == "over" and not rooms.is_aborted(abandoned)
    assert ending(abandoned) == (None, "abandoned", "abandon")
    lapsed, event = rooms.abandon(human_game(), T0)
    assert event.kind == "abort" and rooms.is_aborted(lapsed)
    assert ending(lapsed) == (None, "aborted: X did not move in time", "abort")


def test_a_result_from_before_terminations_is_still_read() -> None:
    old = human_game(("5",))
    old.status = "over"
    old.result = {"winner": None, "reason": "aborted: O did not move in time"}
    assert rooms.is_aborted(old)
    old.result = {"winner": None, "reason": "abandoned"}
    assert not rooms.is_aborted(old)
    # A code decides over the words: an "abort" whatever its reason says.
    old.result = {"winner": None, "reason": "x", "termination": "abort"}
    assert rooms.is_aborted(old)
