"""Lines for the accounts' event streams (the lichess-compatible ``/api/stream/event``),
from whichever node decides them to whichever nodes hold the streams.

- ``account-events``  channel: every node listens (``server/botapi/events.py``). A message
                      is JSON, one of:
  ``{"to": [ACCOUNT_ID, ...], "line": {...}}``  a line for every open event stream of
                      those accounts (``challenge``, ``challengeDeclined``...);
  ``{"lines": [[ACCOUNT_ID, {...}], ...]}``  a line of its own for each account (the
                      ``gameStart``/``gameFinish`` of a game, each seen from its seat);
  ``{"close": STREAM_ID, "account": ACCOUNT_ID, "token": TOKEN}``  a newer stream of
                      the same token opened: the node holding ``STREAM_ID`` closes it.
- ``online``          sorted set: account id -> when a node last saw an open event
                      stream of it (ms); older than ONLINE_MS is offline. Each node's
                      beat (:meth:`AccountEvents.beat`, every few seconds) adds its
                      streams' accounts and removes the entries older than ONLINE_MS, so
                      it holds the accounts with a stream in the last ONLINE_MS (at most
                      1,000 a node); it expires ONLINE_MS after the last beat.
- ``event-streams:{account}``  hash: credential (an API token's id, or a session's
                      digest for the browser) -> its newest stream id (one stream per
                      credential); it expires a day after the last stream opened
                      (bounded by the account's live tokens and sessions).

On a Redis Cluster every one of these keys is on the control slot (``kibitz:{c}:...``),
and the channel is published with ``SPUBLISH`` (``fanout.publish``): each node's hub
holds a sharded subscription on the control slot's primary.

Publishing is fire-and-forget, as pub/sub is: a node that misses a line (its
subscription down) loses it, which is why a stream that opens is first sent the
account's open challenges and unfinished games (the state, not the history).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.fanout import publish

STREAMS_TTL_S = 86_400
#: An account is online while a node has seen an open event stream of it this recently
#: (each node beats its streams' accounts every few seconds).
ONLINE_MS = 20_000


class AccountEvents:
    """Publishes lines for accounts' event streams and keeps one stream per token."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def publish(self, account_ids: Iterable[int], line: dict[str, Any]) -> None:
        """``line`` to every open event stream of ``account_ids`` (on any node)."""
        to = sorted(set(account_ids))
        if to:
            message = json.dumps({"to": to, "line": line}, separators=(",", ":"))
            await publish(self._redis, keys.ACCOUNT_EVENTS, message)

    async def publish_each(self, lines: Sequence[tuple[int, dict[str, Any]]]) -> None:
        """Each ``(account id, line)``'s line to that account's open event streams, all
        in one message (one PUBLISH, or SPUBLISH on a Redis Cluster)."""
        if lines:
            message = json.dumps({"lines": lines}, separators=(",", ":"))
            await publish(self._redis, keys.ACCOUNT_EVENTS, message)

    async def opened(self, account_id: int, token: str, stream_id: str, now_ms: int) -> str | None:
        """Note ``stream_id`` as the newest stream of credential ``token`` (and the
        account as online at ``now_ms``); the stream it replaces, if any, is returned
        and closed wherever it is held (a ``close`` message)."""
        key = keys.event_stream_key(account_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hget(key, token)
            pipe.hset(key, token, stream_id)
            pipe.expire(key, STREAMS_TTL_S)
            previous, _set, _expire = await pipe.execute()
        await self.beat([account_id], now_ms)
        if previous is None:
            return None
        old = previous.decode() if isinstance(previous, bytes) else str(previous)
        if old != stream_id:
            message = {"close": old, "account": account_id, "token": token}
            await publish(self._redis, keys.ACCOUNT_EVENTS, json.dumps(message))
            return old
        return None

    async def closed(self, account_id: int, token: str, stream_id: str) -> None:
        """``stream_id`` ended: forget it, unless a newer stream of ``token`` replaced
        it (the account stays online until its entry ages past ONLINE_MS: another
        stream of it may be open elsewhere)."""
        key = keys.event_stream_key(account_id)
        current = await self._redis.hget(key, token)
        if (
            current is not None
            and (current.decode() if isinstance(current, bytes) else str(current)) == stream_id
        ):
            await self._redis.hdel(key, token)

    async def beat(self, account_ids: Iterable[int], now_ms: int) -> None:
        """One node's beat: ``account_ids`` (its event streams' accounts) seen at
        ``now_ms``, and every entry older than ONLINE_MS removed; one round trip."""
        seen = {str(account): now_ms for account in set(account_ids)}
        async with self._redis.pipeline(transaction=False) as pipe:
            if seen:
                pipe.zadd(keys.ONLINE, seen)
                pipe.pexpire(keys.ONLINE, ONLINE_MS)
            pipe.zremrangebyscore(keys.ONLINE, "-inf", f"({now_ms - ONLINE_MS}")
            await pipe.execute()

    async def online(self, account_ids: Sequence[int], now_ms: int) -> set[int]:
        """Which of ``account_ids`` have an open event stream (seen within ONLINE_MS)."""
        ids = list(dict.fromkeys(account_ids))
        if not ids:
            return set()
        scores = await self._redis.zmscore(keys.ONLINE, [str(i) for i in ids])
        return {
            i for i, seen in zip(ids, scores, strict=True)
            if seen is not None and float(seen) >= now_ms - ONLINE_MS
        }  # fmt: skip

    async def online_list(self, limit: int, now_ms: int) -> list[int]:
        """Up to ``limit`` accounts with an open event stream, the most recently seen
        first."""
        found: Any = await self._redis.zrevrangebyscore(
            keys.ONLINE, "+inf", now_ms - ONLINE_MS, start=0, num=max(0, limit)
        )
        return [int(a) for a in found]  # bytes or str, as the client decodes
