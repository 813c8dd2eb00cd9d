"""A fast chess board for the searcher: immutable bitboards plus a mailbox, moves as ints.

``kibitz.shared.games.chess`` referees with python-chess, whose boards are general and
careful: ``apply`` copies one and pushes a ``chess.Move`` (a move stack, castling-rights
cleaning, en passant normalisation), and ordering asks python-chess about every move.
Inside the search that bookkeeping is most of the cost of a node. This module is the
search-side form of the same rules (see ``forms.py``): the searcher enters it once at the
root and leaves it with the chosen move, so python-chess stays at the edge (the root's
legal moves and the move played are python-chess moves; ``tests/shared/search/
test_chess_board.py`` checks both boards agree move for move and key for key).

A ``Board`` is never changed once made; ``make`` builds the next one from copies of two
small lists: ``bb`` (16 bitboards: ``bb[code]`` the squares of piece ``code``, where a
code is ``8 * white + piece type`` as in python-chess, and ``bb[0]`` / ``bb[8]`` all of
Black's / White's pieces) and ``sq`` (the code on each square, 0 when empty). A move is
the int ``from | to << 6 | promotion << 12`` (squares numbered as python-chess, a1 = 0).

Generation is legal, not pseudo-legal followed by a test after every move: checkers and
pinned pieces are found once per node with the attack tables, so only king moves and en
passant captures need a per-move attack test. Keys are the Polyglot Zobrist keys the
referee uses (an en passant file only when the capture is legal), so a search position
and the game's position with the same key are the same position: that is what lets the
game's history count for repetitions inside the search.
"""

from __future__ import annotations

from typing import Any

import chess

from kibitz.shared.games.base import Game, MoveFacts, Outcome, Player
from kibitz.shared.games.chess import (
    _CASTLING_KEYS,
    _EP_KEYS,
    _PIECE_KEYS,
    _TURN_KEY,
    PIECE_VALUES,
    PROMOTION_RANKS,
    Chess,
    ChessState,
)
from kibitz.shared.search.chess_attacks import (
    _DIAG_A,
    _DIAG_M,
    _FILE_A,
    _FILE_M,
    _KING,
    _KNIGHT,
    _PAWN_ATT,
    _RANK_A,
    _RANK_M,
    BISHOP,
    KING,
    KNIGHT,
    PAWN,
    QUEEN,
    ROOK,
    attacked,
)
from kibitz.shared.search.evaluation.chess import _BLACK_VALUE, _WHITE_VALUE

WHITE, BLACK = 8, 0  # colour parts of a piece code

_ALL = chess.BB_ALL
_LINE = chess.BB_RAYS  # the whole line through two squares (0 when not aligned)
_RANK_1, _RANK_8 = chess.BB_RANK_1, chess.BB_RANK_8
_RANK_3, _RANK_6 = chess.BB_RANK_3, chess.BB_RANK_6
_NOT_A = ~chess.BB_FILE_A & _ALL
_NOT_H = ~chess.BB_FILE_H & _ALL


def _between_table() -> tuple[tuple[int, ...], ...]:
    rows = []
    for a in range(64):
        row = []
        for b in range(64):
            bb = _LINE[a][b] & ((_ALL << a) ^ (_ALL << b))
            row.append(bb & (bb - 1))
        rows.append(tuple(row))
    return tuple(rows)


#: Squares strictly between two aligned squares.
_BETWEEN = _between_table()

#: _KEYS[code][sq]: the Polyglot key of piece ``code`` on ``sq``.
_KEYS: tuple[tuple[int, ...], ...] = tuple(
    _PIECE_KEYS[code >> 3][code & 7] if 1 <= code & 7 <= 6 else (0,) * 64 for code in range(16)
)
#: Castling rights (rook squares) each square takes away when a piece leaves or lands on it.
_RIGHTS_LOST = [0] * 64
for _sq, _lost in (
    (chess.E1, chess.BB_A1 | chess.BB_H1), (chess.A1, chess.BB_A1), (chess.H1, chess.BB_H1),
    (chess.E8, chess.BB_A8 | chess.BB_H8), (chess.A8, chess.BB_A8), (chess.H8, chess.BB_H8),
):  # fmt: skip
    _RIGHTS_LOST[_sq] = _lost
