"""How a node connects to Redis for commands: :func:`command_client`.

It decides the node's client: its one-shot commands share one pipelined connection (the
:class:`~kibitz.shared.bus.link.RedisLink`); blocking reads and transactions use a
bounded pool; every command has a timeout; and which failures are retried (a broken
connection, on a fresh one) and which are not (a timeout: the command may have run).
"""

from __future__ import annotations

from typing import TypeAlias

import redis
import redis.asyncio as aioredis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from kibitz.shared.bus.link import Address, LinkedRedis, RedisLink

#: The clients the bus runs on, named here so that code outside the bus, which hands
#: them over, never imports redis-py: a node's (asyncio) and a worker's (blocking).
AsyncClient: TypeAlias = aioredis.Redis
BlockingClient: TypeAlias = redis.Redis

REDIS_TIMEOUT_S = 5.0  # a command's timeout
REDIS_POOL_SIZE = 128  # Redis connections per node for commands (the listener has its own)
REDIS_POOL_WAIT_S = 20.0  # longest wait for a free pooled connection


def command_client(
    redis_url: str,
    pool_size: int = REDIS_POOL_SIZE,
    timeout_s: float = REDIS_TIMEOUT_S,
    wait_s: float = REDIS_POOL_WAIT_S,
) -> LinkedRedis:
    """The node's Redis client for commands.

    Its one-shot commands (a move's commit, presence, chat, limits) share one pipelined
    connection. Blocking reads and transactions use a pool of at most ``pool_size``
    connections that waits for a free one (up to ``wait_s``) instead of failing or
    growing without limit.

    Commands time out (``timeout_s``), so a hung Redis gives errors, not hung handlers. A
    command whose connection broke (a Redis restart leaves stale connections) is retried
    on a fresh one; a command that timed out is not, since it may have run: every write
    is versioned or counted, and running it twice could count twice.
    """
    pool = BlockingConnectionPool.from_url(
        redis_url,
        max_connections=pool_size,
        timeout=wait_s,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(
            ExponentialBackoff(cap=0.5, base=0.05), 2, supported_errors=(aioredis.ConnectionError,)
        ),
    )
    link = RedisLink(Address.from_url(redis_url), timeout_s, wait_s=wait_s)
    return LinkedRedis(pool, link)


async def ping(client: AsyncClient) -> None:
    """Check that Redis answers (raises the bus's errors if it does not)."""
    await client.ping()
