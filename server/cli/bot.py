"""``kibitz bot``: play one game through the public protocol, print a JSON line."""

from __future__ import annotations

import argparse
import asyncio
import json

from kibitz.client.bot import play_game
from kibitz.client.connection import PING_INTERVAL_S, PING_TIMEOUT_S, ServerError
from kibitz.shared.protocol.client_in import PLAYER_KEY


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bot", help="play one game as a bot (random legal moves) and print the result as JSON"
    )
    parser.add_argument(
        "url",
        nargs="+",
        help="server URL, e.g. http://127.0.0.1:8000; more nodes of the same cluster may "
        "follow, the bot moves on to the next when one goes away",
    )
    parser.add_argument("--game", required=True)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--opponent", default="human", help="human or ai:LEVEL (1-8)")
    group.add_argument("--join", metavar="ROOM_ID", help="join this room instead of creating one")
    parser.add_argument("--seat", default=None, help="0 (moves first), 1 or random")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random moves")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait per turn")
    parser.add_argument(
        "--player-key",
        default=None,
        help="the bot's secret player key (16-128 characters of A-Z a-z 0-9 - _), so its "
        "games are listed under one player id; default: a fresh random key",
    )
    parser.add_argument(
        "--ping-interval",
        type=float,
        default=PING_INTERVAL_S,
        help="seconds between WebSocket pings (default: %(default)s)",
    )
    parser.add_argument(
        "--ping-timeout",
        type=float,
        default=PING_TIMEOUT_S,
        help="seconds without a pong before the socket counts as dead and the bot "
        "reconnects (default: %(default)s)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if any("=" not in item for item in args.option):
        return _fail("usage", "--option takes NAME=VALUE")
    if args.seat not in (None, "random", "0", "1"):
        return _fail("usage", "--seat takes 0, 1 or random")
    options = dict(item.split("=", 1) for item in args.option)
    seat = None if args.seat in (None, "random") else int(args.seat)
    if args.player_key is not None and not PLAYER_KEY.fullmatch(args.player_key):
        return _fail("usage", "--player-key takes 16-128 characters of A-Z a-z 0-9 - _")
    try:
        report = asyncio.run(
            play_game(
                args.url,
                args.game,
                args.opponent,
                args.join,
                seat,
                options,
                args.seed,
                args.timeout,
                ping_interval=args.ping_interval,
                ping_timeout=args.ping_timeout,
                player_key=args.player_key,
            )
        )
    except ServerError as exc:
        return _fail(exc.code, exc.message)
    except (OSError, TimeoutError, ConnectionError) as exc:
        return _fail("connection", f"cannot reach {' or '.join(args.url)}: {exc}")
    print(json.dumps(report.to_dict()))
    return 0


def _fail(code: str, message: str) -> int:
    """Errors are JSON lines too, so scripts read one format."""
    print(json.dumps({"error": code, "message": message}))
    return 2
