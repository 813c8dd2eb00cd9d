"""``/healthz`` tells the truth about a node's Redis and fan-out, and names no address."""

from __future__ import annotations

import asyncio
import signal
import time

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import start_server

pytestmark = pytest.mark.asyncio


async def health(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url + "/healthz", timeout=aiohttp.ClientTimeout(total=5)) as r:
            return r.status, await r.json()


async def wait_for_health(url: str, status: int, within: float) -> tuple[float, dict]:
    started = time.monotonic()
    while True:
        code, body = await health(url)
        if code == status:
            return time.monotonic() - started, body
        assert time.monotonic() - started < within, f"healthz stayed {code}: {body}"
        await asyncio.sleep(0.1)


async def test_healthz_follows_a_frozen_redis_and_the_node_delivers_after(tmp_path) -> None:
    redis = EmbeddedRedis(tmp_path / "redis").start()
    node = start_server(redis.url)
    assert redis.process is not None
    try:
        code, body = await health(node.http_url)
        assert code == 200 and body["ok"] and body["fanout"] == "ok"
        a = await KibitzClient.open(node.http_url)
        b = await KibitzClient.open(node.http_url)
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        redis.process.send_signal(signal.SIGSTOP)
        try:
            took, body = await wait_for_health(node.http_url, 503, within=6)
            assert body["ok"] is False
            text = str(body)
            assert "127.0.0.1" not in text and str(redis.port) not in text
        finally:
            redis.process.send_signal(signal.SIGCONT)
        took, _ = await wait_for_health(node.http_url, 200, within=10)
        await a.move(room, "5")
        state = await b.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=5)
        assert [m["move"] for m in state["moves"]] == ["5"]
        await a.close()
        await b.close()
    finally:
        node.stop()
        redis.stop()


#: The loops every node runs under its supervisor (server/node.py, server/cli/serve.py).
NODE_LOOPS = {
    "fanout-listener", "fanout-probe", "fanout-unsubscriber", "fanout-pings", "results",
    "heartbeat", "archiver", "lobby", "deadlines", "analysis", "local-workers",
}  # fmt: skip


async def test_healthz_and_metrics_show_the_loops_of_a_real_node(redis_server) -> None:
    node = start_server(redis_server.url, workers=1)
    try:
        code, body = await health(node.http_url)
        assert code == 200 and body["ok"], body
        assert set(body["loops"]) == NODE_LOOPS
        for name, loop in body["loops"].items():
            assert loop == {"state": "running", "restarts": 0, "last_error": None}, name
        async with aiohttp.ClientSession() as session:
            async with session.get(node.http_url + "/metrics") as r:
                text = await r.text()
        assert f"kibitz_loops_up {float(len(NODE_LOOPS))}" in text
        assert "# TYPE kibitz_loop_restarts_total counter" in text
    finally:
        node.stop()
