"""A worker's lifeline to the process that started it: it stops when that process dies.

``kibitz serve`` starts its local workers with two environment variables: the node's pid
(``KIBITZ_NODE_PID``) and the number of a file descriptor (``KIBITZ_LIFELINE_FD``): the
read end of a pipe whose write end the node alone holds (server/loops/local_workers.py). A
``kibitz worker --concurrency N`` child has the same kind of link to its parent through
multiprocessing (its parent sentinel). A worker with either stops as soon as any of these
says its parent is gone:

- on Linux, the kernel's parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``), set
  at start and followed by a check that the parent is still the expected pid: a parent
  that died before the ``prctl`` is seen there;
- end of file on the pipe (or on the multiprocessing sentinel): when the parent dies,
  however it dies, the kernel closes its write end; any POSIX system;
- a parent pid that is no longer the expected one, checked every ``POLL_S``.

Stopping is SIGTERM to itself: the worker finishes the job in hand and signs off. If it
has not exited ``GRACE_S`` later, it exits anyway (its job is then reclaimed by another
worker when the lease runs out). A worker started by hand has no lifeline: it runs until
stopped, and rides out a Redis restart (workers/worker.py backs off).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import select
import signal
import sys
import threading
import time

log = logging.getLogger(__name__)

NODE_PID_ENV = "KIBITZ_NODE_PID"
LIFELINE_FD_ENV = "KIBITZ_LIFELINE_FD"
POLL_S = 1.0  # how often the parent pid is looked at besides the pipe
GRACE_S = 15.0  # after the parent's death, the longest a worker takes to leave
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def hold() -> None:
    """Tie this process's life to its parent's, if it was started with a lifeline; exit
    at once if the parent is gone already. Call once, at start, from the main thread."""
    parent, fds = _lifeline()
    if parent is None and not fds:
        return
    if parent is not None:
        set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != parent:  # it died before the prctl: no signal will come
            log.warning("the process that started this worker (pid %d) is gone", parent)
            raise SystemExit(0)
    threading.Thread(target=_watch, args=(parent, fds), name="lifeline", daemon=True).start()


def _lifeline() -> tuple[int | None, list[int]]:
    """The expected parent pid and the descriptors to watch; the environment variables
    are removed, so that this worker's own children (engines) do not take them."""
    parent = _pop_int(NODE_PID_ENV)
    fd = _pop_int(LIFELINE_FD_ENV)
    fds = [] if fd is None else [fd]
    mp_parent = multiprocessing.parent_process()
    if mp_parent is not None and mp_parent.pid is not None:
        parent = mp_parent.pid
        fds.append(mp_parent.sentinel)
    return parent, fds


def _pop_int(name: str) -> int | None:
    value = os.environ.pop(name, "")
    return int(value) if value.isascii() and value.isdigit() else None


def set_parent_death_signal(sig: signal.Signals) -> bool:
    """Linux: the kernel sends ``sig`` to this process when its parent dies. Whether it
    was set (False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch(parent: int | None, fds: list[int]) -> None:
    while not _parent_gone(parent, fds):
        pass
    log.warning("the process that started this worker (pid %s) is gone: stopping", parent)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE_S)
    log.error("still here %.0f s after the parent's death: exiting", GRACE_S)
    os._exit(1)


def _parent_gone(parent: int | None, fds: list[int]) -> bool:
    """Wait up to ``POLL_S``; whether the parent is gone by then."""
    if fds:
        ready, _, _ = select.select(fds, [], [], POLL_S)
        for fd in ready:
            try:
                if not os.read(fd, 4096):
                    return True  # end of file: every write end is closed
            except OSError:
                return True
    else:
        time.sleep(POLL_S)
    return parent is not None and os.getppid() != parent
