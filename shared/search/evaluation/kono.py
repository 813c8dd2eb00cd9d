"""Kono: solved exactly at level 8 (a repetition on the search path is a draw); mobility
guides the shallow levels.

A player who cannot move loses, so the number of own pieces next to the empty point (the
moves available) against the opponent's is the natural heuristic.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.games.kono import NEIGHBOURS
from kibitz.shared.search.evaluation.base import Evaluation


class KonoEvaluation(Evaluation):
    unit = 10
    repetitions = True

    def evaluate(self, state: Any) -> int:
        cells = state.cells
        mine = state.to_move + 1
        empty = cells.index(0)
        score = 0
        for point in NEIGHBOURS[empty]:
            score += 5 if cells[point] == mine else -5
        return score


EVALUATION = KonoEvaluation
