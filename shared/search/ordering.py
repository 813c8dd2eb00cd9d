"""Move ordering: TT move, then captures (MVV-LVA), checks, promotions, killers, history.

The hierarchy follows the seed report's finding that trying tactical moves first is what
makes alpha-beta cut: captures of the most valuable victim by the least valuable attacker,
then checks, then promotions (queen > rook > knight > bishop), then quiet moves that cut
elsewhere at the same ply (killers) or often anywhere (history). Everything game-specific
comes from ``game.move_facts``; games without it get killers and history only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.search.options import SearchOptions
from kibitz.shared.search.scores import MAX_PLY

_CAPTURE = 1 << 44
_CHECK = 1 << 40
_PROMOTION = 1 << 36
_KILLER = 1 << 32
_HISTORY_CAP = _KILLER - 1
#: A promotion's gain for delta pruning: more than any capture, so never pruned.
_PROMOTION_GAIN = 1_000_000


class MoveOrderer:
    """Per-search ordering state: killer slots per ply and a history table per side."""

    __slots__ = ("game", "enabled", "use_facts", "use_killers", "use_history", "killers",
                 "history", "promoting", "prior", "gains", "quiet_moves")  # fmt: skip

    def __init__(
        self, game: Game[Any, Any], options: SearchOptions, prior: dict[Any, int] | None = None
    ) -> None:
        self.game = game
        #: Static per-move preference from the evaluation (see ``Evaluation.move_prior``).
        self.prior = prior if options.ordering else None
        self.enabled = options.ordering
        self.use_facts = options.ordering and type(game).move_facts is not Game.move_facts
        self.use_killers = options.ordering and options.killers
        self.use_history = options.ordering and options.history
        self.killers: list[list[Any]] = [[None, None] for _ in range(MAX_PLY + 2)]
        seed = self.prior or {}
        self.history: tuple[dict[Any, int], dict[Any, int]] = (
            defaultdict(int, seed),
            defaultdict(int, seed),
        )
        #: Material each move of the last ordered list wins, in ``MoveFacts.capture`` units
        #: (promotions count as a huge gain, so delta pruning never skips them).
        self.gains: dict[Any, int] = {}
        #: Moves of the last ordered list that are quiet (no capture, check, promotion,
        #: killer): candidates for late move reductions. None where the game has no facts.
        self.quiet_moves: set[Any] | None = None
        #: Moves of the last ordered list that promote (for the promotion extension); a
        #: fresh list per call, so a caller may keep the reference across recursion.
        self.promoting: list[Any] = []

    def order(self, state: Any, moves: list[Any], tt_move: Any, ply: int, side: int) -> list[Any]:
        """``moves`` best-first; may reorder the given list in place."""
        if not self.enabled or len(moves) < 2:
            self.quiet_moves = None
            return moves
        killer1, killer2 = self.killers[ply] if self.use_killers else (None, None)
        history = self.history[side] if self.use_history else None
        if self.use_facts:
            facts_of = self.game.move_facts
            scores: dict[Any, int] = {}
            promoting: list[Any] = []
            self.promoting = promoting
            gains: dict[Any, int] = {}
            self.gains = gains
            quiet: set[Any] = set()
            self.quiet_moves = quiet
            for m in moves:
                f = facts_of(state, m)
                if f.capture:
                    s = _CAPTURE + f.capture * 1024 - f.attacker
                elif f.check:
                    s = _CHECK
                elif f.promotion:
                    s = _PROMOTION + f.promotion
                elif m == killer1:
                    s = _KILLER + 1
                elif m == killer2:
                    s = _KILLER
                elif history is not None:
                    s = min(history[m], _HISTORY_CAP)
                    quiet.add(m)
                else:
                    s = 0
                    quiet.add(m)
                if f.promotion:
                    promoting.append(m)
                gains[m] = f.capture + (_PROMOTION_GAIN if f.promotion else 0)
                scores[m] = s
            moves.sort(key=scores.__getitem__, reverse=True)
        else:
            self.quiet_moves = None
            # No facts: sort by history (seeded with the static prior) with a C-level key,
            # then lift the killers to the front.
            if history is not None:
                moves.sort(key=history.__getitem__, reverse=True)
            elif self.prior is not None:
                moves.sort(key=self._prior_key, reverse=True)
            for killer in (killer2, killer1):
                if killer is not None and killer in moves and moves[0] != killer:
                    moves.remove(killer)
                    moves.insert(0, killer)
        if tt_move is not None and moves[0] != tt_move:
            try:
                moves.remove(tt_move)
            except ValueError:
                return moves  # a key collision gave a move that is not legal here
            moves.insert(0, tt_move)
        return moves

    def _prior_key(self, move: Any) -> int:
        return (self.prior or {}).get(move, 0)

    def is_quiet(self, state: Any, move: Any) -> bool:
        return not self.use_facts or not self.game.move_facts(state, move).capture

    def record_cutoff(self, state: Any, move: Any, ply: int, side: int, depth: int) -> None:
        """A quiet move refuted the opponent's move: remember it as a killer and in history."""
        if not self.is_quiet(state, move):
            return
        if self.use_killers:
            slot = self.killers[ply]
            if slot[0] != move:
                slot[1] = slot[0]
                slot[0] = move
        if self.use_history:
            table = self.history[side]
            table[move] += depth * depth
