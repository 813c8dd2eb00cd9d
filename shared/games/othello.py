"""Othello (Reversi) on 8x8 bitboards held in Python ints.

Squares: columns ``a``-``h`` left to right, rows ``1``-``8`` from the top, so ``a1`` is
the top-left corner. Bit ``8 * row + column`` (both from 0) stands for a square, so bit 0
is ``a1``, bit 7 is ``h1`` and bit 63 is ``h8``.

Start: White on d4 and e5, Black on d5 and e4; Black (player 0) moves first. A move
places a disc that brackets at least one line of opposing discs, which all flip. A side
without a move passes (the move text ``pass``), which is legal only while the opponent
has a move; the game ends when neither side can move, and the side with more discs wins
(equal counts draw).

Position text: the 64 cells row by row from ``a1`` to ``h1`` (the top row), then
``a2``..``h2`` and so on down to ``h8``, each ``b``, ``w`` or ``.``; a space; then the side
to move, ``b`` or ``w``. The start is
``...........................wb......bw........................... b``.

Move text: a square such as ``d3`` (upper case accepted on input), or ``pass``.
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
from kibitz.shared.games.policy import AnalysisScale, GamePolicy
from kibitz.shared.games.zobrist import zobrist_keys

Square = int  # 0-63, bit index
Move = int  # a square, or PASS

PASS: Move = 64
FULL = (1 << 64) - 1
_INNER_COLUMNS = 0x7E7E7E7E7E7E7E7E
COLUMNS = "abcdefgh"

_KEYS = zobrist_keys("othello", 64 * 2 + 1)
_DISC_KEYS = (_KEYS[0:64], _KEYS[64:128])  # by player: 0 Black, 1 White
_SIDE_KEY = _KEYS[128]
#: XOR-ing this turns a Black disc into a White one (or back) in the key.
_FLIP_KEYS = [_DISC_KEYS[0][sq] ^ _DISC_KEYS[1][sq] for sq in range(64)]


class OthelloState(NamedTuple):
    black: int  # bitboard of Black discs
    white: int
    to_move: Player  # 0 Black, 1 White
    key: int


def move_mask(own: int, opp: int) -> int:
    """Bitboard of the squares where the side owning ``own`` may play.

    Kogge-Stone style: grow runs of opposing discs away from our discs in all eight
    directions at once per axis, doubling the run length per step, so each direction
    costs a fixed handful of shifts instead of a loop over squares.
    """
    empty = ~(own | opp) & FULL
    # Runs along rows and diagonals must not wrap around the board edge, so the
    # opposing discs on columns a and h cannot be inside such a run.
    mo = opp & _INNER_COLUMNS
    left = mo & (own << 1)
    right = mo & (own >> 1)
    left |= mo & (left << 1)
    right |= mo & (right >> 1)
    pre_l = mo & (mo << 1)
    pre_r = pre_l >> 1
    left |= pre_l & (left << 2)
    right |= pre_r & (right >> 2)
    left |= pre_l & (left << 2)
    right |= pre_r & (right >> 2)
    moves = (left << 1) | (right >> 1)
    left = mo & (own << 7)
    right = mo & (own >> 7)
    left |= mo & (left << 7)
    right |= mo & (right >> 7)
    pre_l = mo & (mo << 7)
    pre_r = pre_l >> 7
    left |= pre_l & (left << 14)
    right |= pre_r & (right >> 14)
    left |= pre_l & (left << 14)
    right |= pre_r & (right >> 14)
    moves |= (left << 7) | (right >> 7)
    left = mo & (own << 9)
    right = mo & (own >> 9)
    left |= mo & (left << 9)
    right |= mo & (right >> 9)
    pre_l = mo & (mo << 9)
    pre_r = pre_l >> 9
    left |= pre_l & (left << 18)
    right |= pre_r & (right >> 18)
    left |= pre_l & (left << 18)
    right |= pre_r & (right >> 18)
    moves |= (left << 9) | (right >> 9)
    left = opp & (own << 8)
    right = opp & (own >> 8)
    left |= opp & (left << 8)
    right |= opp & (right >> 8)
    pre_l = opp & (opp << 8)
    pre_r = pre_l >> 8
    left |= pre_l & (left << 16)
    right |= pre_r & (right >> 16)
    left |= pre_l & (left << 16)
    right |= pre_r & (right >> 16)
    moves |= (left << 8) | (right >> 8)
    return moves & empty


def _build_rays() -> list[tuple[tuple[int, int, bool], ...]]:
    """Per square, the rays of length >= 2: (neighbour bit, ray mask, ray goes up in bits)."""
    table = []
    for sq in range(64):
        row, col = divmod(sq, 8)
        rays = []
        for dr, dc in ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)):
            ray = 0
            r, c = row + dr, col + dc
            while 0 <= r < 8 and 0 <= c < 8:
                ray |= 1 << (8 * r + c)
                r, c = r + dr, c + dc
            if ray.bit_count() >= 2:
                neighbour = 1 << (8 * (row + dr) + col + dc)
                rays.append((neighbour, ray, dr * 8 + dc > 0))
        table.append(tuple(rays))
    return table


_RAYS = _build_rays()


def flips(own: int, opp: int, sq: Square) -> int:
    """Bitboard of the opposing discs that a disc placed on ``sq`` turns over.

    Along each ray the first square that is not an opposing disc decides: if it holds
    one of ours, every opposing disc before it flips. The lowest (or highest) set bit of
    the ray's non-opposing squares finds that square without walking the ray.
    """
    result = 0
    for neighbour, ray, upward in _RAYS[sq]:
        if not opp & neighbour:
            continue
        stop = ray & ~opp
        if not stop:
            continue
        if upward:
            first = stop & -stop
            if first & own:
                result |= ray & (first - 1)
        else:
            first = 1 << (stop.bit_length() - 1)
            if first & own:
                result |= ray & -(first << 1)
    return result


def _perft(own: int, opp: int, depth: int) -> int:
    """perft for depth >= 1 with bulk counting: the last ply is a bit count."""
    moves = move_mask(own, opp)
    if not moves:
        if not move_mask(opp, own):
            return 0
        return 1 if depth == 1 else _perft(opp, own, depth - 1)
    if depth == 1:
        return moves.bit_count()
    total = 0
    if depth == 2:
        while moves:
            bit = moves & -moves
            moves ^= bit
            flipped = flips(own, opp, bit.bit_length() - 1)
            new_own = own | flipped | bit
            new_opp = opp ^ flipped
            count = move_mask(new_opp, new_own).bit_count()
            if count:
                total += count
            elif move_mask(new_own, new_opp):
                total += 1  # the opponent must pass
        return total
    while moves:
        bit = moves & -moves
        moves ^= bit
        flipped = flips(own, opp, bit.bit_length() - 1)
        total += _perft(opp ^ flipped, own | flipped | bit, depth - 1)
    return total


def square_name(sq: Square) -> str:
    return COLUMNS[sq & 7] + str((sq >> 3) + 1)


class Othello(Game[OthelloState, Move]):
    name = "othello"
    title = "Othello"
    players = ("Black", "White")
    policy = GamePolicy(
        draw_margin=2.0,
        analysis_scale=AnalysisScale("discs", 1.0, 3, 6, 12, 64, 0.12),
        analysis_time_ms=300,
        # Levels 1 and 2 (both depth 1) played alike (4.5 / 10): level 2 searches 2 plies
        # and level 3 keeps depth 2 with less randomness.
        level_depths=(1, 2, 2, 3, 4, 5, 6, None),
        level_temperatures=(3.0, 1.5, 0.5, 0.4, 0.2, 0.08, 0.0, 0.0),
    )

    def initial(self, options: Options | None = None) -> OthelloState:
        self.normalize_options(options)
        black = _bit("d5") | _bit("e4")
        white = _bit("d4") | _bit("e5")
        return OthelloState(black, white, 0, _key(black, white, 0))

    def parse_position(self, text: str) -> OthelloState:
        board, sep, side = text.strip().partition(" ")
        if len(board) != 64 or not sep or side not in ("b", "w") or set(board) - set("bw."):
            raise InvalidPositionError(
                f"bad othello position {text!r}: expected 64 cells of b/w/. then ' b' or ' w'"
            )
        black = white = 0
        for sq, cell in enumerate(board):
            if cell == "b":
                black |= 1 << sq
            elif cell == "w":
                white |= 1 << sq
        to_move = 0 if side == "b" else 1
        return OthelloState(black, white, to_move, _key(black, white, to_move))

    def format_position(self, state: OthelloState) -> str:
        cells = [
            "b" if state.black >> sq & 1 else "w" if state.white >> sq & 1 else "."
            for sq in range(64)
        ]
        return "".join(cells) + (" b" if state.to_move == 0 else " w")

    def to_move(self, state: OthelloState) -> Player:
        return state.to_move

    def legal_moves(self, state: OthelloState) -> list[Move]:
        own, opp = _sides(state)
        moves = move_mask(own, opp)
        if moves:
            return _squares(moves)
        return [PASS] if move_mask(opp, own) else []

    def apply(self, state: OthelloState, move: Move) -> OthelloState:
        key = state.key ^ _SIDE_KEY
        if move == PASS:
            return OthelloState(state.black, state.white, 1 - state.to_move, key)
        own, opp = _sides(state)
        flipped = flips(own, opp, move)
        bit = 1 << move
        key ^= _DISC_KEYS[state.to_move][move]
        rest = flipped
        while rest:
            low = rest & -rest
            key ^= _FLIP_KEYS[low.bit_length() - 1]
            rest ^= low
        own |= flipped | bit
        opp ^= flipped
        if state.to_move == 0:
            return OthelloState(own, opp, 1, key)
        return OthelloState(opp, own, 0, key)

    def outcome(self, state: OthelloState) -> Outcome | None:
        if move_mask(state.black, state.white) or move_mask(state.white, state.black):
            return None
        black, white = state.black.bit_count(), state.white.bit_count()
        if black == white:
            return Outcome(None, "equal discs", "score")
        return Outcome(0 if black > white else 1, "more discs", "score")

    def parse_move(self, state: OthelloState, text: str) -> Move:
        t = text.strip().lower()
        if t == "pass":
            move = PASS
        elif len(t) == 2 and t[0] in COLUMNS and t[1] in "12345678":
            move = (int(t[1]) - 1) * 8 + COLUMNS.index(t[0])
        else:
            raise InvalidMoveError(f"bad othello move {text!r}: expected a square a1-h8 or 'pass'")
        legal = self.legal_moves(state)
        if move not in legal:
            why = (
                "the game is over"
                if not legal
                else (
                    "a move is available, so passing is not allowed"
                    if move == PASS
                    else "it flips nothing or the square is taken"
                )
            )
            raise IllegalMoveError(
                f"illegal othello move {text!r} in {self.format_position(state)}: {why}"
            )
        return move

    def format_move(self, state: OthelloState, move: Move) -> str:
        return "pass" if move == PASS else square_name(move)

    def hash_key(self, state: OthelloState) -> int:
        return state.key

    def hash_from_scratch(self, state: OthelloState) -> int:
        return _key(state.black, state.white, state.to_move)

    def view(self, state: OthelloState) -> dict[str, Any]:
        rows = [
            [
                "b"
                if state.black >> (r * 8 + c) & 1
                else "w"
                if state.white >> (r * 8 + c) & 1
                else ""
                for c in range(8)
            ]
            for r in range(8)
        ]
        return {"kind": "grid", "rows": rows}

    def perft(self, state: OthelloState, depth: int) -> int:
        if depth <= 0:
            return 1
        own, opp = _sides(state)
        return _perft(own, opp, depth)


def _bit(name: str) -> int:
    return 1 << ((int(name[1]) - 1) * 8 + COLUMNS.index(name[0]))


def _sides(state: OthelloState) -> tuple[int, int]:
    if state.to_move == 0:
        return state.black, state.white
    return state.white, state.black


def _squares(mask: int) -> list[Square]:
    squares = []
    while mask:
        low = mask & -mask
        squares.append(low.bit_length() - 1)
        mask ^= low
    return squares


def _key(black: int, white: int, to_move: Player) -> int:
    key = _SIDE_KEY if to_move else 0
    for sq in _squares(black):
        key ^= _DISC_KEYS[0][sq]
    for sq in _squares(white):
        key ^= _DISC_KEYS[1][sq]
    return key


GAME = Othello()
