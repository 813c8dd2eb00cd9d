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
- **Many streams, one group.** On a Redis Cluster a stream the commit writes exists once
  per slot group (``keys.archive(g)``), and a blocking read cannot span slots (nor can
  one ``XREADGROUP`` of several streams: their keys are in different slots).
  :class:`GroupedConsumer` reads one consumer group on all of them: every stream's group
  is made, claims (``XAUTOCLAIM``) and new reads (``XREADGROUP ... >``, not blocking) go
  to every stream in one pass: on a single Redis in one pipeline; on a Redis Cluster each
  command on its own, all at once (ClusterRedis sends a primary's together down its one
  pipelined link), but the reads, which go through redis-py's pool (a read may block),
  in one pipeline while every stream answers (redis-py sends each primary its part at
  once). A pass that found entries is followed at once by the next; after an empty one
  the wait is ``poll_s``, doubling after each further empty pass up to ``idle_poll_s``
  (an idle node costs each stream one read a second, and a claim every
  ``claim_every_s``). Each entry carries its stream (:attr:`Entry.stream`), so its
  acknowledgement, tries and burial go to that stream's group. A claim or read pass
  hands out at most about ``count`` entries in all (``ceil(count / streams)`` from each
  stream).
- **A primary down.** A stream that fails in a pass (an error reply, or its primary
  killed, frozen past the client's command timeout, or failing over) is left out of that
  pass, and its entries stay where they are, to be read or claimed at a later one; the
  other primaries' streams are handed out meanwhile. Only a pass in which every stream
  failed raises. Such failures are logged when they begin, then at most every
  ``FAILURES_LOG_EVERY_S`` while they last, and when they end. Meanwhile the reads too
  go command by command, not in redis-py's cluster pipeline (see :func:`_at_once`); the
  pipelined read that met the failure is made again that way at once, and what it had
  read on the other primaries, lost on the way back, is claimed later. On a Redis
  Cluster acknowledgements go command by command; one that fails raises once the others
  are done (its entries stay pending, to be claimed again).

Redis errors reach the caller as the bus's error types (``shared/bus/errors.py``).
:class:`StreamConsumer` runs on an asyncio client (the nodes), :class:`BlockingConsumer`
on a blocking one (the workers); both share the policy and the parsing below.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias, TypeVar

from kibitz.shared.bus.connect import AsyncClient, BlockingClient, ClusterRedis
from kibitz.shared.bus.errors import (
    BusConnectionError,
    BusError,
    BusResponseError,
    BusTimeoutError,
)

log = logging.getLogger(__name__)


#: Failures that are not an entry's fault: the entry stays pending and is tried again.
TRANSIENT: tuple[type[BaseException], ...] = (BusConnectionError, BusTimeoutError, OSError)
DEAD_LETTERS_MAXLEN = 10_000  # entries a dead-letter stream keeps (approximate trim)
MAX_COUNT = 1_000  # the most entries one claim or read may ask for
POLL_S = 0.25  # a GroupedConsumer's first wait after a read that found nothing ...
IDLE_POLL_S = 1.0  # ... doubled after each such read, up to this
CLAIM_EVERY_S = 1.0  # a GroupedConsumer's least wait between two claims that found nothing
#: While some of a GroupedConsumer's streams fail pass after pass, a warning this often.
FAILURES_LOG_EVERY_S = 30.0

T = TypeVar("T")
#: ``command(target, consumer)``: one command on ``consumer``'s stream, queued on
#: ``target`` (a pipeline), or sent (``target`` a client: it returns the coroutine).
PassCommand: TypeAlias = Callable[[Any, "StreamConsumer"], Any]


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
    #: The stream it was read from (its acknowledgement goes there).
    stream: str = ""


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


def claimed_entries(reply: Any, stream: str = "") -> tuple[str, list[Entry], bool]:
    """An ``XAUTOCLAIM`` reply (of ``stream``): the next cursor, the live entries, and
    whether entries deleted meanwhile were claimed too (Redis 6.2 names them by nothing:
    they stay pending on this consumer until :meth:`_vanished` finds them; Redis 7 drops
    them from the pending list itself)."""
    entries: list[Entry] = []
    deleted = False
    for entry_id, fields in reply[1]:
        if entry_id is None or _is_deleted(fields):
            deleted = True
        else:
            entries.append(Entry(entry_id, fields, claimed=True, stream=stream))
    return str(reply[0]), entries, deleted


def pending_ids(info: Any) -> list[str]:
    """The ids of an ``XPENDING`` range reply."""
    return [str(item["message_id"]) for item in info or []]


def read_entries(batches: Any) -> list[Entry]:
    """The entries of an ``XREADGROUP`` reply: RESP2's ``[[stream, entries], ...]`` (a
    single Redis's pooled connections) or RESP3's ``{stream: [entries]}`` as redis-py
    gives it (the cluster client's)."""
    if isinstance(batches, dict):
        return [
            Entry(entry_id, fields, stream=str(stream))
            for stream, lists in batches.items()
            for items in lists
            for entry_id, fields in items
            if not _is_deleted(fields)
        ]
    return [
        Entry(entry_id, fields, stream=str(stream))
        for stream, items in batches or []
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
        return await self._claimed(reply)

    async def _claimed(self, reply: Any) -> list[Entry]:
        """The entries of this stream's ``XAUTOCLAIM`` reply; those deleted meanwhile are
        acknowledged."""
        self._cursor, entries, deleted = claimed_entries(reply, self.policy.stream)
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

    async def ack_entries(self, *entries: Entry) -> None:
        """Done with these entries (of this consumer's stream): :meth:`ack`."""
        await self.ack(*(entry.id for entry in entries))

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
        self._cursor, entries, deleted = claimed_entries(reply, p.stream)
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


class GroupedConsumer:
    """One consumer group read on many streams (a Redis Cluster's per-group streams, see
    the module doc), on an asyncio client. It offers what :class:`StreamConsumer` offers
    its callers (:meth:`ensure_group`, :meth:`claim`, :meth:`read`, :meth:`ack_entries`,
    :meth:`handle_each`, :meth:`round`), each entry going back to its own stream."""

    def __init__(
        self,
        client: AsyncClient,
        policy: ConsumerPolicy,
        consumer: str,
        streams: Iterable[str],
        poll_s: float = POLL_S,
        claim_every_s: float | None = None,
        idle_poll_s: float = IDLE_POLL_S,
    ) -> None:
        """``policy``: every stream's (its ``stream`` is not read; its ``count`` is the
        bound of one pass over all the streams); ``block_ms`` is how long :meth:`read`
        goes on polling while it finds nothing: ``poll_s`` after the first empty pass, the
        wait doubling after each (up to ``idle_poll_s``) until a pass finds entries. A
        claim pass that found nothing is not made again for ``claim_every_s`` (None: half
        of ``claim_idle_ms``, at least CLAIM_EVERY_S)."""
        if claim_every_s is None:
            claim_every_s = max(CLAIM_EVERY_S, policy.claim_idle_ms / 2000)
        names = list(dict.fromkeys(streams))
        if not names:
            raise ValueError("a grouped consumer needs at least one stream")
        if not 0 < poll_s <= idle_poll_s or claim_every_s < 0:
            raise ValueError("need 0 < poll_s <= idle_poll_s and claim_every_s >= 0")
        if not consumer:
            raise ValueError("a consumer needs a name")
        self.client = client
        self.policy = policy
        self.consumer = consumer
        self.poll_s = poll_s
        self.idle_poll_s = idle_poll_s
        self.claim_every_s = claim_every_s
        self._wait = poll_s  # the wait after the next empty pass
        #: the most entries one stream hands out per pass
        self.per_stream = max(1, -(-policy.count // len(names)))
        self.consumers = {
            name: StreamConsumer(
                client, replace(policy, stream=name, count=self.per_stream), consumer
            )
            for name in names
        }
        self._next_claim = 0.0
        #: since when some streams fail each pass (meanwhile no pipelined reads)
        self._failing_since: float | None = None
        self._warned_at = 0.0  # when that was last logged

    @property
    def streams(self) -> list[str]:
        """The streams read, in order."""
        return list(self.consumers)

    def of(self, entry: Entry) -> StreamConsumer:
        """The consumer of ``entry``'s stream."""
        try:
            return self.consumers[entry.stream]
        except KeyError:
            raise ValueError(
                f"entry {entry.id} of {entry.stream!r}: not a stream read here"
            ) from None

    async def ensure_group(self) -> None:
        """Make the group on every stream (and the streams) unless it exists, in one pass
        (:meth:`_replies`). A stream that failed (its primary down) gets its group at a
        later pass, which finds it missing; if every stream failed, that raises."""
        p = self.policy

        def command(target: Any, consumer: StreamConsumer) -> Any:
            return target.xgroup_create(consumer.policy.stream, p.group, id="0", mkstream=True)

        replies = await self._replies(command)
        failures = [
            (consumer.policy.stream, reply)
            for consumer, reply in replies
            if isinstance(reply, BaseException) and not group_exists(reply)
        ]
        self._tolerate(failures, len(replies))

    async def _each(
        self, command: PassCommand, pipelined: bool = False
    ) -> list[tuple[StreamConsumer, Any]]:
        """``command(target, consumer)`` for every stream's consumer (:meth:`_replies`);
        each consumer with its reply, in the streams' order. A stream whose group is gone
        has it made again and replies None. A stream Redis refused otherwise, or whose
        primary is down (killed, frozen, failing over), replies None too, so that the
        others' entries are still handed out (the failed ones stay where they are, to be
        read or claimed later); if every stream failed, that raises."""
        replies: list[tuple[StreamConsumer, Any]] = []
        failures: list[tuple[str, BaseException]] = []
        for consumer, reply in await self._replies(command, pipelined):
            if isinstance(reply, BaseException):
                if missing_group(reply):
                    await consumer.ensure_group()
                else:
                    failures.append((consumer.policy.stream, reply))
                reply = None
            replies.append((consumer, reply))
        self._tolerate(failures, len(replies))
        return replies

    async def _replies(
        self, command: PassCommand, pipelined: bool = False
    ) -> list[tuple[StreamConsumer, Any]]:
        """``command(target, consumer)`` for every stream's consumer; each consumer with
        its reply, in the streams' order, an error reply as its exception.

        On a single Redis, in one pipeline, as it fails. On a Redis Cluster, each command
        on its own, all at once (:func:`_at_once`; ClusterRedis sends a primary's together
        down its one pipelined link), a stream whose primary is down replying the bus's
        error. But ``pipelined`` ones (the reads, which redis-py sends through its pool,
        each on a connection of its own) go in one cluster pipeline while every stream
        answers: a pipeline that fails (it raises as a whole) is done again command by
        command, and so are the passes after it until every stream answers again. (What
        the failed pipeline read on the other primaries is lost on the way back: it is
        claimed later.)"""
        consumers = list(self.consumers.values())
        client = self.client
        if not isinstance(client, ClusterRedis):
            return list(zip(consumers, await self._pipeline(command), strict=True))
        if pipelined and self._failing_since is None:
            try:
                replies = await asyncio.wait_for(self._pipeline(command), client.timeout_s)
                return list(zip(consumers, replies, strict=True))
            except (BusError, TimeoutError) as exc:
                log.info("a pipelined pass over %s failed (%s: %s); again command by command",
                         self.policy.group, type(exc).__name__, exc)  # fmt: skip
        calls = [command(client, consumer) for consumer in consumers]
        return list(zip(consumers, await _at_once(calls, client.timeout_s), strict=True))

    async def _pipeline(self, command: PassCommand) -> list[Any]:
        async with self.client.pipeline(transaction=False) as pipe:
            for consumer in self.consumers.values():
                command(pipe, consumer)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

    def _tolerate(self, failures: list[tuple[str, BaseException]], streams: int) -> None:
        """A pass's failed streams (name, error), of ``streams``: if every one failed, the
        first error raises; else the pass goes on without them, which is logged as a
        WARNING when failures begin and then at most every ``FAILURES_LOG_EVERY_S`` while
        they last (4 passes a second must not log 4 lines), and at INFO when they end."""
        if failures and len(failures) == streams:
            raise failures[0][1]
        now = time.monotonic()
        if not failures:
            if self._failing_since is not None:
                log.info("every stream of %s answers again (after %.0f s)",
                         self.policy.group, now - self._failing_since)  # fmt: skip
                self._failing_since = None
            return
        if self._failing_since is None:
            self._failing_since = now
        elif now - self._warned_at < FAILURES_LOG_EVERY_S:
            return
        self._warned_at = now
        stream, error = failures[0]
        log.warning(
            "%d of %d streams of %s failed (%s: %s); the others are read, the failed ones "
            "again at each pass (said again every %.0f s while it lasts)",
            len(failures), streams, self.policy.group, stream, error, FAILURES_LOG_EVERY_S,
        )  # fmt: skip

    async def claim(self) -> list[Entry]:
        """Entries other consumers left idle past ``claim_idle_ms`` on any stream, now
        this one's. After a pass that found none, the next is made ``claim_every_s`` on."""
        if time.monotonic() < self._next_claim:
            return []
        p = self.policy

        def command(target: Any, consumer: StreamConsumer) -> Any:
            return target.xautoclaim(
                consumer.policy.stream, p.group, self.consumer, p.claim_idle_ms,
                consumer._cursor, count=self.per_stream,
            )  # fmt: skip

        entries: list[Entry] = []
        for consumer, reply in await self._each(command):
            if reply is not None:
                entries += await consumer._claimed(reply)
        self._next_claim = time.monotonic() + (0.0 if entries else self.claim_every_s)
        return entries

    async def read_once(self) -> list[Entry]:
        """New entries of every stream, not waiting: one pass (:meth:`_replies`)."""
        p = self.policy

        def command(target: Any, consumer: StreamConsumer) -> Any:
            streams = {consumer.policy.stream: ">"}
            return target.xreadgroup(p.group, self.consumer, streams, count=self.per_stream)

        replies = await self._each(command, pipelined=True)
        return [entry for _, reply in replies for entry in read_entries(reply)]

    async def read(self) -> list[Entry]:
        """New entries of every stream; while there are none, passes as the waits between
        them allow (see ``__init__``) for up to ``block_ms``, then none (one pass with
        ``block_ms`` None). A call begins with a pass, so a caller that calls again at once
        after an empty read does not poll more often."""
        until = time.monotonic() + (self.policy.block_ms or 0) / 1000
        while True:
            entries = await self.read_once()
            if entries:
                self._wait = self.poll_s
                return entries
            left = until - time.monotonic()
            if left <= 0:
                return []
            wait, self._wait = self._wait, min(self.idle_poll_s, self._wait * 2)
            await asyncio.sleep(min(wait, left))
            if time.monotonic() >= until:
                return []

    async def ack_entries(self, *entries: Entry) -> None:
        """Done with these entries: each acknowledged on its stream (and deleted, with
        ``delete_acked``): on a single Redis every stream's in one pipeline, on a Redis
        Cluster each stream's on its own, all at once (:func:`_at_once`). If a stream's
        failed (its primary down, or an error reply), its error raises once the others
        are done: its entries stay pending, to be claimed again."""
        ids: dict[str, list[str]] = {}
        for entry in entries:
            ids.setdefault(self.of(entry).policy.stream, []).append(entry.id)
        if not ids:
            return
        client = self.client
        if isinstance(client, ClusterRedis):
            acks = [self.consumers[stream].ack(*entry_ids) for stream, entry_ids in ids.items()]
            for result in await _at_once(acks, client.timeout_s):
                if isinstance(result, BaseException):
                    raise result
            return
        async with client.pipeline(transaction=False) as pipe:
            for stream, entry_ids in ids.items():
                pipe.xack(stream, self.policy.group, *entry_ids)
                if self.policy.delete_acked:
                    pipe.xdel(stream, *entry_ids)
            await pipe.execute()

    async def bury(
        self, entry: Entry, reason: str, exc: BaseException | None = None, **extra: str
    ) -> None:
        """Give ``entry`` up as poison (see :meth:`StreamConsumer.bury`), on its stream."""
        await self.of(entry).bury(entry, reason, exc, **extra)

    async def handle_each(self, entries: Sequence[Entry], handler: Handler) -> None:
        """:meth:`StreamConsumer.handle_each`, each stream's entries by its consumer (in
        the order of the streams; a stream's own entries in their order)."""
        by_stream: dict[str, list[Entry]] = {}
        for entry in entries:
            by_stream.setdefault(self.of(entry).policy.stream, []).append(entry)
        for stream, batch in by_stream.items():
            await self.consumers[stream].handle_each(batch, handler)

    async def round(self, handler: Handler) -> int:
        """One round: claimed entries, then new ones (polled for up to ``block_ms``), each
        through :meth:`handle_each`; the number of new entries read."""
        await self.handle_each(await self.claim(), handler)
        fresh = await self.read()
        await self.handle_each(fresh, handler)
        return len(fresh)


#: Either consumer of a node's loops: one stream, or one per slot group.
AsyncConsumer: TypeAlias = StreamConsumer | GroupedConsumer


def consumer_of(
    client: AsyncClient, policy: ConsumerPolicy, consumer: str, streams: Sequence[str]
) -> AsyncConsumer:
    """The consumer of ``streams`` under ``policy``: a :class:`StreamConsumer` (blocking
    reads, exactly as on a single Redis) for one stream, else a :class:`GroupedConsumer`.
    ``policy.stream`` is not read when there are several."""
    if len(streams) == 1:
        return StreamConsumer(client, replace(policy, stream=streams[0]), consumer)
    return GroupedConsumer(client, policy, consumer, streams)


async def _at_once(calls: Sequence[Awaitable[T]], within_s: float) -> list[T | BusError]:
    """The calls (of a Redis Cluster's client) at once; each one's result, or the bus's
    error that failed it, or a timeout error if it had not answered within ``within_s``
    (the client's command timeout: it is cancelled then, so a frozen primary holds a pass
    up no longer). Any other exception raises.

    How :class:`GroupedConsumer` reaches many streams of a Redis Cluster when one of their
    primaries may be down, rather than redis-py's cluster pipeline: one of those that
    cannot reach a node raises as a whole (``raise_on_error`` notwithstanding), and
    before each of its tries again it closes the client's connections to every node,
    failing what the process has under way on them (a move's commit among them)."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        await asyncio.wait(tasks, timeout=within_s)
    finally:
        for task in tasks:
            task.cancel()  # (a no-op for those done)
    results: list[T | BusError] = []
    for task in tasks:
        if not task.done() or task.cancelled():
            results.append(BusTimeoutError(f"no answer within {within_s} s"))
        elif (error := task.exception()) is None:
            results.append(task.result())
        elif isinstance(error, BusError):
            results.append(error)
        else:
            raise error
    return results


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
