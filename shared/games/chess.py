"""Chess (FIDE rules), refereed by python-chess.

python-chess generates and validates every move; this module adds what the rest of kibitz
needs around it: immutable states, an incrementally maintained Zobrist key, repetition
history, automatic draws, a fast perft and the searcher's hooks. The searcher itself runs
on a faster board of its own with the same keys (``kibitz.shared.search.chess_board``),
entered at the root; ``repetition_keys`` hands it this game's history.

Player 0 is White. Moves travel in UCI (``e2e4``, ``e7e8q``) and are shown in SAN.

Position text: a FEN, optionally followed by ``moves`` and the UCI moves played since the
last irreversible move (capture, pawn move, loss of castling rights, or a position with a
legal en passant capture), e.g. ``<FEN> moves g1f3 g8f6 f3g1``. The FEN then describes
the position *before* those moves, as in the UCI ``position fen ... moves ...`` command.
Carrying those moves is what lets a position travel between processes without losing
the repetition count.

Draws: there is no claim button on the server, so the claimable draws are automatic:
the game ends as drawn as soon as a position occurs for the third time or the halfmove
clock reaches 100 (fifty moves by each side without capture or pawn move). Checkmate on
the move that reaches the clock limit still wins, as in the FIDE laws.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import chess
import chess.pgn
import chess.polyglot

from kibitz.shared.games.base import (
    Game,
    IllegalMoveError,
    InvalidMoveError,
    InvalidPositionError,
    MoveFacts,
    Options,
    Outcome,
    Player,
)
from kibitz.shared.games.policy import AnalysisScale, GamePolicy, Notation

# -- Zobrist keys: the Polyglot array, so ``hash_from_scratch`` is python-chess's
# ``chess.polyglot.zobrist_hash`` and keys match opening books. ---------------------------
_ARRAY = chess.polyglot.POLYGLOT_RANDOM_ARRAY
#: _PIECE_KEYS[color][piece_type][square]; color as an int (White = 1, as Polyglot does).
_PIECE_KEYS: tuple[tuple[tuple[int, ...], ...], ...] = tuple(
    tuple(
        tuple(_ARRAY[64 * ((pt - 1) * 2 + color) + sq] for sq in range(64)) if pt else ()
        for pt in range(7)
    )
    for color in (0, 1)
)
_CORNERS = chess.BB_A1 | chess.BB_H1 | chess.BB_A8 | chess.BB_H8
_CASTLING_KEYS: dict[int, int] = {}
for _mask in range(16):
    _bb = 0
    _k = 0
    for _bit, (_corner, _index) in enumerate(
        ((chess.BB_H1, 768), (chess.BB_A1, 769), (chess.BB_H8, 770), (chess.BB_A8, 771))
    ):
        if _mask >> _bit & 1:
            _bb |= _corner
            _k ^= _ARRAY[_index]
    _CASTLING_KEYS[_bb] = _k
_EP_KEYS = tuple(_ARRAY[772 + f] for f in range(8))
_TURN_KEY = _ARRAY[780]

#: Piece values for move ordering, in centipawns (queen 9.5). A king "attacker" is worth 0:
#: a legal king capture takes an undefended piece, so it belongs with the cheapest ones.
PIECE_VALUES = {chess.PAWN: 100, chess.KNIGHT: 300, chess.BISHOP: 300, chess.ROOK: 500,
                chess.QUEEN: 950, chess.KING: 0}  # fmt: skip
PROMOTION_RANKS = {chess.QUEEN: 4, chess.ROOK: 3, chess.KNIGHT: 2, chess.BISHOP: 1}

_RESULTS = {0: "1-0", 1: "0-1", None: "1/2-1/2"}


class ChessState(NamedTuple):
    """One position plus what the rules remember about the past.

    ``board`` is never mutated once the state exists (``apply`` works on a copy without
    a move stack, which python-chess copies in about a microsecond). ``root`` is the
    state where the current run of reversible moves began (None when that is this
    state), ``line`` the moves from it, ``history`` the keys of the positions along
    the way (for repetition), ``last`` the move that led here, for the view.
    """

    board: chess.Board
    key: int
    root: ChessState | None
    line: tuple[chess.Move, ...]
    history: tuple[int, ...]
    last: chess.Move | None

    def __repr__(self) -> str:
        return f"ChessState({GAME.format_position(self)!r})"


def _normalize(board: chess.Board) -> None:
    """Keep an en passant square only when the capture is legal, as FEN output does.

    python-chess sets it after every double push; clearing it otherwise makes the key,
    the FEN and the repetition test agree on what "the same position" is.
    """
    if board.ep_square is not None and not board.has_legal_en_passant():
        board.ep_square = None


def _key_from_scratch(board: chess.Board) -> int:
    return chess.polyglot.zobrist_hash(board)


def _key_before_push(board: chess.Board, move: chess.Move, key: int) -> int:
    """The key after ``move`` except the new castling rights and en passant file.

    Called on the board before the move; ``_key_after_push`` finishes the job.
    """
    us = int(board.turn)
    them = 1 - us
    frm, to = move.from_square, move.to_square
    pt = board.piece_type_at(frm)
    assert pt is not None
    ours = _PIECE_KEYS[us]
    key ^= ours[pt][frm] ^ ours[move.promotion or pt][to] ^ _TURN_KEY
    to_bb = chess.BB_SQUARES[to]
    if board.occupied_co[them] & to_bb:
        captured = board.piece_type_at(to)
        assert captured is not None
        key ^= _PIECE_KEYS[them][captured][to]
    elif pt == chess.PAWN:
        if to == board.ep_square:
            key ^= _PIECE_KEYS[them][chess.PAWN][to - 8 if us else to + 8]
    elif pt == chess.KING and (to - frm == 2 or frm - to == 2):
        rook_from, rook_to = (frm + 3, frm + 1) if to > frm else (frm - 4, frm - 1)
        key ^= ours[chess.ROOK][rook_from] ^ ours[chess.ROOK][rook_to]
    key ^= _CASTLING_KEYS[board.castling_rights & _CORNERS]
    if board.ep_square is not None:
        key ^= _EP_KEYS[board.ep_square & 7]
    return key


def _key_after_push(board: chess.Board, key: int) -> int:
    """Finish ``_key_before_push`` on the board after the move (ep normalized)."""
    key ^= _CASTLING_KEYS[board.castling_rights & _CORNERS]
    if board.ep_square is not None:
        key ^= _EP_KEYS[board.ep_square & 7]
    return key


# -- fast legal-move counting (perft's last ply) -----------------------------------------
_BB_ALL = chess.BB_ALL
_SQUARES = chess.BB_SQUARES
_KNIGHT = chess.BB_KNIGHT_ATTACKS
_KING = chess.BB_KING_ATTACKS
_PAWN_ATTACKS = chess.BB_PAWN_ATTACKS
_DIAG_MASKS, _DIAG_ATTACKS = chess.BB_DIAG_MASKS, chess.BB_DIAG_ATTACKS
_FILE_MASKS, _FILE_ATTACKS = chess.BB_FILE_MASKS, chess.BB_FILE_ATTACKS
_RANK_MASKS, _RANK_ATTACKS = chess.BB_RANK_MASKS, chess.BB_RANK_ATTACKS
_RAYS = chess.BB_RAYS
_NOT_FILE_A = ~chess.BB_FILE_A & _BB_ALL
_NOT_FILE_H = ~chess.BB_FILE_H & _BB_ALL
_RANK_1, _RANK_3, _RANK_6, _RANK_8 = (
    chess.BB_RANK_1,
    chess.BB_RANK_3,
    chess.BB_RANK_6,
    chess.BB_RANK_8,
)
_NOT_RANK_1 = ~_RANK_1 & _BB_ALL
_NOT_RANK_8 = ~_RANK_8 & _BB_ALL


def count_legal_moves(board: chess.Board) -> int:
    """len(list(board.legal_moves)), computed with bitboard population counts.

    Perft spends nearly all its time counting the moves of the positions one ply from
    the horizon; counting target squares instead of building Move objects is what makes
    our perft faster than the same walk using python-chess's move list. Positions in
    check, and en passant captures, are left to python-chess.
    """
    us = board.turn
    our = board.occupied_co[us]
    their = board.occupied_co[not us]
    occ = board.occupied
    king_bb = board.kings & our
    king = king_bb.bit_length() - 1
    if board.attackers_mask(not us, king, occ):
        return sum(1 for _ in board.generate_legal_moves())
    pinned = board._slider_blockers(king)
    not_our = ~our & _BB_ALL
    rays = _RAYS[king]
    n = 0

    bb = board.knights & our & ~pinned
    while bb:
        sq = bb.bit_length() - 1
        bb ^= _SQUARES[sq]
        n += (_KNIGHT[sq] & not_our).bit_count()

    queens = board.queens
    bb = (board.bishops | queens) & our
    while bb:
        sq = bb.bit_length() - 1
        sbb = _SQUARES[sq]
        bb ^= sbb
        att = _DIAG_ATTACKS[sq][_DIAG_MASKS[sq] & occ] & not_our
        if pinned & sbb:
            att &= rays[sq]
        n += att.bit_count()
    bb = (board.rooks | queens) & our
    while bb:
        sq = bb.bit_length() - 1
        sbb = _SQUARES[sq]
        bb ^= sbb
        att = (
            _FILE_ATTACKS[sq][_FILE_MASKS[sq] & occ] | _RANK_ATTACKS[sq][_RANK_MASKS[sq] & occ]
        ) & not_our
        if pinned & sbb:
            att &= rays[sq]
        n += att.bit_count()

    them = not us
    occ_without_king = occ ^ king_bb
    attackers = board.attackers_mask
    bb = _KING[king] & not_our
    while bb:
        sq = bb.bit_length() - 1
        bb ^= _SQUARES[sq]
        if not attackers(them, sq, occ_without_king):
            n += 1

    pawns = board.pawns & our
    free = pawns & ~pinned
    empty = ~occ & _BB_ALL
    if us:
        single = (free << 8) & empty
        double = ((single & _RANK_3) << 8) & empty
        caps_left = ((free & _NOT_FILE_A) << 7) & their
        caps_right = ((free & _NOT_FILE_H) << 9) & their
        last = _RANK_8
        not_last = _NOT_RANK_8
        rights = board.castling_rights & _RANK_1
    else:
        single = (free >> 8) & empty
        double = ((single & _RANK_6) >> 8) & empty
        caps_left = ((free & _NOT_FILE_A) >> 9) & their
        caps_right = ((free & _NOT_FILE_H) >> 7) & their
        last = _RANK_1
        not_last = _NOT_RANK_1
        rights = board.castling_rights & _RANK_8
    n += (
        (single & not_last).bit_count()
        + double.bit_count()
        + (caps_left & not_last).bit_count()
        + (caps_right & not_last).bit_count()
        + 4 * ((single & last).bit_count() + (caps_left & last).bit_count()
               + (caps_right & last).bit_count())
    )  # fmt: skip
    bb = pawns & pinned
    while bb:
        sq = bb.bit_length() - 1
        bb ^= _SQUARES[sq]
        step = sq + 8 if us else sq - 8
        targets = _PAWN_ATTACKS[us][sq] & their
        if empty & _SQUARES[step]:
            targets |= _SQUARES[step]
            if (sq >> 3) == (1 if us else 6):
                step2 = sq + 16 if us else sq - 16
                targets |= _SQUARES[step2] & empty
        targets &= rays[sq]
        n += (targets & not_last).bit_count() + 4 * (targets & last).bit_count()

    if board.ep_square is not None and _PAWN_ATTACKS[them][board.ep_square] & pawns:
        n += sum(1 for _ in board.generate_legal_ep())

    if rights:
        if board.chess960:
            return n + sum(1 for _ in board.generate_castling_moves())
        home = king  # clean rights imply the king is on e1 / e8
        for rook in (home + 3, home - 4):
            if not rights & _SQUARES[rook]:
                continue
            if rook > home:
                path, safe = _SQUARES[home + 1] | _SQUARES[home + 2], (home + 1, home + 2)
            else:
                path = _SQUARES[home - 1] | _SQUARES[home - 2] | _SQUARES[home - 3]
                safe = (home - 1, home - 2)
            if occ & path:
                continue
            if not (
                attackers(them, safe[0], occ_without_king)
                or attackers(them, safe[1], occ_without_king)
            ):
                n += 1
    return n


#: Where a pawn of each colour stands one step before promoting (indexed by board.turn).
_PROMOTING_FROM = (chess.BB_RANK_2, chess.BB_RANK_7)


def gives_check(board: chess.Board, move: chess.Move) -> bool:
    """``board.gives_check(move)`` for a legal move, without pushing it.

    python-chess pushes and pops the move on the board; ordering asks this of every move
    of every interior node, so the common cases are answered from attack tables: the
    moved (or promoted) piece attacks the enemy king from its target square, or a slider
    of ours is uncovered by the vacated square. Castling and en passant, which move a
    second piece, go to python-chess.
    """
    frm, to = move.from_square, move.to_square
    us = board.turn
    pt = board.piece_type_at(frm)
    if pt is None:
        return board.gives_check(move)
    if pt == chess.KING:
        if to - frm == 2 or frm - to == 2:
            return board.gives_check(move)
    elif pt == chess.PAWN and to == board.ep_square:
        return board.gives_check(move)
    king_bb = board.kings & board.occupied_co[not us]
    if not king_bb:
        return False
    king = king_bb.bit_length() - 1
    to_bb = _SQUARES[to]
    occ = (board.occupied & ~_SQUARES[frm]) | to_bb
    piece = move.promotion or pt
    if piece == chess.PAWN:
        if _PAWN_ATTACKS[us][to] & king_bb:
            return True
    elif piece == chess.KNIGHT:
        if _KNIGHT[to] & king_bb:
            return True
    elif piece != chess.KING:
        if piece != chess.ROOK and _DIAG_ATTACKS[to][_DIAG_MASKS[to] & occ] & king_bb:
            return True
        if (
            piece != chess.BISHOP
            and (
                _FILE_ATTACKS[to][_FILE_MASKS[to] & occ] | _RANK_ATTACKS[to][_RANK_MASKS[to] & occ]
            )
            & king_bb
        ):
            return True
    # Discovered checks: our other sliders that now see the king.
    ours = board.occupied_co[us] & ~_SQUARES[frm] & ~to_bb
    queens = board.queens
    diag = (board.bishops | queens) & ours
    if diag and _DIAG_ATTACKS[king][_DIAG_MASKS[king] & occ] & diag:
        return True
    straight = (board.rooks | queens) & ours
    return bool(
        straight
        and (
            _FILE_ATTACKS[king][_FILE_MASKS[king] & occ]
            | _RANK_ATTACKS[king][_RANK_MASKS[king] & occ]
        )
        & straight
    )


class Chess(Game[ChessState, chess.Move]):
    name = "chess"
    title = "Chess"
    players = ("White", "Black")
    #: Scores in centipawns; PGN export; UCI engines (Stockfish...) can play it.
    policy = GamePolicy(
        chess_speeds=True,
        lichess_variant="standard",
        ai_draw_min_plies=60,
        analysis_scale=AnalysisScale("centipawns", 100.0, 50, 100, 300, 1000, 0.004),
        analysis_time_ms=400,
        notation=Notation("pgn", "application/x-chess-pgn"),
        engine_protocol="uci",
        # Third schedule (with its depths): the first put 400 Elo or more between adjacent
        # levels 1-6; the second (depths 1, 2, 2, 3, 3, 3, 4; temperatures 0.7, 0.45, 0.3,
        # 0.2, 0.13, 0.08) measured levels 5 and 6 equal and level 1 600 below level 2.
        # Measured strength per level: shared/search/strength.py; the runs: docs/search.md
        # (*Calibration*).
        level_depths=(1, 2, 2, 2, 3, 4, 5, None),
        level8_time_ms=2500,
        level_temperatures=(0.7, 0.7, 0.45, 0.3, 0.2, 0.08, 0.0, 0.0),
    )

    # -- positions ---------------------------------------------------------------------
    def initial(self, options: Options | None = None) -> ChessState:
        self.normalize_options(options)
        return self._from_board(chess.Board())

    def _from_board(self, board: chess.Board) -> ChessState:
        board.castling_rights = board.clean_castling_rights()
        _normalize(board)
        board.clear_stack()
        return ChessState(board, _key_from_scratch(board), None, (), (), None)

    def parse_position(self, text: str) -> ChessState:
        fen, sep, moves = text.strip().partition(" moves")
        try:
            board = chess.Board(fen.strip())
        except ValueError as exc:
            raise InvalidPositionError(f"bad chess position {text!r}: {exc}") from None
        # Castling rights without their rook or king, and en passant squares no pawn can
        # use, are dropped rather than refused: many FENs in the wild carry them.
        board.castling_rights = board.clean_castling_rights()
        if board.ep_square is not None and not board.has_legal_en_passant():
            board.ep_square = None
        status = board.status()
        if status:
            problems = ", ".join(
                (flag.name or "").lower().replace("_", " ")
                for flag in chess.Status
                if flag and flag & status
            )
            raise InvalidPositionError(f"impossible chess position {text!r}: {problems}")
        state = self._from_board(board)
        if sep:
            state = self.play_line(state, text, moves)
        return state

    def format_position(self, state: ChessState) -> str:
        if state.root is None:
            return state.board.fen()
        return state.root.board.fen() + " moves " + " ".join(m.uci() for m in state.line)

    # -- moves -------------------------------------------------------------------------
    def to_move(self, state: ChessState) -> Player:
        return 0 if state.board.turn else 1

    def legal_moves(self, state: ChessState) -> list[chess.Move]:
        if self._drawn_without_search(state):
            return []
        return list(state.board.generate_legal_moves())

    def apply(self, state: ChessState, move: chess.Move) -> ChessState:
        before = state.board
        board = before.copy(stack=False)
        key = _key_before_push(before, move, state.key)
        board.push(move)
        board.clear_stack()
        _normalize(board)
        key = _key_after_push(board, key)
        if (
            board.halfmove_clock == 0
            or before.ep_square is not None
            or board.castling_rights != before.castling_rights
        ):
            return ChessState(board, key, None, (), (), move)
        return ChessState(
            board,
            key,
            state.root or state,
            state.line + (move,),
            state.history + (state.key,),
            move,
        )

    def repetitions(self, state: ChessState) -> int:
        """How many times the current position has occurred (1 the first time)."""
        return state.history.count(state.key) + 1

    def _drawn_without_search(self, state: ChessState) -> bool:
        """Ends that need no move generation: material, the clock, repetition."""
        board = state.board
        if board.halfmove_clock >= 100:
            return True
        if not (board.pawns | board.rooks | board.queens) and board.is_insufficient_material():
            return True
        return board.halfmove_clock >= 8 and state.history.count(state.key) >= 2

    def can_win(self, state: ChessState, player: Player) -> bool:
        """Not with insufficient material (a lone king, king and minor piece...): the
        FIDE rule for a flag against the other side."""
        color = chess.WHITE if player == 0 else chess.BLACK
        return not state.board.has_insufficient_material(color)

    def outcome(self, state: ChessState) -> Outcome | None:
        board = state.board
        has_moves = any(board.generate_legal_moves())
        if not has_moves and board.is_check():
            return Outcome(1 - self.to_move(state), "checkmate", "checkmate")
        if board.is_insufficient_material():
            return Outcome(None, "insufficient material", "rule")
        if not has_moves:
            return Outcome(None, "stalemate", "stalemate")
        if board.halfmove_clock >= 150:
            return Outcome(None, "seventy-five-move rule", "rule")
        repetitions = self.repetitions(state)
        if repetitions >= 5:
            return Outcome(None, "fivefold repetition", "repetition")
        if board.halfmove_clock >= 100:
            return Outcome(None, "fifty-move rule", "rule")
        if repetitions >= 3:
            return Outcome(None, "threefold repetition", "repetition")
        return None

    def parse_move(self, state: ChessState, text: str) -> chess.Move:
        t = text.strip()
        try:
            move = chess.Move.from_uci(t)
        except ValueError:
            raise InvalidMoveError(
                f"bad chess move {text!r}: expected UCI such as e2e4 or e7e8q"
            ) from None
        if not move or move not in self.legal_moves(state):
            raise IllegalMoveError(f"illegal move {text!r} in {self.format_position(state)}")
        return move

    def format_move(self, state: ChessState, move: chess.Move) -> str:
        return move.uci()

    def display_move(self, state: ChessState, move: chess.Move) -> str:
        return state.board.san(move)

    def hash_key(self, state: ChessState) -> int:
        return state.key

    def hash_from_scratch(self, state: ChessState) -> int:
        return _key_from_scratch(state.board)

    def view(self, state: ChessState) -> dict[str, Any]:
        board = state.board
        rows = []
        for rank in range(7, -1, -1):
            row = []
            for file in range(8):
                piece = board.piece_at(chess.square(file, rank))
                row.append(piece.symbol() if piece else "")
            rows.append(row)
        check = None
        if board.is_check():
            king = board.king(board.turn)
            check = chess.square_name(king) if king is not None else None
        last = state.last
        return {
            "kind": "grid",
            "rows": rows,
            "check": check,
            "last": [chess.square_name(last.from_square), chess.square_name(last.to_square)]
            if last
            else None,
        }

    # -- perft ---------------------------------------------------------------------------
    def perft(self, state: ChessState, depth: int) -> int:
        """Walks one python-chess board with push/pop; counts the last ply in bulk.

        Draws by the clock, material and repetition end lines as they do in play.
        """
        if depth <= 0:
            return 1
        if self._drawn_without_search(state):
            return 0
        board = state.board.copy(stack=False)
        if depth == 1:
            return count_legal_moves(board)
        return _perft(board, depth, state.key, list(state.history))

    # -- searcher hooks ------------------------------------------------------------------
    def move_facts(self, state: ChessState, move: chess.Move) -> MoveFacts:
        board = state.board
        mover = board.piece_type_at(move.from_square)
        # Standard castling moves the king to an empty square, so whatever stands on the
        # target square is an enemy piece; en passant takes a pawn from elsewhere.
        captured = chess.PAWN if board.is_en_passant(move) else board.piece_type_at(move.to_square)
        return MoveFacts(
            capture=PIECE_VALUES[captured] if captured else 0,
            attacker=PIECE_VALUES[mover] if mover else 0,
            promotion=PROMOTION_RANKS.get(move.promotion, 0) if move.promotion else 0,
            check=gives_check(board, move),
        )

    def noisy_moves(self, state: ChessState) -> list[chess.Move]:
        """Captures (en passant included) and promotions, generated directly: filtering the
        full legal list cost most of quiescence's move generation."""
        if self._drawn_without_search(state):
            return []
        board = state.board
        moves = list(board.generate_legal_captures())
        pushers = board.pawns & board.occupied_co[board.turn] & _PROMOTING_FROM[board.turn]
        if pushers:
            # Quiet promotions: captures that promote are already in the list above.
            moves.extend(board.generate_legal_moves(pushers, ~board.occupied & _BB_ALL))
        return moves

    def null_move(self, state: ChessState) -> ChessState | None:
        before = state.board
        if before.is_check():
            return None
        board = before.copy(stack=False)
        board.push(chess.Move.null())
        board.clear_stack()
        key = state.key ^ _TURN_KEY
        if before.ep_square is not None:
            key ^= _EP_KEYS[before.ep_square & 7]
        return ChessState(board, key, None, (), (), None)

    def in_check(self, state: ChessState) -> bool:
        return state.board.is_check()

    def repetition_keys(self, state: ChessState) -> tuple[int, ...]:
        """The positions since the last irreversible move (from the position text's
        ``moves``): the searcher scores a return to one of them as a draw."""
        return state.history

    # -- PGN -----------------------------------------------------------------------------
    def pgn(
        self,
        start: ChessState,
        moves: Iterable[chess.Move | str],
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """The game from ``start`` through ``moves`` (Move objects or UCI) as PGN text.

        The Result header comes from our rules (automatic draws included) unless given.
        """
        root = start.root or start
        board = root.board.copy(stack=False)
        for move in start.line:
            board.push(move)
        state = start
        for given in moves:
            if isinstance(given, str):
                move = self.parse_move(state, given)
            elif given in self.legal_moves(state):
                move = given
            else:
                raise IllegalMoveError(
                    f"illegal move {given.uci()!r} in {self.format_position(state)}"
                )
            state = self.apply(state, move)
            board.push(move)
        game = chess.pgn.Game.from_board(board)
        result = self.outcome(state)
        game.headers["Result"] = _RESULTS[result.winner] if result else "*"
        for name, value in (headers or {}).items():
            game.headers[name] = value
        exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=False)
        return game.accept(exporter)

    record_format = "pgn"

    def export_record(
        self,
        start: ChessState,
        moves: list[str],
        result: Outcome | None,
        headers: dict[str, str],
    ) -> str:
        """PGN, with the Result the room recorded (a resignation included)."""
        if result is not None:
            headers = {**headers, "Result": _RESULTS[result.winner]}
        return self.pgn(start, moves, headers)


