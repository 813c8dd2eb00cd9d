"""Who is charged with an abandonment, decided on the finished room (pure): the aborter of
a rated game whose human opponent had joined; the side whose clock ended a rated game; the
side a win or a draw was claimed against. Casual games, rooms nobody joined, games
against the AI aborted and resignations charge nobody."""

from __future__ import annotations

from kibitz.server.domain import room as rooms
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Room, SeatAccount
from kibitz.server.moderation.hooks import (
    aborted_by,
    claimed_against,
    first_move_missed,
    timed_out_seat,
)

ANN = Account(1, "ann", "a" * 32)
BOB = Account(2, "bob", "b" * 32)
CLOCK = {"initial_ms": 60_000, "increment_ms": 0}


def holder(account: Account) -> SeatAccount:
    return SeatAccount(account.id, account.username, account.player_id, 1500, True)


def started(rated: bool = True, clock: dict[str, int] | None = None) -> Room:
    room, _, _ = rooms.create_room(
        "room1", "tictactoe", {}, "human", 0, None, "t0", 1_000, clock=clock,
        rated=rated, holder=holder(ANN),
    )  # fmt: skip
    joined, _, _ = rooms.join_room(room, 1, None, "t1", 2_000, holder=holder(BOB))
    return joined


def test_aborting_a_rated_game_after_the_join_charges_the_aborter() -> None:
    aborted, _ = rooms.abort(started(), 0, 3_000)
    assert aborted_by(aborted, ANN) == ANN.id
    assert aborted_by(aborted, BOB) == BOB.id  # whichever seat's account aborted
    assert aborted_by(aborted, Account(9, "eve", "e" * 32)) is None  # holds no seat
    assert aborted_by(aborted, None) is None


def test_casual_games_and_rooms_nobody_joined_charge_nobody() -> None:
    casual, _ = rooms.abort(started(rated=False), 0, 3_000)
    assert aborted_by(casual, ANN) is None
    waiting, _, _ = rooms.create_room(
        "room2", "tictactoe", {}, "human", 0, None, "t0", 1_000, rated=True, holder=holder(ANN)
    )
    alone, _ = rooms.abort(waiting, 0, 3_000)
    assert aborted_by(alone, ANN) is None
    assert timed_out_seat(casual) is None


def test_the_side_to_move_is_charged_when_the_clock_ends_a_rated_game() -> None:
    room = started(clock=CLOCK)
    moved, _, _ = rooms.play_move(room, 0, "5", None, 3_000)
    moved, _, _ = rooms.play_move(moved, 1, "1", None, 4_000)
    assert timed_out_seat(moved) is None  # still playing
    flagged, _ = rooms.expire(moved, 10**9, 10**9)  # X (seat 0) to move: its flag fell
    assert flagged.result is not None and flagged.result["termination"] == "time"
    assert timed_out_seat(flagged) == 0
    late_reply, _, _ = rooms.play_move(started(clock=CLOCK), 0, "5", None, 3_000)
    first_move_late, _ = rooms.expire(late_reply, 10**9, 10**9)  # O's first move never came
    assert first_move_late.result is not None
    assert first_move_late.result["termination"] == "abort"
    assert timed_out_seat(first_move_late) == 1
    resigned, _ = rooms.resign(moved, 1, 5_000)
    assert timed_out_seat(resigned) is None
    casual, _, _ = rooms.play_move(started(rated=False, clock=CLOCK), 0, "5", None, 3_000)
    assert timed_out_seat(rooms.expire(casual, 10**9, 10**9)[0]) is None


def test_aborting_ones_own_rated_game_against_the_ai_charges_nobody() -> None:
    room, _, _ = rooms.create_room(
        "room3", "tictactoe", {}, "ai:1", 0, None, "t0", 1_000, rated=True, holder=holder(ANN),
        ai_rating=1200,
    )  # fmt: skip
    assert all(seat.taken for seat in room.seats)
    aborted, _ = rooms.abort(room, 0, 3_000)
    assert aborted.result is not None and aborted.result["termination"] == "abort"
    assert aborted_by(aborted, ANN) is None


def test_a_claim_charges_the_side_that_left_a_rated_game() -> None:
    room, _, _ = rooms.play_move(started(), 0, "5", None, 3_000)
    won, _ = rooms.claim(room, 0, "win", 3_000, 0, 10_000)  # ann (seat 0) claims
    assert claimed_against(won, "t0") == BOB.id
    drawn, _ = rooms.claim(room, 1, "draw", 3_000, 0, 10_000)  # bob claims a draw
    assert claimed_against(drawn, "t1") == ANN.id
    assert claimed_against(won, "not a token") is None
    casual, _, _ = rooms.play_move(started(rated=False), 0, "5", None, 3_000)
    assert claimed_against(rooms.claim(casual, 0, "win", 3_000, 0, 10_000)[0], "t0") is None
    resigned, _ = rooms.resign(room, 1, 5_000)
    assert claimed_against(resigned, "t0") is None


def test_a_first_move_not_made_is_told_from_a_flag() -> None:
    late_reply, _, _ = rooms.play_move(started(clock=CLOCK), 0, "5", None, 3_000)
    assert first_move_missed(rooms.expire(late_reply, 10**9, 10**9)[0])
    moved, _, _ = rooms.play_move(late_reply, 1, "1", None, 4_000)
    assert not first_move_missed(rooms.expire(moved, 10**9, 10**9)[0])
