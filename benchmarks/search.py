"""``kibitz bench search``: searcher speed, measured against easyAI in the same run.

1. Time to complete depth 8 from the Othello start: our searcher (iterative deepening
   1..8, all techniques on, min and median of ``--runs``) against easyAI's
   ``Negamax(8)`` with its transposition table on its own Reversi (``--peer-runs``, by
   default one run since it takes several seconds), and the ratio of the two minima.
2. Nodes per second per game: a fixed-time search from each game's start position (and a
   middlegame for chess), with depth reached and TT hit rate.

3. With ``--ablation``: nodes and time to complete a fixed depth on a fixed set of
   positions per game, with everything on and with each technique switched off in turn
   (move ordering, TT, killers+history, aspiration, PVS, null move, quiescence,
   extensions, late move reductions). Quiescence, extensions and LMR change what is
   searched, not only how fast, so their rows are not pure speed comparisons. Runs stop
   at ``--node-cap`` nodes (shown as ``>``).

Run: ``kibitz bench search`` (or ``python -m kibitz.benchmarks.search``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from kibitz.shared.games.registry import find_game
from kibitz.shared.search import Searcher, SearchLimits, SearchOptions

#: Extra positions for the nodes/s table (game, label, position text).
MIDDLEGAMES = (
    ("chess", "middlegame",
     "r1bq1rk1/pp2bppp/2n1pn2/2pp4/2PP4/2N1PN2/PP2BPPP/R1BQK2R w KQ - 0 8"),
)  # fmt: skip


#: Ablation positions: game -> (depth, [position texts]; None = the start).
ABLATION: dict[str, tuple[int, list[str | None]]] = {
    "chess": (4, [
        "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9",
        "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
        "2r2rk1/pp3ppp/2n1b3/3p4/3P4/2NB1N2/PP3PPP/2R2RK1 b - - 0 16",
    ]),
    "othello": (8, [
        None,
        "..................wb.....www.....bbb.......b.................... w",
        "...........b.....bbw.....bbww....bwb.......w.................... b",
    ]),
    "draughts": (8, [None, "W:W27,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49:"
                           "B1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,24"]),
    "oware": (10, [None, "5,5,0,6,6,5/5,5,5,0,5,1/0,0/S"]),
}  # fmt: skip
#: Ablation rows: label -> techniques switched off.
ABLATION_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("all on", ()),
    ("no move ordering", ("ordering",)),
    ("no TT", ("tt",)),
    ("no killers+history", ("killers", "history")),
    ("no aspiration", ("aspiration",)),
    ("no PVS", ("pvs",)),
    ("no null move", ("null_move",)),
    ("no quiescence", ("quiescence",)),
    ("no extensions", ("extensions",)),
    ("no LMR", ("lmr",)),
)


def ablation(node_cap: int, games: list[str]) -> list[dict[str, Any]]:
    """Per game and row: total nodes and seconds over the game's positions at its depth."""
    rows = []
    for name in games:
        depth, texts = ABLATION[name]
        game = find_game(name)
        states = [game.parse_position(t) if t else game.initial() for t in texts]
        for label, off in ABLATION_ROWS:
            options = SearchOptions().without(*off)
            nodes, seconds, capped = 0, 0.0, False
            for state in states:
                searcher = Searcher(game, options)
                start = time.perf_counter()
                reached = 0
                for result in searcher.iterate(state, SearchLimits(depth=depth, nodes=node_cap)):
                    reached = result.depth
                seconds += time.perf_counter() - start
                nodes += searcher.nodes
                capped = capped or reached < depth
            rows.append(
                {
                    "game": name,
                    "depth": depth,
                    "positions": len(states),
                    "row": label,
                    "nodes": nodes,
                    "seconds": round(seconds, 2),
                    "capped": capped,
                }
            )
    return rows


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "search", help="searcher speed vs easyAI (Othello depth 8) and nodes/s per game"
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="runs of our depth-8 search")
    parser.add_argument("--peer-runs", type=int, default=1, help="runs of easyAI Negamax(8)")
    parser.add_argument("--depth", type=int, default=8, help="Othello depth to compare")
    parser.add_argument("--time-ms", type=int, default=1000, help="time per nodes/s search")
    parser.add_argument("--skip-peer", action="store_true", help="ours only")
    parser.add_argument("--ablation", action="store_true", help="also run the ablation table")
    parser.add_argument("--ablation-games", default="chess,othello,draughts,oware",
                        help="games of the ablation table (comma list)")  # fmt: skip
    parser.add_argument("--node-cap", type=int, default=400_000, help="ablation node cap")
    parser.add_argument("--skip-speed", action="store_true", help="skip parts 1 and 2")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def ours_othello(depth: int, runs: int) -> tuple[list[float], int]:
    game = find_game("othello")
    state = game.initial()
    times, nodes = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        last = None
        for result in Searcher(game).iterate(state, SearchLimits(depth=depth)):
            last = result
        times.append(time.perf_counter() - start)
        nodes = last.nodes if last else 0
    return times, nodes


