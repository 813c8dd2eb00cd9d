"""``kibitz calibrate``: measure the bot levels' strength as Elo ratings.

``kibitz calibrate chess`` plays each level (``level:N``, its own budget and randomness, as
players meet it) against a ladder of ``stockfish:ELO`` opponents (Stockfish's
``UCI_LimitStrength``: fixed ratings, the anchors) and each level against the next one (the
self-play ladder), so levels too weak to score against Stockfish's weakest setting are still
placed through the levels above them. ``kibitz calibrate othello`` (or any other game) plays
the self-play ladder only and anchors level 1 at 0: the ratings are relative.

Bounded and resumable: the games are played in rounds (one colour-swapped pair per pairing
and round, so a stopped run leaves balanced data), every game is appended as one JSON line
to the results file (``--state``, default ``calibration-GAME.jsonl`` in the data directory)
and a rerun continues where the file ends; ``--max-minutes`` stops starting games after that
long. A pairing against Stockfish is closed early when it is lopsided (at least
``LOPSIDED_GAMES`` games and a score of at most 1/8 or at least 7/8), and one that such a
result or a shut-out (``SHUTOUT_GAMES`` games, all lost or all won) elsewhere makes
pointless is not started: a level (nearly) shut out by a rating does not meet higher
ratings, and weaker levels do not meet it; the same the other way round.

The ratings come from one joint maximum-likelihood fit over every game in the file
(:func:`fit_ratings`: logistic Elo model, a draw counts half a win) with 95% intervals from
the curvature of the likelihood. The command prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kibitz.server.cli.arena import (
    MAX_PLIES,
    OPENING_PLIES,
    Player,
    SearchPlayer,
    openings,
    play_game,
)
from kibitz.shared.games.base import Game, GameError
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import SearchOptions
from kibitz.shared.search.levels import MAX_LEVEL, MIN_LEVEL
from kibitz.shared.search.oware_tables import default_data_dir

#: Default Stockfish ratings (``UCI_Elo``) of the chess ladder. Stockfish 15.1's floor is 1350.
DEFAULT_RATINGS = (1350, 1500, 1650, 1800)
#: Default games per pairing (a whole number of colour-swapped pairs).
DEFAULT_GAMES = 10
#: Stockfish's time per move (ms). With UCI_LimitStrength it picks its move at a depth fixed
#: by the rating (at most 5 plies up to UCI_Elo 1900), reached well within this.
DEFAULT_PEER_MS = 100
#: A pairing against Stockfish is lopsided after this many games at <= 1/8 or >= 7/8 ...
LOPSIDED_GAMES = 4
LOPSIDED_SCORE = 1 / 8
#: ... and a shut-out (no point, or every point) over this many games rules out the
#: pairings beyond it.
SHUTOUT_GAMES = 2
#: Weight (in games) of the one virtual draw added to every pairing in the fit, so a
#: shut-out gives a finite rating (like the arena's half-a-game clamp).
PRIOR_DRAW_WEIGHT = 0.5
#: Longest line of the results file that is read (anything longer is not ours).
MAX_LINE = 4096
RESULTS_VERSION = 1

_K = math.log(10) / 400  # d/dr of the logistic on the Elo scale


# -- the fit ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rating:
    """A player's fitted rating: Elo, its 95% interval, games played and points scored.

    ``elo`` is None when the player is not connected by games to an anchored player."""

    name: str
    elo: float | None
    low: float | None
    high: float | None
    games: int
    points: float
    anchored: bool = False


def expected_score(diff: float) -> float:
    """The logistic Elo model: expected score of a player rated ``diff`` above the other."""
    return 1.0 / (1.0 + math.pow(10.0, -diff / 400.0))


def fit_ratings(
    results: Iterable[tuple[str, str, float]],
    anchors: Mapping[str, float],
    prior_weight: float = PRIOR_DRAW_WEIGHT,
    max_iterations: int = 200,
) -> dict[str, Rating]:
    """Joint maximum-likelihood Elo ratings from games ``(a, b, a's score)``.

    Score 1 is a win for ``a``, 0.5 a draw, 0 a loss: the log-likelihood of a game is
    ``s log p + (1 - s) log (1 - p)`` with ``p = expected_score(r_a - r_b)``. ``anchors``
    fix some players' ratings (Stockfish's ``UCI_Elo``, or level 1 at 0); every other player
    connected to an anchor by games is fitted (Newton's method with step halving; the
    likelihood is concave), and the 95% interval is ``+-1.96`` standard errors from the
    inverse of the observed information. Each pairing also gets one virtual draw of weight
    ``prior_weight``, which keeps a shut-out finite and hardly moves a pairing of many
    games. Players not connected to any anchor get ``elo=None``.
    """
    games: dict[tuple[str, str], list[float]] = {}  # (a, b) in sorted order -> [n, points of a]
    tally: dict[str, list[float]] = {}
    for a, b, score in results:
        if a == b:
            continue
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score must be 0-1, not {score!r}")
        key, own = ((a, b), score) if a < b else ((b, a), 1.0 - score)
        entry = games.setdefault(key, [0.0, 0.0])
        entry[0] += 1
        entry[1] += own
        for name, points in ((a, score), (b, 1.0 - score)):
            mine = tally.setdefault(name, [0.0, 0.0])
            mine[0] += 1
            mine[1] += points
    for name in anchors:
        tally.setdefault(name, [0.0, 0.0])
    # Players reachable from an anchor through games.
    neighbours: dict[str, set[str]] = {name: set() for name in tally}
    for a, b in games:
        neighbours[a].add(b)
        neighbours[b].add(a)
    placed: set[str] = set()
    frontier = [name for name in anchors if name in neighbours]
    while frontier:
        name = frontier.pop()
        if name in placed:
            continue
        placed.add(name)
        frontier.extend(neighbours[name] - placed)
    free = sorted(name for name in placed if name not in anchors)
    index = {name: i for i, name in enumerate(free)}
    start = sum(anchors.values()) / len(anchors) if anchors else 0.0
    ratings = {name: float(value) for name, value in anchors.items()}
    ratings.update({name: start for name in free})
    pairs = [
        (a, b, n + prior_weight, points + prior_weight / 2)
        for (a, b), (n, points) in games.items()
        if a in placed and b in placed
    ]

    def log_likelihood(values: Mapping[str, float]) -> float:
        total = 0.0
        for a, b, n, points in pairs:
            p = min(max(expected_score(values[a] - values[b]), 1e-300), 1 - 1e-16)
            total += points * math.log(p) + (n - points) * math.log1p(-p)
        return total

    def derivatives(values: Mapping[str, float]) -> tuple[list[float], list[list[float]]]:
        grad = [0.0] * len(free)
        info = [[0.0] * len(free) for _ in free]  # minus the Hessian
        for a, b, n, points in pairs:
            p = expected_score(values[a] - values[b])
            g = _K * (points - n * p)
            w = _K * _K * n * p * (1 - p)
            i, j = index.get(a), index.get(b)
            if i is not None:
                grad[i] += g
                info[i][i] += w
            if j is not None:
                grad[j] -= g
                info[j][j] += w
            if i is not None and j is not None:
                info[i][j] -= w
                info[j][i] -= w
        return grad, info

    covariance: list[list[float]] = []
    if free:
        current = log_likelihood(ratings)
        for _ in range(max_iterations):
            grad, info = derivatives(ratings)
            step = _solve(info, grad)
            largest = max(abs(s) for s in step)
            scale = min(1.0, 400.0 / largest) if largest > 0 else 1.0
            improved = False
            for _ in range(40):
                trial = dict(ratings)
                for name, s in zip(free, step, strict=True):
                    trial[name] += scale * s
                value = log_likelihood(trial)
                if value >= current - 1e-12:
                    improved = True
                    break
                scale /= 2
            if not improved:
                break
            ratings, current = trial, value
            if largest * scale < 1e-6:
                break
        _grad, info = derivatives(ratings)
        covariance = _inverse(info)
    out: dict[str, Rating] = {}
    for name in sorted(tally):
        n, points = tally[name]
        if name in anchors:
            value = float(anchors[name])
            out[name] = Rating(name, value, value, value, int(n), points, anchored=True)
        elif name in index:
            i = index[name]
            margin = 1.96 * math.sqrt(max(0.0, covariance[i][i]))
            value = ratings[name]
            out[name] = Rating(name, value, value - margin, value + margin, int(n), points)
        else:
            out[name] = Rating(name, None, None, None, int(n), points)
    return out


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """``matrix^-1 vector`` by Gaussian elimination with partial pivoting."""
    inverse = _inverse(matrix)
    return [sum(row[j] * vector[j] for j in range(len(vector))) for row in inverse]


def _inverse(matrix: list[list[float]]) -> list[list[float]]:
    """The inverse of a small symmetric positive-definite matrix (Gauss-Jordan)."""
    n = len(matrix)
    work = [list(row) + [1.0 if i == j else 0.0 for j in range(n)] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(work[r][col]))
        if abs(work[pivot][col]) < 1e-18:
            raise ValueError("singular information matrix (a player without games?)")
        work[col], work[pivot] = work[pivot], work[col]
        head = work[col][col]
        work[col] = [value / head for value in work[col]]
        for row in range(n):
            if row != col and work[row][col] != 0.0:
                factor = work[row][col]
                work[row] = [x - factor * y for x, y in zip(work[row], work[col], strict=True)]
    return [row[n:] for row in work]


# -- the plan ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pairing:
    """Two players who meet: ``a`` is always a level; ``b`` a level or ``stockfish:ELO``."""

    a: str
    b: str

    @property
    def anchored(self) -> bool:
        return self.b.startswith("stockfish:")

    @property
    def key(self) -> str:
        return f"{self.a} vs {self.b}"


def level_of(name: str) -> int | None:
    return int(name.split(":", 1)[1]) if name.startswith("level:") else None


def rating_of(name: str) -> int | None:
    return int(name.split(":", 1)[1]) if name.startswith("stockfish:") else None


def plan(levels: Sequence[int], ratings: Sequence[int]) -> list[Pairing]:
    """Every pairing: adjacent levels (the ladder, weakest and cheapest first), then each
    level against each rating (strongest level and weakest rating first, so shut-outs rule
    out the rest early)."""
    ordered = sorted(set(levels))
    pairings = [
        Pairing(f"level:{low}", f"level:{high}")
        for low, high in zip(ordered, ordered[1:], strict=False)
    ]
    pairings += [
        Pairing(f"level:{level}", f"stockfish:{rating}")
        for level in reversed(ordered)
        for rating in sorted(set(ratings))
    ]
    return pairings


@dataclass
class Tally:
    games: int = 0
    points: float = 0.0
    done: set[tuple[int, bool]] = field(default_factory=set)  # (pair index, a moved first)

    @property
    def score(self) -> float:
        return self.points / self.games if self.games else 0.5


def tallies(pairings: Sequence[Pairing], records: Iterable[Mapping[str, Any]]) -> dict[str, Tally]:
    """Games and points of ``a`` per pairing, from the results file's records."""
    out = {pairing.key: Tally() for pairing in pairings}
    for record in records:
        tally = out.get(f"{record['a']} vs {record['b']}")
        if tally is None:
            continue
        tally.games += 1
        tally.points += float(record["score"])
        tally.done.add((int(record["pair"]), bool(record["a_first"])))
    return out


