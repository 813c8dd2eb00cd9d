"""Exact endgames for the searcher: the Othello solver and the Oware endgame table.

The searcher asks :func:`root_result` before iterative deepening, and calls the probe of
:func:`tree_probe` at every node. Both only act when ``SearchOptions.endgame`` is on and
the depth is not bounded below the end (the depth-bound, randomised low levels keep their
character; level 8 and explicit time budgets play endgames perfectly):

- Othello with at most ``othello_endgame.SOLVE_EMPTIES`` empty squares (or any count the
  depth limit reaches): solved outright with the dedicated solver, which gets three
  quarters of the time budget; if it runs out, the normal search takes the rest.
- Oware when ``kibitz tables build oware`` has written a table to the data directory and
  the board holds at most its number of seeds: at the root, the table's move (most seeds
  secured, shortest way to secure them) whenever the table decides the result; inside the
  tree, every decided position scores as a proven win, draw or loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.games.othello import PASS
from kibitz.shared.search import oware_tables
from kibitz.shared.search.limits import SearchAborted, SearchLimits, _HasDeadline
from kibitz.shared.search.othello_endgame import SOLVE_EMPTIES, OthelloSolver, empties
from kibitz.shared.search.scores import win_score

#: Share of a time budget the Othello solver may use before the normal search takes over.
SOLVER_TIME_SHARE = 0.75


def _disc_score(diff: int, plies: int) -> int:
    """A final disc difference as a searcher score (the end is ``plies`` away)."""
    if diff == 0:
        return 0
    score = win_score(plies, abs(diff))
    return score if diff > 0 else -score


def _outcome_score(outcome: int, plies: int) -> int:
    if outcome == 0:
        return 0
    return win_score(plies) if outcome > 0 else -win_score(plies)


class RootSolution:
    """An exact root result: the move, its searcher score, the root moves' scores, and the
    expected line (at least the move)."""

    __slots__ = ("move", "score", "depth", "root_scores", "nodes", "pv")

    def __init__(
        self, move: Any, score: int, depth: int, root_scores: list[tuple[Any, int]], nodes: int
    ) -> None:
        self.move, self.score, self.depth = move, score, depth
        self.root_scores, self.nodes = root_scores, nodes
        self.pv: list[Any] = [move]


def _othello_line(game: Game[Any, Any], state: Any, move: Any, solver: OthelloSolver) -> list[Any]:
    """The best line as far as the solver's table knows it (its best moves, passes forced)."""
    line = [move]
    current = game.apply(state, move)
    for _ in range(64):
        moves = game.legal_moves(current)
        if not moves:
            break
        if moves == [PASS]:
            step = PASS
        else:
            own, opp = (
                (current.black, current.white)
                if current.to_move == 0
                else (current.white, current.black)
            )
            entry = solver.table.get((own, opp))
            if entry is None or entry[2] not in moves:
                break
            step = entry[2]
        line.append(step)
        current = game.apply(current, step)
    return line


def root_result(
    game: Game[Any, Any],
    state: Any,
    limits: SearchLimits,
    start: float,
    node_budget: int,
    all_root_scores: bool,
    clock: _HasDeadline | None = None,
) -> tuple[RootSolution | None, int]:
    """The exact result of the root position if an endgame method applies, else None.

    ``node_budget`` is what is left of the node limit; ``clock`` (the searcher) carries a
    deadline a cancel can move, honoured as well. Returns the solution (or None) and
    the nodes spent (also on an attempt that ran out of time).
    """
    if game.name == "othello":
        n = empties(state)
        if n > (SOLVE_EMPTIES if limits.depth is None else limits.depth):
            return None, 0
        deadline = float("inf")
        if limits.time_ms is not None:
            deadline = start + SOLVER_TIME_SHARE * limits.time_ms / 1000.0
        solver = OthelloSolver(deadline, node_budget, clock)
        try:
            solved = solver.solve_state(state, all_root_scores)
        except SearchAborted:
            return None, solver.nodes
        scores = [(move, _disc_score(diff, n)) for move, diff in solved.root_scores]
        root = RootSolution(solved.move, _disc_score(solved.score, n), n, scores, solver.nodes)
        root.pv = _othello_line(game, state, solved.move, solver)
        return root, solver.nodes
    if game.name == "oware" and limits.depth is None:
        table = oware_tables.loaded_table()
        if table is None or not table.covers(state):
            return None, 0
        if state.history and state.history.count(state.key) >= 1:
            return None, 0  # a repetition is already in play: leave it to the search
        best = table.best(state)
        if best is None:
            return None, 0
        move, outcome, per_move = best
        if outcome is None or (all_root_scores and any(o is None for _, o in per_move)):
            return None, 0  # the table does not decide this position: search it
        seeds = oware_tables.SEEDS - state.stores[0] - state.stores[1]
        lo_rank, hi_rank = table.rank_of(state)
        plies = max(1, lo_rank if outcome > 0 else hi_rank)
        scores = [(m, _outcome_score(o, plies)) for m, o in per_move if o is not None]
        return RootSolution(move, _outcome_score(outcome, plies), seeds, scores, 1), 1
    return None, 0


def tree_probe(
    game: Game[Any, Any], limits: SearchLimits
) -> Callable[[Any, int], int | None] | None:
    """A per-node probe ``(state, ply) -> exact score or None``, or None when no table
    applies to this game and search (Oware with a table, depth not bounded)."""
    if game.name != "oware" or limits.depth is not None:
        return None
    table = oware_tables.loaded_table()
    if table is None:
        return None
    max_seeds = table.max_seeds
    total = oware_tables.SEEDS
    win = oware_tables.WIN
    probe = table.probe

    def oware_probe(state: Any, ply: int) -> int | None:
        s0, s1 = state.stores
        if total - s0 - s1 > max_seeds or s0 >= win or s1 >= win:
            return None
        if state.history and state.history.count(state.key) >= 2:
            return None  # threefold repetition: the game is over
        return probe(state, ply)

    return oware_probe


__all__ = ["RootSolution", "SOLVER_TIME_SHARE", "root_result", "tree_probe"]
