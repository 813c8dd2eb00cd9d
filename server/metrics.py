"""The node's Prometheus metrics (``GET /metrics``): connections, messages, errors, moves,
the pub/sub listener's health and the node loops' restarts, in one registry per
application."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.connections = Gauge(
            "kibitz_connections", "open WebSocket connections", registry=self.registry
        )
        self.messages = Counter(
            "kibitz_messages_total", "client messages by type", ["type"], registry=self.registry
        )
        self.errors = Counter(
            "kibitz_errors_total", "errors sent by code", ["code"], registry=self.registry
        )
        self.moves = Counter("kibitz_moves_total", "moves committed", registry=self.registry)
        self.ai_moves = Counter(
            "kibitz_ai_moves_total", "worker results applied", registry=self.registry
        )
        self.fanout_live = Gauge(
            "kibitz_fanout_live",
            "1 while the node's pub/sub listener hears its own probes, else 0",
            registry=self.registry,
        )
        self.fanout_reconnects = Gauge(
            "kibitz_fanout_resubscriptions",
            "times the pub/sub listener subscribed again after a failure",
            registry=self.registry,
        )
        self.fanout_rooms = Gauge(
            "kibitz_fanout_rooms",
            "rooms whose channel the node subscribes to (those it has followers for)",
            registry=self.registry,
        )
        self.fanout_room_messages = Gauge(
            "kibitz_fanout_room_messages",
            "room updates the node's pub/sub listener has received",
            registry=self.registry,
        )
        self.fallback_moves = Counter(
            "kibitz_fallback_moves_total",
            "AI moves the server played itself after a failed job",
            registry=self.registry,
        )
        self.loop_restarts = Counter(
            "kibitz_loop_restarts_total",
            "times a node loop was started again after it failed (server/loops/supervisor.py)",
            ["loop"],
            registry=self.registry,
        )
        self.loops_up = Gauge(
            "kibitz_loops_up",
            "node loops running now (not backing off after a failure, finished or stopped)",
            registry=self.registry,
        )
        self._message_counts: dict[type, Any] = {}  # message class -> its labelled counter

    def count_message(self, message: object) -> None:
        """One more client message of its type (the labelled counter looked up once)."""
        counter = self._message_counts.get(type(message))
        if counter is None:
            counter = self.messages.labels(type(message).__name__.lower())
            self._message_counts[type(message)] = counter
        counter.inc()
