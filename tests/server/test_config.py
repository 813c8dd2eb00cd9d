"""The node's one configuration (server/config.py): flags over variables over defaults,
every bad value refused with the name of its flag or variable, and ``kibitz serve
--print-config`` (a real process) printing the effective values without starting anything."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kibitz.server.config import ConfigError, NodeConfig, describe, from_sources
from kibitz.server.domain.clocks import FIRST_MOVE_MS
from kibitz.server.gateway.edge import HEAD_TIMEOUT_S
from kibitz.server.loops.archiver import Lifetimes
from kibitz.server.node import lifetimes_of
from kibitz.server.services.limits import Limits
from kibitz.shared.bus.connect import REDIS_POOL_SIZE, REDIS_POOL_WAIT_S, REDIS_TIMEOUT_S


def test_the_defaults_are_those_of_the_modules_that_use_them() -> None:
    config = NodeConfig()
    assert lifetimes_of(config) == Lifetimes()
    limits = Limits()
    assert config.max_connections_per_address == limits.connections_per_address
    assert config.max_creates_per_minute == limits.creates_per_minute
    assert config.max_ai_games_per_address == limits.ai_games_per_address
    assert config.first_move_timeout_s * 1000 == FIRST_MOVE_MS
    assert config.head_timeout_s == HEAD_TIMEOUT_S
    assert config.redis_pool == REDIS_POOL_SIZE
    assert (config.redis_timeout_s, config.redis_pool_wait_s) == (
        REDIS_TIMEOUT_S,
        REDIS_POOL_WAIT_S,
    )


def test_every_field_has_a_doc_and_every_number_a_bound() -> None:
    for field in dataclasses.fields(NodeConfig):
        assert field.metadata["doc"], field.name
        if field.type in ("int", "float", "int | None", "float | None"):
            assert field.metadata["high"] is not None, field.name


def test_a_flag_wins_over_its_variable_and_a_variable_over_the_default() -> None:
    env = {"KIBITZ_HEAD_TIMEOUT": "7", "KIBITZ_REDIS_POOL": "9", "KIBITZ_WS_COMPRESSION": "1"}
    config = from_sources({"head_timeout_s": 3.0}, env)
    assert config.head_timeout_s == 3.0  # the flag
    assert config.redis_pool == 9  # the variable
    assert config.ws_compression is True
    assert config.waiting_ttl_s == NodeConfig().waiting_ttl_s  # the default


def test_a_list_flag_adds_to_its_variable() -> None:
    env = {"KIBITZ_TRUSTED_PROXIES": "10.0.0.1, 10.0.0.2"}
    config = from_sources({"trusted_proxies": ["10.0.0.3"]}, env)
    assert config.trusted_proxies == ("10.0.0.1", "10.0.0.2", "10.0.0.3")


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        ({"head_timeout_s": 0.0}, {}, "--head-timeout must be positive"),
        ({"port": 70000}, {}, "--port must be at most 65535"),
        ({"redis_pool": 0}, {}, "--redis-pool must be at least 1"),
        ({}, {"KIBITZ_HEAD_TIMEOUT": "soon"}, "$KIBITZ_HEAD_TIMEOUT must be a number"),
        ({}, {"KIBITZ_REDIS_POOL": "1.5"}, "$KIBITZ_REDIS_POOL must be a whole number"),
        ({}, {"KIBITZ_FINISHED_TTL": "-1"}, "$KIBITZ_FINISHED_TTL must be positive"),
        ({}, {"KIBITZ_LOG": "LOUD"}, "$KIBITZ_LOG must be one of"),
        ({}, {"KIBITZ_EVENT_LOOP": "trio"}, "$KIBITZ_EVENT_LOOP must be one of"),
        ({"engines": ["chess=x"] * 65}, {}, "--engine must be at most 64"),
    ],
)
def test_a_bad_value_is_refused_naming_its_source(flags, env, named) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=named.replace("$", r"\$")):
        from_sources(flags, env)


def test_a_config_built_in_code_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="rate_burst must be at least 1"):
        NodeConfig(rate_burst=0.0)


def test_describe_masks_secrets_and_lists_every_field() -> None:
    config = from_sources(
        {"redis_url": "redis://:hunter2@db.example:6379/0"},
        {"KIBITZ_DATABASE_URL": "postgresql://kibitz:hunter3@pg.example/kibitz"},
    )
    text = describe(config)
    assert "hunter2" not in text and "hunter3" not in text
    assert "redis_url = redis://***@db.example:6379/0" in text
    names = [line.split(" = ")[0] for line in text.splitlines()]
    assert names == [field.name for field in dataclasses.fields(NodeConfig)]


def serve(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KIBITZ_REDIS_URL": "", "KIBITZ_DATA_DIR": str(tmp_path / "data"),
             **env},
    )  # fmt: skip


def test_print_config_prints_the_effective_values_and_starts_nothing(tmp_path) -> None:
    done = serve(
        ["--print-config", "--head-timeout", "12", "--port", "0"],
        {"KIBITZ_MAX_CREATES_PER_MINUTE": "7", "KIBITZ_REDIS_URL": "redis://:pw@h.example/0"},
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" = ", 1) for line in done.stdout.splitlines())
    assert lines["head_timeout_s"].startswith("12.0  # ")
    assert lines["max_creates_per_minute"].startswith("7  # ")
    assert lines["port"].startswith("0  # ")
    assert lines["redis_url"].startswith("redis://***@h.example/0  # ")
    assert "listening" not in done.stdout
    assert not (tmp_path / "data").exists()  # no private Redis, no archive, nothing made


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--head-timeout", "0"], {}, "--head-timeout must be positive"),
        (["--print-config"], {"KIBITZ_REDIS_POOL": "many"}, "$KIBITZ_REDIS_POOL must be"),
        (["--public-origin", "games.example"], {}, "--public-origin"),
    ],
)
def test_serve_refuses_a_bad_value_with_exit_2(tmp_path, args, env, named) -> None:  # type: ignore[no-untyped-def]
    done = serve(args, env, tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert named in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


#: Variables that are not a node's settings: the lifeline a node hands its local workers
#: (workers/lifeline.py) and where the private Redis's binary is (shared/bus/embedded.py).
NOT_NODE_SETTINGS = {
    "KIBITZ_LIFELINE_FD",
    "KIBITZ_NODE_PID",
    "KIBITZ_REDIS_SERVER",
    # The private Redis Cluster's binaries (shared/bus/embedded_cluster.py: tests, benches).
    "KIBITZ_REDIS_CLUSTER_SERVER",
    "KIBITZ_REDIS_CLUSTER_CLI",
}


def test_every_variable_the_node_reads_is_a_field() -> None:
    """A ``KIBITZ_*`` name in the node's code (server/, shared/bus/) that NodeConfig does
    not know fails here: a new variable is added as a field, with its doc and bound."""
    root = Path(__file__).resolve().parents[2]
    sources = [*(root / "server").rglob("*.py"), *(root / "shared" / "bus").rglob("*.py")]
    named = {m for p in sources for m in re.findall(r"KIBITZ_[A-Z_]+", p.read_text())}
    known = {f.metadata["env"] for f in dataclasses.fields(NodeConfig)} - {None}
    assert named - NOT_NODE_SETTINGS - known == set()
    assert known <= named  # and every field's variable is one the code names


SERVER = Path(__file__).resolve().parents[2] / "server"
#: Where the environment may be read: the config (and the CLI that builds it).
ENV_READERS = ("config.py", "cli")
ENV_READ = re.compile(r"\bos\.(environ|getenv)\b|\bfrom os import\b.*\b(environ|getenv)\b")


def environment_reads(server: Path) -> list[str]:
    """``path:line`` of each read of the environment (``os.environ``, ``os.getenv``,
    ``environ`` imported from os) in ``server``, outside ENV_READERS."""
    found = []
    for path in sorted(server.rglob("*.py")):
        relative = path.relative_to(server)
        if relative.parts[0] in ENV_READERS:
            continue
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if ENV_READ.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_the_environment_is_read_by_the_config_alone() -> None:
    reads = environment_reads(SERVER)
    assert not reads, "read NodeConfig instead:\n" + "\n".join(reads)


def test_the_scan_sees_an_environment_read(tmp_path: Path) -> None:
    (tmp_path / "fanout").mkdir()
    (tmp_path / "cli").mkdir()
    (tmp_path / "fanout" / "x.py").write_text('import os\nX = os.environ.get("KIBITZ_X")\n')
    (tmp_path / "cli" / "y.py").write_text('import os\nY = os.getenv("KIBITZ_Y")\n')
    assert environment_reads(tmp_path) == ['fanout/x.py:2: X = os.environ.get("KIBITZ_X")']


def test_the_slow_client_bound_comes_from_the_config() -> None:
    from kibitz.server.fanout.connection import MAX_BEHIND_S

    assert NodeConfig().slow_client_s == MAX_BEHIND_S
    config = from_sources({}, {"KIBITZ_SLOW_CLIENT_S": "2.5"})
    assert config.slow_client_s == 2.5
