"""Oware (Abapa) endgame tables by retrograde analysis.

**What is stored.** For every board with at most ``max_seeds`` seeds on it (any split
between the twelve pits), seen from the side to move, the number of those seeds the mover
can secure by the end of the game (captures plus the seeds counted out to them) under
perfect play: a lower bound ``lo`` and an upper bound ``hi``, equal where the value is
exact, plus how many retrograde rounds each bound took (``lo_rank``, ``hi_rank``: a
distance that strictly decreases along the winner's line, so following it makes progress
and never cycles).

**Why the stores do not matter.** The seeds are zero-sum (the mover gets ``v`` of the ``n``
on the board, the opponent ``n - v``), and the game's result is a monotone function of the
mover's final total ``store + v`` (a win above 24, a draw at 24). Stopping the game once a
store reaches 25 does not change the result either (stores only grow, so whoever reaches
25 wins however play would go on). So one table serves every pair of stores: the mover
wins when ``store + lo >= 25``, loses when ``store + hi <= 23``, draws when both bounds
give 24.

**The rules** are those of ``shared/games/oware.py`` (it supplies ``sow``, the capture and
the feeding rule): captures of 2s and 3s backwards from the last seed, no capture on a
grand slam, the obligation to feed an opponent without seeds, and when no move can feed
(or the mover has no seed) the game ends with each player taking the seeds on their own
side, so the terminal value is the seeds on the mover's side.

**Cycles.** Sowing without capture keeps the seed count, so positions of one level form a
graph with cycles (the game ends them by threefold repetition, each player then taking the
seeds on their side: a result that depends on the path). The table is the fixpoint of
synchronous rounds started from the widest bounds (``lo = 0``, ``hi = n``):
``lo(p) = max over moves of n - hi(child)`` and ``hi(p) = max over moves of n - lo(child)``
(captures go to smaller, already solved levels). ``lo`` is then what the mover can force
*in a finite number of moves whatever the opponent does*, and ``hi`` what the opponent
cannot stop the mover from reaching in finite time; a forced line never repeats a
position, so the game's repetition rule cannot interfere with it. Where the two bounds
differ, the outcome depends on how the cycles end, and the table keeps the bounds: they
still decide the result whenever both give the same win, draw or loss. The searcher uses
a position only then (exact or decided by the bounds), and searches on otherwise.

A line that returns to a position played *before* the table position (two earlier visits)
would end by repetition; the table does not know the game's history, so this rare case is
not accounted for.

File: ``<data dir>/tables/oware-endgame.bin`` (the data directory of ``kibitz serve``:
``$KIBITZ_DATA_DIR``, else ``$XDG_DATA_HOME/kibitz`` or ``~/.local/share/kibitz``).
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kibitz.shared.games.oware import SEEDS, WIN, _capture, _raw_moves, sow
from kibitz.shared.search.scores import MAX_PLY, win_score

MAGIC = b"KIBITZ-OWARE-ENDGAME\n"
VERSION = 1
#: Largest table the command builds (time and memory about double per seed; 12 seeds took
#: 44 s and 0.7 GB here).
MAX_SEEDS = 12
#: Rank values are stored in 16 bits.
_RANK_CAP = 0xFFFF
PITS = 12


def default_data_dir() -> Path:
    """The data directory of ``kibitz serve`` (same rule as its ``--data-dir`` default)."""
    if os.environ.get("KIBITZ_DATA_DIR"):
        return Path(os.environ["KIBITZ_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kibitz"


def table_path(data_dir: Path | None = None) -> Path:
    return (data_dir or default_data_dir()) / "tables" / "oware-endgame.bin"


# -- indexing: a board of n seeds <-> its rank among the boards of n seeds -------------------


def _compositions_count(total: int, parts: int) -> int:
    """Ways to put ``total`` seeds into ``parts`` pits."""
    from math import comb

    return comb(total + parts - 1, parts - 1)


def _prefix_table(max_seeds: int) -> list[list[list[int]]]:
    """``[pit][remaining][a]``: boards that put fewer than ``a`` seeds in ``pit`` (the pits
    before it fixed, ``remaining`` seeds for it and the pits after)."""
    table = []
    for pit in range(PITS - 1):
        after = PITS - 1 - pit
        rows = []
        for remaining in range(max_seeds + 1):
            row = [0]
            for value in range(remaining):
                row.append(row[-1] + _compositions_count(remaining - value, after))
            rows.append(row)
        table.append(rows)
    return table


def compositions(total: int, parts: int = PITS) -> Iterator[tuple[int, ...]]:
    """Every board of ``total`` seeds in ``parts`` pits, in rank (lexicographic) order."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in compositions(total - first, parts - 1):
            yield (first, *rest)


