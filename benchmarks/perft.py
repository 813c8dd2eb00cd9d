"""``kibitz bench perft``: rules speed in leaves per second, against a peer where one exists.

Both sides count the same positions to the same depth in the same process, alternating
run by run so that machine noise hits both alike; we report the best and the median of
``--repeat`` runs and the ratio of medians. Peers:

- chess: python-chess walking its own Board with push/pop, the last ply counted with
  ``board.legal_moves.count()`` (bulk counting), which is how python-chess users write
  perft;
- draughts: pydraughts' move generator (``kibitz.benchmarks.peers.pydraughts_peer``),
  duplicate captures merged as the rules require;
- othello: easyAI's Reversi move generator at a shallow depth (it is slow), and a deeper
  run without a peer against our target of 1,000,000 leaves/s;
- oware, kono: no peer (easyAI's Awele plays different capture rules, so its counts differ).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from kibitz.shared.games import find_game

KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"


@dataclass(frozen=True)
class Case:
    game: str
    label: str
    position: str | None  # None: the initial position
    depth: int


CASES = (
    Case("chess", "start", None, 4),
    Case("chess", "kiwipete", KIWIPETE, 3),
    Case("draughts", "start", None, 4),
    Case("othello", "start", None, 6),
    Case("othello", "start", None, 7),
    Case("oware", "start", None, 7),
    Case("kono", "start", None, 14),
)
DEFAULT_GAMES = ("chess", "draughts", "othello", "oware")
TARGETS = {"othello": 1_000_000}


@dataclass
class Result:
    game: str
    position: str
    depth: int
    leaves: int
    runs: int
    best_s: float
    median_s: float
    leaves_per_s_best: float
    leaves_per_s_median: float
    peer: str | None = None
    peer_leaves: int | None = None
    peer_best_s: float | None = None
    peer_median_s: float | None = None
    peer_leaves_per_s_median: float | None = None
    ratio_median: float | None = None
    note: str = ""


def python_chess_perft(board: Any, depth: int) -> int:
    """The peer: python-chess's own board, push/pop, bulk counting at the last ply."""
    if depth == 1:
        return int(board.legal_moves.count())
    total = 0
    for move in board.legal_moves:
        board.push(move)
        total += python_chess_perft(board, depth - 1)
        board.pop()
    return total


def easyai_reversi_perft(depth: int) -> int:
    """The othello peer: easyAI's Reversi move generator from the start position.

    easyAI has no unmake, so each child is a copy, as its own Negamax does. Its game ends
    when the side to move cannot play (no passes), which cannot happen this close to the
    start, so the counts are comparable; the bench checks that they agree.
    """
    from easyAI.games.Reversi import Reversi  # optional peer, imported on use

    def walk(game: Any, depth: int) -> int:
        moves = game.possible_moves()
        if depth == 1:
            return len(moves)
        total = 0
        for move in moves:
            child = game.copy()
            child.play_move(move)
            total += walk(child, depth - 1)
        return total

    return walk(Reversi([None, None]), depth) if depth else 1


def _peer(game: str, position_text: str, depth: int) -> tuple[str, Callable[[], int] | str]:
    """(peer name, a callable counting the same perft) or (name, why it is unavailable)."""
    if game == "chess":
        import chess

        fen = position_text.split(" moves")[0]

        def run_chess() -> int:
            return python_chess_perft(chess.Board(fen), depth)

        return "python-chess", run_chess
    if game == "draughts":
        try:
            from kibitz.benchmarks.peers.pydraughts_peer import perft as draughts_perft
        except ImportError as exc:
            return "pydraughts", f"peer unavailable ({exc})"

        def run_draughts() -> int:
            return int(draughts_perft(position_text, depth))

        return "pydraughts", run_draughts
    if game == "othello" and depth <= 6:
        othello = find_game("othello")
        if position_text != othello.format_position(othello.initial()):
            return "easyAI", "no peer for this position"
        try:
            import easyAI  # noqa: F401
        except ImportError as exc:
            return "easyAI", f"peer unavailable ({exc})"

        def run_reversi() -> int:
            return easyai_reversi_perft(depth)

        return "easyAI Reversi", run_reversi
    return "", "no peer"


def _time(run: Callable[[], int]) -> tuple[int, float]:
    began = time.perf_counter()
    leaves = run()
    return leaves, time.perf_counter() - began


def measure(case: Case, repeat: int) -> Result:
    game = find_game(case.game)
    state = game.initial() if case.position is None else game.parse_position(case.position)
    text = game.format_position(state)
    peer_name, peer = _peer(case.game, text, case.depth)
    ours: list[float] = []
    theirs: list[float] = []
    leaves = peer_leaves = 0
    for _ in range(repeat):
        leaves, seconds = _time(lambda: game.perft(state, case.depth))
        ours.append(seconds)
        if callable(peer):
            peer_leaves, seconds = _time(peer)
            theirs.append(seconds)
    result = Result(
        case.game, case.label, case.depth, leaves, repeat, min(ours), statistics.median(ours),
        leaves / min(ours), leaves / statistics.median(ours),
    )  # fmt: skip
    if callable(peer):
        result.peer = peer_name
        result.peer_leaves = peer_leaves
        result.peer_best_s = min(theirs)
        result.peer_median_s = statistics.median(theirs)
        result.peer_leaves_per_s_median = peer_leaves / result.peer_median_s
        result.ratio_median = result.peer_median_s / result.median_s
        if peer_leaves != leaves:
            result.note = f"COUNTS DIFFER: ours {leaves}, {peer_name} {peer_leaves}"
    else:
        result.peer = peer_name or None
        result.note = peer
    target = TARGETS.get(case.game)
    if target is not None and not callable(peer):
        met = "met" if result.leaves_per_s_median >= target else "MISSED"
        result.note = (result.note + "; " if result.note else "") + f"target {target:,}/s {met}"
    return result


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "perft", help="rules speed (leaves/s) against python-chess and pydraughts"
    )
    parser.add_argument(
        "--games",
        nargs="+",
        default=list(DEFAULT_GAMES),
        metavar="GAME",
        help=f"games to measure (default: {' '.join(DEFAULT_GAMES)}; also kono)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per side (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    known = {case.game for case in CASES}
    unknown = [g for g in args.games if g not in known]
    if unknown or args.repeat < 1:
        what = f"unknown game {unknown[0]!r}" if unknown else "--repeat must be >= 1"
        print(f"kibitz bench perft: {what}; games: {', '.join(sorted(known))}")
        return 2
    results = []
    for case in CASES:
        if case.game not in args.games:
            continue
        result = measure(case, args.repeat)
        results.append(result)
        if not args.json:
            _print(result)
    if args.json:
        print(json.dumps([asdict(r) for r in results], indent=2))
    return 1 if any(r.note.startswith("COUNTS DIFFER") for r in results) else 0


def _print(r: Result) -> None:
    line = (
        f"{r.game:<9} {r.position:<9} depth {r.depth:<2} {r.leaves:>10,} leaves  "
        f"ours {r.leaves_per_s_median:>10,.0f}/s (time min {r.best_s:.3f} s, "
        f"median {r.median_s:.3f} s)"
    )
    if r.peer_median_s is not None and r.peer_leaves_per_s_median is not None:
        line += (
            f"  {r.peer} {r.peer_leaves_per_s_median:,.0f}/s (time min {r.peer_best_s:.3f} s,"
            f" median {r.peer_median_s:.3f} s)  ratio {r.ratio_median:.2f}x"
        )
    if r.note:
        line += f"  [{r.note}]"
    print(line + f"  runs={r.runs}", flush=True)
