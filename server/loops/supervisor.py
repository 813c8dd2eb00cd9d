"""The node's one supervisor: every long-running loop of a node runs under it.

It decides four things for every loop (results, archiver, deadlines, heartbeat, the
analysis collector, the lobby push, the fan-out listener, its probe and pings, the local
workers' keeper):

- **Restarts.** A loop body does its work and lets a failure raise; the supervisor starts
  it again after a backoff: exponential from ``Backoff.first_s``, at most
  ``Backoff.cap_s``, with jitter (a factor from 0.5 to 1.5, then capped), and reset once
  the body has run ``Backoff.healthy_s`` without failing. One policy for every loop; a
  loop whose timing matters is started with its own parameters (server/node.py's
  ``RESTARTS``). A body that returns has finished and is not started again.
- **Logging.** A loop's first failure is logged as a warning with its traceback; further
  failures of the same type are counted and summarised at most once per ``log_every_s``
  (30 s), so an outage of Redis costs each loop a line every 30 s, not one per retry. A
  failure of another type, or the first after a healthy run, gets its traceback again.
- **Reports.** Each loop's state (``running``, ``backing_off``, ``done``, ``stopped``),
  its restarts and the type of its last error, for ``/healthz`` (``loops``) and
  ``/metrics`` (``kibitz_loop_restarts_total``, ``kibitz_loops_up``). The error is
  reported by type only: ``/healthz`` is often public, and messages may name addresses.
- **Stopping.** :meth:`Supervisor.stop` cancels the loops in the reverse of the order they
  were started, one at a time, waiting for each at most ``stop_timeout_s``.

A loop body keeps an inner ``try``/``except`` only where a failure is not a retry of the
loop (one bad entry or client among many, a step that may fail without harm); its comment
says why. Such a handler must not swallow its own cancellation (redis-py may turn one that
lands mid-command into a ``ConnectionError``): it calls
:func:`kibitz.shared.bus.stopping.raise_if_stopping`, as the supervisor does.
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
#: Repeated failures of one type are summarised in the log at most this often.
LOG_EVERY_S = 30.0

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
class FailureLog:
    """How one loop's failures reach the log: the first of a type with its traceback, then
    one summary with a count at most every ``every_s`` (see the module doc)."""

    every_s: float
    kind: str | None = None  #: the type of the failures being counted
    logged_at: float = float("-inf")  #: when a line about them was last written
    unlogged: int = 0  #: failures of ``kind`` since that line

    def failed(self, name: str, exc: Exception, now: float) -> None:
        kind = type(exc).__name__
        if kind != self.kind:
            self.flush(name, now)
            self.kind, self.logged_at = kind, now
            log.warning("loop %s failed (%s); restarting with backoff", name, kind, exc_info=exc)
            return
        self.unlogged += 1
        if now - self.logged_at >= self.every_s:
            self.flush(name, now, f"; the last: {str(exc)[:200]}")

    def flush(self, name: str, now: float, last: str = "") -> None:
        """Log the failures counted and not yet logged, if any."""
        if self.unlogged:
            log.warning("loop %s failed %d more times (%s) in %.0f s%s; still restarting",
                        name, self.unlogged, self.kind, now - self.logged_at, last)  # fmt: skip
        self.unlogged, self.logged_at = 0, now

    def reset(self, name: str, now: float) -> None:
        """The loop ran healthy: its next failure is a new story, told with its traceback."""
        self.flush(name, now)
        self.kind = None


@dataclass
class LoopState:
    """What ``/healthz`` shows of one loop."""

    name: str
    state: str = "running"  #: running, backing_off, done or stopped
    restarts: int = 0  #: times the body was started again after it raised
    last_error: str | None = None  #: the type of the last exception, if any
    failures: int = 0  #: failures since the last healthy run (sets the backoff)
    backoff: Backoff = field(default_factory=Backoff)  #: how it is restarted
    log: FailureLog = field(default_factory=lambda: FailureLog(LOG_EVERY_S), repr=False)
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
        log_every_s: float = LOG_EVERY_S,
    ) -> None:
        self.backoff = backoff or Backoff()  # for loops started without their own
        self.stop_timeout_s = stop_timeout_s
        self.log_every_s = log_every_s
        self.on_restart = on_restart  # told each loop's name as it is restarted (metrics)
        self._loops: dict[str, LoopState] = {}  # in the order they were started

    def start(self, name: str, body: LoopBody, backoff: Backoff | None = None) -> None:
        """Run ``body()`` as the loop ``name`` until :meth:`stop`, restarted after a
        failure with ``backoff`` (default: the supervisor's)."""
        if not name or len(name) > MAX_NAME:
            raise ValueError(f"a loop's name has 1 to {MAX_NAME} characters: {name!r}")
        if name in self._loops and self._loops[name].state != "stopped":
            raise ValueError(f"a loop named {name!r} is already running")
        if len(self._loops) >= MAX_LOOPS and name not in self._loops:
            raise ValueError(f"at most {MAX_LOOPS} loops")
        state = LoopState(name, backoff=backoff or self.backoff, log=FailureLog(self.log_every_s))
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
            await asyncio.sleep(state.backoff.delay(state.failures, random.random()))
            state.restarts += 1
            if self.on_restart is not None:
                self.on_restart(state.name)

    def _failed(self, state: LoopState, exc: Exception, ran_s: float) -> None:
        if ran_s >= state.backoff.healthy_s:
            state.failures = 0
            state.log.reset(state.name, time.monotonic())
        state.failures += 1
        state.last_error = type(exc).__name__
        state.log.failed(state.name, exc, time.monotonic())

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
        state.log.flush(name, time.monotonic())
        state.state = "stopped"

    async def stop(self) -> None:
        """Stop every loop, the last started first, each within ``stop_timeout_s``."""
        for name in reversed(list(self._loops)):
            await self.stop_loop(name)
