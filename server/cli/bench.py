"""``kibitz bench SUBCOMMAND``: benchmarks that measure us against a peer in the same run.

Each subcommand lives in a module ``kibitz.benchmarks.<name>`` that defines
``register(subparsers)``, like the commands of ``kibitz`` itself, and is imported only when
chosen: :data:`BENCHMARKS` holds each one's name and help line.
"""

from __future__ import annotations

import argparse

from kibitz.server.cli import add_lazy_subcommands

#: (name, help line) of each benchmark, in the order ``kibitz bench --help`` lists them.
BENCHMARKS: tuple[tuple[str, str], ...] = (
    ("perft", "rules speed (leaves/s) against python-chess and pydraughts"),
    ("search", "searcher speed vs easyAI (Othello depth 8) and nodes/s per game"),
    ("load", "concurrent games over WebSockets: latency, moves/s (N nodes, a Redis Cluster)"),
    ("faults", "AI first-move latency under a flood; time to replace a killed worker"),
    ("recovery", "time for nodes to deliver again after Redis restarts and stalls"),
    ("archive", "finished games into the database: games/s, Redis memory after"),
    ("clocks", "error of the server's clocks per move, and lag credits vs the quota"),
    ("analysis", "a finished chess game analysed by workers"),
    ("workers", "AI jobs per second with 1, 2, ... worker processes on one Redis"),
    ("streams", "memory and idle CPU of 1,000 open event streams of the Bot API on one node"),
)
_PACKAGE = "kibitz.benchmarks"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="benchmarks against peers (perft, search, load) and fault drills (faults)"
    )
    add_lazy_subcommands(
        parser, _PACKAGE, BENCHMARKS, dest="benchmark", metavar="BENCHMARK", required=True
    )
