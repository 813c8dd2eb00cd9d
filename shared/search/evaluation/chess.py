"""Chess: material, piece-square tables and the configuration terms of the seed course.

Material in centipawns with the seed's values (pawn 100, knight 300, bishop 300, rook 500,
queen 950). Configuration: piece-square tables (central knights, advanced central pawns);
rooks on open and half-open files and on the seventh rank; the bishop pair; a king that
stays sheltered behind its pawns in the middlegame and walks to the centre in the endgame
(the two blended by the remaining non-pawn material); doubled, isolated and backward pawn
penalties; passed pawns growing with their rank. Pawn-structure terms are cached by the
pawn bitboards, which change rarely between sibling nodes.
"""

from __future__ import annotations

from typing import Any

import chess

from kibitz.shared.search.chess_attacks import attacked
from kibitz.shared.search.evaluation.base import Evaluation

VALUES = (0, 100, 300, 300, 500, 950, 0)  # by python-chess piece type (1 pawn .. 6 king)


def _table(rows: str) -> tuple[int, ...]:
    """A table written as seen by White (rank 8 on the first line) -> index by square."""
    lines = [list(map(int, line.split())) for line in rows.strip().splitlines()]
    flat: list[int] = []
    for rank in range(8):
        flat.extend(lines[7 - rank])
    return tuple(flat)


_PAWN = _table("""
   0   0   0   0   0   0   0   0
  40  45  50  55  55  50  45  40
  12  15  22  30  30  22  15  12
   6   8  12  24  24  12   8   6
   2   4   8  20  20   6   4   2
   4   2   0   4   4  -4   2   4
   4   6   6 -18 -18   8   6   4
   0   0   0   0   0   0   0   0
""")
_KNIGHT = _table("""
 -45 -30 -22 -20 -20 -22 -30 -45
 -30 -12   0   4   4   0 -12 -30
 -20   4  12  16  16  12   4 -20
 -18   6  16  22  22  16   6 -18
 -18   4  14  20  20  14   4 -18
 -22   2  10  12  12  10   2 -22
 -30 -14   0   4   4   0 -14 -30
 -45 -28 -22 -20 -20 -22 -28 -45
""")
_BISHOP = _table("""
 -16  -8  -8  -8  -8  -8  -8 -16
  -8   2   2   2   2   2   2  -8
  -8   2   6   8   8   6   2  -8
  -8   6   6  10  10   6   6  -8
  -8   2  10  10  10  10   2  -8
  -8   8   8   8   8   8   8  -8
  -8   8   2   2   2   2   8  -8
 -16  -8 -10  -8  -8 -10  -8 -16
""")
_ROOK = _table("""
   2   4   4   4   4   4   4   2
   8  10  10  10  10  10  10   8
  -4   0   0   0   0   0   0  -4
  -4   0   0   0   0   0   0  -4
  -4   0   0   0   0   0   0  -4
  -4   0   0   0   0   0   0  -4
  -4   0   0   0   0   0   0  -4
   0   0   2   6   6   4   0   0
""")
_QUEEN = _table("""
 -16 -10  -8  -4  -4  -8 -10 -16
 -10   0   2   2   2   2   0 -10
  -8   2   4   4   4   4   2  -8
  -4   0   4   4   4   4   0  -4
  -4   0   4   4   4   4   0  -4
  -8   4   4   4   4   4   2  -8
 -10   0   4   0   0   0   0 -10
 -16 -10  -8  -2  -4  -8 -10 -16
""")
_KING_MIDDLE = _table("""
 -30 -40 -40 -50 -50 -40 -40 -30
 -30 -40 -40 -50 -50 -40 -40 -30
 -30 -40 -40 -50 -50 -40 -40 -30
 -30 -40 -40 -50 -50 -40 -40 -30
 -20 -30 -30 -40 -40 -30 -30 -20
 -12 -20 -20 -24 -24 -20 -20 -12
  14  14  -6 -10 -10  -6  16  14
  18  28  12  -4   0   8  30  20
""")
_KING_END = _table("""
 -40 -28 -20 -14 -14 -20 -28 -40
 -24 -10   0   6   6   0 -10 -24
 -20   0  16  22  22  16   0 -20
 -18   4  22  30  30  22   4 -18
 -18   4  22  30  30  22   4 -18
 -20   0  14  20  20  14   0 -20
 -26 -12   0   0   0   0 -12 -26
 -40 -28 -24 -20 -20 -24 -28 -40
""")
_PST = (None, _PAWN, _KNIGHT, _BISHOP, _ROOK, _QUEEN)
#: Material plus table by piece type and square, one per colour (Black's mirrored), so a
#: piece costs one lookup at every leaf.
_WHITE_VALUE = tuple(
    tuple(VALUES[pt] + table[sq] for sq in range(64)) if table else ()
    for pt, table in enumerate(_PST)
)
_BLACK_VALUE = tuple(
    tuple(VALUES[pt] + table[sq ^ 56] for sq in range(64)) if table else ()
    for pt, table in enumerate(_PST)
)

