"""Every finished game into the database exactly once, and every room out of Redis.

**Archiving.** The commit that ends a game also appends the room's id to the stream
``kibitz:archive`` (same Lua script, same atomic step), so no ended game can be missed.
Every node runs an :class:`Archiver` reading that stream through the consumer group
``archivers``, up to ``BATCH`` entries at a time (after a smaller batch it waits
``LINGER_S``, so that games ending meanwhile make one batch): it loads their rooms and
events, writes their game records in one transaction (an upsert by id, so writing one
twice leaves one row), and only then, in one Redis step per entry, acknowledges and
deletes the entry and gives the room's keys ``finished_ttl_ms`` more to live (long
enough for a rematch and for clients to fetch the result; the node that ended the game
wrote it into the entry) and takes it off the lobby.
A node that dies between reading an entry and acknowledging it leaves the entry pending;
another node claims it (``XAUTOCLAIM``) once it has been idle ``CLAIM_IDLE_MS``. A
database or Redis error leaves the entry pending, to be claimed and tried again; an
entry whose room is gone (or not over) is acknowledged and logged.

**On a Redis Cluster** the commit appends to its room's slot group's stream
(``kibitz:{gN}:archive``, ``keys.archive(g)``), so there is one stream per group, each
with its own ``archivers`` group; a blocking read cannot span slots, so the archiver reads
them all through :class:`~kibitz.shared.bus.consumer.GroupedConsumer`: claims and new
reads of every stream in one pipeline (one batch of commands per cluster node, not
blocking), polled every ``consumer.POLL_S`` while nothing comes, each entry acknowledged
on its own stream (the room's group's, by :meth:`RoomStore.archived`). An entry written
twice (a failover replayed it, a node queued it again) writes the same row twice: the
upsert by id keeps one, and a rated game's change is applied once.

**Sweeping.** Each node also looks, every ``SWEEP_S``, at up to ``SWEEP_BATCH`` lobby
entries (``kibitz:rooms:live``) older than the shorter of the two lifetimes below,
oldest first, going on from where it stopped the round before (every unfinished room,
timed or not, is in that set, scored by its last change, so every one is visited; on a
Redis Cluster each group's lobby in turn, a round reading at most one page of each):

- a room whose keys expired (a waiting room nobody joined, after ``waiting_ttl_ms``)
  is taken off the lobby;
- an untimed playing game is ended through the versioned commit
  (:meth:`RoomService.abandon_if_idle`) when nobody has moved in it for
  ``unstarted_ttl_ms``, when it has had no change for ``idle_game_limit_ms``, or when
  every human player has been gone (the presence hash's ``gone:seat`` times) for
  ``abandon_after_ms`` (``abandon_ai_after_ms`` in a game against the AI, whose seat is
  never gone). A game with a move ends as abandoned and is archived like any other; one
  that nobody moved in is aborted, and an aborted game is not archived (the commit gives
  its keys the finished-room lifetime at once). A correspondence game nobody has moved
  in is aborted the same way when its players are all gone (its first move may take
  days per move: two connections that leave must not hold a room that long), but not
  for the idle limits while they are there; other timed games are left to their clocks
  (the first-move timeout, days per move, flags: deadlines.py);
- a waiting room older than its lifetime that has no TTL (made before TTLs existed) is
  deleted.

Once after it starts, a node also walks all room keys, ``LEGACY_SCAN`` at a time each
round, and queues for archiving every finished room without a TTL: games that ended
before the archive existed (not on a Redis Cluster, which came later: it has none).

Any node may sweep the same room at the same time: the commit is versioned, the delete
is guarded by the version, and the archive stream's consumer group hands each entry to
one node, so double work changes nothing.

The loop itself does not retry: a database or Redis error raises to the node's
supervisor (server/loops/supervisor.py), which starts it again with backoff.

``delay_s`` (fault injection for tests only; ``KIBITZ_ARCHIVE_DELAY_MS`` through the node
config, server/config.py): sleep this long after reading an entry and before writing it,
so a test can kill the node in between; ``release_delay_s``
(``KIBITZ_ARCHIVE_RELEASE_DELAY_MS``): sleep this long after the database write and
before the acknowledgement, so a test can kill the node with the game written and its
entry still pending (another node then writes it again: a rated game's change is not
applied twice, server/ratings/store.py).

**Ratings.** The write is ``Archive.save_many``, whose transaction also applies each rated
game's rating change (the archive's ``before_save`` hook, server/ratings/store.py), keyed
by the game's id: the records written carry the changes (``"ratings"``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from kibitz.server.archive.database import Archive, ArchiveError
from kibitz.server.domain.records import record_of
from kibitz.server.domain.room import Room, ends_when_left
from kibitz.server.services.chat import settle_record_chat
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.connect import AsyncClient
from kibitz.shared.bus.consumer import AsyncConsumer, ConsumerPolicy, Entry, consumer_of
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.stopping import raise_if_stopping
from kibitz.shared.bus.store import FINISHED_TTL_MS, WAITING_TTL_MS

log = logging.getLogger(__name__)

BLOCK_MS = 1000
BATCH = 50  # archive entries read at once
#: After a batch smaller than BATCH, the wait before the next read, so that games ending
#: meanwhile are written together: a busy node pays the reads, the transaction and its
#: hops to the database thread once for many games (about a tenth of a tic-tac-toe
#: move's node CPU). A game waits at most this much longer to reach the database.
LINGER_S = 0.1
CLAIM_IDLE_MS = 5_000  # a pending entry idle this long belongs to a dead or stuck node
SWEEP_S = 1.0
SWEEP_BATCH = 100  # lobby entries looked at per sweep round
LEGACY_SCAN = 200  # keys looked at per round by the one pass over pre-archive rooms
IDLE_GAME_LIMIT_MS = 3 * 24 * 60 * 60 * 1000
UNSTARTED_TTL_MS = 10 * 60 * 1000  # an untimed game nobody has moved in is aborted
ABANDON_AFTER_MS = 30 * 60 * 1000  # both players gone this long: the game is abandoned
ABANDON_AI_AFTER_MS = 24 * 60 * 60 * 1000  # the same for the human of a game against the AI


def policy() -> ConsumerPolicy:
    """The archive streams through the one stream consumer: the archiver acknowledges an
    entry itself (with the room's new lifetime, in one step), and retries one for ever: an
    entry not archived (the database or Redis away) stays pending, claimed again after
    CLAIM_IDLE_MS; one that names no finished room is dropped. (Its stream is group 0's;
    on a Redis Cluster :func:`streams` names them all.)"""
    return ConsumerPolicy(
        keys.archive(0), keys.ARCHIVERS_GROUP, claim_idle_ms=CLAIM_IDLE_MS, count=BATCH,
        block_ms=BLOCK_MS,
    )  # fmt: skip


def streams() -> list[str]:
    """Every archive stream: one on a single Redis, each slot group's on a Redis Cluster."""
    return [keys.archive(group) for group in keys.groups()]


@dataclass(frozen=True, slots=True)
class Lifetimes:
    """How long rooms stay in Redis (milliseconds)."""

    finished_ttl_ms: int = FINISHED_TTL_MS  # after the game is in the database
    waiting_ttl_ms: int = WAITING_TTL_MS  # a room nobody joins
    idle_game_limit_ms: int = IDLE_GAME_LIMIT_MS  # an untimed game nobody plays on
    unstarted_ttl_ms: int = UNSTARTED_TTL_MS  # an untimed game nobody has moved in
    abandon_after_ms: int = ABANDON_AFTER_MS  # every player of a game gone
    abandon_ai_after_ms: int = ABANDON_AI_AFTER_MS  # the human of a game against the AI gone

    def idle_limit_ms(self, room: Room) -> int:
        """How long ``room``'s untimed game may go without a change before it is ended:
        aborted (never archived) if nobody has moved yet, else abandoned."""
        if not room.moves:
            return min(self.idle_game_limit_ms, self.unstarted_ttl_ms)
        return self.idle_game_limit_ms

    def gone_limit_ms(self, room: Room) -> int:
        """How long every human player of ``room`` may be gone before its game is ended."""
        return self.abandon_ai_after_ms if room.has_ai else self.abandon_after_ms

    def shortest_ms(self) -> int:
        """The shortest of these lifetimes: rooms younger than it need no sweeping."""
        return min(
            self.waiting_ttl_ms,
            self.idle_game_limit_ms,
            self.unstarted_ttl_ms,
            self.abandon_after_ms,
            self.abandon_ai_after_ms,
        )


@dataclass(frozen=True, slots=True)
class _Entry:
    """An archive entry read, and the record of the game it names."""

    entry: Entry
    room_id: str
    ttl_ms: int
    record: dict[str, Any]


class Archiver:
    def __init__(
        self,
        redis: AsyncClient,
        service: RoomService,
        archive: Archive,
        chat: ChatLog,
        node: str,
        lifetimes: Lifetimes,
        delay_s: float = 0.0,
        release_delay_s: float = 0.0,
    ) -> None:
        """``chat``: the node's chat lists, read into each record; ``delay_s`` and
        ``release_delay_s``: fault injection for tests (the node config's
        ``archive_delay_ms`` and ``archive_release_delay_ms``)."""
        self.redis = redis
        self.chat = chat
        self.store: RoomStore = service.store
        self.service = service
        self.archive = archive
        self.node = node
        self.lifetimes = lifetimes
        self.delay_s = delay_s
        self.release_delay_s = release_delay_s
        self._sweep_offset = 0  # where the next sweep goes on in the lobby
        self._sweep_offsets: dict[int, int] = {}  # the same, per group, on a Redis Cluster
        self._sweep_group = 0  # the group the next sweep starts in, on a Redis Cluster
        self._next_sweep = 0.0
        # None once the pass over old rooms is done; a Redis Cluster has none (kibitz
        # came to clusters after the archive), and SCAN would see one primary only.
        self._legacy_cursor: int | None = None if keys.grouped() else 0
        self.stream: AsyncConsumer = consumer_of(redis, policy(), node, streams())

    async def run(self) -> None:
        """Archive and sweep until cancelled. A failure (Redis or the database away, the
        group lost) raises to the supervisor, which starts this again with backoff; the
        entry stays pending and is claimed again after CLAIM_IDLE_MS."""
        await self.stream.ensure_group()
        while True:
            # Entries a dead node (or this one, before a restart) left pending.
            await self._handle(await self.stream.claim())
            entries = await self.stream.read()
            read = len(entries)
            await self._handle(entries)
            if 0 < read < BATCH:  # more are ending: let them gather into one batch
                await asyncio.sleep(LINGER_S)
            if time.monotonic() >= self._next_sweep:
                self._next_sweep = time.monotonic() + SWEEP_S
                await self.sweep()
                await self.queue_legacy_rooms()

    async def _handle(self, entries: list[Entry]) -> None:
        """Archive a batch of entries: their rooms are read at once, their games written
        in one transaction (one disk sync however many), and then they are released.
        A busy node thus writes in bigger batches, not more often."""
        if not entries:
            return
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        found = await asyncio.gather(*(self._read(entry) for entry in entries))
        ready = [entry for entry in found if entry is not None]
        if not ready:
            return
        try:
            await self.archive.save_many([entry.record for entry in ready])
        except ArchiveError:  # one of them is refused: one by one, so only that one is dropped
            for entry in ready:
                await self._save_one(entry)
            return
        if self.release_delay_s:
            await asyncio.sleep(self.release_delay_s)
        await asyncio.gather(*(self._release(entry) for entry in ready))

    async def _read(self, entry: Entry) -> _Entry | None:
        """The game an entry names, ready to write; None (and the entry dropped) if it
        names no finished room or its record cannot be made."""
        entry_id, fields = entry.id, entry.fields
        room_id = fields.get("room", "")
        ttl = fields.get("ttl_ms", "")
        ttl_ms = int(ttl) if ttl.isdigit() and int(ttl) > 0 else self.lifetimes.finished_ttl_ms
        room = await self.store.load(room_id) if room_id else None
        if room is None or room.status != "over":
            why = "gone" if room is None else room.status
            log.error("archive entry %s names room %r (%s); dropping it", entry_id, room_id, why)
            await self.stream.ack_entries(entry)
            return None
        # The chat after the mark is cleared: a line said later queues the room again.
        events, chat = await asyncio.gather(
            self.store.events_since(room_id, -1), settle_record_chat(self.chat, room_id)
        )
        try:
            record = record_of(room, events, chat)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("cannot make the record of room %s (%s); dropping it", room_id, exc)
            await self.stream.ack_entries(entry)
            return None
        return _Entry(entry, room_id, ttl_ms, record)

    async def _save_one(self, entry: _Entry) -> None:
        try:
            await self.archive.save(entry.record)
        except ArchiveError as exc:
            log.error("cannot archive room %s (%s); dropping it", entry.room_id, exc)
            await self.stream.ack_entries(entry.entry)
            return
        await self._release(entry)

    async def _release(self, entry: _Entry) -> None:
        """Acknowledge the entry, give the room its lifetime, take it off the lobby (one
        step, on the stream of the room's group)."""
        stream = entry.entry.stream
        if not stream or stream == keys.archive(keys.group_of(entry.room_id)):
            await self.store.archived(entry.room_id, entry.entry.id, entry.ttl_ms)
            return
        # Queued in another group's stream than its room's (no writer does that): the
        # room's step is taken with no entry ("0-0" names none), the entry acknowledged
        # on its own stream.
        await self.store.archived(entry.room_id, "0-0", entry.ttl_ms)
        await self.stream.ack_entries(entry.entry)

    async def _end_if_idle(self, room: Room, now: int) -> bool:
        """End ``room``'s game if nobody plays on (see the module doc): an untimed one
        with no change for its idle limit, or (untimed, or correspondence nobody has moved
        in) with every human player gone for the gone limit."""
        if not ends_when_left(room):
            return False  # its clock ends it
        idle = now - room.updated_ms
        if room.clock is None:  # a correspondence first move may take its days
            limit = self.lifetimes.idle_limit_ms(room)
            if idle >= limit and await self.service.abandon_if_idle(room.id, limit):
                log.info("room %s ended after %d ms without a change", room.id, idle)
                return True
        gone_limit = self.lifetimes.gone_limit_ms(room)
        if idle < gone_limit:
            return False  # a change since: somebody was there
        gone = await self.service.players_gone_since(room)
        if gone is None or self.service.clock_ms() - gone < gone_limit:
            return False
        if await self.service.abandon_if_idle(room.id, gone_limit, room.version):
            log.info("room %s ended: its players have been gone %d ms", room.id, gone_limit)
            return True
        return False

    async def queue_legacy_rooms(self) -> int:
        """One round of the startup pass over room keys: queue finished rooms that were
        never queued (they ended before the archive existed); the number queued."""
        if self._legacy_cursor is None:
            return 0
        cursor, room_ids = await self.store.scan_room_records(self._legacy_cursor, LEGACY_SCAN)
        self._legacy_cursor = cursor or None
        queued = 0
        for room_id in room_ids:
            if await self.store.queue_if_legacy(room_id):
                queued += 1
        if queued:
            log.info("queued %d rooms that ended before the archive existed", queued)
        return queued

    async def sweep(self) -> int:
        """One bounded round over old lobby entries (see the module doc); the number of
        rooms it ended or forgot."""
        now = int(time.time() * 1000)
        oldest = self.lifetimes.shortest_ms()
        if keys.grouped():
            ids = await self._idle_in_groups(now - oldest)
        else:
            ids = await self.store.live_rooms_idle_since(
                now - oldest, self._sweep_offset, SWEEP_BATCH
            )
            # Go on from here next round, or start again at the oldest after the last page.
            self._sweep_offset = self._sweep_offset + len(ids) if len(ids) == SWEEP_BATCH else 0
        changed = 0
        for room_id in ids:
            room = await self.store.load(room_id)
            if room is None:  # its keys expired: a waiting room nobody joined
                changed += await self.store.forget(room_id, None)
            elif room.status == "playing":
                changed += await self._end_if_idle(room, now)
            elif (
                room.status == "waiting"
                and now - room.updated_ms >= self.lifetimes.waiting_ttl_ms
                and not await self.store.has_lifetime(room_id)
            ):
                # Still here past its lifetime and no TTL: made before rooms had one.
                changed += await self.store.forget(room_id, room.version)
        return changed

    async def _idle_in_groups(self, before_ms: int) -> list[str]:
        """On a Redis Cluster, one sweep's lobby entries: each group's lobby in turn, from
        where the last round stopped, until SWEEP_BATCH entries are found or every group
        was looked at once (so a round reads at most one page of each group). A group whose
        primary is down (failing over) is passed over this round; only if every group
        failed does the round raise."""
        found: list[str] = []
        failed: list[BaseException] = []
        for _ in keys.groups():
            group = self._sweep_group % keys.group_count()
            offset = self._sweep_offsets.get(group, 0)
            want = SWEEP_BATCH - len(found)
            try:
                ids = await self.store.live_rooms_idle_since(before_ms, offset, want, group=group)
            except (BusError, OSError) as exc:
                raise_if_stopping()
                failed.append(exc)
                self._sweep_group = group + 1
                continue
            found += ids
            if len(ids) == want:  # the page is full: this group goes on next round
                self._sweep_offsets[group] = offset + len(ids)
                break
            self._sweep_offsets[group] = 0  # done with it: from its oldest next time
            self._sweep_group = group + 1
        if failed:
            if len(failed) == keys.group_count():
                raise failed[0]
            log.warning("idle-game sweep: %d slot groups passed over (%s)", len(failed), failed[0])
        return found
