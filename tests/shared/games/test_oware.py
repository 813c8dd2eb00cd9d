"""Oware (Abapa): sowing, captures, grand slam, feeding, endings, against a naive model."""

from __future__ import annotations

import random

import pytest

from kibitz.shared.games import Game, IllegalMoveError, InvalidMoveError, InvalidPositionError
from kibitz.shared.games.oware import GAME, OwareState


def position(south: list[int], north: list[int], south_store: int, side: str) -> str:
    """A position text; North's store holds whatever seeds are left out of 48."""
    north_store = 48 - sum(south) - sum(north) - south_store
    rows = ",".join(map(str, south)) + "/" + ",".join(map(str, north))
    return f"{rows}/{south_store},{north_store}/{side}"


def reference_move(
    pits: list[int], stores: list[int], mover: int, pit: int
) -> tuple[list[int], list[int]]:
    """The rules as written, seed by seed, with no shortcut (the test's own model)."""
    board = list(pits)
    seeds, board[pit], here = board[pit], 0, pit
    while seeds:
        here = (here + 1) % 12
        if here == pit:
            continue
        board[here] += 1
        seeds -= 1
    theirs = range(6, 12) if mover == 0 else range(0, 6)
    taken = []
    while here in theirs and board[here] in (2, 3):
        taken.append(here)
        here -= 1
    after = [0 if p in taken else board[p] for p in range(12)]
    if taken and any(after[p] for p in theirs) or not taken:
        stores = list(stores)
        stores[mover] += sum(board[p] for p in taken)
        return after, stores
    return board, list(stores)  # grand slam: nothing taken


def reference_moves(pits: list[int], stores: list[int], mover: int) -> list[int]:
    own = range(0, 6) if mover == 0 else range(6, 12)
    theirs = range(6, 12) if mover == 0 else range(0, 6)
    moves = [p for p in own if pits[p]]
    if not any(pits[p] for p in theirs):
        moves = [
            p for p in moves if any(reference_move(pits, stores, mover, p)[0][q] for q in theirs)
        ]
    return moves


def test_random_games_agree_with_the_reference_model() -> None:
    rng = random.Random(2026)
    endings: set[str] = set()
    for _ in range(150):
        state = GAME.initial()
        while GAME.outcome(state) is None:
            pits, stores = list(state.pits), list(state.stores)
            expected = reference_moves(pits, stores, state.to_move)
            assert GAME.legal_moves(state) == expected, GAME.format_position(state)
            move = rng.choice(expected)
            after, after_stores = reference_move(pits, stores, state.to_move, move)
            state = GAME.apply(state, move)
            assert list(state.pits) == after and list(state.stores) == after_stores
            assert GAME.hash_key(state) == GAME.hash_from_scratch(state)
        outcome = GAME.outcome(state)
        assert outcome is not None
        endings.add(outcome.reason.split(" (")[0])
    assert {"25 seeds"} <= endings


def test_start() -> None:
    state = GAME.initial()
    assert GAME.format_position(state) == "4,4,4,4,4,4/4,4,4,4,4,4/0,0/S"
    assert GAME.players == ("South", "North") and GAME.to_move(state) == 0
    assert GAME.legal_move_texts(state) == list("ABCDEF")
    assert GAME.view(state) == {
        "kind": "oware",
        "south": [4] * 6,
        "north": [4] * 6,
        "stores": [0, 0],
    }
    after = GAME.play(state, "C")
    assert GAME.view(after)["south"] == [4, 4, 0, 5, 5, 5]
    assert GAME.view(after)["north"] == [5, 4, 4, 4, 4, 4]
    assert GAME.legal_move_texts(after) == list("abcdef")


def test_lap_skips_the_origin_pit() -> None:
    state = GAME.parse_position(position([15, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], 12, "S"))
    after = GAME.play(state, "A")
    # 15 seeds over the 11 other pits: one lap, then 4 more from B; A stays empty.
    assert after.pits[0] == 0
    assert list(after.pits[1:6]) == [3, 2, 2, 2, 1]
    assert list(after.pits[6:]) == [2, 2, 2, 2, 2, 2]


def test_capture_chain_stops_at_a_pit_without_two_or_three() -> None:
    # South's F (3 seeds) lands in c; c, b hold 2-3 after sowing, a holds 4: c and b go.
    state = GAME.parse_position(position([4, 4, 4, 4, 4, 3], [3, 1, 2, 4, 4, 4], 5, "S"))
    after = GAME.play(state, "F")
    assert list(after.pits[6:]) == [4, 0, 0, 4, 4, 4]
    assert after.stores == (5 + 2 + 3, 2)
    assert GAME.move_facts(state, GAME.parse_move(state, "F")).capture == 5
    noisy = GAME.noisy_moves(state)
    assert 5 in noisy
    for move in GAME.legal_moves(state):
        assert (move in noisy) == (GAME.move_facts(state, move).capture > 0)


def test_capture_chain_does_not_reach_into_the_movers_row() -> None:
    # North sows f (1 seed) into A: A gets 2 and is taken; the chain stops at the row edge.
    state = GAME.parse_position(position([1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 1], 4, "N"))
    after = GAME.play(state, "f")
    assert after.pits[0] == 0 and after.stores == (4, 8)
    assert list(after.pits[6:]) == [2, 2, 4, 4, 4, 0]


