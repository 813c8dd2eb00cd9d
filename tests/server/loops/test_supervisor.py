"""The node's supervisor: a loop that raises is restarted with the one backoff and
reported; shutdown stops the loops in reverse order, each within its bound."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import pytest

from kibitz.server.loops.supervisor import Backoff, Supervisor


async def wait_until(check, within: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_backoff_grows_to_its_cap_with_jitter() -> None:
    policy = Backoff(first_s=0.1, cap_s=1.0)
    assert policy.delay(1, 0.5) == pytest.approx(0.1)
    assert policy.delay(2, 0.5) == pytest.approx(0.2)
    assert policy.delay(3, 0.0) == pytest.approx(0.2)  # jitter: 0.5x to 1.5x
    assert policy.delay(10, 0.99) == pytest.approx(1.0)  # capped, jitter included
    assert policy.delay(10_000, 0.5) == pytest.approx(1.0)  # no overflow


async def test_a_loop_that_raises_is_restarted_after_backoff_and_reported() -> None:
    starts: list[float] = []
    restarted: list[str] = []

    async def flaky() -> None:
        starts.append(time.monotonic())
        if len(starts) <= 3:
            raise ConnectionError("redis at 127.0.0.1:6379 went away")
        await asyncio.Event().wait()

    supervisor = Supervisor(Backoff(first_s=0.05, cap_s=0.2), on_restart=restarted.append)
    supervisor.start("flaky", flaky)
    try:
        await wait_until(lambda: len(starts) == 4)
        await wait_until(lambda: supervisor.status()["flaky"]["state"] == "running")
        report = supervisor.status()["flaky"]
        assert report == {"state": "running", "restarts": 3, "last_error": "ConnectionError"}
        assert restarted == ["flaky"] * 3
        assert supervisor.up == 1
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        # 0.05, 0.1, 0.2 (x 0.5 to 1.5, capped at 0.2): each wait at least half its step
        assert gaps[0] >= 0.025 and gaps[1] >= 0.05 and gaps[2] >= 0.1, gaps
        assert "127.0.0.1" not in str(supervisor.status())  # the type only, no message
    finally:
        await supervisor.stop()
    assert supervisor.status()["flaky"]["state"] == "stopped"


async def test_the_backoff_resets_after_a_healthy_run() -> None:
    runs: list[float] = []

    async def fails_after_a_while() -> None:
        runs.append(time.monotonic())
        if len(runs) < 4:
            raise RuntimeError("early")
        await asyncio.sleep(0.15)  # longer than healthy_s: the backoff starts afresh
        raise RuntimeError("later")

    supervisor = Supervisor(Backoff(first_s=0.02, cap_s=5.0, healthy_s=0.1))
    supervisor.start("resets", fails_after_a_while)
    try:
        await wait_until(lambda: len(runs) >= 5)
        assert supervisor._loops["resets"].failures == 1
    finally:
        await supervisor.stop()


async def test_a_body_that_returns_is_done_and_not_restarted() -> None:
    calls: list[int] = []

    async def once() -> None:
        calls.append(1)

    supervisor = Supervisor(Backoff(first_s=0.01))
    supervisor.start("once", once)
    await wait_until(lambda: supervisor.status()["once"]["state"] == "done")
    await asyncio.sleep(0.05)
    assert calls == [1] and supervisor.up == 0
    await supervisor.stop()


async def test_shutdown_stops_loops_in_reverse_order_each_within_its_bound() -> None:
    stopped: list[str] = []

    def loop(name: str, stubborn: bool = False):  # type: ignore[no-untyped-def]
        async def body() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                stopped.append(name)
                if stubborn:  # ignores its cancellation for longer than the bound
                    await asyncio.shield(asyncio.sleep(2.0))

        return body

    supervisor = Supervisor(stop_timeout_s=0.2)
    for name in ("first", "second", "third"):
        supervisor.start(name, loop(name, stubborn=name == "second"))
    await asyncio.sleep(0.05)
    began = time.monotonic()
    await supervisor.stop()
    took = time.monotonic() - began
    assert stopped == ["third", "second", "first"]
    assert took < 0.2 * 3 + 0.3, took  # the stubborn one cost its bound, no more
    assert {r["state"] for r in supervisor.status().values()} == {"stopped"}


async def test_bad_names_are_refused() -> None:
    supervisor = Supervisor()

    async def body() -> None:
        await asyncio.Event().wait()

    with pytest.raises(ValueError):
        supervisor.start("", body)
    with pytest.raises(ValueError):
        supervisor.start("x" * 41, body)
    supervisor.start("one", body)
    with pytest.raises(ValueError):
        supervisor.start("one", body)
    assert list(supervisor.status()) == ["one"]
    await supervisor.stop()


class FailsAs:
    """A loop body that raises the next of ``errors`` each time, then waits for ever."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        await asyncio.Event().wait()


def loop_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kibitz.server.loops.supervisor"]


async def test_repeated_failures_are_logged_once_with_a_traceback_then_summarised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kibitz.server.loops.supervisor")
    body = FailsAs(*(ConnectionError(f"refused {i}") for i in range(400)), KeyError("x"))
    supervisor = Supervisor(Backoff(first_s=0.002, cap_s=0.004), log_every_s=0.3)
    supervisor.start("outage", body)
    try:
        await wait_until(lambda: body.calls > 401, within=10.0)
    finally:
        await supervisor.stop()
    lines = loop_lines(caplog)
    assert supervisor.status()["outage"]["restarts"] == 401
    first, *repeats, other = lines
    assert first.levelno == logging.WARNING and first.exc_info is not None
    assert "ConnectionError" in first.getMessage()
    # 400 failures over ~1-2 s: a summary at most every 0.3 s, each with its count.
    assert 1 <= len(repeats) <= 8, [r.getMessage() for r in repeats]
    assert all(r.exc_info is None and "ConnectionError" in r.getMessage() for r in repeats)
    counted = sum(int(re.search(r"(\d+) more", r.getMessage()).group(1)) for r in repeats)
    assert counted == 399  # every failure counted once: in a summary or flushed
    assert other.exc_info is not None and "KeyError" in other.getMessage()


async def test_a_new_failure_after_a_healthy_run_gets_its_traceback_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kibitz.server.loops.supervisor")
    runs: list[float] = []

    async def fails_after_a_healthy_run() -> None:
        runs.append(time.monotonic())
        if len(runs) == 2:
            await asyncio.sleep(0.15)  # healthy: past healthy_s
        if len(runs) <= 2:
            raise ConnectionError("away")
        await asyncio.Event().wait()

    supervisor = Supervisor(Backoff(first_s=0.01, cap_s=0.02, healthy_s=0.1), log_every_s=60)
    supervisor.start("again", fails_after_a_healthy_run)
    try:
        await wait_until(lambda: len(runs) == 3)
    finally:
        await supervisor.stop()
    tracebacks = [r for r in loop_lines(caplog) if r.exc_info is not None]
    assert len(tracebacks) == 2


async def test_each_loop_may_have_its_own_backoff_parameters() -> None:
    quick, slow = FailsAs(*[OSError("x")] * 5), FailsAs(*[OSError("x")] * 5)
    supervisor = Supervisor(Backoff(first_s=5.0, cap_s=5.0))
    supervisor.start("quick", quick, backoff=Backoff(first_s=0.01, cap_s=0.02))
    supervisor.start("slow", slow)  # the supervisor's own: 2.5 s or more before a restart
    try:
        await wait_until(lambda: quick.calls == 6, within=2.0)
        assert slow.calls == 1
        assert supervisor.status()["slow"]["state"] == "backing_off"
    finally:
        await supervisor.stop()
