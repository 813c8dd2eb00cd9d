"""Apply the moves workers post on the ``results`` stream.

All server nodes read the stream through one consumer group, so each result is handled
by one node (on a Redis Cluster too: the stream is on the control slot,
``kibitz:{c}:results``). Applying is a versioned commit like any move: a late or
duplicate result finds the room at another version and changes nothing. A node that
dies with results pending leaves them to the others, which claim them after
``CLAIM_IDLE_MS``.

The stream is read through the one stream consumer (``shared/bus/consumer.py``) with
:func:`policy`: a result that cannot be parsed, or whose commit fails for a reason that
is not Redis being away, is logged and dropped at once (a poison entry must not stop
every AI game); one that meets Redis away stays pending and is tried again once the
node's supervisor has started the loop again (server/loops/supervisor.py).
"""

from __future__ import annotations

import logging

from prometheus_client import Counter

from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import AsyncClient
from kibitz.shared.bus.consumer import ConsumerPolicy, Entry, StreamConsumer, Unparsable
from kibitz.shared.protocol.codec import ProtocolError
from kibitz.shared.protocol.jobs import JobResult

log = logging.getLogger(__name__)

BLOCK_MS = 1000  # the longest wait of a read for a new result
CLAIM_IDLE_MS = 10_000  # a result pending this long was left by a dead node
BATCH = 50  # results claimed, or read, at once


def policy() -> ConsumerPolicy:
    """How the results stream is read (its name as ``keys.configure`` left it)."""
    return ConsumerPolicy(
        keys.RESULTS, keys.SERVERS_GROUP, claim_idle_ms=CLAIM_IDLE_MS, count=BATCH,
        block_ms=BLOCK_MS,
        on_failure="give_up",  # no dead letters: a result nobody can apply is dropped
    )  # fmt: skip


class ResultsConsumer:
    def __init__(
        self,
        redis: AsyncClient,
        service: RoomService,
        node: str,
        applied: Counter,
        fallbacks: Counter,
    ) -> None:
        self.stream = StreamConsumer(redis, policy(), node)
        self.service = service
        self.node = node
        self.applied = applied
        self.fallbacks = fallbacks

    async def run(self) -> None:
        """Apply results until cancelled. A failure (Redis away, the group lost) raises to
        the supervisor, which starts this again with backoff (the group made again first);
        the entry stays pending and is claimed again."""
        await self.stream.ensure_group()
        while True:
            await self.stream.round(self._apply)

    async def _apply(self, entry: Entry) -> None:
        try:
            result = JobResult.from_fields(entry.fields)
        except ProtocolError as exc:
            raise Unparsable(f"malformed result: {exc}") from None
        if result.error:
            log.warning("job %s failed on %s: %s", result.job_id, result.worker, result.error)
        outcome = await self.service.apply_result(result)
        if outcome == "applied":
            self.applied.inc()
        elif outcome == "fallback":
            self.fallbacks.inc()
