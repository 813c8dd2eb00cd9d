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

from kibitz.server.app import REDIS_POOL_SIZE, create_app
from kibitz.server.appkeys import LIMITS_KEY, LISTENING_ORIGINS_KEY
from kibitz.server.archive.database import ArchiveUnavailable, display_url, sqlite_url
from kibitz.server.domain.clocks import FIRST_MOVE_MS
from kibitz.server.gateway.edge import FD_RESERVE, HEAD_TIMEOUT_S, SOCKETS_OVER_CONNECTIONS, Edge
from kibitz.server.gateway.limits import Limits, listening_origins, parse_origin
from kibitz.server.loops.archiver import Lifetimes
from kibitz.server.loops.local_workers import Lifeline, LocalWorkers, stop_stale_workers
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.workers.engines import parse_engine_specs

#: Connections waiting to be accepted, at most (aiohttp's own default).
LISTEN_BACKLOG = 128

log = logging.getLogger("kibitz.serve")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kibitz"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the game server",
        description="Run the game server. With no Redis URL it starts a private Redis "
        "(persistent, in --data-dir) and local AI workers.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument(
        "--redis",
        default=os.environ.get("KIBITZ_REDIS_URL"),
        help="Redis URL of a shared store (default: $KIBITZ_REDIS_URL, else a private Redis)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="local AI worker processes (default: 2 with the private Redis, 0 with --redis)",
    )
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="GAME=COMMAND",
        help="the local workers serve GAME's jobs with this UCI engine, as `kibitz worker "
        "--engine` (chess=/usr/games/stockfish; repeatable)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(os.environ["KIBITZ_DATA_DIR"])
        if os.environ.get("KIBITZ_DATA_DIR")
        else default_data_dir(),
        help="where the private Redis and the SQLite game archive keep their data "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--database",
        default=os.environ.get("KIBITZ_DATABASE_URL") or None,
        metavar="URL",
        help="database for finished games, e.g. postgresql://user@host/kibitz (default: "
        "$KIBITZ_DATABASE_URL, else a SQLite file games.sqlite3 in --data-dir)",
    )
    lifetimes = parser.add_argument_group(
        "room lifetimes", "how long rooms stay in Redis (seconds); finished games stay in "
        "the database"
    )  # fmt: skip
    defaults_ms = Lifetimes()
    for flag, env, field, text in (  # fmt: skip
        (
            "--finished-ttl",
            "KIBITZ_FINISHED_TTL",
            "finished_ttl_ms",
            "a finished game, once archived (default: %(default)s)",
        ),
        (
            "--waiting-ttl",
            "KIBITZ_WAITING_TTL",
            "waiting_ttl_ms",
            "a room nobody joins (default: %(default)s)",
        ),
        (
            "--idle-game-limit",
            "KIBITZ_IDLE_GAME_LIMIT",
            "idle_game_limit_ms",
            "an untimed game with no move is ended as abandoned (default: %(default)s)",
        ),
        (
            "--unstarted-ttl",
            "KIBITZ_UNSTARTED_TTL",
            "unstarted_ttl_ms",
            "an untimed game nobody has moved in is aborted (not archived) after this "
            "long without a change (default: %(default)s)",
        ),
        (
            "--abandon-after",
            "KIBITZ_ABANDON_AFTER",
            "abandon_after_ms",
            "an untimed game both of whose players have been gone this long is ended as "
            "abandoned (default: %(default)s)",
        ),
        (
            "--abandon-ai-after",
            "KIBITZ_ABANDON_AI_AFTER",
            "abandon_ai_after_ms",
            "the same for an untimed game against the AI whose player has been gone "
            "(default: %(default)s)",
        ),
    ):
        lifetimes.add_argument(
            flag,
            type=float,
            help=text,
            default=_env_float(env, getattr(defaults_ms, field) / 1000),
        )
    limits = parser.add_argument_group(
        "limits", "what one client address may use, counted across all nodes in Redis"
    )
    defaults = Limits()
    limits.add_argument(
        "--max-connections-per-address",
        type=int,
        default=_env_int("KIBITZ_MAX_CONNECTIONS_PER_ADDRESS", defaults.connections_per_address),
        help="open WebSockets per client address (default: %(default)s)",
    )
    limits.add_argument(
        "--max-creates-per-minute",
        type=int,
        default=_env_int("KIBITZ_MAX_CREATES_PER_MINUTE", defaults.creates_per_minute),
        help="rooms created per client address per minute (default: %(default)s)",
    )
    limits.add_argument(
        "--max-ai-games-per-address",
        type=int,
        default=_env_int("KIBITZ_MAX_AI_GAMES_PER_ADDRESS", defaults.ai_games_per_address),
        help="unfinished games against the AI per client address (default: %(default)s)",
    )
    limits.add_argument(
        "--allow-origin",
        action="append",
        default=_env_list("KIBITZ_ALLOW_ORIGINS"),
        metavar="ORIGIN",
        help="a page origin (https://games.example) allowed to open WebSockets besides "
        "our own; repeatable; '*' allows any (default: same origin only)",
    )
    limits.add_argument(
        "--trusted-proxy",
        action="append",
        default=_env_list("KIBITZ_TRUSTED_PROXIES"),
        metavar="ADDRESS",
        help="a load balancer's address whose X-Forwarded-For is believed; repeatable",
    )
    limits.add_argument(
        "--public-origin",
        action="append",
        default=_env_list("KIBITZ_PUBLIC_ORIGIN"),
        metavar="URL",
        help="the site's own origin as browsers see it (https://games.example); "
        "repeatable; also $KIBITZ_PUBLIC_ORIGIN, comma-separated (default: none: only "
        "pages of this node's own address and port on loopback may open WebSockets)",
    )
    limits.add_argument(
        "--max-sockets-per-address",
        type=int,
        default=_env_int("KIBITZ_MAX_SOCKETS_PER_ADDRESS", -1),
        metavar="N",
        help="open TCP connections per client address on this node, closed as they are "
        "accepted past it; a --trusted-proxy is exempt; 0: no cap (default: "
        f"--max-connections-per-address + {SOCKETS_OVER_CONNECTIONS}; also "
        "$KIBITZ_MAX_SOCKETS_PER_ADDRESS)",
    )
    limits.add_argument(
        "--head-timeout",
        type=float,
        default=_env_float("KIBITZ_HEAD_TIMEOUT", HEAD_TIMEOUT_S),
        metavar="SECONDS",
        help="a request head (the first of a connection, or the next one after a "
        "kept-alive request) must arrive within this long (default: %(default)s; also "
        "$KIBITZ_HEAD_TIMEOUT)",
    )
    parser.add_argument(
        "--redis-pool",
        type=int,
        default=_env_int("KIBITZ_REDIS_POOL", REDIS_POOL_SIZE),
        help="Redis connections per node for commands; more requests wait (default: %(default)s)",
    )
    parser.add_argument(
        "--ws-compression",
        action="store_true",
        default=os.environ.get("KIBITZ_WS_COMPRESSION") == "1",
        help="offer per-message deflate on WebSockets: fewer bytes on slow links, but more "
        "CPU and memory per connection (default: off; also $KIBITZ_WS_COMPRESSION=1)",
    )
    parser.add_argument(
        "--first-move-timeout",
        type=float,
        default=_env_float("KIBITZ_FIRST_MOVE_TIMEOUT", FIRST_MOVE_MS / 1000),
        metavar="SECONDS",
        help="in timed games, how long each side has for its first move before the game "
        "is aborted (default: %(default)s; also $KIBITZ_FIRST_MOVE_TIMEOUT)",
    )
    parser.set_defaults(func=run)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def limits_from_args(args: argparse.Namespace) -> Limits:
    try:
        allowed = frozenset(parse_origin(origin) for origin in args.allow_origin)
        public = frozenset(parse_origin(origin) for origin in args.public_origin)
    except ValueError as exc:
        raise SystemExit(f"kibitz serve: {exc}") from None
    if "*" in public:
        raise SystemExit("kibitz serve: --public-origin names one origin, not '*'")
    if args.head_timeout <= 0:
        raise SystemExit("kibitz serve: --head-timeout must be positive")
    return Limits(
        connections_per_address=args.max_connections_per_address,
        creates_per_minute=args.max_creates_per_minute,
        ai_games_per_address=args.max_ai_games_per_address,
        allowed_origins=allowed,
        trusted_proxies=frozenset(args.trusted_proxy),
        public_origins=public,
    )


