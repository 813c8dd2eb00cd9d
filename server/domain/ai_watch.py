"""The AI-turn watchdog's decisions: pure arithmetic, no I/O.

A room at an AI's turn waits for its job's result; if the job is lost (Redis lost its last
acknowledged writes: a Redis Cluster failover, or a single Redis restarted from an AOF
missing its last second), nothing would move the room again. So the commit that hands the
turn to an AI puts the room on the deadlines set (the deadline sweeper's,
server/loops/deadlines.py) at the earlier of its clock's deadline and the time the move
is expected back plus a grace (:func:`watch_deadline`). A move that arrives in time
commits a new deadline, so the watchdog never fires in a game that goes on. When the
sweeper finds the room due with nothing due on its clock, still at the AI's turn at the
same version, the room service queues the AI job again under a new job id (attempt N:
``room:version:N``, :func:`attempt_job_id`; the fair queue and the cluster relay would
take the same id for a duplicate) and pushes the deadline out again, at most
``ATTEMPTS`` times (then it logs an error and leaves the room to its clock and the
abandon rules). A result of any attempt moves the room if it is still at that version;
every later one is refused by the versioned commit, as a duplicate result is today.
"""

from __future__ import annotations

from typing import Literal

from kibitz.shared.protocol.jobs import Job

#: How long past the time its move is expected back (its think time; in a timed game the
#: job's deadline) a room at an AI's turn waits before its job is queued again.
GRACE_MS = 20_000
#: How often a room's AI job is queued again at one version, at most.
ATTEMPTS = 5
#: The expected search time of a job whose budget has no time limit (depth or nodes).
UNTIMED_SEARCH_MS = 1_000

#: What the watchdog does with a due room at an AI's turn: ``queue`` the job again,
#: ``wait`` (the last attempt's job still waits in the fair queue: only push the deadline
#: out), or ``give_up`` (attempts spent: the deadline goes back to the clock's).
Step = Literal["queue", "wait", "give_up"]


def watch_deadline(
    clock_deadline: int | None, job: Job | None, now_ms: int, grace_ms: int = GRACE_MS
) -> int | None:
    """The room's deadline (server-clock ms) as a commit writes it: its clock's
    (``clock_deadline``, None: untimed or nothing due) or, when the commit queues an AI
    ``job``, the earlier of that and when the job's move is overdue: its deadline (timed
    games; the worker cuts its search to it) or now plus its time budget, plus
    ``grace_ms``. A job whose deadline has passed (queued again late in its turn) is
    overdue ``grace_ms`` from now."""
    if job is None:
        return clock_deadline
    if job.deadline_ms is not None:
        expected = max(job.deadline_ms, now_ms)
    else:
        expected = now_ms + (job.budget.time_ms or UNTIMED_SEARCH_MS)
    overdue = expected + grace_ms
    return overdue if clock_deadline is None else min(clock_deadline, overdue)


def attempt_job_id(job_id: str, attempt: int) -> str:
    """The id of attempt ``attempt`` of the job ``job_id`` (0: the commit's own job)."""
    return job_id if attempt == 0 else f"{job_id}:{attempt}"


def attempt_of(mark: str | None, version: int) -> int:
    """The last attempt the room's watch mark (``version:attempt``, written with each
    attempt) records at ``version`` (0: none; a mark of another version counts none)."""
    if not mark:
        return 0
    seen, _, attempt = mark.partition(":")
    if seen != str(version) or not attempt.isdigit():
        return 0
    return int(attempt)


def next_step(attempt: int, still_waiting: bool, attempts: int = ATTEMPTS) -> Step:
    """What to do with a due room at an AI's turn whose last attempt was ``attempt``:
    wait while that attempt's job still waits in the fair queue (it is not lost, the
    workers are behind: queueing another would only add to their backlog), give up after
    ``attempts`` attempts, else queue the next one."""
    if still_waiting:
        return "wait"
    if attempt >= attempts:
        return "give_up"
    return "queue"
