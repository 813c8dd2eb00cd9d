"""``kibitz games``: the registered games with their options."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kibitz.shared.games import available_games


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("games", help="list the registered games and their options")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    games: list[dict[str, Any]] = [
        {
            "name": g.name,
            "title": g.title,
            "players": list(g.players),
            "options": {spec.name: spec.describe() for spec in g.option_specs},
        }
        for g in available_games()
    ]
    if args.json:
        print(json.dumps(games, indent=2))
        return 0
    for info in games:
        print(f"{info['name']:<10} {info['title']}  ({' vs '.join(info['players'])})")
        for name, spec in info["options"].items():
            choices = f" [{'|'.join(map(str, spec['choices']))}]" if "choices" in spec else ""
            print(f"    --option {name}={spec['default']}{choices}  {spec['help']}")
    return 0
