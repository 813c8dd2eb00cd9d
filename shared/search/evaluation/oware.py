"""Oware (Abapa): captured seeds first, then seeds kept on one's side and mobility.

The store difference is what wins; seeds on one's own side count a little (they are the
material for future sowing, and they go to their owner when the game is counted out), and
so do playable pits (a player short of moves is close to being starved or forced to feed).
A store of 25 or more is a won game whatever the search depth.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.search.evaluation.base import Evaluation
from kibitz.shared.search.scores import win_score

SEED = 100
ON_SIDE = 8  # per seed on one's own side
PLAYABLE = 12  # per non-empty own pit
_WIN = 25


class OwareEvaluation(Evaluation):
    unit = SEED
    repetitions = True
    checks_outcome_at_leaf = False
    capture_scale = SEED  # MoveFacts.capture counts seeds

    def evaluate(self, state: Any) -> int:
        me = state.to_move
        stores = state.stores
        mine, theirs = stores[me], stores[1 - me]
        if mine >= _WIN:
            return win_score(0)
        if theirs >= _WIN:
            return -win_score(0)
        pits = state.pits
        own = pits[0:6] if me == 0 else pits[6:12]
        opp = pits[6:12] if me == 0 else pits[0:6]
        score: int = SEED * (mine - theirs)
        score += ON_SIDE * (sum(own) - sum(opp))
        score += PLAYABLE * (sum(1 for p in own if p) - sum(1 for p in opp if p))
        return score


EVALUATION = OwareEvaluation
