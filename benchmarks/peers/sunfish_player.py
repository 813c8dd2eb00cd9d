"""sunfish (PyPI ``sunfish``) as an arena opponent for chess.

Positions go to sunfish through its own FEN reader (``sunfish_ui.uci.from_fen``), which
returns the board from the side to move's point of view (rotated for Black), and moves come
back through its renderer with the same orientation. sunfish searches on its own clock:
its hard deadline and its "no new iteration" limit are both set to our time budget, and the
move of the last completed bound search is played (a depth budget stops after that depth).
"""

from __future__ import annotations

import time
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.protocol.jobs import Budget


class SunfishPlayer:
    name = "sunfish"

    def __init__(self, game: Game[Any, Any]) -> None:
        if game.name != "chess":
            raise ValueError(f"sunfish plays chess only, not {game.name}")
        import sunfish
        from sunfish_ui import uci

        if getattr(uci, "sunfish", None) is None:
            uci.sunfish = sunfish  # the UCI front end expects its engine module here
        self.game = game
        self.sunfish = sunfish
        self.uci = uci
        self.last_depth = 0

    def choose(self, state: Any, budget: Budget) -> Any:
        moves = self.game.legal_moves(state)
        if len(moves) == 1:
            return moves[0]
        board = state.board
        white = board.turn
        pos = self.uci.from_fen(*board.fen().split())
        history = [pos] if white else [pos.rotate(), pos]
        searcher = self.sunfish.Searcher()
        start = time.time()
        limit = (budget.time_ms or 1000) / 1000.0 if budget.time_ms or not budget.depth else 1e9
        searcher.deadline = start + limit
        searcher.soft = start + limit
        best = None
        depth_reached = 0
        try:
            for depth, _gamma, _score, move in searcher.search(history):
                if budget.depth is not None and depth > budget.depth:
                    break
                if move is not None:
                    best, depth_reached = move, depth
                if time.time() > searcher.deadline:
                    break
        except self.sunfish.Stop:
            pass
        self.last_depth = depth_reached
        if best is None:
            return moves[0]
        text = self.uci.render_move(best, white)
        for move in moves:
            if move.uci() == text:
                return move
        return moves[0]