def is_open(pairing: Pairing, counts: Mapping[str, Tally], games: int) -> bool:
    """Whether ``pairing`` still wants games (see the module docstring for the rules)."""
    own = counts[pairing.key]
    if own.games >= games:
        return False
    if not pairing.anchored:
        return True
    if own.games >= LOPSIDED_GAMES and (
        own.score <= LOPSIDED_SCORE or own.score >= 1 - LOPSIDED_SCORE
    ):
        return False
    level, rating = level_of(pairing.a), rating_of(pairing.b)
    assert level is not None and rating is not None
    for other, tally in counts.items():
        a, _, b = other.partition(" vs ")
        other_level, other_rating = level_of(a), rating_of(b)
        if other_level is None or other_rating is None or other == pairing.key:
            continue
        lopsided = tally.games >= LOPSIDED_GAMES
        low = tally.games >= SHUTOUT_GAMES and (
            tally.points == 0 or (lopsided and tally.score <= LOPSIDED_SCORE)
        )
        high = tally.games >= SHUTOUT_GAMES and (
            tally.points == tally.games or (lopsided and tally.score >= 1 - LOPSIDED_SCORE)
        )
        # A level at least as strong (nearly) shut out by a rating no higher: no chance.
        if low and other_level >= level and other_rating <= rating:
            return False
        # A level no stronger took (nearly) every point from a rating no lower: no contest.
        if high and other_level <= level and other_rating >= rating:
            return False
    return True


