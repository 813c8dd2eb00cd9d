"""Chess: perft, a differential test against python-chess, draws, hooks and errors."""

from __future__ import annotations

import io
import random

import chess
import chess.pgn
import chess.polyglot
import pytest

from kibitz.shared.games import (
    Game,
    GameOverError,
    IllegalMoveError,
    InvalidMoveError,
    InvalidPositionError,
)
from kibitz.shared.games.chess import GAME, ChessState, count_legal_moves, pgn

START = chess.STARTING_FEN
KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"
# Published perft positions 3-5 (chessprogramming wiki): en passant pins, promotions.
POSITION_3 = "8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 0 1"
POSITION_4 = "r3k2r/Pppp1ppp/1b3nbN/nP6/BBP1P3/q4N2/Pp1P2PP/R2Q1RK1 w kq - 0 1"
POSITION_5 = "rnbq1k1r/pp1Pbppp/2p5/8/2B5/8/PPP1NnPP/RNBQK2R w KQ - 1 8"


def state_of(text: str) -> ChessState:
    return GAME.parse_position(text)


def play(state: ChessState, *ucis: str) -> ChessState:
    for uci in ucis:
        state = GAME.play(state, uci)
    return state


@pytest.mark.parametrize(
    ("fen", "counts"),
    [
        (START, [20, 400, 8902]),
        (KIWIPETE, [48, 2039, 97862]),
        (POSITION_3, [14, 191, 2812, 43238]),
        (POSITION_4, [6, 264, 9467]),
        (POSITION_5, [44, 1486, 62379]),
    ],
)
def test_perft_matches_published_counts(fen: str, counts: list[int]) -> None:
    state = state_of(fen)
    assert [GAME.perft(state, d) for d in range(1, len(counts) + 1)] == counts


@pytest.mark.slow
def test_perft_start_depth_4_and_5() -> None:
    state = GAME.initial()
    assert GAME.perft(state, 4) == 197281
    assert GAME.perft(state, 5) == 4865609


@pytest.mark.slow
def test_perft_kiwipete_depth_4() -> None:
    assert GAME.perft(state_of(KIWIPETE), 4) == 4085603


def python_chess_ending(board: chess.Board) -> str | None:
    """Our rules written with python-chess: its automatic ends, then the claimable ones."""
    result = board.outcome()
    if result is not None:
        return {
            chess.Termination.CHECKMATE: "checkmate",
            chess.Termination.STALEMATE: "stalemate",
            chess.Termination.INSUFFICIENT_MATERIAL: "insufficient material",
            chess.Termination.SEVENTYFIVE_MOVES: "seventy-five-move rule",
            chess.Termination.FIVEFOLD_REPETITION: "fivefold repetition",
        }[result.termination]
    if board.is_fifty_moves():
        return "fifty-move rule"
    if board.is_repetition(3):
        return "threefold repetition"
    return None


def test_random_playouts_agree_with_python_chess() -> None:
    """Thousands of positions: legal UCI sets, move counts, outcomes and keys agree."""
    rng = random.Random(20261126)
    positions = 0
    endings: set[str] = set()
    for _ in range(80):
        state, board = GAME.initial(), chess.Board()
        while True:
            positions += 1
            ours = GAME.legal_move_texts(state)
            expected = python_chess_ending(board)
            outcome = GAME.outcome(state)
            assert (outcome.reason if outcome else None) == expected, board.fen()
            if expected is None:
                assert sorted(ours) == sorted(m.uci() for m in board.legal_moves), board.fen()
                assert count_legal_moves(board.copy(stack=False)) == len(ours), board.fen()
            else:
                assert ours == []
            assert GAME.hash_key(state) == GAME.hash_from_scratch(state), board.fen()
            if outcome is not None:
                endings.add(outcome.reason)
                if outcome.reason == "checkmate":
                    assert outcome.winner == (1 if board.turn else 0)
                break
            move = rng.choice(GAME.legal_moves(state))
            state = GAME.apply(state, move)
            board.push(move)
    assert positions > 10000
    # The playouts reach mates and the automatic draws, not just one kind of ending.
    assert {"checkmate", "insufficient material", "fifty-move rule"} <= endings


def test_fast_perft_agrees_with_generic_perft_near_draws() -> None:
    """The bulk-counting perft stops at the same draws as legal_moves does."""
    texts = [
        # One reversible move from a threefold repetition of the start position.
        START + " moves g1f3 g8f6 f3g1 f6g8 g1f3 g8f6 f3g1",
        # The fifty-move rule strikes inside the perft horizon.
        "7k/8/6K1/8/8/8/8/R7 w - - 97 80",
        # Captures lead to insufficient material.
        "8/8/8/3k4/3n4/3K4/8/8 w - - 0 1",
        "4k3/8/8/8/8/8/3p4/4K2R w K - 0 1",
    ]
    rng = random.Random(7)
    state = GAME.initial()
    for _ in range(60):
        state = GAME.apply(state, rng.choice(GAME.legal_moves(state)))
    texts.append(GAME.format_position(state))
    for text in texts:
        state = state_of(text)
        for depth in (1, 2, 3):
            assert GAME.perft(state, depth) == Game.perft(GAME, state, depth), (text, depth)


