"""What the searcher asks of a game-specific evaluation.

An evaluation scores non-final positions heuristically, from the side to move's point of
view, in integer units where ``unit`` is one "pawn" (aspiration windows and the level
temperature are expressed in it). It also says how a final position scores and whether
null-move pruning is safe.
"""

from __future__ import annotations

from typing import Any

from kibitz.shared.games.base import Game, Outcome
from kibitz.shared.search.scores import win_score


class Evaluation:
    """Default evaluation: every unfinished position is worth 0 (exact solving only)."""

    #: Score of one "pawn": aspiration window and softmax temperature scale.
    unit: int = 100
    #: Whether ``evaluate`` may be handed a finished game (the searcher then checks
    #: ``outcome`` itself at the horizon, which is cheap only for small games).
    checks_outcome_at_leaf: bool = True
    #: Whether the same position can recur (so the searcher tracks repetitions on its path).
    repetitions: bool = False
    #: What a repetition draw costs the side to move at the root, in evaluation units
    #: (so it plays on in a roughly level position rather than repeat); 0: a draw is 0.
    contempt: int = 0

    def __init__(self, game: Game[Any, Any]) -> None:
        self.game = game

    def evaluate(self, state: Any) -> int:
        """Heuristic value of an unfinished position for the side to move."""
        return 0

    def margin(self, state: Any, outcome: Outcome) -> int:
        """How decisively the game was won (>= 0); Othello uses the disc difference."""
        return 0

    def terminal(self, state: Any, outcome: Outcome, ply: int) -> int:
        """Exact score of a finished game for the side to move."""
        if outcome.winner is None:
            return 0
        score = win_score(ply, self.margin(state, outcome))
        return score if outcome.winner == self.game.to_move(state) else -score

    #: Evaluation units per unit of ``MoveFacts.capture``, for delta pruning in quiescence
    #: (0 switches delta pruning off where the two scales do not match).
    capture_scale: int = 0
    #: Optional static preference per move (added to the history score in move ordering),
    #: keyed by the move itself; e.g. Othello's corners first and X-squares last.
    move_prior: dict[Any, int] | None = None

    #: Futility margins by remaining depth (index 0 unused); empty switches futility
    #: pruning off. A position this far from the window at that depth is treated as lost
    #: or won for the side to move without searching its quiet moves.
    futility_margins: tuple[int, ...] = ()

    def order_noisy(self, state: Any, moves: list[Any]) -> tuple[list[Any], dict[Any, int]] | None:
        """Optionally, a cheaper quiescence ordering than ``game.move_facts``: the noisy moves
        most-valuable-victim first and each move's material gain (in ``MoveFacts.capture``
        units). None: the searcher orders with the facts."""
        return None

    def null_move_ok(self, state: Any) -> bool:
        """False where passing could be better than any move (zugzwang-prone endings)."""
        return True

    def forced_noisy(self, state: Any) -> bool:
        """True where noisy moves are compulsory (draughts captures): no standing pat."""
        return False
