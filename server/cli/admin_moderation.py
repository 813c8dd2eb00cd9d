"""``kibitz admin``'s moderation subcommands: roles, reports, bans, mutes, marks and the
audit log, on the database a node uses (``--data-dir``/``--database`` as ``kibitz serve``).

Each prints what it did or found as JSON lines on stdout, and writes its audit row (actor
null: the operator). A refusal prints one JSON error line (``{"type": "error", "code",
"message"}``) on stderr and exits 1 (``server/unavailable`` for a database that cannot be
opened or a bad setting); bad flags exit 2. The commands do not talk to Redis:
a running node notices a ban made or lifted here within a second (it compares the
``bans`` table with its Redis mirror every second: server/moderation/service.py).

The subcommands (hooked into server/cli/admin.py by :func:`register`):
``grant NAME admin|moderator``, ``revoke NAME ROLE``, ``reports [--all]``,
``report close ID --resolution TEXT``, ``ban account NAME|address ADDR [--hours H] --reason
TEXT``, ``unban ID``, ``bans``, ``mute NAME --minutes M``, ``mark NAME MARK|--clear``,
``audit [--limit N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kibitz.server.archive.database import Archive, ArchiveUnavailable, sqlite_url
from kibitz.server.config import ConfigError, from_sources
from kibitz.server.moderation.rules import ModerationError
from kibitz.server.moderation.service import Moderation

Action = Callable[[Moderation, argparse.Namespace], Awaitable[list[dict[str, Any]]]]


def add_database_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir", dest="data_dir", type=Path, default=None, help="as kibitz serve's"
    )
    parser.add_argument(
        "--database", dest="database_url", default=None, help="as kibitz serve's (a URL)"
    )


def database_url(args: argparse.Namespace) -> str:
    """The database of ``kibitz serve`` given the same flags and environment."""
    flags = {"data_dir": args.data_dir, "database_url": args.database_url}
    config = from_sources({k: v for k, v in flags.items() if v is not None}, os.environ)
    if config.database_url:
        return config.database_url
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return sqlite_url(config.data_dir / "games.sqlite3")


def register(admin: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the moderation subcommands to ``kibitz admin``'s subparsers."""

    def command(name: str, help_line: str, action: Action) -> argparse.ArgumentParser:
        parser = admin.add_parser(name, help=help_line, description=help_line)
        add_database_flags(parser)
        parser.set_defaults(func=lambda args: run(action, args))
        return parser

    for name, on, help_line in (
        ("grant", True, "give an account a role (admin, moderator): the first admin"),
        ("revoke", False, "take a role (admin, moderator) from an account"),
    ):
        p = command(name, help_line, _role(on))
        p.add_argument("username")
        p.add_argument("role", choices=("admin", "moderator"))
    p = command("reports", "list the open reports (--all: closed ones too)", _reports)
    p.add_argument("--all", action="store_true")
    p = command("report", "act on a report: report close ID --resolution TEXT", _close)
    p.add_argument("verb", choices=("close",))
    p.add_argument("id", type=int)
    p.add_argument("--resolution", required=True)
    p = command("ban", "ban an account or an address", _ban)
    p.add_argument("kind", choices=("account", "address"))
    p.add_argument("target", help="the account's name, or the IP address")
    p.add_argument("--hours", type=int, default=None, help="default: for good")
    p.add_argument("--reason", required=True)
    p = command("unban", "lift a ban by its id", _unban)
    p.add_argument("id", type=int)
    command("bans", "list the active bans", _bans)
    p = command("mute", "mute an account's chat (--minutes 0 lifts it)", _mute)
    p.add_argument("username")
    p.add_argument("--minutes", type=int, required=True)
    p = command("mark", "set an account's public mark (--clear removes it)", _mark)
    p.add_argument("username")
    p.add_argument("mark", nargs="?", default=None)
    p.add_argument("--clear", action="store_true")
    p = command("audit", "the audit log, newest first", _audit)
    p.add_argument("--limit", type=int, default=50)


def run(action: Action, args: argparse.Namespace) -> int:
    try:
        lines = asyncio.run(_with_service(database_url(args), action, args))
    except ModerationError as exc:
        return refuse(exc.code, exc.message)
    except (ArchiveUnavailable, ConfigError) as exc:
        return refuse("server/unavailable", str(exc))
    for line in lines:
        print(json.dumps(line), flush=True)
    return 0


def refuse(code: str, message: str) -> int:
    print(json.dumps({"type": "error", "code": code, "message": message}), file=sys.stderr)
    return 1


async def _with_service(url: str, action: Action, args: argparse.Namespace) -> list[dict[str, Any]]:
    archive = await Archive.open(url)
    try:
        return await action(Moderation(archive.engine), args)
    finally:
        await archive.close()


def _role(on: bool) -> Action:
    async def act(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
        roles = await mod.set_role(None, args.username, args.role, on)
        return [{"username": args.username, "roles": roles}]

    return act


async def _reports(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    return await mod.reports(include_closed=args.all)


async def _close(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    await mod.close_report(None, args.id, args.resolution)
    return [{"closed": args.id}]


async def _ban(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    return [{"ban": await mod.ban(None, args.kind, args.target, args.reason, args.hours)}]


async def _unban(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    await mod.unban(None, args.id)
    return [{"lifted": args.id}]


async def _bans(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    return await mod.bans()


async def _mute(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    until = await mod.mute(None, args.username, args.minutes)
    return [{"username": args.username, "muted_until_ms": until}]


async def _mark(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.clear == (args.mark is not None):
        raise ModerationError("mod/invalid", "give a mark, or --clear (not both)")
    value = await mod.set_mark(None, args.username, args.mark)
    return [{"username": args.username, "mark": value}]


async def _audit(mod: Moderation, args: argparse.Namespace) -> list[dict[str, Any]]:
    return await mod.audit(args.limit)
