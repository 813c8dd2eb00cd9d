"""The chaos harness: a real cluster, the faults we inject into it, and a game driver.

- :class:`Cluster`: one Redis (the product's EmbeddedRedis, persisted, on a fixed port so a
  restart on the same directory and port keeps the data), N ``kibitz serve`` nodes (each
  straight to Redis or through a :class:`~tests.chaos.proxy.TcpProxy`) and M workers, with
  the faults: Redis stopped (SIGTERM / SIGKILL) and restarted, Redis frozen (SIGSTOP /
  SIGCONT), a node or a worker killed.
- :class:`DrivenGame`: a complete game of random legal moves from both seats (two clients,
  possibly on different nodes; or one against an AI seat). A client whose connection drops,
  or that hears nothing for ``STALL_S``, reconnects (its own node first, then the others)
  and ``resume``s with its token and last version. Every received ``state`` is logged with
  its arrival time, every move sent with the version it was sent at.
- :meth:`DrivenGame.verify` checks the finished game against what Redis holds (the
  ``/record``): it finished; its event log is complete (one event per version); its moves
  replay under the rules to its result; every human move was one its own seat's client
  sent, at that version (no stranger played a seat); each client's last view equals the
  record; and every committed version reached each client within ``DELIVERY_BOUND_S`` of
  its commit, or of the end of the fault window it was committed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis
import websockets
import websockets.exceptions
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

from kibitz.client.connection import KibitzClient, ws_url
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis, free_port
from kibitz.shared.bus.embedded_cluster import (
    HOST,
    EmbeddedCluster,
    EmbeddedClusterError,
    EmbeddedClusterNode,
)
from kibitz.shared.games import find_game
from tests.chaos.proxy import TcpProxy
from tests.conftest import ServerProcess, start_server

#: A committed version must reach every follower this soon (after its fault window ends).
DELIVERY_BOUND_S = 5.0
#: A client that hears nothing for this long reconnects and resumes (a last resort: the
#: delivery bound above is what fails the test when it was needed).
STALL_S = 20.0
#: The margin before a fault window in which a commit counts as caught by the fault.
FAULT_MARGIN_S = 1.0
WORKER_LEASE_MS = 5000
#: A blocking client of one Redis (``Cluster.redis`` is the EmbeddedRedis).
SyncRedis = redis.Redis
#: A Redis Cluster's cluster-node-timeout here: a primary silent this long is failed over.
CLUSTER_NODE_TIMEOUT_MS = 1000
#: tests/conftest.py lifts the per-address limits for the rest of the suite; the chaos
#: nodes run with the product's defaults (an empty value means "the default").
PRODUCT_LIMITS = {
    "KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "",
    "KIBITZ_MAX_CREATES_PER_MINUTE": "",
    "KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "",
}


class ChaosError(AssertionError):
    pass


# -- waiting ------------------------------------------------------------------------------------


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str = "condition", poll: float = 0.05
) -> Any:
    """Poll ``predicate`` until it is truthy (returned) or ``timeout`` s have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ChaosError(f"{what}: not reached within {timeout:.1f} s")
        time.sleep(poll)