def test_grand_slam_is_legal_but_captures_nothing() -> None:
    # F's 2 seeds make a=2 and b=3... the chain would take every North seed.
    state = GAME.parse_position(position([4, 4, 4, 4, 4, 2], [1, 2, 0, 0, 0, 0], 10, "S"))
    assert "F" in GAME.legal_move_texts(state)
    after = GAME.play(state, "F")
    assert list(after.pits[6:]) == [2, 3, 0, 0, 0, 0]
    assert after.stores == (10, 13)
    assert GAME.move_facts(state, 5).capture == 0


def test_must_feed_an_opponent_without_seeds() -> None:
    state = GAME.parse_position(position([1, 0, 0, 0, 3, 1], [0] * 6, 20, "S"))
    assert GAME.legal_move_texts(state) == ["E", "F"]
    with pytest.raises(IllegalMoveError, match="'A'"):
        GAME.parse_move(state, "A")


def test_no_feeding_move_ends_the_game_and_the_mover_takes_their_seeds() -> None:
    state = GAME.parse_position(position([1, 1, 0, 0, 0, 0], [0] * 6, 22, "S"))
    assert GAME.legal_moves(state) == []
    outcome = GAME.outcome(state)
    assert outcome is not None
    assert (outcome.winner, outcome.reason) == (None, "no move can feed (24-24)")
    state = GAME.parse_position(position([3, 0, 0, 0, 0, 0], [0] * 6, 21, "S"))
    outcome = GAME.outcome(state)
    assert outcome is not None and outcome.winner is None  # 24-24 after the count-out


@pytest.mark.parametrize(
    ("text", "winner", "reason"),
    [
        (position([0] * 6, [1, 0, 0, 0, 0, 0], 25, "N"), 0, "25 seeds"),
        (position([1, 0, 0, 0, 0, 0], [0] * 6, 20, "S"), 1, "25 seeds"),
        (position([0] * 6, [0] * 6, 24, "S"), None, "24-24"),
    ],
)
def test_winning_and_drawn_scores(text: str, winner: int | None, reason: str) -> None:
    state = GAME.parse_position(text)
    outcome = GAME.outcome(state)
    assert outcome is not None and (outcome.winner, outcome.reason) == (winner, reason)
    assert GAME.legal_moves(state) == [] and GAME.perft(state, 2) == 0


def test_threefold_repetition_ends_the_game_with_a_count_out() -> None:
    # Two seeds each, chasing each other round the board without ever capturing.
    cycle = ["F", "f", "A", "a", "B", "b", "C", "c", "D", "d", "E", "e"]
    start = GAME.parse_position(position([0, 0, 0, 0, 0, 2], [0, 0, 0, 0, 0, 2], 20, "S"))
    state = start
    for text in cycle:
        state = GAME.play(state, text)
    assert state.pits == start.pits and GAME.outcome(state) is None
    for text in cycle:
        state = GAME.play(state, text)
    outcome = GAME.outcome(state)
    assert outcome is not None and outcome.reason == "threefold repetition (22-26)"
    assert outcome.winner == 1 and GAME.final_scores(state) == (22, 26)
    assert GAME.legal_moves(state) == []
    text = GAME.format_position(state)
    assert text.endswith(" moves " + " ".join(cycle * 2))
    assert GAME.outcome(GAME.parse_position(text)) == outcome


def test_fast_perft_equals_the_generic_walk() -> None:
    state = GAME.initial()
    for depth in range(1, 6):
        assert GAME.perft(state, depth) == Game.perft(GAME, state, depth)
    assert [GAME.perft(state, d) for d in range(1, 6)] == [6, 36, 190, 1014, 5219]
    # One lap of a capture-free cycle already played: repetitions end lines at ply 12+.
    fresh_text = position([0, 0, 0, 0, 0, 2], [0, 0, 0, 0, 0, 2], 20, "S")
    near_cycle = GAME.parse_position(fresh_text + " moves F f A a B b C c D d E e")
    assert GAME.perft(near_cycle, 13) < GAME.perft(GAME.parse_position(fresh_text), 13)
    for depth in (11, 13, 16):
        assert GAME.perft(near_cycle, depth) == Game.perft(GAME, near_cycle, depth)


@pytest.mark.parametrize(
    "text",
    ["", "4,4,4,4,4,4/4,4,4,4,4,4/0,0", "4,4,4,4,4,4/4,4,4,4,4,4/0,0/X",
     "4,4,4,4,4/4,4,4,4,4,4/4,0/S", "4,4,4,4,4,4/4,4,4,4,4,4/1,0/S",
     "a,4,4,4,4,4/4,4,4,4,4,4/0,0/S", "4,4,4,4,4,4/4,4,4,4,4,4/0,0/S moves Z"],
)  # fmt: skip
def test_bad_positions_name_the_text(text: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        GAME.parse_position(text)
    assert repr(text) in str(info.value)


def test_bad_moves_name_the_text() -> None:
    state: OwareState = GAME.initial()
    for text in ("G", "AB", "1", ""):
        with pytest.raises(InvalidMoveError, match=repr(text)):
            GAME.parse_move(state, text)
    with pytest.raises(IllegalMoveError, match="'a'"):
        GAME.parse_move(state, "a")