ROOK_OPEN_FILE = 22
ROOK_HALF_OPEN_FILE = 10
ROOK_SEVENTH = 20
BISHOP_PAIR = 35
DOUBLED = 14
ISOLATED = 12
BACKWARD = 8
PASSED = (0, 6, 10, 18, 32, 55, 90, 0)  # by rank from the owner's side (0-based)
SHELTER = 12  # per own pawn in front of the castled king
SHELTER_MISSING = 14  # per missing shield file next to the king
#: Non-pawn material (both sides) of the opening; the middlegame weight is that fraction.
_PHASE_FULL = 2 * (2 * 300 + 2 * 300 + 2 * 500 + 950)

_FILES = chess.BB_FILES
_ADJACENT = tuple(
    (_FILES[f - 1] if f > 0 else 0) | (_FILES[f + 1] if f < 7 else 0) for f in range(8)
)


def _front_spans() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per colour and square: the squares ahead on the same and the adjacent files."""
    spans: list[list[int]] = [[], []]
    for color in (chess.WHITE, chess.BLACK):
        for sq in range(64):
            f, r = sq & 7, sq >> 3
            ranks = range(r + 1, 8) if color == chess.WHITE else range(0, r)
            mask = 0
            for rr in ranks:
                for ff in (f - 1, f, f + 1):
                    if 0 <= ff < 8:
                        mask |= 1 << (rr * 8 + ff)
            spans[int(color)].append(mask)
    return tuple(spans[0]), tuple(spans[1])


_SPAN_BLACK, _SPAN_WHITE = _front_spans()


def _scan(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _pawn_structure(white: int, black: int) -> int:
    """Doubled, isolated, backward and passed pawns, White minus Black, in centipawns."""
    score = 0
    for color, own, opp, sign in ((True, white, black, 1), (False, black, white, -1)):
        spans = _SPAN_WHITE if color else _SPAN_BLACK
        other_spans = _SPAN_BLACK if color else _SPAN_WHITE
        part = 0
        for f in range(8):
            count = (own & _FILES[f]).bit_count()
            if count > 1:
                part -= DOUBLED * (count - 1)
            if count and not own & _ADJACENT[f]:
                part -= ISOLATED * count
        for sq in _scan(own):
            f, r = sq & 7, sq >> 3
            if not opp & spans[sq]:
                rank = r if color else 7 - r
                part += PASSED[rank]
            elif (
                own & _ADJACENT[f]
                and not own & _ADJACENT[f] & other_spans[sq] & ~(chess.BB_RANKS[r])
            ):
                # Neighbours exist but all are ahead: nobody can ever protect this pawn.
                part -= BACKWARD
        score += sign * part
    return score


class ChessEvaluation(Evaluation):
    unit = 100
    checks_outcome_at_leaf = False  # python-chess outcome() is costly; quiescence sees mates
    repetitions = True
    #: A repetition is worth a quarter pawn less than 0 to the side to move at the root:
    #: against sunfish, perpetual checks in level positions drew a quarter of the games.
    contempt = 25
    capture_scale = 1  # MoveFacts.capture is in centipawns too
    futility_margins = (0, 125, 250, 400)

    def __init__(self, game: Any) -> None:
        super().__init__(game)
        self._pawn_cache: dict[tuple[int, int], int] = {}

    def order_noisy(self, state: Any, moves: list[Any]) -> tuple[list[Any], dict[Any, int]] | None:
        """MVV-LVA without ``gives_check`` (which quiescence ordering does not need).

        Captures that lose material at first sight are dropped: a piece taking a cheaper
        one on a square the opponent defends (a crude static exchange test; the side to
        move may still stand pat, so quiescence only loses the rare winning exchange)."""
        board: chess.Board = state.board
        piece_at = board.piece_type_at
        ep = board.ep_square
        them = not board.turn
        defended = board.attackers_mask
        occupied = board.occupied
        gains: dict[Any, int] = {}
        keys: dict[Any, int] = {}
        kept = []
        for move in moves:
            to = move.to_square
            victim = piece_at(to)
            if victim is None and to == ep:
                victim = chess.PAWN
            gain = VALUES[victim] if victim else 0
            attacker = piece_at(move.from_square) or 0
            if move.promotion:
                gain += 1_000_000
            elif VALUES[attacker] > gain and defended(them, to, occupied):
                continue
            gains[move] = gain
            keys[move] = gain * 1024 - VALUES[attacker]
            kept.append(move)
        kept.sort(key=keys.__getitem__, reverse=True)
        return kept, gains

    def null_move_ok(self, state: Any) -> bool:
        """Off in low-material endings, where zugzwang makes passing look too good."""
        board = state.board
        own = board.occupied_co[board.turn]
        pieces = own & (board.knights | board.bishops | board.rooks | board.queens)
        return pieces.bit_count() >= 2 or bool(own & (board.rooks | board.queens))

    def evaluate(self, state: Any) -> int:
        board: chess.Board = state.board
        white_bb = board.occupied_co[chess.WHITE]
        black_bb = board.occupied_co[chess.BLACK]
        pawns, knights, bishops = board.pawns, board.knights, board.bishops
        rooks, queens = board.rooks, board.queens
        non_pawn = (
            300 * (knights | bishops).bit_count() + 500 * rooks.bit_count()
            + 950 * queens.bit_count()
        )  # fmt: skip
        phase = min(non_pawn, _PHASE_FULL)
        score = 0
        for pt, mask in ((1, pawns), (2, knights), (3, bishops), (4, rooks), (5, queens)):
            table = _WHITE_VALUE[pt]
            bb = mask & white_bb
            while bb:
                low = bb & -bb
                score += table[low.bit_length() - 1]
                bb ^= low
            table = _BLACK_VALUE[pt]
            bb = mask & black_bb
            while bb:
                low = bb & -bb
                score -= table[low.bit_length() - 1]
                bb ^= low
        # Kings: sheltered in the middlegame, active in the endgame, blended by phase.
        wk = board.king(chess.WHITE)
        bk = board.king(chess.BLACK)
        if wk is not None and bk is not None:
            middle = _KING_MIDDLE[wk] - _KING_MIDDLE[bk ^ 56]
            middle += self._shelter(wk, pawns & white_bb, True)
            middle -= self._shelter(bk, pawns & black_bb, False)
            end = _KING_END[wk] - _KING_END[bk ^ 56]
            score += (middle * phase + end * (_PHASE_FULL - phase)) // _PHASE_FULL
        # Rooks: open and half-open files, the seventh rank.
        white_pawns, black_pawns = pawns & white_bb, pawns & black_bb
        bb = rooks
        while bb:
            low = bb & -bb
            bb ^= low
            sq = low.bit_length() - 1
            file_mask = _FILES[sq & 7]
            white_piece = bool(white_bb >> sq & 1)
            own_p, opp_p = (white_pawns, black_pawns) if white_piece else (black_pawns, white_pawns)
            bonus = 0
            if not file_mask & own_p:
                bonus += ROOK_OPEN_FILE if not file_mask & opp_p else ROOK_HALF_OPEN_FILE
            if (sq >> 3) == (6 if white_piece else 1):
                bonus += ROOK_SEVENTH
            score += bonus if white_piece else -bonus
        if (bishops & white_bb).bit_count() >= 2:
            score += BISHOP_PAIR
        if (bishops & black_bb).bit_count() >= 2:
            score -= BISHOP_PAIR
        cache_key = (white_pawns, black_pawns)
        structure = self._pawn_cache.get(cache_key)
        if structure is None:
            if len(self._pawn_cache) > 1 << 16:
                self._pawn_cache.clear()
            structure = _pawn_structure(white_pawns, black_pawns)
            self._pawn_cache[cache_key] = structure
        score += structure
        return score if board.turn == chess.WHITE else -score

    @staticmethod
    def _shelter(king: int, own_pawns: int, white: bool) -> int:
        """Pawns on the two ranks in front of a king on its back two ranks."""
        rank = king >> 3
        if (rank > 1) if white else (rank < 6):
            return 0
        f = king & 7
        files = _FILES[f] | _ADJACENT[f]
        ahead = 0
        for step in (1, 2):
            r = rank + step if white else rank - step
            if 0 <= r < 8:
                ahead |= chess.BB_RANKS[r]
        shield = own_pawns & files & ahead
        score = SHELTER * min(3, shield.bit_count())
        for ff in (f - 1, f, f + 1):
            if 0 <= ff < 8 and not shield & _FILES[ff]:
                score -= SHELTER_MISSING
        return score


EVALUATION = ChessEvaluation


class BoardEvaluation(ChessEvaluation):
    """The same evaluation on the searcher's ``chess_board.Board`` (scores are equal to
    :class:`ChessEvaluation`'s on the same position; a test holds them together).

    Material and piece-square values come summed from the board (``Board.psq``, kept by
    ``make``); king shelter and pawn structure are cached by pawns and king squares."""

    def __init__(self, game: Any) -> None:
        super().__init__(game)
        self._attacked = attacked
        self._structure_cache: dict[tuple[int, int, int, int], tuple[int, int]] = {}

    def order_noisy(self, state: Any, moves: list[Any]) -> tuple[list[Any], dict[Any, int]] | None:
        """MVV-LVA, dropping captures that lose material at first sight (as above)."""
        sq = state.sq
        bb = state.bb
        them = state.turn ^ 8
        occ = bb[0] | bb[8]
        ep = state.ep
        gains: dict[Any, int] = {}
        keys: dict[Any, int] = {}
        kept = []
        for move in moves:
            to = move >> 6 & 63
            attacker = VALUES[sq[move & 63] & 7]
            victim = sq[to] & 7
            gain = VALUES[victim] if victim else (100 if to == ep else 0)
            if move >> 12:
                gain += 1_000_000
            elif attacker > gain and self._attacked(bb, them, to, occ):
                continue
            gains[move] = gain
            keys[move] = gain * 1024 - attacker
            kept.append(move)
        kept.sort(key=keys.__getitem__, reverse=True)
        return kept, gains

    def null_move_ok(self, state: Any) -> bool:
        bb = state.bb
        us = state.turn
        pieces = bb[us | 2] | bb[us | 3] | bb[us | 4] | bb[us | 5]
        return pieces.bit_count() >= 2 or bool(bb[us | 4] | bb[us | 5])

    def evaluate(self, state: Any) -> int:
        bb = state.bb
        white_pawns, black_pawns = bb[9], bb[1]
        bishops_w, bishops_b = bb[11], bb[3]
        rooks_w, rooks_b = bb[12], bb[4]
        non_pawn = (
            300 * (bb[10] | bb[2] | bishops_w | bishops_b).bit_count()
            + 500 * (rooks_w | rooks_b).bit_count() + 950 * (bb[13] | bb[5]).bit_count()
        )  # fmt: skip
        phase = min(non_pawn, _PHASE_FULL)
        score: int = state.psq
        wk = bb[14].bit_length() - 1
        bk = bb[6].bit_length() - 1
        cache_key = (white_pawns, black_pawns, wk, bk)
        cached = self._structure_cache.get(cache_key)
        if cached is None:
            if len(self._structure_cache) > 1 << 16:
                self._structure_cache.clear()
            shelter = 0
            if wk >= 0 and bk >= 0:
                shelter = self._shelter(wk, white_pawns, True) - self._shelter(
                    bk, black_pawns, False
                )
            pawn_key = (white_pawns, black_pawns)
            structure = self._pawn_cache.get(pawn_key)
            if structure is None:
                if len(self._pawn_cache) > 1 << 16:
                    self._pawn_cache.clear()
                structure = _pawn_structure(white_pawns, black_pawns)
                self._pawn_cache[pawn_key] = structure
            cached = self._structure_cache[cache_key] = (structure, shelter)
        structure, shelter = cached
        if wk >= 0 and bk >= 0:
            middle = _KING_MIDDLE[wk] - _KING_MIDDLE[bk ^ 56] + shelter
            end = _KING_END[wk] - _KING_END[bk ^ 56]
            score += (middle * phase + end * (_PHASE_FULL - phase)) // _PHASE_FULL
        for rooks, own_p, opp_p, seventh, sign in (
            (rooks_w, white_pawns, black_pawns, 6, 1),
            (rooks_b, black_pawns, white_pawns, 1, -1),
        ):
            while rooks:
                low = rooks & -rooks
                rooks ^= low
                sq = low.bit_length() - 1
                file_mask = _FILES[sq & 7]
                bonus = 0
                if not file_mask & own_p:
                    bonus += ROOK_OPEN_FILE if not file_mask & opp_p else ROOK_HALF_OPEN_FILE
                if (sq >> 3) == seventh:
                    bonus += ROOK_SEVENTH
                score += sign * bonus
        if bishops_w.bit_count() >= 2:
            score += BISHOP_PAIR
        if bishops_b.bit_count() >= 2:
            score -= BISHOP_PAIR
        score += structure
        return score if state.turn else -score
