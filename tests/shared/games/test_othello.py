"""Othello rules: perft against the published counts, passes, game end, notation, hashing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kibitz.shared.games.base import (
    IllegalMoveError,
    InvalidMoveError,
    InvalidPositionError,
    Outcome,
)
from kibitz.shared.games.othello import GAME, PASS, OthelloState, flips, move_mask
from kibitz.shared.games.registry import find_game

PERFT = [4, 12, 56, 244, 1396, 8200, 55092, 390216, 3005288]
START_TEXT = "...........................wb......bw........................... b"
# Black to move has no move while White has some (found by a random playout).
BLACK_PASSES = "www......w......wwwbbb.....bb.....bbb.......b................... b"


def _play(choices: list[int]) -> list[OthelloState]:
    """The states of a game that picks moves by the given indices (modulo the count)."""
    state = GAME.initial()
    states = [state]
    for choice in choices:
        moves = GAME.legal_moves(state)
        if not moves:
            break
        state = GAME.apply(state, moves[choice % len(moves)])
        states.append(state)
    return states


def test_registered_and_players() -> None:
    assert find_game("othello") is GAME
    assert GAME.players == ("Black", "White")
    assert GAME.to_move(GAME.initial()) == 0


def test_start_position_text_and_moves() -> None:
    start = GAME.initial()
    assert GAME.format_position(start) == START_TEXT
    assert sorted(GAME.legal_move_texts(start)) == ["c4", "d3", "e6", "f5"]


@pytest.mark.parametrize("depth", range(1, 10))
def test_perft_from_start(depth: int) -> None:
    assert GAME.perft(GAME.initial(), depth) == PERFT[depth - 1]


def _perft_by_definition(state: OthelloState, depth: int) -> int:
    if depth == 0:
        return 1
    moves = GAME.legal_moves(state)
    if depth == 1:
        return len(moves)
    return sum(_perft_by_definition(GAME.apply(state, m), depth - 1) for m in moves)


@pytest.mark.parametrize("text", [START_TEXT, BLACK_PASSES])
def test_fast_perft_agrees_with_the_definition(text: str) -> None:
    state = GAME.parse_position(text)
    for depth in range(6):
        assert GAME.perft(state, depth) == _perft_by_definition(state, depth)
    if text == BLACK_PASSES:
        assert GAME.perft(state, 1) == 1  # the pass is one move


def test_flips_in_every_direction() -> None:
    # c3 is empty and ringed by White discs, each line closed by a Black disc beyond.
    rows = ["b.b.b...", ".www....", "bw.wb...", ".www....", "b.b.b..."]
    state = GAME.parse_position("".join(rows) + "." * 24 + " b")
    c3 = 2 * 8 + 2
    assert move_mask(state.black, state.white) >> c3 & 1
    assert flips(state.black, state.white, c3).bit_count() == 8
    after = GAME.play(state, "c3")
    assert after.white == 0
    assert after.black.bit_count() == 8 + 8 + 1
    assert GAME.hash_key(after) == GAME.hash_from_scratch(after)


def test_no_flip_across_the_board_edge() -> None:
    # g1 Black, h1 White, a2 empty: a2 follows h1 in bit order but is not its neighbour,
    # so Black has no move (and must pass, since White can play f1).
    state = GAME.parse_position("......bw" + "." * 56 + " b")
    assert move_mask(state.black, state.white) == 0
    assert GAME.legal_move_texts(state) == ["pass"]
    # The same on the vertical edge: h1 Black, h2 White, nothing to close the line.
    state = GAME.parse_position(".......b" + ".......w" + "." * 48 + " b")
    assert move_mask(state.black, state.white) == 1 << 23  # h3 only


def test_pass_is_the_only_move_when_blocked() -> None:
    state = GAME.parse_position(BLACK_PASSES)
    assert GAME.legal_moves(state) == [PASS]
    assert GAME.legal_move_texts(state) == ["pass"]
    assert GAME.outcome(state) is None
    after = GAME.play(state, "pass")
    assert (after.black, after.white, after.to_move) == (state.black, state.white, 1)
    assert GAME.legal_moves(after) and PASS not in GAME.legal_moves(after)
    with pytest.raises(IllegalMoveError, match="'a8'"):
        GAME.parse_move(state, "a8")


def test_pass_is_illegal_when_a_move_exists() -> None:
    with pytest.raises(IllegalMoveError, match="'pass'"):
        GAME.parse_move(GAME.initial(), "pass")


def test_game_ends_when_neither_side_can_move() -> None:
    black_only = GAME.parse_position("b" + "." * 63 + " w")
    assert GAME.legal_moves(black_only) == []
    assert GAME.outcome(black_only) == Outcome(0, "more discs")
    draw = GAME.parse_position("b" + "." * 62 + "w b")
    assert GAME.legal_moves(draw) == []
    assert GAME.outcome(draw) == Outcome(None, "equal discs")
    full = GAME.parse_position("w" * 33 + "b" * 31 + " b")
    assert GAME.outcome(full) == Outcome(1, "more discs")
    assert GAME.perft(full, 3) == 0
    with pytest.raises(IllegalMoveError, match="game is over"):
        GAME.parse_move(full, "pass")


def test_random_games_end_with_a_correct_count() -> None:
    rng = random.Random(7)
    for _ in range(20):
        states = _play([rng.randrange(64) for _ in range(200)])
        final = states[-1]
        result = GAME.outcome(final)
        assert result is not None
        black, white = final.black.bit_count(), final.white.bit_count()
        assert result.winner == (None if black == white else 0 if black > white else 1)


def test_view_layout() -> None:
    view = GAME.view(GAME.initial())
    assert view["kind"] == "grid"
    rows = view["rows"]
    assert len(rows) == 8 and all(len(row) == 8 for row in rows)
    assert rows[3][3] == "w" and rows[4][4] == "w"  # d4, e5
    assert rows[4][3] == "b" and rows[3][4] == "b"  # d5, e4
    assert rows[0][0] == ""


@pytest.mark.parametrize(
    "text",
    [
        "",
        "b",
        START_TEXT[:-2],
        START_TEXT[:-1] + "x",
        START_TEXT.replace("wb", "wq", 1),
        "." * 65 + " b",
        START_TEXT.replace(" ", ":"),
    ],
)
def test_bad_positions_are_rejected_naming_the_input(text: str) -> None:
    with pytest.raises(InvalidPositionError) as error:
        GAME.parse_position(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize("text", ["", "i1", "a9", "a0", "d", "d33", "passs", "3d", "d-3"])
def test_unparsable_moves_are_invalid(text: str) -> None:
    with pytest.raises(InvalidMoveError) as error:
        GAME.parse_move(GAME.initial(), text)
    assert repr(text) in str(error.value)


def test_move_text_is_case_insensitive_on_input() -> None:
    assert GAME.parse_move(GAME.initial(), "D3") == GAME.parse_move(GAME.initial(), "d3")


choices = st.lists(st.integers(min_value=0, max_value=63), max_size=70)


@settings(max_examples=60, deadline=None)
@given(choices)
def test_positions_round_trip_and_hashes_match(picks: list[int]) -> None:
    for state in _play(picks):
        text = GAME.format_position(state)
        assert GAME.parse_position(text) == state
        assert GAME.format_position(GAME.parse_position(text)) == text
        assert GAME.hash_key(state) == GAME.hash_from_scratch(state)


@settings(max_examples=60, deadline=None)
@given(choices)
def test_apply_never_mutates_and_texts_parse_back(picks: list[int]) -> None:
    state = _play(picks)[-1]
    before = tuple(state)
    legal = GAME.legal_moves(state)
    for move in legal:
        text = GAME.format_move(state, move)
        assert GAME.parse_move(state, text) == move
        GAME.apply(state, move)
        assert tuple(state) == before
    texts = {GAME.format_move(state, move) for move in legal}
    for text in ["a1", "h8", "d4", "e5", "pass", "c3", "f6"]:
        if text not in texts:
            with pytest.raises(IllegalMoveError) as error:
                GAME.parse_move(state, text)
            assert repr(text) in str(error.value)