def _perft(board: chess.Board, depth: int, key: int, path: list[int]) -> int:
    """Perft below a position that is not finished; ``path`` holds earlier keys."""
    total = 0
    path.append(key)
    frontier = depth == 2
    for move in list(board.generate_legal_moves()):
        # Keys are only needed where a repetition could be detected later on.
        need_key = not frontier or board.halfmove_clock >= 7
        child = _key_before_push(board, move, key) if need_key else 0
        board.push(move)
        clock = board.halfmove_clock
        if clock >= 100 or (
            not (board.pawns | board.rooks | board.queens) and board.is_insufficient_material()
        ):
            board.pop()
            continue
        if need_key:
            # The children of this board compute their keys from it, so it must be
            # normalized like a state's board; ``pop`` restores the parent untouched.
            _normalize(board)
            child = _key_after_push(board, child)
            if clock >= 8 and path.count(child) >= 2:
                board.pop()
                continue
        if frontier:
            total += count_legal_moves(board)
        else:
            total += _perft(board, depth - 1, child, path)
        board.pop()
    path.pop()
    return total


def pgn(
    start: ChessState,
    moves: Iterable[chess.Move | str],
    headers: Mapping[str, str] | None = None,
) -> str:
    """Module-level shortcut for :meth:`Chess.pgn`."""
    return GAME.pgn(start, moves, headers)


GAME = Chess()
