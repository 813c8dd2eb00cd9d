"""What the followers here are sent when updates may have been missed.

Decides the repair after a fault: once a lost subscription is live again, every room
followed here is read from Redis, in batches of ``RESYNC_BATCH``, and sent to its
followers as Redis holds it now, whatever they saw (forced: after a Redis restart that
lost its last second of writes, the truth may be an older version than a client has
seen, and the client must get it), after this node's presence counts for the room are
written whole. That repair is retried with the node loops' one backoff policy
(server/loops/supervisor.py) until it succeeds, ``MAX_TRIES`` times at most (about as many
seconds; a subscription that stays live so long with Redis failing is lost soon, and the
next one resyncs again). A single room whose subscription was confirmed late is repaired
once, when the confirmation comes.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterable

from kibitz.server.fanout.followers import Followers, players_first
from kibitz.server.fanout.frames import StateFrames
from kibitz.server.fanout.presence import RESYNC_BATCH, Presence
from kibitz.server.fanout.tasks import TaskSet, why
from kibitz.server.loops.supervisor import Backoff
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.stopping import raise_if_stopping

log = logging.getLogger(__name__)

#: Between attempts at a whole resync, and how many at most.
RETRIES = Backoff(first_s=0.1, cap_s=1.0)
MAX_TRIES = 120


class Resync:
    """Sends the followers here their rooms as Redis holds them (see the module's doc)."""

    def __init__(
        self, service: RoomService, followers: Followers, presence: Presence, tasks: TaskSet
    ) -> None:
        self.service = service
        self.followers = followers
        self.presence = presence
        self.tasks = tasks

    def all_later(self) -> None:
        """Resync every followed room, in the background, until it succeeds."""
        self.tasks.spawn(self._until_done(None))

    def rooms_later(self, room_ids: Iterable[str]) -> None:
        """Resync these rooms (those still followed), in the background, until it
        succeeds: on a Redis Cluster, the rooms of a subscription lost and made again
        elsewhere (shards.py)."""
        self.tasks.spawn(self._until_done(list(room_ids)))

    def room_later(self, room_id: str) -> None:
        """Resync one room, in the background, once (a failure is logged)."""
        self.tasks.spawn(self._room_quietly(room_id))

    async def _room_quietly(self, room_id: str) -> None:
        try:
            await self.room(room_id)
        except (BusError, OSError) as exc:
            raise_if_stopping()
            log.warning("resync of %s failed: %s", room_id, why(exc))

    async def _until_done(self, room_ids: list[str] | None) -> None:
        # A task of its own, not a node loop: it ends once done (see the module doc).
        for tries in range(1, MAX_TRIES + 1):
            try:
                await self._all(room_ids)
                return
            except (BusError, OSError) as exc:
                raise_if_stopping()
                log.warning("resync failed (%s); retrying", why(exc))
                await asyncio.sleep(RETRIES.delay(tries, random.random()))
        log.error("resync given up after %d tries; the next re-subscription resyncs", MAX_TRIES)

    async def _all(self, only: list[str] | None = None) -> None:
        """Send every followed room (or those of ``only`` still followed) as Redis holds
        it now, in bounded batches."""
        rooms = self.followers.rooms
        room_ids = list(rooms) if only is None else [r for r in only if r in rooms]
        for i in range(0, len(room_ids), RESYNC_BATCH):
            batch = room_ids[i : i + RESYNC_BATCH]
            await asyncio.gather(*(self.room(room_id) for room_id in batch))

    async def room(self, room_id: str) -> None:
        """Send ``room_id``'s current state to its local followers, whatever they saw."""
        room = await self.service.store.load(room_id)
        followers = self.followers.rooms.get(room_id)
        if room is None or not followers:
            return
        await self.presence.restate(room_id, followers)
        snap = await self.service.snapshot(room)
        snap["event"] = {"kind": "resync"}
        frames = StateFrames(snap)
        for conn in players_first(room_id, followers):
            conn.send_state(room_id, frames, force=True)
