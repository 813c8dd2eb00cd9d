"""Fixtures of the bus's tests: the node's own kind of client (the pipelined link) on
the module's private Redis (``own_redis``, tests/conftest.py), emptied for each test. A
module that needs another client defines its own ``client``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kibitz.shared.bus.connect import command_client
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.link import LinkedRedis


@pytest.fixture
async def client(own_redis: EmbeddedRedis) -> AsyncIterator[LinkedRedis]:
    """The node's own kind of client (pipelined link), on an empty Redis."""
    redis = command_client(own_redis.url)
    await redis.flushall()
    yield redis
    await redis.aclose()
