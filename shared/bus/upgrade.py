"""Live rooms written by a kibitz that did not tag room keys, renamed to today's keys.

Before the key schema of ``keys.py``, a room's keys were ``kibitz:room:ID``,
``kibitz:room:ID:events``, ... with no hash tag. A node of this version reads only the
tagged names (``kibitz:room:{ID}...``), so at start-up it renames every untagged room key
it finds to its tagged name, keeping its value and lifetime (``RENAMENX``: a tagged key
that already exists is never overwritten, and the old one is then left to expire). The
room ids in the lobby, the deadlines, the queues and the streams are the same in both
schemas, so a game in progress goes on where it was. The pass is one ``SCAN`` over the
keyspace, ``SCAN_COUNT`` keys a step, and renames nothing on a Redis that has no old key.

On a Redis Cluster there is nothing to rename (a cluster's keys have always been in slot
groups: ``keys.py``), and a ``SCAN`` would see one primary only: the pass returns 0 at once.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.keys import ROOM_PREFIX, room_key

#: Keys looked at by one SCAN step.
SCAN_COUNT = 1000


def tagged_name(key: str) -> str | None:
    """The tagged name of an untagged room key (None: not an untagged room key)."""
    if not key.startswith(ROOM_PREFIX) or key.startswith(ROOM_PREFIX + "{"):
        return None
    room_id, colon, rest = key[len(ROOM_PREFIX) :].partition(":")
    if not room_id or "{" in room_id or "}" in room_id:
        return None
    return room_key(room_id) + colon + rest


async def tag_room_keys(client: aioredis.Redis, count: int = SCAN_COUNT) -> int:
    """Rename every untagged room key to its tagged name; how many were renamed (none on
    a Redis Cluster)."""
    if keys.grouped():
        return 0
    renamed = 0
    cursor = 0
    while True:
        reply: Any = await client.scan(cursor, match=ROOM_PREFIX + "*", count=count)
        cursor, found = int(reply[0]), reply[1]
        for key in found:
            new = tagged_name(key)
            if new is not None and await client.renamenx(key, new):
                renamed += 1
        if cursor == 0:
            return renamed
