"""``benchmarks/cpu_limit.py``: a CPU quota per process through a control group."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kibitz.benchmarks.cpu_limit import (
    PERIOD_US,
    CpuLimitError,
    CpuLimits,
    cpu_seconds,
    find_controller,
    quota_us,
)


def test_quota_is_the_share_of_each_period() -> None:
    assert quota_us(0.5) == PERIOD_US // 2
    assert quota_us(2) == 2 * PERIOD_US
    assert quota_us(0.01) == 1000  # the kernel's floor of 1 ms
    for bad in (0, -1, 65):
        with pytest.raises(ValueError, match="cores"):
            quota_us(bad)


def test_no_cgroup_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CpuLimitError, match="no writable cgroup"):
        find_controller(tmp_path)


def _used(pid: int) -> float:
    used = cpu_seconds(pid)
    assert used is not None
    return used


def test_a_capped_process_gets_its_share_and_the_group_goes() -> None:
    """A busy loop capped at a quarter of a core uses about a quarter of a core."""
    try:
        find_controller()
    except CpuLimitError as exc:
        pytest.skip(str(exc))  # not root here: the bench refuses --cpu-limit the same way
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with CpuLimits(0.25) as limits:
            group = limits.limit(busy.pid)
            assert str(busy.pid) in (group / "cgroup.procs").read_text().split()
            time.sleep(0.2)
            cpu0, t0 = _used(busy.pid), time.monotonic()
            time.sleep(1.5)
            share = (_used(busy.pid) - cpu0) / (time.monotonic() - t0)
            busy.kill()
            busy.wait()
        assert 0.1 <= share <= 0.35, share  # unlimited, it would take a whole core
        assert not group.exists()
    finally:
        if busy.poll() is None:
            busy.kill()
            busy.wait()


def test_bench_load_refuses_a_limit_it_cannot_apply() -> None:
    """``--cpu-limit`` caps the private cluster's nodes: not a server given by ``--url``,
    and not a share outside (0, 64]."""
    for extra in (["--url", "http://127.0.0.1:9", "--cpu-limit", "0.5"], ["--cpu-limit", "0"]):
        out = subprocess.run(
            [sys.executable, "-m", "kibitz.server.cli", "bench", "load", *extra],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 2 and "--cpu-limit" in out.stderr, out.stderr
