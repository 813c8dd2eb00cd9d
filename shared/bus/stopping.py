"""How a loop that talks to Redis stops: :func:`raise_if_stopping` and :func:`stop_tasks`.

Stopping a loop means cancelling its task, but redis-py may turn a cancellation that lands
in the middle of a command into a ``ConnectionError``; a loop that retries on that would
swallow the cancellation and run on for ever, and the process would never exit. So every
retrying loop (the node's, under kibitz.server.loops.supervisor, and the workers') calls
:func:`raise_if_stopping` in its error paths, and its owner waits for it with a deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


def raise_if_stopping() -> None:
    """Re-raise the cancellation of the running task, if it has been asked to stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling() > 0:
        raise asyncio.CancelledError


async def stop_tasks(tasks: Iterable[asyncio.Task[None]], timeout: float = 5.0) -> None:
    """Cancel ``tasks`` and wait for them, at most ``timeout`` seconds."""
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return
    _done, stuck = await asyncio.wait(pending, timeout=timeout)
    for task in stuck:
        log.warning("background task %s did not stop in %.0f s", task.get_name(), timeout)
