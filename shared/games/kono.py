"""Kono (Pong Hau K'i, Ou-moul-ko-no): two pieces each on five points.

Points: ``a`` top-left, ``c`` top-right, ``e`` centre, ``b`` bottom-left, ``d``
bottom-right. Lines: a-b, c-d, b-d and each corner to e; there is no a-c line. Black
(player 0) holds b and c, White holds a and d, e is empty, and Black moves first. A move
slides a piece along a line to the empty point; a player who cannot move loses;
threefold repetition or 100 plies is a draw.

Position text: the points a..e (``b`` Black, ``w`` White, ``.`` empty), the side to
move and the plies played, e.g. ``wbbw.:b:0`` for the start, optionally followed by
``moves`` and the moves played since then (every Kono move is reversible, so this is how
the repetition count travels with the position): ``wbbw.:b:0 moves c-e d-c``.
Move text: ``from-to``, e.g. ``c-e``.
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

POINTS = "abcde"
#: The seven lines; note the missing a-c.
LINES = (("a", "b"), ("c", "d"), ("b", "d"), ("a", "e"), ("b", "e"), ("c", "e"), ("d", "e"))
NEIGHBOURS: tuple[tuple[int, ...], ...] = tuple(
    tuple(sorted(POINTS.index(q) for line in LINES if p in line for q in line if q != p))
    for p in POINTS
)
MARKS = ".bw"  # cell values: 0 empty, 1 Black (player 0), 2 White (player 1)
MAX_PLIES = 100
START = (2, 1, 1, 2, 0)

_KEYS = zobrist_keys("kono", 5 * 2 + 1)
_SIDE_KEY = _KEYS[-1]

Move = tuple[int, int]  # (from point, to point), as indexes into POINTS


class KonoState(NamedTuple):
    """A position plus the moves since the parsed root (for repetition)."""

    cells: tuple[int, ...]
    to_move: Player
    ply: int
    key: int
    root: KonoState | None
    line: tuple[Move, ...]
    history: tuple[int, ...]


def _key(cells: tuple[int, ...], to_move: Player) -> int:
    key = _SIDE_KEY if to_move else 0
    for point, cell in enumerate(cells):
        if cell:
            key ^= _KEYS[point * 2 + cell - 1]
    return key


def _moves(cells: tuple[int, ...], to_move: Player) -> list[Move]:
    empty = cells.index(0)
    mine = to_move + 1
    return [(p, empty) for p in NEIGHBOURS[empty] if cells[p] == mine]


class Kono(Game[KonoState, Move]):
    name = "kono"
    title = "Kono (Pong Hau K'i)"
    players = ("Black", "White")
    small = True
    policy = GamePolicy(ai_draw_min_plies=20, level_depths=SMALL_LEVEL_DEPTHS)

    def initial(self, options: Options | None = None) -> KonoState:
        self.normalize_options(options)
        return KonoState(START, 0, 0, _key(START, 0), None, (), ())

    def parse_position(self, text: str) -> KonoState:
        base, sep, moves = text.strip().partition(" moves")
        parts = base.strip().split(":")
        if (
            len(parts) != 3
            or len(parts[0]) != 5
            or set(parts[0]) - set(MARKS)
            or parts[1] not in ("b", "w")
            or not parts[2].isdigit()
        ):
            raise InvalidPositionError(
                f"bad kono position {text!r}: expected points a-e of b/w/. , ':b' or ':w',"
                " ':' and the plies played, e.g. 'wbbw.:b:0'"
            )
        cells = tuple(MARKS.index(c) for c in parts[0])
        if sorted(cells) != [0, 1, 1, 2, 2]:
            raise InvalidPositionError(
                f"impossible kono position {text!r}: need two b, two w and one empty point"
            )
        ply = int(parts[2])
        if ply > MAX_PLIES:
            raise InvalidPositionError(f"impossible kono position {text!r}: more than 100 plies")
        to_move = 0 if parts[1] == "b" else 1
        state = KonoState(cells, to_move, ply, _key(cells, to_move), None, (), ())
        if sep:
            state = self.play_line(state, text, moves)
        return state

    def format_position(self, state: KonoState) -> str:
        root = state.root or state
        text = "".join(MARKS[c] for c in root.cells) + ":" + "bw"[root.to_move] + f":{root.ply}"
        if state.line:
            text += " moves " + " ".join(f"{POINTS[a]}-{POINTS[b]}" for a, b in state.line)
        return text

    def to_move(self, state: KonoState) -> Player:
        return state.to_move

    def legal_moves(self, state: KonoState) -> list[Move]:
        if state.ply >= MAX_PLIES or state.history.count(state.key) >= 2:
            return []
        return _moves(state.cells, state.to_move)

    def apply(self, state: KonoState, move: Move) -> KonoState:
        frm, to = move
        cells = list(state.cells)
        piece = cells[frm]
        cells[frm], cells[to] = 0, piece
        key = state.key ^ _KEYS[frm * 2 + piece - 1] ^ _KEYS[to * 2 + piece - 1] ^ _SIDE_KEY
        return KonoState(
            tuple(cells),
            1 - state.to_move,
            state.ply + 1,
            key,
            state.root or state,
            state.line + (move,),
            state.history + (state.key,),
        )

    def outcome(self, state: KonoState) -> Outcome | None:
        if not _moves(state.cells, state.to_move):
            return Outcome(1 - state.to_move, "blocked", "no-moves")
        if state.history.count(state.key) >= 2:
            return Outcome(None, "threefold repetition", "repetition")
        if state.ply >= MAX_PLIES:
            return Outcome(None, "100 plies", "rule")
        return None

    def parse_move(self, state: KonoState, text: str) -> Move:
        t = text.strip()
        if len(t) != 3 or t[1] != "-" or t[0] not in POINTS or t[2] not in POINTS:
            raise InvalidMoveError(f"bad kono move {text!r}: expected from-to such as c-e")
        move = (POINTS.index(t[0]), POINTS.index(t[2]))
        if move not in self.legal_moves(state):
            raise IllegalMoveError(
                f"illegal move {text!r} in {self.format_position(state)}: no such line,"
                " point not empty, not your piece, or game over"
            )
        return move

    def format_move(self, state: KonoState, move: Move) -> str:
        return f"{POINTS[move[0]]}-{POINTS[move[1]]}"

    def hash_key(self, state: KonoState) -> int:
        return state.key

    def hash_from_scratch(self, state: KonoState) -> int:
        return _key(state.cells, state.to_move)

    def view(self, state: KonoState) -> dict[str, Any]:
        return {
            "kind": "kono",
            "points": {p: MARKS[c] if c else "" for p, c in zip(POINTS, state.cells, strict=True)},
        }

    def perft(self, state: KonoState, depth: int) -> int:
        """Depth-first count with the last ply counted in bulk."""
        if depth <= 0:
            return 1
        moves = self.legal_moves(state)
        if depth == 1:
            return len(moves)
        return sum(self.perft(self.apply(state, m), depth - 1) for m in moves)


GAME = Kono()
