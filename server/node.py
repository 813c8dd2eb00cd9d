"""The composition root: one node's aiohttp application, built from its :class:`NodeConfig`.

It decides what a node is made of and in what order: every part is built once at start-up
(the archive, the Redis client, the room store and service, the per-address limiter, the
hub, chat, seeks), put under its key (server/appkeys.py), and every long-running loop is
started under the node's one supervisor (server/loops/supervisor.py), with the restart
parameters of ``RESTARTS`` where its timing matters; on shutdown the clients are drained,
the loops stopped in the reverse order, the node's heartbeat removed if every departure was
recorded, then Redis and the archive closed. The routes come from their modules
(server/http/, server/gateway/admission.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web

from kibitz.server import botapi
from kibitz.server.accounts.service import AccountService
from kibitz.server.appkeys import (
    ACCOUNTS_KEY,
    ANALYSIS_KEY,
    ARCHIVE_KEY,
    CHAT_KEY,
    CHAT_LOG_KEY,
    CONFIG_KEY,
    EDGE_HANDOVER_KEY,
    HUB_KEY,
    LIMITER_KEY,
    LIMITS_KEY,
    LISTENING_ORIGINS_KEY,
    LIVE_ROOMS_KEY,
    METRICS_KEY,
    MODERATION_KEY,
    NODE_KEY,
    RATINGS_KEY,
    REDIS_KEY,
    SEEKS_KEY,
    SERVICE_KEY,
    STATUS_KEY,
    STORE_KEY,
    SUPERVISOR_KEY,
    THROTTLE_KEY,
    WS_COMPRESSION_KEY,
)
from kibitz.server.archive.database import Archive, display_url
from kibitz.server.config import NodeConfig
from kibitz.server.fanout.hub import Hub
from kibitz.server.fanout.listener import BACKOFF_MAX_S, BACKOFF_MIN_S, PROBE_S
from kibitz.server.gateway import admission, csrf
from kibitz.server.http import (
    auth,
    games,
    metrics,
    moderation,
    players,
    rooms,
    static,
    status,
    tokens,
)
from kibitz.server.loops.archiver import Archiver, Lifetimes
from kibitz.server.loops.deadlines import DeadlineSweeper
from kibitz.server.loops.relay import OutboxSweeper
from kibitz.server.loops.results import ResultsConsumer
from kibitz.server.loops.supervisor import Backoff, Supervisor
from kibitz.server.metrics import Metrics
from kibitz.server.moderation.hooks import timeout_hook
from kibitz.server.moderation.service import Moderation
from kibitz.server.ratings.store import RatingStore
from kibitz.server.services.analysis import AnalysisCollector, AnalysisQueue
from kibitz.server.services.chat import ChatStore
from kibitz.server.services.limits import AddressLimiter, Limits
from kibitz.server.services.pool import Pool
from kibitz.server.services.room_store import RoomStore
from kibitz.server.services.rooms import RoomService
from kibitz.server.services.seeks import PUSH_INTERVAL_S, Seeks
from kibitz.shared.bus import keys
from kibitz.shared.bus.bans import BanMirror
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.connect import command_client, ping
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.fanout import listen_address
from kibitz.shared.bus.limits import AddressCounters
from kibitz.shared.bus.lobby import LiveRooms, SeekBoard
from kibitz.shared.bus.pool import PoolBoard
from kibitz.shared.bus.store import HEARTBEAT_S
from kibitz.shared.bus.throttle import Throttle
from kibitz.shared.bus.upgrade import tag_room_keys

log = logging.getLogger(__name__)

#: The largest request body a node reads (its HTTP API takes small JSON bodies).
MAX_BODY_BYTES = 64 * 1024


def lifetimes_of(config: NodeConfig) -> Lifetimes:
    """How long rooms stay in Redis, in the archiver's milliseconds."""
    return Lifetimes(
        finished_ttl_ms=int(config.finished_ttl_s * 1000),
        waiting_ttl_ms=int(config.waiting_ttl_s * 1000),
        idle_game_limit_ms=int(config.idle_game_limit_s * 1000),
        unstarted_ttl_ms=int(config.unstarted_ttl_s * 1000),
        abandon_after_ms=int(config.abandon_after_s * 1000),
        abandon_ai_after_ms=int(config.abandon_ai_after_s * 1000),
    )


