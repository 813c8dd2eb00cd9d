"""Tic-tac-toe: solved exactly at level 8; the heuristic only guides shallow low levels.

Open lines: a line holding only my marks counts for me (more with two marks), one holding
only the opponent's counts against me.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.games.tictactoe import LINES
from kibitz.shared.search.evaluation.base import Evaluation

_WEIGHT = (0, 1, 10, 0)


class TicTacToeEvaluation(Evaluation):
    unit = 10

    def evaluate(self, state: Any) -> int:
        cells = state.cells
        me = state.to_move + 1
        score = 0
        for a, b, c in LINES:
            line = (cells[a], cells[b], cells[c])
            mine = line.count(me)
            theirs = 3 - mine - line.count(0)
            if theirs == 0:
                score += _WEIGHT[mine]
            elif mine == 0:
                score -= _WEIGHT[theirs]
        return score


EVALUATION = TicTacToeEvaluation
