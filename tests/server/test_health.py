"""``/healthz`` tells the truth about a node's Redis and fan-out, and names no address."""

from __future__ import annotations

import asyncio
import re
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
        await plays_on(a, b, room)
    finally:
        node.stop()
        redis.stop()


async def plays_on(a: KibitzClient, b: KibitzClient, room: str) -> None:
    """A move by ``a`` reaches ``b`` (the node delivers again), then both leave."""
    await a.move(room, "5")
    state = await b.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=5)
    assert [m["move"] for m in state["moves"]] == ["5"]
    await a.close()
    await b.close()


#: The loops every node runs under its supervisor (server/node.py, server/cli/serve.py).
NODE_LOOPS = {
    "fanout-listener", "fanout-probe", "fanout-unsubscriber", "fanout-pings", "results",
    "heartbeat", "archiver", "lobby", "deadlines", "analysis", "local-workers", "pool",
    "bans", "event-streams",
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


async def loops_of(url: str) -> dict[str, dict]:
    return (await health(url))[1]["loops"]


async def wait_for_loops(url: str, check, within: float) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while True:
        loops = await loops_of(url)
        if check(loops):
            return loops
        assert time.monotonic() < deadline, f"loops not as expected in {within} s: {loops}"
        await asyncio.sleep(0.2)


def restarts_in(metrics: str) -> dict[str, float]:
    """``kibitz_loop_restarts_total`` per loop, from a /metrics page."""
    found = re.findall(r'^kibitz_loop_restarts_total\{loop="([^"]+)"\} (\S+)$', metrics, re.M)
    return {name: float(value) for name, value in found}


async def test_a_frozen_redis_fails_the_loops_and_the_supervisor_runs_them_all_again(
    tmp_path,
) -> None:
    """The loops do not retry by themselves: with Redis frozen (SIGSTOP) they fail, the
    supervisor backs off and restarts them (/healthz, /metrics), and after SIGCONT every
    loop runs again and the game plays on."""
    redis = EmbeddedRedis(tmp_path / "redis").start()
    node = start_server(redis.url)
    assert redis.process is not None
    try:
        a = await KibitzClient.open(node.http_url)
        b = await KibitzClient.open(node.http_url)
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        for client in (a, b):  # a round trip after the join: its handling is over
            await client.lobby(subscribe=False)
        redis.process.send_signal(signal.SIGSTOP)
        try:  # commands time out after 5 s (redis_timeout_s), the listener is stale in 3.5
            failed = await wait_for_loops(
                node.http_url,
                lambda loops: sum(loop["restarts"] > 0 for loop in loops.values()) >= 3,
                within=15,
            )
        finally:
            redis.process.send_signal(signal.SIGCONT)
        assert failed["fanout-listener"]["last_error"] is not None, failed
        loops = await wait_for_loops(
            node.http_url,
            lambda loops: all(loop["state"] == "running" for loop in loops.values()),
            within=10,
        )
        assert set(loops) == NODE_LOOPS
        async with aiohttp.ClientSession() as session:
            async with session.get(node.http_url + "/metrics") as r:
                restarts = restarts_in(await r.text())
        assert sum(restarts.values()) >= 3, restarts
        await wait_for_health(node.http_url, 200, within=10)
        await plays_on(a, b, room)
    finally:
        node.stop()
        redis.stop()
