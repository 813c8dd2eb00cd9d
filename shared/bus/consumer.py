"""One reader of a Redis stream through a consumer group, for every stream kibitz consumes.

The results (``server/loops/results.py``), the archiver (``server/loops/archiver.py``),
the analysis collector (``server/services/analysis.py``) and the workers
(``workers/worker.py``) all read their stream this way; what differs between them is a
named field of :class:`ConsumerPolicy`. This module decides:

- **Claim, then read.** A round first claims (``XAUTOCLAIM``) entries another consumer
  took and left idle for ``claim_idle_ms`` (it died, or froze), ``count`` at a time, going
  on from where the last claim stopped; then it reads new ones (``XREADGROUP ... >``),
  ``count`` at a time, waiting at most ``block_ms`` for one. A claimed entry was delivered
  before (:attr:`Entry.claimed`); a new one is on its first delivery.
- **Deleted entries.** An entry deleted or trimmed while pending is acknowledged here when
  it is claimed, and never reaches the caller (it holds nothing to handle).
- **Acknowledging.** :meth:`StreamConsumer.ack` acknowledges an entry and, with
  ``delete_acked``, deletes it, so the stream holds only entries not done yet.
- **Tries and poison.** A handler that fails leaves, by ``on_failure``, its entry pending
  and stops the batch (``"raise"``: the error goes to the caller), leaves it pending and
  goes on with the next (``"retry"``), or gives it up at once (``"give_up"``). A pending
  entry is claimed again once idle, and one delivered more than ``max_deliveries`` times
  (its tries failed, or consumers died on it) is poison and is not handed out again; so
  is one whose handler raises :class:`Unparsable`. Poison goes to the ``dead_letters``
  stream with its ``reason`` (trimmed to about ``dead_letters_maxlen`` entries: Redis's
  approximate trim, which keeps at most one stream node more), or, with no dead-letter
  stream, is dropped; either way it is acknowledged and deleted, and logged once. A
  failure of Redis or of the network (``transient``) is not the entry's fault: the entry
  (and the rest of the batch) stays pending, to be claimed again.
- **A lost group.** A claim or read that finds the group gone (Redis lost its data)
  creates it again and returns nothing for that round.

Redis errors reach the caller as the bus's error types (``shared/bus/errors.py``).
:class:`StreamConsumer` runs on an asyncio client (the nodes), :class:`BlockingConsumer`
on a blocking one (the workers); both share the policy and the parsing below.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kibitz.shared.bus.connect import AsyncClient, BlockingClient
from kibitz.shared.bus.errors import BusConnectionError, BusResponseError, BusTimeoutError

log = logging.getLogger(__name__)


#: Failures that are not an entry's fault: the entry stays pending and is tried again.
TRANSIENT: tuple[type[BaseException], ...] = (BusConnectionError, BusTimeoutError, OSError)
DEAD_LETTERS_MAXLEN = 10_000  # entries a dead-letter stream keeps (approximate trim)
MAX_COUNT = 1_000  # the most entries one claim or read may ask for


class Unparsable(Exception):  # noqa: N818 (it names what the entry is, as Redis errors do)
    """Raised by a handler for an entry that no try can ever handle (malformed)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One stream entry handed to a consumer."""

    id: str
    fields: dict[str, str]
    #: Taken over from another consumer (``XAUTOCLAIM``): delivered before. A new entry
    #: (False) is on its first delivery.
    claimed: bool = False


@dataclass(frozen=True, slots=True)
class ConsumerPolicy:
    """How one consumer group reads one stream (the module doc says what each does)."""

    stream: str
    group: str
    claim_idle_ms: int  #: a pending entry idle this long belongs to a dead consumer
    count: int  #: entries claimed, or read, at once
    block_ms: int | None  #: the longest wait of a read for a new entry; None: no wait
    #: deliveries after which an entry is poison (consumers died on it); None: no limit
    max_deliveries: int | None = None
    #: a handler's failure: "raise" leaves the entry pending (claimed again later) and
    #: raises; "retry" leaves it pending and goes on; "give_up" buries it at once
    on_failure: Literal["raise", "retry", "give_up"] = "raise"
    dead_letters: str | None = None  #: where poison goes; None: it is dropped
    dead_letters_maxlen: int = DEAD_LETTERS_MAXLEN  #: the dead-letter stream's bound
    delete_acked: bool = True  #: delete an entry once acknowledged
    transient: tuple[type[BaseException], ...] = field(default=TRANSIENT)

    def __post_init__(self) -> None:
        if not 0 < self.count <= MAX_COUNT:
            raise ValueError(f"count must be 1..{MAX_COUNT}, not {self.count}")
        if self.claim_idle_ms < 0 or (self.block_ms is not None and self.block_ms < 0):
            raise ValueError("claim_idle_ms and block_ms must not be negative")
        if self.max_deliveries is not None and self.max_deliveries < 1:
            raise ValueError("max_deliveries must be at least 1")
        if self.dead_letters_maxlen < 1:
            raise ValueError("dead_letters_maxlen must be at least 1")


Handler = Callable[[Entry], Awaitable[None]]


def missing_group(exc: BaseException) -> bool:
    """Whether a Redis error says the consumer group (or its stream) does not exist."""
    return isinstance(exc, BusResponseError) and "NOGROUP" in str(exc)


def _is_deleted(fields: dict[str, str] | None) -> bool:
    # XADD needs a field, so an entry without any is one deleted while pending.
    return not fields


def claimed_entries(reply: Any) -> tuple[str, list[Entry], bool]:
    """An ``XAUTOCLAIM`` reply: the next cursor, the live entries, and whether entries
    deleted meanwhile were claimed too (Redis 6.2 names them by nothing: they stay
    pending on this consumer until :meth:`_vanished` finds them; Redis 7 drops them from
    the pending list itself)."""
    entries: list[Entry] = []
    deleted = False
    for entry_id, fields in reply[1]:
        if entry_id is None or _is_deleted(fields):
            deleted = True
        else:
            entries.append(Entry(entry_id, fields, claimed=True))
    return str(reply[0]), entries, deleted


def pending_ids(info: Any) -> list[str]:
    """The ids of an ``XPENDING`` range reply."""
    return [str(item["message_id"]) for item in info or []]


def read_entries(batches: Any) -> list[Entry]:
    """The entries of an ``XREADGROUP`` reply (of one stream)."""
    return [
        Entry(entry_id, fields)
        for _stream, items in batches or []
        for entry_id, fields in items
        if not _is_deleted(fields)
    ]


def dead_letter(entry: Entry, reason: str, extra: dict[str, str]) -> dict[str, str]:
    """The fields of a poison entry in a dead-letter stream."""
    return {**entry.fields, "reason": reason, **extra}


def _deliveries(info: Any) -> int:
    return int(info[0]["times_delivered"]) if info else 1


class _Consumer:
    """What both consumers share: the policy, the name and the claim cursor."""

    def __init__(self, policy: ConsumerPolicy, consumer: str) -> None:
        if not consumer:
            raise ValueError("a consumer needs a name")
        self.policy = policy
        self.consumer = consumer
        self._cursor = "0-0"

    def _over_limit(self, deliveries: int) -> bool:
        limit = self.policy.max_deliveries
        return limit is not None and deliveries > limit

    def _log_poison(self, entry: Entry, reason: str, exc: BaseException | None) -> None:
        where = self.policy.dead_letters or "nowhere (dropped)"
        log.error(
            "poison entry %s of %s (%s) goes to %s",
            entry.id, self.policy.stream, reason, where, exc_info=exc,
        )  # fmt: skip


class StreamConsumer(_Consumer):
    """A consumer on an asyncio client (a node's loops)."""

    def __init__(self, client: AsyncClient, policy: ConsumerPolicy, consumer: str) -> None:
        super().__init__(policy, consumer)
        self.client = client

    async def ensure_group(self) -> None:
        await ensure_group(self.client, self.policy.stream, self.policy.group)

    async def claim(self) -> list[Entry]:
        """Entries other consumers left idle past ``claim_idle_ms``, now this one's."""
        p = self.policy
        try:
            reply: Any = await self.client.xautoclaim(
                p.stream, p.group, self.consumer, p.claim_idle_ms, self._cursor, count=p.count
            )
        except BusResponseError as exc:
            return await self._lost_group(exc)
        self._cursor, entries, deleted = claimed_entries(reply)
        if deleted:
            await self.ack(*await self._vanished())
        return entries

    async def _vanished(self) -> list[str]:
        """Entries pending on this consumer that the stream no longer holds."""
        p = self.policy
        info: Any = await self.client.xpending_range(
            p.stream, p.group, min="-", max="+", count=p.count, consumername=self.consumer
        )
        return [i for i in pending_ids(info) if not await self.client.xrange(p.stream, i, i)]

    async def read(self) -> list[Entry]:
        """New entries, waiting up to ``block_ms`` for the first."""
        p = self.policy
        try:
            batches: Any = await self.client.xreadgroup(
                p.group, self.consumer, {p.stream: ">"}, count=p.count, block=p.block_ms
            )
        except BusResponseError as exc:
            return await self._lost_group(exc)
        return read_entries(batches)

    async def _lost_group(self, exc: BusResponseError) -> list[Entry]:
        if not missing_group(exc):
            raise exc
        await self.ensure_group()
        return []

    async def ack(self, *entry_ids: str) -> None:
        """Done with these entries: acknowledged (and deleted, with ``delete_acked``)."""
        if not entry_ids:
            return
        await self.client.xack(self.policy.stream, self.policy.group, *entry_ids)
        if self.policy.delete_acked:
            await self.client.xdel(self.policy.stream, *entry_ids)

    async def deliveries(self, entry: Entry) -> int:
        """How many times ``entry`` has been delivered (a new one: once, no lookup)."""
        if not entry.claimed:
            return 1
        p = self.policy
        info: Any = await self.client.xpending_range(
            p.stream, p.group, min=entry.id, max=entry.id, count=1
        )
        return _deliveries(info)

    async def exhausted(self, entry: Entry) -> bool:
        """Whether ``entry`` has had all its tries (``max_deliveries``)."""
        if self.policy.max_deliveries is None or not entry.claimed:
            return False
        return self._over_limit(await self.deliveries(entry))

    async def bury(
        self, entry: Entry, reason: str, exc: BaseException | None = None, **extra: str
    ) -> None:
        """Give ``entry`` up as poison: into the dead letters (if any), acknowledged,
        logged once."""
        self._log_poison(entry, reason, exc)
        if self.policy.dead_letters is not None:
            fields: Any = dead_letter(entry, reason, extra)
            await self.client.xadd(
                self.policy.dead_letters, fields, maxlen=self.policy.dead_letters_maxlen
            )
        await self.ack(entry.id)

    async def handle_each(self, entries: Sequence[Entry], handler: Handler) -> None:
        """Hand each entry to ``handler`` and acknowledge it once handled; poison is
        buried, a failure handled as ``on_failure`` says (see the module doc). A
        transient failure leaves the entry (and those after it) pending and raises."""
        for entry in entries:
            if await self.exhausted(entry):
                await self.bury(entry, "too many attempts")
                continue
            try:
                await handler(entry)
            except Unparsable as exc:
                await self.bury(entry, str(exc) or "unparsable")
            except self.policy.transient:
                raise
            except Exception as exc:
                await self._failed(entry, exc)
            else:
                await self.ack(entry.id)

    async def _failed(self, entry: Entry, exc: Exception) -> None:
        """A handler failed on ``entry`` (not Redis's fault): as ``on_failure`` says."""
        if self.policy.on_failure == "raise":
            raise exc
        if self.policy.on_failure == "retry":
            log.warning(
                "entry %s of %s failed (%r); tried again later", entry.id, self.policy.stream, exc
            )
            return
        await self.bury(entry, f"{type(exc).__name__}: {exc}"[:200], exc)

    async def round(self, handler: Handler) -> int:
        """One round: claimed entries, then new ones, each through :meth:`handle_each`;
        the number of new entries read."""
        await self.handle_each(await self.claim(), handler)
        fresh = await self.read()
        await self.handle_each(fresh, handler)
        return len(fresh)


class BlockingConsumer(_Consumer):
    """A consumer on a blocking client (a worker process)."""

    def __init__(self, client: BlockingClient, policy: ConsumerPolicy, consumer: str) -> None:
        super().__init__(policy, consumer)
        self.client = client

    def ensure_group(self) -> None:
        """Create the policy's group on its stream (and the stream) unless it exists."""
        try:
            self.client.xgroup_create(self.policy.stream, self.policy.group, id="0", mkstream=True)
        except BusResponseError as exc:
            if not group_exists(exc):
                raise

    def claim(self) -> list[Entry]:
        """Entries other consumers left idle past ``claim_idle_ms``, now this one's."""
        p = self.policy
        reply: Any = self.client.xautoclaim(
            p.stream, p.group, self.consumer, p.claim_idle_ms, self._cursor, count=p.count
        )
        self._cursor, entries, deleted = claimed_entries(reply)
        if deleted:
            self.ack(*self._vanished())
        return entries

    def _vanished(self) -> list[str]:
        """Entries pending on this consumer that the stream no longer holds."""
        p = self.policy
        info: Any = self.client.xpending_range(
            p.stream, p.group, min="-", max="+", count=p.count, consumername=self.consumer
        )
        return [i for i in pending_ids(info) if not self.client.xrange(p.stream, i, i)]

    def read(self, wait: bool = True) -> list[Entry]:
        """New entries; with ``wait``, waiting up to ``block_ms`` for the first."""
        p = self.policy
        block = p.block_ms if wait else None
        batches: Any = self.client.xreadgroup(
            p.group, self.consumer, {p.stream: ">"}, count=p.count, block=block
        )
        return read_entries(batches)

    def ack(self, *entry_ids: str) -> None:
        """Done with these entries: acknowledged (and deleted, with ``delete_acked``)."""
        if not entry_ids:
            return
        self.client.xack(self.policy.stream, self.policy.group, *entry_ids)
        if self.policy.delete_acked:
            self.client.xdel(self.policy.stream, *entry_ids)

    def deliveries(self, entry: Entry) -> int:
        """How many times ``entry`` has been delivered (a new one: once, no lookup)."""
        if not entry.claimed:
            return 1
        p = self.policy
        info: Any = self.client.xpending_range(
            p.stream, p.group, min=entry.id, max=entry.id, count=1
        )
        return _deliveries(info)

    def exhausted(self, entry: Entry) -> bool:
        """Whether ``entry`` has had all its tries (``max_deliveries``)."""
        if self.policy.max_deliveries is None or not entry.claimed:
            return False
        return self._over_limit(self.deliveries(entry))

    def bury(self, entry: Entry, reason: str, **extra: str) -> None:
        """Give ``entry`` up as poison: into the dead letters (if any), acknowledged,
        logged once."""
        self._log_poison(entry, reason, None)
        if self.policy.dead_letters is not None:
            fields: Any = dead_letter(entry, reason, extra)
            self.client.xadd(
                self.policy.dead_letters, fields, maxlen=self.policy.dead_letters_maxlen
            )
        self.ack(entry.id)


async def ensure_group(client: AsyncClient, stream: str, group: str) -> None:
    """Create ``group`` on ``stream`` (and the stream, from its start) unless it exists:
    the one way every stream's group is made (the consumers here, the room store's
    :meth:`~kibitz.shared.bus.store.RoomStore.ensure_groups`, the analysis queue)."""
    try:
        await client.xgroup_create(stream, group, id="0", mkstream=True)
    except BusResponseError as exc:
        if not group_exists(exc):
            raise


def group_exists(exc: BaseException) -> bool:
    """Whether a Redis error says the consumer group exists already (``BUSYGROUP``)."""
    return isinstance(exc, BusResponseError) and "BUSYGROUP" in str(exc)
