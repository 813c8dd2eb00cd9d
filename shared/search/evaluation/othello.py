"""Othello: corner-aware square weights, mobility, and the disc count late in the game.

Squares next to an empty corner (the diagonal "X" squares and the edge "C" squares) give
the opponent access to the corner, so they count against their owner; once that corner is
taken they are ordinary edge or inner squares and the penalty goes. Mobility (moves
available to each side) dominates the middlegame; the disc count only matters near the end,
where the searcher switches to exact solving on the disc difference anyway.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.games.base import Outcome
from kibitz.shared.games.othello import move_mask
from kibitz.shared.search.evaluation.base import Evaluation
from kibitz.shared.search.scores import win_score


def _bit(col: int, row: int) -> int:
    return 1 << (row * 8 + col)


# Per corner: (corner bit, X-square bit, C-squares mask).
_CORNERS = tuple(
    (
        _bit(c, r),
        _bit(c + dc, r + dr),
        _bit(c + dc, r) | _bit(c, r + dr),
    )
    for c, r, dc, dr in ((0, 0, 1, 1), (7, 0, -1, 1), (0, 7, 1, -1), (7, 7, -1, -1))
)
_CORNER_MASK = sum(corner for corner, _, _ in _CORNERS)
_EDGE_MASK = 0xFF000000000000FF | 0x8181818181818181
_X_OR_C = sum(x | c for _, x, c in _CORNERS)
#: Edge squares that are neither corners nor C-squares ("A" and "B" squares).
_SAFE_EDGES = _EDGE_MASK & ~_CORNER_MASK & ~_X_OR_C


def _move_prior() -> dict[int, int]:
    """Move-ordering preference per square: corners first, then edges, X-squares last."""
    prior = {}
    for sq in range(64):
        bit = 1 << sq
        if bit & _CORNER_MASK:
            prior[sq] = 40
        elif any(bit == x for _, x, _ in _CORNERS):
            prior[sq] = -40
        elif any(bit & c for _, _, c in _CORNERS):
            prior[sq] = -20
        elif bit & _EDGE_MASK:
            prior[sq] = 10
        else:
            prior[sq] = 0
    return prior


CORNER = 800
X_SQUARE = -350
C_SQUARE = -150
EDGE = 50
MOBILITY = 70
DISC_LATE = 40  # per disc of difference, once 50+ squares are filled


def _masks_by_corners() -> tuple[tuple[int, int, int], ...]:
    """Per pattern of taken corners (bit i = corner i of ``_CORNERS`` taken): the X-squares
    and C-squares that still count against their owner, and the squares that count as
    plain edges (safe edges plus the C-squares of taken corners)."""
    table = []
    for pattern in range(16):
        x_mask = c_mask = 0
        edges = _SAFE_EDGES
        for i, (_, x_square, c_squares) in enumerate(_CORNERS):
            if pattern >> i & 1:
                edges |= c_squares
            else:
                x_mask |= x_square
                c_mask |= c_squares
        table.append((x_mask, c_mask, edges))
    return tuple(table)


_BY_CORNERS = _masks_by_corners()


class OthelloEvaluation(Evaluation):
    unit = 100
    #: ``evaluate`` recognises the end of the game itself (both sides without a move).
    checks_outcome_at_leaf = False
    move_prior = _move_prior()

    def margin(self, state: Any, outcome: Outcome) -> int:
        return abs(int(state.black.bit_count()) - int(state.white.bit_count()))

    def evaluate(self, state: Any) -> int:
        if state.to_move == 0:
            own, opp = state.black, state.white
        else:
            own, opp = state.white, state.black
        my_moves = move_mask(own, opp).bit_count()
        their_moves = move_mask(opp, own).bit_count()
        discs = own.bit_count() - opp.bit_count()
        if my_moves == 0 and their_moves == 0:
            if discs == 0:
                return 0
            final = win_score(0, abs(discs))
            return final if discs > 0 else -final
        score: int = MOBILITY * (my_moves - their_moves)
        score += CORNER * ((own & _CORNER_MASK).bit_count() - (opp & _CORNER_MASK).bit_count())
        occupied = own | opp
        x_mask, c_mask, edge_mask = _BY_CORNERS[
            (occupied & 1) | (occupied >> 6 & 2) | (occupied >> 54 & 4) | (occupied >> 60 & 8)
        ]
        score += X_SQUARE * ((own & x_mask).bit_count() - (opp & x_mask).bit_count())
        score += C_SQUARE * ((own & c_mask).bit_count() - (opp & c_mask).bit_count())
        score += EDGE * ((own & edge_mask).bit_count() - (opp & edge_mask).bit_count())
        filled = (own | opp).bit_count()
        if filled >= 50:
            score += DISC_LATE * discs
        return score


EVALUATION = OthelloEvaluation
