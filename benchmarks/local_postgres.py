"""A throwaway PostgreSQL server on loopback, for the tests and ``kibitz bench archive``.

``initdb`` in a temporary directory, then ``postgres`` on a free port with its unix
socket in that directory too; ``stop()`` shuts it down and removes everything.
PostgreSQL refuses to run as root, so as root it runs as the ``postgres`` user (the
directory is handed to that user); as anyone else it runs as that user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from kibitz.shared.bus.embedded import free_port


class LocalPostgresError(RuntimeError):
    pass


def find_pg_bin() -> Path | None:
    """The folder with ``initdb`` and ``postgres`` (Debian keeps them off PATH)."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    return versions[0].parent if versions else None


def _run_as() -> list[str]:
    """The command prefix that runs a program as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return []  # root without a postgres user: nothing better to try
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--"]
    return []


class LocalPostgres:
    """``LocalPostgres().start()``; ``url`` is a ``postgresql://`` URL (trust auth on
    loopback, superuser ``postgres``); ``create_database(name)`` adds a database."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="kibitz-pg-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.prefix = _run_as()

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> LocalPostgres:
        bin_dir = find_pg_bin()
        if bin_dir is None:
            raise LocalPostgresError("PostgreSQL is not installed (apt-get install postgresql)")
        data = self.root / "data"
        if self.prefix:
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o700)
        subprocess.run(
            [*self.prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
             "--auth=trust", "-E", "UTF8", "--no-sync"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        self.process = subprocess.Popen(
            [*self.prefix, str(bin_dir / "postgres"), "-D", str(data),
             "-p", str(self.port), "-h", "127.0.0.1", "-k", str(self.root),
             "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self._ready(bin_dir):
            if self.process.poll() is not None:
                raise LocalPostgresError(f"postgres exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                self.stop()
                raise LocalPostgresError(f"postgres did not answer on port {self.port}")
            time.sleep(0.1)
        return self

    def _ready(self, bin_dir: Path) -> bool:
        probe = subprocess.run(
            [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
            check=False,
        )
        return probe.returncode == 0

    def create_database(self, name: str) -> str:
        """Create database ``name``; its URL."""
        bin_dir = find_pg_bin()
        assert bin_dir is not None
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", name],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        return self.url_for(name)

    def stop(self) -> None:
        bin_dir = find_pg_bin()
        if self.process is not None and self.process.poll() is None and bin_dir is not None:
            # "fast": disconnect clients and stop (a signal would reach runuser, not postgres).
            subprocess.run(
                [*self.prefix, str(bin_dir / "pg_ctl"), "stop", "-D", str(self.root / "data"),
                 "-m", "fast", "-w", "-t", "20"],
                check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