#: PSQ[code][sq]: the evaluation's material + table value of the piece, signed for White.
PSQ: tuple[tuple[int, ...], ...] = tuple(
    (
        tuple(_WHITE_VALUE[code & 7][s] if code & 8 else -_BLACK_VALUE[code & 7][s]
              for s in range(64))
        if 1 <= code & 7 <= 5
        else (0,) * 64
    )
    for code in range(16)
)  # fmt: skip
_PROMOTIONS = (QUEEN << 12, ROOK << 12, BISHOP << 12, KNIGHT << 12)
_VALUES = (0, 100, 300, 300, 500, 950, 0)


class Board:
    """One position; never changed after ``make`` (or ``from_chess``) returns it."""

    __slots__ = ("bb", "sq", "turn", "castling", "ep", "clock", "key", "psq", "checkers", "checks")

    bb: list[int]
    sq: list[int]
    #: 8 when White is to move, 0 for Black (the colour part of the mover's codes).
    turn: int
    #: Rook squares that may still castle (python-chess's ``castling_rights``, cleaned).
    castling: int
    #: The en passant target square when the capture is legal, else -1.
    ep: int
    clock: int
    key: int
    #: Material plus piece-square value of every piece but the kings, White minus Black, in
    #: the evaluation's tables (``PSQ``): its biggest loop, kept up to date by ``make``.
    psq: int
    #: Pieces giving check (bitboard); -1 until first asked.
    checkers: int
    #: What ``gives_check`` needs, found once per position when first asked (or None).
    checks: tuple[int, ...] | None

    def __repr__(self) -> str:
        return f"Board({to_chess(self).fen()!r})"


_new = object.__new__


def checkers_of(b: Board) -> int:
    c = b.checkers
    if c < 0:
        bb = b.bb
        us = b.turn
        c = b.checkers = attacked(bb, us ^ 8, bb[us | KING].bit_length() - 1, bb[0] | bb[8])
    return c


def _ep_legal(bb: list[int], us: int, frm: int, ep: int) -> bool:
    """Whether our pawn on ``frm`` may take en passant on ``ep`` (king left safe)."""
    them = us ^ 8
    victim = ep - 8 if us else ep + 8
    occ = (bb[0] | bb[8]) ^ (1 << frm) ^ (1 << victim) | (1 << ep)
    king = bb[us | KING].bit_length() - 1
    queens = bb[them | QUEEN]
    if _DIAG_A[king][_DIAG_M[king] & occ] & (bb[them | BISHOP] | queens):
        return False
    if (_RANK_A[king][_RANK_M[king] & occ] | _FILE_A[king][_FILE_M[king] & occ]) & (
        bb[them | ROOK] | queens
    ):
        return False
    others = (
        (_KNIGHT[king] & bb[them | KNIGHT])
        | (_PAWN_ATT[us >> 3][king] & bb[them | PAWN] & ~(1 << victim))
        | (_KING[king] & bb[them | KING])
    )
    return not others


def _legal_ep_square(bb: list[int], us: int, ep: int) -> int:
    """``ep`` if the side ``us`` has a legal en passant capture there, else -1."""
    pawns = _PAWN_ATT[(us >> 3) ^ 1][ep] & bb[us | PAWN]
    while pawns:
        frm = pawns.bit_length() - 1
        pawns ^= 1 << frm
        if _ep_legal(bb, us, frm, ep):
            return ep
    return -1


