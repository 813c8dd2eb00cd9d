"""The node's listening socket: WebSockets served by a small protocol of our own, HTTP by
aiohttp.

Each accepted connection starts here. Once its first request head has arrived it is one
of two things:

- a WebSocket upgrade on ``/ws``: the connection stays here. The handshake and the frames
  are parsed by the ``websockets`` library's sans-I/O :class:`ServerProtocol`, the
  admission checks are the aiohttp route's (:func:`app.admit`), and each message goes to
  the same :class:`app.Session`. An idle connection is three small objects (transport,
  this protocol, the parser) plus its session, with no task, future or timer of its own:
  a task exists only while the client's requests are being handled.
- anything else: the connection is handed to aiohttp (its ``web.Server`` is a protocol
  factory, meant for ``loop.create_server``) with the bytes read so far, and aiohttp
  serves it from then on, keep-alive included. An upgrade on such a kept-alive connection
  reaches aiohttp's ``/ws`` route, which serves it with aiohttp's own WebSocket.

Dead peers are found by one sweep for the node (:meth:`Edge.keepalive`): a connection
silent for KEEPALIVE_S is pinged, and dropped if still silent KEEPALIVE_S / 2 later.
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
import time
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from aiohttp import WSMsgType, web
from websockets.datastructures import Headers
from websockets.extensions.permessage_deflate import enable_server_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol

from kibitz.server import app as server_app
from kibitz.server.hub import Connection
from kibitz.shared import fastjson
from kibitz.shared.protocol import Codec

log = logging.getLogger(__name__)
# The parser logs every handshake at INFO: keep its chatter out of the node's log.
_wire_log = logging.getLogger(__name__ + ".wire")
_wire_log.setLevel(logging.WARNING)

#: A request head (request line and headers) longer than this is aiohttp's to refuse.
MAX_HEAD_BYTES = 16 * 1024
#: A connection that has not sent a whole request head in this long is closed.
HEAD_TIMEOUT_S = 30.0
#: A connection silent this long is pinged; silent half as long again, it is dropped.
KEEPALIVE_S = 30.0
#: The closing handshake: how long a client has to answer our close frame.
CLOSE_TIMEOUT_S = 2.0
#: Messages read ahead of the one being handled, at most; past it the socket is not read.
MAX_INBOX = 32
#: How long shutdown waits for closed connections to be counted out of Redis.
TEARDOWN_S = 10.0

_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*websocket[ \t]*\r\n", re.IGNORECASE)


def is_websocket_upgrade(head: bytes | bytearray) -> bool:
    """Whether a request head (up to its blank line) asks for a WebSocket on ``/ws``."""
    return head.startswith((b"GET /ws ", b"GET /ws?")) and bool(_UPGRADE.search(head + b"\r\n"))


class Edge:
    """The protocol factory of a node's listening socket (``loop.create_server(edge)``)."""

    def __init__(self, app: web.Application, http: web.Server) -> None:
        self.app = app
        self.http = http
        self.hub = app[server_app.HUB_KEY]
        self.compress = app[server_app.WS_COMPRESSION_KEY]
        self.sockets: set[EdgeSocket] = set()  # open WebSockets
        self.teardowns: set[asyncio.Task[None]] = set()  # closed ones being counted out
        self._sweeper: asyncio.Task[None] | None = None

    def __call__(self) -> EdgeSocket:
        return EdgeSocket(self)

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self.keepalive())

    async def shutdown(self) -> None:
        """After the listening socket is closed: requests under way finish, every client
        is told to reconnect elsewhere (1001, see ``Hub.drain``), and each closed
        connection is counted out of Redis before the caller closes it."""
        if self._sweeper is not None:
            self._sweeper.cancel()
        await self.hub.drain()
        for socket in list(self.sockets):  # the closing handshake has had its time
            socket.abort()
        if self.teardowns:
            await asyncio.wait(self.teardowns, timeout=TEARDOWN_S)

    async def keepalive(self) -> None:
        """Ping what has been silent for KEEPALIVE_S; drop what stayed silent after that."""
        while True:
            await asyncio.sleep(KEEPALIVE_S / 4)
            now = time.monotonic()
            for socket in list(self.sockets):
                silent = now - socket.heard
                if silent > KEEPALIVE_S * 1.5:
                    socket.abort()
                elif silent > KEEPALIVE_S and not socket.pinged:
                    socket.pinged = True
                    socket.send_ping(b"")


