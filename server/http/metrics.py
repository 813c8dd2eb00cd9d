"""``/metrics``: the node's Prometheus metrics (server/metrics.py holds them).

It decides when the gauges are read: at each scrape, from the hub (connections, the
fan-out listener) and the supervisor (loops up); the counters count as things happen.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from kibitz.server.appkeys import HUB_KEY, METRICS_KEY, SUPERVISOR_KEY


def register(app: web.Application) -> None:
    """Add the route of this module to ``app``."""
    app.router.add_get("/metrics", metrics)


async def metrics(request: web.Request) -> web.Response:
    """The node's Prometheus metrics, the gauges read from the hub and the supervisor."""
    m = request.app[METRICS_KEY]
    hub = request.app[HUB_KEY]
    m.connections.set(len(hub.connections))
    m.fanout_live.set(1 if hub.healthy else 0)
    m.fanout_reconnects.set(hub.reconnects)
    m.fanout_rooms.set(hub.subscribed_rooms)
    m.fanout_room_messages.set(hub.room_messages)
    m.loops_up.set(request.app[SUPERVISOR_KEY].up)
    return web.Response(
        body=generate_latest(m.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
    )
