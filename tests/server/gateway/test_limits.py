"""Per-address limits across nodes, the Origin allow-list, the bounded Redis pool and the
embedded Redis's file modes: real servers, real Redis, real sockets on loopback."""

from __future__ import annotations

import asyncio
import json
import stat
import time

import pytest
import redis
import websockets

from kibitz.client.connection import KibitzClient, ServerError, ws_url
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import start_server

pytestmark = pytest.mark.asyncio


@pytest.fixture
def private_redis(tmp_path):
    server = EmbeddedRedis(tmp_path / "redis").start()
    yield server
    server.stop()


async def refused_status(url: str, **kwargs) -> tuple[int, dict]:
    """Open a WebSocket that the server must refuse; its HTTP status and JSON body."""
    with pytest.raises(websockets.InvalidStatus) as info:
        await websockets.connect(ws_url(url), **kwargs)
    response = info.value.response
    return response.status_code, json.loads(response.body)


async def test_connections_per_address_are_counted_across_nodes(private_redis) -> None:
    env = {"KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "5"}
    a, b = (
        start_server(private_redis.url, extra_env=env),
        start_server(private_redis.url, extra_env=env),
    )
    clients: list[KibitzClient] = []
    try:
        clients += [await KibitzClient.open(a.http_url) for _ in range(3)]
        clients += [await KibitzClient.open(b.http_url) for _ in range(2)]
        for node in (a, b):
            status, body = await refused_status(node.http_url)
            assert status == 429
            assert body["type"] == "error" and body["code"] == "rate/connections"
        # Another address is not affected.
        other = await KibitzClient.open(a.http_url, local_addr=("127.0.0.2", 0))
        clients.append(other)
        await other.request({"type": "ping"})
        # A closed connection gives its place back, on any node.
        await clients.pop(0).close()
        deadline = time.monotonic() + 5
        while True:
            try:
                clients.append(await KibitzClient.open(b.http_url))
                break
            except websockets.InvalidStatus:
                assert time.monotonic() < deadline, "the closed connection was never counted out"
                await asyncio.sleep(0.05)
        await refused_status(b.http_url)
    finally:
        for client in clients:
            await client.close()
        a.stop()
        b.stop()
    # Nothing is left behind once everyone has gone.
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    deadline = time.monotonic() + 5
    while r.keys("kibitz:addr:*:conns"):
        assert time.monotonic() < deadline, r.keys("kibitz:addr:*")
        time.sleep(0.05)


async def test_room_creations_per_address_are_limited(private_redis) -> None:
    node = start_server(private_redis.url, extra_env={"KIBITZ_MAX_CREATES_PER_MINUTE": "3"})
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    try:
        async with await KibitzClient.open(node.http_url) as c1:
            async with await KibitzClient.open(node.http_url) as c2:
                await c1.create("tictactoe")
                await c2.create("tictactoe")
                await c1.create("tictactoe")
                before = r.zcard("kibitz:rooms:live")
                with pytest.raises(ServerError) as info:
                    await c2.create("tictactoe")
                assert info.value.code == "rate/limited"
                assert r.zcard("kibitz:rooms:live") == before  # nothing was created
                async with await KibitzClient.open(
                    node.http_url, local_addr=("127.0.0.3", 0)
                ) as other:
                    await other.create("tictactoe")  # another address still may
    finally:
        node.stop()


async def test_websockets_from_other_origins_are_refused(private_redis) -> None:
    node = start_server(
        private_redis.url, extra_env={"KIBITZ_ALLOW_ORIGINS": "https://friends.example"}
    )
    try:
        status, body = await refused_status(node.http_url, origin="https://evil.example")
        assert status == 403 and body["code"] == "auth/origin"
        host = node.http_url.removeprefix("http://")
        for origin in (f"http://{host}", "https://friends.example", None):
            kwargs = {"origin": origin} if origin else {}
            async with await KibitzClient.open(node.http_url, **kwargs) as client:
                await client.request({"type": "ping"})
    finally:
        node.stop()


async def test_redis_connections_stay_bounded_under_600_simultaneous_watches(
    private_redis,
) -> None:
    node = start_server(private_redis.url, extra_env={"KIBITZ_REDIS_POOL": "16"})
    r = redis.Redis.from_url(private_redis.url, decode_responses=True)
    clients: list[KibitzClient] = []
    try:
        async with await KibitzClient.open(node.http_url) as owner:
            room = (await owner.create("tictactoe"))["room"]
            for _ in range(6):
                batch = await asyncio.gather(
                    *(KibitzClient.open(node.http_url) for _ in range(100))
                )
                clients += batch
            peak = 0

            async def sample() -> None:
                nonlocal peak
                while True:
                    peak = max(peak, len(r.client_list()) - 1)  # less this sampler
                    await asyncio.sleep(0.01)

            sampler = asyncio.create_task(sample())
            states = await asyncio.gather(*(c.watch(room) for c in clients))
            sampler.cancel()
            assert all(s["room"] == room for s in states)  # every watch answered, no error
            # The pool (16), the fan-out listener and the results consumer's blocking read.
            print(f"peak Redis connections of the node: {peak}")
            assert peak <= 16 + 4, f"{peak} Redis connections"
    finally:
        await asyncio.gather(*(c.close() for c in clients))
        node.stop()


async def test_embedded_redis_files_are_private(tmp_path) -> None:
    data = tmp_path / "redis"
    data.mkdir(mode=0o755)
    with EmbeddedRedis(data) as server:
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        client.close()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    files = [p for p in data.rglob("*")]
    assert any(p.name.startswith("appendonly") for p in files)
    for path in files:
        expected = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (path, oct(path.stat().st_mode))
        assert stat.S_IMODE(path.stat().st_mode) & expected
