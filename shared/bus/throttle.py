"""Throttles counted in Redis, the same for every node: failed log-ins per username and
per address, password checks per address, sign-ups per address (the limits are the
server's: NodeConfig, and server/http/auth.py decides what is counted when).

An attempt is counted BEFORE the work it pays for (``reserve``), atomically per counter,
so attempts made at the same moment cannot all slip under the limit; an attempt that
turns out not to count (a log-in that succeeded) is given back (``give_back``).

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

    async def take(self, counter: Counter) -> int:
        """Count one unless at the limit: 0 if counted, else the ms to wait."""
        return await self._run(counter, "take")

    async def reserve(self, counters: Sequence[Counter]) -> int:
        """Count one on every counter, or on none: 0 if counted, else the ms until the
        fullest has room (the ones counted meanwhile are given back)."""
        waits = await asyncio.gather(*(self._run(c, "take") for c in counters))
        if not any(waits):
            return 0
        await self.give_back([c for c, wait in zip(counters, waits, strict=True) if not wait])
        return max(waits)

    async def give_back(self, counters: Sequence[Counter]) -> None:
        """Uncount one reserved on each counter (an attempt that does not count)."""
        await asyncio.gather(*(self._run(c, "give") for c in counters))
