"""The deadline sweeper: flags fall and unplayed games abort with nobody sending anything.

Every running clock's next automatic action (its flag fall, or the abort of a first move
not made in time) is in the sorted set ``kibitz:deadlines`` (room id -> server-clock ms),
which the commit script keeps in the same atomic step as the room itself (on a Redis
Cluster each slot group has its own, ``kibitz:{gN}:deadlines``, beside its rooms). Every
node runs a sweeper: every ``SWEEP_INTERVAL_S`` it reads the due rooms (one
``ZRANGEBYSCORE`` with a limit: cheap when nothing is due; on a Redis Cluster one per
group in one pipeline, merged earliest first: :meth:`RoomStore.due_rooms`) and, for
each, decides on the loaded room whether the flag has really fallen and commits it
through the same versioned commit as a move (:meth:`RoomService.expire`). So:

- a move that reached its room first wins: the sweeper's commit is then stale, and on the
  fresh room nothing is due any more;
- two nodes sweeping the same room at once both try, and the version check lets one
  through: a game is never ended twice;
- a room whose node died is swept by the nodes that are left.

The same sweep is the AI-turn watchdog (server/domain/ai_watch.py): at an AI's turn the
commit makes the room due also when the AI's move is overdue (its job lost with the last
writes a Redis failover or restart dropped), and a due room with nothing due on its clock
has its AI job queued again (:meth:`RoomService.watch_ai`).

The sweeper also keeps the node's clock set to the Redis server's (``TIME``), which is the
clock of every deadline, so nodes with skewed clocks agree on when a flag falls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus.errors import BusError

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 0.1
SYNC_INTERVAL_S = 10.0  # how often the node's clock is set to the Redis server's again
BATCH = 50  # due rooms handled per sweep


class DeadlineSweeper:
    def __init__(
        self,
        service: RoomService,
        interval_s: float = SWEEP_INTERVAL_S,
        sync_interval_s: float = SYNC_INTERVAL_S,
        on_time_out: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.service = service
        #: Told each room this sweeper ended (abandonments: server/moderation/hooks.py).
        self.on_time_out = on_time_out
        self.interval_s = interval_s
        self.sync_interval_s = sync_interval_s
        self.ended = 0  # rooms this node ended on time

    async def run(self) -> None:
        """Sweep until cancelled. A storage error raises to the supervisor, which starts
        this again with backoff; the clock is set again first."""
        synced = float("-inf")
        while True:
            if time.monotonic() - synced >= self.sync_interval_s:
                await self.service.sync_clock()
                synced = time.monotonic()
            await self.sweep()
            await asyncio.sleep(self.interval_s)

    async def sweep(self) -> int:
        """End every due room that really is due, and queue again the AI job of a due
        room at an AI's turn whose move is overdue; how many rooms this call ended."""
        store = self.service.store
        ended = 0
        for room_id in await store.due_rooms(self.service.clock_ms(), BATCH):
            if await store.load(room_id) is None:
                await store.drop_deadline(room_id)  # the room is gone (expired keys)
                continue
            try:
                done = await self.service.expire(room_id)
                if not done:  # nothing due on its clock: maybe an AI's move is overdue
                    await self.service.watch_ai(room_id)
            except (BusError, OSError):
                raise  # Redis away: the whole sweep fails, and is started again
            except Exception:  # one broken room must not stop the flags of the others
                log.exception("could not end room %s on time", room_id)
                continue
            if done:
                ended += 1
                log.info("room %s ended on its clock", room_id)
                if self.on_time_out is not None:
                    await self.on_time_out(room_id)
        self.ended += ended
        return ended
