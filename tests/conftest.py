"""Shared fixtures: a real Redis (the product's embedded launcher), a real server process
on loopback with real worker processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kibitz.server.embedded_redis import EmbeddedRedis

LISTENING = re.compile(r"kibitz listening on (http://\S+)")


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"), persist=True).start()
    yield server
    server.stop()


@dataclass
class ServerProcess:
    """A ``kibitz serve`` child process; ``http_url`` is where it listens."""

    process: subprocess.Popen[str]
    http_url: str
    log: list[str] = field(default_factory=list)

    @property
    def ws_url(self) -> str:
        return "ws" + self.http_url[4:] + "/ws"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    redis_url: str, workers: int = 0, extra_env: dict[str, str] | None = None
) -> ServerProcess:
    """Run ``kibitz serve`` on a free loopback port and wait until it listens."""
    env = {**os.environ, "KIBITZ_LOG": "WARNING", **(extra_env or {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "serve", "--host", "127.0.0.1", "--port", "0",
         "--redis", redis_url, "--workers", str(workers)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    log: list[str] = []
    deadline = time.monotonic() + 30
    url = None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        log.append(line)
        match = LISTENING.search(line)
        if match:
            url = match.group(1)
            break
    if url is None:
        process.kill()
        raise RuntimeError("kibitz serve did not start:\n" + "".join(log))
    server = ServerProcess(process, url, log)
    # Keep draining its output so the pipe never fills up.
    threading.Thread(
        target=lambda: [log.append(x) for x in process.stdout or []], daemon=True
    ).start()
    return server


@pytest.fixture(scope="session")
def live_server(redis_server: EmbeddedRedis) -> Iterator[ServerProcess]:
    """The server with two real worker processes, on the session's Redis."""
    server = start_server(redis_server.url, workers=2)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent
