"""Score scale shared by the searcher and the evaluations.

Scores are integers from the side to move's point of view. A decided game scores
``WIN + margin * MARGIN_UNIT - ply`` for the winner (negated for the loser): the ``-ply``
term prefers the shortest win and the longest loss, and ``margin`` (Othello's disc
difference, 0 elsewhere) makes the endgame solver maximise the final count.
"""

from __future__ import annotations

MAX_PLY = 1000
MARGIN_UNIT = MAX_PLY
WIN = 1_000_000_000
#: Every score at or beyond this magnitude is a proven win or loss.
DECISIVE = WIN - MAX_PLY
INF = 2 * WIN


def win_score(ply: int, margin: int = 0) -> int:
    """Score of a won final position reached ``ply`` plies from the root."""
    return WIN + margin * MARGIN_UNIT - ply


def is_decisive(score: float) -> bool:
    return abs(score) >= DECISIVE


def plies_to_end(score: int) -> int:
    """For a decisive score, the number of plies from the root to the end of the game."""
    return (MARGIN_UNIT - (abs(score) - WIN) % MARGIN_UNIT) % MARGIN_UNIT
