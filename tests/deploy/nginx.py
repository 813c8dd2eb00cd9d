"""Run Debian's nginx on loopback from the shipped deploy/nginx-kibitz.conf.

Only what must differ on a test machine is substituted: the upstream nodes' addresses,
the listen address and the paths (pid, logs, temporary files). Every other directive is
the shipped file's, so the tests check what we ship.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

NGINX_CONF = Path(__file__).resolve().parents[2] / "deploy" / "nginx-kibitz.conf"
START_TIMEOUT_S = 10.0


def find_nginx() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)),
        None,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def substitute(shipped: str, nodes: Sequence[str], listen: str) -> str:
    """The shipped config with the upstream servers' addresses and the listen address
    replaced (each must occur exactly as expected, or the shipped file changed shape)."""
    upstream = re.search(r"upstream kibitz_nodes \{(.*?)\n\}", shipped, re.S)
    assert upstream, "deploy/nginx-kibitz.conf has no 'upstream kibitz_nodes' block"
    body = upstream.group(1)
    servers = re.findall(r"^(\s*server\s+)(\S+?)([\s;])", body, re.M)
    assert len(servers) == len(nodes), f"expected {len(nodes)} upstream servers: {servers}"
    it = iter(nodes)
    new_body = re.sub(
        r"^(\s*server\s+)(\S+?)([\s;])", lambda m: m.group(1) + next(it) + m.group(3), body,
        flags=re.M,
    )  # fmt: skip
    out = shipped[: upstream.start(1)] + new_body + shipped[upstream.end(1) :]
    out, n = re.subn(r"^(\s*)listen\s+80;", rf"\1listen {listen};", out, flags=re.M)
    assert n == 1, "deploy/nginx-kibitz.conf should listen on port 80 exactly once"
    return out


def wrap(site: str, prefix: Path) -> str:
    """A whole nginx.conf around the site (which belongs in the http context), with every
    path under ``prefix``."""
    # As root, nginx's workers switch to an unprivileged user; they need no file of ours
    # beyond the temporary directories, which the master creates for that user.
    user = "user nobody nogroup;\n" if os.geteuid() == 0 else ""
    temp = prefix / "temp"
    return (
        f"{user}worker_processes 1;\n"
        f"pid {prefix}/nginx.pid;\n"
        f"error_log {prefix}/error.log info;\n"
        "events { worker_connections 512; }\n"
        "http {\n"
        f"    access_log {prefix}/access.log;\n"
        f"    client_body_temp_path {temp}/body;\n"
        f"    proxy_temp_path {temp}/proxy;\n"
        f"    fastcgi_temp_path {temp}/fastcgi;\n"
        f"    uwsgi_temp_path {temp}/uwsgi;\n"
        f"    scgi_temp_path {temp}/scgi;\n"
        f"{site}\n"
        "}\n"
    )


class Nginx:
    """nginx in the foreground (``daemon off``), stopped with SIGTERM (a fast shutdown:
    its workers close their connections and exit with it)."""

    def __init__(
        self, binary: str, prefix: Path, nodes: Sequence[str], port: int | None = None
    ) -> None:
        self.binary = binary
        self.prefix = prefix
        self.port = port or free_port()
        (prefix / "temp").mkdir(parents=True, exist_ok=True)
        prefix.chmod(0o755)
        site = substitute(NGINX_CONF.read_text(), nodes, f"127.0.0.1:{self.port}")
        self.conf = prefix / "nginx.conf"
        self.conf.write_text(wrap(site, prefix))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self, *extra: str) -> list[str]:
        return [
            self.binary, "-p", f"{self.prefix}/", "-e", f"{self.prefix}/error.log",
            "-c", str(self.conf), *extra,
        ]  # fmt: skip

    def check(self) -> None:
        """``nginx -t`` on the generated config: it must parse and load."""
        done = subprocess.run(
            self.command("-t"), capture_output=True, text=True, timeout=START_TIMEOUT_S
        )
        assert done.returncode == 0, f"nginx -t failed:\n{done.stderr}\n{self.conf.read_text()}"

    def start(self) -> Nginx:
        self.check()
        self.process = subprocess.Popen(
            self.command("-g", "daemon off;"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # it logs to error.log
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("nginx exited:\n" + self.log_tail())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not listen within 10 s:\n" + self.log_tail())

    def log_tail(self, lines: int = 40) -> str:
        path = self.prefix / "error.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
