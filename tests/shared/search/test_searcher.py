"""The searcher itself: agreement with plain minimax, budgets, determinism, levels, API."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kibitz.shared.games.base import Game
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import (
    Searcher,
    SearchLimits,
    SearchOptions,
    SearchResult,
    budget_for_level,
    choose_move,
)
from kibitz.shared.search.evaluation import evaluation_for
from kibitz.shared.search.scores import INF

#: Alpha-beta refinements that must not change a fixed-depth minimax value.
EXACT_REFINEMENTS = SearchOptions(
    tt=False, quiescence=False, null_move=False, extensions=False, lmr=False, futility=False
)


def _minimax(game: Game[Any, Any], state: Any, depth: int, ply: int) -> int:
    evaluation = evaluation_for(game)
    moves = game.legal_moves(state)
    if not moves:
        outcome = game.outcome(state)
        assert outcome is not None
        return evaluation.terminal(state, outcome, ply)
    if depth == 0:
        if evaluation.checks_outcome_at_leaf:
            outcome = game.outcome(state)
            if outcome is not None:
                return evaluation.terminal(state, outcome, ply)
        return evaluation.evaluate(state)
    best = -INF
    for move in moves:
        best = max(best, -_minimax(game, game.apply(state, move), depth - 1, ply + 1))
    return best


@pytest.mark.parametrize(
    ("name", "moves", "depth"),
    [
        ("othello", ["d3", "c5", "f6", "f5"], 4),
        ("oware", ["C", "d", "F"], 4),
        ("draughts", ["32-28", "19-23", "28x19", "14x23"], 3),
        ("tictactoe", ["5"], 4),
        ("chess", ["e2e4", "d7d5", "e4d5", "d8d5", "b1c3"], 2),
    ],
)
def test_alpha_beta_agrees_with_plain_minimax(name: str, moves: list[str], depth: int) -> None:
    game = find_game(name)
    state = game.initial()
    for text in moves:
        state = game.play(state, text)
    expected = _minimax(game, state, depth, 0)
    results = list(Searcher(game, EXACT_REFINEMENTS).iterate(state, SearchLimits(depth=depth)))
    last = results[-1] if results else None
    assert last is not None and last.depth == depth
    assert last.score == expected
    # The chosen move is one of the minimax-best moves.
    assert -_minimax(game, game.apply(state, last.move), depth - 1, 1) == expected


def test_time_budget_is_honoured() -> None:
    chess = find_game("chess")
    state = chess.parse_position(
        "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9"
    )
    start = time.perf_counter()
    result = choose_move(chess, state, 8, Budget(time_ms=300))
    elapsed = (time.perf_counter() - start) * 1000
    assert elapsed < 600  # generous: timing must not make the suite flaky
    assert result.move in chess.legal_moves(state)
    assert result.depth >= 1


def test_node_budget_is_exact_and_a_move_is_always_returned() -> None:
    othello = find_game("othello")
    state = othello.initial()
    searcher = Searcher(othello)
    results = list(searcher.iterate(state, SearchLimits(nodes=500)))
    assert searcher.nodes == 500
    assert results and results[-1].nodes <= 500
    tiny = choose_move(othello, state, 8, Budget(nodes=1))
    assert tiny.move in othello.legal_moves(state)


def test_deterministic_for_a_seed() -> None:
    othello = find_game("othello")
    state = othello.play(othello.initial(), "d3")
    runs = [choose_move(othello, state, 3, seed=42) for _ in range(3)]
    assert len({r.move_text for r in runs}) == 1
    assert len({r.nodes for r in runs}) == 1


def test_low_levels_vary_and_level_8_does_not() -> None:
    ttt = find_game("tictactoe")
    state = ttt.initial()
    weak = {choose_move(ttt, state, 1, seed=s).move_text for s in range(30)}
    strong = {choose_move(ttt, state, 8, seed=s).move_text for s in range(5)}
    assert len(weak) >= 3
    assert len(strong) == 1


def test_low_level_still_takes_an_immediate_win_most_of_the_time() -> None:
    ttt = find_game("tictactoe")
    state = ttt.parse_position("xx.oo....:x")
    picks = [choose_move(ttt, state, 3, seed=s).move_text for s in range(20)]
    assert picks.count("3") >= 15


@pytest.mark.parametrize(
    "name", ["tictactoe", "matches", "kono", "oware", "othello", "draughts", "chess"]
)
def test_budget_for_every_level_and_result_shape(name: str) -> None:
    for level in range(1, 9):
        budget = budget_for_level(name, level)
        assert budget.time_ms is not None and budget.time_ms <= 3000
        assert budget.depth is None or budget.depth >= 1
    with pytest.raises(ValueError, match="level"):
        budget_for_level(name, 9)
    game = find_game(name)
    result = choose_move(game, game.initial(), 2, seed=1)
    assert isinstance(result, SearchResult)
    assert result.move in game.legal_moves(game.initial())
    assert result.move_text == game.format_move(game.initial(), result.move)
    assert result.pv and result.pv[0] == result.move_text
    assert result.nodes > 0 and result.depth >= 1 and 0.0 <= result.tt_hit_rate <= 1.0


def test_transposition_table_memory_is_bounded() -> None:
    othello = find_game("othello")
    searcher = Searcher(othello, SearchOptions(tt_size_log2=10))
    for _ in searcher.iterate(othello.initial(), SearchLimits(depth=7)):
        pass
    assert searcher.table is not None
    assert len(searcher.table.slots) == 1024
    assert 0 < searcher.table.used() <= 1024


def test_iterate_yields_one_result_per_depth() -> None:
    draughts = find_game("draughts")
    depths = [
        r.depth for r in Searcher(draughts).iterate(draughts.initial(), SearchLimits(depth=4))
    ]
    assert depths == [1, 2, 3, 4]


def test_search_options_parse_and_without() -> None:
    options = SearchOptions.parse("tt=off, quiescence=off,tt_size_log2=12")
    assert not options.tt and not options.quiescence and options.pvs
    assert options.tt_size_log2 == 12
    assert not SearchOptions().without("pvs", "killers").pvs
    with pytest.raises(ValueError, match="unknown technique"):
        SearchOptions().without("magic")
    with pytest.raises(ValueError, match="bad search option"):
        SearchOptions.parse("magic=on")


def test_finished_game_raises() -> None:
    ttt = find_game("tictactoe")
    over = ttt.parse_position("xxxoo....:o")
    with pytest.raises(ValueError, match="game over"):
        choose_move(ttt, over, 8)


def test_futility_pruning_saves_chess_nodes() -> None:
    chess = find_game("chess")
    state = chess.parse_position(
        "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9"
    )
    limits = SearchLimits(depth=4)
    pruned = list(Searcher(chess).iterate(state, limits))[-1]
    full = list(Searcher(chess, SearchOptions().without("futility")).iterate(state, limits))[-1]
    assert pruned.depth == full.depth == 4
    assert pruned.nodes < full.nodes


def test_an_interrupted_iteration_still_plays_the_better_move_it_found() -> None:
    """Without quiescence, depth 1 grabs the defended pawn (Qxd5); depth 2 sees exd5. A
    node budget that ends depth 2 after its second root move plays that move, not Qxd5."""
    chess = find_game("chess")
    state = chess.parse_position("4k3/8/4p3/3p4/8/8/8/3QK3 w - - 0 1")
    options = SearchOptions().without("quiescence")
    early = choose_move(chess, state, 8, Budget(nodes=30), options=options)
    assert (early.depth, early.move_text) == (1, "d1d5")  # depth 2 found nothing better yet
    later = choose_move(chess, state, 8, Budget(nodes=60), options=options)
    assert later.depth == 1 and later.move_text != "d1d5"
    assert later.score < early.score  # the score of the move played, at depth 2