def test_zobrist_key_is_polyglot() -> None:
    assert GAME.hash_key(GAME.initial()) == 0x463B96181691FC9C  # the published start key
    state = play(GAME.initial(), "e2e4", "d7d5", "e4e5", "f7f5")  # e.p. possible on f6
    assert GAME.format_position(state).split()[3] == "f6"
    assert GAME.hash_key(state) == chess.polyglot.zobrist_hash(state.board)
    castled = play(state_of(KIWIPETE), "e1g1", "e8c8")
    assert GAME.hash_key(castled) == GAME.hash_from_scratch(castled)


def test_en_passant_square_kept_only_when_the_capture_is_legal() -> None:
    state = play(GAME.initial(), "e2e4")
    assert GAME.format_position(state).split()[3] == "-"
    assert GAME.hash_key(state) == GAME.hash_key(state_of(GAME.format_position(state)))


def test_threefold_repetition_is_an_automatic_draw() -> None:
    shuffle = ("g1f3", "g8f6", "f3g1", "f6g8")
    state = play(GAME.initial(), *shuffle)
    assert GAME.outcome(state) is None
    assert GAME.format_position(state) == START + " moves " + " ".join(shuffle)
    state = play(state, *shuffle)
    outcome = GAME.outcome(state)
    assert outcome is not None and outcome.winner is None
    assert outcome.reason == "threefold repetition"
    assert GAME.legal_moves(state) == []
    with pytest.raises(GameOverError, match="e2e4"):
        GAME.play(state, "e2e4")
    # The history travels in the position text.
    again = state_of(GAME.format_position(state))
    assert GAME.outcome(again) == outcome


def test_irreversible_move_resets_the_history() -> None:
    state = play(GAME.initial(), "g1f3", "g8f6", "e2e4")
    assert " moves " not in GAME.format_position(state)
    assert state.history == ()


def test_fifty_move_rule_is_automatic_but_mate_wins() -> None:
    drawn = play(state_of("7k/8/6K1/8/8/8/8/R7 w - - 99 80"), "a1b1")
    outcome = GAME.outcome(drawn)
    assert outcome is not None and (outcome.winner, outcome.reason) == (None, "fifty-move rule")
    mated = play(state_of("7k/8/6K1/8/8/8/8/R7 w - - 99 80"), "a1a8")
    outcome = GAME.outcome(mated)
    assert outcome is not None and (outcome.winner, outcome.reason) == (0, "checkmate")


@pytest.mark.parametrize(
    ("fen", "reason"),
    [
        ("8/8/8/4k3/8/8/8/4K3 w - - 0 1", "insufficient material"),
        ("8/8/8/4k3/8/8/8/4KB2 w - - 0 1", "insufficient material"),
        ("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "stalemate"),
        ("7k/8/8/8/8/8/8/R3K3 w - - 150 120", "seventy-five-move rule"),
        ("rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", "checkmate"),
    ],
)
def test_endings(fen: str, reason: str) -> None:
    state = state_of(fen)
    outcome = GAME.outcome(state)
    assert outcome is not None and outcome.reason == reason
    assert GAME.legal_moves(state) == []
    assert GAME.perft(state, 1) == 0


def test_position_text_round_trips_with_moves() -> None:
    state = state_of(KIWIPETE + " moves e1d1 e8d8 d1e1")
    # King moves lose castling rights, which is irreversible: the text restarts there.
    expected = "r2k3r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R2K3R w - - 2 2 moves d1e1"
    assert GAME.format_position(state) == expected
    assert GAME.format_position(state_of(expected)) == expected
    assert GAME.hash_key(state_of(expected)) == GAME.hash_key(state)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nonsense", "nonsense"),
        ("8/8/8/8/8/8/8/8 w - - 0 1", "no white king"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 moves e2e5", "e2e5"),
        ("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 moves", "moves"),
    ],
)
def test_bad_positions_are_typed_errors_naming_the_text(text: str, needle: str) -> None:
    with pytest.raises(InvalidPositionError) as info:
        state_of(text)
    assert repr(text) in str(info.value)
    assert needle in str(info.value)


def test_bad_moves_are_typed_errors_naming_the_move() -> None:
    state = GAME.initial()
    with pytest.raises(InvalidMoveError, match="'e2-e4'"):
        GAME.parse_move(state, "e2-e4")
    with pytest.raises(IllegalMoveError, match="'e2e5'"):
        GAME.parse_move(state, "e2e5")
    with pytest.raises(IllegalMoveError, match="'0000'"):
        GAME.parse_move(state, "0000")
    with pytest.raises(IllegalMoveError, match="'e1h1'"):
        GAME.parse_move(state_of(KIWIPETE), "e1h1")  # castling is king two squares in UCI
    assert GAME.parse_move(state_of(KIWIPETE), "e1g1") == chess.Move.from_uci("e1g1")