def from_chess(board: chess.Board) -> Board:
    """The search board of a python-chess board (standard chess)."""
    b: Board = _new(Board)
    bb = [0] * 16
    sq = [0] * 64
    for color in (chess.WHITE, chess.BLACK):
        part = 8 if color else 0
        for pt in range(1, 7):
            mask = board.pieces_mask(pt, color)
            bb[part | pt] = mask
            bb[part] |= mask
            while mask:
                s = mask.bit_length() - 1
                mask ^= 1 << s
                sq[s] = part | pt
    b.bb, b.sq = bb, sq
    b.turn = 8 if board.turn else 0
    b.castling = board.clean_castling_rights() & chess.BB_CORNERS
    b.ep = -1 if board.ep_square is None else _legal_ep_square(bb, b.turn, board.ep_square)
    b.clock = board.halfmove_clock
    b.key = _key_of(b)
    b.psq = sum(PSQ[code][s] for s, code in enumerate(sq))
    b.checkers = -1
    b.checks = None
    return b


def _key_of(b: Board) -> int:
    key = 0
    for s, code in enumerate(b.sq):
        if code:
            key ^= _KEYS[code][s]
    key ^= _CASTLING_KEYS[b.castling]
    if b.ep >= 0:
        key ^= _EP_KEYS[b.ep & 7]
    if b.turn:
        key ^= _TURN_KEY
    return key


def to_chess(b: Board) -> chess.Board:
    """A python-chess board of the same position (for notation, tests and debugging)."""
    board = chess.Board(None)
    for s, code in enumerate(b.sq):
        if code:
            board.set_piece_at(s, chess.Piece(code & 7, bool(code & 8)))
    board.turn = bool(b.turn)
    board.castling_rights = b.castling
    board.ep_square = b.ep if b.ep >= 0 else None
    board.halfmove_clock = b.clock
    return board


def to_move(move: int) -> chess.Move:
    return chess.Move(move & 63, move >> 6 & 63, (move >> 12) or None)


def from_move(move: chess.Move) -> int:
    return move.from_square | move.to_square << 6 | (move.promotion or 0) << 12


# -- generation ----------------------------------------------------------------------------
#: Moves from one square to a set of squares, by ``targets << 6 | from``: most piece moves
#: recur (the same piece on the same square seeing the same squares), and one lookup is
#: cheaper than taking the set apart bit by bit. Bounded: emptied when full.
_SPREAD: dict[int, tuple[int, ...]] = {}
_SPREAD_SIZE = 1 << 16


def _spread(k: int) -> tuple[int, ...]:
    f = k & 63
    t_bb = k >> 6
    out = []
    while t_bb:
        t = t_bb.bit_length() - 1
        t_bb ^= 1 << t
        out.append(f | t << 6)
    if len(_SPREAD) >= _SPREAD_SIZE:
        _SPREAD.clear()
    moves = _SPREAD[k] = tuple(out)
    return moves


