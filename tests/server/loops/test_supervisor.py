"""The node's supervisor: a loop that raises is restarted with the one backoff and
reported; shutdown stops the loops in reverse order, each within its bound."""

from __future__ import annotations

import asyncio
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
