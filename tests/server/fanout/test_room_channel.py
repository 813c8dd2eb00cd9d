"""What a node forwards from a room's pub/sub channel: only the payloads the protocol
types (kibitz.shared.protocol.node: a snapshot, an AI's progress, a chat line), checked;
anything else published there reaches no client. A real server, Redis and sockets."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
import websockets

from kibitz.client.connection import KibitzClient, ws_url
from kibitz.shared.bus.keys import room_channel
from tests.conftest import ServerProcess, start_server

WAIT_S = 10.0  # longest wait for one frame


@pytest.fixture(scope="module")
def server(redis_server: Any) -> Iterator[ServerProcess]:
    process = start_server(redis_server.url)
    yield process
    process.stop()


def malformed(room: str) -> list[dict[str, Any]]:
    """Payloads no node publishes: each would mislead a follower if forwarded."""
    return [
        {"type": "state", "room": room, "version": 99},  # no event: a snapshot it is not
        {"type": "state", "room": room, "version": "98", "event": {"kind": "move"}},
        {"type": "chat", "room": room, "channel": "all", "messages": [{"text": "spoof"}]},
        {"type": "thinking", "room": room, "seat": 1, "pv": ["5"]},  # no version
        {"type": "seat", "room": room, "seat": 0, "token": "stolen"},  # never broadcast
    ]


async def test_a_malformed_room_message_reaches_no_client(redis_server, server) -> None:
    a = await KibitzClient.open(server.http_url)
    b = await KibitzClient.open(server.http_url)
    redis = aioredis.Redis.from_url(redis_server.url)
    received: list[dict[str, Any]] = []
    try:
        room = (await a.create("tictactoe", seat=0))["room"]
        async with websockets.connect(ws_url(server.http_url)) as ws:
            await ws.recv()  # welcome
            await ws.send(json.dumps({"type": "watch", "room": room}))
            assert json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))["type"] == "state"
            for payload in malformed(room):
                await redis.publish(room_channel(room), json.dumps(payload))
            await b.join(room)  # a real change, published after them on the same channel
            for _ in range(20):  # bounded: the join's state comes within a few frames
                message = json.loads(await asyncio.wait_for(ws.recv(), WAIT_S))
                received.append(message)
                if message.get("event", {}).get("kind") == "joined":
                    break
    finally:
        await a.close()
        await b.close()
        await redis.aclose()
    assert received and received[-1].get("event", {}).get("kind") == "joined", received
    for message in received:  # the spectator got states of the real versions only
        assert message["type"] == "state" and message["version"] in (0, 1), message
    assert server.process.poll() is None
