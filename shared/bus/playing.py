"""Which unfinished rooms each player sits in: a small index per player id, for profiles.

Who counts as playing where is decided by the server (``server/http/players.py`` checks
each room it reads here against the room itself); this module keeps the index:

- ``player:{id}:rooms``  sorted set: room id -> when the player was seated there (ms).
                         Only accounts' player ids (the server notes signed-in seats
                         only). Written when a room seats the player (created, joined,
                         an accepted seek, a rematch), after the room's commit; it may
                         name a room that has ended or expired since: readers check, and
                         drop what is stale (:meth:`PlayerRooms.drop`). Bound: the newest
                         ``MAX_ROOMS``; entries older than ``TTL_MS`` are dropped, and the
                         key expires ``TTL_MS`` after the last seating.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source

MAX_ROOMS = 50  # rooms kept per player (the newest)
#: An entry (and the key) lives this long after the seating: no longer than an unfinished
#: room nobody plays in lives (the idle-game limit, server/loops/archiver.py).
TTL_MS = 3 * 86_400_000


class PlayerRooms:
    """Writes and reads the per-player index of rooms."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._add = redis.register_script(source("player_rooms_add"))

    async def seated(self, room_id: str, players: Sequence[str], at_ms: int) -> None:
        """Note that ``room_id`` seats each of ``players`` (player ids), at ``at_ms``."""
        await asyncio.gather(
            *(
                self._add(
                    keys=[keys.player_rooms_key(player)],
                    args=[room_id, at_ms, MAX_ROOMS, TTL_MS],
                )
                for player in dict.fromkeys(players)
            )
        )

    async def rooms(self, player: str, count: int = MAX_ROOMS) -> list[str]:
        """Up to ``count`` rooms noted for ``player``, the newest seating first."""
        found: Any = await self._redis.zrevrange(
            keys.player_rooms_key(player), 0, min(count, MAX_ROOMS) - 1
        )
        return [str(room) for room in found]

    async def drop(self, player: str, room_ids: Sequence[str]) -> None:
        """Take ``room_ids`` (stale: ended, or never made) off ``player``'s index."""
        if room_ids:
            await self._redis.zrem(keys.player_rooms_key(player), *room_ids)
