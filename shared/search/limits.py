"""Search limits (depth, time, nodes) and the clock that enforces them."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from time import perf_counter
from typing import Protocol

from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search.scores import MAX_PLY

#: Deepest iteration the searcher starts when no depth is given.
MAX_DEPTH = 200


class SearchAborted(Exception):
    """Raised inside the tree when a limit is reached; the iteration in progress is lost."""


@dataclass(frozen=True, slots=True)
class SearchLimits:
    """Limits of one search; None means unbounded (time and nodes) or MAX_DEPTH."""

    depth: int | None = None
    time_ms: int | None = None
    nodes: int | None = None

    @classmethod
    def from_budget(cls, budget: Budget) -> SearchLimits:
        return cls(budget.depth, budget.time_ms, budget.nodes)

    def max_depth(self) -> int:
        depth = MAX_DEPTH if self.depth is None else self.depth
        return max(1, min(depth, MAX_PLY // 2))

    def deadline(self, start: float) -> float:
        """perf_counter() value after which the search stops."""
        if self.time_ms is None:
            return float("inf")
        return start + self.time_ms / 1000.0

    def node_limit(self) -> int:
        return 1 << 62 if self.nodes is None else max(1, self.nodes)


def now() -> float:
    return perf_counter()


class _HasDeadline(Protocol):
    deadline: float


class CancelToken:
    """Stops a running search from another thread (a worker whose job became useless).

    :func:`choose_move` attaches its searcher; :meth:`cancel` then moves the searcher's
    deadline into the past, which the searcher notices at its next clock poll (every few
    thousand nodes), exactly as if its time had run out. The search itself stays free of
    threads and I/O: the token is the only shared object, and it only writes a float.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._target: _HasDeadline | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def attach(self, target: _HasDeadline) -> None:
        """Bind the searcher that :meth:`cancel` will stop (a token already cancelled
        stops it at once)."""
        with self._lock:
            self._target = target
            if self._cancelled:
                target.deadline = float("-inf")

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._target is not None:
                self._target.deadline = float("-inf")
