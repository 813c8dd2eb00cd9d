"""Personal API tokens: ``kbz_`` and 32 random URL-safe characters, shown once, stored as
their SHA-256, with scopes ("play", "read", "admin"; admin only for an admin account).

A revoked token (``revoked_ms`` set) is refused and no longer listed, and deleted once
revoked ``FORGET_REVOKED_MS`` ago (when its account next makes a token); ``used_ms`` is
written at most once a minute. An account holds at most ``MAX_TOKENS`` live tokens and
makes at most ``TOKENS_PER_DAY`` a day, so its rows stay bounded.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from kibitz.server.accounts.credentials import digest, new_token
from kibitz.server.accounts.errors import AccountError
from kibitz.server.accounts.rows import ACCOUNT_COLUMNS, account_of, now_ms, stale
from kibitz.server.archive.tables import accounts, tokens
from kibitz.server.domain.players import Account

MAX_TOKENS = 50  # live tokens per account
MAX_DESCRIPTION = 100
TOKENS_PER_DAY = 20  # tokens an account may make per 24 hours, revoked ones included
DAY_MS = 86_400_000
FORGET_REVOKED_MS = 30 * DAY_MS


def token_json(row: Any) -> dict[str, Any]:
    return {
        "id": int(row.id),
        "description": str(row.description),
        "scopes": [s for s in str(row.scopes).split(",") if s],
        "created_ms": int(row.created_ms),
        "used_ms": None if row.used_ms is None else int(row.used_ms),
    }


def check_description(text: object) -> str:
    if text is None:
        return ""
    if not isinstance(text, str) or len(text) > MAX_DESCRIPTION:
        raise AccountError("request/invalid", f"description: at most {MAX_DESCRIPTION} characters")
    return text


class TokenStore:
    """API tokens on the archive's engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(
        self, account: Account, description: str, scopes: tuple[str, ...]
    ) -> tuple[str, dict[str, Any]]:
        """A new token for ``account``: the secret (shown once) and its listing."""
        if "admin" in scopes and not account.is_admin:
            raise AccountError("auth/forbidden", "only an admin may have the admin scope", 403)
        secret, now = new_token(), now_ms()
        row = {
            "account_id": account.id,
            "token_hash": digest(secret),
            "description": description,
            "scopes": ",".join(scopes),
            "created_ms": now,
        }
        async with self.engine.begin() as conn:
            if await _live_count(conn, account.id) >= MAX_TOKENS:
                raise AccountError("token/limit", f"at most {MAX_TOKENS} tokens; revoke one", 409)
            if await _made_since(conn, account.id, now - DAY_MS) >= TOKENS_PER_DAY:
                raise AccountError(
                    "token/throttled", f"at most {TOKENS_PER_DAY} new tokens a day", 429
                )
            await _forget_revoked(conn, account.id, now - FORGET_REVOKED_MS)
            result = await conn.execute(sa.insert(tokens).values(row).returning(tokens.c.id))
            token_id = int(result.scalar_one())
        listed = {"id": token_id, "description": description, "scopes": list(scopes)}
        return secret, listed | {"created_ms": now, "used_ms": None}

    async def listing(self, account_id: int) -> list[dict[str, Any]]:
        query = (
            sa.select(tokens)
            .where(tokens.c.account_id == account_id, tokens.c.revoked_ms.is_(None))
            .order_by(tokens.c.id)
            .limit(MAX_TOKENS)
        )
        async with self.engine.connect() as conn:
            return [token_json(row) for row in await conn.execute(query)]

    async def revoke(self, account_id: int, token_id: int) -> bool:
        """Revoke one of the account's live tokens; False if it has no such token."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                sa.update(tokens)
                .where(
                    tokens.c.id == token_id,
                    tokens.c.account_id == account_id,
                    tokens.c.revoked_ms.is_(None),
                )
                .values(revoked_ms=now_ms())
            )
        return bool(result.rowcount)

    async def account(self, secret: str) -> tuple[Account, frozenset[str]] | None:
        """The account of a live token (not disabled) and the token's scopes, or None."""
        found = await self.find(secret)
        return None if found is None else (found[0], found[1])

    async def live(self, token_id: int) -> bool:
        """Whether the token of that id still exists and is not revoked."""
        query = sa.select(tokens.c.revoked_ms).where(tokens.c.id == token_id)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return row is not None and row.revoked_ms is None

    async def find(self, secret: str) -> tuple[Account, frozenset[str], int] | None:
        """:meth:`account`, with the token's id."""
        key, now = digest(secret), now_ms()
        query = (
            sa.select(*ACCOUNT_COLUMNS, tokens.c.id.label("t_id"), tokens.c.scopes,
                      tokens.c.used_ms, tokens.c.revoked_ms)
            .join(accounts, accounts.c.id == tokens.c.account_id)
            .where(tokens.c.token_hash == key)
        )  # fmt: skip
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None or row.revoked_ms is not None or row.disabled_ms is not None:
            return None
        if stale(row.used_ms, now):
            async with self.engine.begin() as conn:
                await conn.execute(
                    sa.update(tokens).where(tokens.c.id == row.t_id).values(used_ms=now)
                )
        scopes = frozenset(s for s in str(row.scopes).split(",") if s)
        return account_of(row), scopes, int(row.t_id)


async def _made_since(conn: Any, account_id: int, since_ms: int) -> int:
    query = (
        sa.select(sa.func.count())
        .select_from(tokens)
        .where(tokens.c.account_id == account_id, tokens.c.created_ms > since_ms)
    )
    return int((await conn.execute(query)).scalar_one())


async def _forget_revoked(conn: Any, account_id: int, before_ms: int) -> None:
    """Delete the account's tokens revoked before ``before_ms``."""
    await conn.execute(
        sa.delete(tokens).where(
            tokens.c.account_id == account_id,
            tokens.c.revoked_ms.is_not(None),
            tokens.c.revoked_ms < before_ms,
        )
    )


async def _live_count(conn: Any, account_id: int) -> int:
    query = (
        sa.select(sa.func.count())
        .select_from(tokens)
        .where(tokens.c.account_id == account_id, tokens.c.revoked_ms.is_(None))
    )
    return int((await conn.execute(query)).scalar_one())
