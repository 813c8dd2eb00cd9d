"""``kibitz search``: run the searcher on one position and print the move and statistics."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kibitz.shared.games.base import GameError
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import (
    TECHNIQUES,
    DepthResult,
    SearchOptions,
    budget_for_level,
    choose_move,
    report_score,
)
from kibitz.shared.search.evaluation import evaluation_for


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "search",
        help="search one position and print the best move",
        description="Search a position (the start by default) and print the best move with "
        "depth, score, nodes, time, nodes/s and the principal variation. Without a budget "
        "the level's budget applies (level 8 by default).",
    )
    parser.add_argument("game", help="game id, e.g. chess or othello")
    parser.add_argument("--position", help="position text in the game's notation")
    parser.add_argument("--depth", type=int, help="maximum depth in plies")
    parser.add_argument("--time-ms", type=int, help="time budget in milliseconds")
    parser.add_argument("--nodes", type=int, help="node budget")
    parser.add_argument("--level", type=int, default=8, choices=range(1, 9), metavar="1-8",
                        help="bot level (budget and randomness; default 8)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="seed for low-level randomness")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="game option (count=30 for matches) or searcher setting "
                             "(tt=off, tt_size_log2=16); repeatable")  # fmt: skip
    parser.add_argument("--search-option", action="append", default=[], metavar="NAME=VALUE",
                        help="searcher setting, e.g. tt_size_log2=16 or pvs=off")  # fmt: skip
    parser.add_argument(
        "--off",
        action="append",
        default=[],
        choices=TECHNIQUES,
        metavar="TECHNIQUE",
        help=f"switch a technique off ({', '.join(TECHNIQUES)}); repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true", help="no per-depth lines")
    parser.set_defaults(func=run)


def parse_game_options(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"bad --option {item!r}: expected NAME=VALUE")
        options[name.strip()] = value.strip()
    return options


def run(args: argparse.Namespace) -> int:
    try:
        game = find_game(args.game)
        # --option takes game options and searcher settings alike (their names differ).
        searcher_names = set(SearchOptions.__dataclass_fields__)
        given = parse_game_options(args.option)
        search_items = [f"{k}={v}" for k, v in given.items() if k in searcher_names]
        game_options = {k: v for k, v in given.items() if k not in searcher_names}
        state = game.parse_position(args.position) if args.position else game.initial(game_options)
        options = SearchOptions.parse(",".join([*search_items, *args.search_option]))
        options = options.without(*args.off)
    except (GameError, ValueError) as exc:
        print(f"kibitz search: {exc}", file=sys.stderr)
        return 2
    if not game.legal_moves(state):
        print(f"kibitz search: the game is over in {game.format_position(state)!r}",
              file=sys.stderr)  # fmt: skip
        return 2
    budget = None
    if args.depth is not None or args.time_ms is not None or args.nodes is not None:
        budget = Budget(depth=args.depth, time_ms=args.time_ms, nodes=args.nodes)
    unit = evaluation_for(game).unit

    def show(result: DepthResult) -> None:
        if args.json or args.quiet:
            return
        line = _line(game, state, result.pv)
        print(
            f"depth {result.depth:>3}  score {report_score(result.score, unit):>9}  "
            f"nodes {result.nodes:>9}  time {result.time_ms:>6} ms  nps {result.nps:>7}  "
            f"pv {' '.join(line)}",
            flush=True,
        )

    result = choose_move(
        game, state, args.level, budget=budget, seed=args.seed, options=options, progress=show
    )
    effective = budget or budget_for_level(game.name, args.level)
    out: dict[str, Any] = {
        "game": game.name,
        "position": game.format_position(state),
        "move": result.move_text,
        "display": game.display_move(state, result.move),
        "score": result.score,
        "mate_in": result.mate_in,
        "exact": result.exact,
        "depth": result.depth,
        "nodes": result.nodes,
        "time_ms": result.time_ms,
        "nps": result.nps,
        "pv": result.pv,
        "tt_hit_rate": round(result.tt_hit_rate, 4),
        "level": args.level,
        "budget": {
            "depth": effective.depth,
            "time_ms": effective.time_ms,
            "nodes": effective.nodes,
        },  # fmt: skip
        "off": sorted(set(args.off)),
    }
    if result.root_scores:
        out["root_scores"] = result.root_scores
    if args.json:
        print(json.dumps(out))
        return 0
    extra = f" (mate in {result.mate_in} plies)" if result.mate_in is not None else ""
    print(f"bestmove {result.move_text} ({out['display']})  score {result.score}{extra}")
    print(
        f"depth {result.depth}  nodes {result.nodes}  time {result.time_ms} ms  "
        f"nps {result.nps}  tt hits {result.tt_hit_rate:.1%}  exact {result.exact}"
    )
    print(f"pv {' '.join(result.pv)}")
    return 0


def _line(game: Any, state: Any, moves: list[Any]) -> list[str]:
    texts = []
    for move in moves:
        texts.append(game.format_move(state, move))
        state = game.apply(state, move)
    return texts
