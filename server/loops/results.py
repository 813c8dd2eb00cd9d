"""Apply the moves workers post on the ``results`` stream.

All server nodes read the stream through one consumer group, so each result is handled
by one node. Applying is a versioned commit like any move: a late or duplicate result
finds the room at another version and changes nothing. A node that dies with results
pending leaves them to the others, which claim them after ``CLAIM_IDLE_MS``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import Counter

from kibitz.server.loops.background import raise_if_stopping
from kibitz.server.services.rooms import RoomService
from kibitz.server.store import ensure_group
from kibitz.shared.bus.keys import RESULTS, SERVERS_GROUP
from kibitz.shared.protocol import JobResult, ProtocolError

log = logging.getLogger(__name__)

BLOCK_MS = 1000
CLAIM_IDLE_MS = 10_000


class ResultsConsumer:
    def __init__(
        self,
        redis: aioredis.Redis,
        service: RoomService,
        node: str,
        applied: Counter,
        fallbacks: Counter,
    ) -> None:
        self.redis = redis
        self.service = service
        self.node = node
        self.applied = applied
        self.fallbacks = fallbacks

    async def run(self) -> None:
        await ensure_group(self.redis, RESULTS, SERVERS_GROUP)
        claim_cursor = "0-0"
        while True:
            try:
                # Results a dead node took but never acknowledged.
                reply: Any = await self.redis.xautoclaim(
                    RESULTS, SERVERS_GROUP, self.node, CLAIM_IDLE_MS, claim_cursor, count=50
                )
                claim_cursor = reply[0]
                await self._handle(reply[1])
                batches: Any = await self.redis.xreadgroup(
                    SERVERS_GROUP, self.node, {RESULTS: ">"}, count=50, block=BLOCK_MS
                )
                for _stream, entries in batches or []:
                    await self._handle(entries)
            except asyncio.CancelledError:
                raise
            except (aioredis.ConnectionError, aioredis.TimeoutError, OSError) as exc:
                raise_if_stopping()
                log.warning("results stream unavailable (%s); retrying", exc)
                await asyncio.sleep(0.5)
            except aioredis.ResponseError as exc:
                if "NOGROUP" in str(exc):
                    await ensure_group(self.redis, RESULTS, SERVERS_GROUP)
                else:
                    log.exception("results stream error")
                    await asyncio.sleep(1.0)
            except Exception:
                raise_if_stopping()
                log.exception("results consumer error; going on")
                await asyncio.sleep(1.0)

    async def _handle(self, entries: list[tuple[str, dict[str, str] | None]]) -> None:
        for entry_id, fields in entries:
            try:
                if fields is not None:  # None: the entry was deleted meanwhile
                    await self._apply(entry_id, fields)
            except (aioredis.ConnectionError, aioredis.TimeoutError, OSError):
                raise  # not the entry's fault: leave it pending and retry
            except Exception:
                # A poison entry must not stop every AI game: log it and move on.
                log.exception("could not apply result entry %s", entry_id)
            await self.redis.xack(RESULTS, SERVERS_GROUP, entry_id)
            await self.redis.xdel(RESULTS, entry_id)

    async def _apply(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            result = JobResult.from_fields(fields)
        except ProtocolError as exc:
            log.warning("dropping a malformed result %s: %s", entry_id, exc)
            return
        if result.error:
            log.warning("job %s failed on %s: %s", result.job_id, result.worker, result.error)
        outcome = await self.service.apply_result(result)
        if outcome == "applied":
            self.applied.inc()
        elif outcome == "fallback":
            self.fallbacks.inc()
