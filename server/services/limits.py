"""Per-address limits, counted in Redis so that every node of a cluster sees the same totals.

One address (one person, or one abuser with a script) must not be able to take a node's
connections, the store's memory or the AI workers from everybody else. This module decides
the limits (:class:`Limits`) and what happens past them (:class:`LimitExceeded`, with
today's codes); the counts live in Redis, not in a node, because a load balancer spreads
one address's connections over all nodes: the bus's
:class:`~kibitz.shared.bus.limits.AddressCounters` keeps them (its keys expire on their
own: nothing grows without bound). Who counts as one address, and which origins may open
WebSockets, is the gateway's (:mod:`kibitz.server.gateway.limits`).

**The room budget.** Every room a client causes costs its address one of
``creates_per_minute`` in any 60 seconds (a sliding minute, not a clock minute: rooms made
just before and just after a minute boundary count together), through
:meth:`AddressLimiter.count_create`: a ``create``,
a seek posted (a room offered: its poster pays when posting), an accepted seek (the
acceptor pays), an agreed rematch (the room's owner, the address that made the first room
of the series, pays). Past the budget the request is refused (``rate/limited``) and
counted nothing; a count whose room was not made after all (the seek was gone) is given
back with :meth:`AddressLimiter.refund_create`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kibitz.shared.bus.limits import AddressCounters


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client address may use, and who may open WebSockets at all."""

    connections_per_address: int = 200
    creates_per_minute: int = 60  # rooms created per address per minute, all nodes
    ai_games_per_address: int = 8  # unfinished rooms with an AI seat per address
    #: Origins allowed to open a WebSocket besides the page's own; "*" allows any.
    allowed_origins: frozenset[str] = field(default_factory=frozenset)
    #: Peers whose X-Forwarded-For header is believed (the load balancers in front).
    trusted_proxies: frozenset[str] = field(default_factory=frozenset)
    #: The site's own origins (``https://games.example``); none: the node's own listening
    #: address on loopback (see
    #: :func:`kibitz.server.gateway.limits.listening_origins`).
    public_origins: frozenset[str] = field(default_factory=frozenset)


class LimitExceeded(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


CREATES_WINDOW_MS = 60_000  # the budget is per this span, sliding


class AddressLimiter:
    """The per-address limits of one node, decided here and counted by the bus's
    :class:`~kibitz.shared.bus.limits.AddressCounters` (cluster-wide)."""

    def __init__(self, counters: AddressCounters, limits: Limits) -> None:
        self.counters = counters
        self.limits = limits

    async def connect(self, address: str) -> None:
        """Count a new connection; LimitExceeded past the per-address limit."""
        limit = self.limits.connections_per_address
        if not (await self.counters.connect(address, limit)).admitted:
            raise LimitExceeded("rate/connections", f"at most {limit} connections per address")

    async def disconnect(self, address: str) -> None:
        await self.counters.disconnect(address)

    async def count_create(self, address: str) -> str:
        """Count a room that ``address`` causes (see the module doc: every way a room is
        made comes through here); LimitExceeded ``rate/limited`` past the budget of the
        last minute, and then nothing is counted. Returns the count's handle (opaque),
        for :meth:`refund_create`."""
        limit = self.limits.creates_per_minute
        counted = await self.counters.count_create(address, limit, CREATES_WINDOW_MS)
        if not counted.admitted:
            raise LimitExceeded("rate/limited", f"at most {limit} new rooms a minute per address")
        return counted.handle

    async def refund_create(self, counted: str) -> None:
        """Give back a room counted by :meth:`count_create` (``counted``, its answer) that
        was not made after all; once only (a second refund of it gives back nothing)."""
        await self.counters.refund_create(counted)
