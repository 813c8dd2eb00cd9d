"""Transposition table: a fixed-size array of entries indexed by the low bits of the key.

Memory is bounded by construction (one slot per index, no dict growth). Replacement is
depth-preferred: a slot keeps its entry unless the new one is for the same position or was
searched at least as deep, so expensive results survive cheap ones. A fresh table is made
per search, which keeps ``choose_move`` deterministic.
"""

from __future__ import annotations

from typing import Any

#: Bound types of a stored score.
EXACT, LOWER, UPPER = 0, 1, 2

#: Stored "depth" of a result that no depth limit or repetition influenced: usable at any
#: depth. The searcher tracks this itself (see the ``Searcher`` docstring).
SOLVED_DEPTH = 10_000
#: Stored "depth" of a result that no depth limit influenced but a repetition draw did
#: (every line ends or cycles): usable at any depth, still marked as path-dependent.
CYCLIC_DEPTH = SOLVED_DEPTH - 1

#: An entry: (key, depth, bound, score, best move).
Entry = tuple[int, int, int, int, Any]


class TranspositionTable:
    """Fixed-size, depth-preferred transposition table keyed by ``game.hash_key``."""

    __slots__ = ("slots", "mask", "probes", "hits", "stores")

    def __init__(self, size_log2: int = 18) -> None:
        self.slots: list[Entry | None] = [None] * (1 << size_log2)
        self.mask = (1 << size_log2) - 1
        self.probes = 0
        self.hits = 0
        self.stores = 0

    def probe(self, key: int) -> Entry | None:
        self.probes += 1
        entry = self.slots[key & self.mask]
        if entry is not None and entry[0] == key:
            self.hits += 1
            return entry
        return None

    def store(self, key: int, depth: int, bound: int, score: int, move: Any) -> None:
        index = key & self.mask
        old = self.slots[index]
        if old is None or old[0] == key or depth >= old[1]:
            self.slots[index] = (key, depth, bound, score, move)
            self.stores += 1

    def hit_rate(self) -> float:
        return self.hits / self.probes if self.probes else 0.0

    def used(self) -> int:
        """Number of occupied slots (for tests and statistics; O(size))."""
        return sum(1 for slot in self.slots if slot is not None)