#: How each loop whose timing matters is started again after a failure (the one policy
#: of server/loops/supervisor.py; the others take the config's ``loop_backoff_*``): all
#: of these talk to Redis, and must be back soon after it is.
RESTARTS: dict[str, Backoff] = {
    # Re-subscribe quickly (an attempt that fails on a frozen Redis takes 5 s, so a run
    # is healthy only past the default 60 s: the log is not told of each attempt).
    "fanout-listener": Backoff(BACKOFF_MIN_S, BACKOFF_MAX_S),
    # The listener hears a probe every PROBE_S or thinks its subscription dead.
    "fanout-probe": Backoff(PROBE_S / 2, PROBE_S),
    # A beat within 2 s of Redis answering: never past the TTL while Redis is there.
    "heartbeat": Backoff(0.2, 2.0),
    # AI moves, flags and the lobby soon after Redis is back.
    "results": Backoff(0.2, 2.0),
    "deadlines": Backoff(0.1, 1.0),
    "lobby": Backoff(PUSH_INTERVAL_S, 2.0),
    "pool": Backoff(0.5, 2.0),  # players waiting to be paired
    "event-streams": Backoff(0.5, 2.0),  # the Bot API's keep-alive lines and online beats
    # Finished games and analyses: their entries wait, pending, in Redis meanwhile.
    "archiver": Backoff(0.5, 5.0),
    "analysis": Backoff(0.5, 5.0),
    # The ban mirror: a ban made by ``kibitz admin`` reaches the node soon after.
    "bans": Backoff(0.5, 2.0),
    # Redis Cluster only: AI jobs a dead node left in a group's outbox, to the fair queue.
    "relay": Backoff(0.1, 1.0),
}


def supervisor_of(config: NodeConfig, metrics: Metrics) -> Supervisor:
    """The node's supervisor, its restarts counted in ``metrics``."""
    backoff = Backoff(config.loop_backoff_s, config.loop_backoff_cap_s, config.loop_healthy_s)
    return Supervisor(
        backoff,
        config.loop_stop_timeout_s,
        on_restart=lambda name: metrics.loop_restarts.labels(name).inc(),
    )


def build_app(
    config: NodeConfig,
    redis_url: str,
    database_url: str = "sqlite://",
    limits: Limits | None = None,
    node: str | None = None,
) -> web.Application:
    """The app of one node. ``redis_url``: the Redis it uses (``config.redis_url``, or the
    private Redis ``kibitz serve`` started); ``database_url``: where finished games go (the
    default, an in-memory SQLite, is for tests); ``limits``: the per-address limits and
    origins as parsed from the config (server/cli/serve.py; default: ``Limits()``)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[csrf.csrf_middleware])
    app[CONFIG_KEY] = config
    app[LIMITS_KEY] = limits or Limits()
    # Opaque: /healthz, /api/status and every welcome show it to anybody, and a host name
    # or process id helps only an attacker (the log maps it to both, at start-up).
    app[NODE_KEY] = node or f"node-{uuid.uuid4().hex[:12]}"
    app[LISTENING_ORIGINS_KEY] = set()  # filled once the node listens (server/cli/serve.py)
    app[STATUS_KEY] = os.urandom(16)
    app[METRICS_KEY] = Metrics()
    app[WS_COMPRESSION_KEY] = config.ws_compression
    app[SUPERVISOR_KEY] = supervisor_of(config, app[METRICS_KEY])

    async def startup(app: web.Application) -> None:
        await start_node(app, redis_url, database_url)

    app.on_startup.append(startup)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(stop_node)
    add_routes(app)
    return app


def add_routes(app: web.Application) -> None:
    """Every route of a node, the client files' catch-all last."""
    static.register_index(app)  # /
    status.register(app)  # /healthz, /api/status
    metrics.register(app)  # /metrics
    app.router.add_get("/ws", admission.websocket)
    games.register(app)  # /api/games (also the catalogue), /api/games/{id}...
    auth.register(app)  # /api/auth/... (sign-up, log-in, sessions)
    tokens.register(app)  # /api/tokens
    moderation.register(app)  # /api/players/{name}/block, /api/blocks, /api/reports, /api/mod/...
    rooms.register(app)  # /api/rooms..., /api/seeks
    players.register(app)  # /api/leaderboard/..., /api/players/{name}[/history|/rating.svg]
    botapi.register(app)  # lichess's Bot and Board API: /api/account, /api/stream/event...
    static.register_files(app)  # /static/..., and the same files at the root


