"""A CPU quota per process, for benches that compare 1, 2 and 4 nodes on a small machine.

On the project's 2-core machine the nodes, Redis and the bench's own clients share the
cores, so a second node mostly takes CPU from the first: the machine, not the design, sets
the ceiling. Capping each node at a fraction of a core (as a container's CPU limit does)
makes the nodes the bottleneck, so doubling them (and the load) shows what the design
gives. Linux control groups do the capping: cgroup v2's ``cpu.max`` where the unified
hierarchy offers the ``cpu`` controller, else cgroup v1's ``cpu`` controller
(``cpu.cfs_quota_us``). Both need root (or a delegated hierarchy).

``cpu_seconds`` reads the CPU time a process has used, which is how the benches (and the
test of the quota) see what a node cost.

The quota is granted per short period (10 ms), so a capped process waits at most about a
period once it has used its share, rather than the 100 ms of the kernel's default period.
A share under a tenth of a core would need a quota under the kernel's floor of 1 ms in that
period, so its period is longer instead (:func:`period_us`: 0.04 of a core is 1 ms every
25 ms): such a process may wait up to that period (``kibitz bench load --redis-cpu-limit``
caps Redis so, to make Redis rather than the 2-core machine the limit).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from types import TracebackType

#: The quota's period in microseconds (see the module docstring).
PERIOD_US = 10_000
#: The kernel's smallest quota per period, and its longest period (cgroup v1 and v2).
MIN_QUOTA_US = 1000
MAX_PERIOD_US = 1_000_000
CGROUP_ROOT = Path("/sys/fs/cgroup")


class CpuLimitError(RuntimeError):
    """The machine offers no writable control group with a CPU controller."""


def quota_us(cores: float, period_us: int = PERIOD_US) -> int:
    """The quota per period for a share of ``cores`` CPUs (at least 1 ms, the kernel's
    floor)."""
    if not 0 < cores <= 64:
        raise ValueError(f"a CPU limit is a number of cores in (0, 64], not {cores!r}")
    return max(MIN_QUOTA_US, round(cores * period_us))


def period_us(cores: float) -> int:
    """The period for a share of ``cores``: :data:`PERIOD_US`, or longer where the quota
    would be under the kernel's 1 ms floor (so that 0.04 of a core is 0.04, not 0.1)."""
    quota_us(cores)  # the same check of the share
    return min(MAX_PERIOD_US, max(PERIOD_US, round(MIN_QUOTA_US / cores)))


def find_controller(root: Path = CGROUP_ROOT) -> tuple[str, Path]:
    """Where new groups with a CPU quota can be made: ``("v2", dir)`` or ``("v1", dir)``."""
    for v2 in (root, root / "unified"):
        controllers = v2 / "cgroup.controllers"
        subtree = v2 / "cgroup.subtree_control"
        try:
            if "cpu" in controllers.read_text().split() and os.access(v2, os.W_OK):
                if "cpu" not in subtree.read_text().split():
                    subtree.write_text("+cpu")
                return "v2", v2
        except OSError:
            continue
    v1 = root / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists() and os.access(v1, os.W_OK):
        return "v1", v1
    raise CpuLimitError(
        f"no writable cgroup with a cpu controller under {root} (a CPU limit needs root "
        "or a delegated cgroup)"
    )


class CpuLimits:
    """Control groups made for capped processes, removed on exit: one group per
    :meth:`limit` call, so each process gets its own quota."""

    def __init__(self, cores: float, root: Path = CGROUP_ROOT) -> None:
        self.period = period_us(cores)
        self.quota = quota_us(cores, self.period)
        self.version, self.parent = find_controller(root)
        self.groups: list[Path] = []
        #: The group each limited process was put in.
        self.group_of: dict[int, Path] = {}

    def limit(self, pid: int) -> Path:
        """Move process ``pid`` into a new group capped at the quota; returns the group."""
        group = self.parent / f"kibitz-bench-{uuid.uuid4().hex[:12]}"
        group.mkdir()
        self.groups.append(group)
        if self.version == "v2":
            (group / "cpu.max").write_text(f"{self.quota} {self.period}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(self.period))
            (group / "cpu.cfs_quota_us").write_text(str(self.quota))
        (group / "cgroup.procs").write_text(str(pid))
        self.group_of[pid] = group
        return group

    def throttled(self, pid: int) -> tuple[int, int] | None:
        """(periods, periods in which the quota ran out) so far, of the group of process
        ``pid`` (``cpu.stat``'s ``nr_periods`` and ``nr_throttled``); None if unknown."""
        group = self.group_of.get(pid)
        if group is None:
            return None
        try:
            stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
            return int(stat["nr_periods"]), int(stat["nr_throttled"])
        except (OSError, KeyError, ValueError):
            return None

    def close(self) -> None:
        """Remove the groups (their processes must have exited; any left move back to
        the parent group first)."""
        for group in self.groups:
            try:
                for pid in (group / "cgroup.procs").read_text().split():
                    (self.parent / "cgroup.procs").write_text(pid)
                group.rmdir()
            except OSError:
                pass
        self.groups.clear()
        self.group_of.clear()

    def __enter__(self) -> CpuLimits:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used so far, from
    ``/proc/PID/stat``; None where there is no such file."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
