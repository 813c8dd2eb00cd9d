"""Game-agnostic negamax alpha-beta with iterative deepening.

One searcher plays all games through the ``Game`` interface. Techniques (each switchable in
``SearchOptions``): transposition table, move ordering (TT move, MVV-LVA, checks,
promotions, killers, history), aspiration windows, principal variation search, quiescence
on ``game.noisy_moves``, null-move pruning on ``game.null_move``, check and promotion
extensions.

Exactness: the searcher counts "horizon events" (a static evaluation, or a TT score that
was itself depth-limited) and "cycle events" (a repetition on the search path, scored as a
draw, or a TT score that depended on one). A subtree searched without either is solved and
stored as usable at any depth; one with cycle events only is stored as usable at any depth
but still path-dependent. An iteration without horizon events ends the deepening: every
line was followed to the end of the game or to a repetition. This is how small games
(tic-tac-toe, matches, kono, where a cycle is a draw) and Othello endgames are solved.

``iterate`` is a generator yielding one ``DepthResult`` per completed depth, so the caller
owns the clock policy and can stream progress.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kibitz.shared.games.base import Game
from kibitz.shared.search.endgame import root_result, tree_probe
from kibitz.shared.search.evaluation import evaluation_for
from kibitz.shared.search.evaluation.base import Evaluation
from kibitz.shared.search.forms import form_for
from kibitz.shared.search.limits import SearchAborted, SearchLimits, now
from kibitz.shared.search.options import SearchOptions
from kibitz.shared.search.ordering import MoveOrderer
from kibitz.shared.search.scores import (
    DECISIVE,
    INF,
    MARGIN_UNIT,
    MAX_PLY,
    WIN,
    plies_to_end,
)
from kibitz.shared.search.table import (
    CYCLIC_DEPTH,
    EXACT,
    LOWER,
    SOLVED_DEPTH,
    UPPER,
    TranspositionTable,
)

#: How many nodes pass between two looks at the clock.
_CLOCK_MASK = 15
#: Entries of the static-evaluation cache before it is emptied (bounded memory).
_EVAL_CACHE_SIZE = 1 << 17


@dataclass(slots=True)
class DepthResult:
    """Outcome of one completed iteration."""

    depth: int
    move: Any
    score: int
    pv: list[Any]
    nodes: int
    time_ms: int
    #: The score is final: no depth limit influenced it (every line reached the end or a
    #: repetition), or it is a win or loss proven within the searched depth.
    exact: bool
    #: (move, score) for every root move; exact scores with ``all_root_scores``,
    #: otherwise bounds for all but the best.
    root_scores: list[tuple[Any, int]] = field(default_factory=list)
    tt_hit_rate: float = 0.0

    @property
    def nps(self) -> int:
        return int(self.nodes * 1000 / self.time_ms) if self.time_ms > 0 else self.nodes * 1000


def _proven_within(score: int, depth: int) -> bool:
    """A win or loss (without a margin to improve) ending within the searched depth: a
    deeper search cannot find a shorter win, so deepening further is wasted."""
    if abs(score) < DECISIVE:
        return False
    plies = plies_to_end(score)
    margin = (abs(score) - WIN + plies) // MARGIN_UNIT
    return margin == 0 and plies <= depth


def _to_table(score: int, ply: int) -> int:
    """Decisive scores are stored relative to the node, so they stay right elsewhere."""
    if score >= DECISIVE:
        return score + ply
    if score <= -DECISIVE:
        return score - ply
    return score


def _from_table(score: int, ply: int) -> int:
    if score >= DECISIVE:
        return score - ply
    if score <= -DECISIVE:
        return score + ply
    return score


class Searcher:
    """One search of one position; make a new one per move (fresh tables, determinism)."""

    def __init__(
        self,
        game: Game[Any, Any],
        options: SearchOptions | None = None,
        evaluation: Evaluation | None = None,
    ) -> None:
        self.options = options or SearchOptions()
        opts = self.options
        #: The game the caller gave; ``game`` is the one searched (its search form, if any:
        #: see ``forms.py``), whose moves ``move_out`` turns back into the caller's.
        self.outer = game
        self.form = form_for(game) if opts.board and evaluation is None else None
        if self.form is not None:
            game = self.form.game
        self.game = game
        self.evaluation = evaluation or evaluation_for(game)
        cls = type(game)
        self.has_check = cls.in_check is not Game.in_check
        self.has_noisy = opts.quiescence and cls.noisy_moves is not Game.noisy_moves
        self.has_null = opts.null_move and cls.null_move is not Game.null_move
        self.extend = opts.extensions
        self.lmr = opts.lmr and opts.ordering
        self.futility_margins = (
            self.evaluation.futility_margins if opts.futility and opts.ordering else ()
        )
        size = opts.tt_size_log2 if not game.small else min(opts.tt_size_log2, 16)
        self.table = TranspositionTable(size) if opts.tt else None
        self.orderer = MoveOrderer(game, opts, self.evaluation.move_prior)
        self.nodes = 0
        self.horizon = 0
        self.cycles = 0
        self.node_limit = 1 << 62
        self.deadline = float("inf")
        self.path: list[int] = []
        #: The game's positions before the root that count for repetition
        #: (``Game.repetition_keys``): reaching one is scored like a repetition on the path.
        self.before: frozenset[int] = frozenset()
        self.eval_cache: dict[int, int] = {}
        self.track_repetitions = self.evaluation.repetitions
        self.contempt = self.evaluation.contempt
        self.check_outcome_at_leaf = self.evaluation.checks_outcome_at_leaf
        #: Delta pruning in quiescence: evaluation units per ``MoveFacts.capture`` unit and
        #: the safety margin (two "pawns") added to a capture's value.
        self.capture_scale = self.evaluation.capture_scale
        self.delta_margin = 2 * self.evaluation.unit
        #: Whether final scores carry a margin (then a win's value is not capped by its ply).
        self.margins = type(self.evaluation).margin is not Evaluation.margin
        #: Leaves are a bare static evaluation (no outcome test, no quiescence).
        self.plain_leaves = not self.check_outcome_at_leaf and not self.has_noisy
        self.max_extension_ply = MAX_PLY
        self.root_promoting: list[Any] = []
        #: A root move that beat the previous best in the iteration that ran out of time
        #: (None if none did): better than the last completed iteration's move; its score
        #: at that depth (exact or a lower bound) in ``interrupted_score``.
        self.interrupted_best: Any = None
        self.interrupted_score = -INF
        #: Exact scores from an endgame table, per node (None: no table applies).
        self.probe: Callable[[Any, int], int | None] | None = None

    # -- driver --------------------------------------------------------------------------
    def iterate(self, state: Any, limits: SearchLimits | None = None) -> Iterator[DepthResult]:
        """Iterative deepening: one result per completed depth until a limit or a proof."""
        limits = limits or SearchLimits()
        game = self.game
        start = now()
        self.deadline = limits.deadline(start)
        self.node_limit = limits.node_limit()
        if self.track_repetitions:
            self.before = frozenset(self.outer.repetition_keys(state))
        if self.form is not None:
            if not self.outer.legal_moves(state):
                return  # finished by the referee's rules (a threefold repetition...)
            state = self.form.enter(state)
        root_moves = list(game.legal_moves(state))
        if not root_moves:
            return
        self.orderer.promoting = []
        root_moves = self.orderer.order(state, root_moves, None, 0, game.to_move(state))
        self.root_promoting = self.orderer.promoting
        if self.options.endgame:
            solution, spent = root_result(
                game, state, limits, start, self.node_limit - self.nodes,
                self.options.all_root_scores, self,
            )  # fmt: skip
            self.nodes += spent
            if solution is not None:
                yield DepthResult(
                    depth=solution.depth,
                    move=self.move_out(solution.move),
                    score=solution.score,
                    pv=[self.move_out(m) for m in solution.pv],
                    nodes=self.nodes,
                    time_ms=max(0, int((now() - start) * 1000)),
                    exact=True,
                    root_scores=[(self.move_out(m), v) for m, v in solution.root_scores],
                )
                return
            self.probe = tree_probe(game, limits)
        score = 0
        history: list[int] = []
        unit = max(1, self.evaluation.unit)
        for depth in range(1, limits.max_depth() + 1):
            self.max_extension_ply = 2 * depth + 4
            horizon_before = self.horizon
            self.interrupted_best = None
            self.interrupted_score = -INF
            try:
                # Centre the window on the last score of the same parity: many games'
                # evaluations swing between odd and even depths (who moved last).
                guess = history[-2] if len(history) >= 2 else score
                if (
                    self.options.aspiration
                    and not self.options.all_root_scores  # full windows at the root anyway
                    and depth >= 3
                    and abs(guess) < DECISIVE
                    and abs(score) < DECISIVE
                ):
                    delta = unit // 2 + 1
                    alpha, beta = guess - delta, guess + delta
                    while True:
                        score, best, scores = self._root(state, root_moves, depth, alpha, beta)
                        if score <= alpha:
                            alpha = max(-INF, alpha - delta * 4)
                        elif score >= beta:
                            beta = min(INF, beta + delta * 4)
                        else:
                            break
                        delta *= 4
                        if delta > 64 * unit:
                            alpha, beta = -INF, INF
                else:
                    score, best, scores = self._root(state, root_moves, depth, -INF, INF)
            except SearchAborted:
                return
            self.interrupted_best = None
            # Best move first, the rest by their (bound) scores: the next iteration's order.
            order = {m: i for i, (m, _) in enumerate(sorted(scores, key=lambda x: -x[1]))}
            if self.options.ordering:
                root_moves.sort(key=order.__getitem__)
            else:
                root_moves.remove(best)
                root_moves.insert(0, best)
            history.append(score)
            proven = _proven_within(score, depth)
            settled = self.horizon == horizon_before or proven
            elapsed = max(0, int((now() - start) * 1000))
            yield DepthResult(
                depth=depth,
                move=self.move_out(best),
                score=score,
                pv=[self.move_out(m) for m in self._principal_variation(state, best, depth)],
                nodes=self.nodes,
                time_ms=elapsed,
                exact=settled,
                root_scores=[(self.move_out(m), v) for m, v in scores],
                tt_hit_rate=self.table.hit_rate() if self.table else 0.0,
            )
            if settled or len(root_moves) == 1 and depth >= 2 and not self.options.all_root_scores:
                return

    def move_out(self, move: Any) -> Any:
        """A move of the searched game as the caller's game's move."""
        return move if self.form is None or move is None else self.form.move_out(move)

    def _root(
        self, state: Any, moves: list[Any], depth: int, alpha: int, beta: int
    ) -> tuple[int, Any, list[tuple[Any, int]]]:
        game = self.game
        key = game.hash_key(state)
        self.nodes += 1
        if self.track_repetitions:
            self.path.append(key)
        all_scores = self.options.all_root_scores
        pvs = self.options.pvs and not all_scores
        best_score = -INF
        best_move = moves[0]
        scores: list[tuple[Any, int]] = []
        original_alpha = alpha
        try:
            for i, move in enumerate(moves):
                child = game.apply(state, move)
                new_depth = depth - 1 + self._extension(child, move, 0, self.root_promoting)
                if all_scores:
                    score = -self._search(child, new_depth, -INF, INF, 1, True)
                elif i == 0 or not pvs:
                    score = -self._search(child, new_depth, -beta, -alpha, 1, True)
                else:
                    score = -self._search(child, new_depth, -alpha - 1, -alpha, 1, True)
                    if alpha < score < beta:
                        score = -self._search(child, new_depth, -beta, -alpha, 1, True)
                scores.append((move, score))
                if i and score > alpha and score > self.interrupted_score and not all_scores:
                    # Searched with a full window past the first move: a better move at this
                    # depth, worth playing if time runs out before the iteration completes.
                    self.interrupted_best, self.interrupted_score = move, score
                if score > best_score:
                    best_score, best_move = score, move
                    if score > alpha and not all_scores:
                        alpha = score
                        if score >= beta:
                            break
        finally:
            if self.track_repetitions:
                self.path.pop()
        if self.table is not None:
            bound = (
                UPPER if best_score <= original_alpha else LOWER if best_score >= beta else EXACT
            )
            self.table.store(key, depth, bound, best_score, best_move)
        return best_score, best_move, scores

    def _extension(self, child: Any, move: Any, ply: int, promoting: list[Any]) -> int:
        """One more ply after a check or a promotion, so the tactic is seen through."""
        if not self.extend or ply > self.max_extension_ply:
            return 0
        if self.has_check and self.game.in_check(child):
            return 1
        if promoting and move in promoting:
            return 1
        return 0

    # -- the tree ------------------------------------------------------------------------
    def _search(
        self, state: Any, depth: int, alpha: int, beta: int, ply: int, allow_null: bool
    ) -> int:
        nodes = self.nodes = self.nodes + 1
        if nodes >= self.node_limit or (not nodes & _CLOCK_MASK and now() > self.deadline):
            raise SearchAborted
        game = self.game
        key = game.hash_key(state)
        if self.track_repetitions and (key in self.path or key in self.before):
            self.cycles += 1  # a path-dependent draw is never stored as solved
            # Sides alternate by ply (a null move too): the root side moves at even plies.
            return self.contempt if ply & 1 else -self.contempt
        if self.probe is not None:
            exact = self.probe(state, ply)
            if exact is not None:
                return exact
        if depth <= 0 or ply >= MAX_PLY - 1:
            if self.plain_leaves or ply >= MAX_PLY - 1:
                # Hot path (most nodes are leaves): the cached static evaluation, inline.
                self.horizon += 1
                value = self.eval_cache.get(key)
                if value is None:
                    value = self._evaluate_into_cache(state, key)
                return value
            return self._leaf(state, alpha, beta, ply)

        # Mate-distance pruning: no line from here can beat a win already found nearer the
        # root, nor lose faster than being lost right here.
        if not self.margins:
            if alpha < -WIN + ply:
                alpha = -WIN + ply
            if beta > WIN - ply - 1:
                beta = WIN - ply - 1
            if alpha >= beta:
                return alpha

        table = self.table
        tt_move = None
        if table is not None:
            entry = table.probe(key)
            if entry is not None:
                tt_move = entry[4]
                if entry[1] >= depth:
                    score = _from_table(entry[3], ply)
                    bound = entry[2]
                    if (
                        bound == EXACT
                        or (bound == LOWER and score >= beta)
                        or (bound == UPPER and score <= alpha)
                    ):
                        if entry[1] < CYCLIC_DEPTH:
                            self.horizon += 1
                        elif entry[1] == CYCLIC_DEPTH:
                            self.cycles += 1
                        return score

        moves = game.legal_moves(state)
        if not moves:
            outcome = game.outcome(state)
            if outcome is None:  # defensive: a game that ended without saying how
                return 0
            return self.evaluation.terminal(state, outcome, ply)

        side = game.to_move(state)
        in_check = self.has_check and game.in_check(state)
        horizon_before = self.horizon
        cycles_before = self.cycles

        if (
            allow_null
            and self.has_null
            and depth >= 3
            and not in_check
            and beta < DECISIVE
            and self.evaluation.null_move_ok(state)
        ):
            passed = game.null_move(state)
            if passed is not None:
                reduction = 3 if depth >= 7 else 2
                score = -self._search(
                    passed, depth - 1 - reduction, -beta, -beta + 1, ply + 1, False
                )
                if score >= beta:
                    self.horizon += 1
                    return beta if score >= DECISIVE else score

        # Futility: near the horizon, a static value far above beta is taken as a fail high
        # (reverse futility, null-window nodes only), and one far below alpha lets the quiet
        # moves be skipped (they are unlikely to gain the margin back).
        futile = False
        margins = self.futility_margins
        if depth < len(margins) and not in_check and alpha > -DECISIVE and beta < DECISIVE:
            static = self._static(state)
            margin = margins[depth]
            if beta - alpha == 1 and static - margin >= beta:
                self.horizon += 1
                return static - margin
            if static + margin <= alpha:
                futile = True

        orderer = self.orderer
        # The TT move goes first without ordering the rest: at most nodes that have one it
        # cuts, and ordering (move facts for every move) is then saved.
        rest: list[Any] | None = None
        if tt_move is not None and self.options.ordering and len(moves) > 1 and tt_move in moves:
            rest = moves
            moves = [tt_move]
            facts = game.move_facts(state, tt_move) if orderer.use_facts else None
            promoting = [tt_move] if facts is not None and facts.promotion else []
        else:
            orderer.promoting = []
            moves = orderer.order(state, moves, tt_move, ply, side)
            promoting = orderer.promoting
        original_alpha = alpha
        best_score = -INF
        best_move = moves[0]
        pvs = self.options.pvs
        may_extend = self.extend and ply <= self.max_extension_ply
        # Children at the horizon are evaluated inline (no call frame per leaf) when a leaf
        # is a bare static evaluation.
        inline_leaves = depth == 1 and self.plain_leaves and not self.track_repetitions
        if self.track_repetitions:
            self.path.append(key)
        try:
            first = True
            # Late move reductions: far from the horizon and not in check, quiet moves late
            # in the order (not TT move, capture, promotion, killer) are searched one ply
            # shallower first, and again at full depth only if they beat alpha.
            reducible = self.lmr and depth >= 3 and not in_check
            quiet = None if rest is not None else orderer.quiet_moves
            quiet_moves = quiet if reducible else None
            prunable = quiet if futile else None
            index = 0
            while True:
                if index == len(moves):
                    if rest is None:
                        break
                    # The TT move did not cut: order the others now.
                    rest.remove(tt_move)
                    orderer.promoting = []
                    moves.extend(orderer.order(state, rest, None, ply, side))
                    rest = None
                    promoting = promoting + orderer.promoting
                    quiet = orderer.quiet_moves
                    quiet_moves = quiet if reducible else None
                    prunable = quiet if futile else None
                    continue
                move = moves[index]
                index += 1
                if prunable is not None and index > 1 and move in prunable and move != tt_move:
                    self.horizon += 1
                    if static + margin > best_score:
                        best_score = static + margin  # what a quiet move could still reach
                    continue
                child = game.apply(state, move)
                new_depth = depth - 1
                extension = 0
                if may_extend:
                    extension = self._extension(child, move, ply, promoting)
                    new_depth += extension
                if (
                    quiet_moves is not None
                    and index > 3
                    and not extension
                    and move in quiet_moves
                    and move != tt_move
                ):
                    reduction = 2 if index > 10 and depth >= 5 else 1
                    score = -self._search(
                        child, new_depth - reduction, -alpha - 1, -alpha, ply + 1, True
                    )
                    if score <= alpha:
                        if score > best_score:
                            best_score = score
                        continue
                if inline_leaves and new_depth <= 0:
                    nodes = self.nodes = self.nodes + 1
                    if nodes >= self.node_limit or (
                        not nodes & _CLOCK_MASK and now() > self.deadline
                    ):
                        raise SearchAborted
                    self.horizon += 1
                    child_key = game.hash_key(child)
                    value = self.eval_cache.get(child_key)
                    if value is None:
                        value = self._evaluate_into_cache(child, child_key)
                    score = -value
                    first = False
                elif first or not pvs:
                    score = -self._search(child, new_depth, -beta, -alpha, ply + 1, True)
                    first = False
                else:
                    score = -self._search(child, new_depth, -alpha - 1, -alpha, ply + 1, True)
                    if alpha < score < beta:
                        score = -self._search(child, new_depth, -beta, -alpha, ply + 1, True)
                if score > best_score:
                    best_score = score
                    best_move = move
                    if score > alpha:
                        alpha = score
                        if score >= beta:
                            orderer.record_cutoff(state, move, ply, side, depth)
                            break
        finally:
            if self.track_repetitions:
                self.path.pop()

        if table is not None:
            if best_score <= original_alpha:
                bound = UPPER
            elif best_score >= beta:
                bound = LOWER
            else:
                bound = EXACT
            if self.horizon != horizon_before:
                stored_depth = depth
            elif self.cycles != cycles_before:
                stored_depth = CYCLIC_DEPTH
            else:
                stored_depth = SOLVED_DEPTH
            table.store(key, stored_depth, bound, _to_table(best_score, ply), best_move)
        return best_score

    def _leaf(self, state: Any, alpha: int, beta: int, ply: int) -> int:
        """Value at the horizon: quiescence where the game has noisy moves, else static."""
        if self.check_outcome_at_leaf:
            outcome = self.game.outcome(state)
            if outcome is not None:
                return self.evaluation.terminal(state, outcome, ply)
        if self.has_noisy:
            return self._quiesce(state, alpha, beta, ply, self.options.quiescence_depth)
        self.horizon += 1
        return self._static(state)

    def _static(self, state: Any) -> int:
        """The static evaluation, cached by position key (iterations revisit leaves)."""
        key = self.game.hash_key(state)
        value = self.eval_cache.get(key)
        if value is None:
            value = self._evaluate_into_cache(state, key)
        return value

    def _evaluate_into_cache(self, state: Any, key: int) -> int:
        cache = self.eval_cache
        if len(cache) >= _EVAL_CACHE_SIZE:
            cache.clear()
        value = self.evaluation.evaluate(state)
        cache[key] = value
        return value

    def _quiesce(self, state: Any, alpha: int, beta: int, ply: int, budget: int) -> int:
        """Search only noisy moves (captures; all replies when in check), standing pat."""
        self.nodes += 1
        if self.nodes >= self.node_limit or (
            not self.nodes & _CLOCK_MASK and now() > self.deadline
        ):
            raise SearchAborted
        game = self.game
        self.horizon += 1
        in_check = self.has_check and game.in_check(state)
        if in_check and budget > 0:
            moves = game.legal_moves(state)
            if not moves:
                outcome = game.outcome(state)
                return 0 if outcome is None else self.evaluation.terminal(state, outcome, ply)
            best = -INF
        else:
            stand_pat = self._static(state)
            if budget <= 0 or ply >= MAX_PLY - 1:
                return stand_pat
            forced = self.evaluation.forced_noisy(state)
            if not forced and stand_pat >= beta:
                return stand_pat  # before generating anything: most quiescence nodes end here
            moves = game.noisy_moves(state)
            if not moves:
                return stand_pat
            if forced:
                best = -INF
            else:
                best = stand_pat
                if stand_pat > alpha:
                    alpha = stand_pat
        delta_floor = alpha - best - self.delta_margin
        gains = None
        if len(moves) > 1 and self.orderer.use_facts:
            cheap = self.evaluation.order_noisy(state, moves) if best > -INF else None
            if cheap is not None:
                moves, gains = cheap
            else:
                moves = self.orderer.order(state, moves, None, ply, game.to_move(state))
                gains = self.orderer.gains
            if not self.capture_scale or best == -INF:
                gains = None
        for move in moves:
            if gains is not None and gains.get(move, INF) * self.capture_scale < delta_floor:
                continue  # delta pruning: even winning this piece cannot lift the score to alpha
            score = -self._quiesce(game.apply(state, move), -beta, -alpha, ply + 1, budget - 1)
            if score > best:
                best = score
                if score > alpha:
                    alpha = score
                    if score >= beta:
                        break
        return best

    # -- principal variation -----------------------------------------------------------
    def _principal_variation(self, state: Any, best: Any, depth: int) -> list[Any]:
        """The best line, read back from the table (stops at a repetition or a gap)."""
        game = self.game
        pv = [best]
        if self.table is None:
            return pv
        seen = {game.hash_key(state)}
        current = game.apply(state, best)
        for _ in range(max(0, depth - 1) + 8):
            key = game.hash_key(current)
            if key in seen:
                break
            seen.add(key)
            entry = self.table.slots[key & self.table.mask]
            if entry is None or entry[0] != key or entry[4] is None:
                break
            move = entry[4]
            moves = game.legal_moves(current)
            if move not in moves:
                break
            pv.append(move)
            current = game.apply(current, move)
        return pv
