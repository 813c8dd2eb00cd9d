"""``kibitz admin``: the operator's commands on the database a node uses (``--data-dir``
and ``--database`` exactly as ``kibitz serve``: a SQLite file ``games.sqlite3`` in the
data directory unless a database URL is given), migrated first as a node would.

- ``kibitz admin account create NAME [--bot] [--password-stdin]``: a new account; with
  ``--password-stdin`` its password is the first line of standard input, else it has no
  password (it cannot log in: it uses API tokens). Prints ``{"username", "id", "player",
  "bot"}``.
- ``kibitz admin token create NAME --scope play [--scope read ...] [--description TEXT]``:
  a new API token of the account (the ``admin`` scope only for an admin). Prints
  ``{"username", "token", "scopes", "id"}``; the token is shown this once.

Each prints one JSON line on stdout; a refusal prints one JSON error line (``{"type":
"error", "code", "message"}``) on stderr and exits 1; bad flags exit 2. The moderation
subcommands (roles, reports, bans, ...) are added from server/cli/admin_moderation.py
(:func:`add_moderation_commands`, the one hook).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kibitz.server.accounts.credentials import SCOPES
from kibitz.server.accounts.errors import AccountError
from kibitz.server.accounts.names import check_password, check_username
from kibitz.server.accounts.service import AccountService
from kibitz.server.archive.database import Archive, ArchiveUnavailable, sqlite_url
from kibitz.server.config import ConfigError, from_sources

Action = Callable[[AccountService, argparse.Namespace], Awaitable[dict[str, Any]]]
if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time
    SubParsers = argparse._SubParsersAction


def register(subparsers: SubParsers) -> None:
    parser = subparsers.add_parser(
        "admin",
        help="accounts, API tokens and moderation on the node's database (operators)",
        description="Operator commands on the node's database (as kibitz serve finds it).",
    )
    admin = parser.add_subparsers(dest="admin_command", metavar="COMMAND", required=True)
    account = admin.add_parser("account", help="accounts").add_subparsers(
        dest="account_command", metavar="ACTION", required=True
    )
    create = command(account, "create", "create an account", create_account)
    create.add_argument("name", help="the username (2-20 of A-Z a-z 0-9 _ -)")
    create.add_argument("--bot", action="store_true", help="mark the account as a bot")
    create.add_argument(
        "--password-stdin", action="store_true",
        help="read the password from standard input (else none: tokens only)",
    )  # fmt: skip
    token = admin.add_parser("token", help="API tokens").add_subparsers(
        dest="token_command", metavar="ACTION", required=True
    )
    made = command(token, "create", "create an API token for an account", create_token)
    made.add_argument("name", help="the account's username")
    made.add_argument(
        "--scope", dest="scopes", action="append", required=True, choices=SCOPES,
        help="a scope of the token (repeatable)",
    )  # fmt: skip
    made.add_argument("--description", default="", help="what the token is for")
    add_moderation_commands(admin)


def add_moderation_commands(admin: SubParsers) -> None:
    """The hook: server/cli/admin_moderation.py's ``register(admin)`` adds its subcommands,
    when that module is installed."""
    try:
        module = importlib.import_module("kibitz.server.cli.admin_moderation")
    except ImportError:
        return
    module.register(admin)


def command(parent: SubParsers, name: str, help_line: str, action: Action) -> Any:
    parser = parent.add_parser(name, help=help_line, description=help_line)
    parser.add_argument("--data-dir", dest="data_dir", type=Path, default=None,
                        help="as kibitz serve's (default: $KIBITZ_DATA_DIR, else "
                        "~/.local/share/kibitz)")  # fmt: skip
    parser.add_argument("--database", dest="database_url", default=None, metavar="URL",
                        help="as kibitz serve's (default: $KIBITZ_DATABASE_URL, else "
                        "games.sqlite3 in --data-dir)")  # fmt: skip
    parser.set_defaults(func=lambda args: run(action, args))
    return parser


def database_url(args: argparse.Namespace) -> str:
    """The database ``kibitz serve`` uses with the same flags and environment."""
    flags = {"data_dir": args.data_dir, "database_url": args.database_url}
    config = from_sources({k: v for k, v in flags.items() if v is not None}, os.environ)
    if config.database_url:
        return config.database_url
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return sqlite_url(config.data_dir / "games.sqlite3")


def run(action: Action, args: argparse.Namespace) -> int:
    try:
        print(json.dumps(asyncio.run(_run(action, args))), flush=True)
    except AccountError as exc:
        return refuse(exc.code, exc.message)
    except (ArchiveUnavailable, ConfigError) as exc:
        return refuse("server/unavailable", str(exc))
    return 0


def refuse(code: str, message: str) -> int:
    print(json.dumps({"type": "error", "code": code, "message": message}), file=sys.stderr)
    return 1


async def _run(action: Action, args: argparse.Namespace) -> dict[str, Any]:
    archive = await Archive.open(database_url(args))
    try:
        return await action(AccountService(archive.engine), args)
    finally:
        await archive.close()


def read_password() -> str:
    """The first line of standard input, without its line end."""
    line = sys.stdin.readline()
    return check_password(line.removesuffix("\n").removesuffix("\r"))


async def create_account(service: AccountService, args: argparse.Namespace) -> dict[str, Any]:
    name = check_username(args.name, allow_reserved=True)
    password = read_password() if args.password_stdin else None
    account = await service.create(name, None, bot=args.bot)
    if password is not None:
        await service.set_password(account.id, password)
    return {"username": account.username, "id": account.id, "player": account.player_id,
            "bot": account.bot}  # fmt: skip


async def create_token(service: AccountService, args: argparse.Namespace) -> dict[str, Any]:
    account = await service.by_name(args.name)
    if account is None:
        raise AccountError("auth/unknown", f"no account named {args.name!r}", 404)
    scopes = tuple(sorted(set(args.scopes)))
    secret, listed = await service.tokens.create(account, args.description, scopes)
    return {"username": account.username, "token": secret, "scopes": list(scopes),
            "id": listed["id"]}  # fmt: skip
