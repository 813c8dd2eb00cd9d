"""Fixtures shared by the server's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kibitz.server.archive.database import Archive
from tests.conftest import new_postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
async def archive(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Archive]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'games.sqlite3'}"
    else:
        url = new_postgres_database(request.getfixturevalue("postgres"))
    opened = await Archive.open(url)
    yield opened
    await opened.close()
