"""The listening socket (server/gateway/edge.py): WebSockets on fresh connections are served by the
edge, everything else by aiohttp, on one port; a real server process, or a real node in the
test's own event loop."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import struct
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import websockets
from aiohttp import web
from websockets.frames import Frame, Opcode

from kibitz.server.gateway import edge as edge_module
from kibitz.server.gateway.edge import MAX_HEAD_BYTES, Edge, is_websocket_upgrade
from kibitz.server.node import create_app


def test_only_a_websocket_upgrade_on_ws_stays_at_the_edge() -> None:
    upgrade = (
        b"GET /ws?codec=msgpack HTTP/1.1\r\nHost: x\r\nUpgrade: WebSocket\r\nConnection: Upgrade"
    )
    assert is_websocket_upgrade(upgrade)
    assert is_websocket_upgrade(b"GET /ws HTTP/1.1\r\nupgrade:websocket\r\nHost: x")
    assert not is_websocket_upgrade(b"GET /ws HTTP/1.1\r\nHost: x")  # plain GET: aiohttp's
    assert not is_websocket_upgrade(b"GET /wsx HTTP/1.1\r\nUpgrade: websocket")
    assert not is_websocket_upgrade(b"POST /ws HTTP/1.1\r\nUpgrade: websocket")
    assert not is_websocket_upgrade(b"GET /healthz HTTP/1.1\r\nX-Upgrade: websocket")


async def open_raw(server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    url = urlsplit(server.http_url)
    return await asyncio.open_connection(url.hostname, url.port)


async def read_head(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One unmasked server frame: (opcode, payload)."""
    first, second = await asyncio.wait_for(reader.readexactly(2), 10)
    size = second & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", await reader.readexactly(2))
    elif size == 127:
        (size,) = struct.unpack("!Q", await reader.readexactly(8))
    return first & 0x0F, await reader.readexactly(size)


def upgrade_request(path: str = "/ws") -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()


async def test_an_upgrade_on_a_kept_alive_connection_is_served_too(live_server) -> None:
    """A proxy that reuses its connections may send the upgrade after other requests:
    aiohttp has the connection by then, and its /ws route serves the same protocol."""
    reader, writer = await open_raw(live_server)
    try:
        for _ in range(2):  # two plain requests on one connection: keep-alive works
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = await read_head(reader)
            assert head.startswith(b"HTTP/1.1 200")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            assert json.loads(await reader.readexactly(length))["redis"] == "ok"
        writer.write(upgrade_request())
        assert (await read_head(reader)).startswith(b"HTTP/1.1 101")
        opcode, payload = await read_frame(reader)
        assert opcode == Opcode.TEXT and json.loads(payload)["type"] == "welcome"
        ping = json.dumps({"type": "ping", "rid": 7}).encode()
        writer.write(Frame(Opcode.TEXT, ping).serialize(mask=True, extensions=[]))
        opcode, payload = await read_frame(reader)
        assert json.loads(payload)["type"] == "pong" and json.loads(payload)["rid"] == 7
    finally:
        writer.close()


async def test_a_fresh_upgrade_with_data_behind_it_and_a_bad_handshake(live_server) -> None:
    # A bad handshake (no Sec-WebSocket-Key) gets the parser's 400 and a closed socket.
    reader, writer = await open_raw(live_server)
    bad = (
        b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
    )
    writer.write(bad)
    assert (await read_head(reader)).startswith(b"HTTP/1.1 400")
    await asyncio.wait_for(reader.read(), 10)  # the server closes the connection
    writer.close()
    # A request head past MAX_HEAD_BYTES goes to aiohttp, which refuses it.
    reader, writer = await open_raw(live_server)
    writer.write(b"GET /ws HTTP/1.1\r\nX-Long: " + b"a" * (MAX_HEAD_BYTES + 10) + b"\r\n\r\n")
    assert (await read_head(reader)).split(b" ")[1] in (b"400", b"431")
    writer.close()