def next_game(
    pairings: Sequence[Pairing], counts: Mapping[str, Tally], games: int
) -> tuple[Pairing, int, bool] | None:
    """The next game to play, round by round: (pairing, pair index, a moves first)."""
    pairs = (games + 1) // 2
    for pair in range(pairs):
        for pairing in pairings:
            if not is_open(pairing, counts, games):
                continue
            for a_first in (True, False):
                if (pair, a_first) not in counts[pairing.key].done:
                    return pairing, pair, a_first
    return None


# -- the results file ------------------------------------------------------------------------


def read_results(path: Path) -> list[dict[str, Any]]:
    """The records of the results file (none if it does not exist); bad lines are skipped
    (a run killed mid-write leaves at most a partial last line)."""
    if not path.exists():
        return []
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if len(line) > MAX_LINE:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and {"a", "b", "score", "pair", "a_first"} <= set(record):
                records.append(record)
    return records


def append_result(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
        handle.flush()


# -- the command -----------------------------------------------------------------------------


def parse_levels(text: str) -> list[int]:
    """``1-8``, ``3,5,7`` or ``1-4,7``."""
    levels: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        low, sep, high = part.partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"bad --levels {text!r}: want e.g. 1-8 or 2,4,6")
        first, last = int(low), int(high) if sep else int(low)
        if not MIN_LEVEL <= first <= last <= MAX_LEVEL:
            raise ValueError(f"bad --levels {text!r}: levels are {MIN_LEVEL}-{MAX_LEVEL}")
        levels.update(range(first, last + 1))
    return sorted(levels)


