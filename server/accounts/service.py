"""Accounts in the database: sign-up, log-in, passwords, claimed guest keys, the
upgrade to a bot account, and the look-ups every other part uses (``get``, ``by_name``,
``player_ids``, ``peek_tokens``).

``app[ACCOUNTS_KEY]`` is one :class:`AccountService` on the archive's engine; its
``sessions`` (server/accounts/sessions.py) and ``tokens`` (server/accounts/tokens.py)
keep the credentials. What a name or password may be is decided in
server/accounts/names.py; hashing in server/accounts/passwords.py. Every refusal is an
:class:`AccountError` and changes nothing.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from kibitz.server.accounts.credentials import (
    Credential,
    bearer,
    digest,
    session_cookie,
    token_shaped,
)
from kibitz.server.accounts.errors import AccountError
from kibitz.server.accounts.names import (
    check_password,
    check_username,
    username_key,
    valid_username,
)
from kibitz.server.accounts.passwords import hash_password, needs_rehash, verify_password
from kibitz.server.accounts.rows import (
    ACCOUNT_COLUMNS,
    account_json,
    account_of,
    now_ms,
    roles_text,
)
from kibitz.server.accounts.sessions import SessionStore
from kibitz.server.accounts.tokens import TokenStore
from kibitz.server.archive.tables import account_players, accounts, games, tokens
from kibitz.server.domain.players import Account
from kibitz.shared.protocol.client_in import PLAYER_KEY, player_id

MAX_CLAIMS = 100  # guest keys claimed into one account
MAX_PEEK = 1000  # tokens one peek looks up, at most
DAY_MS = 86_400_000


def check_player_key(text: object) -> str:
    if not isinstance(text, str) or PLAYER_KEY.fullmatch(text) is None:
        raise AccountError(
            "auth/player_key", "a player key is 16-128 characters of A-Z a-z 0-9 - _"
        )
    return text


class AccountService:
    """Accounts on ``engine``; sessions live ``session_ttl_ms``."""

    def __init__(self, engine: AsyncEngine, session_ttl_ms: int = 30 * DAY_MS) -> None:
        self.engine = engine
        self.sessions = SessionStore(engine, session_ttl_ms)
        self.tokens = TokenStore(engine)

    # -- look-ups ---------------------------------------------------------------------
    async def get(self, account_id: int) -> Account | None:
        row = await self._row(accounts.c.id == account_id)
        return None if row is None else account_of(row)

    async def by_name(self, username: str) -> Account | None:
        """The account named ``username`` in any case, or None."""
        if not valid_username(username):
            return None
        row = await self._row(accounts.c.username_key == username_key(username))
        return None if row is None else account_of(row)

    async def player_ids(self, account_id: int) -> list[str]:
        """Every player id whose games are the account's: its own first, then claimed."""
        query = (
            sa.select(account_players.c.player_id, accounts.c.player_id.label("own"))
            .join(accounts, accounts.c.id == account_players.c.account_id)
            .where(account_players.c.account_id == account_id)
            .order_by(account_players.c.claimed_ms, account_players.c.player_id)
            .limit(MAX_CLAIMS + 1)
        )
        async with self.engine.connect() as conn:
            rows = list(await conn.execute(query))
        if not rows:
            return []
        own = str(rows[0].own)
        return [own] + [str(r.player_id) for r in rows if r.player_id != own]

    async def describe(self, account: Account) -> dict[str, Any]:
        """The account's public JSON (ACCOUNT in docs/accounts.md)."""
        async with self.engine.connect() as conn:
            created = await conn.scalar(
                sa.select(accounts.c.created_ms).where(accounts.c.id == account.id)
            )
        return account_json(account, int(created or 0))

    async def _row(self, where: Any) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(sa.select(*ACCOUNT_COLUMNS).where(where))).first()

    async def identify(self, headers: Mapping[str, str], scope: str) -> Account | None:
        """Who a request or handshake acts for: the account of its ``Authorization:
        Bearer`` token (AccountError ``auth/token`` if not a live token, ``auth/scope``
        if it lacks ``scope``, "" asking for none; the cookie is then ignored), else of
        its session cookie, else None (a guest; also for a cookie of no live session)."""
        return (await self.identify_by(headers, scope))[0]

    async def identify_by(
        self, headers: Mapping[str, str], scope: str, cookie: bool = True
    ) -> tuple[Account | None, Credential | None]:
        """:meth:`identify`, with the credential that told (None for a guest); with
        ``cookie`` False the session cookie is not read (a page of another site)."""
        token = bearer(headers)
        if token is not None:
            found = await self.tokens.find(token) if token_shaped(token) else None
            if found is None:
                raise AccountError("auth/token", "this API token is unknown or revoked", 401)
            account, scopes, token_id = found
            if scope and scope not in scopes:
                raise AccountError("auth/scope", f"this API token lacks the {scope!r} scope", 403)
            return account, Credential("token", str(token_id))
        secret = session_cookie(headers) if cookie else None
        found_account = None if secret is None else await self.sessions.account(secret)
        if found_account is None or secret is None:
            return None, None
        return found_account, Credential("session", digest(secret))

    async def live(self, credential: Credential) -> bool:
        """Whether a credential still holds: its session not ended nor expired, its token
        not revoked."""
        if credential.kind == "token":
            return await self.tokens.live(int(credential.key))
        return await self.sessions.live(credential.key)

    async def peek_tokens(
        self, secrets_: Sequence[str]
    ) -> dict[str, tuple[Account, frozenset[str]]]:
        """The live tokens among ``secrets_`` (at most MAX_PEEK, the first ones): each
        one's account (not disabled) and scopes, in one read. Unlike :meth:`identify`
        it acts for nobody: nothing is written (not even the tokens' ``used_ms``); a
        secret that is not a live token is left out."""
        wanted = {digest(s): s for s in list(secrets_)[:MAX_PEEK] if token_shaped(s)}
        if not wanted:
            return {}
        query = (
            sa.select(*ACCOUNT_COLUMNS, tokens.c.token_hash, tokens.c.scopes)
            .join(accounts, accounts.c.id == tokens.c.account_id)
            .where(
                tokens.c.token_hash.in_(sorted(wanted)),
                tokens.c.revoked_ms.is_(None),
                accounts.c.disabled_ms.is_(None),
            )
        )
        async with self.engine.connect() as conn:
            rows = list(await conn.execute(query))
        return {
            wanted[str(row.token_hash)]: (
                account_of(row),
                frozenset(s for s in str(row.scopes).split(",") if s),
            )
            for row in rows
        }

    # -- bot accounts ---------------------------------------------------------------------
    async def make_bot(self, account_id: int) -> None:
        """Turn the account into a bot account, for good (lichess's upgrade). Refused,
        with nothing changed: AccountError ``bot/already`` for a bot account,
        ``bot/played`` for one with an archived game under any of its player ids (the
        caller checks the rooms not yet archived: they are in Redis), ``auth/unknown``
        for no such account."""
        async with self.engine.begin() as conn:
            bot = await conn.scalar(sa.select(accounts.c.bot).where(accounts.c.id == account_id))
            if bot is None:
                raise AccountError("auth/unknown", "no such account", 404)
            if bot:
                raise AccountError("bot/already", "this account is a bot account already", 400)
            own = sa.select(account_players.c.player_id).where(
                account_players.c.account_id == account_id
            )
            played = await conn.scalar(
                sa.select(games.c.id)
                .where(sa.or_(games.c.player0.in_(own), games.c.player1.in_(own)))
                .limit(1)
            )
            if played is not None:
                raise AccountError("bot/played", "this account has played games", 400)
            await conn.execute(
                sa.update(accounts)
                .where(accounts.c.id == account_id, accounts.c.bot.is_(False))
                .values(bot=True)
            )

    # -- creating -----------------------------------------------------------------------
    async def signup(
        self, username: object, password: object, player_key: object = None
    ) -> Account:
        """A new account with a password (and a guest key claimed at once, if given)."""
        name = check_username(username)
        hashed = await hash_password(check_password(password))
        key = None if player_key is None else check_player_key(player_key)
        return await self.create(name, hashed, claim=key)

    async def create(
        self,
        username: str,
        password_hash: str | None,
        bot: bool = False,
        roles: frozenset[str] = frozenset(),
        claim: str | None = None,
    ) -> Account:
        """Insert an account (``username`` already checked); AccountError ``auth/taken``
        if the name is someone's in any case, ``auth/claimed`` for a key that is."""
        now, own = now_ms(), secrets.token_hex(16)
        row = {
            "username": username,
            "username_key": username_key(username),
            "password_hash": password_hash,
            "player_id": own,
            "created_ms": now,
            "roles": roles_text(roles),
            "bot": bot,
        }
        try:
            async with self.engine.begin() as conn:
                result = await conn.execute(
                    sa.insert(accounts).values(row).returning(accounts.c.id)
                )
                account_id = int(result.scalar_one())
                await _insert_claim(conn, account_id, own, now)
                if claim is not None:
                    await self._claim_in(conn, account_id, claim, now)
        except IntegrityError:
            raise AccountError("auth/taken", f"the username {username!r} is taken", 409) from None
        return Account(account_id, username, own, roles, bot)

    # -- passwords ------------------------------------------------------------------------
    async def login(self, username: object, password: object) -> Account | None:
        """The account whose name and password these are, or None (the same work either
        way: an unknown name is verified against a dummy hash). A disabled account with
        the right password: AccountError ``auth/banned``."""
        text = password if isinstance(password, str) else ""
        row = None
        if valid_username(username) and isinstance(username, str):
            row = await self._password_row(username_key(username))
        stored = None if row is None else row.password_hash
        if not await verify_password(stored, text[:2048]) or row is None:
            return None
        if row.disabled_ms is not None:
            raise AccountError("auth/banned", "this account is banned", 403)
        if stored is not None and needs_rehash(stored):
            await self._set_password(int(row.id), await hash_password(text))
        return account_of(row)

    async def _password_row(self, key: str) -> Any:
        query = sa.select(*ACCOUNT_COLUMNS, accounts.c.password_hash).where(
            accounts.c.username_key == key
        )
        async with self.engine.connect() as conn:
            return (await conn.execute(query)).first()

    async def change_password(self, account: Account, password: object, new: object) -> None:
        """Set a new password, given the current one (AccountError ``auth/failed``)."""
        fresh = check_password(new)
        row = await self._password_row(username_key(account.username))
        stored = None if row is None else row.password_hash
        current = password if isinstance(password, str) else ""
        if not await verify_password(stored, current[:2048]):
            raise AccountError("auth/failed", "wrong password", 401)
        await self._set_password(account.id, await hash_password(fresh))

    async def set_password(self, account_id: int, password: str) -> None:
        """Set a password without the old one (the operator's ``kibitz admin``)."""
        await self._set_password(account_id, await hash_password(check_password(password)))

    async def _set_password(self, account_id: int, hashed: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.update(accounts).where(accounts.c.id == account_id).values(password_hash=hashed)
            )

    # -- claiming guest keys -----------------------------------------------------------------
    async def claim(self, account_id: int, player_key: object) -> str:
        """Bring a guest key's player id (and so its games) into the account; its id.
        Claiming it again is no change; a key another account holds: ``auth/claimed``."""
        key = check_player_key(player_key)
        try:
            async with self.engine.begin() as conn:
                return await self._claim_in(conn, account_id, key, now_ms())
        except IntegrityError:  # claimed by another at the same moment
            raise AccountError(
                "auth/claimed", "that player key is another account's", 409
            ) from None

    async def _claim_in(self, conn: Any, account_id: int, key: str, now: int) -> str:
        pid = player_id(key)
        holder = await conn.scalar(
            sa.select(account_players.c.account_id).where(account_players.c.player_id == pid)
        )
        if holder is not None:
            if int(holder) != account_id:
                raise AccountError("auth/claimed", "that player key is another account's", 409)
            return pid
        count = await conn.scalar(
            sa.select(sa.func.count())
            .select_from(account_players)
            .where(account_players.c.account_id == account_id)
        )
        if int(count or 0) > MAX_CLAIMS:
            raise AccountError("auth/claims", f"at most {MAX_CLAIMS} keys per account", 409)
        await _insert_claim(conn, account_id, pid, now)
        return pid


async def _insert_claim(conn: Any, account_id: int, pid: str, now: int) -> None:
    await conn.execute(
        sa.insert(account_players).values(player_id=pid, account_id=account_id, claimed_ms=now)
    )
