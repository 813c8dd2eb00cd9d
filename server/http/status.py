"""``/healthz`` and ``/api/status``: whether this node can serve, and the cluster's state.

It decides what anybody may learn of a node and its cluster: ``/healthz`` (Redis, the
fan-out listener, draining, the node's loops) and ``/api/status`` (queues, workers under
opaque ids, nodes, archive backlog, analyses, live rooms), and that neither names an
address.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from typing import Any

from aiohttp import web

from kibitz.server.appkeys import (
    CONFIG_KEY,
    HUB_KEY,
    NODE_KEY,
    REDIS_KEY,
    STATUS_KEY,
    SUPERVISOR_KEY,
)
from kibitz.shared.bus.cluster import cluster_status
from kibitz.shared.bus.connect import ping
from kibitz.shared.bus.errors import BusError


def register(app: web.Application) -> None:
    """Add the routes of this module to ``app``."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/api/status", api_status)


async def healthz(request: web.Request) -> web.Response:
    """200 when this node can serve: Redis answers, the fan-out listener is live and the
    node is not shutting down. ``loops``: each node loop's state, restarts and last error
    type (server/loops/supervisor.py), which do not change the status.

    It names no addresses: it is often reachable from outside.
    """
    timeout = request.app[CONFIG_KEY].health_timeout_s
    try:
        await asyncio.wait_for(ping(request.app[REDIS_KEY]), timeout=timeout)
        redis_ok = True
    except (BusError, OSError, TimeoutError):
        redis_ok = False
    hub = request.app[HUB_KEY]
    fanout_ok = hub.healthy
    body: dict[str, Any] = {
        "ok": redis_ok and fanout_ok and not hub.draining,  # draining: shutting down
        "redis": "ok" if redis_ok else "unavailable",
        "fanout": "ok" if fanout_ok else "stale",
        "node": request.app[NODE_KEY],
    }
    if hub.draining:
        body["draining"] = True
    body["loops"] = request.app[SUPERVISOR_KEY].status()
    return web.json_response(body, status=200 if body["ok"] else 503)


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