def generate(b: Board, noisy: bool = False) -> list[int]:
    """The legal moves (``noisy``: only captures, en passant and promotions)."""
    bb = b.bb
    us = b.turn
    them = us ^ 8
    own = bb[us]
    opp = bb[them]
    occ = own | opp
    kbb = bb[us | KING]
    king = kbb.bit_length() - 1
    checkers = checkers_of(b)
    moves: list[int] = []
    add = moves.append
    not_own = ~own & _ALL

    # The king: any square the enemy does not attack once the king has left its own.
    targets = _KING[king] & (opp if noisy else not_own)
    occ_wo_king = occ ^ kbb
    while targets:
        t = targets.bit_length() - 1
        targets ^= 1 << t
        if not attacked(bb, them, t, occ_wo_king):
            add(king | t << 6)
    if checkers & (checkers - 1):
        return moves  # double check: only the king moves
    if checkers:
        # Capture the checker or block the line.
        allowed = (_BETWEEN[king][checkers.bit_length() - 1] | checkers) & not_own
    else:
        allowed = not_own
    capture_mask = allowed & opp if noisy else allowed

    # Pinned pieces: ours alone between our king and an enemy slider on a line.
    queens = bb[them | QUEEN]
    straight = (_RANK_A[king][0] | _FILE_A[king][0]) & (bb[them | ROOK] | queens)
    snipers = straight | _DIAG_A[king][0] & (bb[them | BISHOP] | queens)
    pinned = 0
    while snipers:
        s = snipers.bit_length() - 1
        snipers ^= 1 << s
        block = _BETWEEN[king][s] & occ
        if block and not block & (block - 1):
            pinned |= block & own
    line = _LINE[king]

    spread = _SPREAD
    extend = moves.extend
    mask = bb[us | KNIGHT] & ~pinned
    while mask:
        f = mask.bit_length() - 1
        mask ^= 1 << f
        t_bb = _KNIGHT[f] & capture_mask
        if t_bb:
            k = t_bb << 6 | f
            got = spread.get(k)
            extend(got if got is not None else _spread(k))
    own_queens = bb[us | QUEEN]
    mask = bb[us | BISHOP] | own_queens
    while mask:
        f = mask.bit_length() - 1
        fb = 1 << f
        mask ^= fb
        t_bb = _DIAG_A[f][_DIAG_M[f] & occ] & capture_mask
        if pinned & fb:
            t_bb &= line[f]
        if t_bb:
            k = t_bb << 6 | f
            got = spread.get(k)
            extend(got if got is not None else _spread(k))
    mask = bb[us | ROOK] | own_queens
    while mask:
        f = mask.bit_length() - 1
        fb = 1 << f
        mask ^= fb
        t_bb = (_RANK_A[f][_RANK_M[f] & occ] | _FILE_A[f][_FILE_M[f] & occ]) & capture_mask
        if pinned & fb:
            t_bb &= line[f]
        if t_bb:
            k = t_bb << 6 | f
            got = spread.get(k)
            extend(got if got is not None else _spread(k))

    # Pawns: by shifts for the free ones, one by one for the pinned.
    pawns = bb[us | PAWN]
    free = pawns & ~pinned
    empty = ~occ & _ALL
    if us:
        single = (free << 8) & empty
        double = ((single & _RANK_3) << 8) & empty & allowed
        single &= allowed
        left = ((free & _NOT_A) << 7) & opp & allowed
        right = ((free & _NOT_H) << 9) & opp & allowed
        last = _RANK_8
        step, lstep, rstep = 8, 7, 9
    else:
        single = (free >> 8) & empty
        double = ((single & _RANK_6) >> 8) & empty & allowed
        single &= allowed
        left = ((free & _NOT_A) >> 9) & opp & allowed
        right = ((free & _NOT_H) >> 7) & opp & allowed
        last = _RANK_1
        step, lstep, rstep = -8, -9, -7
    for targets, delta in ((left, lstep), (right, rstep), (single, step)):
        promo = targets & last
        if not noisy or delta != step:
            targets &= ~last
            while targets:
                t = targets.bit_length() - 1
                targets ^= 1 << t
                add((t - delta) | t << 6)
        while promo:
            t = promo.bit_length() - 1
            promo ^= 1 << t
            base = (t - delta) | t << 6
            for p in _PROMOTIONS:
                add(base | p)
    if not noisy:
        while double:
            t = double.bit_length() - 1
            double ^= 1 << t
            add((t - 2 * step) | t << 6)
    mask = pawns & pinned
    while mask:
        f = mask.bit_length() - 1
        mask ^= 1 << f
        t_bb = _PAWN_ATT[us >> 3][f] & opp & allowed
        one = f + step
        if empty >> one & 1:
            if not noisy or (1 << one) & last:
                t_bb |= (1 << one) & allowed
            if not noisy and (f >> 3) == (1 if us else 6) and empty >> (one + step) & 1:
                t_bb |= (1 << (one + step)) & allowed
        t_bb &= line[f]
        while t_bb:
            t = t_bb.bit_length() - 1
            t_bb ^= 1 << t
            if (1 << t) & last:
                for p in _PROMOTIONS:
                    add(f | t << 6 | p)
            else:
                add(f | t << 6)
    ep = b.ep
    if ep >= 0:
        takers = _PAWN_ATT[(us >> 3) ^ 1][ep] & pawns
        while takers:
            f = takers.bit_length() - 1
            takers ^= 1 << f
            if _ep_legal(bb, us, f, ep):
                add(f | ep << 6)

    # Castling: rights are clean, so the king stands on its square and the rook on its own.
    rights = b.castling & (_RANK_1 if us else _RANK_8)
    if rights and not checkers and not noisy:
        home = 4 if us else 60
        if (
            rights & (1 << (home + 3))
            and not occ & (0b11 << (home + 1))
            and not attacked(bb, them, home + 1, occ)
            and not attacked(bb, them, home + 2, occ)
        ):
            add(home | (home + 2) << 6)
        if (
            rights & (1 << (home - 4))
            and not occ & (0b111 << (home - 3))
            and not attacked(bb, them, home - 1, occ)
            and not attacked(bb, them, home - 2, occ)
        ):
            add(home | (home - 2) << 6)
    return moves


