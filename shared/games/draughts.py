"""International draughts (FMJD rules, 10x10) on bitboards held in Python ints.

Board: the 50 dark squares are numbered 1-50 row by row from the top-left; square 1 is
on row 0, column 1. Black starts on 1-20, White (player 0) on 31-50 and moves first;
White men move up the board (towards 1-5), Black men down.

Rules implemented: men step one square diagonally forward and capture forward and
backward; capturing is compulsory and the capture taking the most pieces must be
played (men and kings count alike); captured pieces leave the board only after the
whole capture and may not be jumped twice (so they block the rest of the capture); a
man is crowned only when its move ends on the far row; kings fly along diagonals and
capture at a distance, landing on any empty square beyond. Captures with the same
start, end and set of captured pieces are one move. A player without a legal move
loses ("no moves", "no-moves").

Draws (FMJD article 6, as implemented here):

- the same position (same side to move) for the third time ("threefold repetition");
- 25 successive moves by each side (50 plies) made by kings only, with no capture and
  no man move ("25-move king rule");
- one side has a lone king and the other three pieces including at least one king
  (three kings, two kings and a man, or a king and two men): drawn once both sides
  have played 16 more moves (32 plies) since that material first arose
  ("16-move endgame rule");
- one side has a lone king and the other at most two pieces including at least one
  king (two kings, a king and a man, or a king): drawn after 5 more moves each
  (10 plies) ("5-move endgame rule").

The endgame count starts at 0 when a position of one of those two classes arises (by a
capture or a promotion) and grows by one per ply while the class stays the same; a
move into the other class (or out of both) restarts it. Man moves inside a class do
not reset it.

Bit layout: square ``s`` is bit ``(s - 1) + (s - 1) // 10``: every pair of rows takes 11
bits, the 11th a "ghost" that is never a square. With it each diagonal direction is one
constant shift (up-left -6, up-right -5, down-left +5, down-right +6), and a step off the
side of the board lands on a ghost bit or off the 54-bit board.

Position text: PDN FEN, side to move then the two piece lists, squares ascending, kings
prefixed ``K``: ``W:W31,32,...,K45:B1,2,...,K5``. Two optional fields follow when the
draw rules need them, so that a position round-trips exactly:

- ``:H`` and the non-capture king moves made since the last capture or man move, oldest
  first, e.g. ``:H46-41,5-10`` (the repetition history and the 25-move count);
- ``:E`` and the number of plies played in the current endgame class, e.g. ``:E7``.

A plain PDN FEN parses: without the suffix fields, with the lists in either order, with
squares in any order or as runs such as ``31-50`` (the output is always canonical).

Move text (PDN): ``32-28`` for a step or king move, ``28x19`` for a capture (start and
end); when two legal captures share start and end but take different pieces, the full
path of landing squares, ``28x19x10``. Input also accepts any capture's full path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

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
from kibitz.shared.games.zobrist import zobrist_keys

Square = int  # 1-50, the PDN number

#: Ply limits of the draw rules.
KING_RULE_PLIES = 50
ENDGAME_16_PLIES = 32
ENDGAME_5_PLIES = 10

#: Values for move ordering (the searcher's MVV-LVA); a king is worth about three men.
MAN_VALUE = 100
KING_VALUE = 300


# -- board geometry ------------------------------------------------------------------


def square_bit_index(square: Square) -> int:
    return (square - 1) + (square - 1) // 10


def _square_of_row_col(row: int, col: int) -> Square | None:
    if 0 <= row < 10 and 0 <= col < 10 and (row + col) % 2 == 1:
        return row * 5 + col // 2 + 1
    return None


def _row_col(square: Square) -> tuple[int, int]:
    row = (square - 1) // 5
    return row, 2 * ((square - 1) % 5) + (1 if row % 2 == 0 else 0)


SQUARE_OF_BIT: dict[int, Square] = {square_bit_index(s): s for s in range(1, 51)}
BIT_OF_SQUARE: list[int] = [0] + [1 << square_bit_index(s) for s in range(1, 51)]
BOARD = sum(BIT_OF_SQUARE)
WHITE_CROWN_ROW = sum(BIT_OF_SQUARE[1:6])  # White men are crowned on 1-5
BLACK_CROWN_ROW = sum(BIT_OF_SQUARE[46:51])
_DIRECTIONS = ((-1, -1), (-1, 1), (1, -1), (1, 1))
_SHIFTS = {(-1, -1): -6, (-1, 1): -5, (1, -1): 5, (1, 1): 6}


def _build_tables() -> tuple[
    list[tuple[tuple[int, int, int], ...]], list[tuple[tuple[tuple[int, int], ...], ...]]
]:
    """Per bit index: the man jumps (middle bit, landing bit, landing index) and the
    king rays (each a tuple of (bit, index) walking away from the square)."""
    jumps: list[tuple[tuple[int, int, int], ...]] = [()] * 54
    rays: list[tuple[tuple[tuple[int, int], ...], ...]] = [()] * 54
    for square in range(1, 51):
        row, col = _row_col(square)
        index = square_bit_index(square)
        square_jumps = []
        square_rays = []
        for dr, dc in _DIRECTIONS:
            ray = []
            previous = index
            r, c = row + dr, col + dc
            while (target := _square_of_row_col(r, c)) is not None:
                t_index = square_bit_index(target)
                # The layout's promise: one direction is one constant shift.
                assert t_index - previous == _SHIFTS[(dr, dc)]
                ray.append((1 << t_index, t_index))
                previous = t_index
                r, c = r + dr, c + dc
            if ray:
                square_rays.append(tuple(ray))
            if len(ray) >= 2:
                square_jumps.append((ray[0][0], ray[1][0], ray[1][1]))
        jumps[index] = tuple(square_jumps)
        rays[index] = tuple(square_rays)
    return jumps, rays


_MAN_JUMPS, _KING_RAYS = _build_tables()


# -- move generation on raw bitboards ------------------------------------------------
# A raw move is (from bit, to bit, captured bits); "own" is the side to move.

RawMove = tuple[int, int, int]
Path = tuple[int, ...]  # landing bit indices of a capture


def _capture_sources(own: int, opp: int, kings: int, empty: int) -> int:
    """Pieces of ``own`` that have a capture: a quick bitwise test for men, kings added."""
    men = own & ~kings
    sources = ((((men >> 6) & opp) >> 6) & empty) << 12
    sources |= ((((men >> 5) & opp) >> 5) & empty) << 10
    sources |= ((((men << 5) & opp) << 5) & empty) >> 10
    sources |= ((((men << 6) & opp) << 6) & empty) >> 12
    return sources | (own & kings)


def _captures(own: int, opp: int, kings: int, with_paths: bool) -> dict[RawMove, list[Path]]:
    """The maximal captures, merged by (from, to, captured); each maps to its paths.

    A path is a tuple of landing bit indices. With ``with_paths`` false the paths lists
    stay empty (perft needs only the count). Empty when no capture exists.
    """
    occupied = own | opp
    sources = _capture_sources(own, opp, kings, BOARD & ~occupied)
    best: dict[RawMove, list[Path]] = {}
    if not sources:
        return best
    best_count = 0
    while sources:
        src = sources & -sources
        sources ^= src
        # The capturing piece has left its square: it may pass over or land on it.
        empty = BOARD & ~occupied | src
        start = src.bit_length() - 1
        # Depth-first search; a stack of (square index, captured, path) frames.
        stack: list[tuple[int, int, tuple[int, ...]]] = [(start, 0, ())]
        is_king = bool(src & kings)
        while stack:
            at, captured, path = stack.pop()
            extended = False
            if is_king:
                for ray in _KING_RAYS[at]:
                    i = 0
                    n = len(ray)
                    while i < n and ray[i][0] & empty:
                        i += 1
                    if i >= n - 1:
                        continue
                    victim = ray[i][0]
                    if not victim & opp or victim & captured:
                        continue
                    i += 1
                    taken = captured | victim
                    while i < n and ray[i][0] & empty:
                        extended = True
                        land = ray[i][1]
                        stack.append((land, taken, path + (land,) if with_paths else path))
                        i += 1
            else:
                for middle, landing, land in _MAN_JUMPS[at]:
                    if middle & opp and landing & empty and not middle & captured:
                        extended = True
                        stack.append(
                            (land, captured | middle, path + (land,) if with_paths else path)
                        )
            if extended or not captured:
                continue
            count = captured.bit_count()
            if count < best_count:
                continue
            if count > best_count:
                best_count = count
                best = {}
            move = (src, 1 << at, captured)
            paths = best.get(move)
            if paths is None:
                best[move] = [path] if with_paths else []
            elif with_paths and path not in paths:
                paths.append(path)
    return best


def _quiet_moves(own: int, kings: int, empty: int, white: bool) -> list[RawMove]:
    moves: list[RawMove] = []
    men = own & ~kings
    if white:
        for shift in (5, 6):
            targets = (men >> shift) & empty
            while targets:
                dst = targets & -targets
                targets ^= dst
                moves.append((dst << shift, dst, 0))
    else:
        for shift in (5, 6):
            targets = (men << shift) & empty
            while targets:
                dst = targets & -targets
                targets ^= dst
                moves.append((dst >> shift, dst, 0))
    own_kings = own & kings
    while own_kings:
        src = own_kings & -own_kings
        own_kings ^= src
        for ray in _KING_RAYS[src.bit_length() - 1]:
            for bit, _ in ray:
                if not bit & empty:
                    break
                moves.append((src, bit, 0))
    return moves


def _count_quiet(own: int, kings: int, empty: int, white: bool) -> int:
    men = own & ~kings
    if white:
        count = ((men >> 5) & empty).bit_count() + ((men >> 6) & empty).bit_count()
    else:
        count = ((men << 5) & empty).bit_count() + ((men << 6) & empty).bit_count()
    own_kings = own & kings
    while own_kings:
        src = own_kings & -own_kings
        own_kings ^= src
        for ray in _KING_RAYS[src.bit_length() - 1]:
            for bit, _ in ray:
                if not bit & empty:
                    break
                count += 1
    return count


def raw_moves(own: int, opp: int, kings: int, white: bool) -> list[RawMove]:
    """Every legal move of the side owning ``own`` (draw rules aside)."""
    captures = _captures(own, opp, kings, False)
    if captures:
        return list(captures)
    return _quiet_moves(own, kings, BOARD & ~(own | opp), white)


def _perft_raw(own: int, opp: int, kings: int, white: bool, depth: int) -> int:
    """perft without draw rules, for depth >= 1, counting the last ply in bulk."""
    captures = _captures(own, opp, kings, False)
    if depth == 1:
        if captures:
            return len(captures)
        return _count_quiet(own, kings, BOARD & ~(own | opp), white)
    moves = list(captures) if captures else _quiet_moves(own, kings, BOARD & ~(own | opp), white)
    crown = WHITE_CROWN_ROW if white else BLACK_CROWN_ROW
    total = 0
    for src, dst, captured in moves:
        if src & kings:
            new_kings = (kings & ~captured) ^ src ^ dst
        elif dst & crown:
            new_kings = (kings & ~captured) | dst
        else:
            new_kings = kings & ~captured
        total += _perft_raw(opp & ~captured, own ^ src ^ dst, new_kings, not white, depth - 1)
    return total


# -- hashing -----------------------------------------------------------------------------

# Keys by piece kind (0 white man, 1 white king, 2 black man, 3 black king) and bit index.
_KEYS = zobrist_keys("draughts", 4 * 54 + 1)
_PIECE_KEYS = [_KEYS[kind * 54 : kind * 54 + 54] for kind in range(4)]
_SIDE_KEY = _KEYS[4 * 54]


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _key(white: int, black: int, kings: int, to_move: Player) -> int:
    key = _SIDE_KEY if to_move else 0
    for kind, mask in enumerate((white & ~kings, white & kings, black & ~kings, black & kings)):
        keys = _PIECE_KEYS[kind]
        for index in _bits(mask):
            key ^= keys[index]
    return key


def _endgame_limit(white: int, black: int, kings: int) -> int:
    """Plies allowed by the FMJD endgame rules for this material (0: no such rule)."""
    for strong, weak in ((white, black), (black, white)):
        if weak.bit_count() == 1 and weak & kings and strong & kings:
            pieces = strong.bit_count()
            if pieces <= 2:
                return ENDGAME_5_PLIES
            if pieces == 3:
                return ENDGAME_16_PLIES
    return 0


# -- the game ------------------------------------------------------------------------


class DraughtsMove(NamedTuple):
    """A move: ``captured`` lists the taken squares ascending; ``path`` the landing
    squares of a capture (ending with ``dst``), empty for a quiet move."""

    src: Square
    dst: Square
    captured: tuple[Square, ...] = ()
    path: tuple[Square, ...] = ()


class DraughtsState(NamedTuple):
    white: int  # bitboards in the layout described in the module docstring
    black: int
    kings: int
    to_move: Player  # 0 White, 1 Black
    key: int
    #: Non-capture king moves since the last capture or man move, oldest first, each
    #: packed as ``from_index << 6 | to_index`` (bit indices).
    king_moves: tuple[int, ...] = ()
    #: Plies played in the current endgame class (see ``_endgame_limit``).
    endgame_plies: int = 0


def _squares(mask: int) -> list[Square]:
    return [SQUARE_OF_BIT[i] for i in _bits(mask)]


def _to_move_obj(raw: RawMove, paths: list[Path]) -> DraughtsMove:
    src, dst, captured = raw
    path = min(paths) if paths else ()
    return DraughtsMove(
        SQUARE_OF_BIT[src.bit_length() - 1],
        SQUARE_OF_BIT[dst.bit_length() - 1],
        tuple(_squares(captured)),
        tuple(SQUARE_OF_BIT[i] for i in path),
    )


class Draughts(Game[DraughtsState, DraughtsMove]):
    name = "draughts"
    title = "International draughts"
    players = ("White", "Black")
    policy = GamePolicy(
        chess_speeds=True,
        ai_draw_min_plies=50,
        analysis_scale=AnalysisScale("men", 1.0, 0.3, 0.7, 1.5, 6, 0.9),
        analysis_time_ms=300,
        notation=Notation("pdn", "application/x-draughts-pdn"),
    )

    # -- positions ---------------------------------------------------------------------
    def initial(self, options: Options | None = None) -> DraughtsState:
        self.normalize_options(options)
        black = sum(BIT_OF_SQUARE[1:21])
        white = sum(BIT_OF_SQUARE[31:51])
        return DraughtsState(white, black, 0, 0, _key(white, black, 0, 0))

    def parse_position(self, text: str) -> DraughtsState:
        fields = text.strip().split(":")

        def bad(why: str) -> InvalidPositionError:
            return InvalidPositionError(f"bad draughts position {text!r}: {why}")

        if len(fields) < 3 or fields[0] not in ("W", "B"):
            raise bad("expected PDN FEN such as W:W31,32:B1,2")
        lists = {}
        for field in fields[1:3]:
            colour, body = field[:1], field[1:]
            if colour not in ("W", "B") or colour in lists:
                raise bad("expected one W list and one B list")
            lists[colour] = body
        pieces = {"W": 0, "B": 0}
        kings = 0
        for colour, body in lists.items():
            for item in body.split(",") if body else []:
                king = item.startswith("K")
                # Some PDN writers compress runs of squares: "31-50" or "K1-3".
                first, dash, last = (item[1:] if king else item).strip().partition("-")
                last = last if dash else first
                if not (first.isdigit() and last.isdigit() and 1 <= int(first) <= int(last) <= 50):
                    raise bad(f"{item!r} is not a square 1-50 or a range of squares")
                for number in range(int(first), int(last) + 1):
                    bit = BIT_OF_SQUARE[number]
                    if (pieces["W"] | pieces["B"]) & bit:
                        raise bad(f"square {number} is listed twice")
                    pieces[colour] |= bit
                    if king:
                        kings |= bit
        white, black = pieces["W"], pieces["B"]
        if white & ~kings & WHITE_CROWN_ROW or black & ~kings & BLACK_CROWN_ROW:
            raise bad("a man stands on its crowning row")
        to_move = 0 if fields[0] == "W" else 1
        history_text, endgame_text = "", ""
        for field in fields[3:]:
            if field.startswith("H") and len(field) > 1 and not history_text:
                history_text = field[1:]
            elif field.startswith("E") and not endgame_text and field[1:].isdigit():
                endgame_text = field[1:]
            else:
                raise bad(f"unknown field {field!r}")
        state = DraughtsState(white, black, kings, to_move, _key(white, black, kings, to_move))
        if history_text:
            state = self._with_history(state, history_text, bad)
        plies = int(endgame_text or 0)
        if plies and (not _endgame_limit(white, black, kings) or plies > KING_RULE_PLIES):
            raise bad(f"endgame count {plies} does not fit this material")
        return state._replace(endgame_plies=plies)

    def _with_history(
        self, state: DraughtsState, history_text: str, bad: Callable[[str], InvalidPositionError]
    ) -> DraughtsState:
        """Rebuild the position before the listed king moves, then replay them."""
        steps = []
        for item in history_text.split(","):
            a, sep, b = item.partition("-")
            if not sep or not a.isdigit() or not b.isdigit():
                raise bad(f"history entry {item!r} is not a king move like 46-41")
            if not (1 <= int(a) <= 50 and 1 <= int(b) <= 50):
                raise bad(f"history entry {item!r} names a square outside 1-50")
            steps.append((BIT_OF_SQUARE[int(a)], BIT_OF_SQUARE[int(b)]))
        if len(steps) > KING_RULE_PLIES:
            raise bad("more king moves than the 25-move rule allows")
        white, black, kings = state.white, state.black, state.kings
        mover = 1 - state.to_move
        for src, dst in reversed(steps):
            side = white if mover == 0 else black
            if not (dst & side & kings) or (src & (white | black)):
                raise bad("the king-move history does not lead to this position")
            if mover == 0:
                white ^= src | dst
            else:
                black ^= src | dst
            kings ^= src | dst
            mover = 1 - mover
        first_mover = 1 - mover  # the side that made the oldest listed move
        replay = DraughtsState(
            white, black, kings, first_mover, _key(white, black, kings, first_mover)
        )
        for src, dst in steps:
            wanted = (
                SQUARE_OF_BIT[src.bit_length() - 1],
                SQUARE_OF_BIT[dst.bit_length() - 1],
            )
            move = DraughtsMove(*wanted)
            if not src & replay.kings or move not in self._all_moves(replay):
                raise bad(f"history move {wanted[0]}-{wanted[1]} is not a legal king move")
            replay = self.apply(replay, move)
        return replay

    def format_position(self, state: DraughtsState) -> str:
        def pieces(mask: int) -> str:
            return ",".join(
                ("K" if BIT_OF_SQUARE[s] & state.kings else "") + str(s) for s in _squares(mask)
            )

        text = f"{'WB'[state.to_move]}:W{pieces(state.white)}:B{pieces(state.black)}"
        if state.king_moves:
            text += ":H" + ",".join(
                f"{SQUARE_OF_BIT[m >> 6]}-{SQUARE_OF_BIT[m & 63]}" for m in state.king_moves
            )
        if state.endgame_plies:
            text += f":E{state.endgame_plies}"
        return text

    # -- moves -------------------------------------------------------------------------
    def to_move(self, state: DraughtsState) -> Player:
        return state.to_move

    def _all_moves(self, state: DraughtsState) -> list[DraughtsMove]:
        """Legal moves by the movement rules alone (draw rules not applied)."""
        own, opp = (state.white, state.black) if state.to_move == 0 else (state.black, state.white)
        captures = _captures(own, opp, state.kings, True)
        if captures:
            moves = [_to_move_obj(raw, paths) for raw, paths in captures.items()]
        else:
            empty = BOARD & ~(own | opp)
            moves = [
                _to_move_obj(raw, [])
                for raw in _quiet_moves(own, state.kings, empty, state.to_move == 0)
            ]
        moves.sort()
        return moves

    def legal_moves(self, state: DraughtsState) -> list[DraughtsMove]:
        if self._draw(state) is not None:
            return []
        return self._all_moves(state)

    def apply(self, state: DraughtsState, move: DraughtsMove) -> DraughtsState:
        src, dst = BIT_OF_SQUARE[move.src], BIT_OF_SQUARE[move.dst]
        src_i, dst_i = square_bit_index(move.src), square_bit_index(move.dst)
        white_moves = state.to_move == 0
        own, opp = (state.white, state.black) if white_moves else (state.black, state.white)
        kings = state.kings
        key = state.key ^ _SIDE_KEY
        own_man, own_king = (0, 1) if white_moves else (2, 3)
        opp_man, opp_king = (2, 3) if white_moves else (0, 1)
        captured = 0
        for square in move.captured:
            bit = BIT_OF_SQUARE[square]
            captured |= bit
            index = square_bit_index(square)
            key ^= _PIECE_KEYS[opp_king if bit & kings else opp_man][index]
        was_king = bool(src & kings)
        crowned = not was_king and bool(dst & (WHITE_CROWN_ROW if white_moves else BLACK_CROWN_ROW))
        key ^= _PIECE_KEYS[own_king if was_king else own_man][src_i]
        key ^= _PIECE_KEYS[own_king if was_king or crowned else own_man][dst_i]
        own = own ^ src ^ dst
        opp &= ~captured
        kings &= ~captured
        if was_king:
            kings ^= src ^ dst
        elif crowned:
            kings |= dst
        white, black = (own, opp) if white_moves else (opp, own)
        # Only a non-capture king move is reversible; anything else clears the history.
        reversible = was_king and not captured
        king_moves = state.king_moves + (src_i << 6 | dst_i,) if reversible else ()
        limit = _endgame_limit(white, black, kings)
        if limit and limit == _endgame_limit(state.white, state.black, state.kings):
            endgame = state.endgame_plies + 1
        else:
            endgame = 0  # a class just arose, or none applies
        return DraughtsState(white, black, kings, 1 - state.to_move, key, king_moves, endgame)

    def _draw(self, state: DraughtsState) -> Outcome | None:
        plies = len(state.king_moves)
        if plies >= 4 and self._repetitions(state) >= 3:
            return Outcome(None, "threefold repetition", "repetition")
        if plies >= KING_RULE_PLIES:
            return Outcome(None, "25-move king rule", "rule")
        if state.endgame_plies:
            limit = _endgame_limit(state.white, state.black, state.kings)
            if state.endgame_plies >= limit:
                moves = 16 if limit == ENDGAME_16_PLIES else 5
                return Outcome(None, f"{moves}-move endgame rule", "rule")
        return None

    @staticmethod
    def _repetitions(state: DraughtsState) -> int:
        """How often the current position occurred since the last irreversible move.

        Walks back through the king moves, undoing each in the key only.
        """
        key = state.key
        count = 1
        mover = 1 - state.to_move
        for packed in reversed(state.king_moves):
            keys = _PIECE_KEYS[1 if mover == 0 else 3]
            key ^= keys[packed >> 6] ^ keys[packed & 63] ^ _SIDE_KEY
            mover = 1 - mover
            if key == state.key:
                count += 1
        return count

    def outcome(self, state: DraughtsState) -> Outcome | None:
        own, opp = (state.white, state.black) if state.to_move == 0 else (state.black, state.white)
        if not raw_moves(own, opp, state.kings, state.to_move == 0):
            return Outcome(1 - state.to_move, "no moves", "no-moves")
        return self._draw(state)

    # -- notation ----------------------------------------------------------------------
    def parse_move(self, state: DraughtsState, text: str) -> DraughtsMove:
        t = text.strip().lower()
        capture = "x" in t
        parts = t.split("x") if capture else t.split("-")
        if (
            len(parts) < 2
            or not all(p.isdigit() and 1 <= int(p) <= 50 for p in parts)
            or (not capture and len(parts) != 2)
        ):
            raise InvalidMoveError(
                f"bad draughts move {text!r}: expected 32-28, 28x19 or a full path 28x19x10"
            )
        squares = [int(p) for p in parts]
        legal = self.legal_moves(state)
        where = f"in {self.format_position(state)}"
        if not capture:
            for move in legal:
                if not move.captured and (move.src, move.dst) == (squares[0], squares[1]):
                    return move
            hint = " (a capture is compulsory)" if legal and legal[0].captured else ""
            raise IllegalMoveError(f"illegal draughts move {text!r} {where}{hint}")
        if len(squares) == 2:
            found = [m for m in legal if m.captured and (m.src, m.dst) == tuple(squares)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise IllegalMoveError(
                    f"ambiguous draughts capture {text!r} {where}: give the full path, one of "
                    + ", ".join(self.format_move(state, m) for m in found)
                )
            raise IllegalMoveError(f"illegal draughts capture {text!r} {where}")
        own, opp = (state.white, state.black) if state.to_move == 0 else (state.black, state.white)
        if legal:
            for raw, paths in _captures(own, opp, state.kings, True).items():
                src_square = SQUARE_OF_BIT[raw[0].bit_length() - 1]
                if src_square != squares[0]:
                    continue
                for path in paths:
                    if [SQUARE_OF_BIT[i] for i in path] == squares[1:]:
                        return _to_move_obj(raw, paths)
        raise IllegalMoveError(f"illegal draughts capture path {text!r} {where}")

    def format_move(self, state: DraughtsState, move: DraughtsMove) -> str:
        if not move.captured:
            return f"{move.src}-{move.dst}"
        twins = [
            m
            for m in self._all_moves(state)
            if (m.src, m.dst) == (move.src, move.dst) and m.captured != move.captured
        ]
        if twins:
            return "x".join(map(str, (move.src, *move.path)))
        return f"{move.src}x{move.dst}"

    # -- hashing and views -------------------------------------------------------------
    def hash_key(self, state: DraughtsState) -> int:
        return state.key

    def hash_from_scratch(self, state: DraughtsState) -> int:
        return _key(state.white, state.black, state.kings, state.to_move)

    def view(self, state: DraughtsState) -> dict[str, Any]:
        rows: list[list[str]] = [[""] * 10 for _ in range(10)]
        for square in range(1, 51):
            bit = BIT_OF_SQUARE[square]
            row, col = _row_col(square)
            if state.white & bit:
                rows[row][col] = "W" if state.kings & bit else "w"
            elif state.black & bit:
                rows[row][col] = "B" if state.kings & bit else "b"
        return {"kind": "draughts", "rows": rows}

    # -- search hooks --------------------------------------------------------------------
    def move_facts(self, state: DraughtsState, move: DraughtsMove) -> MoveFacts:
        kings = state.kings
        value = sum(KING_VALUE if BIT_OF_SQUARE[s] & kings else MAN_VALUE for s in move.captured)
        src_is_king = bool(BIT_OF_SQUARE[move.src] & kings)
        crown = WHITE_CROWN_ROW if state.to_move == 0 else BLACK_CROWN_ROW
        promotes = not src_is_king and bool(BIT_OF_SQUARE[move.dst] & crown)
        return MoveFacts(
            capture=value,
            attacker=KING_VALUE if src_is_king else MAN_VALUE,
            promotion=1 if promotes else 0,
        )

    def noisy_moves(self, state: DraughtsState) -> list[DraughtsMove]:
        moves = self.legal_moves(state)
        return moves if moves and moves[0].captured else []

    def perft(self, state: DraughtsState, depth: int) -> int:
        if depth <= 0:
            return 1
        if self._draws_out_of_reach(state, depth):
            white_moves = state.to_move == 0
            own, opp = (state.white, state.black) if white_moves else (state.black, state.white)
            return _perft_raw(own, opp, state.kings, white_moves, depth)
        moves = self.legal_moves(state)
        if depth == 1:
            return len(moves)
        return sum(self.perft(self.apply(state, m), depth - 1) for m in moves)

    @staticmethod
    def _draws_out_of_reach(state: DraughtsState, depth: int) -> bool:
        """Whether no draw rule can end the game at a node above the last ply.

        Then the raw counter, which ignores draws, is exact. Nodes at plies 0 to
        depth - 1 must stay undrawn. A repetition needs four reversible plies per
        return, so without history the earliest third occurrence is at ply 8 (and
        later still without kings: both sides must crown first). The 25-move rule needs
        50 plies of history. An endgame class that arises below the root needs 10 plies;
        the root's own class must not run out before the last ply.
        """
        if state.king_moves:
            return False
        if not state.kings:
            return depth <= 10
        limit = _endgame_limit(state.white, state.black, state.kings)
        if limit and state.endgame_plies + depth - 1 >= limit:
            return False
        return depth <= 8


GAME = Draughts()
