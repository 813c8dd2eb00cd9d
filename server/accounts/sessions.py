"""Log-in sessions in the database: the cookie's random id, stored as its SHA-256.

A session lives ``ttl_ms`` from its creation (``NodeConfig.session_ttl_s``); an expired one
is refused and deleted when shown. An account keeps at most ``MAX_SESSIONS`` (the oldest
go first), and every new session deletes up to ``SWEEP`` expired ones of anybody, so the
table stays bounded without a loop of its own. ``seen_ms`` (the session's and the
account's) is written at most once a minute.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from kibitz.server.accounts.credentials import digest, new_session_id
from kibitz.server.accounts.rows import ACCOUNT_COLUMNS, account_of, now_ms, stale
from kibitz.server.archive.tables import accounts, sessions
from kibitz.server.domain.players import Account

MAX_SESSIONS = 32  # per account
SWEEP = 100  # expired sessions deleted per new session
MAX_ADDRESS = 64  # characters of the address kept


class SessionStore:
    """Sessions on the archive's engine."""

    def __init__(self, engine: AsyncEngine, ttl_ms: int) -> None:
        self.engine = engine
        self.ttl_ms = ttl_ms

    async def open(self, account_id: int, address: str | None) -> str:
        """A new session for the account; its secret id (for the cookie only)."""
        secret, now = new_session_id(), now_ms()
        row = {
            "id_hash": digest(secret),
            "account_id": account_id,
            "created_ms": now,
            "expires_ms": now + self.ttl_ms,
            "seen_ms": now,
            "address": (address or "")[:MAX_ADDRESS] or None,
        }
        async with self.engine.begin() as conn:
            await conn.execute(sa.insert(sessions).values(row))
            await _keep_newest(conn, account_id)
            await _sweep(conn, now)
        return secret

    async def account(self, secret: str) -> Account | None:
        """The account of a live session (not disabled), or None; an expired one is
        deleted."""
        now, key = now_ms(), digest(secret)
        query = (
            sa.select(*ACCOUNT_COLUMNS, sessions.c.expires_ms, sessions.c.seen_ms.label("s_seen"))
            .join(accounts, accounts.c.id == sessions.c.account_id)
            .where(sessions.c.id_hash == key)
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        if int(row.expires_ms) <= now:
            await self.close(secret)
            return None
        if row.disabled_ms is not None:
            return None
        if stale(row.s_seen, now) or stale(row.seen_ms, now):
            await self._seen(key, int(row.id), now)
        return account_of(row)

    async def live(self, id_hash: str) -> bool:
        """Whether the session whose id has this SHA-256 still exists and has not expired."""
        query = sa.select(sessions.c.expires_ms).where(sessions.c.id_hash == id_hash)
        async with self.engine.connect() as conn:
            expires = await conn.scalar(query)
        return expires is not None and int(expires) > now_ms()

    async def _seen(self, key: str, account_id: int, now: int) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.update(sessions).where(sessions.c.id_hash == key).values(seen_ms=now)
            )
            await conn.execute(
                sa.update(accounts).where(accounts.c.id == account_id).values(seen_ms=now)
            )

    async def close(self, secret: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(sessions).where(sessions.c.id_hash == digest(secret)))

    async def close_all(self, account_id: int, keep: str | None = None) -> int:
        """End every session of the account but ``keep``'s; how many ended."""
        where = sessions.c.account_id == account_id
        if keep is not None:
            where = sa.and_(where, sessions.c.id_hash != digest(keep))
        async with self.engine.begin() as conn:
            result = await conn.execute(sa.delete(sessions).where(where))
        return int(result.rowcount or 0)


async def _keep_newest(conn: Any, account_id: int) -> None:
    """Delete the account's sessions past the newest MAX_SESSIONS."""
    newest = (
        sa.select(sessions.c.id_hash)
        .where(sessions.c.account_id == account_id)
        .order_by(sessions.c.created_ms.desc(), sessions.c.id_hash)
        .limit(MAX_SESSIONS)
    )
    keep = [r.id_hash for r in await conn.execute(newest)]
    await conn.execute(
        sa.delete(sessions).where(
            sessions.c.account_id == account_id, sessions.c.id_hash.not_in(keep)
        )
    )


async def _sweep(conn: Any, now: int) -> None:
    """Delete up to SWEEP expired sessions (the index on expires_ms finds them)."""
    expired = (
        sa.select(sessions.c.id_hash)
        .where(sessions.c.expires_ms <= now)
        .order_by(sessions.c.expires_ms)
        .limit(SWEEP)
    )
    hashes = [r.id_hash for r in await conn.execute(expired)]
    if hashes:
        await conn.execute(sa.delete(sessions).where(sessions.c.id_hash.in_(hashes)))
