"""Every game's end carries a termination code, and the right one.

Hand-made terminal positions check the codes one by one; seeded random playouts of every
game (bounded in plies) check that whatever end a game reaches carries a code of
``TERMINATIONS`` whose row in docs/protocol.md lists that reason.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import pytest

from kibitz.shared.games import TERMINATIONS, Outcome, available_games, find_game

ROOT = Path(__file__).resolve().parents[3]
PLAYOUTS = 12
MAX_PLIES = 400


def outcome_of(game: str, position: str, moves: tuple[str, ...] = ()) -> Outcome | None:
    rules = find_game(game)
    state = rules.parse_position(position)
    for move in moves:
        state = rules.play(state, move)
    return rules.outcome(state)


CHESS_START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
KNIGHTS_OUT_AND_BACK = ("g1f3", "g8f6", "f3g1", "f6g8")

CASES: list[tuple[str, str, tuple[str, ...], int | None, str]] = [
    ("tictactoe", "xxxoo....:o", (), 0, "line"),
    ("tictactoe", "xoxxoooxx:o", (), None, "board-full"),
    ("matches", "standard:0:1", (), 0, "last-match"),
    ("matches", "standard:1:2", ("1",), 0, "last-match"),
    ("chess", "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3", (), 1, "checkmate"),
    ("chess", "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", (), None, "stalemate"),
    ("chess", "8/8/8/4k3/8/8/8/4K3 w - - 0 1", (), None, "rule"),
    ("chess", "8/8/8/4k3/8/8/8/R3K3 w - - 100 80", (), None, "rule"),
    ("chess", "8/8/8/4k3/8/8/8/R3K3 w - - 150 80", (), None, "rule"),
    ("chess", CHESS_START, KNIGHTS_OUT_AND_BACK * 2, None, "repetition"),
    ("draughts", "W:W:B1", (), 1, "no-moves"),
]


@pytest.mark.parametrize(("game", "position", "moves", "winner", "termination"), CASES)
def test_terminal_positions_give_their_termination(
    game: str, position: str, moves: tuple[str, ...], winner: int | None, termination: str
) -> None:
    outcome = outcome_of(game, position, moves)
    assert outcome is not None
    assert (outcome.winner, outcome.termination) == (winner, termination), outcome


def documented_reasons() -> dict[str, list[str]]:
    """The termination table of docs/protocol.md: each code's reasons, as regexes (``X``,
    ``White``... stand for a side name, ``S-N`` for Oware's count)."""
    doc = (ROOT / "docs" / "protocol.md").read_text()
    start = doc.index("Every `result.termination`")
    table = doc[start : doc.index("\n### ", start)]
    reasons: dict[str, list[str]] = {}
    for code, cell in re.findall(r"^\| `([a-z-]+)` \|.*\| ([^|]+) \|$", table, re.M):
        patterns = []
        for text in re.findall(r"`([^`]+)`", cell):
            pattern = re.escape(text).replace("S\\-N", r"\d+-\d+")
            patterns.append(pattern)
        reasons[code] = patterns
    return reasons


def test_the_doc_table_lists_every_code() -> None:
    assert set(documented_reasons()) == set(TERMINATIONS)


def playout(game: str, seed: int) -> tuple[Any, Outcome | None]:
    rules = find_game(game)
    rng = random.Random(seed)
    state = rules.initial()
    for _ in range(MAX_PLIES):
        if rules.outcome(state) is not None:
            break
        state = rules.apply(state, rng.choice(rules.legal_moves(state)))
    return state, rules.outcome(state)


@pytest.mark.parametrize("game", sorted(game.name for game in available_games()))
def test_every_end_a_playout_reaches_is_a_documented_code(game: str) -> None:
    reasons = documented_reasons()
    ended = 0
    for seed in range(PLAYOUTS):
        _, outcome = playout(game, seed)
        if outcome is None:
            continue
        ended += 1
        assert outcome.termination in TERMINATIONS, outcome
        patterns = reasons[outcome.termination]
        assert any(re.fullmatch(p, outcome.reason) for p in patterns), (outcome, patterns)
    assert ended, f"no {game} playout ended within {MAX_PLIES} plies"
