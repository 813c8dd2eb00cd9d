"""``kibitz bench SUBCOMMAND``: benchmarks that measure us against a peer in the same run.

Each subcommand lives in a module ``kibitz.benchmarks.<name>`` that defines
``register(subparsers)``, like the commands of ``kibitz`` itself; modules not written
yet are skipped.
"""

from __future__ import annotations

import argparse

from kibitz.server.cli import register_modules

BENCHMARKS = (
    "perft",
    "search",
    "load",
    "faults",
    "recovery",
    "archive",
    "clocks",
    "analysis",
    "workers",
)
_PACKAGE = "kibitz.benchmarks"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="benchmarks against peers (perft, search, load) and fault drills (faults)"
    )
    benches = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    register_modules(benches, _PACKAGE, BENCHMARKS)
