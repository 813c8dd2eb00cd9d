"""Per-address limits, counted in Redis so that every node of a cluster sees the same totals.

One address (one person, or one abuser with a script) must not be able to take a node's
connections, the store's memory or the AI workers from everybody else. The counts live in
Redis, not in a node, because a load balancer spreads one address's connections over all
nodes. Every key here expires on its own: nothing grows without bound.

Keys (``kibitz:`` prefix):

- ``addr:{address}:conns``   hash: node -> open WebSocket connections from that address on
                             that node; only live nodes (heartbeat keys) count, so a node
                             that dies does not hold its clients' places for ever
- ``addr:{address}:creates:{minute}``  counter of rooms created in that minute (TTL 2 min)

**The room budget.** Every room a client causes costs its address one of
``creates_per_minute`` a minute, through :meth:`AddressLimiter.count_create`: a ``create``,
a seek posted (a room offered: its poster pays when posting), an accepted seek (the
acceptor pays), an agreed rematch (the room's owner, the address that made the first room
of the series, pays). Past the budget the request is refused (``rate/limited``) and
counted nothing; a count whose room was not made after all (the seek was gone) is given
back with :meth:`AddressLimiter.refund_create`.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import redis.asyncio as aioredis

from kibitz.server.store import NODES, PREFIX


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
    #: address on loopback (see :func:`listening_origins`).
    public_origins: frozenset[str] = field(default_factory=frozenset)


class LimitExceeded(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def client_address(
    remote: str | None, headers: Mapping[str, str], trusted_proxies: frozenset[str]
) -> str:
    """The client's address: the peer, or, behind a trusted proxy, the address it saw.

    Only the last hop of ``X-Forwarded-For`` is used: that is the one our own proxy
    appended; anything before it came from the client and can be forged.
    """
    peer = remote or "unknown"
    if peer in trusted_proxies:
        forwarded = headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            try:
                return str(ipaddress.ip_address(last))
            except ValueError:
                pass
    return peer


def origin_allowed(
    headers: Mapping[str, str], allowed: frozenset[str], own: frozenset[str]
) -> bool:
    """Browsers send ``Origin`` on a WebSocket handshake; other clients usually do not.

    A page on another site must not open sockets in its visitors' names (cross-site
    WebSocket hijacking), so only the site's own origins (``own``: the configured public
    origins, else the node's loopback address) and those ``allowed`` are accepted. The
    ``Host`` header is not believed: a page of a host name that resolves to this node (DNS
    rebinding) sends a matching ``Host`` and ``Origin`` of its own.
    """
    origin = headers.get("Origin")
    if origin is None or "*" in allowed:
        return True
    origin = normal_origin(origin)
    return origin in own or origin in allowed


def normal_origin(origin: str) -> str:
    """An origin as browsers send it: lower case, no trailing slash, no default port."""
    origin = origin.strip().rstrip("/").lower()
    for scheme, port in (("http://", ":80"), ("https://", ":443")):
        if origin.startswith(scheme) and origin.endswith(port):
            return origin.removesuffix(port)
    return origin


def parse_origin(text: str) -> str:
    """A configured origin (``--public-origin``, ``--allow-origin``): ``scheme://host[:port]``
    and nothing more; ValueError otherwise."""
    if text == "*":
        return text
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"not an origin (scheme://host[:port]): {text!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"not an origin (scheme://host[:port]): {text!r}")
    return normal_origin(text)


def listening_origins(host: str, port: int) -> frozenset[str]:
    """The origins of pages the node itself serves to a browser on its own machine, when no
    public origin is configured: its loopback names and address with its port (bound to
    loopback or to every address), or the address it is bound to."""
    suffix = "" if port == 80 else f":{port}"
    try:
        bound = ipaddress.ip_address(host.strip("[]"))
    except ValueError:  # a host name: the pages it serves come from that name
        return frozenset({f"http://{host.lower()}{suffix}"})
    names = {f"http://[{bound}]{suffix}" if bound.version == 6 else f"http://{bound}{suffix}"}
    if bound.is_loopback or bound.is_unspecified:
        names |= {f"http://localhost{suffix}", f"http://127.0.0.1{suffix}", f"http://[::1]{suffix}"}
    return frozenset(names)


def conns_key(address: str) -> str:
    return f"{PREFIX}addr:{address}:conns"


# KEYS: the address's connection hash; ARGV: node, limit, node key prefix, ttl seconds.
# Counts this connection in, then totals the live nodes' counts (dropping dead nodes'
# fields); over the limit it counts the connection out again and returns -total.
_CONNECT = """
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('EXPIRE', KEYS[1], ARGV[4])
local total = 0
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local node = entries[i]
  if node == ARGV[1] or redis.call('EXISTS', ARGV[3] .. node) == 1 then
    total = total + tonumber(entries[i + 1])
  else
    redis.call('HDEL', KEYS[1], node)
  end
end
if total > tonumber(ARGV[2]) then
  if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
    redis.call('HDEL', KEYS[1], ARGV[1])
  end
  return -total
end
return total
"""

# KEYS: the address's connection hash; ARGV: node.
_DISCONNECT = """
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
"""

# KEYS: one minute's room counter of an address; ARGV: TTL s, limit. Counts one more
# room unless the minute's budget is spent (then counts nothing and returns -count).
_COUNT_CREATE = """
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count >= tonumber(ARGV[2]) then return -count end
count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return count
"""

# KEYS: the counter a room was counted in. Gives that room back (never below zero).
_REFUND_CREATE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then redis.call('DECR', KEYS[1]) end
return 1
"""

CREATES_TTL_S = 120  # a minute's counter outlives its minute

CONNS_TTL_S = 86_400  # a key nobody touches for a day is gone even if a node miscounted


class AddressLimiter:
    """The cluster-wide per-address counters of one node."""

    def __init__(self, redis: aioredis.Redis, node: str, limits: Limits) -> None:
        self.redis = redis
        self.node = node
        self.limits = limits
        self._connect = redis.register_script(_CONNECT)
        self._disconnect = redis.register_script(_DISCONNECT)
        self._count_create = redis.register_script(_COUNT_CREATE)
        self._refund_create = redis.register_script(_REFUND_CREATE)

    async def connect(self, address: str) -> None:
        """Count a new connection; LimitExceeded past the per-address limit."""
        total = int(
            await self._connect(
                keys=[conns_key(address)],
                args=[self.node, self.limits.connections_per_address, NODES, CONNS_TTL_S],
            )
        )
        if total < 0:
            raise LimitExceeded(
                "rate/connections",
                f"at most {self.limits.connections_per_address} connections per address",
            )

    async def disconnect(self, address: str) -> None:
        await self._disconnect(keys=[conns_key(address)], args=[self.node])

    async def count_create(self, address: str) -> str:
        """Count a room that ``address`` causes (see the module doc: every way a room is
        made comes through here); LimitExceeded ``rate/limited`` past the per-minute
        budget, and then nothing is counted. Returns the counter's key, for
        :meth:`refund_create`."""
        key = f"{PREFIX}addr:{address}:creates:{int(time.time() // 60)}"
        limit = self.limits.creates_per_minute
        count = int(await self._count_create(keys=[key], args=[CREATES_TTL_S, limit]))
        if count < 0:
            raise LimitExceeded("rate/limited", f"at most {limit} new rooms a minute per address")
        return key

    async def refund_create(self, key: str) -> None:
        """Give back a room counted by :meth:`count_create` (``key``, its answer) that
        was not made after all."""
        await self._refund_create(keys=[key])
