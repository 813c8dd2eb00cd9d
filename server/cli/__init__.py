"""The ``kibitz`` command: one subcommand per module in this package.

Each module ``kibitz.server.cli.<name>`` defines ``register(subparsers)`` which adds its
parser and sets ``func`` (taking the parsed args, returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS = (
    "serve",
    "worker",
    "bot",
    "games",
    "perft",
    "search",
    "arena",
    "bench",
    "status",
    "tables",
    "calibrate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kibitz", description="kibitz: a multiplayer board-game server with AI bots."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register_modules(subparsers, __name__, COMMANDS)
    return parser


def register_modules(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    package: str,
    names: Sequence[str],
) -> None:
    """Let each module ``package.<name>`` add its subcommand; absent modules are skipped."""
    for name in names:
        try:
            module = importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{package}.{name}":
                continue
            raise
        module.register(subparsers)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
