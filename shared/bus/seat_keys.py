"""The secret tokens of rooms' account seats, for the HTTP API to act with.

A room keeps only the SHA-256 of each seat's token; whoever holds the token plays that
seat. The lichess-compatible API (server/botapi/) plays for an account through the
ordinary room commands, so it needs the token of the account's seat: every path that
seats an account and knows the token puts it here (a challenge accepted, a board seek
taken, a signed-in player seated over the WebSocket, the rematch of such a room).

- ``room:{ID}:seatkeys``  hash: seat index (``0``/``1``) -> that seat's token. Bound: the
                          two seats of a room; the key expires SEAT_KEYS_TTL_S after it was
                          last written (longer than an unfinished room lives).

Only the account that holds the seat may be given its token back
(server/botapi/challenges.py ``GET /api/rooms/{id}/seat`` checks the room first).
"""

from __future__ import annotations

from collections.abc import Mapping

import redis.asyncio as aioredis

from kibitz.shared.bus import keys

#: How long a room's seat keys are kept after they were last written: 30 days, longer
#: than any unfinished room lives (a correspondence game's moves renew nothing here, but
#: an idle room ends long before).
SEAT_KEYS_TTL_S = 30 * 86_400


class SeatKeys:
    """Writes and reads the seat tokens of rooms' account seats."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def put(
        self, room_id: str, tokens: Mapping[int, str], ttl_s: int = SEAT_KEYS_TTL_S
    ) -> None:
        """Keep ``tokens`` (seat index -> token) for ``room_id`` (one HSET and EXPIRE,
        in one transaction); other seats' tokens stay as they were."""
        if not tokens:
            return
        for seat in tokens:
            if seat not in (0, 1):
                raise ValueError(f"a room has seats 0 and 1, not {seat!r}")
        key = keys.seat_keys_key(room_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={str(seat): token for seat, token in tokens.items()})
            pipe.expire(key, ttl_s)
            await pipe.execute()

    async def get(self, room_id: str, seat: int) -> str | None:
        """The token of ``seat`` in ``room_id``, if it was kept (else None)."""
        token = await self._redis.hget(keys.seat_keys_key(room_id), str(seat))
        return None if token is None else str(token)

    async def all(self, room_id: str) -> dict[int, str]:
        """Every kept token of ``room_id``: seat index -> token."""
        found = await self._redis.hgetall(keys.seat_keys_key(room_id))
        return {int(seat): str(token) for seat, token in found.items() if str(seat) in ("0", "1")}
