"""Fixtures of the services' tests: two real server nodes on the session's Redis, shared
by a test module (chat and seeks cross between nodes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server


@pytest.fixture(scope="module")
def nodes(redis_server: EmbeddedRedis) -> Iterator[list[ServerProcess]]:
    processes = [start_server(redis_server.url), start_server(redis_server.url)]
    yield processes
    for process in processes:
        process.stop()
