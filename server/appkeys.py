"""The keys under which the node's parts live in the aiohttp application.

The composition root (server/node.py) puts each part under its key; the handlers
(server/http/, server/gateway/) and ``kibitz serve`` read them back with ``app[KEY]``.
The parts' types are imported for the type checker only: at run time this module imports
nothing of the server, so every layer that reads a key may import it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from kibitz.server.accounts.service import AccountService
    from kibitz.server.archive.database import Archive
    from kibitz.server.config import NodeConfig
    from kibitz.server.fanout.hub import Hub
    from kibitz.server.loops.supervisor import Supervisor
    from kibitz.server.metrics import Metrics
    from kibitz.server.moderation.service import Moderation
    from kibitz.server.ratings.store import RatingStore
    from kibitz.server.services.analysis import AnalysisQueue
    from kibitz.server.services.chat import ChatStore
    from kibitz.server.services.limits import AddressLimiter, Limits
    from kibitz.server.services.room_store import RoomStore
    from kibitz.server.services.rooms import RoomService
    from kibitz.server.services.seeks import Seeks
    from kibitz.shared.bus.chat import ChatLog
    from kibitz.shared.bus.connect import AsyncClient
    from kibitz.shared.bus.lobby import LiveRooms
    from kibitz.shared.bus.throttle import Throttle

STORE_KEY: web.AppKey[RoomStore] = web.AppKey("store")
SERVICE_KEY: web.AppKey[RoomService] = web.AppKey("service")
HUB_KEY: web.AppKey[Hub] = web.AppKey("hub")
REDIS_KEY: web.AppKey[AsyncClient] = web.AppKey("redis")
NODE_KEY = web.AppKey("node", str)
#: The node's configuration (server/config.py), as it was built once.
CONFIG_KEY: web.AppKey[NodeConfig] = web.AppKey("config")
#: The node's loops and their health (server/loops/supervisor.py).
SUPERVISOR_KEY: web.AppKey[Supervisor] = web.AppKey("supervisor")
#: The origins of the node's own listening address (used while no public origin is set).
LISTENING_ORIGINS_KEY = web.AppKey("listening_origins", set[str])
#: The key that turns worker names into the opaque ids ``/api/status`` shows.
STATUS_KEY = web.AppKey("status_key", bytes)
METRICS_KEY: web.AppKey[Metrics] = web.AppKey("metrics")
LIMITS_KEY: web.AppKey[Limits] = web.AppKey("limits")
LIMITER_KEY: web.AppKey[AddressLimiter] = web.AppKey("limiter")
#: The finished-games database (``archive.get``/``archive.list`` for the HTTP API).
ARCHIVE_KEY: web.AppKey[Archive] = web.AppKey("archive")
#: Room chat lists (see server/services/chat.py).
CHAT_KEY: web.AppKey[ChatStore] = web.AppKey("chat")
#: The bus's chat lists, which ``CHAT_KEY`` writes through and game records read.
CHAT_LOG_KEY: web.AppKey[ChatLog] = web.AppKey("chat_log")
#: The bus's reader of the live-rooms index (``GET /api/rooms``).
LIVE_ROOMS_KEY: web.AppKey[LiveRooms] = web.AppKey("live_rooms")
#: Analyses asked for and under way (``/api/games/{id}/analysis``).
ANALYSIS_KEY: web.AppKey[AnalysisQueue] = web.AppKey("analysis")
#: Seeks and the lobby (see server/services/seeks.py).
SEEKS_KEY: web.AppKey[Seeks] = web.AppKey("seeks")
#: Per-message deflate on WebSocket frames (off by default: see docs/operations.md).
WS_COMPRESSION_KEY = web.AppKey("ws_compression", bool)
#: Blocks, reports, mutes, marks, bans and abandonments (server/moderation/service.py).
MODERATION_KEY: web.AppKey[Moderation] = web.AppKey("moderation")
#: Accounts, their sessions and API tokens (server/accounts/service.py).
ACCOUNTS_KEY: web.AppKey[AccountService] = web.AppKey("accounts")
#: Glicko-2 ratings: seat ratings, the exactly-once apply, history (server/ratings/store.py).
RATINGS_KEY: web.AppKey[RatingStore] = web.AppKey("ratings")
#: Log-in and sign-up throttles counted in Redis (shared/bus/throttle.py).
THROTTLE_KEY: web.AppKey[Throttle] = web.AppKey("throttle")

#: Requests the edge (server/gateway/edge.py) serves itself instead of handing them to
#: aiohttp: whether a request head is one of them, and what takes its connection over
#: (the Bot API's event streams, server/botapi/events.py; set by server/node.py). Held
#: here so that the gateway needs no import of the package that serves them.
EdgeHandover = tuple[
    Callable[[bytes], bool], Callable[[web.Application, asyncio.Transport, bytes], None]
]
EDGE_HANDOVER_KEY: web.AppKey[EdgeHandover] = web.AppKey("edge_handover")
