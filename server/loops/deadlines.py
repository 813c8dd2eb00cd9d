"""The deadline sweeper: flags fall and unplayed games abort with nobody sending anything.

Every running clock's next automatic action (its flag fall, or the abort of a first move
not made in time) is in the sorted set ``kibitz:deadlines`` (room id -> server-clock ms),
which the commit script keeps in the same atomic step as the room itself (on a Redis
Cluster each slot group has its own, ``kibitz:{gN}:deadlines``, beside its rooms). Every
node runs a sweeper: every ``SWEEP_INTERVAL_S`` it reads the due rooms (one
``ZRANGEBYSCORE`` with a limit: cheap when nothing is due; on a Redis Cluster one per
group swept, all at once, merged earliest first: :meth:`RoomStore.due_rooms`) and, for
each, decides on the loaded room whether the flag has really fallen and commits it
through the same versioned commit as a move (:meth:`RoomService.expire`). So:

- a move that reached its room first wins: the sweeper's commit is then stale, and on the
  fresh room nothing is due any more;
- two nodes sweeping the same room at once both try, and the version check lets one
  through: a game is never ended twice;
- a room whose node died is swept by the nodes that are left.

On a Redis Cluster the nodes share the slot groups rather than each reading all of them
every tick (``keys.group_count()`` reads, 64 by default, ten times a second, on every
node). Each group has one **owner** among the live nodes, by rendezvous hashing of (node,
group) (:func:`owned_groups`: every node computes the same owners from the same list, and a
node joining or leaving moves only the groups it takes or leaves). A sweeper reads:

- its own groups every ``SWEEP_INTERVAL_S`` (0.1 s): a flag falls within about that;
- every group every ``BACKUP_INTERVAL_S`` (1 s): a group whose owner died (still listed
  live until its heartbeat's TTL lapses, ``NODE_TTL_S``), or whose owner has another
  list of live nodes for a moment, still has its flags fall within about 1 s, and so do
  the flags of a group whose primary failed over while its owner's read was refused.

The live nodes are read again every ``MEMBERSHIP_INTERVAL_S`` (the node beats on the
control slot: :meth:`RoomStore.live_nodes`); the node itself counts as live whether it is
listed or not (a node alone owns every group). If that read fails, the last list stands
(flags never wait for it). A node then reads its share of the groups ten times a second
and all of them once a second: with N nodes the cluster's sweep reads are about
``10 * G + N * G`` a second, not ``10 * N * G``. On a single Redis there is one set and
one read every tick, as before.

The same sweep is the AI-turn watchdog (server/domain/ai_watch.py): at an AI's turn the
commit makes the room due also when the AI's move is overdue (its job lost with the last
writes a Redis failover or restart dropped), and a due room with nothing due on its clock
has its AI job queued again (:meth:`RoomService.watch_ai`).

The sweeper also keeps the node's clock set to the Redis server's (``TIME``), which is the
clock of every deadline, so nodes with skewed clocks agree on when a flag falls.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.stopping import raise_if_stopping

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 0.1
#: A Redis Cluster: how often a sweeper reads every slot group, not only its own.
BACKUP_INTERVAL_S = 1.0
#: A Redis Cluster: how often a sweeper reads the live nodes again (and so its groups).
MEMBERSHIP_INTERVAL_S = 2.0
SYNC_INTERVAL_S = 10.0  # how often the node's clock is set to the Redis server's again
BATCH = 50  # due rooms handled per sweep


def owned_groups(node: str, live: Iterable[str], groups: int) -> frozenset[int]:
    """The slot groups of ``range(groups)`` that ``node`` owns among the nodes ``live``
    (``node`` counts as live whether listed or not): those where its weight is the
    highest (rendezvous hashing). Among the same nodes every group has exactly one owner,
    whichever node asks."""
    members = set(live) | {node}
    return frozenset(group for group in range(groups) if _owner(group, members) == node)


def _owner(group: int, members: Iterable[str]) -> str:
    """The member of highest weight for ``group`` (the name breaks a tie)."""
    return max(members, key=lambda member: (_weight(member, group), member))


def _weight(node: str, group: int) -> int:
    """``node``'s rendezvous weight for ``group``: a stable hash, the same in every process
    (not Python's ``hash``, salted per process; not a CRC either, which, being linear,
    ranks names of one length the same way in every group)."""
    digest = hashlib.blake2b(f"{group}:{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class DeadlineSweeper:
    def __init__(
        self,
        service: RoomService,
        interval_s: float = SWEEP_INTERVAL_S,
        sync_interval_s: float = SYNC_INTERVAL_S,
        on_time_out: Callable[[str], Awaitable[None]] | None = None,
        backup_interval_s: float = BACKUP_INTERVAL_S,
        membership_interval_s: float = MEMBERSHIP_INTERVAL_S,
    ) -> None:
        self.service = service
        #: Told each room this sweeper ended (abandonments: server/moderation/hooks.py).
        self.on_time_out = on_time_out
        self.interval_s = interval_s
        self.sync_interval_s = sync_interval_s
        self.backup_interval_s = backup_interval_s
        self.membership_interval_s = membership_interval_s
        self.ended = 0  # rooms this node ended on time
        #: A Redis Cluster: the live nodes last read, and the slot groups this node owns
        #: among them (None: not read yet).
        self.live: tuple[str, ...] = ()
        self.owned: frozenset[int] | None = None
        self._read_failed = False  # the last read of the live nodes failed (logged once)

    async def run(self) -> None:
        """Sweep until cancelled. A storage error raises to the supervisor, which starts
        this again with backoff; the clock is set again first, and the first sweep reads
        every group."""
        synced = swept_all = read_live = float("-inf")
        while True:
            now = time.monotonic()
            if now - synced >= self.sync_interval_s:
                await self.service.sync_clock()
                synced = now
            groups: frozenset[int] | None = None  # every group (a single Redis: its one)
            if keys.grouped():
                if now - read_live >= self.membership_interval_s:
                    await self.read_live_nodes()
                    read_live = now
                if now - swept_all >= self.backup_interval_s:
                    swept_all = now
                else:
                    groups = self.owned
            await self.sweep(groups)
            await asyncio.sleep(self.interval_s)

    async def read_live_nodes(self) -> None:
        """A Redis Cluster: read the live nodes again, and so the groups this node owns.
        If the read fails, the last list stands (logged once until a read succeeds)."""
        store = self.service.store
        try:
            live = tuple(await store.live_nodes())
        except (BusError, OSError) as exc:
            raise_if_stopping()
            level = logging.DEBUG if self._read_failed else logging.WARNING
            log.log(level, "could not read the live nodes (the last list stands): %s", exc)
            self._read_failed = True
            live = self.live
        else:
            self._read_failed = False
        if live != self.live or self.owned is None:
            self.live = live
            self.owned = owned_groups(store.node, live, keys.group_count())
            log.info(
                "deadline sweeper: %d live nodes, this one sweeps %d of %d slot groups "
                "every %.1f s (all every %.1f s)",
                len(set(live) | {store.node}), len(self.owned), keys.group_count(),
                self.interval_s, self.backup_interval_s,
            )  # fmt: skip

    async def sweep(self, groups: frozenset[int] | None = None) -> int:
        """End every due room that really is due, and queue again the AI job of a due
        room at an AI's turn whose move is overdue; how many rooms this call ended. On a
        Redis Cluster only the rooms of the slot groups ``groups`` (None: every group)."""
        store = self.service.store
        ended = 0
        for room_id in await store.due_rooms(self.service.clock_ms(), BATCH, groups):
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