class EdgeSocket(asyncio.Protocol):
    """One accepted connection: first its request head, then either a WebSocket served
    here or a connection handed to aiohttp. It is also the socket a hub
    :class:`Connection` writes to."""

    __slots__ = (
        "edge", "transport", "head", "head_timer", "ws", "conn", "session", "parts",
        "text", "inbox", "worker", "gone", "heard", "pinged", "paused",
    )  # fmt: skip

    def __init__(self, edge: Edge) -> None:
        self.edge = edge
        self.transport: asyncio.Transport | None = None
        self.head: bytearray | None = bytearray()  # the request head while it arrives
        self.head_timer: asyncio.TimerHandle | None = None
        self.ws: ServerProtocol | None = None  # the WebSocket parser, once upgrading
        self.conn: Connection | None = None  # once open
        self.session: server_app.Session | None = None
        self.parts: list[bytes] | None = None  # a fragmented message being received...
        self.text = False  # ...and whether it is text
        self.inbox: list[str | bytes] = []  # messages waiting for the session
        self.worker: asyncio.Task[None] | None = None  # handles the inbox while it has any
        self.gone: asyncio.Future[None] | None = None  # set when the TCP connection is lost
        self.heard = time.monotonic()  # when the client last sent anything
        self.pinged = False  # a keep-alive ping is out
        self.paused = False

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (Checked by what it does, not by its class: uvloop's are not asyncio's.)
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        loop = asyncio.get_running_loop()
        self.head_timer = loop.call_later(HEAD_TIMEOUT_S, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self.head is not None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > MAX_HEAD_BYTES:
                    self._to_http()
                return
            if not is_websocket_upgrade(self.head[:end]):
                self._to_http()
                return
            data, self.head = bytes(self.head), None
            self._cancel_head_timer()
            self.ws = ServerProtocol(
                max_size=server_app.HARD_FRAME_LIMIT,
                # The library's tuned deflate (12-bit windows, memLevel 5), when asked for.
                extensions=enable_server_permessage_deflate(None) if self.edge.compress else None,
                logger=_wire_log,
            )
        ws = self.ws
        assert ws is not None
        self.heard = time.monotonic()
        self.pinged = False
        ws.receive_data(data)
        for event in ws.events_received():
            if isinstance(event, Frame):
                self._on_frame(event)
            elif isinstance(event, Request):
                # Messages sent before the answer wait in the inbox until the session
                # opens (a client that does not wait for it is not stopped reading).
                task = asyncio.create_task(self._open(event))
                self._track(task)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if self.ws is not None:
            self.ws.receive_eof()
        if self.gone is not None and not self.gone.done():
            self.gone.set_result(None)
        self.edge.sockets.discard(self)
        self._end_session(close=False)

    def pause_writing(self) -> None:  # the hub watches the transport's buffer itself
        pass

    def resume_writing(self) -> None:
        pass

    # -- hub.Socket: what a Connection writes to (as aiohttp's WebSocketResponse has) --

    @property
    def closed(self) -> bool:
        return self.ws is None or self.ws.state is not State.OPEN

    @property
    def compress(self) -> bool:
        return bool(self.ws is not None and self.ws.extensions)

    async def send_frame(
        self, message: bytes, opcode: WSMsgType, compress: int | None = None
    ) -> None:
        """A message compressed for this connection (the shared, uncompressed frames are
        written to the transport by the hub itself)."""
        ws = self.ws
        if ws is None or ws.state is not State.OPEN:
            raise ConnectionResetError("the WebSocket is closed")
        if opcode == WSMsgType.BINARY:
            ws.send_binary(message)
        else:
            ws.send_text(message)
        self._flush()

    async def ping(self, message: bytes = b"") -> None:
        self.send_ping(message)

    def send_ping(self, message: bytes) -> None:
        if self.ws is not None and self.ws.state is State.OPEN:
            self.ws.send_ping(message)
            self._flush()

    async def close(self, *, code: int = 1000, message: bytes = b"") -> bool:
        """The closing handshake: our close frame, then the client's answer (or, after
        CLOSE_TIMEOUT_S, the connection is dropped). False if it was closed already."""
        ws, transport = self.ws, self.transport
        if ws is None or transport is None or ws.state is not State.OPEN:
            return False
        ws.send_close(code, message.decode(errors="replace"))
        self._flush()
        if self.gone is None:
            self.gone = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait_for(asyncio.shield(self.gone), CLOSE_TIMEOUT_S)
        except TimeoutError:
            transport.abort()
        return True

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # -- inside -------------------------------------------------------------------------------

    def _to_http(self) -> None:
        """Not a WebSocket: from here on aiohttp serves this connection."""
        assert self.transport is not None and self.head is not None
        self._cancel_head_timer()
        data, self.head = bytes(self.head), None
        protocol = self.edge.http()
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        protocol.data_received(data)

    async def _open(self, request: Request) -> None:
        """The admission checks, then the handshake's answer; then the session."""
        ws, transport = self.ws, self.transport
        assert ws is not None and transport is not None
        response = ws.accept(request)
        if response.status_code != 101:  # not a valid handshake: the answer says why
            ws.send_response(response)
            self._flush()
            return
        app = self.edge.app
        peer = transport.get_extra_info("peername")
        remote = peer[0] if isinstance(peer, tuple) else None
        try:
            address = await server_app.admit(app, remote, request.headers)
        except server_app.Refusal as refused:
            self._refuse(refused.status, refused.body)
            return
        except Exception:
            log.exception("could not admit a WebSocket; dropping it")
            transport.abort()
            return
        if transport.is_closing():  # gone while we checked
            await server_app.address_closed(app, address)
            return
        ws.send_response(response)
        self._flush()
        query = parse_qs(urlsplit(request.path).query)
        codec: Codec = "msgpack" if query.get("codec") == ["msgpack"] else "json"
        # The parser's suspended frame holds the request for the connection's life: drop
        # its headers, no longer needed (a browser's are 2-3 KB with a user agent and
        # cookies, as much again as the rest of an idle connection's cost).
        request.headers.clear()
        self.conn = Connection(self, codec, transport)
        self.session = server_app.open_session(app, self.conn, address)
        self.edge.sockets.add(self)
        # As aiohttp logs the HTTP requests it serves (its access log).
        log.info('%s "GET %s" 101 WebSocket (%s)', address, request.path, codec)
        if self.edge.hub.draining:  # upgraded as the node began to shut down
            await self.conn.close(1001, b"shutting down")
            return
        if self.inbox and self.worker is None:  # sent before the answer: handled now
            self.worker = asyncio.create_task(self._work())

    def _refuse(self, status: int, body: dict[str, Any]) -> None:
        assert self.ws is not None
        content = fastjson.dumps(body)
        headers = Headers(
            [("Content-Type", "application/json; charset=utf-8"),
             ("Content-Length", str(len(content))), ("Connection", "close")]
        )  # fmt: skip
        self.ws.send_response(Response(status, http.HTTPStatus(status).phrase, headers, content))
        self._flush()

    def _on_frame(self, frame: Frame) -> None:
        opcode, data = frame.opcode, bytes(frame.data)  # bytes already: no copy
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            if frame.fin:
                self._deliver(opcode is Opcode.TEXT, data)
            else:  # the first of a fragmented message (the parser bounds its whole size)
                self.parts, self.text = [data], opcode is Opcode.TEXT
        elif opcode is Opcode.CONT and self.parts is not None:
            self.parts.append(data)
            if frame.fin:
                data, self.parts = b"".join(self.parts), None
                self._deliver(self.text, data)
        elif opcode is Opcode.PONG and self.conn is not None and self.conn.lag is not None:
            self.conn.lag.on_pong(data)
        # A ping is answered and a close frame echoed by the parser itself.

    def _deliver(self, text: bool, data: bytes) -> None:
        """A whole message: queued for the session, which takes one at a time (and which,
        before the handshake is answered, is still to come)."""
        if self.ws is None or (self.session is None and self.conn is not None):
            return  # the session has ended
        if text:
            try:
                message: str | bytes = data.decode()
            except UnicodeDecodeError:
                self.ws.fail(1007, "invalid UTF-8")  # RFC 6455 7.4.1
                return
        else:
            message = data
        self.inbox.append(message)
        if len(self.inbox) >= MAX_INBOX:
            self._pause()
        if self.worker is None and self.session is not None:
            self.worker = asyncio.create_task(self._work())

    async def _work(self) -> None:
        """Hand the queued messages to the session in order, then end (an idle connection
        has no task)."""
        session, conn = self.session, self.conn
        assert session is not None and conn is not None
        try:
            while self.inbox:
                message = self.inbox.pop(0)
                if len(self.inbox) < MAX_INBOX // 2:
                    self._resume()
                if not await session.handle(message):
                    self.inbox.clear()
                    await conn.close(session.close_code, session.close_reason)
        except Exception:
            log.exception("a WebSocket session failed; closing it")
            conn.abort(1011, b"internal error")
        finally:
            self.worker = None

    def _end_session(self, close: bool) -> None:
        """The WebSocket is closed (or the connection lost): end the session, once, and
        then, if ``close``, the TCP connection."""
        session, self.session = self.session, None
        self.inbox.clear()
        if session is not None:
            self._track(asyncio.create_task(self._teardown(session, close)))
        elif close and self.transport is not None:
            self.transport.close()

    async def _teardown(self, session: server_app.Session, close: bool) -> None:
        """Once the request under way is done, the session is closed (its rooms told, its
        address counted out); only then is the TCP connection closed, so a client that
        has seen it close finds itself counted out."""
        conn = session.conn
        try:
            await conn.wait_idle()
            conn.closing = True
            await server_app.session_closed(session)
        finally:
            if close and self.transport is not None:
                self.transport.close()

    def _flush(self) -> None:
        """Write what the parser has to send; its end-of-stream mark closes the socket."""
        ws, transport = self.ws, self.transport
        assert ws is not None and transport is not None
        for data in ws.data_to_send():
            if data:
                transport.write(data)
            else:  # the end of the stream: the closing handshake is done, or refused
                self._end_session(close=True)

    def _pause(self) -> None:
        if not self.paused and self.transport is not None and not self.transport.is_closing():
            self.paused = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self.paused and self.transport is not None and not self.transport.is_closing():
            self.paused = False
            self.transport.resume_reading()

    def _track(self, task: asyncio.Task[None]) -> None:
        self.edge.teardowns.add(task)
        task.add_done_callback(self.edge.teardowns.discard)

    def _cancel_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
