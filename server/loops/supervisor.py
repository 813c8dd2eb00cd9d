"""The node's one supervisor: every long-running loop of a node runs under it.

It decides three things for every loop (results, archiver, deadlines, heartbeat, the
analysis collector, the lobby push, the fan-out listener, its probe and pings, the local
workers' keeper):

- **Restarts.** A loop body that raises is started again after a backoff: exponential
  from ``Backoff.first_s``, at most ``Backoff.cap_s``, with jitter (a factor from 0.5 to
  1.5, then capped), and reset once the body has run ``Backoff.healthy_s`` without
  failing. A body that returns has finished and is not started again.
- **Reports.** Each loop's state (``running``, ``backing_off``, ``done``, ``stopped``),
  its restarts and the type of its last error, for ``/healthz`` (``loops``) and
  ``/metrics`` (``kibitz_loop_restarts_total``, ``kibitz_loops_up``). The error is
  reported by type only: ``/healthz`` is often public, and messages may name addresses.
- **Stopping.** :meth:`Supervisor.stop` cancels the loops in the reverse of the order they
  were started, one at a time, waiting for each at most ``stop_timeout_s``.

A loop that retries on connection errors itself must not swallow its own cancellation
(redis-py may turn one that lands mid-command into a ``ConnectionError``): its error paths
call :func:`kibitz.shared.bus.stopping.raise_if_stopping`, as the supervisor's do.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kibitz.shared.bus.stopping import raise_if_stopping

log = logging.getLogger(__name__)

#: Loops one supervisor runs, at most (a node has about a dozen).
MAX_LOOPS = 64
#: What a loop may be called: short, for /healthz and metric labels.
MAX_NAME = 40

LoopBody = Callable[[], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Backoff:
    """The one retry policy of a node's loops."""

    first_s: float = 0.5  #: the wait before the first restart
    cap_s: float = 30.0  #: the longest wait between restarts
    healthy_s: float = 60.0  #: a run this long without failing resets the wait

    def delay(self, failures: int, jitter: float) -> float:
        """The wait before restart number ``failures`` (1, 2, ...) of a loop that keeps
        failing; ``jitter`` in [0, 1) spreads the restarts of many nodes."""
        base = self.first_s * 2.0 ** min(max(failures - 1, 0), 32)
        return min(self.cap_s, min(self.cap_s, base) * (0.5 + jitter))


@dataclass
class LoopState:
    """What ``/healthz`` shows of one loop."""

    name: str
    state: str = "running"  #: running, backing_off, done or stopped
    restarts: int = 0  #: times the body was started again after it raised
    last_error: str | None = None  #: the type of the last exception, if any
    failures: int = 0  #: failures since the last healthy run (sets the backoff)
    task: asyncio.Task[None] | None = field(default=None, repr=False)

    def report(self) -> dict[str, Any]:
        return {"state": self.state, "restarts": self.restarts, "last_error": self.last_error}


class Supervisor:
    """Runs a node's loops: restarts them with one backoff, reports them, stops them."""

    def __init__(
        self,
        backoff: Backoff | None = None,
        stop_timeout_s: float = 5.0,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.backoff = backoff or Backoff()
        self.stop_timeout_s = stop_timeout_s
        self.on_restart = on_restart  # told each loop's name as it is restarted (metrics)
        self._loops: dict[str, LoopState] = {}  # in the order they were started

    def start(self, name: str, body: LoopBody) -> None:
        """Run ``body()`` as the loop ``name`` until :meth:`stop`."""
        if not name or len(name) > MAX_NAME:
            raise ValueError(f"a loop's name has 1 to {MAX_NAME} characters: {name!r}")
        if name in self._loops and self._loops[name].state != "stopped":
            raise ValueError(f"a loop named {name!r} is already running")
        if len(self._loops) >= MAX_LOOPS and name not in self._loops:
            raise ValueError(f"at most {MAX_LOOPS} loops")
        state = LoopState(name)
        self._loops.pop(name, None)
        self._loops[name] = state
        state.task = asyncio.create_task(self._run(state, body), name=f"loop:{name}")

    async def _run(self, state: LoopState, body: LoopBody) -> None:
        while True:
            state.state = "running"
            began = time.monotonic()
            try:
                await body()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise_if_stopping()
                self._failed(state, exc, time.monotonic() - began)
            else:
                state.state = "done"
                return
            state.state = "backing_off"
            await asyncio.sleep(self.backoff.delay(state.failures, random.random()))
            state.restarts += 1
            if self.on_restart is not None:
                self.on_restart(state.name)

    def _failed(self, state: LoopState, exc: Exception, ran_s: float) -> None:
        if ran_s >= self.backoff.healthy_s:
            state.failures = 0
        state.failures += 1
        state.last_error = type(exc).__name__
        log.warning("loop %s failed (%s); restarting", state.name, state.last_error, exc_info=exc)

    def status(self) -> dict[str, dict[str, Any]]:
        """Each loop's report, in the order they were started."""
        return {name: state.report() for name, state in self._loops.items()}

    @property
    def up(self) -> int:
        """Loops running now (not backing off, finished or stopped)."""
        return sum(1 for state in self._loops.values() if state.state == "running")

    async def stop_loop(self, name: str) -> None:
        """Stop one loop (if it runs), waiting for it at most ``stop_timeout_s``."""
        state = self._loops.get(name)
        if state is None or state.task is None:
            return
        task = state.task
        if not task.done():
            task.cancel()
            _done, stuck = await asyncio.wait([task], timeout=self.stop_timeout_s)
            if stuck:
                log.warning("loop %s did not stop in %.1f s", name, self.stop_timeout_s)
        state.state = "stopped"

    async def stop(self) -> None:
        """Stop every loop, the last started first, each within ``stop_timeout_s``."""
        for name in reversed(list(self._loops)):
            await self.stop_loop(name)
