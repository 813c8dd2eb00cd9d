"""The mirror of the active bans in Redis, which every node reads before a change.

Which bans are active, and what a ban refuses, is decided by the server
(``server/moderation/``), whose database table ``bans`` is the truth; this module keeps its
copy in one hash, ``kibitz:bans`` (:data:`kibitz.shared.bus.keys.BANS`):

- a field per active ban, ``account:ID`` or ``address:ADDR``, its value the ban as the
  server encoded it (JSON, with its expiry: a reader treats an expired ban as none);
- the field ``built``, set when the hash was last written whole from the database, so an
  empty hash (a Redis restarted or flushed) is told from "nobody is banned".

Bound: the server writes at most ``MAX_MIRRORED`` fields whole (the active bans are
few); a single ban added or lifted changes one field. No lifetime: the server rewrites the
hash whole whenever the table changes under it (a ban made by ``kibitz admin``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys

BUILT = "built"  # the field that says the hash was written whole
MAX_MIRRORED = 10_000  # the most bans written whole (more: the oldest are left out)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class BanMirror:
    """Reads and writes the ``kibitz:bans`` hash."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def lookup(self, fields: Sequence[str]) -> list[str | None] | None:
        """The values of ``fields`` (None for each absent), in one read; None when the hash
        was never written whole (it must be rebuilt before it can be believed)."""
        values: Any = await self._redis.hmget(keys.BANS, [BUILT, *fields])
        if values[0] is None:
            return None
        return [_text(value) for value in values[1:]]

    async def replace(self, entries: Mapping[str, str], built_ms: int) -> None:
        """Write the hash whole: exactly ``entries`` (at most MAX_MIRRORED) and ``built``."""
        if len(entries) > MAX_MIRRORED:
            raise ValueError(f"at most {MAX_MIRRORED} bans are mirrored, not {len(entries)}")
        mapping: dict[Any, Any] = {BUILT: built_ms}
        mapping.update(entries)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.delete(keys.BANS)
            pipe.hset(keys.BANS, mapping=mapping)
            await pipe.execute()

    async def put(self, field: str, value: str) -> None:
        """One ban added (or changed)."""
        await self._redis.hset(keys.BANS, field, value)

    async def remove(self, field: str) -> None:
        """One ban lifted."""
        await self._redis.hdel(keys.BANS, field)

    async def clear(self) -> None:
        """Forget the mirror (the next reader rebuilds it)."""
        await self._redis.delete(keys.BANS)
