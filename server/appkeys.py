"""The keys under which the node's services live in the aiohttp application.

``create_app`` (server/app.py) puts each service under its key; the handlers (app.py,
games_api.py, edge.py) and ``kibitz serve`` read them back with ``app[KEY]``. Kept apart
from app.py so that a module of handlers can read them without importing the app.
"""

from __future__ import annotations

import redis.asyncio as aioredis
from aiohttp import web

from kibitz.server.archive.database import Archive
from kibitz.server.fanout.hub import Hub
from kibitz.server.gateway.limits import AddressLimiter, Limits
from kibitz.server.metrics import Metrics
from kibitz.server.services.chat import ChatStore
from kibitz.server.services.rooms import RoomService
from kibitz.server.services.seeks import Seeks
from kibitz.server.store import RoomStore

STORE_KEY = web.AppKey("store", RoomStore)
SERVICE_KEY = web.AppKey("service", RoomService)
HUB_KEY = web.AppKey("hub", Hub)
REDIS_KEY = web.AppKey("redis", aioredis.Redis)
NODE_KEY = web.AppKey("node", str)
#: The origins of the node's own listening address (used while no public origin is set).
LISTENING_ORIGINS_KEY = web.AppKey("listening_origins", set[str])
#: The key that turns worker names into the opaque ids ``/api/status`` shows.
STATUS_KEY = web.AppKey("status_key", bytes)
METRICS_KEY = web.AppKey("metrics", Metrics)
TASKS_KEY = web.AppKey("tasks", list)
LIMITS_KEY = web.AppKey("limits", Limits)
LIMITER_KEY = web.AppKey("limiter", AddressLimiter)
#: The finished-games database (``archive.get``/``archive.list`` for the HTTP API).
ARCHIVE_KEY = web.AppKey("archive", Archive)
#: Room chat lists (see chat.py).
CHAT_KEY = web.AppKey("chat", ChatStore)
#: Seeks and the lobby (see seeks.py).
SEEKS_KEY = web.AppKey("seeks", Seeks)
#: Per-message deflate on WebSocket frames (off by default: see docs/operations.md).
WS_COMPRESSION_KEY = web.AppKey("ws_compression", bool)