async def async_wait_until(
    predicate: Callable[[], Any], timeout: float, what: str = "condition", poll: float = 0.1
) -> Any:
    """Like :func:`wait_until`; ``predicate`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise ChaosError(f"{what}: not reached within {timeout:.1f} s")
        await asyncio.sleep(poll)


# -- HTTP -----------------------------------------------------------------------------------------


async def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The status of GET ``url``, or None when it does not answer in time."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.get(url) as resp:
                await resp.read()
                return resp.status
    except (aiohttp.ClientError, TimeoutError, OSError):
        return None


async def get_json(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        async with s.get(url) as resp:
            return resp.status, await resp.json(content_type=None)


class HealthProbe:
    """Polls ``/healthz`` of some nodes in the background: (time, node index, status)."""

    def __init__(self, nodes: list[Node], every: float = 0.25, timeout: float = 1.5) -> None:
        self.nodes = nodes
        self.every = every
        self.timeout = timeout
        self.samples: list[tuple[float, int, int | None]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> HealthProbe:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.gather(*(self._probe(i, n) for i, n in enumerate(self.nodes)))
            await asyncio.sleep(self.every)

    async def _probe(self, index: int, node: Node) -> None:
        started = time.time()
        status = await http_status(node.http_url + "/healthz", self.timeout)
        self.samples.append((started, index, status))

    def statuses(self, index: int, t0: float, t1: float) -> list[int | None]:
        return [s for t, i, s in self.samples if i == index and t0 <= t <= t1]


# -- the cluster ------------------------------------------------------------------------------


@dataclass
class Node:
    server: ServerProcess
    redis_url: str
    proxy: TcpProxy | NodeLinks | None
    name: str = ""

    @property
    def http_url(self) -> str:
        return self.server.http_url

    @property
    def pid(self) -> int:
        return self.server.process.pid

    @property
    def alive(self) -> bool:
        return self.server.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        return "".join(self.server.log[-lines:])


class Cluster:
    """Redis, server nodes and workers, all real processes on loopback.

    Redis is one EmbeddedRedis, or with ``redis_cluster`` a Redis Cluster
    (:class:`~kibitz.shared.bus.embedded_cluster.EmbeddedCluster`: 3 primaries with a
    replica each, node timeout ``CLUSTER_NODE_TIMEOUT_MS``): ``redis_cluster=True`` starts
    one of its own, stopped by :meth:`close`; an EmbeddedCluster passed in is used (and
    left running). On a cluster every process gets its ``redis+cluster://`` URL, this test
    process takes the cluster's key layout (``keys.configure``), and with
    ``proxy_primaries`` every primary is reached through a :class:`SelectiveProxy` (it
    announces the proxy's port), so that one node's link to one primary can be cut
    (:meth:`cut_link`).
    """

    def __init__(
        self,
        tmp: Path,
        redis_cluster: bool | EmbeddedCluster = False,
        proxy_primaries: bool = False,
        database_url: str | None = None,
        node_env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        self.redis_cluster: EmbeddedCluster | None = None
        self._own_redis_cluster = False
        self._redis: EmbeddedRedis | None = None
        if isinstance(redis_cluster, EmbeddedCluster):
            self.redis_cluster = redis_cluster
        elif redis_cluster:
            self.redis_cluster = EmbeddedCluster(
                tmp / "redis-cluster", node_timeout_ms=CLUSTER_NODE_TIMEOUT_MS
            )
            self._own_redis_cluster = True
        else:
            self._redis = EmbeddedRedis(tmp / "redis", port=free_port(), persist=True)
        if proxy_primaries and self.redis_cluster is None:
            raise ValueError("proxy_primaries is for a Redis Cluster (single: add_node(via_proxy))")
        self.proxy_primaries = proxy_primaries
        #: primary (by its node id) -> the proxy in front of it (``proxy_primaries``).
        self.primary_proxies: dict[str, SelectiveProxy] = {}
        self.database_url = database_url
        self.node_env = dict(node_env or {})
        self.nodes: list[Node] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.faults: list[tuple[float, float]] = []  # wall-clock windows of injected faults
        self.frozen = False
        self._frozen_primaries: list[EmbeddedClusterNode] = []

    @property
    def redis(self) -> EmbeddedRedis:
        """The one Redis (not on a Redis Cluster)."""
        if self._redis is None:
            raise ChaosError("this test runs on a Redis Cluster: there is no one Redis")
        return self._redis

    @property
    def on_cluster(self) -> bool:
        return self.redis_cluster is not None

    @property
    def rc(self) -> EmbeddedCluster:
        """The Redis Cluster (only with ``redis_cluster``)."""
        if self.redis_cluster is None:
            raise ChaosError("this test runs on a single Redis, not a Redis Cluster")
        return self.redis_cluster

    def start(self) -> Cluster:
        if self.redis_cluster is None:
            self.redis.start()
            return self
        if self._own_redis_cluster:
            self.redis_cluster.start()
        # This process reads the keys the nodes write: the layout of a cluster URL
        # without ?groups= (shared/bus/connect.py).
        keys.configure(keys.DEFAULT_GROUPS)
        if self.proxy_primaries:
            for primary in self.rc.primaries():
                self._proxy_primary(primary)
        return self

    @property
    def redis_url(self) -> str:
        if self.redis_cluster is not None:
            return self.redis_cluster.url
        return self.redis.url

    def sync_redis(self) -> SyncRedis | RedisCluster:
        """A new blocking client (a cluster client on a Redis Cluster); close it."""
        if self.redis_cluster is None:
            return redis.Redis.from_url(self.redis_url, decode_responses=True, socket_timeout=5)
        seeds = [ClusterNode(HOST, node.port) for node in self.rc.primaries()]  # type: ignore[no-untyped-call]
        return RedisCluster(
            startup_nodes=seeds, password=self.rc.password, decode_responses=True,
            socket_timeout=5, socket_connect_timeout=5,
        )  # fmt: skip

    def add_node(self, via_proxy: bool = False, env: dict[str, str] | None = None) -> Node:
        """A ``kibitz serve`` node. ``via_proxy``: on a single Redis it reaches Redis through
        a TcpProxy of its own (``node.proxy``); on a cluster (``proxy_primaries`` needed)
        ``node.proxy`` is a :class:`NodeLinks`: its links to every primary, which it can
        freeze or cut."""
        proxy: TcpProxy | NodeLinks | None = None
        url = self.redis_url
        if via_proxy and self.redis_cluster is not None:
            if not self.primary_proxies:
                raise ChaosError("a node via a proxy on a cluster needs proxy_primaries=True")
            proxy = NodeLinks(list(self.primary_proxies.values()))
        elif via_proxy:
            single = TcpProxy("127.0.0.1", self.redis.port).start()
            proxy = single
            url = f"redis://:{self.redis.password}@127.0.0.1:{single.port}/0"
        server = start_server(
            url, workers=0, database_url=self.database_url,
            extra_env={**PRODUCT_LIMITS, **self.node_env, **(env or {})},
        )  # fmt: skip
        if isinstance(proxy, NodeLinks):
            proxy.pid = server.process.pid
        node = Node(server, url, proxy)
        with urllib.request.urlopen(server.http_url + "/healthz", timeout=10) as resp:
            node.name = json.loads(resp.read())["node"]
        self.nodes.append(node)
        return node

    def add_worker(self, name: str, lease_ms: int = WORKER_LEASE_MS) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"worker-{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            [sys.executable, "-m", "kibitz.server.cli", "worker",
             "--name", name, "--lease-ms", str(lease_ms)],
            env={**os.environ, "KIBITZ_LOG": "WARNING", "KIBITZ_REDIS_URL": self.redis_url},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.workers[name] = proc
        return proc

    def live_urls(self, first: str | None = None) -> list[str]:
        urls = [n.http_url for n in self.nodes if n.alive]
        if first in urls:
            urls.remove(first)
            urls.insert(0, first)
        return urls

    def node_by_url(self, url: str) -> Node:
        return next(n for n in self.nodes if n.http_url == url)

    # -- faults --------------------------------------------------------------------------------
    def redis_down(self, sig: int = signal.SIGTERM) -> None:
        """Stop Redis with ``sig`` (SIGTERM flushes the AOF; SIGKILL may lose ~1 s)."""
        proc = self.redis.process
        assert proc is not None
        proc.send_signal(sig)
        proc.wait(timeout=15)
        self.redis.stop()

    def redis_up(self) -> None:
        """Start the same redis-server command again: same port, directory and password."""
        self.redis.start(timeout=30)

    def redis_freeze(self) -> None:
        """SIGSTOP Redis: on a cluster every redis-server of it at once (all frozen for
        the same time, so no replica takes over)."""
        if self.redis_cluster is not None:
            self._frozen_primaries = [n for n in self.rc.nodes if n.live]
            for node in self._frozen_primaries:
                self.rc.freeze(node)
        else:
            assert self.redis.process is not None
            self.redis.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def redis_thaw(self) -> None:
        if self.redis_cluster is not None:
            for node in self._frozen_primaries:
                self.rc.thaw(node)
            self._frozen_primaries = []
        else:
            assert self.redis.process is not None
            self.redis.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill_node(self, node: Node, sig: int = signal.SIGKILL) -> None:
        node.server.process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.server.process.wait(timeout=15)

    def kill_worker(self, name: str) -> None:
        proc = self.workers[name]
        proc.kill()
        proc.wait(timeout=10)

    def fault_window(self, start: float, end: float) -> None:
        self.faults.append((start, end))

    # -- faults on a Redis Cluster (each blocks: call them with asyncio.to_thread) -------------
    def primary_of_room(self, room: str) -> EmbeddedClusterNode:
        """The primary that serves ``room``'s keys now."""
        return self.rc.node_for_key(keys.room_key(room))

    def control_primary(self) -> EmbeddedClusterNode:
        """The primary of the control slot (jobs, results, the fair queue, heartbeats)."""
        return self.rc.node_for_key(keys.JOBS)

    def kill_primary(
        self, primary: EmbeddedClusterNode, timeout: float = 30.0
    ) -> EmbeddedClusterNode:
        """SIGKILL ``primary``; returns once its replica has taken over (the new primary)."""
        self.rc.kill(primary)
        return self.rc.wait_for_failover(primary, timeout)

    def freeze_primary(self, primary: EmbeddedClusterNode) -> None:
        self.rc.freeze(primary)

    def thaw_primary(self, primary: EmbeddedClusterNode) -> None:
        self.rc.thaw(primary)

    def move_room_slot(
        self, room: str, to: EmbeddedClusterNode | None = None
    ) -> EmbeddedClusterNode:
        """Move the slot of ``room``'s keys (its group's slot) to primary ``to`` (default:
        another primary); the primary it moved to."""
        slot = key_slot(keys.room_key(room).encode())
        source = self.rc.primary_for_slot(slot)
        if to is None:
            to = next(p for p in self.rc.primaries() if p.node_id != source.node_id)
        self.rc.move_slot(slot, to)
        return to

    def cut_link(self, node: Node, primary: EmbeddedClusterNode, reset: bool = False) -> None:
        """Stop forwarding between ``node`` and ``primary`` (both ways, connections held
        open, new ones held: a partition); ``reset`` also resets its open connections."""
        proxy = self.proxy_of(primary)
        proxy.block(node.pid)
        if reset:
            proxy.cut_pid(node.pid)

    def restore_link(self, node: Node, primary: EmbeddedClusterNode) -> None:
        self.proxy_of(primary).unblock(node.pid)

    def proxy_of(self, primary: EmbeddedClusterNode) -> SelectiveProxy:
        proxy = self.primary_proxies.get(primary.node_id)
        if proxy is None:
            raise ChaosError(f"{primary} has no proxy (Cluster(..., proxy_primaries=True))")
        return proxy

    def _proxy_primary(self, primary: EmbeddedClusterNode) -> None:
        """A proxy in front of ``primary``, which announces the proxy's port to the cluster
        (CLUSTER SLOTS, MOVED): from then on every client reaches it through the proxy."""
        proxy = SelectiveProxy(HOST, primary.port)
        proxy.start()
        self.primary_proxies[primary.node_id] = proxy
        admin = primary.admin()
        admin.config_set("cluster-announce-bus-port", primary.cluster_port)
        admin.config_set("cluster-announce-port", proxy.port)
        others = [n for n in self.rc.nodes if n.live and n.node_id != primary.node_id]

        def announced() -> bool:
            for other in others:
                client = other.client()
                try:
                    slots = client.execute_command("CLUSTER", "SLOTS")
                finally:
                    client.close()
                if proxy.port not in {int(s[2][1]) for s in slots}:
                    return False
            return True

        wait_until(announced, 10, f"{primary} announcing its proxy's port")
        replicas = self.rc.replicas_of(primary)

        def replicating_through_the_proxy() -> bool:
            for replica in replicas:
                client = replica.client()
                try:
                    info = client.info("replication")
                finally:
                    client.close()
                if int(info.get("master_port", 0)) != proxy.port:
                    return False
                if info.get("master_link_status") != "up":
                    return False
            return True

        wait_until(replicating_through_the_proxy, 15, f"{primary}'s replicas via its proxy")

    def _unproxy_primaries(self) -> None:
        for node_id, proxy in list(self.primary_proxies.items()):
            for node in self.rc.nodes:
                if node.node_id == node_id and node.live:
                    with contextlib.suppress(redis.RedisError, EmbeddedClusterError):
                        node.admin().config_set("cluster-announce-port", 0)
                        node.admin().config_set("cluster-announce-bus-port", 0)
            proxy.close()
        self.primary_proxies.clear()

    # -- teardown ------------------------------------------------------------------------------
    def logs(self) -> str:
        out = []
        for i, node in enumerate(self.nodes):
            out.append(f"--- node {i} {node.name} (alive={node.alive})\n{node.log_tail()}")
        for name in self.workers:
            path = self.tmp / f"worker-{name}.log"
            if path.exists():
                out.append(f"--- worker {name}\n{path.read_text()[-2000:]}")
        return "\n".join(out)

    def stop_processes(self) -> None:
        """Stop the workers and the nodes (not Redis)."""
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for node in self.nodes:
            if node.alive:
                node.server.process.send_signal(signal.SIGCONT)
            node.server.stop()
            if node.proxy is not None:
                node.proxy.close()

    def close(self) -> None:
        if self.frozen:
            with contextlib.suppress(Exception):
                self.redis_thaw()
        self.stop_processes()
        if self.redis_cluster is not None:
            for node in self.rc.nodes:
                if node.frozen:
                    with contextlib.suppress(Exception):
                        self.rc.thaw(node)
            if self._own_redis_cluster:
                for proxy in self.primary_proxies.values():
                    proxy.close()
                self.primary_proxies.clear()
                self.rc.stop()
            else:
                self._unproxy_primaries()
        else:
            self.redis.stop()


class NodeLinks:
    """One node's links to every proxied primary of a cluster, as one TcpProxy-like
    object (``node.proxy``): ``freeze``/``unfreeze``/``cut`` act on this node's
    connections only."""

    def __init__(self, proxies: list[SelectiveProxy]) -> None:
        self.proxies = proxies
        self.pid = 0
        self.frozen = False

    def freeze(self) -> None:
        self.frozen = True
        for proxy in self.proxies:
            proxy.block(self.pid)

    def unfreeze(self) -> None:
        self.frozen = False
        for proxy in self.proxies:
            proxy.unblock(self.pid)

    def cut(self) -> None:
        for proxy in self.proxies:
            proxy.cut_pid(self.pid)

    def close(self) -> None:
        """The proxies are the cluster's (closed with it)."""


class SelectiveProxy(TcpProxy):
    """A :class:`TcpProxy` that can also stop forwarding for the connections of one
    process only (a partition between that process and the target): ``block(pid)`` holds
    that process's open connections (both ways) and any new one it makes, ``unblock``
    lets them through again, ``cut_pid`` resets them. A connection's process is found by
    its client port: /proc/net/tcp gives the socket's inode, /proc/PID/fd the process.
    """

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1") -> None:
        super().__init__(target_host, target_port, listen_host)
        self._blocked: dict[int, asyncio.Event] = {}  # pid -> its gate (cleared: blocked)
        self._peers: dict[asyncio.StreamWriter, int] = {}  # client side -> its client port
        self._gates: dict[asyncio.StreamWriter, asyncio.Event] = {}

    # -- control, from any thread ------------------------------------------------------------
    def block(self, pid: int) -> None:
        self._call(self._block(pid))

    def unblock(self, pid: int) -> None:
        self._call(self._unblock(pid))

    def cut_pid(self, pid: int) -> None:
        self._call(self._cut_pid(pid))

    # -- the proxy loop ------------------------------------------------------------------------
    def _ports_of(self, pid: int) -> set[int]:
        """The client ports of ``pid``'s connections to this proxy."""
        try:
            inodes = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
        except OSError:
            return set()
        ports = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError), open(table) as lines:
                next(lines)
                for line in lines:
                    parts = line.split()
                    local, remote, inode = parts[1], parts[2], parts[9]
                    if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == self.port:
                        ports.add(int(local.rsplit(":", 1)[1], 16))
        return ports

    async def _block(self, pid: int) -> None:
        gate = self._blocked.setdefault(pid, asyncio.Event())
        gate.clear()
        ports = self._ports_of(pid)
        for writer, port in self._peers.items():
            if port in ports:
                self._gates[writer] = gate

    async def _unblock(self, pid: int) -> None:
        gate = self._blocked.pop(pid, None)
        if gate is not None:
            gate.set()

    async def _cut_pid(self, pid: int) -> None:
        ports = self._ports_of(pid)
        for writer, port in list(self._peers.items()):
            if port in ports:
                writer.transport.abort()

    def _gate_for(self, port: int) -> asyncio.Event | None:
        for pid, gate in self._blocked.items():
            if port in self._ports_of(pid):
                return gate
        return None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """TcpProxy's forwarding, with the connection's client port (and its process's
        gate, if that process is blocked) noted first."""
        peer = writer.get_extra_info("peername")
        port = int(peer[1]) if peer else 0
        self._peers[writer] = port
        gate = self._gate_for(port) if self._blocked else None
        if gate is not None:
            self._gates[writer] = gate
        try:
            await super()._handle(reader, writer)
        finally:
            self._peers.pop(writer, None)
            self._gates.pop(writer, None)

    async def _hold(self, client: asyncio.StreamWriter) -> None:
        """Wait while the proxy is frozen or this connection's process is blocked."""
        assert self._open is not None
        while True:
            await self._open.wait()
            gate = self._gates.get(client)
            if gate is None or gate.is_set():
                return
            await gate.wait()


