"""``kibitz perft GAME DEPTH``: count move sequences, to check a game's rules.

The node count is always the last line printed, so scripts can take ``tail -n 1``;
``--divide`` first prints one ``move count`` line per legal move.
"""

from __future__ import annotations

import argparse
import sys
import time

from kibitz.shared.games import GameError, find_game


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "perft", help="count the move sequences of a given length (rules check)"
    )
    parser.add_argument("game", help="game id, e.g. chess (see `kibitz games`)")
    parser.add_argument("depth", type=int, help="number of plies")
    parser.add_argument("--position", help="position text (default: the initial position)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="game option, repeatable (for the initial position)",
    )
    parser.add_argument("--divide", action="store_true", help="print the count below each move")
    parser.add_argument(
        "--time", action="store_true", help="print the time taken and leaves/s to stderr"
    )
    parser.set_defaults(func=run)


def parse_options(pairs: list[str]) -> dict[str, str]:
    """``["name=value", ...]`` as a dict; raises ValueError on a pair without ``=``."""
    options: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"bad --option {pair!r}: expected NAME=VALUE")
        options[name] = value
    return options


def run(args: argparse.Namespace) -> int:
    if args.depth < 0:
        print(f"kibitz perft: depth must be >= 0, not {args.depth}", file=sys.stderr)
        return 2
    try:
        game = find_game(args.game)
        options = parse_options(args.option)
        if args.position is not None:
            if options:
                raise ValueError("--option applies to the initial position, not --position")
            state = game.parse_position(args.position)
        else:
            state = game.initial(options)
    except (GameError, ValueError) as exc:
        print(f"kibitz perft: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    if args.divide and args.depth > 0:
        total = 0
        for move in game.legal_moves(state):
            count = game.perft(game.apply(state, move), args.depth - 1)
            print(f"{game.format_move(state, move)} {count}")
            total += count
    else:
        total = game.perft(state, args.depth)
    elapsed = time.perf_counter() - started
    print(total)
    if args.time:
        rate = total / elapsed if elapsed > 0 else float("inf")
        print(f"{elapsed:.3f} s, {rate:,.0f} leaves/s", file=sys.stderr)
    return 0