def easyai_othello(depth: int, runs: int) -> tuple[list[float], str]:
    from easyAI import Negamax, TranspositionTable

    from kibitz.benchmarks.peers.easyai_players import _reversi_from

    game = find_game("othello")
    times, move = [], ""
    for _ in range(runs):
        peer_game = _reversi_from(game.initial())
        ai = Negamax(depth, tt=TranspositionTable())
        start = time.perf_counter()
        move = str(ai(peer_game))
        times.append(time.perf_counter() - start)
    return times, move


def nodes_per_second(time_ms: int) -> list[dict[str, Any]]:
    rows = []
    cases: list[tuple[str, str, str | None]] = [
        (name, "start", None)
        for name in ("tictactoe", "matches", "kono", "oware", "othello", "draughts", "chess")
    ]
    cases += [(g, label, text) for g, label, text in MIDDLEGAMES]
    for name, label, text in cases:
        try:
            game = find_game(name)
        except ModuleNotFoundError:
            continue
        state = game.parse_position(text) if text else game.initial()
        searcher = Searcher(game)
        start = time.perf_counter()
        last = None
        for result in searcher.iterate(state, SearchLimits(time_ms=time_ms)):
            last = result
        elapsed = time.perf_counter() - start
        rows.append({
            "game": name,
            "position": label,
            "depth": last.depth if last else 0,
            "exact": bool(last and last.exact),
            "nodes": searcher.nodes,
            "seconds": round(elapsed, 3),
            "nps": int(searcher.nodes / elapsed) if elapsed > 0 else 0,
            "tt_hit_rate": round(searcher.table.hit_rate(), 3) if searcher.table else 0.0,
        })  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {"python": sys.version.split()[0]}
    if not args.skip_speed:
        speed(args, report)
    if args.ablation:
        games = [g.strip() for g in args.ablation_games.split(",") if g.strip()]
        report["ablation"] = ablation(args.node_cap, games)
    if args.json:
        print(json.dumps(report))
        return 0
    if not args.skip_speed:
        print_speed(args, report)
    if args.ablation:
        print(f"\nablation (nodes and seconds to complete the depth, summed over positions; "
              f"cap {args.node_cap} nodes per position):")  # fmt: skip
        print(f"  {'game':<9} {'depth':>5} {'row':<20} {'nodes':>10} {'seconds':>8}")
        for row in report["ablation"]:
            nodes = (">" if row["capped"] else "") + str(row["nodes"])
            print(f"  {row['game']:<9} {row['depth']:>5} {row['row']:<20} {nodes:>10} "
                  f"{row['seconds']:>8}")  # fmt: skip
    return 0


def speed(args: argparse.Namespace, report: dict[str, Any]) -> None:
    ours, nodes = ours_othello(args.depth, args.runs)
    report["othello_depth"] = args.depth
    report["ours_s"] = {"min": round(min(ours), 4), "median": round(statistics.median(ours), 4),
                        "runs": len(ours), "nodes": nodes}  # fmt: skip
    if not args.skip_peer:
        peer, move = easyai_othello(args.depth, args.peer_runs)
        report["easyai_s"] = {"min": round(min(peer), 3),
                              "median": round(statistics.median(peer), 3),
                              "runs": len(peer), "move": move}  # fmt: skip
        report["speedup_min_vs_min"] = round(min(peer) / min(ours), 1)
    report["nodes_per_second"] = nodes_per_second(args.time_ms)


def print_speed(args: argparse.Namespace, report: dict[str, Any]) -> None:
    o = report["ours_s"]
    print(f"Othello start, depth {args.depth} (CPython {report['python']}):")
    print(f"  kibitz searcher: min {o['min'] * 1000:.1f} ms, median {o['median'] * 1000:.1f} ms "
          f"over {o['runs']} runs ({o['nodes']} nodes)")  # fmt: skip
    if "easyai_s" in report:
        p = report["easyai_s"]
        print(f"  easyAI Negamax({args.depth}) + TT: min {p['min']:.2f} s, median "
              f"{p['median']:.2f} s over {p['runs']} run(s)")  # fmt: skip
        print(f"  speedup (min vs min): {report['speedup_min_vs_min']}x")
    print(f"\nnodes/s, {args.time_ms} ms search per position:")
    print(f"  {'game':<10} {'position':<11} {'depth':>5} {'nodes':>9} {'nps':>8} {'tt hits':>8}")
    for row in report["nodes_per_second"]:
        depth = f"{row['depth']}{'*' if row['exact'] else ''}"
        print(f"  {row['game']:<10} {row['position']:<11} {depth:>5} {row['nodes']:>9} "
              f"{row['nps']:>8} {row['tt_hit_rate']:>8.1%}")  # fmt: skip
    print("  (* = solved exactly)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kibitz.benchmarks.search")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