def make(b: Board, move: int) -> Board:
    """The board after the legal ``move``."""
    frm = move & 63
    to = move >> 6 & 63
    sq = b.sq[:]
    bb = b.bb[:]
    code = sq[frm]
    us = code & 8
    them = us ^ 8
    fb = 1 << frm
    tb = 1 << to
    keys = _KEYS
    key = b.key ^ _TURN_KEY ^ keys[code][frm]
    psq = b.psq - PSQ[code][frm]
    clock = b.clock + 1
    captured = sq[to]
    if captured:
        bb[captured] ^= tb
        bb[them] ^= tb
        key ^= keys[captured][to]
        psq -= PSQ[captured][to]
        clock = 0
    bb[code] ^= fb
    bb[us] ^= fb | tb
    sq[frm] = 0
    placed = code
    new_ep = -1
    pt = code & 7
    if pt == PAWN:
        clock = 0
        if move >> 12:
            placed = us | move >> 12
        elif to == b.ep:
            victim = to - 8 if us else to + 8
            vb = 1 << victim
            bb[them | PAWN] ^= vb
            bb[them] ^= vb
            sq[victim] = 0
            key ^= keys[them | PAWN][victim]
            psq -= PSQ[them | PAWN][victim]
        elif to - frm == 16 or frm - to == 16:
            new_ep = (frm + to) >> 1
    elif pt == KING and (to - frm == 2 or frm - to == 2):
        rook_from, rook_to = (frm + 3, frm + 1) if to > frm else (frm - 4, frm - 1)
        rook = us | ROOK
        moved = (1 << rook_from) | (1 << rook_to)
        bb[rook] ^= moved
        bb[us] ^= moved
        sq[rook_from] = 0
        sq[rook_to] = rook
        key ^= keys[rook][rook_from] ^ keys[rook][rook_to]
        psq += PSQ[rook][rook_to] - PSQ[rook][rook_from]
    bb[placed] ^= tb
    sq[to] = placed
    key ^= keys[placed][to]
    psq += PSQ[placed][to]
    rights = b.castling
    if rights:
        lost = _RIGHTS_LOST[frm] | _RIGHTS_LOST[to]
        if rights & lost:
            key ^= _CASTLING_KEYS[rights]
            rights &= ~lost
            key ^= _CASTLING_KEYS[rights]
    if b.ep >= 0:
        key ^= _EP_KEYS[b.ep & 7]
    if new_ep >= 0:
        new_ep = _legal_ep_square(bb, them, new_ep)
        if new_ep >= 0:
            key ^= _EP_KEYS[new_ep & 7]
    n: Board = _new(Board)
    n.bb = bb
    n.sq = sq
    n.turn = them
    n.castling = rights
    n.ep = new_ep
    n.clock = clock
    n.key = key
    n.psq = psq
    n.checkers = -1
    n.checks = None
    return n