async def start_node(app: web.Application, redis_url: str, database_url: str) -> None:
    """Build the node's parts, in the order each needs the one before, and start its loops."""
    config, node = app[CONFIG_KEY], app[NODE_KEY]
    log.info("node %s: process %d on %s", node, os.getpid(), socket.gethostname())
    app[ARCHIVE_KEY] = archive = await Archive.open(database_url)
    app[RATINGS_KEY] = ratings = RatingStore(archive.engine)
    archive.before_save = ratings.apply  # a rated game's change in its archive transaction
    archive.before_batch = ratings.lock_batch  # a batch's locks in one order: no deadlock
    log.info("finished games go to %s", display_url(database_url))
    app[ACCOUNTS_KEY] = AccountService(archive.engine, int(config.session_ttl_s * 1000))
    # Commands time out (a hung Redis gives errors, not hung handlers); the hub's
    # listener waits indefinitely, on a subscription of its own (server/fanout/).
    redis = command_client(
        redis_url, config.redis_pool, config.redis_timeout_s, config.redis_pool_wait_s
    )
    await ping(redis)
    lifetimes = lifetimes_of(config)
    store = RoomStore(redis, node, lifetimes.waiting_ttl_ms, lifetimes.finished_ttl_ms)
    renamed = await tag_room_keys(redis)  # rooms left by a kibitz before the tagged keys
    if renamed:
        log.info("renamed %d room keys to their tagged names (shared/bus/keys.py)", renamed)
    await store.heartbeat()
    await store.ensure_groups()
    # One room budget for every way a room is made (create here, seeks, rematches).
    limiter = AddressLimiter(AddressCounters(redis, node), app[LIMITS_KEY])
    ai_games = app[LIMITS_KEY].ai_games_per_address
    first_move_ms = int(config.first_move_timeout_s * 1000)
    service = RoomService(
        store, ai_games, first_move_ms, limiter, config.claim_after_ms,
        ai_game_grace_ms=int(config.ai_game_grace_s * 1000),
    )  # fmt: skip
    service.ratings = ratings  # signed-in seats read their ratings as they are taken
    await service.sync_clock()
    app[REDIS_KEY], app[STORE_KEY], app[SERVICE_KEY] = redis, store, service
    app[LIMITER_KEY] = limiter
    app[THROTTLE_KEY] = Throttle(redis)
    app[MODERATION_KEY] = bans = Moderation(archive.engine, BanMirror(redis))
    await bans.sync(force=True)  # the ban mirror rebuilt from the database
    service.bans = bans  # an agreed rematch re-checks both players' bans
    app[CHAT_LOG_KEY] = chat_log = ChatLog(redis)
    app[CHAT_KEY] = ChatStore(chat_log)
    app[LIVE_ROOMS_KEY] = LiveRooms(redis)
    app[ANALYSIS_KEY] = AnalysisQueue(redis)
    widen_ms = int(config.pool_widen_every_s * 1000)
    pool = Pool(PoolBoard(redis), service, node, bans, widen_ms)
    app[SEEKS_KEY] = seeks = Seeks(SeekBoard(redis), service, node, bans, pool)
    app[HUB_KEY] = hub = Hub(listen_address(redis), service, node, config.slow_client_s)
    supervisor = app[SUPERVISOR_KEY]
    hub.channels[keys.SEEKS_CHANNEL] = seeks.on_event
    hub.channels[keys.POOL_CHANNEL] = pool.on_event

    # The event streams of lichess's API: their channel, their keep-alive loop.
    def spawn(name: str, body: Callable[[], Coroutine[Any, Any, None]]) -> None:
        supervisor.start(name, body, RESTARTS.get(name))

    botapi.events.start(app, hub, spawn)
    app[EDGE_HANDOVER_KEY] = (botapi.events.is_event_stream, botapi.events.take_over)
    await hub.start(spawn)
    m = app[METRICS_KEY]
    archiver = Archiver(
        redis, service, archive, chat_log, node, lifetimes, config.archive_delay_ms / 1000,
        config.archive_release_delay_ms / 1000,
    )  # fmt: skip
    loops = {
        "results": ResultsConsumer(redis, service, node, m.ai_moves, m.fallback_moves).run,
        "heartbeat": lambda: heartbeat(store),
        "archiver": archiver.run,
        "lobby": seeks.run,
        "pool": pool.run,
        "deadlines": DeadlineSweeper(service, on_time_out=timeout_hook(service, bans)).run,
        "analysis": AnalysisCollector(redis, archive, node).run,
        "bans": bans.run,
    }
    if keys.grouped():  # a Redis Cluster: the commits' AI jobs wait in per-group outboxes
        loops["relay"] = OutboxSweeper(store).run
    for name, body in loops.items():
        supervisor.start(name, body, RESTARTS.get(name))


