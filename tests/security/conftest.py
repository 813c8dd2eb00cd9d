"""The attack suite: each test is an attack from outside, as a hostile user would make it,
against a real ``kibitz serve`` on loopback (real Redis, real sockets). Every attack here
must keep failing; a test that passes means the defence held.

One attack needs a clock-minute boundary (test_rooms_budget.py's
``test_the_room_budget_holds_across_a_minute_boundary``): its rooms are made by
:func:`boundary_rooms`, started with the package's first test, so the wait for the boundary
(up to a minute) passes while the other attacks run.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server

BOUNDARY_BUDGET = 5  # rooms a minute per address, on the boundary test's node
BOUNDARY_TEST = "test_the_room_budget_holds_across_a_minute_boundary"
BOUNDARY_ADDRESS = "127.0.0.61"


async def rooms_made_across_a_boundary(
    node: ServerProcess, unwanted: threading.Event
) -> list[float]:
    """Rooms made from one address as fast as allowed, from a little before a clock-minute
    boundary to a little after it: when each was made (none if ``unwanted`` is set during
    the wait for the boundary)."""
    before = 3.0  # start this long before a minute boundary, go on as long after it
    wait = (60 - before - time.time() % 60) % 60  # the one wait: at most a minute
    if await asyncio.to_thread(unwanted.wait, wait):
        return []
    made: list[float] = []
    async with await KibitzClient.open(node.http_url, local_addr=(BOUNDARY_ADDRESS, 0)) as c:
        stop = time.time() + 2 * before
        for _ in range(200):  # bounded: 0.05 s apart over 2 x ``before``
            if time.time() >= stop:
                break
            with contextlib.suppress(ServerError):  # refused: over the budget
                await c.create("tictactoe")
                made.append(time.time())
            await asyncio.sleep(0.05)
    return made


@pytest.fixture(scope="package", autouse=True)
def boundary_rooms(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Future[list[float]] | None]:
    """:func:`rooms_made_across_a_boundary` in a thread of its own, from the package's first
    test on, when the boundary test is among those that run (else None). It has a node and
    a Redis of its own, so its rooms show in no other test's lists or counts. When the
    package ends without that test having waited for it, the wait is cut short."""
    if not any(item.name == BOUNDARY_TEST for item in request.session.items):
        yield None
        return
    redis_server = EmbeddedRedis(tmp_path_factory.mktemp("boundary-redis"), persist=False)
    redis_server.start()
    env = {"KIBITZ_MAX_CREATES_PER_MINUTE": str(BOUNDARY_BUDGET)}
    server = start_server(redis_server.url, extra_env=env)
    unwanted = threading.Event()
    try:
        with ThreadPoolExecutor(1) as pool:
            yield pool.submit(asyncio.run, rooms_made_across_a_boundary(server, unwanted))
            unwanted.set()
    finally:
        server.stop()
        redis_server.stop()
