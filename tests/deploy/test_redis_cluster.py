"""The Redis Cluster variants of the deploy files, run: what their Redis nodes and their
cluster-creating one-shot (a Compose service, a Kubernetes Job) execute, on loopback with
Debian's Redis 7, as the containers would run it.

Only what must differ outside a container is substituted: the path of redis.conf in the
node's start command, the node's port and data directory in that file (each node here has
its own), and the hosts in ``REDIS_NODES``. The shell scripts are the shipped ones (for
Compose, with ``$$`` read as ``$``, as Compose does). Docker and Kubernetes themselves
are not run: the files' schemas are checked by test_files.py.

Each variant's six nodes start from the shipped command and config (the password on the
nodes' standard input: not in their command line, and refused without it), the
shipped script joins them into a cluster of three primaries with a replica each, the same
script run again does nothing, and a cluster client reaches every primary through the
addresses the nodes announce (host names in Kubernetes).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
import yaml
from redis.cluster import ClusterNode, RedisCluster

from kibitz.shared.bus.connect import ClusterURL
from kibitz.shared.bus.embedded_cluster import Redis7MissingError, find_cluster_binaries
from tests.deploy.test_files import (
    CLUSTER_FILES,
    COMPOSE_CLUSTER,
    REDIS_CLUSTER_CONF,
    env_of,
    find,
    manifests,
)

NODES = 6
START_TIMEOUT_S = 15.0
CREATE_TIMEOUT_S = 120.0


@dataclass
class Variant:
    """What one deploy variant runs for its Redis Cluster."""

    node_script: str  # a node's `sh -c` start command
    config_path: str  # where that command reads redis.conf
    config: str  # redis.conf
    create_script: str  # the one-shot's `sh -c` script
    create_nodes: list[str]  # its REDIS_NODES (host:port)
    url: str  # the kibitz nodes' KIBITZ_REDIS_URL
    node_env: dict[str, str] = field(default_factory=dict)  # what else a node's env has


def compose_variant() -> Variant:
    services = yaml.safe_load(COMPOSE_CLUSTER.read_text())["services"]
    node = services["redis-1"]
    (config_path,) = [
        volume.split(":")[1]
        for volume in node["volumes"]
        if volume.split(":")[0] == f"./{REDIS_CLUSTER_CONF.name}"
    ]
    create = services["redis-cluster-create"]
    return Variant(
        node_script=node["command"][2].replace("$$", "$"),
        config_path=config_path,
        config=REDIS_CLUSTER_CONF.read_text(),
        create_script=create["command"][2].replace("$$", "$"),
        create_nodes=create["environment"]["REDIS_NODES"].split(),
        # Compose's substitution of ${KIBITZ_REDIS_PASSWORD:?...}, with a stand-in value.
        url=re.sub(
            r"\$\{\w+(:?[-?][^}]*)?\}",
            "password",
            services["node1"]["environment"]["KIBITZ_REDIS_URL"],
        ),
    )


def kubernetes_variant() -> Variant:
    docs = manifests(CLUSTER_FILES)
    pod = find(docs, "StatefulSet", "kibitz-redis-cluster")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (volume,) = [v for v in pod["volumes"] if "configMap" in v]
    config = find(docs, "ConfigMap", volume["configMap"]["name"])["data"]
    (name,) = config
    (mount,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume["name"]]
    (create,) = find(docs, "Job", "kibitz-redis-cluster-create")["spec"]["template"]["spec"][
        "containers"
    ]
    return Variant(
        node_script=container["command"][2],
        config_path=f"{mount}/{name}",
        config=config[name],
        create_script=create["command"][2],
        create_nodes=env_of(create)["REDIS_NODES"].split(),
        url=find(docs, "Secret", "kibitz-redis")["stringData"]["KIBITZ_REDIS_URL"],
        # The pod's name in the headless Service; here one that resolves on loopback.
        node_env={"REDIS_HOSTNAME": "localhost"},
    )


def free_ports(count: int) -> list[int]:
    """Ports free on loopback, each with its cluster bus port (port + 10000) free too."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


def node_config(shipped: str, port: int, data: Path) -> str:
    """The shipped redis.conf for a node on loopback: its own port and data directory."""
    out, n = re.subn(r"^port 6379$", f"port {port}", shipped, flags=re.M)
    assert n == 1, "the shipped redis.conf should set port 6379 once"
    out, n = re.subn(r"(?<= )/data(?=/|$)", str(data), out, flags=re.M)
    assert n >= 2, "the shipped redis.conf should keep dir and nodes.conf in /data"
    return out + "bind 127.0.0.1 -::1\n"


