"""The moderation service on real SQLite and PostgreSQL databases, its bans mirrored in a
real Redis: blocks both ways, reports, mutes, marks, roles, bans and their mirror (rebuilt
when Redis lost it, caught up when the table changed under it), the audit rows every
action writes, and abandonments recorded once with the penalty they lead to."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from kibitz.server.archive import tables as t
from kibitz.server.archive.database import Archive
from kibitz.server.domain.addresses import address_group
from kibitz.server.domain.players import Account
from kibitz.server.moderation.rules import FIRST_WAIT_MS, ModerationError
from kibitz.server.moderation.service import Moderation, account_of
from kibitz.shared.bus.bans import BanMirror
from kibitz.shared.bus.connect import command_client
from kibitz.shared.bus.embedded import EmbeddedRedis


async def make_account(archive: Archive, name: str, roles: str = "") -> Account:
    async with archive.engine.begin() as conn:
        await conn.execute(
            t.accounts.insert().values(
                username=name,
                username_key=name.lower(),
                player_id=secrets.token_hex(16),
                created_ms=int(time.time() * 1000),
                roles=roles,
            )
        )
        row = (await conn.execute(sa.select(t.accounts).where(t.accounts.c.username == name))).one()
    return account_of(row)


@pytest.fixture
async def mod(archive: Archive, own_redis: EmbeddedRedis) -> AsyncIterator[Moderation]:
    redis = command_client(own_redis.url)
    mirror = BanMirror(redis)
    await mirror.clear()
    yield Moderation(archive.engine, mirror)
    await mirror.clear()
    await redis.aclose()


async def audit_actions(mod: Moderation) -> list[str]:
    return [row["action"] for row in await mod.audit(100)]


async def test_blocks_count_both_ways_and_are_bounded_to_real_accounts(
    archive: Archive, mod: Moderation
) -> None:
    ann, bob, cy = [await make_account(archive, n) for n in ("Ann", "Bob", "Cy")]
    assert await mod.block(ann, "bob") == "Bob"  # any case
    await mod.block(ann, "BOB")  # twice: still one block
    assert [b["username"] for b in await mod.blocks(ann.id)] == ["Bob"]
    assert await mod.blocked(ann.id, bob.id) and await mod.blocked(bob.id, ann.id)
    assert not await mod.blocked(ann.id, cy.id) and not await mod.blocked(None, bob.id)
    assert await mod.hidden_names(bob.id) == frozenset({"ann"})
    assert await mod.hidden_names(ann.id) == frozenset({"bob"})
    with pytest.raises(ModerationError) as refused:
        await mod.block(ann, "nobody")
    assert (refused.value.code, refused.value.status) == ("mod/not_found", 404)
    with pytest.raises(ModerationError):
        await mod.block(ann, "ann")  # oneself
    await mod.unblock(ann, "bob")
    assert not await mod.blocked(ann.id, bob.id)
    assert await mod.hidden_names(bob.id) == frozenset()


async def test_reports_are_listed_closed_once_and_audited(
    archive: Archive, mod: Moderation
) -> None:
    ann, bob = await make_account(archive, "ann"), await make_account(archive, "bob")
    judge = await make_account(archive, "judge", "moderator")
    first = await mod.report(ann, {"username": "bob", "reason": "abuse", "line": "rude words"})
    with pytest.raises(ModerationError):
        await mod.report(ann, {"username": "bob", "reason": "no such reason"})
    with pytest.raises(ModerationError):
        await mod.report(ann, {"username": "bob", "reason": "abuse", "room": "../../etc"})
    listed = await mod.reports()
    assert [(r["id"], r["reporter"], r["username"], r["line"]) for r in listed] == [
        (first, "ann", "bob", "rude words")
    ]
    await mod.close_report(judge, first, "warned them")
    assert await mod.reports() == []
    closed = await mod.reports(include_closed=True)
    assert closed[0]["closed_by"] == "judge" and closed[0]["resolution"] == "warned them"
    with pytest.raises(ModerationError) as again:
        await mod.close_report(judge, first, "twice")
    assert again.value.code == "mod/closed"
    rows = await mod.audit(10)
    assert [(r["action"], r["actor"], r["target"]) for r in rows] == [
        ("report.close", "judge", str(first))
    ]
    assert bob.id != ann.id


async def test_mutes_marks_and_roles_change_the_account_and_write_audit_rows(
    archive: Archive, mod: Moderation
) -> None:
    await make_account(archive, "bob")
    until = await mod.mute(None, "bob", 10)
    assert until is not None and until > time.time() * 1000 + 9 * 60_000
    account = await mod.by_name("BOB")
    assert account is not None and account.muted(int(time.time() * 1000))
    assert await mod.muted_until(account.id) == until
    await mod.mute(None, "bob", 0)
    assert await mod.muted_until(account.id) is None
    assert await mod.set_mark(None, "bob", "engine") == "engine"
    assert await mod.set_role(None, "bob", "moderator", True) == ["moderator"]
    assert await mod.set_role(None, "bob", "admin", True) == ["admin", "moderator"]
    assert await mod.set_role(None, "bob", "moderator", False) == ["admin"]
    account = await mod.by_name("bob")
    assert account is not None and account.mark == "engine" and account.is_admin
    with pytest.raises(ModerationError):
        await mod.set_role(None, "bob", "root", True)
    with pytest.raises(ModerationError):
        await mod.mute(None, "bob", -1)
    assert await audit_actions(mod) == ["revoke", "grant", "grant", "mark", "mute", "mute"]


async def test_bans_are_refused_through_the_mirror_and_lifted(
    archive: Archive, mod: Moderation
) -> None:
    bob = await make_account(archive, "bob")
    admin = await make_account(archive, "root", "admin")
    async with archive.engine.begin() as conn:
        await conn.execute(
            t.sessions.insert().values(
                id_hash="a" * 64, account_id=bob.id, created_ms=1, expires_ms=2**50, seen_ms=1
            )
        )
    assert await mod.banned(bob.id, "10.1.2.3") is None
    ban = await mod.ban(admin, "account", "Bob", "spamming the chat")
    assert ban["target"] == "bob" and ban["expires_ms"] is None
    assert "spamming the chat" in (await mod.banned(bob.id, "10.1.2.3") or "")
    assert await mod.banned(admin.id, "10.1.2.3") is None
    async with archive.engine.connect() as conn:
        assert await conn.scalar(sa.select(sa.func.count()).select_from(t.sessions)) == 0
        disabled = await conn.scalar(
            sa.select(t.accounts.c.disabled_ms).where(t.accounts.c.id == bob.id)
        )
    assert disabled is not None
    address = await mod.ban(admin, "address", "10.1.2.3", "a flood", hours=2)
    assert await mod.banned(None, "10.1.2.3") is not None
    assert await mod.banned(None, "10.1.2.4") is None
    with pytest.raises(ModerationError):
        await mod.ban(admin, "address", "10.1.2", "bad address")
    with pytest.raises(ModerationError):
        await mod.ban(admin, "account", "root", "oneself")
    assert {b["id"] for b in await mod.bans()} == {ban["id"], address["id"]}
    await mod.unban(admin, ban["id"])
    assert await mod.banned(bob.id, None) is None
    with pytest.raises(ModerationError) as again:
        await mod.unban(admin, ban["id"])
    assert again.value.code == "mod/closed"
    assert (await mod.by_name("bob")) is not None
    actions = await audit_actions(mod)
    assert actions == ["unban", "ban", "ban"]


async def test_the_mirror_is_rebuilt_when_lost_and_caught_up_with_the_table(
    archive: Archive, mod: Moderation
) -> None:
    bob = await make_account(archive, "bob")
    assert mod.mirror is not None
    # A ban made by another process without Redis (``kibitz admin``).
    offline = Moderation(archive.engine)
    await offline.ban(None, "account", "bob", "made offline")
    assert await mod.sync() is True  # the table changed under the mirror
    assert await mod.banned(bob.id, None) is not None
    assert await mod.sync() is False  # nothing new
    await mod.mirror.clear()  # Redis lost it: the next check rebuilds it
    assert await mod.mirror.lookup([]) is None
    assert await mod.banned(bob.id, None) is not None
    assert await mod.mirror.lookup([]) == []
    [ban] = await offline.bans()
    await offline.unban(None, ban["id"])
    assert await mod.sync() is True
    assert await mod.banned(bob.id, None) is None


async def test_an_expired_ban_refuses_nothing(archive: Archive, mod: Moderation) -> None:
    bob = await make_account(archive, "bob")
    async with archive.engine.begin() as conn:
        await conn.execute(
            t.bans.insert().values(
                kind="account", target=str(bob.id), reason="old", created_ms=1, expires_ms=2
            )
        )
    assert await mod.sync(force=True)
    assert await mod.banned(bob.id, None) is None


async def test_abandonments_are_recorded_once_and_escalate_the_wait(
    archive: Archive, mod: Moderation
) -> None:
    bob = await make_account(archive, "bob")
    assert await mod.seek_wait_ms(bob.id) == 0
    assert await mod.record_abandonment(bob.id, "game1", "timeout")
    assert not await mod.record_abandonment(bob.id, "game1", "timeout")  # once per game
    assert await mod.record_abandonment(bob.id, "game2", "abort")
    assert await mod.seek_wait_ms(bob.id) == 0  # two are free
    assert await mod.record_abandonment(bob.id, "game3", "timeout")
    wait = await mod.seek_wait_ms(bob.id)
    assert FIRST_WAIT_MS - 5_000 < wait <= FIRST_WAIT_MS
    assert await mod.record_abandonment(bob.id, "game4", "abort")
    assert 2 * FIRST_WAIT_MS - 5_000 < await mod.seek_wait_ms(bob.id) <= 2 * FIRST_WAIT_MS
    assert await mod.seek_wait_ms(None) == 0
    with pytest.raises(ValueError):
        await mod.record_abandonment(bob.id, "game5", "resigned")


async def test_an_ipv6_ban_covers_its_64_and_a_mapped_ipv4_ban_its_ipv4(
    archive: Archive, mod: Moderation
) -> None:
    # The nodes see a client as server/gateway/limits.py's group of its address.
    made = await mod.ban(None, "address", "2001:db8::1", "a flood from a /64")
    assert made["target"] == "2001:db8::/64"
    assert await mod.banned(None, address_group("2001:db8::5")) is not None
    assert await mod.banned(None, address_group("2001:db8:0:1::5")) is None  # another /64
    await mod.ban(None, "address", "::ffff:203.0.113.7", "mapped")
    assert await mod.banned(None, address_group("203.0.113.7")) is not None
    # A row written before bans were stored as groups still refuses (the mirror groups it).
    async with archive.engine.begin() as conn:
        await conn.execute(
            t.bans.insert().values(
                kind="address", target="2001:db8:7::9", reason="old row", created_ms=1
            )
        )
    assert await mod.sync()
    assert await mod.banned(None, address_group("2001:db8:7::1")) is not None
    assert {b["target"] for b in await mod.bans()} >= {"2001:db8::/64", "203.0.113.7"}


async def test_an_expired_account_ban_enables_the_account_again_once(
    archive: Archive, mod: Moderation
) -> None:
    bob, cy = await make_account(archive, "bob"), await make_account(archive, "cy")
    first = await mod.ban(None, "account", "bob", "a day off", hours=1)
    await mod.ban(None, "account", "cy", "an hour", hours=1)
    await mod.ban(None, "account", "cy", "for good")  # cy stays banned after the first ends
    assert await mod.expire_account_bans() == []  # nothing expired yet
    async with archive.engine.begin() as conn:
        await conn.execute(
            t.bans.update()
            .where(t.bans.c.expires_ms.is_not(None))
            .values(expires_ms=int(time.time() * 1000) - 1000)
        )
    assert await mod.banned(bob.id, None) is None
    assert await mod.expire_account_bans() == ["bob"]
    assert await mod.expire_account_bans() == []  # once
    async with archive.engine.connect() as conn:
        rows = (await conn.execute(sa.select(t.accounts.c.id, t.accounts.c.disabled_ms))).all()
    disabled = {row.id: row.disabled_ms for row in rows}
    assert disabled[bob.id] is None and disabled[cy.id] is not None
    [row] = [r for r in await mod.audit(10) if r["action"] == "ban.expired"]
    assert (row["actor"], row["target"], row["detail"]) == (
        None,
        "account:bob",
        {"ids": [first["id"]]},
    )
