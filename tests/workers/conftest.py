"""Fixtures of the worker tests: a private Redis per test (these tests kill, freeze and
count workers, so they must not share a queue with anything else)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kibitz.shared.bus.embedded import EmbeddedRedis


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis").start()
    yield server
    server.stop()
