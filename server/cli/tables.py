"""``kibitz tables``: endgame tables and the exact endgame solver.

- ``kibitz tables build oware --seeds N [--data-dir DIR]``: retrograde analysis of every
  Oware board with at most N seeds, written to ``DIR/tables/oware-endgame.bin`` (the data
  directory of ``kibitz serve``); the searcher plays from it whenever it is there.
- ``kibitz tables info [--data-dir DIR]``: what the stored table holds.
- ``kibitz tables solve othello --empties E --positions P [--seed S]``: times the exact
  Othello solver on P positions with E empty squares (reached by seeded play: a few random
  plies, then a depth-4 search for both sides), with node counts.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from kibitz.shared.search import oware_tables


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tables",
        help="endgame tables (Oware) and the exact endgame solver (Othello)",
        description="Build and inspect endgame tables; time the Othello endgame solver.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser("build", help="build an endgame table by retrograde analysis")
    build.add_argument("game", choices=["oware"], help="the game (oware)")
    build.add_argument(
        "--seeds",
        type=int,
        required=True,
        help=f"every board with at most this many seeds (0-{oware_tables.MAX_SEEDS}; "
        "12 takes about a minute and 0.7 GB)",
    )
    _data_dir_argument(build)
    build.add_argument("--json", action="store_true", help="print one JSON object")
    build.set_defaults(func=run_build)
    info = actions.add_parser("info", help="describe the stored endgame table")
    _data_dir_argument(info)
    info.set_defaults(func=run_info)
    solve = actions.add_parser("solve", help="time the exact endgame solver")
    solve.add_argument("game", choices=["othello"])
    solve.add_argument("--empties", type=int, default=14, help="empty squares (default 14)")
    solve.add_argument("--positions", type=int, default=10, help="positions (default 10)")
    solve.add_argument("--seed", type=int, default=1)
    solve.add_argument(
        "--random-play",
        action="store_true",
        help="reach the positions by random moves only (more lopsided, harder to solve)",
    )
    solve.add_argument("--json", action="store_true", help="print one JSON object")
    solve.set_defaults(func=run_solve)


def _data_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data directory (default: $KIBITZ_DATA_DIR, else that of `kibitz serve`: "
        f"{oware_tables.default_data_dir()})",
    )


def run_build(args: argparse.Namespace) -> int:
    if not 0 <= args.seeds <= oware_tables.MAX_SEEDS:
        print(
            f"kibitz tables: --seeds must be 0-{oware_tables.MAX_SEEDS}, not {args.seeds}",
            file=sys.stderr,
        )
        return 2
    start = time.perf_counter()

    def progress(n: int, positions: int, rounds: int) -> None:
        if not args.json:
            elapsed = time.perf_counter() - start
            print(f"{n:2d} seeds: {positions:>9,} boards, {rounds:3d} rounds ({elapsed:.1f} s)")

    table = oware_tables.build(args.seeds, progress)
    built = time.perf_counter() - start
    path = oware_tables.table_path(args.data_dir)
    size = table.save(path)
    stats = table.stats()
    report: dict[str, Any] = {
        **stats,
        "path": str(path),
        "bytes": size,
        "seconds": round(built, 2),
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(
            f"oware table: boards with at most {stats['max_seeds']} seeds, "
            f"{stats['positions']:,} positions ({stats['exact']:,} exact, "
            f"{stats['bounded']:,} bounded by cycles), longest forced line "
            f"{stats['max_rank']} plies, {size:,} bytes, built in {built:.1f} s -> {path}"
        )
    return 0


def run_info(args: argparse.Namespace) -> int:
    path = oware_tables.table_path(args.data_dir)
    try:
        table = oware_tables.OwareTable.load(path)
    except (OSError, ValueError) as exc:
        print(f"kibitz tables: no usable table at {path}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**table.stats(), "path": str(path)}))
    return 0


def othello_positions(empties: int, count: int, seed: int, random_play: bool = False) -> list[Any]:
    """``count`` Othello positions with ``empties`` empty squares and a move to play:
    4 random plies from the start, then both sides play a depth-4 search with 10% random
    moves (seeded); with ``random_play``, random moves only."""
    from kibitz.shared.games.othello import GAME
    from kibitz.shared.search import Searcher, SearchLimits, SearchOptions
    from kibitz.shared.search.othello_endgame import empties as count_empties

    positions: list[Any] = []
    rng = random.Random(seed)
    options = SearchOptions(endgame=False)
    for _ in range(count * 20):  # a game that ends early is skipped (bounded attempts)
        if len(positions) == count:
            break
        state = GAME.initial()
        plies = 0
        while count_empties(state) > empties and GAME.legal_moves(state) and plies < 200:
            moves = GAME.legal_moves(state)
            if random_play or plies < 4 or rng.random() < 0.1:
                move = rng.choice(moves)
            else:
                results = list(Searcher(GAME, options).iterate(state, SearchLimits(depth=4)))
                move = results[-1].move
            state = GAME.apply(state, move)
            plies += 1
        if count_empties(state) == empties and GAME.legal_moves(state):
            positions.append(state)
    return positions


def run_solve(args: argparse.Namespace) -> int:
    from kibitz.shared.games.othello import GAME
    from kibitz.shared.search.othello_endgame import OthelloSolver

    if not 1 <= args.empties <= 20 or args.positions < 1:
        print("kibitz tables: --empties must be 1-20 and --positions at least 1", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for state in othello_positions(args.empties, args.positions, args.seed, args.random_play):
        solver = OthelloSolver()
        start = time.perf_counter()
        result = solver.solve_state(state)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "position": GAME.format_position(state),
                "move": GAME.format_move(state, result.move),
                "score": result.score,
                "nodes": result.nodes,
                "ms": round(seconds * 1000, 1),
            }
        )
        if not args.json:
            row = rows[-1]
            print(f"{row['position']}  {row['move']:>4} {row['score']:+3d}  "
                  f"{row['nodes']:>8,} nodes  {row['ms']:8.1f} ms")  # fmt: skip
    times = sorted(float(r["ms"]) for r in rows)
    nodes = sorted(int(r["nodes"]) for r in rows)
    summary = {
        "empties": args.empties,
        "positions": len(rows),
        "median_ms": times[len(times) // 2] if times else 0.0,
        "max_ms": times[-1] if times else 0.0,
        "median_nodes": nodes[len(nodes) // 2] if nodes else 0,
        "max_nodes": nodes[-1] if nodes else 0,
        "under_1s": sum(1 for t in times if t < 1000),
    }
    if args.json:
        print(json.dumps({**summary, "rows": rows}))
    else:
        print(
            f"{summary['positions']} positions with {args.empties} empties: median "
            f"{summary['median_ms']:.0f} ms, max {summary['max_ms']:.0f} ms, median "
            f"{summary['median_nodes']:,} nodes, max {summary['max_nodes']:,}; "
            f"{summary['under_1s']} under 1 s"
        )
    return 0
