"""``GET /api/rooms``' paging: the unfinished rooms, most recent first, a page at a time.

A page is the rooms of the live-rooms index (read through the bus's
:class:`~kibitz.shared.bus.lobby.LiveRooms`) changed in the last ``MAX_IDLE_MS``, after the
cursor of the page before: the (last change in ms, room id) of its last room, ties broken
by id, down. The cursor is that pair written by :mod:`kibitz.server.domain.cursor`
without its padding (:meth:`~kibitz.server.domain.cursor.Cursor.encode_unpadded`).
"""

from __future__ import annotations

import time

from kibitz.server.domain.cursor import Cursor
from kibitz.server.domain.room import Room
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus.lobby import LiveEntry, LiveRooms

MAX_ROOMS_PAGE = 100
MAX_IDLE_MS = 86_400_000  # rooms untouched for a day are not listed
_PAGE_SCANS = 10  # bound on the reads that skip rooms tied with the cursor


def _after(entry: LiveEntry, before: Cursor | None) -> bool:
    """Whether ``entry`` comes after the cursor (rooms updated in the cursor's ms whose
    ids are at or above the cursor's were on the pages before)."""
    return before is None or entry.updated_ms != before.ms or entry.room_id < before.id


async def _entries_after(live: LiveRooms, limit: int, before: Cursor | None) -> list[LiveEntry]:
    """Up to ``limit + 1`` index entries after the cursor (one more says a page follows)."""
    cutoff = int(time.time() * 1000) - MAX_IDLE_MS
    top = None if before is None else before.ms
    found: list[LiveEntry] = []
    offset = 0
    for _ in range(_PAGE_SCANS):
        batch = await live.newest(top, cutoff, offset, limit + 1)
        found += [entry for entry in batch if _after(entry, before)]
        offset += len(batch)
        if len(found) > limit or len(batch) < limit + 1:
            break
    return found


async def live_rooms_page(
    live: LiveRooms, service: RoomService, limit: int, before: Cursor | None
) -> tuple[list[Room], str | None]:
    """Unfinished rooms changed in the last day, most recent first (ties by id, down),
    ``limit`` of them after the ``before`` cursor; and the cursor of the next page."""
    found = await _entries_after(live, limit, before)
    page = found[:limit]
    more = len(found) > limit and bool(page)
    next_cursor = Cursor(page[-1].updated_ms, page[-1].room_id).encode_unpadded() if more else None
    loaded = []
    for entry in page:
        room = await service.store.load(entry.room_id)
        if room is not None:
            loaded.append(room)
    return loaded, next_cursor