def normalized(pits: tuple[int, ...], mover: int) -> tuple[int, ...]:
    """The board from the mover's side: their pits first."""
    return pits if mover == 0 else pits[6:] + pits[:6]


def _outcome(store: int, lo: int, hi: int) -> int | None:
    """+1 win, 0 draw, -1 loss for a mover with ``store`` and bounds on the seeds to come;
    None when the bounds do not decide."""
    half = SEEDS // 2
    if store + lo > half:
        return 1
    if store + hi < half:
        return -1
    if store + lo == half == store + hi:
        return 0
    return None


@dataclass(slots=True)
class TableMove:
    move: int
    #: Seeds the mover secures with this move (bounds) and the distance of the child.
    lo: int
    hi: int
    rank: int


class OwareTable:
    """Bounds on the seeds the mover secures, for every board of at most ``max_seeds``."""

    def __init__(
        self,
        max_seeds: int,
        lo: array[int],
        hi: array[int],
        lo_rank: array[int],
        hi_rank: array[int],
    ) -> None:
        self.max_seeds = max_seeds
        self.lo, self.hi, self.lo_rank, self.hi_rank = lo, hi, lo_rank, hi_rank
        self.offsets = [0]
        for n in range(max_seeds + 1):
            self.offsets.append(self.offsets[-1] + _compositions_count(n, PITS))
        self._prefix = _prefix_table(max_seeds)
        if len(lo) != self.offsets[-1]:
            raise ValueError(f"oware table: {len(lo)} entries, expected {self.offsets[-1]}")

    @property
    def positions(self) -> int:
        return self.offsets[-1]

    def index(self, board: tuple[int, ...] | list[int], seeds: int) -> int:
        """Index of a normalized board holding ``seeds`` seeds."""
        rank = self.offsets[seeds]
        remaining = seeds
        prefix = self._prefix
        for pit in range(PITS - 1):
            value = board[pit]
            rank += prefix[pit][remaining][value]
            remaining -= value
        return rank

    def bounds(self, board: tuple[int, ...] | list[int], seeds: int) -> tuple[int, int]:
        i = self.index(board, seeds)
        return self.lo[i], self.hi[i]

    def covers(self, state: Any) -> bool:
        seeds: int = SEEDS - state.stores[0] - state.stores[1]
        return seeds <= self.max_seeds

    def probe(self, state: Any, ply: int) -> int | None:
        """A searcher score for an unfinished Oware state the table decides, else None.

        Wins and losses carry the table's distance (``WIN - ply - rank``) so the searcher
        prefers the line that makes progress; the caller checks that the game is not over.
        """
        stores = state.stores
        seeds = SEEDS - stores[0] - stores[1]
        if seeds > self.max_seeds:
            return None
        mover = state.to_move
        i = self.index(normalized(state.pits, mover), seeds)
        lo, hi = self.lo[i], self.hi[i]
        result = _outcome(stores[mover], lo, hi)
        if result is None:
            return None
        if result > 0:
            return win_score(min(ply + self.lo_rank[i], MAX_PLY - 1))
        if result < 0:
            return -win_score(min(ply + self.hi_rank[i], MAX_PLY - 1))
        return 0

    def moves(self, state: Any) -> list[TableMove]:
        """Every legal move of a covered state with the seeds it secures (bounds)."""
        mover = state.to_move
        stores = state.stores
        seeds = SEEDS - stores[0] - stores[1]
        board = normalized(state.pits, mover)
        result = []
        for move in _raw_moves(board, 0):
            after, last = sow(board, move)
            captured = _capture(after, last, 0)
            child = tuple(after[6:] + after[:6])
            rest = seeds - captured
            j = self.index(child, rest)
            # Captures leave the level: progress by themselves (rank 0).
            rank = 0 if captured else self.hi_rank[j] + 1
            result.append(TableMove(move + 6 * mover, seeds - self.hi[j], seeds - self.lo[j], rank))
        return result

    def best(self, state: Any) -> tuple[int, int | None, list[tuple[int, int | None]]] | None:
        """(move, outcome, [(move, outcome)...]) for a covered state with a move: the move
        securing the most seeds (lower bound), then the one closest to securing them (its
        rank), then the highest upper bound; outcomes are +1/0/-1 for the mover, None where
        the bounds do not decide. None when the state is not covered or has no move."""
        seeds = SEEDS - state.stores[0] - state.stores[1]
        if seeds > self.max_seeds:
            return None
        mover = state.to_move
        store = state.stores[mover]
        i = self.index(normalized(state.pits, mover), seeds)
        result = _outcome(store, self.lo[i], self.hi[i])
        moves = self.moves(state)
        if not moves:
            return None
        top = max(m.lo for m in moves)
        choice = min((m for m in moves if m.lo == top), key=lambda m: (m.rank, -m.hi, m.move))
        scored = [(m.move, result if m is choice else _outcome(store, m.lo, m.hi)) for m in moves]
        return choice.move, result, scored

    def rank_of(self, state: Any) -> tuple[int, int]:
        mover = state.to_move
        seeds = SEEDS - state.stores[0] - state.stores[1]
        i = self.index(normalized(state.pits, mover), seeds)
        return self.lo_rank[i], self.hi_rank[i]

    # -- persistence ---------------------------------------------------------------------
    def save(self, path: Path) -> int:
        """Write the table (atomically); returns the file size in bytes."""
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {
            "format": "kibitz oware endgame table",
            "version": VERSION,
            "rules": "abapa",
            "max_seeds": self.max_seeds,
            "positions": self.positions,
        }
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("wb") as out:
            out.write(MAGIC)
            out.write(json.dumps(header).encode() + b"\n")
            for values in (self.lo, self.hi, self.lo_rank, self.hi_rank):
                out.write(_little_endian(values).tobytes())
        tmp.replace(path)
        return path.stat().st_size

    @classmethod
    def load(cls, path: Path) -> OwareTable:
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            raise ValueError(f"{path}: not a kibitz Oware endgame table")
        end = data.index(b"\n", len(MAGIC))
        header = json.loads(data[len(MAGIC) : end])
        if header.get("version") != VERSION or header.get("rules") != "abapa":
            raise ValueError(f"{path}: unsupported table version or rules {header}")
        size = int(header["positions"])
        at = end + 1
        parts: list[array[int]] = []
        for code, width in (("B", 1), ("B", 1), ("H", 2), ("H", 2)):
            values = array(code)
            values.frombytes(data[at : at + size * width])
            parts.append(_little_endian(values))
            at += size * width
        if at != len(data):
            raise ValueError(f"{path}: truncated or oversized table")
        return cls(int(header["max_seeds"]), *parts)

    def stats(self) -> dict[str, int]:
        exact = sum(1 for a, b in zip(self.lo, self.hi, strict=True) if a == b)
        return {
            "max_seeds": self.max_seeds,
            "positions": self.positions,
            "exact": exact,
            "bounded": self.positions - exact,
            "max_rank": max(max(self.lo_rank), max(self.hi_rank)) if self.positions else 0,
        }


