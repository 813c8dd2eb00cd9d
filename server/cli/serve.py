"""``kibitz serve``: the game server, with its own Redis and workers by default."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from aiohttp import web

from kibitz.server.appkeys import LIMITS_KEY, LISTENING_ORIGINS_KEY, SUPERVISOR_KEY
from kibitz.server.archive.database import ArchiveUnavailable, display_url, sqlite_url
from kibitz.server.config import ConfigError, NodeConfig, describe, from_sources
from kibitz.server.gateway.edge import FD_RESERVE, SOCKETS_OVER_CONNECTIONS, Edge
from kibitz.server.gateway.limits import listening_origins, parse_origin
from kibitz.server.loops.local_workers import Lifeline, LocalWorkers, stop_stale_workers
from kibitz.server.node import build_app
from kibitz.server.services.limits import Limits
from kibitz.shared.bus.connect import ClusterURL, cluster_url, is_cluster_url
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.workers.engines import parse_engine_specs

#: The local workers' keeper, as the supervisor names it.
LOCAL_WORKERS_LOOP = "local-workers"

log = logging.getLogger("kibitz.serve")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kibitz serve``'s flags: each sets the NodeConfig field of its ``dest`` (a flag not
    given leaves the field to its variable, then to its default: server/config.py)."""
    parser = subparsers.add_parser(
        "serve",
        help="run the game server",
        description="Run the game server. With no Redis URL it starts a private Redis "
        "(persistent, in --data-dir) and local AI workers.",
    )
    d = NodeConfig()
    parser.add_argument("--host", dest="host", default=None, help=f"(default: {d.host})")
    parser.add_argument("--port", dest="port", type=int, default=None, help="0 picks a free port")
    parser.add_argument(
        "--redis",
        dest="redis_url",
        default=None,
        help="Redis URL of a shared store: redis://, rediss://, unix://, or a Redis Cluster's "
        "redis+cluster://[:PASSWORD@]HOST:PORT,HOST:PORT[?groups=N] (default: "
        "$KIBITZ_REDIS_URL, else a private Redis)",
    )
    parser.add_argument(
        "--redis-cluster",
        dest="redis_cluster",
        nargs="+",
        default=None,
        metavar="NODE",
        help="a shared Redis Cluster instead of --redis: some of its nodes, as HOST:PORT or "
        "redis://[:PASSWORD@]HOST:PORT (any will do: the rest are asked for); the same as "
        "--redis redis+cluster://...",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local AI worker processes (default: 2 with the private Redis, 0 with --redis)",
    )
    parser.add_argument(
        "--engine",
        dest="engines",
        action="append",
        default=[],
        metavar="GAME=COMMAND",
        help="the local workers serve GAME's jobs with this UCI engine, as `kibitz worker "
        "--engine` (chess=/usr/games/stockfish; repeatable)",
    )
    parser.add_argument(
        "--data-dir",
        dest="data_dir",
        type=Path,
        default=None,
        help="where the private Redis and the SQLite game archive keep their data "
        f"(default: $KIBITZ_DATA_DIR, else {d.data_dir})",
    )
    parser.add_argument(
        "--database",
        dest="database_url",
        default=None,
        metavar="URL",
        help="database for finished games, e.g. postgresql://user@host/kibitz (default: "
        "$KIBITZ_DATABASE_URL, else a SQLite file games.sqlite3 in --data-dir)",
    )
    lifetimes = parser.add_argument_group(
        "room lifetimes", "how long rooms stay in Redis (seconds); finished games stay in "
        "the database"
    )  # fmt: skip
    for flag, field, text in (  # fmt: skip
        ("--finished-ttl", "finished_ttl_s", "a finished game, once archived"),
        ("--waiting-ttl", "waiting_ttl_s", "a room nobody joins"),
        (
            "--idle-game-limit",
            "idle_game_limit_s",
            "an untimed game with no move is ended as abandoned",
        ),
        (
            "--unstarted-ttl",
            "unstarted_ttl_s",
            "an untimed game nobody has moved in is aborted (not archived) after this "
            "long without a change",
        ),
        (
            "--abandon-after",
            "abandon_after_s",
            "an untimed game both of whose players have been gone this long is ended as abandoned",
        ),
        (
            "--abandon-ai-after",
            "abandon_ai_after_s",
            "the same for an untimed game against the AI whose player has been gone",
        ),
    ):
        lifetimes.add_argument(
            flag, dest=field, type=float, default=None,
            help=f"{text} (default: {getattr(d, field)})",
        )  # fmt: skip
    limits = parser.add_argument_group(
        "limits", "what one client address may use, counted across all nodes in Redis"
    )
    limits.add_argument(
        "--max-connections-per-address",
        type=int,
        default=None,
        help=f"open WebSockets per client address (default: {d.max_connections_per_address})",
    )
    limits.add_argument(
        "--max-creates-per-minute",
        type=int,
        default=None,
        help=f"rooms created per client address per minute (default: {d.max_creates_per_minute})",
    )
    limits.add_argument(
        "--max-ai-games-per-address",
        type=int,
        default=None,
        help="games against the AI one person (an account, or a guest's address) may be "
        f"playing (default: {d.max_ai_games_per_address})",
    )
    limits.add_argument(
        "--ai-game-grace",
        dest="ai_game_grace_s",
        type=float,
        default=None,
        help="seconds after which a game against the AI its player has left stops counting "
        f"toward that (default: {d.ai_game_grace_s:g})",
    )
    limits.add_argument(
        "--allow-origin",
        dest="allow_origins",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a page origin (https://games.example) allowed to open WebSockets besides "
        "our own; repeatable; '*' allows any (default: same origin only)",
    )
    limits.add_argument(
        "--trusted-proxy",
        dest="trusted_proxies",
        action="append",
        default=[],
        metavar="ADDRESS",
        help="a load balancer's address whose X-Forwarded-For is believed; repeatable",
    )
    limits.add_argument(
        "--public-origin",
        dest="public_origins",
        action="append",
        default=[],
        metavar="URL",
        help="the site's own origin as browsers see it (https://games.example); "
        "repeatable; also $KIBITZ_PUBLIC_ORIGIN, comma-separated (default: none: only "
        "pages of this node's own address and port on loopback may open WebSockets)",
    )
    limits.add_argument(
        "--max-sockets-per-address",
        type=int,
        default=None,
        metavar="N",
        help="open TCP connections per client address on this node, closed as they are "
        "accepted past it; a --trusted-proxy is exempt; 0: no cap (default: "
        f"--max-connections-per-address + {SOCKETS_OVER_CONNECTIONS}; also "
        "$KIBITZ_MAX_SOCKETS_PER_ADDRESS)",
    )
    limits.add_argument(
        "--head-timeout",
        dest="head_timeout_s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="a request head (the first of a connection, or the next one after a "
        f"kept-alive request) must arrive within this long (default: {d.head_timeout_s}; "
        "also $KIBITZ_HEAD_TIMEOUT)",
    )
    parser.add_argument(
        "--redis-pool",
        type=int,
        default=None,
        help=f"Redis connections per node for commands; more requests wait (default: "
        f"{d.redis_pool})",
    )
    parser.add_argument(
        "--ws-compression",
        action="store_true",
        default=False,
        help="offer per-message deflate on WebSockets: fewer bytes on slow links, but more "
        "CPU and memory per connection (default: off; also $KIBITZ_WS_COMPRESSION=1)",
    )
    parser.add_argument(
        "--first-move-timeout",
        dest="first_move_timeout_s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="in timed games, how long each side has for its first move before the game "
        f"is aborted (default: {d.first_move_timeout_s}; also $KIBITZ_FIRST_MOVE_TIMEOUT)",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration (flags, environment and defaults; one "
        "'name = value  # doc (where set; bounds)' line per setting, secrets masked) and "
        "exit without starting anything",
    )
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> NodeConfig:
    """The node's one configuration: the flags given, else their variables, else the
    defaults (server/config.py). Raises ConfigError naming the flag or variable."""
    flags = dict(vars(args))
    nodes = flags.pop("redis_cluster", None)
    if nodes:
        if flags.get("redis_url"):
            raise ConfigError("--redis and --redis-cluster: name the shared Redis once")
        try:
            flags["redis_url"] = cluster_url(nodes)
        except ValueError as exc:
            raise ConfigError(f"--redis-cluster: {exc}") from None
    config = from_sources(flags, os.environ)
    check_redis_url(config.redis_url, "--redis-cluster" if nodes else None)
    return config


def check_redis_url(url: str | None, source: str | None = None) -> None:
    """Refuse a Redis Cluster URL that does not parse (ConfigError), before anything starts."""
    if url and is_cluster_url(url):
        try:
            ClusterURL.parse(url)
        except ValueError as exc:
            raise ConfigError(f"{source or '--redis (or $KIBITZ_REDIS_URL)'}: {exc}") from None


def limits_of(config: NodeConfig) -> Limits:
    """The per-address limits and origins; ConfigError for an origin that is not one."""
    allowed = _origins(config.allow_origins, "--allow-origin")
    public = _origins(config.public_origins, "--public-origin")
    if "*" in public:
        raise ConfigError("--public-origin names one origin, not '*'")
    return Limits(
        connections_per_address=config.max_connections_per_address,
        creates_per_minute=config.max_creates_per_minute,
        ai_games_per_address=config.max_ai_games_per_address,
        allowed_origins=allowed,
        trusted_proxies=frozenset(config.trusted_proxies),
        public_origins=public,
    )


def _origins(texts: tuple[str, ...], flag: str) -> frozenset[str]:
    try:
        return frozenset(parse_origin(text) for text in texts)
    except ValueError as exc:
        raise ConfigError(f"{flag} (or its variable): {exc}") from None


def max_sockets(config: NodeConfig) -> int:
    """max_sockets_per_address, or its default from max_connections_per_address."""
    if config.max_sockets_per_address < 0:
        return config.max_connections_per_address + SOCKETS_OVER_CONNECTIONS
    return config.max_sockets_per_address


def file_budget(sockets_per_address: int) -> int:
    """The open files a node should be allowed: FD_RESERVE (server/gateway/edge.py: the node never
    holds more client sockets than its limit less that) plus room for four addresses at
    their socket cap."""
    return FD_RESERVE + 4 * sockets_per_address


def raise_file_limit(wanted: int) -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE toward ``wanted`` (at most the hard limit); the
    (soft, hard) limits in force after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return soft, hard


def check_file_limit(sockets_per_address: int) -> None:
    """Raise the open-files limit as far as allowed, and warn when it stays below the
    budget for the configured caps (docs/operations.md, File descriptors)."""
    wanted = file_budget(sockets_per_address if sockets_per_address > 0 else 1024)
    soft, hard = raise_file_limit(wanted)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        log.warning(
            "open files limited to %d (hard limit %d); with --max-sockets-per-address %d "
            "a node wants %d (256 + 4 x the cap): raise LimitNOFILE / ulimit -n, or a few "
            "addresses can use up every descriptor",
            soft, hard, sockets_per_address, wanted,
        )  # fmt: skip


def database_url(config: NodeConfig) -> str:
    """The finished-games database: database_url, else SQLite in the data directory
    (also with redis_url: each machine's nodes then share that file, and a cluster of
    machines wants PostgreSQL)."""
    if config.database_url:
        return config.database_url
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return sqlite_url(config.data_dir / "games.sqlite3")


def run(args: argparse.Namespace) -> int:
    """``kibitz serve``: the config first (a bad value: exit 2, nothing started), then
    --print-config's answer, or the node."""
    try:
        config = config_from_args(args)
        limits = limits_of(config)
        parse_engine_specs(list(config.engines))  # refused here, not by every worker
    except ValueError as exc:  # ConfigError included
        print(f"kibitz serve: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        sys.stdout.write(describe(config))
        return 0
    return serve(config, limits)


def serve(config: NodeConfig, limits: Limits) -> int:
    """Run the node of ``config`` until SIGINT or SIGTERM."""
    logging.basicConfig(
        level=config.log_level, format="%(asctime)s serve %(levelname)s %(name)s %(message)s"
    )
    # Whatever the server writes (the SQLite archive and its journal, the private Redis's
    # files) holds players' games and token hashes: readable by us alone.
    os.umask(0o077)
    check_file_limit(max_sockets(config))
    archive_url = database_url(config)
    # Local workers look for endgame tables (``kibitz tables``) in the same data directory.
    os.environ["KIBITZ_DATA_DIR"] = str(config.data_dir)
    # Workers that a crashed node left on this directory are stopped first, as a stale
    # Redis is by EmbeddedRedis.start (server/loops/local_workers.py).
    stop_stale_workers(config.data_dir / "workers")
    embedded: EmbeddedRedis | None = None
    redis_url = config.redis_url
    if not redis_url:
        embedded = EmbeddedRedis(config.data_dir / "redis").start()
        redis_url = embedded.url
        log.info("private Redis on %s (data in %s)", embedded.display_url, embedded.data_dir)
    try:
        app = build_app(config, redis_url, archive_url, limits)
        with asyncio.Runner(loop_factory=event_loop_factory(config.event_loop)) as runner:
            return runner.run(_serve(app, config, redis_url, embedded is not None))
    except ArchiveUnavailable as exc:
        log.error("cannot open the game archive %s: %s", display_url(archive_url), exc)
        return 1
    finally:
        if embedded is not None:
            embedded.stop()


def start_worker(
    redis_url: str, engines: list[str] | None = None, lifeline: Lifeline | None = None
) -> subprocess.Popen[bytes]:
    """A local worker process. The URL (it may hold a password) goes through the
    environment, which other users cannot read, not the command line, which ps shows.
    ``engines`` are ``GAME=COMMAND`` specs passed on as its ``--engine`` options; with a
    ``lifeline`` the worker stops when this node dies (server/loops/local_workers.py)."""
    options = [arg for spec in engines or [] for arg in ("--engine", spec)]
    return subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "worker", *options],
        env={**os.environ, "KIBITZ_REDIS_URL": redis_url, **(lifeline.env() if lifeline else {})},
        pass_fds=(lifeline.read_fd,) if lifeline else (),
    )


def event_loop_factory(name: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The node's event loop: uvloop's (libuv), which takes about 7% less of the node's
    CPU per move than the standard library's (docs/performance.md); the standard
    library's when ``name`` (the config's ``event_loop``; None: ``KIBITZ_EVENT_LOOP``) is
    ``asyncio``, or where uvloop is not installed."""
    if (name or os.environ.get("KIBITZ_EVENT_LOOP", "uvloop")) == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def freeze_startup_heap() -> int:
    """Keep what start-up made (modules, the app, its pools: it lives as long as the
    process) out of the garbage collector's full passes, which then walk only what
    clients and games make; returns how many objects that is. With 1,000 connections on
    a node the longest full pass fell from about 110 ms to about 40 ms (docs/performance.md,
    Spectators)."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


async def _serve(
    app: web.Application, config: NodeConfig, redis_url: str, private_redis: bool
) -> int:
    # aiohttp's keep-alive timeout bounds the wait for each later request head on a
    # kept-alive connection as the edge's head timeout bounds the first (server/gateway/edge.py).
    runner = web.AppRunner(app, handle_signals=False, keepalive_timeout=config.head_timeout_s)
    await runner.setup()
    assert runner.server is not None
    # WebSockets are served by the edge, the rest by aiohttp (server/gateway/edge.py).
    edge = Edge(app, runner.server, max_sockets(config), config.head_timeout_s)
    loop = asyncio.get_running_loop()
    host = config.host
    listener = await loop.create_server(edge, host, config.port, backlog=config.listen_backlog)
    edge.start()
    bound = listener.sockets[0].getsockname()[1] if listener.sockets else config.port
    own: set[str] = app[LISTENING_ORIGINS_KEY]
    own.update(listening_origins(host, bound))
    if not app[LIMITS_KEY].public_origins and host not in ("127.0.0.1", "::1", "localhost"):
        log.warning(
            "no --public-origin: browsers may open WebSockets only from pages of %s; name "
            "the site's origin (https://games.example) with --public-origin",
            ", ".join(sorted(own)),
        )
    freeze_startup_heap()
    display_host = f"[{host}]" if ":" in host else host
    print(f"kibitz listening on http://{display_host}:{bound}", flush=True)

    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    engines = list(config.engines)
    workers = LocalWorkers(
        lambda line: start_worker(redis_url, engines, line), config.data_dir / "workers"
    )
    n_workers = config.workers if config.workers is not None else (2 if private_redis else 0)
    workers.spawn(n_workers)
    supervisor = app[SUPERVISOR_KEY]
    supervisor.start(LOCAL_WORKERS_LOOP, workers.supervise)
    try:
        await stop.wait()
    finally:
        await supervisor.stop_loop(LOCAL_WORKERS_LOOP)
        workers.terminate()  # each finishes its search and leaves meanwhile
        # Stop accepting, let the requests under way finish, tell every client to
        # reconnect (1001), count them out, then close Redis (Hub.drain, Edge.shutdown).
        listener.close()
        await edge.shutdown()
        await runner.cleanup()
        workers.wait(timeout=10)
    return 0


LISTENING = re.compile(r"kibitz listening on (http://\S+)")


def spawn_server(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 30.0
) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start ``kibitz serve ARGS`` as a child process; (process, its URL, output so far).

    For tests and benchmarks: it waits for the "listening" line, and the caller keeps
    reading (or discarding) the process's output.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "KIBITZ_LOG": "WARNING", **(env or {})},
    )  # fmt: skip
    assert process.stdout is not None
    output: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        match = LISTENING.search(line)
        if match:
            return process, match.group(1), output
    process.kill()
    process.wait()
    raise RuntimeError("kibitz serve did not start:\n" + "".join(output))


@contextlib.contextmanager
def served(args: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """``kibitz serve ARGS`` running for the ``with`` block, its output discarded; its URL.
    For benchmarks: the server is stopped (SIGTERM) when the block ends."""
    process, url, _ = spawn_server(args, env)
    threading.Thread(target=lambda: [None for _ in process.stdout or []], daemon=True).start()
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=15)
