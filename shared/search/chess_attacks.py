"""Which pieces attack a square, on the searcher's bitboards (``chess_board.Board.bb``).

The search board (``chess_board``, which reads the evaluation's piece tables) and the
evaluation on it (``evaluation.chess.BoardEvaluation``) both ask this; it lives apart from
both so that neither imports the other back. It decides the piece types (a piece code is
``8 * white + piece type``, as in python-chess) and the attack tables the board's move
generation shares.
"""

from __future__ import annotations

import chess

PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = 1, 2, 3, 4, 5, 6

_KNIGHT = chess.BB_KNIGHT_ATTACKS
_KING = chess.BB_KING_ATTACKS
#: _PAWN_ATT[colour bit][sq]: squares a pawn of that colour (1 White) on sq attacks.
_PAWN_ATT = chess.BB_PAWN_ATTACKS
_DIAG_M, _DIAG_A = chess.BB_DIAG_MASKS, chess.BB_DIAG_ATTACKS
_FILE_M, _FILE_A = chess.BB_FILE_MASKS, chess.BB_FILE_ATTACKS
_RANK_M, _RANK_A = chess.BB_RANK_MASKS, chess.BB_RANK_ATTACKS


def attacked(bb: list[int], them: int, sq: int, occ: int) -> int:
    """The pieces of colour ``them`` (8 or 0) that attack ``sq`` with occupancy ``occ``."""
    queens = bb[them | QUEEN]
    return (
        (_KNIGHT[sq] & bb[them | KNIGHT])
        | (_KING[sq] & bb[them | KING])
        | (_PAWN_ATT[(them >> 3) ^ 1][sq] & bb[them | PAWN])
        | (_DIAG_A[sq][_DIAG_M[sq] & occ] & (bb[them | BISHOP] | queens))
        | (
            (_RANK_A[sq][_RANK_M[sq] & occ] | _FILE_A[sq][_FILE_M[sq] & occ])
            & (bb[them | ROOK] | queens)
        )
    )
