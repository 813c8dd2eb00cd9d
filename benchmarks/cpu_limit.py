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
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from types import TracebackType

#: The quota's period in microseconds (see the module docstring).
PERIOD_US = 10_000
CGROUP_ROOT = Path("/sys/fs/cgroup")


class CpuLimitError(RuntimeError):
    """The machine offers no writable control group with a CPU controller."""


def quota_us(cores: float, period_us: int = PERIOD_US) -> int:
    """The quota per period for a share of ``cores`` CPUs (at least 1 ms, the kernel's
    floor)."""
    if not 0 < cores <= 64:
        raise ValueError(f"a CPU limit is a number of cores in (0, 64], not {cores!r}")
    return max(1000, round(cores * period_us))


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
        self.quota = quota_us(cores)
        self.version, self.parent = find_controller(root)
        self.groups: list[Path] = []

    def limit(self, pid: int) -> Path:
        """Move process ``pid`` into a new group capped at the quota; returns the group."""
        group = self.parent / f"kibitz-bench-{uuid.uuid4().hex[:12]}"
        group.mkdir()
        self.groups.append(group)
        if self.version == "v2":
            (group / "cpu.max").write_text(f"{self.quota} {PERIOD_US}")
        else:
            (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (group / "cpu.cfs_quota_us").write_text(str(self.quota))
        (group / "cgroup.procs").write_text(str(pid))
        return group

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
