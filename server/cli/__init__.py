"""The ``kibitz`` command: one subcommand per module in this package, loaded when chosen.

:data:`COMMANDS` lists each subcommand's name and its line in ``kibitz --help``; the module
``kibitz.server.cli.<name>`` is imported only when that subcommand is run (or asked for
``--help``), so a command loads what it needs and no more: ``kibitz search`` imports the
rules and the searcher, never the web server, Redis or the database. Each module defines
``register(subparsers)``, which adds its parser (flags and description; its help line is
the registry's) and sets ``func`` (taking the parsed args, returning an exit code).
``kibitz bench`` lists its benchmarks the same way (server/cli/bench.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

#: (name, help line) of each subcommand, in the order ``kibitz --help`` lists them.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("serve", "run the game server"),
    ("worker", "run AI worker processes"),
    ("bot", "play one game as a bot (random legal moves) and print the result as JSON"),
    ("games", "list the registered games and their options"),
    ("perft", "count the move sequences of a given length (rules check)"),
    ("search", "search one position and print the best move"),
    ("arena", "play two players against each other (colour-swapped pairs) and report Elo"),
    ("bench", "benchmarks against peers (perft, search, load) and fault drills (faults)"),
    ("status", "show the job queue, pending jobs and live workers as JSON"),
    ("tables", "endgame tables (Oware) and the exact endgame solver (Othello)"),
    ("calibrate", "measure the bot levels' Elo (chess: against Stockfish; others: self-play)"),
    ("admin", "accounts, API tokens and moderation on the node's database (operators)"),
)

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time
    _SubParsers = argparse._SubParsersAction


class LazySubcommands(_SubParsers):
    """Subcommands known by name and help line; a subcommand's module is imported, and its
    parser built by the module's ``register``, only when the subcommand is chosen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._modules: dict[str, str] = {}

    def add_lazy(self, name: str, help_line: str, module: str) -> None:
        """List ``name`` with ``help_line``; ``module`` builds its parser when chosen."""
        self.add_parser(name, help=help_line)
        self._modules[name] = module

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if isinstance(values, Sequence) and values and values[0] in self._modules:
            self._load(str(values[0]))
        super().__call__(parser, namespace, values, option_string)

    def _load(self, name: str) -> None:
        """Replace ``name``'s placeholder parser by its module's; the listing keeps its
        place and the registry's help line."""
        order = list(self._name_parser_map)
        listed = len(self._choices_actions)
        del self._name_parser_map[name]
        importlib.import_module(self._modules.pop(name)).register(self)
        del self._choices_actions[listed:]  # a help line the module gave: the registry's wins
        parsers = {key: self._name_parser_map[key] for key in order}
        self._name_parser_map.clear()
        self._name_parser_map.update(parsers)


def add_lazy_subcommands(
    parser: argparse.ArgumentParser,
    package: str,
    entries: Sequence[tuple[str, str]],
    **kwargs: Any,
) -> LazySubcommands:
    """Subcommands of ``parser``: each (name, help line) of ``entries``, built by the
    module ``package.<name>`` when chosen. ``kwargs`` go to ``add_subparsers``."""
    subparsers = parser.add_subparsers(action=LazySubcommands, **kwargs)
    assert isinstance(subparsers, LazySubcommands)
    for name, help_line in entries:
        subparsers.add_lazy(name, help_line, f"{package}.{name}")
    return subparsers


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kibitz", description="kibitz: a multiplayer board-game server with AI bots."
    )
    add_lazy_subcommands(
        parser, __name__, COMMANDS, dest="command", metavar="COMMAND", required=True
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
