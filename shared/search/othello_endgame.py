"""Exact Othello endgame solver: the final disc difference under perfect play.

A dedicated negamax alpha-beta on bare bitboards (Python ints), much faster than the
general searcher near the end of the game:

- **fastest-first ordering**: moves that leave the opponent the fewest replies first
  (corner replies count double), with the transposition-table move before them;
- **parity ordering**: moves into a quadrant with an odd number of empty squares first
  (whoever plays last in a region usually gains there); below ``_SHALLOW`` empties this is
  the only ordering (mobility costs more than it saves so close to the end);
- **stability cut-off**: discs of the opponent that can never flip (edge-anchored, or on
  filled lines in every direction) cap the mover's result at ``64 - 2 * stable``; when that
  cap is already at most alpha the node fails low without a move;
- **principal variation search** with null windows, and a small transposition table (a
  dict of bounds, emptied when it reaches ``_TABLE_LIMIT`` entries, bounded memory).

The score is the disc difference of the final position from the mover's side, exactly as
the game scores it (``Othello.outcome``: most discs wins; empty squares left when neither
side can move count for nobody). The searcher calls :func:`solve_root` when few squares are
empty (``SOLVE_EMPTIES``), so the AI plays Othello endgames perfectly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kibitz.shared.games.othello import FULL, PASS, OthelloState, flips, move_mask
from kibitz.shared.search.limits import SearchAborted, _HasDeadline, now

#: The searcher solves positions with at most this many empty squares outright
#: (level 8 and any budget whose depth reaches the end).
SOLVE_EMPTIES = 14
#: Below this many empties: parity ordering only, no table, no mobility.
_SHALLOW = 8
#: Transposition-table entries before the table is emptied (bounded memory).
_TABLE_LIMIT = 1 << 17
#: Nodes between two looks at the clock.
_CLOCK_MASK = 1023

_A_FILE = 0x0101010101010101
_H_FILE = 0x8080808080808080
_ROW_1 = 0xFF
_ROW_8 = 0xFF << 56
_BORDER = _A_FILE | _H_FILE | _ROW_1 | _ROW_8
_CORNERS = 1 | 1 << 7 | 1 << 56 | 1 << 63
_QUADRANTS = (0x000000000F0F0F0F, 0x00000000F0F0F0F0, 0x0F0F0F0F00000000, 0xF0F0F0F000000000)
#: Per square, the squares around it.
_NEIGHBOURS = [
    sum(
        1 << (8 * (sq // 8 + dr) + sq % 8 + dc)
        for dr in (-1, 0, 1)
        for dc in (-1, 0, 1)
        if (dr or dc) and 0 <= sq // 8 + dr < 8 and 0 <= sq % 8 + dc < 8
    )
    for sq in range(64)
]
_QUADRANT_OF = [next(i for i, q in enumerate(_QUADRANTS) if q >> sq & 1) for sq in range(64)]
#: The squares of each quadrant, best first (corners, then edges, X-squares last).
_SQUARE_RANK = [
    0 if (1 << sq) & _CORNERS else 3 if sq in (9, 14, 49, 54) else 1 if (1 << sq) & _BORDER else 2
    for sq in range(64)
]
_QUADRANT_SQUARES = [
    sorted((sq for sq in range(64) if q >> sq & 1), key=lambda sq: _SQUARE_RANK[sq])
    for q in _QUADRANTS
]


def _lines(step_row: int, step_col: int) -> list[int]:
    """Every maximal line of the board in one direction, as masks."""
    lines = []
    for start in range(64):
        r, c = divmod(start, 8)
        pr, pc = r - step_row, c - step_col
        if 0 <= pr < 8 and 0 <= pc < 8:
            continue  # not the first square of its line
        mask = 0
        while 0 <= r < 8 and 0 <= c < 8:
            mask |= 1 << (8 * r + c)
            r, c = r + step_row, c + step_col
        lines.append(mask)
    return lines


_ROWS = _lines(0, 1)
_COLUMNS = _lines(1, 0)
_DIAGONALS = [m for m in _lines(1, 1) if m.bit_count() > 1]
_ANTI_DIAGONALS = [m for m in _lines(1, -1) if m.bit_count() > 1]


def _full(lines: list[int], filled: int) -> int:
    result = 0
    for mask in lines:
        if filled & mask == mask:
            result |= mask
    return result


def stable_discs(own: int, opp: int) -> int:
    """A subset of ``own``'s discs that can never be flipped.

    A disc is safe along an axis when that line is completely filled, when it sits on the
    board edge across that axis, or when a neighbour along the axis is itself stable (and
    ours). Stable discs are the fixpoint of "safe along all four axes", grown from nothing.
    """
    filled = own | opp
    safe_h = _full(_ROWS, filled) | _A_FILE | _H_FILE
    safe_v = _full(_COLUMNS, filled) | _ROW_1 | _ROW_8
    safe_d = _full(_DIAGONALS, filled) | _BORDER
    safe_a = _full(_ANTI_DIAGONALS, filled) | _BORDER
    stable = 0
    for _ in range(64):  # grows by at least one disc per round, or stops
        grown = own & (
            (safe_h | (stable << 1 & ~_A_FILE) | (stable >> 1 & ~_H_FILE))
            & (safe_v | (stable << 8 & FULL) | stable >> 8)
            & (safe_d | (stable << 9 & ~_A_FILE & FULL) | (stable >> 9 & ~_H_FILE))
            & (safe_a | (stable << 7 & ~_H_FILE & FULL) | (stable >> 7 & ~_A_FILE))
        )
        if grown == stable:
            break
        stable = grown
    return stable


def _final(own: int, opp: int) -> int:
    return own.bit_count() - opp.bit_count()


def _parity_squares(empties: int) -> tuple[int, ...]:
    """The empty squares, those in quadrants with an odd number of empties first."""
    odd: list[int] = []
    even: list[int] = []
    for i, quadrant in enumerate(_QUADRANTS):
        region = empties & quadrant
        if not region:
            continue
        target = odd if region.bit_count() & 1 else even
        for sq in _QUADRANT_SQUARES[i]:
            if region >> sq & 1:
                target.append(sq)
    return tuple(odd + even)


@dataclass(slots=True)
class SolveResult:
    """A solved position: the best move (a square or ``PASS``) and its exact disc
    difference for the side to move; ``root_scores`` are exact for every move when all
    were asked for, otherwise bounds for all but the best."""

    move: int
    score: int
    nodes: int
    time_ms: int
    root_scores: list[tuple[int, int]] = field(default_factory=list)


class OthelloSolver:
    """One exact solve (fresh table per solver, so results are deterministic)."""

    def __init__(
        self,
        deadline: float = float("inf"),
        node_limit: int = 1 << 62,
        clock: _HasDeadline | None = None,
    ) -> None:
        self.deadline = deadline
        self.node_limit = node_limit
        #: Another deadline to honour, read at every clock poll (the searcher's, which a
        #: CancelToken moves into the past).
        self.clock = clock
        self.nodes = 0
        self.table: dict[tuple[int, int], tuple[int, int, int]] = {}
        #: Empty squares in parity order, by the set of empties (few distinct sets per solve).
        self.parity_cache: dict[int, tuple[int, ...]] = {}

    # -- public ------------------------------------------------------------------------
    def solve(self, own: int, opp: int, alpha: int = -64, beta: int = 64) -> int:
        """The final disc difference for the side owning ``own`` (to move), fail-soft
        within (alpha, beta)."""
        empties = ~(own | opp) & FULL
        return self._search(own, opp, alpha, beta, empties.bit_count())

    def solve_state(self, state: OthelloState, all_scores: bool = False) -> SolveResult:
        """Best move and exact score of a position (raises SearchAborted on a limit)."""
        start = now()
        own, opp = (state.black, state.white) if state.to_move == 0 else (state.white, state.black)
        moves = move_mask(own, opp)
        if not moves:
            if not move_mask(opp, own):
                raise ValueError("the game is over: no move to solve")
            score = -self.solve(opp, own)
            return SolveResult(PASS, score, self.nodes, _ms(start), [(PASS, score)])
        n = (~(own | opp) & FULL).bit_count()
        children = self._ordered(own, opp, moves, -1)
        best_move, best = children[0][0], -65
        alpha, beta = -64, 64
        scores: list[tuple[int, int]] = []
        for i, (sq, child_own, child_opp) in enumerate(children):
            if all_scores:
                score = -self._search(child_own, child_opp, -64, 64, n - 1)
            elif i == 0:
                score = -self._search(child_own, child_opp, -beta, -alpha, n - 1)
            else:
                score = -self._search(child_own, child_opp, -alpha - 1, -alpha, n - 1)
                if alpha < score < beta:
                    score = -self._search(child_own, child_opp, -beta, -score, n - 1)
            scores.append((sq, score))
            if score > best:
                best, best_move = score, sq
                alpha = max(alpha, score)
        return SolveResult(best_move, best, self.nodes, _ms(start), scores)

    # -- the tree ------------------------------------------------------------------------
    def _tick(self) -> None:
        self.nodes += 1
        if self.nodes >= self.node_limit:
            raise SearchAborted
        if not self.nodes & _CLOCK_MASK:
            moment = now()
            if moment > self.deadline or (self.clock is not None and moment > self.clock.deadline):
                raise SearchAborted

    def _ordered(self, own: int, opp: int, moves: int, tt_move: int) -> list[tuple[int, int, int]]:
        """(square, child mover's discs, child opponent's discs), fastest-first with parity
        and the table move first."""
        empties = ~(own | opp) & FULL
        keyed = []
        while moves:
            bit = moves & -moves
            moves ^= bit
            sq = bit.bit_length() - 1
            flipped = flips(own, opp, sq)
            new_own = own | flipped | bit
            new_opp = opp ^ flipped
            replies = move_mask(new_opp, new_own)
            weight = (replies.bit_count() + (replies & _CORNERS).bit_count()) * 4
            if (empties & _QUADRANTS[_QUADRANT_OF[sq]]).bit_count() & 1:
                weight -= 3  # odd region: we likely get the last move there
            if bit & _CORNERS:
                weight -= 2
            if sq == tt_move:
                weight = -1000
            keyed.append((weight, sq, new_opp, new_own))
        keyed.sort()
        return [(sq, child_own, child_opp) for _, sq, child_own, child_opp in keyed]

    def _search(self, own: int, opp: int, alpha: int, beta: int, n: int) -> int:
        if n < _SHALLOW:
            return self._shallow(own, opp, alpha, beta, ~(own | opp) & FULL, False)
        self._tick()
        moves = move_mask(own, opp)
        if not moves:
            if not move_mask(opp, own):
                return _final(own, opp)
            return -self._search(opp, own, -beta, -alpha, n)
        # Stability: the opponent's stable discs cap our result.
        if 64 - 2 * opp.bit_count() <= alpha:  # else even all-stable could not cut
            cap = 64 - 2 * stable_discs(opp, own).bit_count()
            if cap <= alpha:
                return cap
            if cap < beta:
                beta = cap
        key = (own, opp)
        entry = self.table.get(key)
        tt_move = -1
        if entry is not None:
            lower, upper, tt_move = entry
            if lower >= beta:
                return lower
            if upper <= alpha:
                return upper
            if lower > alpha:
                alpha = lower
            if upper < beta:
                beta = upper
        original_alpha = alpha
        best, best_move = -65, -1
        first = True
        for sq, child_own, child_opp in self._ordered(own, opp, moves, tt_move):
            if first:
                score = -self._search(child_own, child_opp, -beta, -alpha, n - 1)
                first = False
            else:
                score = -self._search(child_own, child_opp, -alpha - 1, -alpha, n - 1)
                if alpha < score < beta:
                    score = -self._search(child_own, child_opp, -beta, -score, n - 1)
            if score > best:
                best, best_move = score, sq
                if score > alpha:
                    alpha = score
                    if score >= beta:
                        break
        table = self.table
        if len(table) >= _TABLE_LIMIT:
            table.clear()
        old = entry or (-64, 64, -1)
        if best >= beta:
            table[key] = (best, old[1], best_move)
        elif best <= original_alpha:
            table[key] = (old[0], best, best_move)
        else:
            table[key] = (best, best, best_move)
        return best

    def _shallow(
        self, own: int, opp: int, alpha: int, beta: int, empties: int, passed: bool
    ) -> int:
        """Few empties: parity-ordered squares, flips tried directly (no move generation)."""
        self._tick()
        if not empties:
            return _final(own, opp)
        if not empties & (empties - 1):
            # One empty square left: play it (us, else the opponent), then count.
            sq = empties.bit_length() - 1
            flipped = flips(own, opp, sq)
            if flipped:
                return _final(own | flipped | empties, opp ^ flipped)
            flipped = flips(opp, own, sq)
            if flipped:
                return _final(own ^ flipped, opp | flipped | empties)
            return _final(own, opp)
        best = -65
        moved = False
        squares = self.parity_cache.get(empties)
        if squares is None:
            if len(self.parity_cache) >= _TABLE_LIMIT:
                self.parity_cache.clear()
            squares = self.parity_cache[empties] = _parity_squares(empties)
        for sq in squares:
            if not _NEIGHBOURS[sq] & opp:
                continue  # nothing to bracket next to this square
            flipped = flips(own, opp, sq)
            if not flipped:
                continue
            moved = True
            bit = 1 << sq
            score = -self._shallow(
                opp ^ flipped, own | flipped | bit, -beta, -alpha, empties ^ bit, False
            )
            if score > best:
                best = score
                if score > alpha:
                    alpha = score
                    if score >= beta:
                        return best
        if moved:
            return best
        if passed:
            return _final(own, opp)  # neither side can move (we are the second to pass)
        return -self._shallow(opp, own, -beta, -alpha, empties, True)


def _ms(start: float) -> int:
    return max(0, int((now() - start) * 1000))


def empties(state: OthelloState) -> int:
    return (~(state.black | state.white) & FULL).bit_count()


def solve(state: OthelloState, all_scores: bool = False) -> SolveResult:
    """Solve ``state`` without limits (tests, tools)."""
    return OthelloSolver().solve_state(state, all_scores)
