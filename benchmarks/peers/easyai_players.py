"""easyAI (PyPI ``easyai``) as an arena opponent, adapted to our positions.

Each adapter builds easyAI's own game object from one of our states, asks easyAI's
``Negamax`` (alpha-beta with its transposition table) for a move and maps the move back.
Following PEERS.md, the easyAI game is created with ``AI_Player(None)`` players and the AI
is called directly (so per-node copies do not drag the AI and its table along), and each
game gets a ``ttentry`` so the table works.

Budgets: a depth budget runs ``Negamax(depth)``; a time budget runs iterative deepening
(depth 1, 2, ... sharing one table) on a hard deadline, as our searcher does: the scoring
function raises when time is up and the deepest completed iteration's move is played.
Its rules differ from ours in places (Reversi ends when the side to move cannot play;
Awele's capture test rarely fires, see PEERS.md); we
referee with our rules and only ever ask easyAI for a move when we have a choice.
"""

from __future__ import annotations

import time
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.protocol.jobs import Budget


def _easyai() -> Any:
    try:
        import easyAI
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("easyAI is not installed: pip install 'easyai==2.0.12'") from exc
    return easyAI


class EasyAIPlayer:
    """An arena player backed by easyAI's Negamax on easyAI's version of the game."""

    name = "easyai"

    def __init__(self, game: Game[Any, Any]) -> None:
        self.game = game
        easyai = _easyai()
        self.negamax = easyai.Negamax
        self.table_class = easyai.TranspositionTable
        builders = {
            "othello": _reversi_from,
            "oware": _awele_from,
            "tictactoe": _tictactoe_from,
            "matches": _bones_from,
        }
        if game.name not in builders:
            raise ValueError(f"easyAI has no {game.name}; peers: {', '.join(builders)}")
        self.build = builders[game.name]
        self.last_depth = 0

    def choose(self, state: Any, budget: Budget) -> Any:
        moves = self.game.legal_moves(state)
        if len(moves) == 1:
            return moves[0]  # forced (including Othello's pass): nothing to think about
        peer_game = self.build(state)
        table = self.table_class()
        if budget.depth is not None and budget.time_ms is None:
            peer_move = self.negamax(budget.depth, tt=table)(peer_game)
            self.last_depth = budget.depth
        else:
            # Iterative deepening on a hard deadline, like ours: the scoring function (called
            # at every leaf) raises once time is up, and the move of the deepest completed
            # iteration is played.
            deadline = time.perf_counter() + (budget.time_ms or 1000) / 1000.0

            def timed_scoring(game: Any) -> Any:
                if time.perf_counter() > deadline:
                    raise _OutOfTime
                return game.scoring()

            peer_move, depth = None, 0
            max_depth = budget.depth or 64
            while depth < max_depth:
                try:
                    move = self.negamax(depth + 1, scoring=timed_scoring, tt=table)(peer_game)
                except _OutOfTime:
                    break
                depth += 1
                peer_move = move
            if peer_move is None:  # not even depth 1 in time: take its depth-1 choice anyway
                peer_move = self.negamax(1, tt=table)(peer_game)
                depth = 1
            self.last_depth = depth
        text = _move_text(self.game.name, peer_move)
        for move in moves:
            if self.game.format_move(state, move) == text:
                return move
        return moves[0]  # easyAI's rules allowed a move ours do not: play our first move


class _OutOfTime(Exception):
    """Raised inside easyAI's search when the move's time is up."""


def _move_text(game: str, peer_move: Any) -> str:
    if game == "othello":
        row, col = "ABCDEFGH".index(peer_move[0]), int(peer_move[1]) - 1
        return "abcdefgh"[col] + str(row + 1)
    if game == "oware":
        index = "abcdefghijkl".index(peer_move)
        return "ABCDEF"[index] if index < 6 else "abcdef"[index - 6]
    return str(peer_move)


def _players() -> list[Any]:
    easyai = _easyai()
    return [easyai.AI_Player(None), easyai.AI_Player(None)]


def _reversi_from(state: Any) -> Any:
    """easyAI Reversi: board[i, j] holds 1/2 (player numbers); i is our row, j our column."""
    import numpy as np
    from easyAI.games.Reversi import Reversi

    class TabledReversi(Reversi):  # type: ignore[misc]
        def ttentry(self) -> tuple[bytes, int]:
            return self.board.tobytes(), self.current_player

    game = TabledReversi(_players())
    board = np.zeros((8, 8), dtype=int)
    for sq in range(64):
        if state.black >> sq & 1:
            board[sq // 8, sq % 8] = 1
        elif state.white >> sq & 1:
            board[sq // 8, sq % 8] = 2
    game.board = board
    game.current_player = state.to_move + 1
    return game


def _tictactoe_from(state: Any) -> Any:
    from easyAI.games.TicTacToe import TicTacToe

    class TabledTicTacToe(TicTacToe):  # type: ignore[misc]
        def ttentry(self) -> tuple[tuple[int, ...], int]:
            return tuple(self.board), self.current_player

    game = TabledTicTacToe(_players())
    game.board = list(state.cells)  # 1 = X (our player 0) = easyAI player 1
    game.current_player = state.to_move + 1
    return game


def _bones_from(state: Any) -> Any:
    """GameOfBones is our standard variant (take 1-3, the last one loses)."""
    from easyAI.games.GameOfBones import GameOfBones

    if state.variant != "standard":
        raise ValueError("easyAI's GameOfBones only plays the standard matches variant")

    class TabledBones(GameOfBones):  # type: ignore[misc]
        def possible_moves(self) -> list[str]:
            return [str(n) for n in range(1, min(3, self.pile) + 1)] or ["1"]

        def ttentry(self) -> tuple[int, int]:
            return self.pile, self.current_player

    game = TabledBones(_players())
    game.pile = state.heap
    game.current_player = state.to_move + 1
    return game


def _awele_from(state: Any) -> Any:
    """easyAI Awele: pits 0-5 are player 1's (our South A-F), 6-11 player 2's (our North)."""
    from easyAI.games.Awele import Awele

    class TabledAwele(Awele):  # type: ignore[misc]
        def scoring(self) -> int:
            """easyAI's own example scoring: the store difference for the side to move."""
            return int(self.player.score - self.opponent.score)

        def ttentry(self) -> tuple[tuple[int, ...], int, int, int]:
            return (tuple(self.board), self.current_player, self.players[0].score,
                    self.players[1].score)  # fmt: skip

    game = TabledAwele(_players())
    pits, stores = _oware_pits(state)
    game.board = list(pits)
    game.players[0].score, game.players[1].score = stores
    game.current_player = state.to_move + 1
    return game


def _oware_pits(state: Any) -> tuple[list[int], tuple[int, int]]:
    """Our Oware state as 12 pits (South A-F then North a-f) and the two stores."""
    pits = list(state.pits)
    stores = tuple(state.stores)
    return pits, (int(stores[0]), int(stores[1]))
