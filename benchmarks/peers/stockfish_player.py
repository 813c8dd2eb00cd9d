"""Stockfish (Debian's ``stockfish``, any UCI engine in fact) as an arena opponent for chess.

SPEC ``stockfish:ELO`` plays with ``UCI_LimitStrength`` on and ``UCI_Elo`` = ELO (Stockfish
15.1 accepts 1350-2850); plain ``stockfish`` plays at full strength. The engine is
``$KIBITZ_STOCKFISH``, else ``stockfish`` on the PATH, else ``/usr/games/stockfish``; it
runs with its defaults otherwise (1 thread, 16 MB hash). A move gets the arena's budget as
``movetime`` (or its depth), and the board goes with the moves since the last
irreversible one, so the engine sees repetitions.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import chess.engine

from kibitz.shared.games.base import Game
from kibitz.shared.protocol.jobs import Budget
from kibitz.workers.engines import EngineFailure, engine_board, launch, limit_for


def stockfish_path() -> str:
    return os.environ.get("KIBITZ_STOCKFISH") or shutil.which("stockfish") or "/usr/games/stockfish"


class StockfishPlayer:
    def __init__(self, game: Game[Any, Any], elo: int | None = None) -> None:
        if game.name != "chess":
            raise ValueError(f"stockfish plays chess only, not {game.name}")
        path = stockfish_path()
        try:
            self.engine = launch([path])
        except EngineFailure as exc:
            raise RuntimeError(f"cannot start stockfish ({path}): {exc}") from None
        self.game = game
        self.name = "stockfish" if elo is None else f"stockfish:{elo}"
        self.engine_name = self.engine.id.get("name", path)
        self.last_depth = 0
        if elo is not None:
            option = self.engine.options.get("UCI_Elo")
            low, high = (option.min, option.max) if option is not None else (None, None)
            if low is None or high is None or not low <= elo <= high:
                self.close()
                raise ValueError(
                    f"{self.engine_name} has no UCI_Elo {elo} (its range: {low}-{high})"
                )
            self.engine.configure({"UCI_LimitStrength": True, "UCI_Elo": elo})

    @classmethod
    def from_spec(cls, game: Game[Any, Any], spec: str) -> StockfishPlayer:
        """``stockfish`` or ``stockfish:ELO``."""
        _name, sep, value = spec.partition(":")
        if not sep:
            return cls(game)
        if not value.isdigit():
            raise ValueError(f"bad player {spec!r}: stockfish:ELO wants a number (1350-2850)")
        return cls(game, int(value))

    def choose(self, state: Any, budget: Budget) -> Any:
        moves = self.game.legal_moves(state)
        if len(moves) == 1:
            return moves[0]
        limit, _wait = limit_for(budget)
        result = self.engine.play(engine_board(state), limit, info=chess.engine.INFO_BASIC)
        self.last_depth = int(result.info.get("depth", 0))
        if result.move in moves:
            return result.move
        return moves[0]  # refereed by our rules, like the other peers

    def close(self) -> None:
        self.engine.close()
