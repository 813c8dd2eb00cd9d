"""The rooms' chat lists in Redis: appended and published in one step, read back whole.

What may be said, by whom and how often is decided by the server
(``server/services/chat.py``); this module keeps the lines. Keys: ``room:{id}:chat:players``
and ``room:{id}:chat:spectators`` (:func:`kibitz.shared.bus.keys.chat_key`), lists of JSON
lines capped at the ``kept`` lines the caller names, with the room's lifetime (the store's
commit, archive and forget scripts treat them as room keys); ``room:{id}:rearchive``, a
string with a lifetime, marks a finished room queued on the archive stream again for its
chat and not read yet. On a Redis Cluster the archive stream is the room's slot group's
(``keys.archive(g)``, in the room's slot) and a line is published with ``SPUBLISH``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source

CHANNELS = ("players", "spectators")  # a room's chat channels, in the record's tie order


@dataclass(frozen=True, slots=True)
class ChannelLines:
    """The kept lines of both channels of a room, oldest first, as stored (JSON)."""

    players: list[str]
    spectators: list[str]


def _check_channel(channel: str) -> None:
    if channel not in CHANNELS:
        raise ValueError(f"no chat channel {channel!r} (players or spectators)")


class ChatLog:
    """Appends to and reads the chat lists of rooms."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._append = redis.register_script(source("chat_append"))

    async def append(
        self, room_id: str, channel: str, line: str, kept: int, rearchive_mark_ms: int
    ) -> str | None:
        """Number ``line`` (JSON without its ``id``), append it to the room's ``channel``
        keeping the last ``kept`` lines, and publish it on the room's channel; in a
        finished room, also queue the room for archiving again (at most once per
        ``rearchive_mark_ms`` until the archiver reads it). The line as stored (JSON), or
        None when the room is gone (nothing is stored)."""
        _check_channel(channel)
        stored: Any = await self._append(
            keys=[
                keys.chat_key(room_id, channel),
                keys.room_key(room_id),
                keys.rearchive_key(room_id),
                keys.archive(keys.group_of(room_id)),
            ],
            args=[
                line,
                kept,
                keys.room_channel(room_id),
                room_id,
                channel,
                rearchive_mark_ms,
                "1" if keys.grouped() else "",
            ],  # fmt: skip
        )
        return None if stored is None else str(stored)

    async def lines(self, room_id: str, channel: str) -> list[str]:
        """The channel's kept lines, oldest first (JSON)."""
        _check_channel(channel)
        kept: Any = await self._redis.lrange(keys.chat_key(room_id, channel), 0, -1)
        return [str(line) for line in kept]

    async def both(self, room_id: str) -> ChannelLines:
        """Both channels' kept lines, read concurrently."""
        players, spectators = await asyncio.gather(
            self.lines(room_id, "players"), self.lines(room_id, "spectators")
        )
        return ChannelLines(players, spectators)

    async def clear_rearchive_mark(self, room_id: str) -> None:
        """Delete the room's re-archive mark, so a line said from now on queues it again."""
        await self._redis.delete(keys.rearchive_key(room_id))