def pass_turn(b: Board) -> Board:
    """The same pieces with the other side to move (no en passant): a null move."""
    n: Board = _new(Board)
    n.bb = b.bb
    n.sq = b.sq
    n.turn = b.turn ^ 8
    n.castling = b.castling
    n.ep = -1
    n.clock = b.clock + 1
    n.psq = b.psq
    key = b.key ^ _TURN_KEY
    if b.ep >= 0:
        key ^= _EP_KEYS[b.ep & 7]
    n.key = key
    n.checkers = -1
    n.checks = None
    return n


def _check_info(b: Board) -> tuple[int, ...]:
    """Per piece type, the squares from which it would check the enemy king, then the
    enemy king's square and our pieces whose leaving a line uncovers a check."""
    bb = b.bb
    us = b.turn
    them = us ^ 8
    occ = bb[0] | bb[8]
    king = bb[them | KING].bit_length() - 1
    diag = _DIAG_A[king][_DIAG_M[king] & occ]
    straight = _RANK_A[king][_RANK_M[king] & occ] | _FILE_A[king][_FILE_M[king] & occ]
    queens = bb[us | QUEEN]
    snipers = (_RANK_A[king][0] | _FILE_A[king][0]) & (bb[us | ROOK] | queens) | _DIAG_A[king][
        0
    ] & (bb[us | BISHOP] | queens)
    own = bb[us]
    discoverers = 0
    while snipers:
        s = snipers.bit_length() - 1
        snipers ^= 1 << s
        block = _BETWEEN[king][s] & occ
        if block and not block & (block - 1) and block & own:
            discoverers |= block
    pawn = _PAWN_ATT[them >> 3][king]
    return (0, pawn, _KNIGHT[king], diag, straight, diag | straight, 0, king, discoverers)


def gives_check(b: Board, move: int) -> bool:
    """Whether the legal ``move`` checks the opponent (attack tables, no make): direct
    checks from the squares found once per position, discovered ones from the pieces
    that stand alone between one of our sliders and the enemy king."""
    frm = move & 63
    to = move >> 6 & 63
    pt = b.sq[frm] & 7
    if (
        move >> 12
        or (pt == KING and (to - frm == 2 or frm - to == 2))
        or (pt == PAWN and to == b.ep)
    ):
        # Promotions, castling and en passant change more than one square's worth.
        return checkers_of(make(b, move)) != 0
    info = b.checks
    if info is None:
        info = b.checks = _check_info(b)
    if info[pt] >> to & 1:
        return True
    return bool(info[8] >> frm & 1 and not _LINE[info[7]][frm] >> to & 1)


def insufficient(b: Board) -> bool:
    """No mate is possible: kings alone, or with one minor piece, or only bishops on one
    colour of square (python-chess's ``is_insufficient_material``)."""
    bb = b.bb
    if bb[PAWN] | bb[8 | PAWN] | bb[ROOK] | bb[8 | ROOK] | bb[QUEEN] | bb[8 | QUEEN]:
        return False
    knights = bb[KNIGHT] | bb[8 | KNIGHT]
    bishops = bb[BISHOP] | bb[8 | BISHOP]
    if not knights:
        return not (bishops & chess.BB_LIGHT_SQUARES and bishops & chess.BB_DARK_SQUARES)
    return not bishops and knights.bit_count() == 1


def perft(b: Board, depth: int) -> int:
    """Leaf count of the legal-move tree (no draws: the published perft numbers)."""
    moves = generate(b)
    if depth <= 1:
        return len(moves) if depth == 1 else 1
    return sum(perft(make(b, m), depth - 1) for m in moves)


