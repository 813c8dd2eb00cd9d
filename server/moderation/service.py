"""The moderation service (``app[MODERATION_KEY]``, and ``kibitz admin``'s moderation
commands): blocks, reports, mutes, marks, roles, bans, the audit log and abandonments,
on the Archive's database engine (SQLAlchemy Core), with the active bans mirrored in Redis
(shared/bus/bans.py) so that every node refuses a ban within a second.

What is valid and what a penalty is are decided in server/moderation/rules.py; this module
reads and writes. Every moderator or admin action writes its audit row in the transaction
that makes the change (``actor_id`` None: the operator, through ``kibitz admin``).

The ban mirror: the database is the truth. A ban made or lifted here is written to the
mirror at once; a node's :meth:`Moderation.run` loop compares, every ``SYNC_S``, a cheap
summary of the ``bans`` table (last id, last lift) with the one it last mirrored and
rewrites the mirror whole when it changed (a ban made by ``kibitz admin``, which does not
talk to Redis) or when the mirror is missing (Redis restarted). :meth:`banned` is one
Redis read (``HMGET``). An address ban is stored, mirrored and matched as the group the
gateway counts a client as (an IPv6 address's /64). The same loop enables again the
accounts whose last ban expired (:meth:`Moderation.expire_account_bans`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from kibitz.server.archive import tables as t
from kibitz.server.domain.addresses import address_group
from kibitz.server.domain.players import ROLES, Account
from kibitz.server.moderation import rules
from kibitz.server.moderation.rules import ActiveBan, ModerationError
from kibitz.shared.bus.bans import MAX_MIRRORED, BanMirror

SYNC_S = 1.0  # how often a node compares the bans table with its mirror
REPORTS_PER_HOUR = 20  # reports one account may file in an hour
EXPIRED_READ = 200  # expired account bans one pass of the bans loop looks at
#: How far back (ms) each pass looks again for account bans that expired (other nodes'
#: clocks, and a pass that failed half-way).
EXPIRY_OVERLAP_MS = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


def account_of(row: Any) -> Account:
    """The :class:`Account` of an ``accounts`` row."""
    roles = frozenset(r for r in str(row.roles or "").split(",") if r in ROLES)
    return Account(
        id=int(row.id),
        username=str(row.username),
        player_id=str(row.player_id),
        roles=roles,
        bot=bool(row.bot),
        mark=row.mark,
        muted_until_ms=row.muted_until_ms,
    )


def not_found(name: str) -> ModerationError:
    return ModerationError("mod/not_found", f"no player {name!r}", 404)


class Moderation:
    """Blocks, reports, mutes, marks, roles, bans, the audit log and abandonments."""

    def __init__(self, engine: AsyncEngine, mirror: BanMirror | None = None) -> None:
        self.engine = engine
        self.mirror = mirror  # None: no Redis (``kibitz admin``): the nodes catch up
        self._mirrored: tuple[Any, ...] | None = None  # the table summary last mirrored
        #: Account bans that expired before this were handled (see expire_account_bans).
        self._expired_from = 0

    # -- accounts ----------------------------------------------------------------------

    async def account(self, conn: AsyncConnection, name: Any) -> tuple[Account, Any]:
        """The account named ``name`` (case-insensitively) and its row; ``mod/not_found``."""
        if not isinstance(name, str) or not 1 <= len(name) <= 20:
            raise rules.invalid("a username has 1 to 20 characters")
        row = (
            await conn.execute(
                sa.select(t.accounts).where(t.accounts.c.username_key == name.lower())
            )
        ).first()
        if row is None:
            raise not_found(name)
        return account_of(row), row

    async def by_name(self, name: str) -> Account | None:
        async with self.engine.connect() as conn:
            try:
                return (await self.account(conn, name))[0]
            except ModerationError:
                return None

    # -- the audit log -----------------------------------------------------------------

    async def _audit(
        self,
        conn: AsyncConnection,
        actor: Account | None,
        action: str,
        target: str,
        detail: dict[str, Any],
    ) -> None:
        await conn.execute(
            t.audit_log.insert().values(
                at_ms=now_ms(),
                actor_id=None if actor is None else actor.id,
                action=action,
                target=target[:64],
                detail=detail,
            )
        )

    async def audit(self, limit: int = 50) -> list[dict[str, Any]]:
        """The last ``limit`` audit rows, newest first, with the actor's name."""
        limit = rules.whole(limit, "limit", 1, rules.MAX_AUDIT_LIMIT)
        actor = t.accounts.alias("actor")
        query = (
            sa.select(t.audit_log, actor.c.username)
            .select_from(t.audit_log.outerjoin(actor, actor.c.id == t.audit_log.c.actor_id))
            .order_by(t.audit_log.c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            {
                "id": row.id,
                "at_ms": row.at_ms,
                "actor": row.username,
                "action": row.action,
                "target": row.target,
                "detail": row.detail,
            }
            for row in rows
        ]

    # -- blocks ------------------------------------------------------------------------

    async def block(self, account: Account, name: Any) -> str:
        """``account`` blocks the player named ``name``; the blocked one's username."""
        async with self.engine.begin() as conn:
            target, _ = await self.account(conn, name)
            if target.id == account.id:
                raise rules.invalid("you cannot block yourself")
            exists = await conn.scalar(
                sa.select(t.blocks.c.blocked_id).where(
                    t.blocks.c.account_id == account.id, t.blocks.c.blocked_id == target.id
                )
            )
            if exists is None:
                count = await conn.scalar(
                    sa.select(sa.func.count()).where(t.blocks.c.account_id == account.id)
                )
                if int(count or 0) >= rules.MAX_BLOCKS:
                    raise ModerationError(
                        "mod/too_many", f"at most {rules.MAX_BLOCKS} blocked players", 409
                    )
                await conn.execute(
                    t.blocks.insert().values(
                        account_id=account.id, blocked_id=target.id, created_ms=now_ms()
                    )
                )
        return target.username

    async def unblock(self, account: Account, name: Any) -> str:
        async with self.engine.begin() as conn:
            target, _ = await self.account(conn, name)
            await conn.execute(
                t.blocks.delete().where(
                    t.blocks.c.account_id == account.id, t.blocks.c.blocked_id == target.id
                )
            )
        return target.username

    async def blocks(self, account_id: int) -> list[dict[str, Any]]:
        """The players ``account_id`` blocks, most recent first."""
        query = (
            sa.select(t.accounts.c.username, t.blocks.c.created_ms)
            .select_from(t.blocks.join(t.accounts, t.accounts.c.id == t.blocks.c.blocked_id))
            .where(t.blocks.c.account_id == account_id)
            .order_by(t.blocks.c.created_ms.desc())
            .limit(rules.MAX_BLOCKS)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [{"username": row.username, "created_ms": row.created_ms} for row in rows]

    async def blocked(self, a: int | None, b: int | None) -> bool:
        """Whether either of two accounts blocks the other (a guest blocks nobody)."""
        if a is None or b is None or a == b:
            return False
        pair = sa.or_(
            sa.and_(t.blocks.c.account_id == a, t.blocks.c.blocked_id == b),
            sa.and_(t.blocks.c.account_id == b, t.blocks.c.blocked_id == a),
        )
        async with self.engine.connect() as conn:
            found = await conn.scalar(sa.select(t.blocks.c.account_id).where(pair).limit(1))
        return found is not None

    async def blocked_ids(self, account_id: int) -> set[int]:
        """The accounts ``account_id`` blocks or is blocked by (both ways)."""
        mine = sa.select(t.blocks.c.blocked_id.label("other")).where(
            t.blocks.c.account_id == account_id
        )
        theirs = sa.select(t.blocks.c.account_id.label("other")).where(
            t.blocks.c.blocked_id == account_id
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(sa.union(mine, theirs).limit(4 * rules.MAX_BLOCKS))).all()
        return {int(row.other) for row in rows}

    async def hidden_names(self, account_id: int) -> frozenset[str]:
        """The usernames (lower case) whose chat ``account_id`` must not see: the accounts
        it blocks or is blocked by."""
        ids = await self.blocked_ids(account_id)
        if not ids:
            return frozenset()
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.accounts.c.username_key).where(t.accounts.c.id.in_(ids))
                )
            ).all()
        return frozenset(str(row.username_key) for row in rows)

    # -- reports -----------------------------------------------------------------------

    async def report(self, reporter: Account, body: dict[str, Any]) -> int:
        """File a report; its id. ``body``: username, reason, text?, room?, line?."""
        reason = rules.report_reason(body.get("reason"))
        words = rules.text(body.get("text", ""), "text", rules.MAX_REPORT_TEXT)
        room = rules.room_id(body.get("room"))
        line = body.get("line")
        line = None if line is None else rules.text(line, "line", rules.MAX_REPORT_LINE, 1)
        now = now_ms()
        async with self.engine.begin() as conn:
            target, _ = await self.account(conn, body.get("username"))
            if target.id == reporter.id:
                raise rules.invalid("you cannot report yourself")
            # Counted up to the limit only: the scan stops at REPORTS_PER_HOUR rows.
            mine = (
                sa.select(t.reports.c.id)
                .where(
                    t.reports.c.reporter_id == reporter.id,
                    t.reports.c.created_ms > now - rules.HOUR_MS,
                )
                .limit(REPORTS_PER_HOUR)
                .subquery()
            )
            recent = await conn.scalar(sa.select(sa.func.count()).select_from(mine))
            if int(recent or 0) >= REPORTS_PER_HOUR:
                raise ModerationError(
                    "mod/throttled", f"at most {REPORTS_PER_HOUR} reports an hour", 429
                )
            result = await conn.execute(
                t.reports.insert().values(
                    reporter_id=reporter.id,
                    target_id=target.id,
                    room=room,
                    line=line,
                    reason=reason,
                    text=words,
                    created_ms=now,
                )
            )
            key = result.inserted_primary_key
            return int(key[0]) if key else 0

    async def reports(self, include_closed: bool = False) -> list[dict[str, Any]]:
        """Reports, oldest open first (``include_closed``: the latest of all, newest first)."""
        reporter, target, closer = (t.accounts.alias(n) for n in ("reporter", "target", "closer"))
        query = sa.select(
            t.reports,
            reporter.c.username.label("reporter"),
            target.c.username.label("target"),
            closer.c.username.label("closer"),
        ).select_from(
            t.reports.outerjoin(reporter, reporter.c.id == t.reports.c.reporter_id)
            .join(target, target.c.id == t.reports.c.target_id)
            .outerjoin(closer, closer.c.id == t.reports.c.closed_by)
        )
        if include_closed:
            query = query.order_by(t.reports.c.id.desc())
        else:
            query = query.where(t.reports.c.closed_ms.is_(None)).order_by(t.reports.c.id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query.limit(rules.MAX_LISTED))).all()
        return [
            {
                "id": row.id,
                "reporter": row.reporter,
                "username": row.target,
                "reason": row.reason,
                "text": row.text,
                "room": row.room,
                "line": row.line,
                "created_ms": row.created_ms,
                "closed_ms": row.closed_ms,
                "closed_by": row.closer,
                "resolution": row.resolution,
            }
            for row in rows
        ]

    async def close_report(self, actor: Account | None, report_id: Any, resolution: Any) -> None:
        report_id = rules.whole(report_id, "id", 1, 2**62)
        resolution = rules.text(resolution, "resolution", rules.MAX_RESOLUTION, 1)
        async with self.engine.begin() as conn:
            query = sa.select(t.reports.c.closed_ms).where(t.reports.c.id == report_id)
            found = (await conn.execute(query)).first()
            if found is None:
                raise ModerationError("mod/not_found", f"no report {report_id}", 404)
            if found.closed_ms is not None:
                raise ModerationError("mod/closed", f"report {report_id} is closed already", 409)
            await conn.execute(
                t.reports.update()
                .where(t.reports.c.id == report_id)
                .values(
                    closed_ms=now_ms(),
                    closed_by=None if actor is None else actor.id,
                    resolution=resolution,
                )
            )
            await self._audit(
                conn, actor, "report.close", str(report_id), {"resolution": resolution}
            )

    # -- mutes, marks, roles -----------------------------------------------------------

    async def mute(self, actor: Account | None, name: Any, minutes: Any) -> int | None:
        """Mute ``name``'s chat for ``minutes`` (0: lift the mute); the mute's end."""
        minutes = rules.whole(minutes, "minutes", 0, rules.MAX_MUTE_MINUTES)
        until = now_ms() + minutes * rules.MINUTE_MS if minutes else None
        async with self.engine.begin() as conn:
            target, _ = await self.account(conn, name)
            await conn.execute(
                t.accounts.update().where(t.accounts.c.id == target.id).values(muted_until_ms=until)
            )
            await self._audit(conn, actor, "mute", target.username, {"minutes": minutes})
        return until

    async def muted_until(self, account_id: int) -> int | None:
        """The end of the account's mute as the database has it now (None: not muted)."""
        async with self.engine.connect() as conn:
            until = await conn.scalar(
                sa.select(t.accounts.c.muted_until_ms).where(t.accounts.c.id == account_id)
            )
        return None if until is None or until <= now_ms() else int(until)

    async def set_mark(self, actor: Account | None, name: Any, mark: Any) -> str | None:
        value = rules.mark(mark)
        async with self.engine.begin() as conn:
            target, _ = await self.account(conn, name)
            await conn.execute(
                t.accounts.update().where(t.accounts.c.id == target.id).values(mark=value)
            )
            await self._audit(conn, actor, "mark", target.username, {"mark": value})
        return value

    async def set_role(self, actor: Account | None, name: Any, role: Any, on: bool) -> list[str]:
        """Grant (``on``) or revoke ``role`` of ``name``; its roles after."""
        if role not in ROLES:
            raise rules.invalid(f"role must be one of {', '.join(sorted(ROLES))}")
        async with self.engine.begin() as conn:
            target, _ = await self.account(conn, name)
            roles = set(target.roles) | {role} if on else set(target.roles) - {role}
            await conn.execute(
                t.accounts.update()
                .where(t.accounts.c.id == target.id)
                .values(roles=",".join(sorted(roles)))
            )
            await self._audit(
                conn, actor, "grant" if on else "revoke", target.username, {"role": role}
            )
        return sorted(roles)

    # -- bans --------------------------------------------------------------------------

    async def ban(
        self, actor: Account | None, kind: Any, target: Any, reason: Any, hours: Any = None
    ) -> dict[str, Any]:
        """Ban an account (``target`` its name) or an address; the ban. An account's
        sessions end and it is disabled."""
        kind = rules.ban_kind(kind)
        reason = rules.text(reason, "reason", rules.MAX_BAN_REASON, 1)
        hours = rules.ban_hours(hours)
        now = now_ms()
        expires = None if hours is None else now + hours * rules.HOUR_MS
        async with self.engine.begin() as conn:
            if kind == "account":
                account, _ = await self.account(conn, target)
                if actor is not None and account.id == actor.id:
                    raise rules.invalid("you cannot ban yourself")
                key, shown = str(account.id), account.username
                await conn.execute(t.sessions.delete().where(t.sessions.c.account_id == account.id))
                await conn.execute(
                    t.accounts.update().where(t.accounts.c.id == account.id).values(disabled_ms=now)
                )
            else:
                key = shown = rules.address(target)
            result = await conn.execute(
                t.bans.insert().values(
                    kind=kind,
                    target=key,
                    reason=reason,
                    created_ms=now,
                    expires_ms=expires,
                    by_id=None if actor is None else actor.id,
                )
            )
            ban_id = int(result.inserted_primary_key[0]) if result.inserted_primary_key else 0
            await self._audit(
                conn,
                actor,
                "ban",
                f"{kind}:{shown}",
                {"id": ban_id, "reason": reason, "hours": hours},
            )
        ban = ActiveBan(ban_id, kind, key, reason, expires)
        if self.mirror is not None:
            await self.mirror.put(rules.ban_field(kind, key), ban.encoded())
        return {
            "id": ban_id,
            "kind": kind,
            "target": shown,
            "reason": reason,
            "expires_ms": expires,
        }

    async def unban(self, actor: Account | None, ban_id: Any) -> None:
        ban_id = rules.whole(ban_id, "id", 1, 2**62)
        async with self.engine.begin() as conn:
            row = (await conn.execute(sa.select(t.bans).where(t.bans.c.id == ban_id))).first()
            if row is None:
                raise ModerationError("mod/not_found", f"no ban {ban_id}", 404)
            if row.lifted_ms is not None:
                raise ModerationError("mod/closed", f"ban {ban_id} is lifted already", 409)
            now = now_ms()
            await conn.execute(t.bans.update().where(t.bans.c.id == ban_id).values(lifted_ms=now))
            others = await self._active_bans(conn, now, row.kind, row.target)
            if row.kind == "account" and not others:
                await conn.execute(
                    t.accounts.update()
                    .where(t.accounts.c.id == int(row.target))
                    .values(disabled_ms=None)
                )
            await self._audit(conn, actor, "unban", f"{row.kind}:{row.target}", {"id": ban_id})
        if self.mirror is not None:
            field = rules.ban_field(row.kind, rules.ban_target(row.kind, row.target))
            if others:
                await self.mirror.put(field, others[-1].encoded())
            else:
                await self.mirror.remove(field)

    async def bans(self) -> list[dict[str, Any]]:
        """The active bans, newest first (at most MAX_LISTED); an account's by its name."""
        async with self.engine.connect() as conn:
            active = list(reversed((await self._active_bans(conn, now_ms()))[-rules.MAX_LISTED :]))
            ids = {int(b.target) for b in active if b.kind == "account" and b.target.isdigit()}
            query = sa.select(t.accounts.c.id, t.accounts.c.username).where(
                t.accounts.c.id.in_(ids)
            )
            names = {str(row.id): str(row.username) for row in (await conn.execute(query)).all()}
        return [
            {
                "id": b.id,
                "kind": b.kind,
                "target": names.get(b.target, b.target) if b.kind == "account" else b.target,
                "reason": b.reason,
                "expires_ms": b.expires_ms,
            }
            for b in active
        ]

    async def _active_bans(
        self, conn: AsyncConnection, now: int, kind: str | None = None, target: str | None = None
    ) -> list[ActiveBan]:
        """Active bans, oldest first (at most MAX_MIRRORED, the newest)."""
        query = sa.select(t.bans).where(
            t.bans.c.lifted_ms.is_(None),
            sa.or_(t.bans.c.expires_ms.is_(None), t.bans.c.expires_ms > now),
        )
        if kind is not None and target is not None:
            query = query.where(t.bans.c.kind == kind, t.bans.c.target == target)
        rows = (await conn.execute(query.order_by(t.bans.c.id.desc()).limit(MAX_MIRRORED))).all()
        return [
            ActiveBan(int(r.id), str(r.kind), str(r.target), str(r.reason), r.expires_ms)
            for r in reversed(rows)
        ]

    async def banned(self, account_id: int | None, address: str | None) -> str | None:
        """The refusal for an account (None: a guest) or address that is banned, else None.
        One Redis read; without Redis, the database."""
        fields = []
        if account_id is not None:
            fields.append(rules.ban_field("account", str(account_id)))
        if address:
            fields.append(rules.ban_field("address", address_group(address)))
        if not fields:
            return None
        now = now_ms()
        found = await self._lookup(fields)
        for field, value in zip(fields, found, strict=True):
            ban = rules.decoded(field, value)
            if ban is not None and ban.active(now):
                return ban.refusal()
        return None

    async def _lookup(self, fields: list[str]) -> list[str | None]:
        if self.mirror is not None:
            values = await self.mirror.lookup(fields)
            if values is not None:
                return values
            await self.sync(force=True)
            values = await self.mirror.lookup(fields)
            if values is not None:
                return values
        async with self.engine.connect() as conn:
            active = await self._active_bans(conn, now_ms())
        by_field = {
            rules.ban_field(b.kind, rules.ban_target(b.kind, b.target)): b.encoded() for b in active
        }
        return [by_field.get(field) for field in fields]

    async def _summary(self) -> tuple[Any, ...]:
        query = sa.select(sa.func.max(t.bans.c.id), sa.func.max(t.bans.c.lifted_ms))
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).one()
        return tuple(row)

    async def sync(self, force: bool = False) -> bool:
        """Rewrite the mirror from the database if the table changed since the last time,
        or the mirror is missing (or ``force``); whether it was rewritten."""
        if self.mirror is None:
            return False
        summary = await self._summary()
        if not force and summary == self._mirrored and await self.mirror.lookup([]) is not None:
            return False
        async with self.engine.connect() as conn:
            active = await self._active_bans(conn, now_ms())
        entries: dict[str, str] = {}
        for ban in active:  # oldest first: the newest ban of a target wins
            entries[rules.ban_field(ban.kind, rules.ban_target(ban.kind, ban.target))] = (
                ban.encoded()
            )
        await self.mirror.replace(entries, now_ms())
        self._mirrored = summary
        return True

    async def run(self) -> None:
        """Keep the mirror in step with the database (the node's ``bans`` loop: a failure,
        Redis or the database away, raises to the supervisor, which starts it again)."""
        while True:
            await self.sync()
            await self.expire_account_bans()
            await asyncio.sleep(SYNC_S)

    async def expire_account_bans(self) -> list[str]:
        """Enable again the accounts whose last ban has expired (their ``disabled_ms``
        cleared, an audit row ``ban.expired`` by nobody); their usernames. Looks at the
        account bans that expired since the last pass (EXPIRY_OVERLAP_MS back; at most
        EXPIRED_READ of them a pass)."""
        now = now_ms()
        query = (
            sa.select(t.bans.c.id, t.bans.c.target, t.bans.c.expires_ms)
            .where(
                t.bans.c.kind == "account",
                t.bans.c.lifted_ms.is_(None),
                t.bans.c.expires_ms.is_not(None),
                t.bans.c.expires_ms > self._expired_from,
                t.bans.c.expires_ms <= now,
            )
            .order_by(t.bans.c.expires_ms)
            .limit(EXPIRED_READ)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        expired: dict[str, list[int]] = {}
        for row in rows:
            if str(row.target).isdigit():
                expired.setdefault(str(row.target), []).append(int(row.id))
        enabled = [
            name
            for target, ids in expired.items()
            if (name := await self._enable_if_unbanned(int(target), ids, now)) is not None
        ]
        if len(rows) == EXPIRED_READ:
            self._expired_from = int(rows[-1].expires_ms)  # more next pass
        else:
            self._expired_from = max(self._expired_from, now - EXPIRY_OVERLAP_MS)
        return enabled

    async def _enable_if_unbanned(
        self, account_id: int, ban_ids: list[int], now: int
    ) -> str | None:
        """Clear ``account_id``'s ``disabled_ms`` if no ban of it is active; its name if
        this call enabled it (another node may have done it first)."""
        async with self.engine.begin() as conn:
            if await self._active_bans(conn, now, "account", str(account_id)):
                return None
            done = await conn.execute(
                t.accounts.update()
                .where(t.accounts.c.id == account_id, t.accounts.c.disabled_ms.is_not(None))
                .values(disabled_ms=None)
            )
            if done.rowcount != 1:
                return None
            name = await conn.scalar(
                sa.select(t.accounts.c.username).where(t.accounts.c.id == account_id)
            )
            await self._audit(conn, None, "ban.expired", f"account:{name}", {"ids": ban_ids})
        return str(name)

    # -- abandonments ------------------------------------------------------------------

    async def record_abandonment(
        self, account_id: int, game_id: str, kind: str, at_ms: int | None = None
    ) -> bool:
        """Record that ``account_id`` abandoned rated game ``game_id`` (``kind`` "timeout"
        or "abort"); False when it was recorded already (once per account and game)."""
        if kind not in ("timeout", "abort"):
            raise ValueError(f"an abandonment is a timeout or an abort, not {kind!r}")
        values = {
            "account_id": account_id,
            "game_id": game_id[:32],
            "kind": kind,
            "at_ms": now_ms() if at_ms is None else at_ms,
        }
        try:
            async with self.engine.begin() as conn:
                await conn.execute(t.abandonments.insert().values(**values))
        except sa.exc.IntegrityError:
            return False
        return True

    async def seek_wait_ms(self, account_id: int | None) -> int:
        """How long (ms) the account must still wait before seeking or pooling (0: not)."""
        if account_id is None:
            return 0
        now = now_ms()
        query = (
            sa.select(t.abandonments.c.at_ms)
            .where(
                t.abandonments.c.account_id == account_id,
                t.abandonments.c.at_ms > now - rules.PENALTY_WINDOW_MS,
            )
            .order_by(t.abandonments.c.at_ms.desc())
            .limit(rules.PENALTY_READ)
        )
        async with self.engine.connect() as conn:
            times = [int(at) for at in (await conn.scalars(query)).all()]
        return rules.penalty_wait_ms(times, now)
