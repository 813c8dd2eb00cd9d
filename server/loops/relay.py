"""The outbox sweep (a Redis Cluster only): every AI job a commit puts in its group's
outbox reaches the fair queue, and the outboxes empty.

On a Redis Cluster a commit cannot reach the fair queue (it lives on the control slot,
the room in its slot group's): the commit adds the AI job to its group's outbox stream
(``keys.ai_outbox(g)``) in the same atomic step as the move, and the committing node
relays it to the fair queue at once (``RoomStore.relay``: one control-slot script that
queues each entry once). Every node runs this sweep: every ``SWEEP_INTERVAL_S`` it reads
every group's outbox (one pipeline, grouped by cluster node) for entries older than
``RELAY_AFTER_MS``, at most ``RELAY_BATCH`` a batch, relays them and deletes them. For an
entry its node relayed this is a no-op (the relay script remembers the entries it
queued); it queues the job of a node that died between its commit and its relay, and the
job a failover of the control slot's primary lost (its replica had not received the
relay's write: Redis replicates asynchronously, well within ``RELAY_AFTER_MS``). Two
nodes sweeping at once queue a job once.

On a single Redis there is no outbox (the commit queues the job itself) and the loop is
not started (server/node.py starts it only when ``keys.grouped()``).
"""

from __future__ import annotations

import asyncio
import logging

from kibitz.shared.bus.store import RELAY_AFTER_MS, RELAY_BATCH, RoomStore

log = logging.getLogger(__name__)

SWEEP_INTERVAL_S = 1.0
PASS_BATCHES = 10  # batches one pass relays at most, back to back (then it sleeps)


class OutboxSweeper:
    """Relays what the groups' outboxes hold past ``older_than_ms``."""

    def __init__(
        self,
        store: RoomStore,
        interval_s: float = SWEEP_INTERVAL_S,
        older_than_ms: int = RELAY_AFTER_MS,
        batch: int = RELAY_BATCH,
    ) -> None:
        self.store = store
        self.interval_s = interval_s
        self.older_than_ms = older_than_ms
        self.batch = batch
        self.relayed = 0  # jobs this node's sweeps queued

    async def run(self) -> None:
        """Sweep until cancelled. A storage error raises to the supervisor, which starts
        this again with backoff (nothing is lost: the entries stay in their outboxes)."""
        while True:
            await self.sweep()
            await asyncio.sleep(self.interval_s)

    async def sweep(self) -> int:
        """One pass: the jobs queued (not counting ones queued before). A full batch is
        followed by the next at once, up to ``PASS_BATCHES``."""
        total = 0
        for _ in range(PASS_BATCHES):
            queued = await self.store.relay_stale(self.older_than_ms, self.batch)
            total += queued
            if queued < self.batch:
                break
        if total:
            log.info("relayed %d AI jobs left in the outboxes", total)
            self.relayed += total
        return total