# -- the searcher's game -------------------------------------------------------------------
#: Every possible ``MoveFacts``, indexed by captured type, mover type, promotion type and
#: check, made once so ordering allocates nothing per move.
_FACTS = tuple(
    MoveFacts(
        capture=_VALUES[captured],
        attacker=_VALUES[mover],
        promotion=PROMOTION_RANKS.get(promotion, 0),
        check=bool(check),
    )
    for captured in range(7)
    for mover in range(7)
    for promotion in range(6)
    for check in range(2)
)


class ChessBoardGame(Game[Board, int]):
    """Chess on ``Board``: what the searcher runs on for chess (see ``forms.py``).

    The rules are the referee's, but the searcher's own path does repetition (with the
    game's earlier positions in it), so ``legal_moves`` ends a line only by the clock and
    by insufficient material, and ``outcome`` is asked only where no move is left.
    """

    name = "chess-board"
    title = "Chess (search board)"
    players = ("White", "Black")

    def initial(self, options: Any = None) -> Board:
        return from_chess(chess.Board())

    def parse_position(self, text: str) -> Board:
        return from_chess(chess.Board(text))

    def format_position(self, state: Board) -> str:
        return to_chess(state).fen()

    def to_move(self, state: Board) -> Player:
        return 0 if state.turn else 1

    def legal_moves(self, state: Board) -> list[int]:
        if state.clock >= 100 or insufficient(state):
            return []
        return generate(state)

    def noisy_moves(self, state: Board) -> list[int]:
        if state.clock >= 100:
            return []
        return generate(state, True)

    def apply(self, state: Board, move: int) -> Board:
        return make(state, move)

    def outcome(self, state: Board) -> Outcome | None:
        has_moves = bool(generate(state))
        if not has_moves and checkers_of(state):
            return Outcome(1 - self.to_move(state), "checkmate", "checkmate")
        if insufficient(state):
            return Outcome(None, "insufficient material", "rule")
        if not has_moves:
            return Outcome(None, "stalemate", "stalemate")
        if state.clock >= 100:
            return Outcome(None, "fifty-move rule", "rule")
        return None

    def parse_move(self, state: Board, text: str) -> int:
        move = from_move(chess.Move.from_uci(text.strip()))
        if move not in generate(state):
            raise ValueError(f"illegal move {text!r}")
        return move

    def format_move(self, state: Board, move: int) -> str:
        return to_move(move).uci()

    def hash_key(self, state: Board) -> int:
        return state.key

    def hash_from_scratch(self, state: Board) -> int:
        return _key_of(state)

    def view(self, state: Board) -> dict[str, Any]:
        return {"kind": "fen", "fen": self.format_position(state)}

    def perft(self, state: Board, depth: int) -> int:
        return perft(state, depth)

    def move_facts(self, state: Board, move: int) -> MoveFacts:
        sq = state.sq
        frm = move & 63
        to = move >> 6 & 63
        mover = sq[frm] & 7
        captured = sq[to] & 7
        if not captured and mover == PAWN and to == state.ep:
            captured = PAWN
        check = gives_check(state, move)
        return _FACTS[((captured * 7 + mover) * 6 + (move >> 12)) * 2 + check]

    def null_move(self, state: Board) -> Board | None:
        if checkers_of(state):
            return None
        return pass_turn(state)

    def in_check(self, state: Board) -> bool:
        return checkers_of(state) != 0


BOARD_GAME = ChessBoardGame()


class ChessForm:
    """How the searcher enters the board from the referee's state and leaves with a move."""

    game: Game[Any, Any] = BOARD_GAME

    @staticmethod
    def accepts(game: Game[Any, Any]) -> bool:
        return isinstance(game, Chess)

    @staticmethod
    def enter(state: ChessState) -> Board:
        return from_chess(state.board)

    @staticmethod
    def move_out(move: int) -> chess.Move:
        return to_move(move)

    @staticmethod
    def move_in(move: chess.Move) -> int:
        return from_move(move)


FORM = ChessForm()
assert PIECE_VALUES[chess.QUEEN] == _VALUES[QUEEN]
