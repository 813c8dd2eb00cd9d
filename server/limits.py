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
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

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


def origin_allowed(headers: Mapping[str, str], allowed: frozenset[str]) -> bool:
    """Browsers send ``Origin`` on a WebSocket handshake; other clients usually do not.

    A page on another site must not open sockets in its visitors' names (cross-site
    WebSocket hijacking), so by default only our own origin is accepted.
    """
    origin = headers.get("Origin")
    if origin is None or "*" in allowed or origin in allowed:
        return True
    host = headers.get("Host", "")
    return origin in (f"http://{host}", f"https://{host}")


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

#: One minute's room creations from one address; the key lives two minutes.
_COUNT_CREATE = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return count
"""

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

    async def count_create(self, address: str) -> None:
        """Count a room creation; LimitExceeded past the per-minute limit."""
        minute = int(time.time() // 60)
        key = f"{PREFIX}addr:{address}:creates:{minute}"
        count = int(await self._count_create(keys=[key], args=[120]))
        if count > self.limits.creates_per_minute:
            raise LimitExceeded(
                "rate/limited",
                f"at most {self.limits.creates_per_minute} new rooms a minute per address",
            )
