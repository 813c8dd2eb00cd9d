"""Matches: the searcher solves positions exactly; the heuristic only helps shallow levels.

In the standard game the side to move loses exactly when heap mod 4 == 1 (mod-4 theory),
which the evaluation states as a one-unit, non-final score (small, so the softmax of low
levels still errs); the double variant has no such
closed form here, so its unfinished positions score 0 and only the search decides.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.search.evaluation.base import Evaluation


class MatchesEvaluation(Evaluation):
    unit = 10

    def evaluate(self, state: Any) -> int:
        if state.variant != "standard":
            return 0
        return -self.unit if state.heap % 4 == 1 else self.unit


EVALUATION = MatchesEvaluation
