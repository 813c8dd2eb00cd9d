"""The aiohttp application: HTTP routes, the WebSocket endpoint and background loops.

The WebSocket handler only moves bytes: it decodes a frame, parses it with the protocol
schema, hands the typed message to the room service, and queues replies. Room changes
reach every follower through the hub (Redis pub/sub), whichever node made them.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from aiohttp import WSCloseCode, WSMsgType, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from kibitz.server.appkeys import (
    ARCHIVE_KEY,
    CHAT_KEY,
    HUB_KEY,
    LIMITER_KEY,
    LIMITS_KEY,
    LISTENING_ORIGINS_KEY,
    METRICS_KEY,
    NODE_KEY,
    REDIS_KEY,
    SEEKS_KEY,
    SERVICE_KEY,
    STATUS_KEY,
    STORE_KEY,
    TASKS_KEY,
    WS_COMPRESSION_KEY,
)
from kibitz.server.archive.database import Archive, display_url
from kibitz.server.domain import export
from kibitz.server.domain import room as rooms
from kibitz.server.domain.clocks import FIRST_MOVE_MS
from kibitz.server.domain.room import Room, RoomError, new_token, seat_for_token
from kibitz.server.fanout.hub import Connection, Hub
from kibitz.server.gateway.limits import (
    AddressLimiter,
    LimitExceeded,
    Limits,
    client_address,
    origin_allowed,
)
from kibitz.server.http import games as games_api
from kibitz.server.http import query
from kibitz.server.loops.archiver import Archiver, Lifetimes
from kibitz.server.loops.background import raise_if_stopping, stop_tasks
from kibitz.server.loops.deadlines import DeadlineSweeper
from kibitz.server.loops.results import ResultsConsumer
from kibitz.server.metrics import Metrics
from kibitz.server.services import analysis
from kibitz.server.services.analysis import AnalysisCollector
from kibitz.server.services.chat import (
    Channel,
    ChatRate,
    ChatStore,
    channel_of,
    chat_message,
    check_text,
    sender,
)
from kibitz.server.services.rooms import RoomService
from kibitz.server.services.seeks import (
    MAX_ROOMS_PAGE,
    SEEKS_CHANNEL,
    Seeks,
    live_rooms_page,
    lobby_game,
)
from kibitz.server.store import HEARTBEAT_S, RoomStore
from kibitz.shared.bus import keys
from kibitz.shared.bus.keys import AI_WAITING as WAITING
from kibitz.shared.bus.keys import ARCHIVE, JOBS, LIVE, NODES, RESULTS
from kibitz.shared.bus.link import Address, LinkedRedis, RedisLink
from kibitz.shared.games import Outcome, find_game
from kibitz.shared.protocol import (
    MAX_FRAME_BYTES,
    Abort,
    AcceptSeek,
    Chat,
    Claim,
    ClientMessage,
    Codec,
    Create,
    Join,
    Leave,
    Lobby,
    Offer,
    Ping,
    PlayMove,
    ProtocolError,
    Resign,
    Resume,
    Seek,
    Unseek,
    Watch,
    decode,
    error_message,
    left_message,
    parse_client_message,
    pong_message,
    seat_message,
    welcome_message,
)

log = logging.getLogger(__name__)

# aiohttp refuses frames past this outright (close 1009); frames between MAX_FRAME_BYTES
# and this get a typed error first, then the same close.
HARD_FRAME_LIMIT = 1024 * 1024
RATE_PER_SECOND = 30.0
RATE_BURST = 60.0
PACE_RESET_TOKENS = RATE_PER_SECOND  # a client is over the rate until it pauses this much
#: Messages past the rate are read more slowly, not refused, unless the client has been
#: over the rate this long without a break: then they are refused (rate/limited strikes).
PACE_LIMIT_S = 10.0
MAX_STRIKES = 20  # malformed frames or rate-limit hits in a window close the socket
STRIKE_WINDOW_S = 60.0
CREATES_PER_MINUTE = 20
REDIS_TIMEOUT_S = 5.0
REDIS_POOL_SIZE = 128  # Redis connections per node for commands (the listener has its own)
REDIS_POOL_WAIT_S = 20.0  # longest wait for a free pooled connection
HEALTH_TIMEOUT_S = 1.0  # /healthz answers within about this long, whatever Redis does
RESUME_REPLAY = 50  # most versions replayed one by one on resume; past that, a resync


def static_dir() -> Path:
    return Path(str(resources.files("kibitz.client").joinpath("static")))


def command_client(redis_url: str, pool_size: int) -> LinkedRedis:
    """The node's Redis client for commands.

    Its one-shot commands (a move's commit, presence, chat, limits) share one pipelined
    connection, the :class:`~kibitz.shared.bus.link.RedisLink`. Blocking reads and
    transactions use a bounded pool that waits for a free connection (up to
    REDIS_POOL_WAIT_S) instead of failing or growing without limit.

    Commands time out, so a hung Redis gives errors, not hung handlers. A command whose
    connection broke (a Redis restart leaves stale connections) is retried on a fresh
    one; a command that timed out is not, since it may have run: every write here is
    versioned or counted, and running it twice could count twice.
    """
    pool = BlockingConnectionPool.from_url(
        redis_url,
        max_connections=pool_size,
        timeout=REDIS_POOL_WAIT_S,
        decode_responses=True,
        socket_timeout=REDIS_TIMEOUT_S,
        socket_connect_timeout=REDIS_TIMEOUT_S,
        retry=Retry(
            ExponentialBackoff(cap=0.5, base=0.05), 2, supported_errors=(aioredis.ConnectionError,)
        ),
    )
    link = RedisLink(Address.from_url(redis_url), REDIS_TIMEOUT_S, wait_s=REDIS_POOL_WAIT_S)
    return LinkedRedis(pool, link)


def create_app(
    redis_url: str,
    node: str | None = None,
    limits: Limits | None = None,
    redis_pool: int = REDIS_POOL_SIZE,
    database_url: str = "sqlite://",
    lifetimes: Lifetimes | None = None,
    ws_compression: bool = False,
    first_move_ms: int = FIRST_MOVE_MS,
) -> web.Application:
    """The app of one node. ``database_url``: where finished games go (the default, an
    in-memory SQLite, is for tests; ``kibitz serve`` passes a file or PostgreSQL);
    ``lifetimes``: how long rooms stay in Redis; ``ws_compression``: offer per-message
    deflate to WebSocket clients; ``first_move_ms``: how long each side of a timed game
    has for its first move before the game is aborted."""
    lifetimes = lifetimes or Lifetimes()
    app = web.Application(client_max_size=64 * 1024)
    app[LIMITS_KEY] = limits or Limits()
    # Opaque: /healthz, /api/status and every welcome show it to anybody, and a host name
    # or process id helps only an attacker (the log maps it to both, below).
    app[NODE_KEY] = node or f"node-{uuid.uuid4().hex[:12]}"
    app[LISTENING_ORIGINS_KEY] = set()  # filled once the node listens (server/cli/serve.py)
    app[STATUS_KEY] = os.urandom(16)
    app[METRICS_KEY] = Metrics()
    app[WS_COMPRESSION_KEY] = ws_compression

    async def startup(app: web.Application) -> None:
        log.info("node %s: process %d on %s", app[NODE_KEY], os.getpid(), socket.gethostname())
        app[ARCHIVE_KEY] = archive = await Archive.open(database_url)
        log.info("finished games go to %s", display_url(database_url))
        # Commands time out (a hung Redis gives errors, not hung handlers); the hub's
        # listener waits indefinitely, on a subscription of its own (server/fanout/hub.py).
        redis = command_client(redis_url, redis_pool)
        await redis.ping()
        store = RoomStore(redis, app[NODE_KEY], lifetimes.waiting_ttl_ms, lifetimes.finished_ttl_ms)
        await store.heartbeat()
        await store.ensure_groups()
        # One room budget for every way a room is made (create here, seeks, rematches).
        limiter = AddressLimiter(redis, app[NODE_KEY], app[LIMITS_KEY])
        ai_games = app[LIMITS_KEY].ai_games_per_address
        service = RoomService(store, ai_games, first_move_ms, limiter)
        await service.sync_clock()
        hub = Hub(redis.link.address, service, app[NODE_KEY])
        app[CHAT_KEY] = ChatStore(redis)
        app[SEEKS_KEY] = seeks = Seeks(redis, service, app[NODE_KEY])
        hub.channels[SEEKS_CHANNEL] = seeks.on_event
        await hub.start()
        m = app[METRICS_KEY]
        consumer = ResultsConsumer(redis, service, app[NODE_KEY], m.ai_moves, m.fallback_moves)
        app[REDIS_KEY], app[STORE_KEY], app[SERVICE_KEY], app[HUB_KEY] = redis, store, service, hub
        app[LIMITER_KEY] = limiter
        archiver = Archiver(redis, service, archive, app[NODE_KEY], lifetimes)
        app[TASKS_KEY] = [
            asyncio.create_task(consumer.run()),
            asyncio.create_task(beat(store)),
            asyncio.create_task(archiver.run()),
            asyncio.create_task(seeks.run()),
            asyncio.create_task(DeadlineSweeper(service).run()),
            asyncio.create_task(AnalysisCollector(redis, archive, app[NODE_KEY]).run()),
        ]

    async def drain(app: web.Application) -> None:
        # Runs once the listening socket is closed and before aiohttp waits for the
        # handlers: requests under way finish, then every client is told to reconnect.
        if HUB_KEY in app:
            await app[HUB_KEY].drain()

    async def cleanup(app: web.Application) -> None:
        # The handlers are done (their departures recorded in Redis): stop the rest.
        tasks: list[asyncio.Task[None]] = app[TASKS_KEY]
        await stop_tasks(tasks)
        await app[SEEKS_KEY].stop()
        await app[HUB_KEY].stop()
        await app[REDIS_KEY].aclose()
        await app[ARCHIVE_KEY].close()

    app.on_startup.append(startup)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(cleanup)
    app.router.add_get("/", index)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/ws", websocket)
    games_api.register(app)  # /api/games (also the catalogue below), /api/games/{id}...
    app.router.add_get("/api/rooms", api_rooms)
    app.router.add_get("/api/rooms/{room}", api_room)
    app.router.add_get("/api/rooms/{room}/record", api_record)
    app.router.add_get("/api/seeks", api_seeks)
    app.router.add_get("/api/status", api_status)
    app.router.add_static("/static/", static_dir(), show_index=False)
    app.router.add_get("/{name:[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*}", static_file)
    return app


async def beat(store: RoomStore) -> None:
    """The node's heartbeat, which keeps its players counted as connected."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        try:
            await store.heartbeat()
        except (aioredis.RedisError, OSError) as exc:
            raise_if_stopping()
            log.warning("heartbeat failed: %s", exc)


# -- HTTP -------------------------------------------------------------------------------------


async def index(request: web.Request) -> web.StreamResponse:
    return web.FileResponse(static_dir() / "index.html")


async def static_file(request: web.Request) -> web.StreamResponse:
    """Client files also at the root, so pages may use relative paths."""
    root = static_dir().resolve()
    path = (root / request.match_info["name"]).resolve()
    if root not in path.parents or not path.is_file():
        raise web.HTTPNotFound(text="not found")
    return web.FileResponse(path)


async def healthz(request: web.Request) -> web.Response:
    """200 when this node can serve: Redis answers, the fan-out listener is live and the
    node is not shutting down.

    It names no addresses: it is often reachable from outside.
    """
    try:
        await asyncio.wait_for(request.app[REDIS_KEY].ping(), timeout=HEALTH_TIMEOUT_S)
        redis_ok = True
    except (aioredis.RedisError, OSError, TimeoutError):
        redis_ok = False
    hub = request.app[HUB_KEY]
    fanout_ok = hub.healthy
    body = {
        "ok": redis_ok and fanout_ok and not hub.draining,  # draining: shutting down
        "redis": "ok" if redis_ok else "unavailable",
        "fanout": "ok" if fanout_ok else "stale",
        "node": request.app[NODE_KEY],
    }
    if hub.draining:
        body["draining"] = True
    return web.json_response(body, status=200 if body["ok"] else 503)


async def metrics(request: web.Request) -> web.Response:
    m = request.app[METRICS_KEY]
    hub = request.app[HUB_KEY]
    m.connections.set(len(hub.connections))
    m.fanout_live.set(1 if hub.healthy else 0)
    m.fanout_reconnects.set(hub.reconnects)
    m.fanout_rooms.set(hub.subscribed_rooms)
    m.fanout_room_messages.set(hub.room_messages)
    return web.Response(
        body=generate_latest(m.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )


async def api_rooms(request: web.Request) -> web.Response:
    """The unfinished rooms, most recent first, a page at a time (``limit``, ``before``)."""
    service = request.app[SERVICE_KEY]
    try:
        limit = query.whole_number(request.query, "limit", MAX_ROOMS_PAGE, 1, MAX_ROOMS_PAGE)
        before = query.cursor(request.query, "before", "cursor")
    except query.QueryError as exc:
        return query.refusal(exc)
    rooms, next_cursor = await live_rooms_page(service, limit, before)
    entries = [await lobby_game(service, room) for room in rooms]
    return web.json_response({"rooms": entries, "next": next_cursor})


async def api_seeks(request: web.Request) -> web.Response:
    """The open seeks, oldest first (as the lobby lists them)."""
    return web.json_response({"seeks": await request.app[SEEKS_KEY].open_seeks()})


async def api_room(request: web.Request) -> web.Response:
    service = request.app[SERVICE_KEY]
    try:
        room = await service.get(request.match_info["room"])
    except RoomError as exc:
        return web.json_response(error_message(exc.code, exc.message), status=404)
    # The shape of a ``state`` a spectator would get on ``watch``.
    snap = await service.snapshot(room)
    return web.json_response({**snap, "event": {"kind": "resync"}, "you": None})


async def api_record(request: web.Request) -> web.Response:
    """The whole game for archives: moves, result, the event timeline and, where the
    game has a standard format (PGN for chess), the game in it."""
    service = request.app[SERVICE_KEY]
    try:
        room = await service.get(request.match_info["room"])
    except RoomError as exc:
        return web.json_response(error_message(exc.code, exc.message), status=404)
    game = find_game(room.game)
    moves = [m.move for m in room.moves]
    record: dict[str, Any] = {
        "room": room.id,
        "game": room.game,
        "options": room.options,
        "start": room.start,
        "players": list(game.players),
        "seats": [{"kind": s.kind, "level": s.level, "name": s.name} for s in room.seats],
        "status": room.status,
        "result": room.result,
        "moves": moves,
        "display": [m.display for m in room.moves],
        "created_ms": room.created_ms,
        "updated_ms": room.updated_ms,
        "events": rooms.hide_lines(await service.store.events_since(room.id, -1), room.status),
    }
    if game.record_format:
        headers = {"Event": f"kibitz room {room.id}", "Site": "kibitz"}
        for name, seat in zip(game.players, room.seats, strict=True):
            headers[name] = seat.name or ("AI" if seat.kind == "ai" else "?")
        outcome = Outcome(**room.result) if room.result else None
        start = game.parse_position(room.start)
        record[game.record_format] = game.export_record(
            start,
            moves,
            outcome,
            export.tags(headers),  # escaped: names are typed by people
        )
    return web.json_response(record)


async def api_status(request: web.Request) -> web.Response:
    """The cluster's status for anybody: each worker's name (which may hold its machine's
    name and process id) is replaced by an opaque id, the same on every request to this
    node; ``kibitz status --redis URL`` shows the names."""
    redis = request.app[REDIS_KEY]
    status = await cluster_status(redis)
    key = request.app[STATUS_KEY]
    status["workers"] = [
        {**worker, "name": opaque_id(key, str(worker.get("name", "")))}
        for worker in status["workers"]
    ]
    return web.json_response(status)


def opaque_id(key: bytes, name: str) -> str:
    return "worker-" + hmac.new(key, name.encode(), hashlib.sha256).hexdigest()[:12]


async def cluster_status(redis: aioredis.Redis) -> dict[str, Any]:
    """Queue depths, pending jobs, live workers and nodes, as ``kibitz status`` prints them."""
    out: dict[str, Any] = {"jobs": {}, "results": {}, "workers": []}
    for name, stream in (("jobs", JOBS), ("results", RESULTS)):
        length = await redis.xlen(stream)
        groups = await redis.xinfo_groups(stream) if length or await redis.exists(stream) else []
        out[name] = {
            "length": length,
            "pending": sum(int(g["pending"]) for g in groups),
            "lag": sum(int(g.get("lag") or 0) for g in groups),
        }
    async for key in redis.scan_iter(match=keys.WORKERS + "*", count=100):
        info = await redis.hgetall(key)
        if info:
            out["workers"].append(info)
    out["nodes"] = sorted([key.removeprefix(NODES) async for key in redis.scan_iter(NODES + "*")])
    # Jobs waiting in the fair queue for a worker (the stream holds only those handed out).
    out["jobs"]["queued"] = await redis.hlen(WAITING)
    # Finished games not yet in the database (each leaves once an archiver has written it).
    out["archive"] = {"backlog": await redis.xlen(ARCHIVE)}
    # Game analyses under way and their position jobs not yet done (server/services/analysis.py).
    out["analysis"] = {
        "active": await redis.zcard(analysis.ACTIVE),
        "jobs": await redis.xlen(analysis.JOBS),
    }
    out["live_rooms"] = await redis.zcard(LIVE)
    return out


# -- WebSocket --------------------------------------------------------------------------------


class Refusal(Exception):
    """A WebSocket handshake turned away: the HTTP status and the typed error to send."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = error_message(code, message)


async def admit(app: web.Application, remote: str | None, headers: Mapping[str, str]) -> str:
    """Decide whether a WebSocket handshake may go ahead; the client's address (counted in
    the per-address connections: :func:`session_closed` counts it out), or :class:`Refusal`.
    The same checks for both ways a socket arrives (server/gateway/edge.py and the aiohttp
    route)."""
    limits = app[LIMITS_KEY]
    listening: set[str] = app[LISTENING_ORIGINS_KEY]
    own = limits.public_origins or frozenset(listening)
    if not origin_allowed(headers, limits.allowed_origins, own):
        raise Refusal(403, "auth/origin", "WebSockets from this origin are not allowed")
    if app[HUB_KEY].draining:
        raise Refusal(503, "server/unavailable", "this node is shutting down; use another")
    address = client_address(remote, headers, limits.trusted_proxies)
    try:
        await app[LIMITER_KEY].connect(address)
    except LimitExceeded as exc:
        raise Refusal(429, exc.code, exc.message) from None
    except (aioredis.RedisError, OSError):
        raise Refusal(503, "server/unavailable", "storage unavailable; try again") from None
    return address


def open_session(app: web.Application, conn: Connection, address: str) -> Session:
    """A socket is open: register it, greet it, and give it its session."""
    app[HUB_KEY].add(conn)
    app[METRICS_KEY].connections.inc()
    conn.send(welcome_message(app[NODE_KEY]))
    return Session(app, conn, address)


async def session_closed(session: Session) -> None:
    """The socket is gone: its seeks go, its rooms are told, its address counted out
    (both at once: their Redis commands share the round trips)."""
    session.app[METRICS_KEY].connections.dec()
    await asyncio.gather(_leave_all(session), address_closed(session.app, session.address))


async def _leave_all(session: Session) -> None:
    """A closed connection's seeks go, and its rooms are told it left."""
    app, conn = session.app, session.conn
    try:
        await app[SEEKS_KEY].closed(session)  # its seeks go with it
    except (aioredis.RedisError, OSError) as exc:
        log.warning("could not remove a closed connection's seeks: %s", exc)
    await app[HUB_KEY].remove(conn)  # its rooms told (a Redis failure is paid back later)


async def address_closed(app: web.Application, address: str) -> None:
    try:
        await app[LIMITER_KEY].disconnect(address)
    except (aioredis.RedisError, OSError) as exc:
        log.warning("could not count a connection out: %s", type(exc).__name__)


async def websocket(request: web.Request) -> web.StreamResponse:
    """``GET /ws`` on a connection aiohttp already serves: a WebSocket upgrade on a
    kept-alive HTTP connection (a fresh connection's upgrade is taken by server/gateway/edge.py
    before aiohttp sees it), or a request that is no valid upgrade (answered 400 before
    anything is counted: only a WebSocket that opens holds one of its address's places)."""
    app = request.app
    ws = web.WebSocketResponse(
        max_msg_size=HARD_FRAME_LIMIT,
        heartbeat=30,
        compress=app[WS_COMPRESSION_KEY],
        autoping=False,  # pongs are ours to read: they measure the lag (server/gateway/lag.py)
    )
    if not ws.can_prepare(request).ok:  # aiohttp's own 400 says why; nothing counted in
        await ws.prepare(request)  # raises web.HTTPBadRequest
    try:
        address = await admit(app, request.remote, request.headers)
    except Refusal as refused:
        return web.json_response(refused.body, status=refused.status)
    codec: Codec = query.codec(request.query.getall("codec", []))
    session: Session | None = None
    try:
        await ws.prepare(request)
        conn = Connection(ws, codec, request.transport)
        session = open_session(app, conn, address)
    except ConnectionResetError:  # the client gave up before we answered: nothing to do
        return ws
    finally:
        if session is None:  # refused or gone mid-handshake (any error): counted out again
            await address_closed(app, address)
    try:
        if app[HUB_KEY].draining:  # upgraded as the node began to shut down: go elsewhere
            await conn.close(WSCloseCode.GOING_AWAY, b"shutting down")
        async for frame in ws:
            if frame.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                if not await session.handle(frame.data):
                    break
            elif frame.type == WSMsgType.PING:
                await ws.pong(frame.data)
            elif frame.type == WSMsgType.PONG and conn.lag is not None:
                conn.lag.on_pong(frame.data)
            elif frame.type == WSMsgType.ERROR:
                break
    finally:
        try:
            await session_closed(session)
        finally:
            if not ws.closed:
                await conn.close(session.close_code, session.close_reason)
            if conn.writer is not None:
                conn.writer.cancel()
    return ws


_SESSION_NUMBERS = itertools.count(1)


class Session:
    """One connection's message loop: validation at the edge, then the room service."""

    def __init__(self, app: web.Application, conn: Connection, address: str) -> None:
        self.app = app
        self.conn = conn
        self.address = address  # the client's address, for per-address limits
        self.service = app[SERVICE_KEY]
        self.hub = app[HUB_KEY]
        self.metrics = app[METRICS_KEY]
        self.strikes = 0
        self.creates: list[float] = []
        # How the socket is closed once ``on_frame`` returns False.
        self.close_code: int = WSCloseCode.OK
        self.close_reason = b""
        self.strikes_since = time.monotonic()
        self.tokens = RATE_BURST
        self.refilled = time.monotonic()
        self.paced_since: float | None = None  # since when messages wait for the rate
        #: When the frame being handled arrived (server clock ms): what a move's clock
        #: counts to. (The connection's lag is ``conn.lag``, measured by the hub's pings
        #: while it holds a seat.)
        self.received_ms = self.service.clock_ms()
        self.chat_rate = ChatRate()
        # Names this connection to other nodes (seeks): unique in the cluster, as its node is.
        self.id = f"{app[NODE_KEY]}:{next(_SESSION_NUMBERS)}"

    async def handle(self, data: str | bytes) -> bool:
        """One data frame from the client; False when the connection must close (with
        ``close_code`` and ``close_reason``)."""
        if self.hub.draining:
            # Shutting down: no new request is taken (the client sends it again on its
            # next connection); the one under way was finished before the 1001.
            self.close_code, self.close_reason = WSCloseCode.GOING_AWAY, b"shutting down"
            return False
        self.received_ms = self.service.clock_ms()
        self.conn.begin_request()
        try:
            return await self.on_frame(data)
        finally:
            self.conn.end_request()

    async def on_frame(self, data: str | bytes) -> bool:
        """Handle one frame; False when the connection must close.

        The client's replies must not pile up: the frame is handled only once what is
        queued for it has drained (a client that stopped reading is dropped instead).
        """
        if not await self.conn.drained():
            return False
        try:
            raw = decode(data)
        except ProtocolError as exc:
            if exc.code == "frame/too_large":
                self._error(exc.code, exc.message)
                self.close_code, self.close_reason = WSCloseCode.MESSAGE_TOO_BIG, b"frame too large"
                return False
            return self._strike(exc.code, exc.message)
        rid = raw.get("rid")
        rid = rid if isinstance(rid, int | str) and not isinstance(rid, bool) else None
        if not await self._pace():
            return self._strike(
                "rate/limited",
                f"more than {RATE_PER_SECOND:g} messages a second for over "
                f"{PACE_LIMIT_S:g} s; slow down",
                rid,
            )
        try:
            message = parse_client_message(raw)
        except ProtocolError as exc:
            return self._strike(exc.code, exc.message, rid)
        self.metrics.count_message(message)
        try:
            await self.dispatch(message)
        except ProtocolError as exc:  # RoomError included
            self._error(exc.code, exc.message, message.rid)
        except (aioredis.RedisError, OSError) as exc:
            log.warning("storage unavailable: %s", exc)
            self._error("server/unavailable", "storage unavailable; try again", message.rid)
        except Exception:
            log.exception("failed to handle %s", type(message).__name__)
            self._error("server/internal", "internal error; nothing was changed", message.rid)
        return True

    async def dispatch(self, message: ClientMessage) -> None:
        service, conn = self.service, self.conn
        if isinstance(message, Ping):
            conn.send(pong_message(message.rid, service.clock_ms()))
        elif isinstance(message, Create):
            await self._count_create()
            token = new_token()
            room, seat = await service.create(message, token, owner=self.address)
            # Followed before anyone is told the room: nothing can happen to it unseen.
            await self.hub.follow(conn, room.id, seat)
            conn.send(seat_message(room.id, seat, token, message.rid))
            await self.follow_seated(room, seat, {"kind": "created", "seat": seat}, True)
        elif isinstance(message, Join):
            token = new_token()
            room, seat = await service.join(message, token)
            conn.send(seat_message(room.id, seat, token, message.rid))
            await self.follow_seated(room, seat, {"kind": "joined", "seat": seat})
        elif isinstance(message, Watch):
            # Watching a room this connection plays in keeps the seat (and ``you``).
            await self._follow(message.room, conn.rooms.get(message.room))
        elif isinstance(message, Resume):
            await self._resume(message)
        elif isinstance(message, PlayMove):
            await self._answer(await service.move(message, self._lag_ms(), self.received_ms))
            self.metrics.moves.inc()
        elif isinstance(message, Resign):
            await self._answer(await service.resign(message))
        elif isinstance(message, Offer):
            # A second copy of an agreed rematch changes nothing: answered with a resync.
            await self._answer(await service.offer(message), changed=message.kind != "rematch")
        elif isinstance(message, Abort):
            await self._answer(await service.abort(message))
        elif isinstance(message, Claim):
            await self._answer(await service.claim(message))
        elif isinstance(message, Leave):
            await self.hub.unfollow(conn, message.room)  # its room told, if it played there
            conn.send(left_message(message.room, message.rid))
        elif isinstance(message, Chat):
            await self._chat(message)
        elif isinstance(message, Seek | Unseek | AcceptSeek | Lobby):
            await self.app[SEEKS_KEY].handle(self, message)

    async def _answer(self, room: Room, changed: bool = True) -> None:
        """Answer a change to ``room`` made for this connection with the state it led to,
        before anything else this connection sends is handled (the broadcast's copy of the
        same version is then skipped; if the broadcast got here first, it was the answer).
        A request that may have changed nothing (``changed`` False: a second copy of an
        agreed rematch) is answered with the room as it is (a ``resync``)."""
        if room.id not in self.conn.rooms:
            return  # not following the room: the broadcast is not for us either
        snap = self.service.committed_state(room.id, room.version)
        if snap is not None and snap["version"] > self.conn.last_version.get(room.id, -1):
            self.hub.deliver_state(room.id, snap)  # and to the room's other followers here
        elif snap is None or not changed:
            await self._send_current(room.id, None)

    async def follow_seated(
        self, room: Room, seat: int, event: dict[str, Any], followed: bool = False
    ) -> None:
        """Follow ``room`` (as committed with ``event``: ``created``/``joined``) as the
        player just seated in ``seat`` (``followed``: already done), and send it as its
        one state with that event. The commit already showed this seat connected, so
        nobody needs a presence update."""
        if not followed:
            await self.hub.follow(self.conn, room.id, seat)
        committed = self.service.committed_state(room.id, room.version)
        if committed is not None:  # as the commit published it (this seat connected)
            snap = {**committed, "event": event}
        else:
            snap = await self.service.snapshot(room)
            snap["event"] = event
        # To the room's other followers here too (a joiner's opponent); skipped by any
        # that its broadcast reached first.
        self.hub.deliver_state(room.id, snap)
        # Where the room is now, and the chat its players read, in one round trip.
        which = channel_of(seat)
        latest, chat = await asyncio.gather(
            self.service.store.version(room.id), self.app[CHAT_KEY].history(room.id, which)
        )
        if latest is None:
            raise RoomError("room/unknown", f"no room {room.id!r}")
        # It moved on before we followed it, and its broadcast did not get here after.
        if latest > max(room.version, self.conn.last_version.get(room.id, -1)):
            await self._send_current(room.id, room.version)
        else:
            self._send_chat(room.id, which, chat)

    async def follow_room(self, room_id: str, seat: int | None) -> None:
        """Follow ``room_id`` as ``seat`` and send its state (an accepted seek)."""
        await self._follow(room_id, seat)

    async def _follow(self, room_id: str, seat: int | None) -> None:
        await self.service.get(room_id)  # it exists (else room/unknown)
        if await self.hub.follow(self.conn, room_id, seat):
            await self.service.publish_presence(room_id)
        await self._send_current(room_id, None)

    async def _resume(self, message: Resume) -> None:
        room = await self.service.get(message.room)
        seat = seat_for_token(room, message.token) if message.token else None
        if await self.hub.follow(self.conn, room.id, seat):
            await self.service.publish_presence(room.id)
        await self._send_current(room.id, message.since)

    async def _send_current(self, room_id: str, since: int | None) -> None:
        """The room as it is now, loaded after following it, so no event falls in between.

        With ``since``, the event carries what happened after that version (the ``missed``
        events, up to RESUME_REPLAY of them), for clients that show a move history.
        """
        room = await self.service.get(room_id)
        snap = await self.service.snapshot(room)
        event: dict[str, Any] = {"kind": "resync"}
        if since is not None and since >= room.version:
            # Nothing after it: ``since`` past the version means the room lost changes
            # the client saw (a Redis failover); this snapshot is the truth.
            event["missed"] = []
        elif since is not None and room.version - since <= RESUME_REPLAY:
            event["missed"] = rooms.hide_lines(
                await self.service.store.events_since(room_id, since), room.status
            )
        elif since is not None and room.version - since > RESUME_REPLAY:
            # Too far back to list it all: the last RESUME_REPLAY versions, and from where.
            start = room.version - RESUME_REPLAY
            event["missed"] = rooms.hide_lines(
                await self.service.store.events_since(room_id, start), room.status
            )
            event["missed_from"] = start
        snap["event"] = event
        self.conn.send_state(room.id, snap)
        await self._replay_chat(room_id)

    async def _replay_chat(self, room_id: str) -> None:
        """The last lines of the room's chat channel this connection reads, if any."""
        which = channel_of(self.conn.rooms.get(room_id))
        self._send_chat(room_id, which, await self.app[CHAT_KEY].history(room_id, which))

    def _send_chat(self, room_id: str, which: Channel, lines: list[dict[str, Any]]) -> None:
        if lines:
            self.conn.send({**chat_message(room_id, which, lines), "replay": True})

    async def _chat(self, message: Chat) -> None:
        """A chat line: checked, rate-limited per connection, stored and published."""
        text = check_text(message.text)
        room = await self.service.get(message.room)
        which, seat, name = sender(room, message.token, message.name)
        if which == "spectators" and self.conn.rooms.get(room.id, "absent") is not None:
            raise ProtocolError(
                "chat/invalid",
                f"to chat with the spectators of {room.id}, watch it first"
                if room.id not in self.conn.rooms
                else f"you play in {room.id}: send your seat's token to chat as a player",
            )
        self.chat_rate.take()
        await self.app[CHAT_KEY].post(room, which, seat, name, text)

    async def _count_create(self) -> None:
        """Rooms cost storage: one connection may open CREATES_PER_MINUTE a minute, and one
        address (all its connections, on every node) the configured number."""
        now = time.monotonic()
        self.creates = [t for t in self.creates if now - t < 60.0]
        if len(self.creates) >= CREATES_PER_MINUTE:
            raise ProtocolError(
                "rate/limited", f"at most {CREATES_PER_MINUTE} new rooms a minute per connection"
            )
        try:
            await self.app[LIMITER_KEY].count_create(self.address)
        except LimitExceeded as exc:
            raise ProtocolError(exc.code, exc.message) from None
        self.creates.append(now)

    def _refill(self) -> float:
        now = time.monotonic()
        self.tokens = min(RATE_BURST, self.tokens + (now - self.refilled) * RATE_PER_SECOND)
        self.refilled = now
        return now

    async def _pace(self) -> bool:
        """Take this message's token from the bucket (RATE_BURST, refilled at
        RATE_PER_SECOND), waiting for it when the bucket is empty: a burst is read more
        slowly, not refused. False (refuse it) once the client has been over the rate
        for PACE_LIMIT_S without a break."""
        now = self._refill()
        if self.tokens >= 1:
            self.tokens -= 1
            if self.tokens >= PACE_RESET_TOKENS:
                # A real break: the client left a second's worth of messages unsent.
                # (Not any spare token: a sleep that overshoots under load leaves one.)
                self.paced_since = None
            return True
        if self.paced_since is None:
            self.paced_since = now
        elif now - self.paced_since > PACE_LIMIT_S:
            return False
        await asyncio.sleep((1 - self.tokens) / RATE_PER_SECOND)
        self._refill()
        self.tokens -= 1
        return True

    def _strike(self, code: str, text: str, rid: str | int | None = None) -> bool:
        self._error(code, text, rid)
        now = time.monotonic()
        if now - self.strikes_since > STRIKE_WINDOW_S:
            self.strikes, self.strikes_since = 0, now
        self.strikes += 1
        if self.strikes >= MAX_STRIKES:
            self.close_code = WSCloseCode.POLICY_VIOLATION
            self.close_reason = b"too many bad messages"
            return False
        return True

    def _lag_ms(self) -> int:
        lag = self.conn.lag
        return lag.estimate_ms if lag is not None else 0

    def _error(self, code: str, text: str, rid: str | int | None = None) -> None:
        self.metrics.errors.labels(code).inc()
        self.conn.send(error_message(code, text, rid))


__all__ = ["MAX_FRAME_BYTES", "create_app", "cluster_status"]