async def test_messages_sent_before_the_answer_wait_for_the_session(live_server) -> None:
    """A client that does not wait for the 101 (the request and two messages in one
    write) has its messages handled, in order, once its session is open."""
    reader, writer = await open_raw(live_server)
    pings = [json.dumps({"type": "ping", "rid": rid}).encode() for rid in (1, 2)]
    frames = [Frame(Opcode.TEXT, ping).serialize(mask=True, extensions=[]) for ping in pings]
    writer.write(upgrade_request() + b"".join(frames))
    assert (await read_head(reader)).startswith(b"HTTP/1.1 101")
    replies = [json.loads((await read_frame(reader))[1]) for _ in range(3)]
    assert [r["type"] for r in replies] == ["welcome", "pong", "pong"]
    assert [r["rid"] for r in replies[1:]] == [1, 2]
    writer.close()


async def test_fragmented_messages_and_invalid_text(live_server) -> None:
    async with websockets.connect(live_server.ws_url) as ws:
        assert json.loads(await ws.recv())["type"] == "welcome"
        text = json.dumps({"type": "ping", "rid": 9})
        await ws.send([text[:5], text[5:12], text[12:]])  # one message in three frames
        reply = json.loads(await ws.recv())
        assert reply["type"] == "pong" and reply["rid"] == 9
    # Text frames must be UTF-8 (RFC 6455 8.1): the socket is closed with 1007.
    reader, writer = await open_raw(live_server)
    writer.write(upgrade_request())
    assert (await read_head(reader)).startswith(b"HTTP/1.1 101")
    await read_frame(reader)  # welcome
    writer.write(Frame(Opcode.TEXT, b"\xff\xfe").serialize(mask=True, extensions=[]))
    opcode, payload = await read_frame(reader)
    assert opcode == Opcode.CLOSE and struct.unpack("!H", payload[:2])[0] == 1007
    assert await asyncio.wait_for(reader.read(), 10) == b""  # and the connection closed
    writer.close()


@contextlib.asynccontextmanager
async def node_in_process(redis_url: str) -> AsyncIterator[tuple[Edge, int]]:
    """One node in the test's own event loop, started and stopped as ``kibitz serve``
    does; its edge and port."""
    app = create_app(redis_url)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    assert runner.server is not None
    edge = Edge(app, runner.server)
    listener = await asyncio.get_running_loop().create_server(edge, "127.0.0.1", 0)
    edge.start()
    try:
        yield edge, listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await edge.shutdown()
        await runner.cleanup()


async def test_a_silent_peer_is_pinged_then_dropped(redis_server, monkeypatch) -> None:
    """Dead peers are found by the node's one sweep: a socket silent for KEEPALIVE_S is
    pinged, and dropped if it stays silent; a client that answers stays."""
    monkeypatch.setattr(edge_module, "KEEPALIVE_S", 0.4)
    async with node_in_process(redis_server.url) as (edge, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # never answers
        writer.write(upgrade_request())
        assert (await read_head(reader)).startswith(b"HTTP/1.1 101")
        assert json.loads((await read_frame(reader))[1])["type"] == "welcome"
        url = f"ws://127.0.0.1:{port}/ws"
        async with websockets.connect(url, ping_interval=None) as answers:  # pongs by itself
            await answers.recv()
            assert len(edge.sockets) == 2
            opcode, _ = await read_frame(reader)
            assert opcode == Opcode.PING
            with contextlib.suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(), 5) == b""  # dropped
            writer.close()
            await asyncio.sleep(1.0)  # more sweeps: the one that answers is kept
            await answers.send(json.dumps({"type": "ping", "rid": 1}))
            assert json.loads(await answers.recv())["rid"] == 1
            assert len(edge.sockets) == 1
        for _ in range(50):  # its close is counted once the closing handshake is done
            if not edge.sockets:
                break
            await asyncio.sleep(0.05)
        assert not edge.sockets and not edge.hub.connections