def test_view_and_san() -> None:
    state = play(GAME.initial(), "e2e4", "f7f5", "d1h5")
    view = GAME.view(state)
    assert view["kind"] == "grid"
    assert view["rows"][0] == ["r", "n", "b", "q", "k", "b", "n", "r"]
    assert view["rows"][4] == ["", "", "", "", "P", "", "", ""]
    assert view["rows"][3][7] == "Q"
    assert view["check"] == "e8"
    assert view["last"] == ["d1", "h5"]
    assert GAME.view(GAME.initial())["last"] is None
    assert GAME.view(GAME.initial())["check"] is None
    assert GAME.display_move(GAME.initial(), chess.Move.from_uci("g1f3")) == "Nf3"
    assert GAME.display_move(state, GAME.parse_move(state, "g7g6")) == "g6"
    assert GAME.players == ("White", "Black") and GAME.to_move(state) == 1


def test_move_facts() -> None:
    state = state_of(POSITION_4)  # white: b7 pawn can capture a8 rook promoting
    facts = GAME.move_facts(state, chess.Move.from_uci("b7a8q"))
    assert (facts.capture, facts.attacker, facts.promotion) == (500, 100, 4)
    assert GAME.move_facts(state, chess.Move.from_uci("b7b8n")).promotion == 2
    assert GAME.move_facts(state, chess.Move.from_uci("b7b8b")).promotion == 1
    ep = play(GAME.initial(), "e2e4", "a7a6", "e4e5", "d7d5")
    facts = GAME.move_facts(ep, chess.Move.from_uci("e5d6"))
    assert (facts.capture, facts.attacker) == (100, 100)
    check = state_of("4k3/8/8/8/8/8/8/R3K3 w - - 0 1")
    assert GAME.move_facts(check, chess.Move.from_uci("a1a8")).check
    assert not GAME.move_facts(check, chess.Move.from_uci("a1a7")).check
    queen = state_of("4k3/8/8/3q4/8/8/3R4/4K3 w - - 0 1")
    assert GAME.move_facts(queen, chess.Move.from_uci("d2d5")).capture == 950


def test_noisy_moves_are_captures_and_promotions() -> None:
    for fen in (KIWIPETE, POSITION_4, POSITION_5):
        state = state_of(fen)
        board = chess.Board(fen)
        expected = {m for m in board.legal_moves if board.is_capture(m) or m.promotion}
        assert set(GAME.noisy_moves(state)) == expected


def test_null_move_and_in_check() -> None:
    state = play(GAME.initial(), "e2e4", "a7a6", "e4e5", "d7d5")
    passed = GAME.null_move(state)
    assert passed is not None
    assert GAME.to_move(passed) == 1
    assert GAME.hash_key(passed) == GAME.hash_from_scratch(passed)
    checked = state_of("4k3/8/8/8/8/8/8/R3K2r w - - 0 1")
    assert GAME.in_check(checked) and GAME.null_move(checked) is None
    assert not GAME.in_check(GAME.initial())


def test_pgn_export_reads_back() -> None:
    moves = ["f2f3", "e7e5", "g2g4", "d8h4"]
    text = pgn(GAME.initial(), moves, {"White": "kibitz", "Event": "test"})
    game = chess.pgn.read_game(io.StringIO(text))
    assert game is not None
    assert [m.uci() for m in game.mainline_moves()] == moves
    assert game.headers["Result"] == "0-1"
    assert game.headers["White"] == "kibitz"
    drawn = pgn(GAME.initial(), ["g1f3", "g8f6", "f3g1", "f6g8"] * 2)
    assert '[Result "1/2-1/2"]' in drawn
    from_fen = pgn(state_of(KIWIPETE), ["e1g1"])
    assert "[FEN " in from_fen and "O-O" in from_fen
    with pytest.raises(IllegalMoveError):
        pgn(GAME.initial(), ["e2e5"])


def test_stale_castling_and_en_passant_fields_are_dropped() -> None:
    text = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN1 w KQkq e3 0 1"  # no h1 rook, no e.p.
    state = state_of(text)
    assert GAME.format_position(state) == "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBN1 w Qkq - 0 1"
    assert GAME.hash_key(state) == chess.polyglot.zobrist_hash(state.board)


def test_gives_check_and_noisy_moves_match_python_chess_on_random_games() -> None:
    """The table-driven check test and the direct capture generator against python-chess,
    on every legal move along seeded random games (checks, promotions, en passant)."""
    from kibitz.shared.games.chess import gives_check

    rng = random.Random(7)
    checked = 0
    for fen in (KIWIPETE, POSITION_4, POSITION_5, chess.STARTING_FEN):
        for _ in range(6):
            state = state_of(fen)
            for _ply in range(60):
                moves = GAME.legal_moves(state)
                if not moves:
                    break
                board = state.board
                for move in moves:
                    assert gives_check(board, move) == board.gives_check(move), (board.fen(), move)
                    checked += 1
                expected = {m for m in moves if board.is_capture(m) or m.promotion}
                assert set(GAME.noisy_moves(state)) == expected, board.fen()
                state = GAME.apply(state, rng.choice(moves))
    assert checked > 10_000
