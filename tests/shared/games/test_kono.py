"""Kono: the board's lines, blocking, repetition, the ply limit and notation."""

from __future__ import annotations

import pytest

from kibitz.shared.games import Game, IllegalMoveError, InvalidMoveError, InvalidPositionError
from kibitz.shared.games.kono import GAME, KonoState


def play(state: KonoState, *moves: str) -> KonoState:
    for text in moves:
        state = GAME.play(state, text)
    return state


def test_start_black_moves_first_from_b_or_c() -> None:
    state = GAME.initial()
    assert GAME.players == ("Black", "White") and GAME.to_move(state) == 0
    assert GAME.format_position(state) == "wbbw.:b:0"
    assert sorted(GAME.legal_move_texts(state)) == ["b-e", "c-e"]
    assert GAME.view(state) == {
        "kind": "kono",
        "points": {"a": "w", "b": "b", "c": "b", "d": "w", "e": ""},
    }
    assert GAME.small


def test_there_is_no_a_c_line_and_a_blocked_player_loses() -> None:
    # c is empty; only d and e touch it, both White: Black cannot move.
    state = GAME.parse_position("bb.ww:b:0")
    assert GAME.legal_moves(state) == []
    outcome = GAME.outcome(state)
    assert outcome is not None and (outcome.winner, outcome.reason) == (1, "blocked")
    with pytest.raises(IllegalMoveError, match="'a-c'"):
        GAME.parse_move(state, "a-c")
    # Mirrored: a is empty, White on c and d, Black on b and e; c-a does not exist.
    state = GAME.parse_position(".bwwb:w:0")
    assert GAME.legal_moves(state) == []
    outcome = GAME.outcome(state)
    assert outcome is not None and (outcome.winner, outcome.reason) == (0, "blocked")
    with pytest.raises(IllegalMoveError, match="'c-a'"):
        GAME.parse_move(state, "c-a")


def test_blocking_from_the_start() -> None:
    state = play(GAME.initial(), "b-e", "d-b", "c-d")
    outcome = GAME.outcome(state)
    assert outcome is not None and (outcome.winner, outcome.reason) == (0, "blocked")


def test_threefold_repetition_is_a_draw() -> None:
    cycle = ("b-e", "a-b", "e-a", "b-e", "a-b", "e-a")  # back to the start in six plies
    state = play(GAME.initial(), *cycle)
    assert state.cells == GAME.initial().cells and GAME.outcome(state) is None
    state = play(state, *cycle)
    outcome = GAME.outcome(state)
    assert outcome is not None and (outcome.winner, outcome.reason) == (
        None,
        "threefold repetition",
    )
    assert GAME.legal_moves(state) == []
    text = GAME.format_position(state)
    assert text == "wbbw.:b:0 moves " + " ".join(cycle * 2)
    assert GAME.outcome(GAME.parse_position(text)) == outcome


def test_hundred_plies_is_a_draw() -> None:
    state = GAME.parse_position("wbbw.:b:99")
    assert GAME.outcome(state) is None
    state = play(state, "c-e")
    outcome = GAME.outcome(state)
    assert outcome is not None and outcome.reason == "100 plies" and outcome.winner is None
    assert GAME.perft(state, 1) == 0


def test_perft_is_consistent_with_the_generic_walk() -> None:
    state = GAME.initial()
    counts = [GAME.perft(state, d) for d in range(1, 9)]
    assert counts == [2, 3, 5, 7, 6, 7, 13, 20]
    assert counts == [Game.perft(GAME, state, d) for d in range(1, 9)]


def test_hash_is_incremental() -> None:
    state = play(GAME.initial(), "c-e", "d-c", "b-d")
    assert GAME.hash_key(state) == GAME.hash_from_scratch(state)
    assert GAME.hash_key(state) == GAME.hash_key(GAME.parse_position("w.wbb:w:3"))


@pytest.mark.parametrize("text", ["", "wbbw", "wbbw.:x:0", "wbbwb:b:0", "wbbw.:b:101", "w.bwb:b"])
def test_bad_positions_name_the_text(text: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        GAME.parse_position(text)
    assert repr(text) in str(info.value)


def test_bad_moves_name_the_text() -> None:
    state = GAME.initial()
    for text in ("ce", "c-f", "e", "c--e"):
        with pytest.raises(InvalidMoveError, match=repr(text)):
            GAME.parse_move(state, text)
    for text in ("a-e", "e-c", "b-d"):
        with pytest.raises(IllegalMoveError, match=repr(text)):
            GAME.parse_move(state, text)
