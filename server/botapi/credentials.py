"""Which of the credentials the node's open API streams were opened with still hold:
the batched read behind the keep-alive loop's credential check (events.py).

A stream is opened with an API token (its row id) or, for the browser, a session (its
id's SHA-256); it must stop serving once that credential ends: the token revoked, the
session logged out or expired, the account banned (a ban disables the account and
deletes its sessions). :func:`live_credentials` answers for every stream due at once, one
query per kind of credential, where ``AccountService.live`` would ask once per stream.
Its rules are those of ``TokenStore.find`` and ``SessionStore.account``
(server/accounts/), read-only: nothing is written (no ``used_ms``, no ``seen_ms``).
"""

from __future__ import annotations

from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from kibitz.server.accounts.rows import now_ms
from kibitz.server.archive.tables import accounts, sessions, tokens


async def live_credentials(
    engine: AsyncEngine, token_ids: Collection[int], digests: Collection[str]
) -> tuple[set[int], set[str]]:
    """The live ones among the tokens ``token_ids`` (not revoked, account not disabled)
    and the sessions ``digests`` (not expired, account not disabled): at most two
    queries (none for an empty kind). A node holds at most 1,000 streams of each of four
    kinds, so a query names at most 4,000 ids, within every database's bound on
    parameters. Errors are the database's (SQLAlchemyError, OSError)."""
    live_tokens: set[int] = set()
    live_sessions: set[str] = set()
    if not token_ids and not digests:
        return live_tokens, live_sessions
    async with engine.connect() as conn:
        if token_ids:
            query = (
                sa.select(tokens.c.id)
                .join(accounts, accounts.c.id == tokens.c.account_id)
                .where(
                    tokens.c.id.in_(sorted(set(token_ids))),
                    tokens.c.revoked_ms.is_(None),
                    accounts.c.disabled_ms.is_(None),
                )
            )
            live_tokens = {int(row.id) for row in await conn.execute(query)}
        if digests:
            query = (
                sa.select(sessions.c.id_hash)
                .join(accounts, accounts.c.id == sessions.c.account_id)
                .where(
                    sessions.c.id_hash.in_(sorted(set(digests))),
                    sessions.c.expires_ms > now_ms(),
                    accounts.c.disabled_ms.is_(None),
                )
            )
            live_sessions = {str(row.id_hash) for row in await conn.execute(query)}
    return live_tokens, live_sessions
