"""The fan-out's background tasks: one set per hub, stopped together.

Decides how the hub's short-lived tasks (a resync, a delayed presence broadcast, the
presence update after a node died) are kept: each is held until it ends, so that
:meth:`TaskSet.stop` cancels and waits for every one still running, with the hub's
long-running loops, in one bounded step (shared/bus/stopping.py's ``stop_tasks``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from kibitz.shared.bus.stopping import stop_tasks


class TaskSet:
    """Tasks of one hub, each forgotten once it ends (the loops are kept for good)."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[None]] = []

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` once, in the background."""
        task = asyncio.create_task(coroutine)
        self.tasks.append(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        if task in self.tasks:
            self.tasks.remove(task)

    async def stop(self) -> None:
        await stop_tasks(self.tasks)


def why(exc: BaseException) -> str:
    """An error's kind, for a log line: its text may name addresses."""
    return type(exc).__name__
