"""The searcher's chess board: perft, agreement with python-chess, evaluation, repetitions."""

from __future__ import annotations

import random

import chess
import chess.polyglot
import pytest

from kibitz.shared.games.chess import GAME
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import Searcher, SearchLimits, SearchOptions, choose_move
from kibitz.shared.search import chess_board as cb
from kibitz.shared.search.evaluation import evaluation_for
from kibitz.shared.search.evaluation.chess import BoardEvaluation, ChessEvaluation
from kibitz.shared.search.forms import form_for

KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"
POSITION_3 = "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1"
POSITION_4 = "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1"
POSITION_4_MIRRORED = "r2q1rk1/pP1p2pp/Q4n2/bbp1p3/Np6/1B3NBn/pPPP1PPP/R3K2R b KQ - 0 1"
POSITION_5 = "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8"
POSITION_6 = "r4rk1/1pp1qppp/p1np1n2/2b1p1B1/2B1P1b1/P1NP1N2/1PP1QPPP/R4RK1 w - - 0 10"


@pytest.mark.parametrize(
    ("fen", "counts"),
    [
        # The published numbers (chessprogramming wiki, "Perft Results").
        (chess.STARTING_FEN, [20, 400, 8902, 197281]),
        (KIWIPETE, [48, 2039, 97862]),
        (POSITION_3, [14, 191, 2812, 43238, 674624]),
        (POSITION_4, [6, 264, 9467, 422333]),
        (POSITION_4_MIRRORED, [6, 264, 9467]),
        (POSITION_5, [44, 1486, 62379]),
        (POSITION_6, [46, 2079, 89890]),
    ],
)
def test_perft_matches_published_counts(fen: str, counts: list[int]) -> None:
    board = cb.from_chess(chess.Board(fen))
    assert [cb.perft(board, d) for d in range(1, len(counts) + 1)] == counts


@pytest.mark.slow
def test_perft_deeper() -> None:
    assert cb.perft(cb.from_chess(chess.Board()), 5) == 4865609
    assert cb.perft(cb.from_chess(chess.Board(KIWIPETE)), 4) == 4085603
    assert cb.perft(cb.from_chess(chess.Board(POSITION_5)), 4) == 2103487


def _agree(board: chess.Board, ours: cb.Board) -> None:
    """Same legal moves, noisy moves, key, check, evaluation as the referee's board."""
    fen = board.fen()
    legal = sorted(m.uci() for m in board.legal_moves)
    assert sorted(cb.to_move(m).uci() for m in cb.generate(ours)) == legal, fen
    noisy = sorted(
        m.uci() for m in board.legal_moves if board.is_capture(m) or m.promotion is not None
    )
    assert sorted(cb.to_move(m).uci() for m in cb.generate(ours, True)) == noisy, fen
    state = GAME.parse_position(fen)
    assert ours.key == state.key == chess.polyglot.zobrist_hash(state.board), fen
    assert cb.checkers_of(ours) == board.checkers_mask(), fen
    assert cb.insufficient(ours) == board.is_insufficient_material(), fen
    checking = sorted(m.uci() for m in board.legal_moves if board.gives_check(m))
    assert (
        sorted(cb.to_move(m).uci() for m in cb.generate(ours) if cb.gives_check(ours, m))
        == checking
    ), fen
    assert evaluation_for(cb.BOARD_GAME).evaluate(ours) == evaluation_for(GAME).evaluate(state)
    for move in cb.generate(ours)[::3]:
        facts = cb.BOARD_GAME.move_facts(ours, move)
        assert facts == GAME.move_facts(state, cb.to_move(move)), (fen, move)


def test_random_games_agree_with_python_chess() -> None:
    """Random playouts (biased to captures, promotions and checks, which exercise the
    special rules), every position compared; the board advances by our ``make``."""
    rng = random.Random(20261126)
    positions = 0
    for game in range(60):
        board = chess.Board() if game % 3 else chess.Board(KIWIPETE if game % 2 else POSITION_4)
        ours = cb.from_chess(board)
        for _ in range(160):
            _agree(board, ours)
            positions += 1
            moves = list(board.legal_moves)
            if not moves or board.halfmove_clock >= 100:
                break
            sharp = [m for m in moves if board.is_capture(m) or m.promotion or board.is_castling(m)]
            move = rng.choice(sharp if sharp and rng.random() < 0.5 else moves)
            ours = cb.make(ours, cb.from_move(move))
            board.push(move)
            if board.ep_square is not None and not board.has_legal_en_passant():
                board.ep_square = None
    assert positions > 3000


