"""The AI-turn watchdog's pure decisions (server/domain/ai_watch.py)."""

from __future__ import annotations

from dataclasses import replace

from kibitz.server.domain import ai_watch
from kibitz.server.domain.ai_watch import attempt_job_id, attempt_of, next_step, watch_deadline
from kibitz.shared.protocol.jobs import Budget, Job

NOW = 1_000_000
JOB = Job("r1:7", "r1", 7, "chess", "", [], 3, Budget(depth=4, time_ms=700))


def test_without_a_job_the_deadline_is_the_clocks() -> None:
    assert watch_deadline(None, None, NOW) is None
    assert watch_deadline(NOW + 5, None, NOW) == NOW + 5


def test_an_untimed_ai_turn_is_overdue_after_its_think_time_and_the_grace() -> None:
    assert watch_deadline(None, JOB, NOW, 20_000) == NOW + 700 + 20_000
    depth_only = replace(JOB, budget=Budget(depth=3))
    assert watch_deadline(None, depth_only, NOW, 100) == NOW + ai_watch.UNTIMED_SEARCH_MS + 100


def test_a_timed_ai_turn_takes_the_earlier_of_its_flag_and_its_jobs_deadline() -> None:
    timed = replace(JOB, deadline_ms=NOW + 3_000)
    assert watch_deadline(NOW + 600_000, timed, NOW, 20_000) == NOW + 23_000
    assert watch_deadline(NOW + 10_000, timed, NOW, 20_000) == NOW + 10_000  # the flag first
    # Queued again after its deadline: overdue a grace from now.
    late = replace(JOB, deadline_ms=NOW - 30_000)
    assert watch_deadline(NOW + 600_000, late, NOW, 20_000) == NOW + 20_000


def test_attempts_have_their_own_job_ids_and_marks_count_per_version() -> None:
    assert attempt_job_id("r1:7", 0) == "r1:7"
    assert attempt_job_id("r1:7", 2) == "r1:7:2"
    assert attempt_of(None, 7) == 0
    assert attempt_of("7:2", 7) == 2
    assert attempt_of("6:4", 7) == 0  # an earlier version's
    assert attempt_of("7:x", 7) == 0


def test_the_next_step_waits_for_a_queued_job_and_gives_up_after_the_attempts() -> None:
    assert next_step(0, still_waiting=False) == "queue"
    assert next_step(0, still_waiting=True) == "wait"
    assert next_step(ai_watch.ATTEMPTS - 1, still_waiting=False) == "queue"
    assert next_step(ai_watch.ATTEMPTS, still_waiting=False) == "give_up"
    assert next_step(ai_watch.ATTEMPTS, still_waiting=True) == "wait"
