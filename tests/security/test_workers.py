"""Local workers never outlive their node, and a worker cut off from Redis does not flood
the log (issue 19, item 6).

Attacks and faults, each on real processes: ``kill -9`` of ``kibitz serve`` (its workers
must be gone within a few seconds, by the parent-death signal and by the lifeline pipe,
each proven alone too); a second ``kibitz serve`` on the same data directory (it stops the
workers a dead node left, and only those: a reused pid and a live node's workers are left
alone); ``kill -9`` of a ``kibitz worker --concurrency`` parent; a standalone worker whose
Redis dies (a bounded number of log lines, and it plays on once Redis is back).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from kibitz.server.cli.serve import spawn_server
from kibitz.shared.bus.embedded import EmbeddedRedis, free_port
from kibitz.workers.lifeline import LIFELINE_FD_ENV, NODE_PID_ENV

GONE_WITHIN_S = 5.0


# -- processes, read from /proc ---------------------------------------------------------


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state is [0], ppid [1])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children_of(pid: int, *marks: bytes) -> list[int]:
    """The live children of process ``pid`` whose command line holds every one of
    ``marks`` (read from /proc: CI runs on Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields is None or fields[1] != str(pid) or fields[0] == "Z":
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if all(mark in cmdline for mark in marks):
            found.append(int(entry.name))
    return sorted(found)


def workers_of(pid: int) -> list[int]:
    """The live ``kibitz worker`` children of process ``pid``."""
    return children_of(pid, b"kibitz", b"\0worker")


def wait_for(predicate: Callable[[], bool], timeout: float, poll: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()


def still_alive(pids: list[int], timeout: float) -> list[int]:
    """The pids of ``pids`` still running after up to ``timeout`` seconds."""
    wait_for(lambda: not any(alive(p) for p in pids), timeout)
    return [p for p in pids if alive(p)]


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)


def stop_stale_redis(data_dir: Path) -> None:
    """The private Redis of a node killed with -9 lives on (a session of its own)."""
    pid_file = data_dir / "redis" / "redis.pid"
    try:
        pid = int(pid_file.read_text().strip())
        if b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not alive(pid), 10)
    except (OSError, ValueError):
        pass


# -- nodes ------------------------------------------------------------------------------


class Serve:
    """A ``kibitz serve`` on a free loopback port (private Redis unless ``redis_url``)."""

    def __init__(self, data_dir: Path, workers: int, redis_url: str = "") -> None:
        shared = ["--redis", redis_url] if redis_url else []
        self.process, self.url, _ = spawn_server(
            ["--port", "0", "--workers", str(workers), *shared],
            {"KIBITZ_REDIS_URL": "", "KIBITZ_DATA_DIR": str(data_dir)},
        )
        threading.Thread(
            target=lambda: [None for _ in self.process.stdout or []], daemon=True
        ).start()
        self.workers: list[int] = []

    def wait_workers(self, count: int, timeout: float = 20.0) -> list[int]:
        """The node's ``count`` local workers, once each has reported to Redis."""

        def ready() -> bool:
            with urllib.request.urlopen(f"{self.url}/api/status", timeout=5) as resp:
                reported = len(json.load(resp)["workers"])
            return len(workers_of(self.process.pid)) == count and reported >= count

        assert wait_for(ready, timeout, poll=0.2), "the local workers did not start"
        self.workers = workers_of(self.process.pid)
        return self.workers

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        kill_all(self.workers)


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Serve]]:
    """Nodes the test starts; every process they leave is ended afterwards."""
    started: list[Serve] = []
    yield started
    for node in started:
        node.stop()
    stop_stale_redis(tmp_path)


# -- the node dies ----------------------------------------------------------------------


def test_kill_9_of_serve_takes_its_workers_with_it(tmp_path: Path, nodes: list[Serve]) -> None:
    node = Serve(tmp_path, workers=2)
    nodes.append(node)
    workers = node.wait_workers(2)
    node.process.kill()
    node.process.wait()
    assert still_alive(workers, GONE_WITHIN_S) == [], "local workers outlived kill -9 of their node"


def test_a_second_serve_stops_the_workers_a_dead_node_left(
    tmp_path: Path, nodes: list[Serve]
) -> None:
    first = Serve(tmp_path, workers=1)
    nodes.append(first)
    [orphan] = first.wait_workers(1)
    # Frozen, the worker cannot act on its node's death by itself: only the next node on
    # the directory can end it.
    os.kill(orphan, signal.SIGSTOP)
    first.process.kill()
    first.process.wait()
    time.sleep(0.5)
    assert alive(orphan)
    second = Serve(tmp_path, workers=1)
    nodes.append(second)
    assert still_alive([orphan], 2.0) == [], "a stale worker of the data directory was left"
    assert len(second.wait_workers(1)) == 1