def test_null_move_and_keys_from_scratch() -> None:
    fen = "rnbqkbnr/ppp1pppp/8/8/3pP3/8/PPPP1PPP/RNBQKBNR b KQkq e3 0 3"
    board = cb.from_chess(chess.Board(fen))
    assert board.ep >= 0  # d4xe3 is legal, so the file is in the key
    passed = cb.pass_turn(board)
    assert passed.key == cb.BOARD_GAME.hash_from_scratch(passed)
    assert cb.pass_turn(passed).key == cb.from_chess(chess.Board(
        "rnbqkbnr/ppp1pppp/8/8/3pP3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 3")).key  # fmt: skip


def test_evaluations_are_equal_on_both_boards() -> None:
    rng = random.Random(5)
    old, new = ChessEvaluation(GAME), BoardEvaluation(cb.BOARD_GAME)
    for _ in range(40):
        board = chess.Board()
        for _ in range(rng.randrange(1, 80)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
        state = GAME.parse_position(board.fen())
        ours = cb.from_chess(state.board)
        assert new.evaluate(ours) == old.evaluate(state)
        assert new.null_move_ok(ours) == old.null_move_ok(state)
        noisy = cb.generate(ours, True)
        ordered = new.order_noisy(ours, list(noisy))
        expected = old.order_noisy(state, GAME.noisy_moves(state))
        assert ordered is not None and expected is not None
        # The same captures kept, with the same gains (ties may come in another order).
        assert {cb.to_move(m): g for m, g in ordered[1].items()} == expected[1]
        assert sorted(ordered[1][m] for m in ordered[0]) == sorted(
            expected[1][m] for m in expected[0]
        )


def test_searches_on_the_board_report_python_chess_moves() -> None:
    state = GAME.parse_position(KIWIPETE)
    results = list(Searcher(GAME).iterate(state, SearchLimits(depth=3)))
    assert results[-1].move in GAME.legal_moves(state)
    assert all(isinstance(m, chess.Move) for m in results[-1].pv)
    assert {m for m, _ in results[-1].root_scores} == set(GAME.legal_moves(state))
    plain = list(
        Searcher(GAME, SearchOptions().without("board")).iterate(state, SearchLimits(depth=3))
    )
    # Same rules, same evaluation: the same tree up to move-order ties.
    assert results[-1].score == plain[-1].score


def test_history_before_the_root_counts_for_repetition() -> None:
    """White is a queen down and its king can only shuffle between a1 and b1. After
    Kb1 Kg8 Ka1 Kh8 the position text carries those moves; from it, Kb1 returns to a
    position of the game's past, which the searcher scores as the draw it leads to."""
    start = "7k/8/8/8/8/3P4/7q/K7 w - - 0 1"
    state = GAME.parse_position(f"{start} moves a1b1 h8g8 b1a1 g8h8")
    assert GAME.repetitions(state) == 2
    for options in (SearchOptions(), SearchOptions().without("board")):
        with_history = choose_move(GAME, state, 8, Budget(depth=3), options=options)
        assert with_history.move_text == "a1b1"
        # A draw, less the contempt the root side has for it.
        assert with_history.score == -ChessEvaluation.contempt / 100
        fresh = choose_move(GAME, GAME.parse_position(start), 8, Budget(depth=3), options=options)
        assert fresh.score < -5


def test_the_form_is_chess_only_and_the_referee_ends_the_game() -> None:
    assert form_for(GAME) is cb.FORM
    assert form_for(find_game("othello")) is None
    # A threefold repetition (the referee's rule) is not searched on the board.
    state = GAME.parse_position(
        "7k/8/8/8/8/3P4/7q/K7 w - - 0 1 moves " + "a1b1 h8g8 b1a1 g8h8 " * 2
    )
    assert GAME.outcome(state) is not None
    assert list(Searcher(GAME).iterate(state, SearchLimits(depth=2))) == []
    with pytest.raises(ValueError, match="game over"):
        choose_move(GAME, state, 8, Budget(depth=2))
