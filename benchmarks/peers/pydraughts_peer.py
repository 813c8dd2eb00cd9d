"""pydraughts as an independent oracle and speed peer for international draughts.

pydraughts (PyPI ``pydraughts``, variant ``"standard"``) is imported lazily because it
is an optional test dependency. Two of its habits are handled here:

- its FEN reader takes the first piece list as White whatever its letter, so FENs are
  rewritten with the White list first;
- its move list keeps a capture once per route, so captures with the same start, end
  and captured set are merged, as the rules (and our perft) count them.

Run ``python -m kibitz.benchmarks.peers.pydraughts_peer [depth]`` to time both move
generators on the start position in the same process.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

#: One legal move as both libraries can describe it: (from, to, captured squares).
MoveKey = tuple[int, int, frozenset[int]]


def white_list_first(fen: str) -> str:
    """The same PDN FEN with the White piece list written before the Black one."""
    fields = fen.strip().split(":")
    side, lists, rest = fields[0], fields[1:3], fields[3:]
    lists.sort(key=lambda part: part[:1] != "W")
    # pydraughts knows nothing of our draw-history suffix fields (:H, :E).
    del rest
    return ":".join([side, *lists])


def _game(fen: str) -> Any:
    from draughts.core.game import Game  # optional dependency, imported on use

    return Game(variant="standard", fen=white_list_first(fen))


def _merged_moves(game: Any) -> dict[MoveKey, list[list[int]]]:
    moves, captures = game.legal_moves()
    merged: dict[MoveKey, list[list[int]]] = {}
    for steps, taken in zip(moves, captures, strict=True):
        key = (steps[0][0], steps[-1][1], frozenset(t for t in taken if t is not None))
        merged.setdefault(key, steps)
    return merged


def legal_move_sets(fen: str) -> set[MoveKey]:
    """The legal moves of ``fen`` as a set of (from, to, captured squares)."""
    return set(_merged_moves(_game(fen)))


def _perft(game: Any, depth: int) -> int:
    merged = _merged_moves(game)
    if depth == 1:
        return len(merged)
    total = 0
    for steps in merged.values():
        game.push(steps)
        total += _perft(game, depth - 1)
        game.pop()
    return total


def perft(fen: str, depth: int) -> int:
    """Move sequences of length ``depth`` from ``fen`` by pydraughts' move generator,
    duplicate captures merged and the last ply counted in bulk (like ours)."""
    if depth == 0:
        return 1
    return _perft(_game(fen), depth)


#: A middle-game position with kings on both sides, for captures and flying moves.
KINGS_FEN = "W:WK46,31,K35,28:BK5,12,19,K24"


def main(argv: list[str]) -> None:
    """Time both perfts in this process: start position at ``depth`` (default 4), the
    kings position one ply shallower; three runs each, min and median."""
    from kibitz.shared.games.draughts import GAME

    depth = int(argv[0]) if argv else 4
    for name, fen, plies in (("start", None, depth), ("kings", KINGS_FEN, depth - 1)):
        state = GAME.parse_position(fen) if fen else GAME.initial()
        text = GAME.format_position(state)
        runs: list[tuple[str, Callable[[], int]]] = [
            ("kibitz", partial(GAME.perft, state, plies)),
            ("pydraughts", partial(perft, text, plies)),
        ]
        for label, run in runs:
            times = []
            for _ in range(3):
                began = time.perf_counter()
                leaves = run()
                times.append(time.perf_counter() - began)
            best, median = min(times), sorted(times)[1]
            print(
                f"{name:5s} {label:10s} perft({plies}) = {leaves:,}  min {best:.4f} s"
                f"  median {median:.4f} s  {leaves / best:,.0f} leaves/s"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