def test_a_reused_pid_and_a_live_nodes_workers_are_left_alone(
    tmp_path: Path, nodes: list[Serve], redis_server: EmbeddedRedis
) -> None:
    # Two nodes of one cluster on one machine share the data directory (their SQLite file).
    first = Serve(tmp_path, workers=1, redis_url=redis_server.url)
    nodes.append(first)
    [theirs] = first.wait_workers(1)
    # A record whose pid now belongs to another program (not a worker) must not kill it.
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        records = tmp_path / "workers"
        records.mkdir(mode=0o700, exist_ok=True)
        fields = stat_fields(bystander.pid)
        assert fields is not None
        (records / str(bystander.pid)).write_text(f"{fields[19]} {os.getpid() + 999_999}\n")
        second = Serve(tmp_path, workers=1, redis_url=redis_server.url)
        nodes.append(second)
        second.wait_workers(1)
        assert alive(theirs) and bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_lifeline_pipe_alone_stops_a_worker(redis_server: EmbeddedRedis) -> None:
    """End of file on the lifeline is enough (the node's pid is ours, alive all along)."""
    read_end, write_end = os.pipe()
    worker = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker"],
        env={**os.environ, "KIBITZ_REDIS_URL": redis_server.url, "KIBITZ_LOG": "WARNING",
             NODE_PID_ENV: str(os.getpid()), LIFELINE_FD_ENV: str(read_end)},
        pass_fds=(read_end,),
    )  # fmt: skip
    os.close(read_end)
    try:
        time.sleep(1.5)
        assert worker.poll() is None, "the worker did not start"
        os.close(write_end)
        assert worker.wait(timeout=GONE_WITHIN_S) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


PARENT = """
import os, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-m", "kibitz.server.cli", "worker"],
                          env={**os.environ, %r: str(os.getpid())})
print(worker.pid, flush=True)
time.sleep(60)
"""


def test_parent_death_alone_stops_a_worker(redis_server: EmbeddedRedis) -> None:
    """No pipe: the parent-death signal (Linux) or the parent check ends the worker."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT % NODE_PID_ENV],
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "KIBITZ_REDIS_URL": redis_server.url, "KIBITZ_LOG": "WARNING"},
    )  # fmt: skip
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    try:
        time.sleep(1.5)
        assert alive(worker), "the worker did not start"
        parent.kill()
        parent.wait()
        assert still_alive([worker], GONE_WITHIN_S) == []
    finally:
        kill_all([worker])
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_kill_9_of_a_worker_pool_parent_takes_its_children(redis_server: EmbeddedRedis) -> None:
    pool = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", "--concurrency", "2"],
        env={**os.environ, "KIBITZ_REDIS_URL": redis_server.url, "KIBITZ_LOG": "WARNING"},
    )
    children: list[int] = []
    try:
        assert wait_for(lambda: len(_python_children(pool.pid)) == 2, 20, poll=0.2)
        children = _python_children(pool.pid)
        time.sleep(1.0)
        pool.kill()
        pool.wait()
        assert still_alive(children, GONE_WITHIN_S) == [], "pool workers outlived their parent"
    finally:
        kill_all(children)


def _python_children(pid: int) -> list[int]:
    """The multiprocessing children (not its resource tracker) of ``pid``."""
    return children_of(pid, b"spawn_main")


# -- Redis dies under a standalone worker -----------------------------------------------


def test_a_worker_without_redis_backs_off_and_comes_back(tmp_path: Path) -> None:
    store = EmbeddedRedis(tmp_path / "redis", port=free_port(), persist=False).start()
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "kibitz.server.cli", "worker", "--name", "lonely"],
            env={**os.environ, "KIBITZ_REDIS_URL": store.url, "KIBITZ_LOG": "INFO"},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    client = redis.Redis.from_url(store.url)
    try:
        assert wait_for(lambda: bool(client.exists("kibitz:workers:lonely")), 20, poll=0.1)
        client.close()
        store.stop()
        before = _warnings(log_path)
        time.sleep(6.0)  # the old loop: a warning every 0.5 s, 12 here
        during = _warnings(log_path) - before
        assert worker.poll() is None, "the worker must survive a Redis outage"
        assert during <= 4, f"{during} warnings in 6 s of outage"
        # Redis comes back (same port, same password): the worker reports again.
        back = EmbeddedRedis(tmp_path / "redis", port=store.port, persist=False)
        back.password = store.password
        store = back.start()
        client = redis.Redis.from_url(store.url)
        assert wait_for(lambda: bool(client.exists("kibitz:workers:lonely")), 15, poll=0.1)
    finally:
        client.close()
        if worker.poll() is None:
            worker.terminate()
            worker.wait(timeout=20)
        store.stop()


def _warnings(log_path: Path) -> int:
    return sum(1 for line in log_path.read_text().splitlines() if "WARNING" in line)
