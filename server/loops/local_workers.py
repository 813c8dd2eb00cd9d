"""A node's local AI workers: started with a lifeline, restarted when they die, recorded
in the data directory, and never left running after their node.

What it decides:

- Each local worker gets a lifeline (workers/lifeline.py): the node's pid and the read end
  of a pipe whose write end only the node holds. When the node dies, however it dies
  (``kill -9`` included), its workers see it within a second and stop; on Linux the
  kernel's parent-death signal tells them at once. Workers are started from the node's
  main thread: the parent-death signal follows the thread that started the process.
- Each local worker is recorded in ``DIR/workers/PID``: its start time (``/proc/PID/stat``,
  so that a pid used again by another program is told apart) and its node's pid. The
  record goes when the node reaps the worker.
- A node starting on a data directory stops the recorded workers a dead node left there:
  those that are still the recorded process (same start time), still ``kibitz worker``
  (``/proc/PID/cmdline``), and no longer children of their node (so the workers of a node
  still running on the same directory, as with ``--redis``, are left alone). They get
  SIGTERM, then SIGKILL after ``STALE_GRACE_S``. Without ``/proc`` (not Linux) nothing is
  stopped: the lifeline alone stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from kibitz.server.loops.supervisor import Backoff
from kibitz.workers.lifeline import LIFELINE_FD_ENV, NODE_PID_ENV

log = logging.getLogger("kibitz.serve")

STALE_GRACE_S = 5.0  # a stale worker's time to leave after SIGTERM, before SIGKILL
CHECK_S = 1.0  # how often the workers are looked at
#: How a worker that died is restarted: the node loops' one policy, with its own pace.
RESTARTS = Backoff(first_s=1.0, cap_s=60.0, healthy_s=60.0)


class Lifeline:
    """The pipe a node's local workers watch: they stop on its end of file."""

    def __init__(self) -> None:
        # Not inheritable (PEP 446): only the workers get the read end (pass_fds), and no
        # child at all gets the write end, which must close when the node dies.
        self.read_fd, self.write_fd = os.pipe()

    def env(self) -> dict[str, str]:
        """The environment variables that hand the lifeline to a worker."""
        return {NODE_PID_ENV: str(os.getpid()), LIFELINE_FD_ENV: str(self.read_fd)}

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


Starter = Callable[[Lifeline], "subprocess.Popen[bytes]"]


class LocalWorkers:
    """The node's worker processes. ``start`` makes one, given the lifeline to hand it
    (serve.py's ``start_worker``); ``records`` is the data directory's ``workers/``."""

    def __init__(self, start: Starter, records: Path | None) -> None:
        self._start = start
        self.records = records
        self.lifeline = Lifeline()
        self.procs: list[subprocess.Popen[bytes]] = []

    def spawn(self, count: int) -> None:
        self.procs = [self._spawn_one() for _ in range(count)]

    def _spawn_one(self) -> subprocess.Popen[bytes]:
        proc = self._start(self.lifeline)
        if self.records is not None:
            record_worker(self.records, proc.pid)
        return proc

    def _reaped(self, proc: subprocess.Popen[bytes]) -> None:
        if self.records is not None:
            (self.records / str(proc.pid)).unlink(missing_ok=True)

    async def supervise(self) -> None:
        """Restart a local worker that died (its pending job is reclaimed by another). It
        runs as the node's loop ``local-workers`` (server/cli/serve.py), under its
        supervisor (server/loops/supervisor.py).

        A worker that keeps dying is restarted after the loops' one backoff policy
        (``RESTARTS``: 1 s doubling up to a minute, afresh once it has run a minute).
        """
        deaths = [0] * len(self.procs)  # deaths of each worker since it last ran healthy
        started = [time.monotonic()] * len(self.procs)
        due: list[float | None] = [None] * len(self.procs)  # when a dead one is restarted
        while True:
            await asyncio.sleep(CHECK_S)
            now = time.monotonic()
            for i, proc in enumerate(self.procs):
                if proc.poll() is None:
                    continue
                when = due[i]
                if when is None:  # just found dead
                    log.warning("worker %d exited with %s", proc.pid, proc.returncode)
                    self._reaped(proc)
                    deaths[i] = 1 if now - started[i] >= RESTARTS.healthy_s else deaths[i] + 1
                    due[i] = now + RESTARTS.delay(deaths[i], random.random())
                elif now >= when:
                    self.procs[i] = self._spawn_one()
                    started[i], due[i] = time.monotonic(), None

    def terminate(self) -> None:
        """Ask each to stop: it finishes its search and leaves."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()

    def wait(self, timeout: float) -> None:
        """Wait for each to exit (killed past ``timeout``), then cut the lifeline."""
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self._reaped(proc)
        self.lifeline.close()


# -- the records in the data directory ---------------------------------------------------


def record_worker(records: Path, pid: int) -> None:
    """Write ``records/PID``: the worker's start time and this node's pid."""
    try:
        records.mkdir(mode=0o700, parents=True, exist_ok=True)
        (records / str(pid)).write_text(f"{start_time(pid) or '-'} {os.getpid()}\n")
    except OSError as exc:  # the lifeline still holds; only the cleanup after a crash is lost
        log.warning("cannot record worker %d in %s: %s", pid, records, exc)


def stop_stale_workers(records: Path) -> list[int]:
    """Stop the workers recorded in ``records`` whose node is gone (see the module's
    docstring); the pids stopped. Records of processes gone are removed."""
    try:
        entries = [path for path in records.iterdir() if path.name.isdigit()]
    except OSError:
        return []
    stale = []
    for path in entries:
        verdict = _judge(int(path.name), path)
        if verdict == "stale":
            stale.append(int(path.name))
        elif verdict == "gone":
            path.unlink(missing_ok=True)
    for pid in stale:
        log.warning("stopping worker %d, left running by a node that is gone", pid)
        _signal(pid, signal.SIGTERM)
        _signal(pid, signal.SIGCONT)  # a stopped process would not act on SIGTERM
    deadline = time.monotonic() + STALE_GRACE_S
    while any(_running(pid) for pid in stale) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in stale:
        if _running(pid) and _judge(pid, records / str(pid)) == "stale":
            _signal(pid, signal.SIGKILL)
        (records / str(pid)).unlink(missing_ok=True)
    return stale


def _judge(pid: int, record: Path) -> str:
    """The record's verdict: "stale" (ours, its node gone), "live" (its node runs it; or
    no /proc to tell), or "gone" (exited, or the pid is another program's now)."""
    try:
        started, node = record.read_text().split()
        node_pid = int(node)
    except (OSError, ValueError):
        return "gone"
    if not Path("/proc/self/stat").exists():
        return "live"
    fields = _stat(pid)
    if fields is None or fields[0] in ("Z", "X") or fields[19] != started:
        return "gone"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    if not any(b"kibitz" in arg for arg in cmdline) or b"worker" not in cmdline:
        return "gone"
    return "live" if int(fields[1]) == node_pid else "stale"


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), which tells a process
    from a later one given the same pid."""
    fields = _stat(pid)
    return fields[19] if fields is not None else None


def _stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command name: state is [0], the parent's
    pid [1], the start time [19]."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _running(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)
