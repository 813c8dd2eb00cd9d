"""Tic-tac-toe: 3x3, X first, cells 1-9 row by row from the top-left.

Position text: nine cells row by row (``x``, ``o`` or ``.``), a colon, the side to move:
``x...o....:x``. Move text: the cell number, ``1``-``9``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kibitz.shared.games.base import (
    Game,
    IllegalMoveError,
    InvalidMoveError,
    InvalidPositionError,
    Options,
    Outcome,
    Player,
)
from kibitz.shared.games.policy import SMALL_LEVEL_DEPTHS, GamePolicy
from kibitz.shared.games.zobrist import zobrist_keys

LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),
    (0, 3, 6), (1, 4, 7), (2, 5, 8),
    (0, 4, 8), (2, 4, 6),
)  # fmt: skip
MARKS = ".xo"
_KEYS = zobrist_keys("tictactoe", 9 * 2 + 1)
_SIDE_KEY = _KEYS[-1]


def _cell_key(cell: int, player: Player) -> int:
    return _KEYS[cell * 2 + player]


class TicTacToeState(NamedTuple):
    cells: tuple[int, ...]  # 0 empty, 1 X (player 0), 2 O (player 1)
    to_move: Player
    key: int


class TicTacToe(Game[TicTacToeState, int]):
    name = "tictactoe"
    title = "Tic-tac-toe"
    players = ("X", "O")
    small = True
    #: An AI accepts a draw only when its score says it is not ahead at all.
    policy = GamePolicy(draw_margin=0.0, ai_draw_min_plies=2, level_depths=SMALL_LEVEL_DEPTHS)

    def initial(self, options: Options | None = None) -> TicTacToeState:
        self.normalize_options(options)
        return TicTacToeState((0,) * 9, 0, 0)

    def parse_position(self, text: str) -> TicTacToeState:
        board, sep, side = text.strip().partition(":")
        if not sep or len(board) != 9 or side not in ("x", "o") or set(board) - set(MARKS):
            raise InvalidPositionError(
                f"bad tic-tac-toe position {text!r}: expected 9 cells of x/o/. then ':x' or ':o'"
            )
        cells = tuple(MARKS.index(c) for c in board)
        xs, os_ = cells.count(1), cells.count(2)
        if not (xs == os_ or xs == os_ + 1) or (side == "x") != (xs == os_):
            raise InvalidPositionError(f"impossible tic-tac-toe position {text!r}: counts or turn")
        to_move = 0 if side == "x" else 1
        return TicTacToeState(cells, to_move, self._key(cells, to_move))

    def format_position(self, state: TicTacToeState) -> str:
        return "".join(MARKS[c] for c in state.cells) + ":" + MARKS[state.to_move + 1]

    def to_move(self, state: TicTacToeState) -> Player:
        return state.to_move

    def legal_moves(self, state: TicTacToeState) -> list[int]:
        if _winner(state.cells) is not None:
            return []
        return [i for i, c in enumerate(state.cells) if c == 0]

    def apply(self, state: TicTacToeState, move: int) -> TicTacToeState:
        cells = list(state.cells)
        cells[move] = state.to_move + 1
        return TicTacToeState(
            tuple(cells),
            1 - state.to_move,
            state.key ^ _cell_key(move, state.to_move) ^ _SIDE_KEY,
        )

    def outcome(self, state: TicTacToeState) -> Outcome | None:
        winner = _winner(state.cells)
        if winner is not None:
            return Outcome(winner, "three in a row", "line")
        if 0 not in state.cells:
            return Outcome(None, "board full", "board-full")
        return None

    def parse_move(self, state: TicTacToeState, text: str) -> int:
        t = text.strip()
        if len(t) != 1 or t not in "123456789":
            raise InvalidMoveError(f"bad tic-tac-toe move {text!r}: expected a cell 1-9")
        move = int(t) - 1
        if move not in self.legal_moves(state):
            raise IllegalMoveError(
                f"illegal move {text!r} in {self.format_position(state)}: cell taken or game over"
            )
        return move

    def format_move(self, state: TicTacToeState, move: int) -> str:
        return str(move + 1)

    def hash_key(self, state: TicTacToeState) -> int:
        return state.key

    def hash_from_scratch(self, state: TicTacToeState) -> int:
        return self._key(state.cells, state.to_move)

    def view(self, state: TicTacToeState) -> dict[str, Any]:
        rows = [[MARKS[c] if c else "" for c in state.cells[r * 3 : r * 3 + 3]] for r in range(3)]
        return {"kind": "grid", "rows": rows}

    @staticmethod
    def _key(cells: tuple[int, ...], to_move: Player) -> int:
        key = _SIDE_KEY if to_move else 0
        for i, c in enumerate(cells):
            if c:
                key ^= _cell_key(i, c - 1)
        return key


def _winner(cells: tuple[int, ...]) -> Player | None:
    for a, b, c in LINES:
        if cells[a] and cells[a] == cells[b] == cells[c]:
            return cells[a] - 1
    return None


GAME = TicTacToe()
