"""One node's configuration: :class:`NodeConfig`, built once from flags and environment.

It decides, for every setting of a node, its name, its default, where an operator sets it
(a ``kibitz serve`` flag, a ``KIBITZ_*`` variable, or neither: an operator bound set only
in code) and the values it may take. A flag wins over its variable, a variable over the
default. A bad value is refused with :class:`ConfigError`, which names the flag or the
variable it came from (``kibitz serve`` prints it and exits 2, as argparse does).

``kibitz serve --print-config`` prints :func:`describe`: one ``name = value  # doc`` line
per field. Secrets (passwords in URLs) are masked.

This module imports nothing of the server, so every layer may read the config.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The levels ``KIBITZ_LOG`` may name.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
EVENT_LOOPS = ("uvloop", "asyncio")
DAY_S = 24 * 60 * 60.0
YEAR_S = 366 * DAY_S
#: Origins, proxies or engines one list may hold.
MAX_LIST = 64


class ConfigError(ValueError):
    """A setting's value is refused; the message names where it came from."""


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kibitz"


def setting(
    default: Any,
    doc: str,
    flag: str | None = None,
    env: str | None = None,
    low: float | None = None,
    high: float | None = None,
    choices: tuple[str, ...] = (),
    secret: bool = False,
) -> Any:
    """A field of :class:`NodeConfig` with its doc, its sources and its bounds."""
    meta: dict[str, Any] = {"doc": doc, "flag": flag, "env": env, "low": low, "high": high}
    meta |= {"choices": choices, "secret": secret}
    if isinstance(default, list | tuple):
        return field(default=tuple(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class NodeConfig:
    """Everything a node is told; the fields and their bounds (see :func:`describe`)."""

    # -- where it listens and what it uses
    host: str = setting("127.0.0.1", "the address to listen on", "--host")
    port: int = setting(8000, "the TCP port; 0 picks a free one", "--port", None, 0, 65535)
    redis_url: str | None = setting(
        None, "the shared Redis, or a Redis Cluster (redis+cluster://HOST:PORT,...[?groups=N],"
        " also --redis-cluster); none: a private Redis in data_dir", "--redis",
        "KIBITZ_REDIS_URL", secret=True,
    )  # fmt: skip
    workers: int | None = setting(
        None, "local AI worker processes; none: 2 with the private Redis, 0 with redis_url",
        "--workers", None, 0, 256,
    )  # fmt: skip
    engines: tuple[str, ...] = setting(
        (), "GAME=COMMAND UCI engines for the local workers", "--engine", None, 0, MAX_LIST
    )
    data_dir: Path = field(
        default_factory=default_data_dir,
        metadata={"doc": "the private Redis's and the SQLite archive's folder",
                  "flag": "--data-dir", "env": "KIBITZ_DATA_DIR", "low": None, "high": None,
                  "choices": (), "secret": False},
    )  # fmt: skip
    database_url: str | None = setting(
        None, "the finished-games database; none: data_dir/games.sqlite3", "--database",
        "KIBITZ_DATABASE_URL", secret=True,
    )  # fmt: skip
    # -- room lifetimes (seconds)
    finished_ttl_s: float = setting(
        3600.0, "a finished game stays in Redis this long once archived", "--finished-ttl",
        "KIBITZ_FINISHED_TTL", 0, YEAR_S,
    )  # fmt: skip
    waiting_ttl_s: float = setting(
        1800.0, "a room nobody joins is forgotten after this long", "--waiting-ttl",
        "KIBITZ_WAITING_TTL", 0, YEAR_S,
    )  # fmt: skip
    idle_game_limit_s: float = setting(
        3 * DAY_S, "an untimed game with no move this long is ended as abandoned",
        "--idle-game-limit", "KIBITZ_IDLE_GAME_LIMIT", 0, YEAR_S,
    )  # fmt: skip
    unstarted_ttl_s: float = setting(
        600.0, "an untimed game nobody has moved in is aborted after this long",
        "--unstarted-ttl", "KIBITZ_UNSTARTED_TTL", 0, YEAR_S,
    )  # fmt: skip
    abandon_after_s: float = setting(
        1800.0, "an untimed game both players left this long is ended as abandoned",
        "--abandon-after", "KIBITZ_ABANDON_AFTER", 0, YEAR_S,
    )  # fmt: skip
    abandon_ai_after_s: float = setting(
        DAY_S, "the same for an untimed game against the AI", "--abandon-ai-after",
        "KIBITZ_ABANDON_AI_AFTER", 0, YEAR_S,
    )  # fmt: skip
    first_move_timeout_s: float = setting(
        30.0, "in timed games, each side's time for its first move before the abort",
        "--first-move-timeout", "KIBITZ_FIRST_MOVE_TIMEOUT", 0, DAY_S,
    )  # fmt: skip
    claim_after_ms: int | None = setting(
        None, "a player gone this long may be claimed against; none: 30 s timed, 120 s "
        "untimed (for tests)", None, "KIBITZ_CLAIM_AFTER_MS", 0, DAY_S * 1000,
    )  # fmt: skip
    archive_delay_ms: int = setting(
        0, "fault injection: the archiver waits this long between read and write (tests)",
        None, "KIBITZ_ARCHIVE_DELAY_MS", 0, 600_000,
    )  # fmt: skip
    archive_release_delay_ms: int = setting(
        0, "fault injection: the archiver waits this long between the database write and "
        "the acknowledgement (tests)", None, "KIBITZ_ARCHIVE_RELEASE_DELAY_MS", 0, 600_000,
    )  # fmt: skip
    # -- per client address, counted across all nodes
    max_connections_per_address: int = setting(
        200, "open WebSockets per client address", "--max-connections-per-address",
        "KIBITZ_MAX_CONNECTIONS_PER_ADDRESS", 0, 1_000_000,
    )  # fmt: skip
    max_creates_per_minute: int = setting(
        60, "rooms created per client address per minute", "--max-creates-per-minute",
        "KIBITZ_MAX_CREATES_PER_MINUTE", 0, 1_000_000,
    )  # fmt: skip
    max_ai_games_per_address: int = setting(
        8, "games against the AI one person (an account, or a guest's address) may be "
        "playing", "--max-ai-games-per-address", "KIBITZ_MAX_AI_GAMES_PER_ADDRESS", 0,
        1_000_000,
    )  # fmt: skip
    ai_game_grace_s: float = setting(
        600.0, "a game against the AI whose player has been gone this long stops counting "
        "toward max_ai_games_per_address", "--ai-game-grace", "KIBITZ_AI_GAME_GRACE", 0, DAY_S,
    )  # fmt: skip
    allow_origins: tuple[str, ...] = setting(
        (), "page origins allowed to open WebSockets besides our own ('*': any)",
        "--allow-origin", "KIBITZ_ALLOW_ORIGINS", 0, MAX_LIST,
    )  # fmt: skip
    trusted_proxies: tuple[str, ...] = setting(
        (), "load balancers whose X-Forwarded-For is believed", "--trusted-proxy",
        "KIBITZ_TRUSTED_PROXIES", 0, MAX_LIST,
    )  # fmt: skip
    public_origins: tuple[str, ...] = setting(
        (), "the site's own origins as browsers see them", "--public-origin",
        "KIBITZ_PUBLIC_ORIGIN", 0, MAX_LIST,
    )  # fmt: skip
    max_sockets_per_address: int = setting(
        -1, "open TCP connections per client address on this node; 0: no cap; -1: "
        "max_connections_per_address + 64", "--max-sockets-per-address",
        "KIBITZ_MAX_SOCKETS_PER_ADDRESS", -1, 1_000_000,
    )  # fmt: skip
    head_timeout_s: float = setting(
        30.0, "a request head must arrive within this long", "--head-timeout",
        "KIBITZ_HEAD_TIMEOUT", 0, 3600,
    )  # fmt: skip
    slow_client_s: float = setting(
        10.0, "a client whose frame waited this long to be written is dropped (tests)",
        None, "KIBITZ_SLOW_CLIENT_S", 0, 3600,
    )  # fmt: skip
    pool_widen_every_s: float = setting(
        5.0, "a player waiting in the quick pairing pool has their rating window widened "
        "by 50 this often (tests shorten it)", None, "KIBITZ_POOL_WIDEN_EVERY_S", 0.05, 3600,
    )  # fmt: skip
    # -- accounts (server/accounts/, shared/bus/throttle.py; docs/accounts.md)
    session_ttl_s: float = setting(
        30 * DAY_S, "a log-in session lasts this long", None, "KIBITZ_SESSION_TTL", 1, YEAR_S,
    )  # fmt: skip
    login_failures_per_account: int = setting(
        5, "failed log-ins per username per login_window_s, across all nodes", None,
        "KIBITZ_LOGIN_FAILURES_PER_ACCOUNT", 1, 1_000_000,
    )  # fmt: skip
    login_failures_per_address: int = setting(
        30, "failed log-ins per client address per login_window_s, across all nodes", None,
        "KIBITZ_LOGIN_FAILURES_PER_ADDRESS", 1, 1_000_000,
    )  # fmt: skip
    password_checks_per_address: int = setting(
        100, "passwords checked (log-ins, right or wrong, and changes of password) per "
        "client address per login_window_s, across all nodes", None,
        "KIBITZ_PASSWORD_CHECKS_PER_ADDRESS", 1, 1_000_000,
    )  # fmt: skip
    login_window_s: float = setting(
        900.0, "the window failed log-ins are counted in", None, "KIBITZ_LOGIN_WINDOW", 1,
        DAY_S,
    )  # fmt: skip
    signups_per_address_per_hour: int = setting(
        5, "accounts made per client address per hour, across all nodes", None,
        "KIBITZ_SIGNUPS_PER_ADDRESS", 1, 1_000_000,
    )  # fmt: skip
    # -- the node's own resources
    redis_pool: int = setting(
        128, "Redis connections per node for commands; more requests wait", "--redis-pool",
        "KIBITZ_REDIS_POOL", 1, 10_000,
    )  # fmt: skip
    ws_compression: bool = setting(
        False, "offer per-message deflate on WebSockets (the variable: 1)",
        "--ws-compression", "KIBITZ_WS_COMPRESSION",
    )  # fmt: skip
    event_loop: str = setting(
        "uvloop", "the event loop (asyncio: the standard library's)", None,
        "KIBITZ_EVENT_LOOP", choices=EVENT_LOOPS,
    )  # fmt: skip
    log_level: str = setting("INFO", "the log level", None, "KIBITZ_LOG", choices=LOG_LEVELS)
    # -- operator bounds (set in code only)
    rate_per_second: float = setting(
        30.0, "client messages a second a connection may send before it is paced",
        low=0, high=10_000,
    )  # fmt: skip
    rate_burst: float = setting(
        60.0, "client messages a connection may send at once", low=1, high=100_000
    )
    pace_limit_s: float = setting(
        10.0, "a connection over the rate this long without a break is refused",
        low=0, high=3600,
    )  # fmt: skip
    max_strikes: int = setting(
        20, "bad frames or refusals in a strike window that close a socket", low=1,
        high=10_000,
    )  # fmt: skip
    strike_window_s: float = setting(60.0, "the strike window", low=0, high=DAY_S)
    creates_per_connection_per_minute: int = setting(
        20, "rooms one connection may create a minute", low=0, high=10_000
    )
    resume_replay: int = setting(
        50, "most versions replayed one by one on resume; past that, a resync", low=0,
        high=10_000,
    )  # fmt: skip
    redis_timeout_s: float = setting(5.0, "a Redis command's timeout", low=0, high=600)
    redis_pool_wait_s: float = setting(
        20.0, "the longest wait for a free pooled Redis connection", low=0, high=600
    )
    health_timeout_s: float = setting(
        1.0, "/healthz answers within about this long", low=0, high=60
    )
    listen_backlog: int = setting(
        128, "connections waiting to be accepted, at most", low=1, high=65_535
    )
    loop_backoff_s: float = setting(
        0.5, "a failed node loop's first wait before its restart", low=0, high=3600
    )
    loop_backoff_cap_s: float = setting(
        30.0, "a failed node loop's longest wait before its restart", low=0, high=3600
    )
    loop_healthy_s: float = setting(
        60.0, "a node loop that ran this long without failing starts its backoff afresh",
        low=0, high=DAY_S,
    )  # fmt: skip
    loop_stop_timeout_s: float = setting(
        5.0, "on shutdown, the longest wait for each node loop to stop", low=0, high=600
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _check(f, getattr(self, f.name), f.name)

    @property
    def pace_reset_tokens(self) -> float:
        """A client is over the rate until it leaves this many messages unsent."""
        return self.rate_per_second


def _check(f: dataclasses.Field[Any], value: Any, source: str) -> None:
    """Refuse ``value`` for field ``f`` if out of its bounds; ``source`` names it."""
    meta = f.metadata
    if value is None or isinstance(value, bool | Path):
        return
    if meta["choices"] and value not in meta["choices"]:
        raise ConfigError(f"{source} must be one of {', '.join(meta['choices'])}: {value!r}")
    size = len(value) if isinstance(value, tuple) else value
    if not isinstance(size, int | float):
        return
    low, high = meta["low"], meta["high"]
    positive = low == 0 and _kind(f) == "float"  # a duration of 0 is refused
    if low is not None and (size < low or (positive and size <= 0)):
        kind = "positive" if positive else f"at least {low:g}"
        raise ConfigError(f"{source} must be {kind}: {value!r}")
    if high is not None and size > high:
        raise ConfigError(f"{source} must be at most {high:g}: {value!r}")


def _parse(f: dataclasses.Field[Any], text: str, source: str) -> Any:
    """The value ``text`` (a variable's) gives field ``f``."""
    kind = _kind(f)
    try:
        if kind == "bool":
            return text == "1"
        if kind == "tuple":
            return tuple(item.strip() for item in text.split(",") if item.strip())
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "Path":
            return Path(text)
    except ValueError:
        what = {"int": "a whole number", "float": "a number"}.get(kind, kind)
        raise ConfigError(f"{source} must be {what}: {text!r}") from None
    return text


def _kind(f: dataclasses.Field[Any]) -> str:
    """The field's value type, from its annotation (a string: annotations are postponed)."""
    text = str(f.type)
    for kind in ("bool", "tuple", "int", "float", "Path"):
        if re.match(rf"{kind}\b", text):
            return kind
    return "str"


def from_sources(flags: Mapping[str, Any], environ: Mapping[str, str]) -> NodeConfig:
    """The config from ``flags`` (field name -> value; None or absent: not given) and the
    environment. Raises :class:`ConfigError` naming the flag or variable of a bad value."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(NodeConfig):
        env = f.metadata["env"]
        if env and environ.get(env):
            values[f.name] = _parse(f, environ[env], f"${env}")
            _check(f, values[f.name], f"${env}")
        given = flags.get(f.name)
        if isinstance(given, list | tuple):  # a list flag adds to its variable's items
            given = (*values.get(f.name, ()), *given) if given else None
        if given is not None and given is not False:
            values[f.name] = given
            _check(f, given, f.metadata["flag"] or f.name)
    return NodeConfig(**values)


def _shown(f: dataclasses.Field[Any], value: Any) -> str:
    if value is not None and f.metadata["secret"]:
        return re.sub(r"//([^/@]*)@", "//***@", str(value))  # user and password masked
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return ",".join(value) if value else "(none)"
    return "(none)" if value is None else repr(value) if isinstance(value, str) else str(value)


def _where(f: dataclasses.Field[Any]) -> str:
    meta = f.metadata
    sources = [s for s in (meta["flag"], "$" + meta["env"] if meta["env"] else None) if s]
    low, high, bounds = meta["low"], meta["high"], ""
    if meta["choices"]:
        bounds = "one of " + "/".join(meta["choices"])
    elif _kind(f) == "tuple" and high is not None:
        bounds = f"at most {_number(high)} items"
    elif low == 0 and _kind(f) == "float":
        bounds = f"0 < x <= {_number(high)}"
    elif low is not None:
        bounds = f"{_number(low)} <= x <= {_number(high)}"
    return "; ".join(part for part in (", ".join(sources) or "code only", bounds) if part)


def _number(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else str(x)


def describe(config: NodeConfig) -> str:
    """``name = value  # doc (where it is set; bounds)``, one line per field."""
    lines = []
    for f in dataclasses.fields(config):
        value = _shown(f, getattr(config, f.name))
        lines.append(f"{f.name} = {value}  # {f.metadata['doc']} ({_where(f)})")
    return "\n".join(lines) + "\n"