async def heartbeat(store: RoomStore, every_s: float = HEARTBEAT_S) -> None:
    """The node's heartbeat, which keeps its players counted as connected: a beat at
    once, then one every ``every_s``. A beat that fails raises to the supervisor, which
    starts this again within ``RESTARTS["heartbeat"].cap_s``: once Redis answers again the
    node beats well inside its TTL (``NODE_TTL_S``)."""
    while True:
        await store.heartbeat()
        await asyncio.sleep(every_s)


async def drain(app: web.Application) -> None:
    """Once the listening socket is closed and before aiohttp waits for the handlers:
    requests under way finish, then every client is told to reconnect."""
    await botapi.events.drain(app)  # the API's streams end at once: their clients reconnect
    if HUB_KEY in app:
        await app[HUB_KEY].drain()


async def stop_node(app: web.Application) -> None:
    """The handlers are done (their departures recorded in Redis): stop the loops (the
    last started first), then the parts they used."""
    await app[SUPERVISOR_KEY].stop()
    if SEEKS_KEY in app:
        await app[SEEKS_KEY].stop()
    if HUB_KEY in app:
        await app[HUB_KEY].stop()
        if app[HUB_KEY].left_cleanly():  # else its beats expire and it is announced dead
            try:
                await app[STORE_KEY].leave()
            except (BusError, OSError) as exc:
                log.warning("could not remove this node's heartbeat: %s", exc)
    if REDIS_KEY in app:
        await app[REDIS_KEY].aclose()
    if ARCHIVE_KEY in app:
        await app[ARCHIVE_KEY].close()


def create_app(
    redis_url: str,
    node: str | None = None,
    limits: Limits | None = None,
    database_url: str = "sqlite://",
    config: NodeConfig | None = None,
) -> web.Application:
    """The app of one node with the default configuration (or ``config``): for tests and
    embedding. ``kibitz serve`` builds its config from flags and environment."""
    return build_app(config or NodeConfig(), redis_url, database_url, limits, node)
