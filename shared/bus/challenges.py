"""Challenges between accounts (lichess's ``/api/challenge``): the records and who has
which open.

A challenge is made by one account (the challenger) to another (the destination); it is
``created`` (open) until exactly one of accept, decline or cancel decides it. Its id is
the id of the room it becomes on acceptance. The server (server/botapi/challenges.py)
decides who may do what; this module keeps the records and makes each decision atomic.

- ``challenge:{ID}``          string: the challenge's JSON record (``id``, ``status``,
                              ``challenger`` and ``dest`` with their ``account_id``, and
                              whatever else the server keeps: game, clock, colour...).
                              An open one expires when it does (OPEN_TTL_MS, or
                              KEEP_ALIVE_TTL_MS renewed while its maker's request stays
                              open); a decided one is kept DECIDED_TTL_MS, so that a late
                              accept is told it is no longer open.
- ``challenges:out:{ACCOUNT}``  sorted set: the open challenges an account made, id ->
- ``challenges:in:{ACCOUNT}``   expiry (ms); and those made to it. At most MAX_OUT and
                              MAX_IN; entries past their expiry are dropped on every write
                              and read, and decided ones as they are decided (or, if that
                              step failed, by the next read); the key expires with its
                              latest entry.

A state change swaps the record only if it is still the one read (one Lua step on one
key), so of two accepts at once exactly one wins, and an accept after a cancel finds the
challenge no longer open. Every script touches one key: the keys may live on different
Redis Cluster slots.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source

#: How long a challenge stays open when nobody decides it.
OPEN_TTL_MS = 600_000
#: With ``keepAliveStream``, how long a challenge outlives its maker's last keep-alive
#: (renewed every few seconds while the request is open).
KEEP_ALIVE_TTL_MS = 20_000
#: How long a decided challenge's record is kept (a late accept reads "not open").
DECIDED_TTL_MS = 600_000
#: Open challenges one account may have made, and have been made to it.
MAX_OUT = 50
MAX_IN = 200

OPEN = "created"
DECISIONS = ("accepted", "declined", "canceled")
#: How many times a change is tried again when another change came between its read and
#: its write (each time on the record read again).
RETRIES = 5


class ChallengeLimit(Exception):
    """Too many open challenges: ``direction`` ``out`` (the challenger made MAX_OUT) or
    ``in`` (MAX_IN were made to the destination). Nothing was stored."""

    def __init__(self, direction: str) -> None:
        super().__init__(f"too many open challenges ({direction})")
        self.direction = direction


class ChallengeExists(Exception):
    """A challenge with that id exists already (ids are drawn at random: draw another)."""


def _account(record: dict[str, Any], role: str) -> int:
    return int(record[role]["account_id"])


def _encode(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), sort_keys=True)


class Challenges:
    """The challenge records and the accounts' lists of open challenges."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._index_add = redis.register_script(source("challenge_index_add"))
        self._swap = redis.register_script(source("challenge_swap"))

    # -- writes ------------------------------------------------------------------------
    async def create(self, record: dict[str, Any], now_ms: int, ttl_ms: int = OPEN_TTL_MS) -> None:
        """Store ``record`` (``id``, ``challenger.account_id``, ``dest.account_id``; its
        status is set to ``created``), open for ``ttl_ms``, on both accounts' lists.
        ChallengeLimit when a list is full, ChallengeExists when the id is taken: nothing
        is stored then."""
        record = {**record, "status": OPEN}
        challenge_id = str(record["id"])
        key = keys.challenge_key(challenge_id)
        if not await self._redis.set(key, _encode(record), px=ttl_ms, nx=True):
            raise ChallengeExists(challenge_id)
        expiry = now_ms + ttl_ms
        out_key = keys.challenges_key(_account(record, "challenger"), "out")
        in_key = keys.challenges_key(_account(record, "dest"), "in")
        try:
            if not await self._index_add(
                keys=[out_key], args=[challenge_id, expiry, now_ms, MAX_OUT]
            ):
                raise ChallengeLimit("out")
            if not await self._index_add(
                keys=[in_key], args=[challenge_id, expiry, now_ms, MAX_IN]
            ):
                await self._redis.zrem(out_key, challenge_id)
                raise ChallengeLimit("in")
        except Exception:
            await self._redis.delete(key)
            raise

    async def refresh(
        self, challenge_id: str, now_ms: int, ttl_ms: int = KEEP_ALIVE_TTL_MS
    ) -> bool:
        """Keep an open challenge open ``ttl_ms`` more (its maker's request is still
        there); False if it is no longer open (decided, or expired)."""
        record = await self.get(challenge_id)
        if record is None or record.get("status") != OPEN:
            return False
        await self._redis.pexpire(keys.challenge_key(challenge_id), ttl_ms)
        expiry = now_ms + ttl_ms
        for key, most in (
            (keys.challenges_key(_account(record, "challenger"), "out"), MAX_OUT),
            (keys.challenges_key(_account(record, "dest"), "in"), MAX_IN),
        ):
            await self._index_add(keys=[key], args=[challenge_id, expiry, now_ms, most])
        return True

    async def decide(
        self,
        challenge_id: str,
        status: str,
        fields: dict[str, Any] | None = None,
        expected: str = OPEN,
    ) -> dict[str, Any] | None:
        """Move the challenge from ``expected`` to ``status`` (one of DECISIONS), with
        ``fields`` added to its record: the new record if this call made the change, None
        if the challenge is gone or is not ``expected`` (another change won)."""
        if status not in DECISIONS:
            raise ValueError(f"a challenge is decided {DECISIONS}, not {status!r}")
        key = keys.challenge_key(challenge_id)
        for _ in range(RETRIES):
            read = await self._redis.get(key)
            if read is None:
                return None
            record = json.loads(read)
            if record.get("status") != expected:
                return None
            new = {**record, **(fields or {}), "status": status}
            if await self._swap(keys=[key], args=[read, _encode(new), DECIDED_TTL_MS]):
                await self._unlist(new)
                return new
        return None

    async def accept(
        self, challenge_id: str, fields: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """``created`` -> ``accepted``: the record if this call won, else None."""
        return await self.decide(challenge_id, "accepted", fields)

    async def decline(self, challenge_id: str, reason: str) -> dict[str, Any] | None:
        """``created`` -> ``declined`` with ``decline_reason``: the record if this call
        won, else None."""
        return await self.decide(challenge_id, "declined", {"decline_reason": reason})

    async def cancel(self, challenge_id: str) -> dict[str, Any] | None:
        """``created`` -> ``canceled``: the record if this call won, else None."""
        return await self.decide(challenge_id, "canceled")

    async def _unlist(self, record: dict[str, Any]) -> None:
        challenge_id = str(record["id"])
        await self._redis.zrem(
            keys.challenges_key(_account(record, "challenger"), "out"), challenge_id
        )
        await self._redis.zrem(keys.challenges_key(_account(record, "dest"), "in"), challenge_id)

    # -- reads -------------------------------------------------------------------------
    async def get(self, challenge_id: str) -> dict[str, Any] | None:
        """The record of ``challenge_id`` (open or recently decided), or None."""
        found = await self._redis.get(keys.challenge_key(challenge_id))
        if found is None:
            return None
        record: dict[str, Any] = json.loads(found)
        return record

    async def incoming(self, account_id: int, now_ms: int | None = None) -> list[dict[str, Any]]:
        """The open challenges made to ``account_id``, oldest first (``now_ms``: the
        time they are open at; None: now)."""
        return await self._open(keys.challenges_key(account_id, "in"), now_ms)

    async def outgoing(self, account_id: int, now_ms: int | None = None) -> list[dict[str, Any]]:
        """The open challenges ``account_id`` made, oldest first."""
        return await self._open(keys.challenges_key(account_id, "out"), now_ms)

    async def _open(self, key: str, now_ms: int | None) -> list[dict[str, Any]]:
        """The open challenges listed under ``key``; expired, gone and decided entries
        are taken off it."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        await self._redis.zremrangebyscore(key, "-inf", now)
        ids = [str(i) for i in await self._redis.zrange(key, 0, -1)]
        if not ids:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for challenge_id in ids:
                pipe.get(keys.challenge_key(challenge_id))
            found = await pipe.execute()
        records, stale = [], []
        for challenge_id, data in zip(ids, found, strict=True):
            record = None if data is None else json.loads(data)
            if record is None or record.get("status") != OPEN:
                stale.append(challenge_id)
            else:
                records.append(record)
        if stale:
            await self._redis.zrem(key, *stale)
        records.sort(key=lambda r: (r.get("created_ms", 0), str(r["id"])))
        return records