def max_sockets(args: argparse.Namespace) -> int:
    """--max-sockets-per-address, or its default from --max-connections-per-address."""
    if args.max_sockets_per_address < 0:
        return int(args.max_connections_per_address) + SOCKETS_OVER_CONNECTIONS
    return int(args.max_sockets_per_address)


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


def lifetimes_from_args(args: argparse.Namespace) -> Lifetimes:
    flags = ("finished_ttl", "waiting_ttl", "idle_game_limit", "unstarted_ttl")
    for flag in (*flags, "abandon_after", "abandon_ai_after"):
        if getattr(args, flag) <= 0:
            raise SystemExit(f"--{flag.replace('_', '-')} must be positive")
    return Lifetimes(
        finished_ttl_ms=int(args.finished_ttl * 1000),
        waiting_ttl_ms=int(args.waiting_ttl * 1000),
        idle_game_limit_ms=int(args.idle_game_limit * 1000),
        unstarted_ttl_ms=int(args.unstarted_ttl * 1000),
        abandon_after_ms=int(args.abandon_after * 1000),
        abandon_ai_after_ms=int(args.abandon_ai_after * 1000),
    )


def database_url(args: argparse.Namespace) -> str:
    """The finished-games database: --database, else SQLite in the data directory (also
    with --redis: each machine's nodes then share that file, and a cluster of machines
    wants PostgreSQL)."""
    if args.database:
        return str(args.database)
    args.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return sqlite_url(args.data_dir / "games.sqlite3")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=os.environ.get("KIBITZ_LOG", "INFO"),
        format="%(asctime)s serve %(levelname)s %(name)s %(message)s",
    )
    # Whatever the server writes (the SQLite archive and its journal, the private Redis's
    # files) holds players' games and token hashes: readable by us alone.
    os.umask(0o077)
    lifetimes = lifetimes_from_args(args)
    limits = limits_from_args(args)
    check_file_limit(max_sockets(args))
    try:
        parse_engine_specs(args.engine)  # refused here, not by every worker it starts
    except ValueError as exc:
        raise SystemExit(f"kibitz serve: {exc}") from None
    archive_url = database_url(args)
    # Local workers look for endgame tables (``kibitz tables``) in the same data directory.
    os.environ["KIBITZ_DATA_DIR"] = str(args.data_dir)
    # Workers that a crashed node left on this directory are stopped first, as a stale
    # Redis is by EmbeddedRedis.start (server/loops/local_workers.py).
    stop_stale_workers(args.data_dir / "workers")
    embedded: EmbeddedRedis | None = None
    redis_url = args.redis
    if not redis_url:
        embedded = EmbeddedRedis(args.data_dir / "redis").start()
        redis_url = embedded.url
        log.info("private Redis on %s (data in %s)", embedded.display_url, embedded.data_dir)
    n_workers = args.workers if args.workers is not None else (2 if embedded else 0)
    try:
        app = create_app(
            redis_url,
            limits=limits,
            redis_pool=args.redis_pool,
            database_url=archive_url,
            lifetimes=lifetimes,
            ws_compression=args.ws_compression,
            first_move_ms=int(args.first_move_timeout * 1000),
        )
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            return runner.run(
                _serve(
                    app,
                    args.host,
                    args.port,
                    redis_url,
                    n_workers,
                    list(args.engine),
                    sockets_per_address=max_sockets(args),
                    head_timeout=args.head_timeout,
                    workers_dir=args.data_dir / "workers",
                )  # fmt: skip
            )
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


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The node's event loop: uvloop's (libuv), which takes about 7% less of the node's
    CPU per move than the standard library's (docs/performance.md); the standard
    library's with ``KIBITZ_EVENT_LOOP=asyncio``, or where uvloop is not installed."""
    if os.environ.get("KIBITZ_EVENT_LOOP", "uvloop") == "asyncio":
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
    app: web.Application,
    host: str,
    port: int,
    redis_url: str,
    n_workers: int,
    engines: list[str] | None = None,
    sockets_per_address: int | None = None,
    head_timeout: float = HEAD_TIMEOUT_S,
    workers_dir: Path | None = None,
) -> int:
    # aiohttp's keep-alive timeout bounds the wait for each later request head on a
    # kept-alive connection as the edge's head timeout bounds the first (server/gateway/edge.py).
    runner = web.AppRunner(app, handle_signals=False, keepalive_timeout=head_timeout)
    await runner.setup()
    assert runner.server is not None
    # WebSockets are served by the edge, the rest by aiohttp (server/gateway/edge.py).
    edge = Edge(app, runner.server, sockets_per_address, head_timeout)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(edge, host, port, backlog=LISTEN_BACKLOG)
    edge.start()
    bound = listener.sockets[0].getsockname()[1] if listener.sockets else port
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

    workers = LocalWorkers(lambda line: start_worker(redis_url, engines, line), workers_dir)
    workers.spawn(n_workers)
    supervisor = asyncio.create_task(workers.supervise())
    try:
        await stop.wait()
    finally:
        supervisor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await supervisor
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