def _little_endian(values: array[int]) -> array[int]:
    import sys

    if sys.byteorder == "little" or values.itemsize == 1:
        return values
    swapped = array(values.typecode, values)
    swapped.byteswap()
    return swapped


# -- building ------------------------------------------------------------------------------


def build(max_seeds: int, progress: Callable[[int, int, int], None] | None = None) -> OwareTable:
    """Retrograde analysis of every board with at most ``max_seeds`` seeds.

    Levels are solved from 0 seeds up (a capture always leads to a smaller level); inside
    a level, synchronous rounds update the positions whose children changed until nothing
    changes (bounded: each bound moves at most ``n`` times). ``progress(n, positions,
    rounds)`` is called after each level.
    """
    if not 0 <= max_seeds <= MAX_SEEDS:
        raise ValueError(f"max_seeds must be 0-{MAX_SEEDS}, not {max_seeds}")
    total = sum(_compositions_count(n, PITS) for n in range(max_seeds + 1))
    lo = array("B", bytes(total))
    hi = array("B", bytes(total))
    lo_rank = array("H", [0]) * total
    hi_rank = array("H", [0]) * total
    table = OwareTable(max_seeds, lo, hi, lo_rank, hi_rank)
    for n in range(max_seeds + 1):
        rounds = _solve_level(table, n)
        if progress is not None:
            progress(n, _compositions_count(n, PITS), rounds)
    return table


