"""Accounts, sessions and tokens on both real databases (SQLite and PostgreSQL, the
``archive`` fixture): the rules of server/accounts/ without HTTP."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import sqlalchemy as sa

from kibitz.server.accounts.credentials import digest
from kibitz.server.accounts.errors import AccountError
from kibitz.server.accounts.service import AccountService
from kibitz.server.accounts.tokens import TOKENS_PER_DAY
from kibitz.server.archive.database import Archive
from kibitz.server.archive.tables import accounts, sessions, tokens
from kibitz.shared.protocol.client_in import player_id

PASSWORD = "correct horse"
DAY_MS = 86_400_000


def name() -> str:
    return "u" + uuid.uuid4().hex[:10]


@pytest.fixture
def service(archive: Archive) -> AccountService:
    return AccountService(archive.engine, session_ttl_ms=60_000)


async def test_sign_up_then_log_in_in_any_case(service: AccountService) -> None:
    account = await service.signup("Alice_" + name()[:8], PASSWORD)
    assert len(account.player_id) == 32
    again = await service.login(account.username.upper(), PASSWORD)
    assert again == account
    assert await service.by_name(account.username.lower()) == account
    assert await service.get(account.id) == account
    assert await service.player_ids(account.id) == [account.player_id]


async def test_a_name_is_unique_whatever_its_case(service: AccountService) -> None:
    first = name()
    await service.signup(first, PASSWORD)
    with pytest.raises(AccountError) as refused:
        await service.signup(first.upper(), PASSWORD)
    assert refused.value.code == "auth/taken" and refused.value.status == 409


@pytest.mark.parametrize(
    "bad",
    ["a", "x" * 21, "_lead", "-lead", "has space", "Аlice", "al\u200bice", "bob'--", "",
     "admin", "ADMIN", 42, None],
)  # fmt: skip
async def test_names_outside_the_alphabet_are_refused(service: AccountService, bad: object) -> None:
    with pytest.raises(AccountError) as refused:
        await service.signup(bad, PASSWORD)
    assert refused.value.code == "auth/username"


@pytest.mark.parametrize("bad", ["short", "x" * 1025, None, 12345678])
async def test_passwords_out_of_bounds_are_refused(service: AccountService, bad: object) -> None:
    with pytest.raises(AccountError) as refused:
        await service.signup(name(), bad)
    assert refused.value.code == "auth/password"


async def test_a_wrong_password_or_unknown_name_logs_nobody_in(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    assert await service.login(account.username, PASSWORD + "!") is None
    assert await service.login(name(), PASSWORD) is None
    assert await service.login("' OR 1=1 --", PASSWORD) is None


async def test_an_account_without_password_cannot_log_in(service: AccountService) -> None:
    account = await service.create(name(), None, bot=True)
    assert account.bot
    assert await service.login(account.username, "") is None
    assert await service.login(account.username, PASSWORD) is None


async def test_a_session_acts_for_its_account_until_closed(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    first = await service.sessions.open(account.id, "127.0.0.1")
    second = await service.sessions.open(account.id, "127.0.0.1")
    assert first != second
    assert await service.sessions.account(first) == account
    await service.sessions.close(first)
    assert await service.sessions.account(first) is None
    assert await service.sessions.account(second) == account


async def test_only_the_hash_of_a_session_is_stored(
    service: AccountService, archive: Archive
) -> None:
    account = await service.signup(name(), PASSWORD)
    secret = await service.sessions.open(account.id, None)
    async with archive.engine.connect() as conn:
        stored = (await conn.execute(sa.select(sessions.c.id_hash))).scalars().all()
    assert digest(secret) in stored and secret not in stored


async def test_an_expired_session_is_refused_and_deleted(archive: Archive) -> None:
    service = AccountService(archive.engine, session_ttl_ms=300)
    account = await service.signup(name(), PASSWORD)
    secret = await service.sessions.open(account.id, None)
    assert await service.sessions.account(secret) == account
    await asyncio.sleep(0.4)
    assert await service.sessions.account(secret) is None
    async with archive.engine.connect() as conn:
        left = await conn.scalar(
            sa.select(sa.func.count()).select_from(sessions).where(
                sessions.c.id_hash == digest(secret))
        )  # fmt: skip
    assert left == 0


async def test_closing_all_sessions_can_keep_one(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    kept, *others = [await service.sessions.open(account.id, None) for _ in range(3)]
    assert await service.sessions.close_all(account.id, keep=kept) == 2
    assert await service.sessions.account(kept) == account
    assert all([await service.sessions.account(s) is None for s in others])


async def test_a_disabled_account_has_no_session(service: AccountService, archive: Archive) -> None:
    account = await service.signup(name(), PASSWORD)
    secret = await service.sessions.open(account.id, None)
    async with archive.engine.begin() as conn:
        await conn.execute(
            sa.update(accounts).where(accounts.c.id == account.id).values(disabled_ms=1)
        )
    assert await service.sessions.account(secret) is None
    with pytest.raises(AccountError) as refused:
        await service.login(account.username, PASSWORD)
    assert refused.value.code == "auth/banned"


async def test_changing_the_password_needs_the_old_one(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    with pytest.raises(AccountError) as refused:
        await service.change_password(account, "not it at all", "new password")
    assert refused.value.code == "auth/failed"
    await service.change_password(account, PASSWORD, "new password")
    assert await service.login(account.username, PASSWORD) is None
    assert await service.login(account.username, "new password") == account


async def test_claiming_a_guest_key_adds_its_player(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    key = uuid.uuid4().hex
    assert await service.claim(account.id, key) == player_id(key)
    assert await service.claim(account.id, key) == player_id(key)  # again: no change
    assert await service.player_ids(account.id) == [account.player_id, player_id(key)]
    other = await service.signup(name(), PASSWORD)
    with pytest.raises(AccountError) as refused:
        await service.claim(other.id, key)
    assert refused.value.code == "auth/claimed"
    with pytest.raises(AccountError) as bad:
        await service.claim(other.id, "short")
    assert bad.value.code == "auth/player_key"


async def test_sign_up_with_a_key_claims_it(service: AccountService) -> None:
    key = uuid.uuid4().hex
    account = await service.signup(name(), PASSWORD, key)
    assert player_id(key) in await service.player_ids(account.id)


async def test_tokens_have_scopes_and_can_be_revoked(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    secret, listed = await service.tokens.create(account, "bot", ("play",))
    assert secret.startswith("kbz_") and len(secret) == 36
    assert await service.tokens.account(secret) == (account, frozenset({"play"}))
    assert [t["id"] for t in await service.tokens.listing(account.id)] == [listed["id"]]
    with pytest.raises(AccountError) as refused:
        await service.tokens.create(account, "", ("admin",))
    assert refused.value.code == "auth/forbidden"
    assert await service.tokens.revoke(account.id, listed["id"])
    assert not await service.tokens.revoke(account.id, listed["id"])
    assert await service.tokens.account(secret) is None
    assert await service.tokens.listing(account.id) == []


async def test_nobody_revokes_another_accounts_token(service: AccountService) -> None:
    owner = await service.signup(name(), PASSWORD)
    other = await service.signup(name(), PASSWORD)
    secret, listed = await service.tokens.create(owner, "", ("read",))
    assert not await service.tokens.revoke(other.id, listed["id"])
    assert await service.tokens.account(secret) is not None


async def test_identify_reads_token_then_cookie(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    cookie = await service.sessions.open(account.id, None)
    token, _ = await service.tokens.create(account, "", ("read",))
    assert await service.identify({"Cookie": f"kibitz_session={cookie}"}, "play") == account
    assert await service.identify({}, "play") is None
    assert await service.identify({"Authorization": f"Bearer {token}"}, "read") == account
    for headers, code in (
        ({"Authorization": f"Bearer {token}"}, "auth/scope"),
        ({"Authorization": "Bearer kbz_" + "x" * 32}, "auth/token"),
        ({"Authorization": "Bearer nonsense", "Cookie": f"kibitz_session={cookie}"}, "auth/token"),
    ):
        with pytest.raises(AccountError) as refused:
            await service.identify(headers, "play")
        assert refused.value.code == code


async def test_tokens_revoked_long_ago_go_when_one_is_made(
    service: AccountService, archive: Archive
) -> None:
    account = await service.signup(name(), PASSWORD)
    made = [(await service.tokens.create(account, f"t{i}", ("read",)))[1]["id"] for i in range(3)]
    for token_id in made:
        assert await service.tokens.revoke(account.id, token_id)
    long_ago = int(time.time() * 1000) - 31 * DAY_MS
    async with archive.engine.begin() as conn:  # two were revoked 31 days ago
        await conn.execute(
            sa.update(tokens).where(tokens.c.id.in_(made[:2])).values(revoked_ms=long_ago)
        )
    await service.tokens.create(account, "new", ("read",))
    async with archive.engine.connect() as conn:
        left = await conn.scalars(
            sa.select(tokens.c.id).where(tokens.c.account_id == account.id).order_by(tokens.c.id)
        )
        ids = list(left)
    assert made[0] not in ids and made[1] not in ids
    assert made[2] in ids and len(ids) == 2  # revoked lately: kept, with the new one


async def test_an_account_makes_at_most_so_many_tokens_a_day(service: AccountService) -> None:
    account = await service.signup(name(), PASSWORD)
    for i in range(TOKENS_PER_DAY):
        _, listed = await service.tokens.create(account, f"t{i}", ("read",))
        assert await service.tokens.revoke(account.id, listed["id"])  # revoking gives none back
    with pytest.raises(AccountError) as refused:
        await service.tokens.create(account, "one more", ("read",))
    assert (refused.value.code, refused.value.status) == ("token/throttled", 429)
    other = await service.signup(name(), PASSWORD)
    await service.tokens.create(other, "", ("read",))  # another account is not held up
