"""Level 8 plays the small games perfectly (checked against brute-force solvers)."""

from __future__ import annotations

from functools import cache

import pytest

from kibitz.shared.games.matches import MatchesState
from kibitz.shared.games.registry import find_game
from kibitz.shared.games.tictactoe import TicTacToeState
from kibitz.shared.search import choose_move

TICTACTOE = find_game("tictactoe")
MATCHES = find_game("matches")


@cache
def ttt_value(state: TicTacToeState) -> int:
    """Plain minimax: +1 win, 0 draw, -1 loss for the side to move."""
    outcome = TICTACTOE.outcome(state)
    if outcome is not None:
        return 0 if outcome.winner is None else (1 if outcome.winner == state.to_move else -1)
    return max(-ttt_value(TICTACTOE.apply(state, m)) for m in TICTACTOE.legal_moves(state))


def _ai_never_errs(state: TicTacToeState, ai: int, seen: set[int]) -> int:
    """Walk every opponent line; at each AI turn the move must keep the game value."""
    if TICTACTOE.outcome(state) is not None:
        return 1
    if state.to_move == ai:
        if state.key in seen:
            return 0
        seen.add(state.key)
        result = choose_move(TICTACTOE, state, 8)
        assert -ttt_value(TICTACTOE.apply(state, result.move)) == ttt_value(state), (
            TICTACTOE.format_position(state)
        )
        return _ai_never_errs(TICTACTOE.apply(state, result.move), ai, seen)
    return sum(
        _ai_never_errs(TICTACTOE.apply(state, m), ai, seen) for m in TICTACTOE.legal_moves(state)
    )


@pytest.mark.parametrize("ai", [0, 1])
def test_tictactoe_level8_never_loses_against_any_line(ai: int) -> None:
    games = _ai_never_errs(TICTACTOE.initial(), ai, set())
    assert games > 0


def test_tictactoe_level8_takes_a_win_and_blocks() -> None:
    win = TICTACTOE.parse_position("xx.oo....:x")
    assert choose_move(TICTACTOE, win, 8).move_text == "3"
    block = TICTACTOE.parse_position("xx..o....:o")
    assert choose_move(TICTACTOE, block, 8).move_text == "3"


@cache
def matches_value(state: MatchesState) -> int:
    if state.heap == 0:
        return 1  # the previous player took the last match
    return max(-matches_value(MATCHES.apply(state, m)) for m in MATCHES.legal_moves(state))


def test_matches_standard_from_20_takes_3() -> None:
    result = choose_move(MATCHES, MATCHES.initial(), 8)
    assert result.move_text == "3"
    assert result.exact and result.mate_in is not None and result.mate_in > 0


@pytest.mark.parametrize("heap", range(1, 41))
def test_matches_standard_wins_every_won_heap(heap: int) -> None:
    state = MatchesState(heap, 0, "standard", 0)
    result = choose_move(MATCHES, state, 8)
    if heap % 4 != 1:  # mod-4 theory: a won position
        assert (heap - result.move) % 4 == 1
        assert result.score > 0
    else:
        assert result.score < 0


def test_matches_double_variant_matches_brute_force() -> None:
    checked = 0
    for heap in range(10, 31):
        for last in range(0, 12):
            state = MatchesState(heap, 0, "double", last)
            if matches_value(state) != 1:
                continue
            result = choose_move(MATCHES, state, 8)
            assert matches_value(MATCHES.apply(state, result.move)) == -1, (heap, last)
            checked += 1
    assert checked > 50


def test_matches_level8_wins_whole_games_against_every_reply() -> None:
    """From 20 the first player wins against every sequence of opponent takes."""

    def walk(state: MatchesState) -> None:
        if state.heap == 0:
            assert MATCHES.outcome(state).winner == 0  # type: ignore[union-attr]
            return
        if state.to_move == 0:
            walk(MATCHES.apply(state, choose_move(MATCHES, state, 8).move))
        else:
            for m in MATCHES.legal_moves(state):
                walk(MATCHES.apply(state, m))

    walk(MATCHES.initial())
