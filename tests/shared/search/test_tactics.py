"""Tactics: mates, the quiescence trap, forced captures, exact Othello endgames."""

from __future__ import annotations

import random
from functools import cache

import pytest

from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import TECHNIQUES, Searcher, SearchLimits, SearchOptions, choose_move
from kibitz.shared.search.scores import DECISIVE, MARGIN_UNIT, WIN, plies_to_end

CHESS = find_game("chess")
MATE_IN_1 = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"
MATE_IN_2 = "r2qkb1r/pp2nppp/3p4/2pNN1B1/2BnP3/3P4/PPP2PPP/R2bK2R w KQkq - 1 1"
MATE_IN_3 = "r1b1kb1r/pppp1ppp/5q2/4n3/3KP3/2N3PN/PPP4P/R1BQ1B1R b kq - 0 1"


@pytest.mark.parametrize(
    ("fen", "first_move", "plies"),
    [(MATE_IN_1, "a1a8", 1), (MATE_IN_2, "d5f6", 3), (MATE_IN_3, "f8c5", 5)],
)
def test_chess_mates_found(fen: str, first_move: str, plies: int) -> None:
    result = choose_move(CHESS, CHESS.parse_position(fen), 8, Budget(depth=plies + 2))
    assert result.move_text == first_move
    assert result.mate_in == plies
    assert len(result.pv) == plies


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_each_switch_off_still_finds_the_mate_in_2(technique: str) -> None:
    options = SearchOptions().without(technique)
    state = CHESS.parse_position(MATE_IN_2)
    result = choose_move(CHESS, state, 8, Budget(depth=5), options=options)
    assert result.move_text == "d5f6"
    assert result.mate_in == 3


def test_quiescence_avoids_the_defended_pawn_trap() -> None:
    """Qxd5 wins a pawn at depth 1 unless the search looks at the recapture exd5."""
    state = CHESS.parse_position("4k3/8/4p3/3p4/8/8/8/3QK3 w - - 0 1")
    with_q = choose_move(CHESS, state, 8, Budget(depth=1))
    without_q = choose_move(
        CHESS, state, 8, Budget(depth=1), options=SearchOptions().without("quiescence")
    )
    assert without_q.move_text == "d1d5"  # the trap is real for a horizon-bound search
    assert with_q.move_text != "d1d5"


def test_draughts_maximum_capture_decides_and_is_seen_through() -> None:
    """32x12 takes two men, so the one-man capture 44x33 is not allowed; the searcher
    plays it and sees that it lets Black's man on 39 run to a crown."""
    draughts = find_game("draughts")
    state = draughts.parse_position("W:W32,44:B27,17,39,5")
    assert draughts.legal_move_texts(state) == ["32x12"]
    result = choose_move(draughts, state, 8, Budget(depth=4))
    assert result.move_text == "32x12"
    assert result.pv[:2] == ["32x12", "39x50"]
    assert result.score < 0


OTHELLO = find_game("othello")


def _othello_position(empties: int, seed: int) -> object:
    rng = random.Random(seed)
    state = OTHELLO.initial()
    while 64 - (state.black | state.white).bit_count() > empties:
        moves = OTHELLO.legal_moves(state)
        assert moves, "random game ended early; pick another seed"
        state = OTHELLO.apply(state, rng.choice(moves))
    return state


@cache
def _disc_minimax(state: object) -> int:
    """Final disc difference for the side to move under perfect play (plain minimax)."""
    moves = OTHELLO.legal_moves(state)
    if not moves:
        black, white = state.black.bit_count(), state.white.bit_count()  # type: ignore[attr-defined]
        diff = black - white
        return diff if state.to_move == 0 else -diff  # type: ignore[attr-defined]
    return max(-_disc_minimax(OTHELLO.apply(state, m)) for m in moves)


@pytest.mark.parametrize("seed", [3, 11])
def test_othello_endgame_solved_exactly(seed: int) -> None:
    state = _othello_position(8, seed)
    expected = _disc_minimax(state)
    results = list(Searcher(OTHELLO).iterate(state, SearchLimits(depth=20)))
    last = results[-1] if results else None
    assert last is not None and last.exact
    score = last.score
    if expected == 0:
        assert score == 0
    else:
        assert abs(score) >= DECISIVE
        margin = (abs(score) - WIN + plies_to_end(score)) // MARGIN_UNIT
        assert (margin if score > 0 else -margin) == expected
    # The move played must reach that value too.
    assert -_disc_minimax(OTHELLO.apply(state, last.move)) == expected