# -- clients --------------------------------------------------------------------------------

OPEN_ERRORS = (OSError, TimeoutError, ConnectionError, websockets.exceptions.WebSocketException)


async def open_client(url: str, local_addr: str | None = None, **kwargs: Any) -> KibitzClient:
    """A KibitzClient on ``url``, from ``local_addr`` (a loopback address) if given."""
    if local_addr is not None:
        kwargs["local_addr"] = (local_addr, 0)
    return await KibitzClient.open(url, **kwargs)


_rids = itertools.count(1)


def new_rid() -> str:
    return f"chaos-{next(_rids)}"


class GameTimeout(ChaosError):
    pass


CLOSED: dict[str, Any] = {"type": "closed"}
Match = Callable[[dict[str, Any]], bool]


def newer_state(room: str, version: int) -> Match:
    """A ``state`` of ``room`` past ``version``."""
    return lambda m: m["type"] == "state" and m["room"] == room and int(m["version"]) > version


def error_for(rid: str) -> Match:
    """The ``error`` reply to the request ``rid``."""
    return lambda m: m["type"] == "error" and m.get("rid") == rid


def either(first: Match, second: Match) -> Match:
    return lambda m: first(m) or second(m)


def version_at_least(version: int) -> Match:
    return lambda s: int(s["version"]) >= version