def parse_ratings(text: str) -> list[int]:
    ratings = []
    for part in text.split(","):
        if not part.strip().isdigit():
            raise ValueError(f"bad --ratings {text!r}: want e.g. 1350,1500,1650")
        ratings.append(int(part))
    return sorted(set(ratings))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="measure the bot levels' Elo (chess: against Stockfish; others: self-play)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("game", help="game id")
    parser.add_argument(
        "--levels",
        default=f"{MIN_LEVEL}-{MAX_LEVEL}",
        help="levels to calibrate, e.g. 1-8 or 2,4,6 (default: %(default)s)",
    )
    parser.add_argument(
        "--ratings",
        default=",".join(str(r) for r in DEFAULT_RATINGS),
        help="chess: Stockfish UCI_Elo ladder (default: %(default)s)",
    )
    parser.add_argument(
        "--games",
        type=int,
        default=DEFAULT_GAMES,
        help="games per pairing, rounded up to pairs (default: %(default)s)",
    )
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=None,
        help="start no game after this many minutes (default: no bound)",
    )
    parser.add_argument("--state", type=Path, default=None, metavar="FILE",
                        help="results file, one JSON line per game (default: "
                        "calibration-GAME.jsonl in the data directory)")  # fmt: skip
    parser.add_argument("--data-dir", type=Path, default=None,
                        help=f"data directory (default: {default_data_dir()})")  # fmt: skip
    parser.add_argument("--peer-ms", type=int, default=DEFAULT_PEER_MS,
                        help="Stockfish's time per move in ms (default: %(default)s)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="seed of the openings")
    parser.add_argument("--max-plies", type=int, help="bound on game length (as in arena)")
    parser.add_argument(
        "--adjudicate",
        type=float,
        default=3.0,
        help="evaluation lead that wins at the ply bound (as in arena)",
    )
    parser.add_argument("--fit-only", action="store_true",
                        help="play nothing: fit and print the results file")  # fmt: skip
    parser.add_argument("--verbose", action="store_true", help="one line per game")
    parser.set_defaults(func=run)


@dataclass
class Settings:
    game: Game[Any, Any]
    levels: list[int]
    ratings: list[int]
    games: int
    peer_ms: int
    seed: int
    max_plies: int
    adjudicate: float
    state: Path


def run(args: argparse.Namespace) -> int:
    try:
        game = find_game(args.game)
        levels = parse_levels(args.levels)
        ratings = parse_ratings(args.ratings) if game.name == "chess" else []
        if args.games < 0 or args.peer_ms < 1:
            raise ValueError("--games must be >= 0 and --peer-ms >= 1")
        if len(levels) < 2 and not ratings:
            raise ValueError("a self-play ladder needs at least two levels")
    except (GameError, ValueError) as exc:
        print(f"kibitz calibrate: {exc}", file=sys.stderr)
        return 2
    data_dir = args.data_dir or default_data_dir()
    settings = Settings(
        game, levels, ratings, args.games, args.peer_ms, args.seed,
        args.max_plies or MAX_PLIES.get(game.name, 300), args.adjudicate,
        args.state or data_dir / f"calibration-{game.name}.jsonl",
    )  # fmt: skip
    played = 0
    if not args.fit_only:
        deadline = None if args.max_minutes is None else time.monotonic() + args.max_minutes * 60
        try:
            played = play_games(settings, deadline, args.verbose)
        except RuntimeError as exc:  # Stockfish would not start
            print(f"kibitz calibrate: {exc}", file=sys.stderr)
            return 1
    records = matching(read_results(settings.state), settings)
    summary = summarise(settings, records, played)
    print_table(summary)
    print(json.dumps(summary))
    return 0


def matching(records: Iterable[dict[str, Any]], settings: Settings) -> list[dict[str, Any]]:
    """The records of this game played under these settings (the ply bound and, against
    Stockfish, its time change what a game means; other runs in the same file are left
    out)."""
    return [
        record for record in records
        if record.get("game") == settings.game.name
        and record.get("max_plies") == settings.max_plies
        and (rating_of(str(record.get("b", ""))) is None
             or record.get("peer_ms") == settings.peer_ms)
    ]  # fmt: skip


def play_games(settings: Settings, deadline: float | None, verbose: bool) -> int:
    """Play until every pairing has its games or the deadline passes; returns games played."""
    from kibitz.benchmarks.peers.stockfish_player import StockfishPlayer

    game = settings.game
    pairings = plan(settings.levels, settings.ratings)
    starts = openings(game, max(1, (settings.games + 1) // 2), settings.seed,
                      OPENING_PLIES.get(game.name, 2))  # fmt: skip
    peer_budget = Budget(time_ms=settings.peer_ms)
    engines: dict[str, StockfishPlayer] = {}
    played = 0
    try:
        while deadline is None or time.monotonic() < deadline:
            counts = tallies(pairings, matching(read_results(settings.state), settings))
            chosen = next_game(pairings, counts, settings.games)
            if chosen is None:
                break
            pairing, pair, a_first = chosen
            if pair >= len(starts):  # fewer distinct openings than pairs (tiny games)
                break
            seed = settings.seed * 1_000_003 + pair * 1009 + (0 if a_first else 1)
            players: list[Player] = []
            for name in (pairing.a, pairing.b):
                if name.startswith("stockfish:"):
                    if name not in engines:
                        engines[name] = StockfishPlayer.from_spec(game, name)
                    players.append(engines[name])
                else:
                    level = level_of(name)
                    assert level is not None
                    players.append(SearchPlayer(game, name, level, SearchOptions(), True, seed))
            first, second = players if a_first else players[::-1]
            started = time.monotonic()
            winner, reason, plies = play_game(
                game, starts[pair], first, second, peer_budget, settings.max_plies,
                settings.adjudicate,
            )  # fmt: skip
            a_seat = 0 if a_first else 1
            score = 0.5 if winner is None else (1.0 if winner == a_seat else 0.0)
            record = {
                "v": RESULTS_VERSION, "game": game.name, "a": pairing.a, "b": pairing.b,
                "pair": pair, "a_first": a_first, "score": score, "reason": reason,
                "plies": plies, "seconds": round(time.monotonic() - started, 1),
                "peer_ms": settings.peer_ms, "max_plies": settings.max_plies,
                "seed": settings.seed, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }  # fmt: skip
            append_result(settings.state, record)
            played += 1
            if verbose:
                print(f"{pairing.key:<28} pair {pair:>2} {'A first ' if a_first else 'A second'}"
                      f" {score:>3}  ({reason}, {plies} plies, {record['seconds']} s)",
                      flush=True)  # fmt: skip
    finally:
        for engine in engines.values():
            engine.close()
    return played


def summarise(settings: Settings, records: list[dict[str, Any]], played: int) -> dict[str, Any]:
    game = settings.game.name
    results = [(str(r["a"]), str(r["b"]), float(r["score"])) for r in records]
    if game == "chess":
        anchors = {
            f"stockfish:{rating}": float(rating)
            for rating in {rating_of(b) for _, b, _ in results if b.startswith("stockfish:")}
            if rating is not None
        }  # fmt: skip
        scale = "Stockfish 15.1 UCI_Elo"
    else:
        anchors = {f"level:{min(settings.levels)}": 0.0}
        scale = f"relative to level {min(settings.levels)}"
    fitted = fit_ratings(results, anchors)
    rows = []
    previous: float | None = None
    for level in settings.levels:
        rating = fitted.get(f"level:{level}")
        if rating is None:
            rows.append({"level": level, "elo": None, "low": None, "high": None, "games": 0,
                         "points": 0.0, "gap": None})  # fmt: skip
            previous = None
            continue
        gap = None if rating.elo is None or previous is None else round(rating.elo - previous)
        rows.append({
            "level": level, "elo": _round(rating.elo), "low": _round(rating.low),
            "high": _round(rating.high), "games": rating.games,
            "points": rating.points, "gap": gap,
        })  # fmt: skip
        previous = rating.elo
    pairs = tallies(plan(settings.levels, settings.ratings), records)
    return {
        "game": game,
        "scale": scale,
        "state": str(settings.state),
        "games": len(records),
        "played_now": played,
        "peer_ms": settings.peer_ms if game == "chess" else None,
        "levels": rows,
        "pairings": {
            key: {"games": tally.games, "points": tally.points}
            for key, tally in pairs.items()
            if tally.games
        },  # fmt: skip
    }


def _round(value: float | None) -> int | None:
    return None if value is None else round(value)


def print_table(summary: Mapping[str, Any]) -> None:
    print(f"{summary['game']}: {summary['games']} games in {summary['state']} "
          f"({summary['played_now']} played now); Elo scale: {summary['scale']}")  # fmt: skip
    print(f"{'level':>5} {'Elo':>6} {'95% interval':>15} {'gap':>5} {'games':>6} {'score':>6}")
    for row in summary["levels"]:
        if row["elo"] is None:
            print(f"{row['level']:>5} {'-':>6} {'(no games)':>15}")
            continue
        interval = f"[{row['low']}, {row['high']}]"
        gap = "" if row["gap"] is None else f"{row['gap']:+d}"
        score = row["points"] / row["games"] if row["games"] else 0.0
        print(f"{row['level']:>5} {row['elo']:>6} {interval:>15} {gap:>5} {row['games']:>6} "
              f"{score:>6.2f}")  # fmt: skip
    for key, tally in summary["pairings"].items():
        print(f"  {key:<28} {tally['points']:g}/{tally['games']}")
