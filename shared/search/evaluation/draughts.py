"""International draughts: material (the seed's man 100, king 1000) plus positional terms.

- tempo: men gain a little for every row they have advanced (development, and a man
  nearer the crown row is closer to becoming a king);
- centre: men on the six central squares control the board;
- back rank: men still on their own back row stop enemy men from crowning, which matters
  while the opponent still has men; the bonus fades as material comes off.

Captures are compulsory, so in quiescence a side that can capture may not stand pat.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.games.draughts import BIT_OF_SQUARE
from kibitz.shared.search.evaluation.base import Evaluation

MAN = 100
KING = 1000
TEMPO = 3  # per row advanced, per man
CENTRE = 12
BACK_RANK = 10

#: Row masks, row 0 = squares 1-5 (Black's back row, White's crown row).
_ROWS = tuple(sum(BIT_OF_SQUARE[r * 5 + 1 : r * 5 + 6]) for r in range(10))
_CENTRE = sum(BIT_OF_SQUARE[s] for s in (22, 23, 24, 27, 28, 29))
_WHITE_BACK = _ROWS[9]
_BLACK_BACK = _ROWS[0]


class DraughtsEvaluation(Evaluation):
    unit = MAN
    repetitions = True
    checks_outcome_at_leaf = False  # the draw rules are checked by legal_moves in the tree

    def forced_noisy(self, state: Any) -> bool:
        return True  # noisy_moves is non-empty only when capturing is compulsory

    def evaluate(self, state: Any) -> int:
        white, black, kings = state.white, state.black, state.kings
        white_men, black_men = white & ~kings, black & ~kings
        wm, bm = white_men.bit_count(), black_men.bit_count()
        score: int = MAN * (wm - bm) + KING * (
            (white & kings).bit_count() - (black & kings).bit_count()
        )
        tempo = 0
        for row in range(10):
            mask = _ROWS[row]
            tempo += (9 - row) * (white_men & mask).bit_count() - row * (
                black_men & mask
            ).bit_count()
        score += TEMPO * tempo
        score += CENTRE * ((white_men & _CENTRE).bit_count() - (black_men & _CENTRE).bit_count())
        # Back-rank guards count while the opponent still has men that could crown.
        if bm > 4:
            score += BACK_RANK * (white_men & _WHITE_BACK).bit_count()
        if wm > 4:
            score -= BACK_RANK * (black_men & _BLACK_BACK).bit_count()
        return score if state.to_move == 0 else -score


EVALUATION = DraughtsEvaluation