def version_past(version: int) -> Match:
    return lambda s: int(s["version"]) > version


@dataclass
class Player:
    """One seat's client in a driven game.

    A pump task reads every message of the current client (through the client's public
    ``next_message``), stamps its arrival, keeps the newest arrival as this player's view
    and queues it for the player's own waits; so the player needs nothing of the client
    but ``open``, ``send``, ``next_message`` and ``close``.
    """

    game: DrivenGame
    seat: int
    token: str
    client: KibitzClient
    home: str
    local_addr: str | None = None
    seen: list[tuple[float, int, list[str]]] = field(default_factory=list)
    sent: set[tuple[int, str]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    reconnects: int = 0
    stalls: int = 0
    floor: int = 0  # the next state this player acts on must be at least this version
    state: dict[str, Any] | None = None
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    pump: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.attach(self.client)

    @property
    def room(self) -> str:
        return self.game.room

    def attach(self, client: KibitzClient, initial: list[dict[str, Any]] | None = None) -> None:
        if self.pump is not None:
            self.pump.cancel()
        self.client = client
        client.tokens[self.room] = (self.seat, self.token)
        self.queue = asyncio.Queue()
        for message in initial or ():
            self._arrived(time.time(), message)
        self.pump = asyncio.create_task(self._pump(client, self.queue))

    def _arrived(self, at: float, message: dict[str, Any]) -> None:
        if message.get("type") == "error":
            self.notes.append(f"{at:.1f} error {message.get('code')} rid={message.get('rid')}")
        if message.get("type") == "state" and message.get("room") == self.room:
            self.state = message
            self.seen.append((at, int(message["version"]), [m["move"] for m in message["moves"]]))

    async def _pump(self, client: KibitzClient, queue: asyncio.Queue[dict[str, Any]]) -> None:
        try:
            while True:
                message = await client.next_message(None, timeout=3600)
                self._arrived(time.time(), message)
                queue.put_nowait(message)
        except (ConnectionError, TimeoutError, websockets.ConnectionClosed):
            queue.put_nowait(CLOSED)

    def last_version(self) -> int | None:
        return max((v for _t, v, _m in self.seen), default=None)

    def current(self) -> dict[str, Any] | None:
        return self.state

    async def next(self, match: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """The next queued message ``match`` accepts; ConnectionError when the socket closed."""
        async with asyncio.timeout(timeout):
            while True:
                message = await self.queue.get()
                if message is CLOSED:
                    self.queue.put_nowait(message)
                    raise ConnectionError("connection closed")
                if match(message):
                    return message

    async def wait_state(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        """This player's view once ``predicate`` holds for it (now or on a later arrival)."""
        async with asyncio.timeout(timeout):
            while True:
                if self.state is not None and predicate(self.state):
                    return self.state
                await self.next(lambda m: m.get("type") == "state", timeout)

    async def send(self, message: dict[str, Any]) -> None:
        await self.client.send(message)

    async def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.close(), 2)

    # -- playing -------------------------------------------------------------------------------
    async def run(self, deadline: float) -> dict[str, Any]:
        """Play random legal moves for this seat until the game is over."""
        while True:
            state = await self._await_turn(deadline)
            if state["status"] == "over":
                return state
            await asyncio.sleep(self.game.think())
            version = int(state["version"])
            move = self.game.rng.choice(state["legal_moves"])
            rid = new_rid()
            self.sent.add((version, move))
            self.notes.append(f"{time.time():.1f} sent {move} at v{version} rid={rid}")
            message = {"type": "move", "room": self.room, "token": self.token, "move": move,
                       "version": version, "rid": rid}  # fmt: skip
            try:
                await self.send(message)
            except (websockets.ConnectionClosed, ConnectionError, OSError):
                await self.reconnect("send failed", deadline)
                continue
            reply = await self._next(
                either(newer_state(self.room, version), error_for(rid)),
                deadline,
            )
            if reply is None or reply["type"] == "state":
                continue
            code = reply["code"]
            if code in ("server/unavailable", "room/busy", "server/busy", "rate/limited"):
                await asyncio.sleep(0.3)
            elif code in ("room/stale", "move/not_your_turn", "move/illegal", "game/over"):
                self.floor = version + 1  # our view is behind: act on a newer state only
            elif code == "message/invalid" and "ahead of" in str(reply.get("message")):
                # Our view is ahead of the room: Redis lost the last commits (a failover).
                # The node must resync us to what Redis holds; until then, ask again.
                await asyncio.sleep(0.3)
            else:
                raise ChaosError(f"room {self.room} seat {self.seat}: move refused: {reply}")

    async def _await_turn(self, deadline: float) -> dict[str, Any]:
        while True:
            state = self.state
            if state is not None and int(state["version"]) >= self.floor:
                if state["status"] == "over":
                    return state
                if state["status"] == "playing" and state["to_move"] == self.seat:
                    return state
            await self._next(lambda m: m["type"] == "state" and m["room"] == self.room, deadline)

    async def _next(
        self, match: Callable[[dict[str, Any]], bool], deadline: float
    ) -> dict[str, Any] | None:
        """The next matching message; None if the client had to reconnect meanwhile."""
        stall_at = min(deadline, time.monotonic() + STALL_S)
        while True:
            remaining = stall_at - time.monotonic()
            if remaining <= 0:
                if time.monotonic() >= deadline:
                    raise GameTimeout(self._where("did not finish in time"))
                self.stalls += 1
                self.notes.append(f"{time.time():.1f} heard nothing for {STALL_S} s")
                await self.reconnect("stalled", deadline)
                return None
            try:
                return await self.next(match, remaining)
            except TimeoutError:
                continue
            except ConnectionError:
                await self.reconnect("connection closed", deadline)
                return None

    def _where(self, what: str) -> str:
        state = self.state or {}
        return (
            f"room {self.room} ({self.game.game}) seat {self.seat}: {what}; last state "
            f"v{state.get('version')} status={state.get('status')} to_move={state.get('to_move')}"
            f"; reconnects={self.reconnects} notes={self.notes[-5:]}"
        )

    async def reconnect(self, why: str, deadline: float) -> None:
        """A new connection (home node first, then the others) and ``resume``."""
        self.reconnects += 1
        self.notes.append(f"{time.time():.1f} reconnect: {why}")
        await self.close()
        for attempt in itertools.count():
            if time.monotonic() >= deadline:
                raise GameTimeout(self._where(f"could not reconnect ({why})"))
            urls = self.game.cluster.live_urls(first=self.home)
            if not urls:
                raise ChaosError("no live node to reconnect to")
            url = urls[attempt % len(urls)]
            try:
                client = await open_client(url, self.local_addr)
            except OPEN_ERRORS as exc:
                self.notes.append(f"open {url}: {type(exc).__name__}")
                await asyncio.sleep(0.3)
                continue
            received = await self._resume(client)
            if received is not None:
                self.attach(client, received)
                self.floor = 0
                return
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2)
            await asyncio.sleep(0.3)

    async def _resume(self, client: KibitzClient) -> list[dict[str, Any]] | None:
        """Send ``resume`` on a fresh client; the messages up to its ``resync`` state, or
        None if it was refused or the socket died."""
        rid = new_rid()
        message: dict[str, Any] = {"type": "resume", "room": self.room, "token": self.token,
                                   "rid": rid}  # fmt: skip
        since = self.last_version()
        if since is not None:
            message["since"] = since
        client.tokens[self.room] = (self.seat, self.token)
        received: list[dict[str, Any]] = []

        def answer(m: dict[str, Any]) -> bool:
            received.append(m)
            resynced = m["type"] == "state" and m["room"] == self.room
            return (resynced and m["event"]["kind"] == "resync") or (
                m["type"] == "error" and m.get("rid") == rid
            )

        try:
            await client.send(message)
            reply = await client.next_message(answer, timeout=10)
        except (TimeoutError, ConnectionError, websockets.ConnectionClosed, OSError):
            return None
        if reply["type"] == "error":
            self.notes.append(f"resume refused: {reply['code']}")
            return None
        if reply["you"] != self.seat:
            raise ChaosError(self._where(f"resumed with its token as {reply['you']!r}"))
        return received


class DrivenGame:
    """A game between our own clients (or one client and an AI seat)."""

    def __init__(
        self,
        cluster: Cluster,
        room: str,
        game: str,
        rng: random.Random,
        think: tuple[float, float],
    ) -> None:
        self.cluster = cluster
        self.room = room
        self.game = game
        self.rng = rng
        self.think_range = think
        self.players: list[Player] = []
        self.problems: list[str] = []
        self.record: dict[str, Any] | None = None

    def think(self) -> float:
        return self.rng.uniform(*self.think_range)

    @classmethod
    async def start(
        cls,
        cluster: Cluster,
        game: str,
        creator: Node,
        joiner: Node | None = None,
        opponent: str = "human",
        seat: int = 0,
        addrs: tuple[str | None, str | None] = (None, None),
        seed: int = 0,
        think: tuple[float, float] = (0.05, 0.15),
        position: str | None = None,
    ) -> DrivenGame:
        """Create the room on ``creator`` (and join it on ``joiner`` for a human game)."""
        a = await open_client(creator.http_url, addrs[0])
        message: dict[str, Any] = {"type": "create", "game": game, "opponent": opponent,
                                   "seat": seat}  # fmt: skip
        if position is not None:
            message["position"] = position
        reply = await a.request(message)
        driven = cls(cluster, reply["room"], game, random.Random(seed), think)
        first = Player(driven, reply["seat"], reply["token"], a, creator.http_url, addrs[0])
        driven.players.append(first)
        await first.wait_state(lambda s: True)
        if opponent == "human":
            assert joiner is not None
            b = await open_client(joiner.http_url, addrs[1])
            joined = await b.request({"type": "join", "room": driven.room})
            second = Player(driven, joined["seat"], joined["token"], b, joiner.http_url, addrs[1])
            driven.players.append(second)
            await second.wait_state(lambda s: s["status"] == "playing")
        return driven

    async def play(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        results = await asyncio.gather(
            *(p.run(deadline) for p in self.players), return_exceptions=True
        )
        for player, result in zip(self.players, results, strict=True):
            if isinstance(result, BaseException):
                self.problems.append(f"room {self.room} seat {player.seat}: {result}")

    def summary(self) -> str:
        moves = len(self.record["moves"]) if self.record else None
        return f"room {self.room} ({self.game}): {moves} moves; " + "; ".join(
            f"seat {p.seat}: {p.reconnects} reconnects, {p.stalls} stalls"
            + (f" {p.notes[-8:]}" if p.stalls else "")
            for p in self.players
        )

    def in_progress(self) -> bool:
        state = self.players[0].current()
        return state is not None and state["status"] != "over"

    async def close(self) -> None:
        for p in self.players:
            await p.close()

    async def fetch_record(self, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for url in self.cluster.live_urls():
                try:
                    status, body = await get_json(f"{url}/api/rooms/{self.room}/record", 3.0)
                except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
                    continue
                if status == 200:
                    return dict(body)
            if time.monotonic() > deadline:
                raise ChaosError(f"room {self.room}: no node served its record")
            await asyncio.sleep(0.5)

    async def verify(self, allow_resign: bool = False) -> list[str]:
        """Everything the chaos scenarios assert about one finished game (see module doc)."""
        problems = list(self.problems)
        try:
            record = await self.fetch_record()
        except ChaosError as exc:
            return [*problems, str(exc)]
        self.record = record
        where = f"room {self.room} ({self.game})"
        moves = record["moves"]
        if record["status"] != "over" or record["result"] is None:
            problems.append(f"{where}: not finished in Redis: status {record['status']}")
        versions = [e["version"] for e in record["events"]]
        last = versions[-1] if versions else -1
        if versions != list(range(last + 1)):
            problems.append(f"{where}: event log has gaps or repeats: {versions}")
        move_events = [e for e in record["events"] if e["kind"] == "move"]
        if [e["move"] for e in move_events] != moves:
            problems.append(f"{where}: move events {move_events} differ from moves {moves}")
        problems += self._check_rules(record, allow_resign)
        # No stranger played a seat: each human move is one its seat's client sent then.
        by_seat = {p.seat: p for p in self.players}
        for event in move_events:
            player = by_seat.get(event["seat"])
            if player is not None and (event["version"] - 1, event["move"]) not in player.sent:
                problems.append(
                    f"{where}: move {event['move']} at v{event['version']} for seat "
                    f"{event['seat']} was not sent by that seat's client"
                )
        human_seats = sorted(i for i, s in enumerate(record["seats"]) if s["kind"] == "human")
        if human_seats != sorted(by_seat):
            problems.append(f"{where}: human seats {human_seats}, ours {sorted(by_seat)}")
        # Each client converged to what Redis holds.
        for player in self.players:
            if not player.seen:
                problems.append(f"{where} seat {player.seat}: never received a state")
                continue
            _t, version, seen_moves = player.seen[-1]
            if version != last or seen_moves != moves:
                problems.append(
                    f"{where} seat {player.seat}: last view v{version} with {len(seen_moves)} "
                    f"moves, Redis holds v{last} with {len(moves)} moves"
                )
            problems += self._check_delivery(record, player)
        return problems

    def _check_rules(self, record: dict[str, Any], allow_resign: bool) -> list[str]:
        game = find_game(record["game"])
        try:
            state = game.parse_position(record["start"])
            for move in record["moves"]:
                state = game.play(state, move)
        except Exception as exc:
            return [f"room {self.room}: its moves do not replay: {exc}"]
        outcome = game.outcome(state)
        result = record["result"]
        if result is not None and "resign" in str(result.get("reason", "")):
            if not allow_resign:
                return [f"room {self.room}: ended by resignation: {result}"]
            return []
        if outcome is None or result is None:
            return [f"room {self.room}: rules say {outcome}, record says {result}"]
        if outcome.winner != result["winner"] or outcome.reason != result["reason"]:
            return [f"room {self.room}: rules say {outcome}, record says {result}"]
        return []

    def _check_delivery(self, record: dict[str, Any], player: Player) -> list[str]:
        """Every version committed after the player arrived reached it within the bound."""
        moves = record["moves"]
        first_seen = player.seen[0][1]
        out = []
        for event in record["events"]:
            version = event["version"]
            if version <= first_seen:
                continue
            committed = event["at"] / 1000.0
            start = committed
            for t0, t1 in self.cluster.faults:
                if t0 - FAULT_MARGIN_S <= committed <= t1:
                    start = max(start, t1)
            arrived = next(
                (
                    t
                    for t, v, seen_moves in player.seen
                    if v >= version and seen_moves == moves[: len(seen_moves)]
                ),
                None,
            )
            if arrived is None:
                out.append(
                    f"room {self.room} seat {player.seat}: v{version} (committed "
                    f"{committed:.1f}) never reached the client"
                )
            elif arrived - start > DELIVERY_BOUND_S:
                out.append(
                    f"room {self.room} seat {player.seat}: v{version} reached the client "
                    f"{arrived - start:.1f} s after it was committed (or its fault ended); "
                    f"bound {DELIVERY_BOUND_S} s"
                )
        return out


async def play_all(
    games: list[DrivenGame],
    timeout: float,
    fault: Callable[[], Awaitable[None]] | None = None,
    fault_after: float = 2.0,
) -> list[str]:
    """Play ``games`` to the end, running ``fault`` ``fault_after`` s in; the problems."""
    tasks = [asyncio.create_task(g.play(timeout)) for g in games]
    problems: list[str] = []
    try:
        if fault is not None:
            await asyncio.sleep(fault_after)
            finished = [g.room for g in games if not g.in_progress()]
            if finished:
                problems.append(f"games over before the fault (test too short): {finished}")
            await fault()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    for g in games:
        problems += await g.verify()
        await g.close()
        print(g.summary())
    return problems


async def mixed_games(cluster: Cluster, a: Node, b: Node, seed: int) -> list[DrivenGame]:
    """Four Othello games (about 60 plies each): human pairs across and on one node, and
    two against low-level AIs."""
    return [
        await DrivenGame.start(cluster, "othello", a, b, seed=seed + 1),
        await DrivenGame.start(cluster, "othello", b, a, seed=seed + 2),
        await DrivenGame.start(cluster, "othello", a, opponent="ai:1", seed=seed + 3),
        await DrivenGame.start(cluster, "othello", b, opponent="ai:2", seed=seed + 4, seat=1),
    ]


async def healthy_again(node: Node, timeout: float = DELIVERY_BOUND_S) -> bool:
    try:
        await async_wait_until(
            lambda: _is_200(node), timeout, f"{node.name} /healthz 200", poll=0.2
        )
    except ChaosError:
        return False
    return True


async def _is_200(node: Node) -> bool:
    return await http_status(node.http_url + "/healthz", 1.5) == 200


def report(problems: list[str], cluster: Cluster | None = None) -> str:
    text = "\n".join(problems)
    if cluster is not None:
        text += "\n\n" + cluster.logs()
    return text


async def connection_limit_problems(cluster: Cluster, limit: int, address: str) -> list[str]:
    """The per-address connection limit (``KIBITZ_MAX_CONNECTIONS_PER_ADDRESS`` = ``limit``
    on every node) holds across the nodes: ``limit`` WebSockets from ``address``, spread
    over the live nodes, open; one more, on any node, is refused with 429
    ``rate/connections``; once they are closed the address may connect again."""
    urls = [ws_url(url) for url in cluster.live_urls()]
    opened: list[Any] = []
    problems: list[str] = []

    async def connect(url: str) -> Any:
        return await websockets.connect(url, open_timeout=10, local_addr=(address, 0))

    try:
        for i in range(limit):
            try:
                opened.append(await connect(urls[i % len(urls)]))
            except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
                problems.append(f"{address}: connection {i + 1} of {limit} refused: {exc!r}")
                return problems
        for url in urls:
            try:
                extra = await connect(url)
            except websockets.exceptions.InvalidStatus as exc:
                body = exc.response.body.decode(errors="replace")
                if exc.response.status_code != 429 or "rate/connections" not in body:
                    problems.append(f"{address}: over the limit on {url}: {exc!r} {body}")
            except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
                problems.append(f"{address}: over the limit on {url}: {exc!r}")
            else:
                opened.append(extra)
                problems.append(
                    f"{address}: connection {limit + 1} accepted on {url} (limit {limit})"
                )
    finally:
        await asyncio.gather(*(ws.close() for ws in opened), return_exceptions=True)
    if problems:
        return problems

    async def again() -> bool:
        try:
            ws = await connect(urls[0])
        except (OSError, TimeoutError, websockets.exceptions.WebSocketException):
            return False
        await ws.close()
        return True

    try:
        await async_wait_until(again, 10, f"{address} connecting again after closing", poll=0.5)
    except ChaosError as exc:
        problems.append(str(exc))
    return problems
