"""Database rows of ``accounts`` as the values the rest of the server uses (pure)."""

from __future__ import annotations

import time
from typing import Any

from kibitz.server.archive.tables import accounts
from kibitz.server.domain.players import ROLES, Account

#: The columns an :class:`Account` (and its public JSON) is made of.
ACCOUNT_COLUMNS = (
    accounts.c.id,
    accounts.c.username,
    accounts.c.player_id,
    accounts.c.roles,
    accounts.c.bot,
    accounts.c.mark,
    accounts.c.muted_until_ms,
    accounts.c.created_ms,
    accounts.c.seen_ms,
    accounts.c.disabled_ms,
)
#: ``seen_ms``, ``used_ms``: written at most this often per account, session or token.
SEEN_EVERY_MS = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_roles(text: str | None) -> frozenset[str]:
    return frozenset(r for r in (text or "").split(",") if r in ROLES)


def roles_text(roles: frozenset[str]) -> str:
    return ",".join(sorted(roles & ROLES))


def account_of(row: Any) -> Account:
    """The :class:`Account` of a row selected with :data:`ACCOUNT_COLUMNS`."""
    return Account(
        id=int(row.id),
        username=str(row.username),
        player_id=str(row.player_id),
        roles=parse_roles(row.roles),
        bot=bool(row.bot),
        mark=row.mark,
        muted_until_ms=None if row.muted_until_ms is None else int(row.muted_until_ms),
    )


def account_json(account: Account, created_ms: int) -> dict[str, Any]:
    """An account as the API shows it (docs/accounts.md, ACCOUNT)."""
    return {
        "username": account.username,
        "player": account.player_id,
        "roles": sorted(account.roles),
        "bot": account.bot,
        "mark": account.mark,
        "created_ms": created_ms,
    }


def stale(seen_ms: int | None, now: int) -> bool:
    """Whether a ``seen_ms``/``used_ms`` is old enough to be written again."""
    return seen_ms is None or now - int(seen_ms) >= SEEN_EVERY_MS