def _solve_level(table: OwareTable, n: int) -> int:
    """Fill level ``n`` of ``table`` (the smaller levels are done); the number of rounds."""
    base = table.offsets[n]
    boards = list(compositions(n))
    where = {board: i for i, board in enumerate(boards)}
    count = len(boards)
    lo, hi, lo_rank, hi_rank = table.lo, table.hi, table.lo_rank, table.hi_rank
    const_lo = [-1] * count  # best over captures (and the terminal value), -1: none
    const_hi = [-1] * count
    kids: list[tuple[int, ...]] = [()] * count
    preds: list[list[int]] = [[] for _ in range(count)]
    pending: list[int] = []
    for i, board in enumerate(boards):
        moves = _raw_moves(board, 0)
        if not moves:
            value = sum(board[:6])  # counted out: each side keeps its seeds
            lo[base + i] = hi[base + i] = value
            continue
        same = []
        for move in moves:
            after, last = sow(board, move)
            captured = _capture(after, last, 0)
            child = tuple(after[6:] + after[:6])
            if captured:
                j = table.index(child, n - captured)
                const_lo[i] = max(const_lo[i], n - hi[j])
                const_hi[i] = max(const_hi[i], n - lo[j])
            else:
                j = where[child]
                same.append(j)
                preds[j].append(i)
        kids[i] = tuple(same)
        lo[base + i] = 0
        hi[base + i] = n
        pending.append(i)
    del boards, where
    rounds = 0
    # Every round moves at least one bound, and each bound moves at most n times.
    limit = 2 * n * count + 2
    dirty: set[int] | list[int] = pending
    while dirty and rounds < limit:
        rounds += 1
        changes = []
        for i in dirty:
            new_lo = const_lo[i]
            new_hi = const_hi[i]
            for j in kids[i]:
                value = n - hi[base + j]
                if value > new_lo:
                    new_lo = value
                value = n - lo[base + j]
                if value > new_hi:
                    new_hi = value
            if new_lo != lo[base + i] or new_hi != hi[base + i]:
                changes.append((i, new_lo, new_hi))
        marked: set[int] = set()
        stamp = min(rounds, _RANK_CAP)
        for i, new_lo, new_hi in changes:
            if new_lo != lo[base + i]:
                lo[base + i] = new_lo
                lo_rank[base + i] = stamp
            if new_hi != hi[base + i]:
                hi[base + i] = new_hi
                hi_rank[base + i] = stamp
            marked.update(preds[i])
        dirty = marked
    if dirty:
        raise RuntimeError(f"oware table level {n} did not converge in {limit} rounds")
    return rounds


# -- the table of the data directory, loaded once per process -------------------------------

_LOADED: dict[Path, tuple[float, OwareTable | None]] = {}


def loaded_table(data_dir: Path | None = None) -> OwareTable | None:
    """The table in the data directory, or None when there is none (or it is unreadable).

    Read once per process and file version (the modification time is checked on each call,
    a cheap ``stat``), so a table built while a worker runs is picked up by its next move.
    """
    try:
        path = table_path(data_dir)
        mtime = path.stat().st_mtime
    except (OSError, RuntimeError, KeyError):
        return None  # no table, or no home directory to look in
    cached = _LOADED.get(path)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    try:
        table: OwareTable | None = OwareTable.load(path)
    except (OSError, ValueError, KeyError):
        table = None
    _LOADED[path] = (mtime, table)
    return table


def expected_outcome(store: int, lo: int, hi: int) -> int | None:
    """Public form of the result rule (tests, tools): +1/0/-1 or None."""
    return _outcome(store, lo, hi)


__all__ = [
    "MAX_SEEDS",
    "SEEDS",
    "OwareTable",
    "TableMove",
    "build",
    "compositions",
    "default_data_dir",
    "expected_outcome",
    "loaded_table",
    "normalized",
    "table_path",
    "WIN",
]
