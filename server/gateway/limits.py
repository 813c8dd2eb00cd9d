"""Per-address limits, counted in Redis so that every node of a cluster sees the same totals.

One address (one person, or one abuser with a script) must not be able to take a node's
connections, the store's memory or the AI workers from everybody else. The counts live in
Redis, not in a node, because a load balancer spreads one address's connections over all
nodes. Every key here expires on its own: nothing grows without bound.

Keys (``kibitz:`` prefix):

- ``addr:{address}:conns``   hash: node -> open WebSocket connections from that address on
                             that node; only live nodes (heartbeat keys) count, so a node
                             that dies does not hold its clients' places for ever
- ``addr:{address}:creates``  sorted set: one member per room counted, scored by when
                             (Redis time, ms); members older than a minute are dropped
                             as it is counted, so it holds at most the budget, and the key
                             expires a minute after the last room

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

import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.keys import NODES


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
    """The client's address as the per-address limits count it (:func:`address_group`):
    the peer, or, behind a trusted proxy, the address it saw.

    Only the last hop of ``X-Forwarded-For`` is used: that is the one our own proxy
    appended; anything before it came from the client and can be forged.
    """
    peer = remote or "unknown"
    if peer in trusted_proxies:
        forwarded = headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            try:
                return address_group(str(ipaddress.ip_address(last)))
            except ValueError:
                pass
    return address_group(peer)


def address_group(address: str) -> str:
    """What a client address is counted as by the per-address limits: an IPv6 address as
    its /64 (``2001:db8:1:2::/64``: one subscriber's network, in which a host picks new
    addresses at will), an IPv4-mapped one as its IPv4 address, anything else as is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return address


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
    return keys.address_connections_key(address)


def creates_key(address: str) -> str:
    return keys.address_creates_key(address)


_HANDLE_SEP = " "  # between the key and the member in count_create's answer


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

# KEYS: the address's room log; ARGV: window ms, limit, member. Drops the rooms counted
# before the window, then counts this one (now, by Redis's clock, the same for every
# node) unless the window's budget is spent (then counts nothing and returns -count).
_COUNT_CREATE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[2]) then return -count end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return count + 1
"""

# KEYS: the address's room log; ARGV: the member of the room given back (gone already:
# nothing happens, so a second refund of one room gives back nothing).
_REFUND_CREATE = """
return redis.call('ZREM', KEYS[1], ARGV[1])
"""

CREATES_WINDOW_MS = 60_000  # the budget is per this span, sliding

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
        made comes through here); LimitExceeded ``rate/limited`` past the budget of the
        last minute, and then nothing is counted. Returns the count's handle (opaque),
        for :meth:`refund_create`."""
        key = creates_key(address)
        member = secrets.token_hex(8)
        limit = self.limits.creates_per_minute
        count = int(await self._count_create(keys=[key], args=[CREATES_WINDOW_MS, limit, member]))
        if count < 0:
            raise LimitExceeded("rate/limited", f"at most {limit} new rooms a minute per address")
        return f"{key}{_HANDLE_SEP}{member}"

    async def refund_create(self, counted: str) -> None:
        """Give back a room counted by :meth:`count_create` (``counted``, its answer) that
        was not made after all; once only (a second refund of it gives back nothing)."""
        key, _, member = counted.rpartition(_HANDLE_SEP)
        if key:
            await self._refund_create(keys=[key], args=[member])
