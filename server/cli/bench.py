"""``kibitz bench SUBCOMMAND``: benchmarks that measure us against a peer in the same run.

Each subcommand lives in a module ``kibitz.benchmarks.<name>`` that defines
``register(subparsers)``, like the commands of ``kibitz`` itself; modules not written
yet are skipped.
"""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = ("perft", "search", "load")
_PACKAGE = "kibitz.benchmarks"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("bench", help="benchmarks against peers (perft, search, load)")
    benches = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name in BENCHMARKS:
        try:
            module = importlib.import_module(f"{_PACKAGE}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{_PACKAGE}.{name}":
                continue  # benchmark not written yet
            raise
        module.register(benches)
