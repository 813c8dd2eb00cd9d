"""``kibitz arena``: play two players against each other and report W/D/L and Elo.

Players (SPEC): ``level:N`` (our bot at level N, randomness included), a comma list of
search switches such as ``quiescence=off,tt=off`` (our searcher, level 8 otherwise), or a
peer: ``easyai`` (othello, oware, tictactoe, matches), ``sunfish`` (chess) or
``stockfish:ELO`` (chess: Debian's Stockfish with UCI_LimitStrength at UCI_Elo ELO,
1350-2850; plain ``stockfish`` is full strength).

Games come in colour-swapped pairs: each opening (a few random but seeded plies from the
start) is played once with A moving first and once with B moving first. Every game is
bounded: after ``--max-plies`` (default per game) it is adjudicated by our evaluation of
the final position from the first player's side: a lead of at least ``--adjudicate``
units (pawns, men, seeds...; default 3) wins, anything less is a draw.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from kibitz.shared.games.base import Game, GameError
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import SearchOptions, budget_for_level, choose_move
from kibitz.shared.search.evaluation import evaluation_for

#: Random plies from the start that make an opening, per game.
OPENING_PLIES = {"chess": 4, "draughts": 4, "othello": 4, "oware": 2, "kono": 2,
                 "tictactoe": 1, "matches": 1}  # fmt: skip
#: Default bound on a game's length, after which it is adjudicated.
MAX_PLIES = {"chess": 250, "draughts": 200, "othello": 130, "oware": 300, "kono": 120,
             "tictactoe": 9, "matches": 2000}  # fmt: skip


class Player(Protocol):
    name: str

    def choose(self, state: Any, budget: Budget) -> Any: ...


@dataclass
class SearchPlayer:
    """Our searcher at a level, or at level 8 with some techniques switched off."""

    game: Game[Any, Any]
    name: str
    level: int = 8
    options: SearchOptions = field(default_factory=SearchOptions)
    use_level_budget: bool = True
    seed: int = 0
    depths: list[int] = field(default_factory=list)
    times: list[int] = field(default_factory=list)

    def choose(self, state: Any, budget: Budget) -> Any:
        self.seed += 1
        chosen = None if self.use_level_budget else budget
        result = choose_move(self.game, state, self.level, chosen, self.seed, self.options)
        self.depths.append(result.depth)
        self.times.append(result.time_ms)
        return result.move


@dataclass
class TimedPeer:
    """Wraps a peer to record its thinking time like ours."""

    inner: Any
    name: str
    depths: list[int] = field(default_factory=list)
    times: list[int] = field(default_factory=list)

    def choose(self, state: Any, budget: Budget) -> Any:
        start = time.perf_counter()
        move = self.inner.choose(state, budget)
        self.times.append(int((time.perf_counter() - start) * 1000))
        self.depths.append(getattr(self.inner, "last_depth", 0))
        return move


def make_player(game: Game[Any, Any], spec: str, explicit_budget: bool, seed: int) -> Player:
    """A player from its SPEC (see the module docstring)."""
    spec = spec.strip()
    if spec == "easyai":
        from kibitz.benchmarks.peers.easyai_players import EasyAIPlayer

        return TimedPeer(EasyAIPlayer(game), "easyai")
    if spec == "sunfish":
        from kibitz.benchmarks.peers.sunfish_player import SunfishPlayer

        return TimedPeer(SunfishPlayer(game), "sunfish")
    if spec == "stockfish" or spec.startswith("stockfish:"):
        from kibitz.benchmarks.peers.stockfish_player import StockfishPlayer

        return TimedPeer(StockfishPlayer.from_spec(game, spec), spec)
    if spec.startswith("level:"):
        level = int(spec.split(":", 1)[1])
        if not 1 <= level <= 8:
            raise ValueError(f"bad player {spec!r}: level must be 1-8")
        return SearchPlayer(game, spec, level, SearchOptions(), not explicit_budget, seed)
    options = SearchOptions.parse(spec) if spec not in ("", "default", "ours") else SearchOptions()
    return SearchPlayer(game, spec or "ours", 8, options, not explicit_budget, seed)


def openings(game: Game[Any, Any], count: int, seed: int, plies: int) -> list[Any]:
    """``count`` distinct start positions, each ``plies`` seeded random moves deep."""
    rng = random.Random(seed)
    found: list[Any] = []
    keys: set[int] = set()
    attempts = 0
    while len(found) < count and attempts < count * 50:
        attempts += 1
        state = game.initial()
        for _ in range(plies):
            moves = game.legal_moves(state)
            if not moves:
                break
            state = game.apply(state, rng.choice(moves))
        if not game.legal_moves(state):
            continue
        key = game.hash_key(state)
        if key in keys and attempts < count * 10:
            continue
        keys.add(key)
        found.append(state)
    return found


def play_game(
    game: Game[Any, Any], start: Any, first: Player, second: Player, budget: Budget,
    max_plies: int, adjudicate: float,
) -> tuple[int | None, str, int]:  # fmt: skip
    """Winner as 0 (first), 1 (second) or None, how it ended, and the plies played."""
    players = (first, second)
    state = start
    mover_at_start = game.to_move(start)
    plies = 0
    while plies < max_plies:
        if not game.legal_moves(state):
            outcome = game.outcome(state)
            if outcome is None or outcome.winner is None:
                return None, outcome.reason if outcome else "over", plies
            seat = 0 if outcome.winner == mover_at_start else 1
            return seat, outcome.reason, plies
        seat = 0 if game.to_move(state) == mover_at_start else 1
        move = players[seat].choose(state, budget)
        state = game.apply(state, move)
        plies += 1
    # Adjudication by our static evaluation, from the side to move.
    evaluation = evaluation_for(game)
    score = evaluation.evaluate(state) / max(1, evaluation.unit)
    mover_seat = 0 if game.to_move(state) == mover_at_start else 1
    if abs(score) < adjudicate:
        return None, f"adjudicated draw after {plies} plies", plies
    leader = mover_seat if score > 0 else 1 - mover_seat
    return leader, f"adjudicated on evaluation {score:+.1f} after {plies} plies", plies


def elo_interval(wins: int, draws: int, losses: int) -> tuple[float, float, float]:
    """Elo difference of A over B with a 95% interval (normal approximation).

    Scores of 0 or 1 are clamped to half a game from the edge, so the figures stay finite.
    """
    n = wins + draws + losses
    if n == 0:
        return 0.0, 0.0, 0.0
    score = (wins + draws / 2) / n
    variance = (wins * (1 - score) ** 2 + draws * (0.5 - score) ** 2 + losses * score**2) / n
    margin = 1.96 * math.sqrt(variance / n)
    edge = 0.5 / n

    def elo(p: float) -> float:
        p = min(max(p, edge), 1 - edge)
        return -400 * math.log10(1 / p - 1)

    return elo(score) + 0.0, elo(score - margin) + 0.0, elo(score + margin) + 0.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "arena",
        help="play two players against each other (colour-swapped pairs) and report Elo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", help="game id")
    parser.add_argument("--a", required=True, metavar="SPEC", help="player A")
    parser.add_argument("--b", required=True, metavar="SPEC", help="player B")
    parser.add_argument("--games", type=int, default=10, help="games (rounded up to pairs)")
    limit = parser.add_mutually_exclusive_group()
    limit.add_argument("--time-ms", type=int, help="time per move for both players")
    limit.add_argument("--depth", type=int, help="depth per move for both players")
    parser.add_argument("--seed", type=int, default=1, help="seed of the openings")
    parser.add_argument("--opening-plies", type=int, help="random plies per opening")
    parser.add_argument("--max-plies", type=int, help="bound on game length")
    parser.add_argument("--adjudicate", type=float, default=3.0,
                        help="evaluation lead (in units) that wins at the ply bound")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--verbose", action="store_true", help="one line per game")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        game = find_game(args.game)
        explicit = args.time_ms is not None or args.depth is not None
        player_a = make_player(game, args.a, explicit, args.seed * 7919 + 1)
        player_b = make_player(game, args.b, explicit, args.seed * 7919 + 2)
    except (GameError, ValueError, RuntimeError) as exc:
        print(f"kibitz arena: {exc}", file=sys.stderr)
        return 2
    if args.depth is not None:
        budget = Budget(depth=args.depth)
    elif args.time_ms is not None:
        budget = Budget(time_ms=args.time_ms)
    else:
        budget = budget_for_level(game.name, 8)
    pairs = max(1, (args.games + 1) // 2)
    plies = (
        args.opening_plies if args.opening_plies is not None else OPENING_PLIES.get(game.name, 2)
    )
    max_plies = args.max_plies or MAX_PLIES.get(game.name, 300)
    starts = openings(game, pairs, args.seed, plies)
    wins = draws = losses = 0
    records = []
    started = time.perf_counter()
    for index, start in enumerate(starts):
        for a_first in (True, False):
            first, second = (player_a, player_b) if a_first else (player_b, player_a)
            winner, reason, length = play_game(
                game, start, first, second, budget, max_plies, args.adjudicate
            )
            a_seat = 0 if a_first else 1
            result = "draw" if winner is None else ("win" if winner == a_seat else "loss")
            wins += result == "win"
            draws += result == "draw"
            losses += result == "loss"
            record = {"opening": index, "a_first": a_first, "result": result,
                      "reason": reason, "plies": length}  # fmt: skip
            records.append(record)
            if args.verbose and not args.json:
                print(f"opening {index:>3} A {'first ' if a_first else 'second'}: {result:<4} "
                      f"({reason}, {length} plies)", flush=True)  # fmt: skip
    elo, low, high = elo_interval(wins, draws, losses)
    n = wins + draws + losses
    summary: dict[str, Any] = {
        "game": game.name,
        "a": args.a,
        "b": args.b,
        "games": n,
        "wins": wins,
        "draws": draws,
        "losses": losses,
        "score": round((wins + draws / 2) / n, 4) if n else 0.0,
        "elo": round(elo, 1),
        "elo_95": [round(low, 1), round(high, 1)],
        "budget": {"depth": budget.depth, "time_ms": budget.time_ms, "nodes": budget.nodes},
        "seconds": round(time.perf_counter() - started, 1),
        "a_mean_ms": _mean(getattr(player_a, "times", [])),
        "b_mean_ms": _mean(getattr(player_b, "times", [])),
        "a_mean_depth": _mean(getattr(player_a, "depths", [])),
        "b_mean_depth": _mean(getattr(player_b, "depths", [])),
    }
    if args.json:
        summary["records"] = records
        print(json.dumps(summary))
        return 0
    print(f"{game.name}: A={args.a} vs B={args.b}, {n} games "
          f"({len(starts)} openings x 2 colours)")  # fmt: skip
    print(f"A: +{wins} ={draws} -{losses}  score {summary['score']:.3f}  "
          f"Elo {elo:+.0f} [{low:+.0f}, {high:+.0f}] (95%)")  # fmt: skip
    print(f"mean time/move: A {summary['a_mean_ms']} ms, B {summary['b_mean_ms']} ms; "
          f"mean depth: A {summary['a_mean_depth']}, B {summary['b_mean_depth']}")  # fmt: skip
    return 0


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0