def unauthenticated_ping(port: int) -> str:
    """What a node answers a PING from a client that gave no password."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"PING\r\n")
        return s.recv(256).decode()


@dataclass
class Cluster:
    password: str
    ports: list[int]
    processes: list[subprocess.Popen[bytes]]
    env: dict[str, str]  # PATH with Redis 7's redis-cli first

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(
            port=port, password=self.password, decode_responses=True, socket_timeout=5
        )


@pytest.fixture
def binaries(tmp_path: Path) -> Path:
    """A folder with Redis 7's redis-server and redis-cli, to put first on PATH (the
    scripts call them by name, as in the redis:7 image)."""
    try:
        server, cli = find_cluster_binaries()
    except Redis7MissingError as exc:
        pytest.fail(f"{exc} (.ci/run installs Debian's redis-server and redis-tools)")
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "redis-server").symlink_to(server)
    (folder / "redis-cli").symlink_to(cli)
    return folder


@contextlib.contextmanager
def start_nodes(variant: Variant, binaries: Path, root: Path) -> Iterator[Cluster]:
    password = secrets.token_hex(16)
    env = {**os.environ, "PATH": f"{binaries}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("REDISCLI_AUTH", None)
    ports = free_ports(NODES)
    processes: list[subprocess.Popen[bytes]] = []
    cluster = Cluster(password, ports, processes, env)
    try:
        for i, port in enumerate(ports):
            data = root / f"node{i}"
            data.mkdir()
            conf = data / "redis.conf"
            conf.write_text(node_config(variant.config, port, data))
            assert variant.node_script.count(variant.config_path) == 1
            script = variant.node_script.replace(variant.config_path, str(conf))
            node_env = {**env, **variant.node_env, "REDISCLI_AUTH": password}
            processes.append(
                subprocess.Popen(
                    ["sh", "-c", script],
                    env=node_env,
                    cwd=data,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        for process, port in zip(processes, ports, strict=True):
            while True:
                assert process.poll() is None, f"the node on port {port} exited"
                try:
                    if cluster.client(port).ping():
                        break
                except redis.ConnectionError:
                    pass
                assert time.monotonic() < deadline, f"the node on port {port} never answered"
                time.sleep(0.05)
        yield cluster
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def create(cluster: Cluster, variant: Variant) -> subprocess.CompletedProcess[str]:
    """The variant's one-shot, with REDIS_NODES naming the loopback nodes."""
    assert len(variant.create_nodes) == NODES
    env = {
        **cluster.env,
        "REDIS_NODES": " ".join(f"127.0.0.1:{port}" for port in cluster.ports),
        "REDISCLI_AUTH": cluster.password,
    }
    return subprocess.run(
        ["sh", "-c", variant.create_script],
        env=env,
        capture_output=True,
        text=True,
        timeout=CREATE_TIMEOUT_S,
    )


@pytest.mark.parametrize("variant", ["compose", "kubernetes"])
def test_the_cluster_variant_makes_a_cluster(variant: str, binaries: Path, tmp_path: Path) -> None:
    shipped = compose_variant() if variant == "compose" else kubernetes_variant()
    with start_nodes(shipped, binaries, tmp_path) as cluster:
        # The nodes run as shipped: a Redis Cluster node, the password not on the command
        # line (any user can read /proc/PID/cmdline) and required.
        for process, port in zip(cluster.processes, cluster.ports, strict=True):
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().decode()
            assert "redis-server" in cmdline and cluster.password not in cmdline, cmdline
            assert unauthenticated_ping(port).startswith("-NOAUTH"), "no password asked"
            admin = cluster.client(port)
            assert admin.config_get("cluster-enabled") == {"cluster-enabled": "yes"}
            assert admin.config_get("appendonly") == {"appendonly": "yes"}
            assert admin.config_get("masterauth") == {"masterauth": cluster.password}

        done = create(cluster, shipped)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "cluster created" in done.stdout, done.stdout
        roles = []
        for port in cluster.ports:
            admin = cluster.client(port)
            assert admin.cluster("info")["cluster_state"] == "ok"
            roles.append(admin.info("replication")["role"])
        assert sorted(roles) == ["master"] * 3 + ["slave"] * 3

        # Again (every `docker compose up`, a Job applied again): nothing to do.
        started = time.monotonic()
        again = create(cluster, shipped)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "nothing to do" in again.stdout and "cluster created" not in again.stdout
        assert time.monotonic() - started < 10

        # The kibitz nodes' URL names every node and the password, as kibitz parses it;
        # a cluster client reaches every primary where the nodes say they are.
        url = ClusterURL.parse(shipped.url)
        assert url.password is not None and len(url.nodes) == NODES
        start = ClusterNode("127.0.0.1", cluster.ports[0])  # type: ignore[no-untyped-call]
        client = RedisCluster(
            startup_nodes=[start], password=cluster.password, decode_responses=True
        )
        try:
            found = client.get_primaries()  # type: ignore[no-untyped-call]
            primaries = {(node.host, node.port) for node in found}
            assert len(primaries) == 3
            if variant == "kubernetes":  # announced by name, as the pods' DNS names
                admin = cluster.client(cluster.ports[0])
                slots = admin.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
                assert {tuple(shard[2][:2]) for shard in slots} == {
                    ("localhost", port) for _, port in primaries
                }
            written = {f"kibitz:{{g{g}}}:probe": str(g) for g in range(12)}
            for key, value in written.items():
                client.set(key, value)
            assert {key: client.get(key) for key in written} == written
            owners = {
                client.get_node_from_key(key).name  # type: ignore[no-untyped-call]
                for key in written
            }
            assert len(owners) == 3, "12 groups' keys should land on every primary"
        finally:
            client.close()
