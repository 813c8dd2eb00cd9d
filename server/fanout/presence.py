"""How this node's followers are counted in their rooms' presence, and when it is told.

Decides what the node writes to a room's presence (through the room store) as followers
come and go, and when the room's followers everywhere hear of it: a player's arrival or
departure is told at once (:meth:`RoomService.leave` counts out and tells in one step); a
spectator's only rides on the room's next state and on at most one presence broadcast
per room every ``PRESENCE_EVERY_S`` across the cluster (a thousand spectators arriving
cost a few broadcasts, not a thousand). A departure Redis could not be told of is owed,
not forgotten, and paid back once Redis answers (else the player would show as connected
for as long as this node lives). After a resync the node's counts are written whole
(:meth:`Presence.restate`); when another node dies, every room followed here is told.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from kibitz.server.fanout.connection import Connection
from kibitz.server.fanout.followers import Followers
from kibitz.server.fanout.tasks import TaskSet, why
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.fanout import FanoutBus
from kibitz.shared.bus.stopping import raise_if_stopping
from kibitz.shared.protocol.node import NodeDied

log = logging.getLogger(__name__)

#: At most one presence broadcast per room this often for spectators coming and going.
PRESENCE_EVERY_S = 2.0
#: The cluster-wide mark of a broadcast lives a little less than the wait before one, so
#: the next change's broadcast finds it gone.
PRESENCE_MARK_MS = int(PRESENCE_EVERY_S * 900)
RESYNC_BATCH = 50  # rooms read or told at once (a resync, a node's death)
#: A connection that followed no room before (:meth:`Presence.moved`'s ``previous``).
ABSENT: Final = "absent"


class Presence:
    """This node's share of its rooms' presence counts (see the module's doc)."""

    def __init__(
        self, service: RoomService, followers: Followers, bus: FanoutBus, tasks: TaskSet
    ) -> None:
        self.service = service
        self.store = service.store
        self.followers = followers
        self.bus = bus
        self.tasks = tasks
        #: (room, seat or None for spectators) -> connections that left while Redis could
        #: not be told. At most one entry per room and seat this node had followers in.
        self.owed_leaves: dict[tuple[str, int | None], int] = {}
        #: Rooms whose spectator count changed here and will be broadcast shortly.
        self._due: set[str] = set()

    async def moved(self, room_id: str, previous: int | None | str, seat: int | None) -> None:
        """A connection that followed ``room_id`` as ``previous`` (a seat, None for a
        spectator, ABSENT for not at all) now follows it as ``seat``: counted over."""
        if previous == seat:
            return
        if previous is None or isinstance(previous, int):
            await self.store.attach(room_id, previous, -1)
        await self.store.attach(room_id, seat, +1)
        if previous is None or seat is None:
            self.spectators_changed(room_id)

    async def count_out(self, room_id: str, seat: int | None) -> None:
        """One follower of ``room_id`` on this node gone: a spectator is counted out (the
        count is broadcast later); a player is counted out and the room's followers told,
        in one step (:meth:`RoomService.leave`)."""
        if seat is None:
            await self.store.attach(room_id, None, -1)
            self.spectators_changed(room_id)
        else:
            await self.service.leave(room_id, seat)

    async def count_out_or_owe(self, room_id: str, seat: int | None) -> None:
        """:meth:`count_out`, or, if Redis cannot be told now, owed until it can."""
        try:
            await self.count_out(room_id, seat)
        except (BusError, OSError) as exc:
            log.warning("could not record that a follower left %s: %s", room_id, why(exc))
            self.owed_leaves[(room_id, seat)] = self.owed_leaves.get((room_id, seat), 0) + 1

    async def pay_owed_leaves(self) -> None:
        """Record the departures that failed while Redis was unreachable, and say so."""
        for (room_id, seat), count in list(self.owed_leaves.items()):
            await self.store.attach(room_id, seat, -count)
            del self.owed_leaves[(room_id, seat)]
            if seat is None:
                self.spectators_changed(room_id)
            else:
                await self.service.publish_presence(room_id)

    async def restate(self, room_id: str, followers: set[Connection]) -> None:
        """Write this node's player counts for ``room_id`` as they are, not as increments:
        a Redis that restarted may have lost them (or this node's updates during the gap)."""
        counts: dict[int | None, int] = {0: 0, 1: 0, None: 0}
        for conn in followers:
            counts[conn.rooms.get(room_id)] += 1
        for seat, count in counts.items():
            self.owed_leaves.pop((room_id, seat), None)  # settled by this absolute count
            await self.store.restate(room_id, seat, count)

    def spectators_changed(self, room_id: str) -> None:
        """A spectator came or went: the count rides on the room's next state, and on at
        most one presence broadcast per room every PRESENCE_EVERY_S."""
        if room_id in self._due:
            return
        self._due.add(room_id)
        self.tasks.spawn(self._publish_spectators(room_id))

    async def _publish_spectators(self, room_id: str) -> None:
        try:
            await asyncio.sleep(PRESENCE_EVERY_S)
            self._due.discard(room_id)
            # Once per room across the cluster: a node that finds another's broadcast
            # newer than its change (the mark is younger than the wait) leaves it at that.
            if await self.bus.mark_presence_sent(room_id, PRESENCE_MARK_MS):
                await self.service.publish_presence(room_id)
        except (BusError, OSError) as exc:
            raise_if_stopping()
            log.debug("spectator count not broadcast for %s: %s", room_id, why(exc))
        finally:
            self._due.discard(room_id)

    def on_node_died(self, data: str) -> None:
        """Another node died (``data``: the node-died channel's payload): its players are
        gone, and nobody else will say so. Tell the followers of every room followed here
        (the presence read records them as gone)."""
        node = NodeDied.parse(data).node
        log.warning("node %s stopped beating; updating presence in %d rooms",
                    node, len(self.followers.rooms))  # fmt: skip
        self.tasks.spawn(self._publish_presence_all())

    async def _publish_presence_all(self) -> None:
        room_ids = list(self.followers.rooms)
        try:
            for i in range(0, len(room_ids), RESYNC_BATCH):
                batch = room_ids[i : i + RESYNC_BATCH]
                await asyncio.gather(*(self.service.publish_presence(r) for r in batch))
        except (BusError, OSError) as exc:
            raise_if_stopping()
            log.warning("presence update after a node died failed: %s", why(exc))
