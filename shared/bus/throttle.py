"""Throttles counted in Redis, the same for every node: failed log-ins per username and
per address, sign-ups per address (the limits are the server's: NodeConfig, and
server/http/auth.py decides what is counted when).

- ``throttle:{what}:{subject}``  string: the count in a fixed window that starts at its
  first count; it expires with the window (PEXPIRE set on the first count, and set again
  if ever missing), so every key is gone a window after its last use. One key per
  script call (a Redis Cluster may put two keys on two nodes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source

MAX_SUBJECT = 80  # characters of a subject kept in the key


@dataclass(frozen=True, slots=True)
class Counter:
    """One throttle: ``limit`` counts of ``what`` for ``subject`` per ``window_ms``."""

    what: str
    subject: str
    limit: int
    window_ms: int

    @property
    def key(self) -> str:
        return keys.throttle_key(self.what, self.subject[:MAX_SUBJECT])


class Throttle:
    """The throttles' counters on one Redis."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._script = redis.register_script(source("throttle"))

    async def _run(self, counter: Counter, mode: str) -> int:
        reply = await self._script(
            keys=[counter.key], args=[counter.window_ms, counter.limit, mode]
        )
        return int(str(reply))

    async def check(self, counters: Sequence[Counter]) -> int:
        """The ms until every counter at its limit has reset (0: none is)."""
        waits = await asyncio.gather(*(self._run(c, "check") for c in counters))
        return max(waits, default=0)

    async def take(self, counter: Counter) -> int:
        """Count one unless at the limit: 0 if counted, else the ms to wait."""
        return await self._run(counter, "take")

    async def add(self, counters: Sequence[Counter]) -> None:
        """Count one on each counter (a failure)."""
        await asyncio.gather(*(self._run(c, "add") for c in counters))
