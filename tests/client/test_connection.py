"""The Python client's waits against a real server."""

from __future__ import annotations

import asyncio

import pytest

from kibitz.client.connection import KibitzClient

pytestmark = pytest.mark.asyncio


async def test_a_wait_never_returns_a_state_older_than_one_seen(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    try:
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        # Let a receive the newer states without reading its inbox: the version 0 state
        # (and the joined one) are still queued there, behind the newest.
        async with asyncio.timeout(10):
            while room not in a.states or a.states[room]["seats"][1]["connected"] is not True:
                await asyncio.sleep(0.02)
        assert a.inbox.qsize() >= 2
        with pytest.raises(TimeoutError):
            await a.wait_state(room, lambda s: s["version"] == 0, timeout=1)
        newest = await a.wait_state(room, lambda s: s["status"] == "playing")
        assert newest is a.states[room] and newest["seats"][1]["connected"] is True
    finally:
        await a.close()
        await b.close()
