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

What the edge refuses before any handshake or HTTP parsing:

- a TCP connection from an address (an IPv6 address's /64) that already has
  ``max_sockets_per_address`` open on this node (WebSockets and HTTP alike) is closed as
  it is accepted; a trusted proxy's address is not capped this way (it carries many
  clients; the per-address WebSocket limit counts them by ``X-Forwarded-For``,
  server/gateway/limits.py);
- so is any connection once the node holds its cap of client connections (the soft
  open-files limit less FD_RESERVE, kept for Redis, the database and the rest), and one
  from an address holding LIGHT_SOCKETS or more once the node is within the last eighth
  of that cap: the node runs out of neither descriptors nor room for other clients;
- a request head not complete within the head timeout is cut off (aiohttp's keep-alive
  timeout, set to the same value by ``kibitz serve``, bounds every later head on a
  kept-alive connection);
- a head with a line over MAX_LINE_BYTES, or over MAX_HEAD_BYTES in all, is answered 431,
  logged in one short line; aiohttp's own refusals of later heads on a kept-alive
  connection are logged in one line too, never with a traceback (:class:`ShortParseErrors`).
"""

from __future__ import annotations

import asyncio
import http
import ipaddress
import logging
import re
import resource
import time
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from aiohttp import WSMsgType, web
from aiohttp.http_exceptions import HttpProcessingError
from websockets.datastructures import Headers
from websockets.extensions.permessage_deflate import enable_server_permessage_deflate
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol

from kibitz.server.accounts.credentials import Credential
from kibitz.server.appkeys import EDGE_HANDOVER_KEY, HUB_KEY, LIMITS_KEY, WS_COMPRESSION_KEY
from kibitz.server.domain.addresses import address_group
from kibitz.server.domain.players import Account
from kibitz.server.fanout.connection import (
    CLOSE_SLOW,
    MAX_QUEUED_BYTES,
    SLOW_CLOSE_GRACE_S,
    Connection,
)
from kibitz.server.gateway import admission
from kibitz.server.gateway.session import Session
from kibitz.shared import fastjson
from kibitz.shared.protocol.client_out import Error
from kibitz.shared.protocol.codec import Codec

log = logging.getLogger(__name__)
# The parser logs every handshake at INFO: keep its chatter out of the node's log.
_wire_log = logging.getLogger(__name__ + ".wire")
_wire_log.setLevel(logging.WARNING)

#: A request head (request line and headers) longer than this is answered 431.
MAX_HEAD_BYTES = 16 * 1024
#: A line of a request head longer than this is answered 431 (aiohttp's own line limit).
MAX_LINE_BYTES = 8190
#: A connection that has not sent a whole request head in this long is closed (the
#: default of ``kibitz serve --head-timeout``).
HEAD_TIMEOUT_S = 30.0
#: Open TCP connections per client address on a node, past the per-address WebSocket
#: limit (``--max-connections-per-address``): room for a browser's HTTP connections.
SOCKETS_OVER_CONNECTIONS = 64
#: File descriptors a node keeps besides its client sockets (Redis, the database, logs,
#: its listening socket, local workers' pipes): the open-files limit less this is the
#: node's cap on open client sockets (and the fixed part of ``kibitz serve``'s budget).
FD_RESERVE = 256
#: Closed sockets are looked for in the node's count at most this often when it is full.
PRUNE_S = 0.5
#: An address group holding fewer open sockets than this may use the last eighth of the
#: node's socket cap, kept from the others (:meth:`Edge.accept`).
LIGHT_SOCKETS = 16
#: At most one warning this often about sockets refused at accept.
REFUSAL_LOG_S = 60.0
#: A connection silent this long is pinged; silent half as long again, it is dropped.
KEEPALIVE_S = 30.0
#: The closing handshake: how long a client has to answer our close frame.
CLOSE_TIMEOUT_S = 2.0
#: Messages read ahead of the one being handled, at most; past it the socket is not read.
MAX_INBOX = 32
#: How long shutdown waits for closed connections to be counted out of Redis.
TEARDOWN_S = 10.0

_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*websocket[ \t]*\r\n", re.IGNORECASE)


def canonical_address(text: str) -> str:
    """An IP address as the socket gives it (``::1``, not ``0:0::1``); other text as is."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def open_socket_cap(reserve: int = FD_RESERVE) -> int:
    """The node's cap on open client sockets: the soft open-files limit less ``reserve``
    (but at least half the limit); 0 (no cap) when the limit is unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 0
    return max(soft - reserve, soft // 2)


def head_too_large(head: bytes | bytearray) -> bool:
    """Whether a complete request head (without its blank line) has a line over
    MAX_LINE_BYTES or is over MAX_HEAD_BYTES in all."""
    if len(head) > MAX_HEAD_BYTES:
        return True
    return any(len(line) > MAX_LINE_BYTES for line in bytes(head).split(b"\r\n"))


class ShortParseErrors(logging.Filter):
    """aiohttp logs a request it cannot parse (a header line over its limit, a malformed
    head) at ERROR with a traceback: any client could fill the log with them. This turns
    each into one INFO line (its text cut short and escaped)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            record.msg, record.args = "bad request from %s: %s", (remote, repr(str(exc))[:120])
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_parse_errors() -> None:
    """Install :class:`ShortParseErrors` on aiohttp's server logger (once)."""
    server_logger = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, ShortParseErrors) for f in server_logger.filters):
        server_logger.addFilter(ShortParseErrors())


def is_websocket_upgrade(head: bytes | bytearray) -> bool:
    """Whether a request head (up to its blank line) asks for a WebSocket on ``/ws``."""
    return head.startswith((b"GET /ws ", b"GET /ws?")) and bool(_UPGRADE.search(head + b"\r\n"))


class Edge:
    """The protocol factory of a node's listening socket (``loop.create_server(edge)``)."""

    def __init__(
        self,
        app: web.Application,
        http: web.Server,
        max_sockets_per_address: int | None = None,
        head_timeout: float = HEAD_TIMEOUT_S,
        max_open_sockets: int | None = None,
    ) -> None:
        """``max_sockets_per_address``: open TCP connections per client address (an IPv6
        address's /64) on this node (None: the per-address WebSocket limit +
        SOCKETS_OVER_CONNECTIONS; 0: no cap); ``head_timeout``: seconds for a
        connection's first request head; ``max_open_sockets``: open client connections
        on this node in all (None: :func:`open_socket_cap`; 0: no cap)."""
        self.app = app
        self.http = http
        self.hub = app[HUB_KEY]
        self.compress = app[WS_COMPRESSION_KEY]
        limits = app[LIMITS_KEY]
        if max_sockets_per_address is None:
            max_sockets_per_address = limits.connections_per_address + SOCKETS_OVER_CONNECTIONS
        self.max_sockets = max_sockets_per_address
        self.uncapped = frozenset(map(canonical_address, limits.trusted_proxies))
        self.head_timeout = head_timeout
        self.max_open = open_socket_cap() if max_open_sockets is None else max_open_sockets
        self.open: set[asyncio.BaseTransport] = set()  # every open client socket
        self._pruned = -PRUNE_S
        self.peers: dict[str, set[asyncio.BaseTransport]] = {}  # address group -> its sockets
        self.refused = 0  # sockets closed at accept since the last warning
        self._refusal_logged = -REFUSAL_LOG_S
        self.sockets: set[EdgeSocket] = set()  # open WebSockets
        self.teardowns: set[asyncio.Task[None]] = set()  # closed ones being counted out
        self._sweeper: asyncio.Task[None] | None = None
        quiet_parse_errors()

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

    def accept(self, peer: str | None, transport: asyncio.BaseTransport) -> bool:
        """Count a new TCP connection in, for the node and for its address group
        (:func:`address_group`); False (the caller closes it at once) if the group already
        has its cap of open connections on this node, or the node is full: at its cap of
        open client connections, or within its last eighth of them, which is kept for
        addresses holding fewer than LIGHT_SOCKETS (so that a few busy addresses cannot
        shut everyone else out)."""
        group = address_group(peer) if peer is not None else ""
        open_now = self.peers.setdefault(group, set())
        capped = peer is not None and self.max_sockets > 0 and peer not in self.uncapped
        if capped and len(open_now) >= self.max_sockets:
            # Connections aiohttp served and closed are not told to us: forget them now.
            _forget(open_now)
            if len(open_now) >= self.max_sockets:
                self._log_refusal(f"{group} has {self.max_sockets} open")
                return False
        if not self._node_has_room(open_now, light=not capped):
            self._log_refusal(
                f"the node has {len(self.open)} open, of {self.max_open} (its open-files "
                f"limit less {FD_RESERVE} kept in reserve); {group} has {len(open_now)}"
            )
            return False
        open_now.add(transport)
        self.open.add(transport)
        return True

    def _node_has_room(self, open_now: set[asyncio.BaseTransport], light: bool) -> bool:
        """Whether the node takes one more connection from an address group holding
        ``open_now`` (``light``: one that may use the reserved last eighth regardless)."""
        if self.max_open <= 0:
            return True
        if len(self.open) >= self.max_open - self.max_open // 8:
            now = time.monotonic()  # crowded: forget what has closed (every PRUNE_S)
            if now - self._pruned >= PRUNE_S:
                self._pruned = now
                _forget(self.open)
            _forget(open_now)
        if len(self.open) >= self.max_open:
            return False
        busy = len(open_now) >= LIGHT_SOCKETS and not light
        return not busy or len(self.open) < self.max_open - self.max_open // 8

    def release(self, peer: str | None, transport: asyncio.BaseTransport) -> None:
        """A connection counted by :meth:`accept` is closed."""
        self.open.discard(transport)
        group = address_group(peer) if peer is not None else ""
        open_now = self.peers.get(group)
        if open_now is not None:
            open_now.discard(transport)
            if not open_now:
                del self.peers[group]

    def _forget_closed(self) -> None:
        _forget(self.open)
        for group, open_now in list(self.peers.items()):
            _forget(open_now)
            if not open_now:
                del self.peers[group]

    def _log_refusal(self, why: str) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._refusal_logged >= REFUSAL_LOG_S:
            log.warning("closing TCP connections at accept: %s (%d refused)", why, self.refused)
            self._refusal_logged, self.refused = now, 0

    async def keepalive(self) -> None:
        """Ping what has been silent for KEEPALIVE_S; drop what stayed silent after that."""
        while True:
            await asyncio.sleep(KEEPALIVE_S / 4)
            self._forget_closed()
            now = time.monotonic()
            for socket in list(self.sockets):
                silent = now - socket.heard
                if silent > KEEPALIVE_S * 1.5:
                    socket.abort()
                elif silent > KEEPALIVE_S and not socket.pinged:
                    socket.pinged = True
                    socket.send_ping(b"")


def _forget(transports: set[asyncio.BaseTransport]) -> None:
    """Drop the closed connections from a count (aiohttp does not tell us of those it
    served and closed)."""
    transports.difference_update([t for t in transports if t.is_closing()])


class EdgeSocket(asyncio.Protocol):
    """One accepted connection: first its request head, then either a WebSocket served
    here or a connection handed to aiohttp. It is also the socket a hub
    :class:`Connection` writes to."""

    __slots__ = (
        "edge", "transport", "peer", "head", "head_timer", "ws", "conn", "session", "parts",
        "text", "inbox", "worker", "gone", "heard", "pinged", "paused",
    )  # fmt: skip

    def __init__(self, edge: Edge) -> None:
        self.edge = edge
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None  # the TCP peer's address, counted in Edge.peers
        self.head: bytearray | None = bytearray()  # the request head while it arrives
        self.head_timer: asyncio.TimerHandle | None = None
        self.ws: ServerProtocol | None = None  # the WebSocket parser, once upgrading
        self.conn: Connection | None = None  # once open
        self.session: Session | None = None
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
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) else None
        if not self.edge.accept(address, transport):
            self.head = None
            transport.abort()
            return
        self.transport, self.peer = transport, address
        loop = asyncio.get_running_loop()
        self.head_timer = loop.call_later(self.edge.head_timeout, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self.head is not None:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > MAX_HEAD_BYTES:
                    self._too_large()
                return
            if head_too_large(self.head[:end]):
                self._too_large()
                return
            handover = self.edge.app.get(EDGE_HANDOVER_KEY)
            if handover is not None and handover[0](bytes(self.head[:end])):
                self._hand_over(handover[1])
                return
            if not is_websocket_upgrade(self.head[:end]):
                self._to_http()
                return
            data, self.head = bytes(self.head), None
            self._cancel_head_timer()
            self.ws = ServerProtocol(
                max_size=admission.HARD_FRAME_LIMIT,
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
        # Pongs (and echoes) the parser wrote for a client that does not read them count
        # like any frame queued for it: past MAX_QUEUED_BYTES it is a slow client.
        transport = self.transport
        if transport is not None and transport.get_write_buffer_size() > MAX_QUEUED_BYTES:
            transport.pause_reading()  # and it is read no more: no more pongs
            if self.conn is not None:
                self.conn.abort(CLOSE_SLOW, b"too slow")
            else:
                transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        if self.transport is not None:
            self.edge.release(self.peer, self.transport)
        if self.ws is not None:
            self.ws.receive_eof()
        if self.gone is not None and not self.gone.done():
            self.gone.set_result(None)
        self.edge.sockets.discard(self)
        self._end_session(close=False)

    def pause_writing(self) -> None:  # the Connection watches the transport's buffer itself
        pass

    def resume_writing(self) -> None:
        pass

    # -- fanout.connection.Socket: what a Connection writes to (as aiohttp's WebSocketResponse has)

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
        written to the transport by server/fanout/connection.py itself)."""
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
        # Read again (a paused socket would never see the answer); no request is taken.
        self.inbox.clear()
        self._resume()
        if self.gone is None:
            self.gone = asyncio.get_running_loop().create_future()
        if code == CLOSE_SLOW:
            await self._let_slow_reader_catch_up(transport, self.gone)
        try:
            await asyncio.wait_for(asyncio.shield(self.gone), CLOSE_TIMEOUT_S)
        except TimeoutError:
            transport.abort()
        return True

    @staticmethod
    async def _let_slow_reader_catch_up(
        transport: asyncio.Transport, gone: asyncio.Future[None]
    ) -> None:
        """A client dropped for not reading: the close frame follows the whole frames
        queued before it, and aborting the connection now would cut the stream in the
        middle of one. It gets up to SLOW_CLOSE_GRACE_S to read them (the socket then
        holds the close frame); only then is it dropped regardless."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SLOW_CLOSE_GRACE_S
        while transport.get_write_buffer_size() and not gone.done():
            left = deadline - loop.time()
            if left <= 0:
                return
            await asyncio.wait([gone], timeout=min(0.05, left))

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # -- inside -------------------------------------------------------------------------------

    def _too_large(self) -> None:
        """A request head over the limits: 431, one short log line, and the connection
        closed."""
        assert self.transport is not None
        self._cancel_head_timer()
        self.head = None
        body = fastjson.dumps(Error(
            "request/too_large",
            f"request head lines are limited to {MAX_LINE_BYTES} bytes, the head to "
            f"{MAX_HEAD_BYTES}",
        ).to_dict())  # fmt: skip
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
            b"Content-Type: application/json; charset=utf-8\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )
        self.transport.close()
        log.info("%s: request head too large: 431", self.peer)

    def _to_http(self) -> None:
        """Not a WebSocket: from here on aiohttp serves this connection."""
        assert self.transport is not None and self.head is not None
        self._cancel_head_timer()
        data, self.head = bytes(self.head), None
        protocol = self.edge.http()
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        protocol.data_received(data)

    def _hand_over(
        self, take_over: Callable[[web.Application, asyncio.Transport, bytes], None]
    ) -> None:
        """A request the node serves without aiohttp (``EDGE_HANDOVER_KEY``: the Bot API's
        event streams, kept open for hours at a few KB each instead of aiohttp's ~15)."""
        assert self.transport is not None and self.head is not None
        self._cancel_head_timer()
        head, self.head = bytes(self.head), None
        take_over(self.edge.app, self.transport, head)

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
            address, account, credential = await admission.admit(app, remote, request.headers)
        except admission.Refusal as refused:
            self._refuse(refused.status, refused.body)
            return
        except Exception:
            log.exception("could not admit a WebSocket; dropping it")
            transport.abort()
            return
        opened = False
        try:
            if not transport.is_closing():  # (it may have gone while we checked)
                self._answer(request, response, address, account, credential)
                opened = True
        finally:
            if not opened:  # gone, or any error: counted out again
                await admission.address_closed(app, address)
        if not opened or self.conn is None:
            return
        if self.edge.hub.draining:  # upgraded as the node began to shut down
            await self.conn.close(1001, b"shutting down")
            return
        if self.inbox and self.worker is None:  # sent before the answer: handled now
            self.worker = asyncio.create_task(self._work())

    def _answer(
        self,
        request: Request,
        response: Response,
        address: str,
        account: Account | None,
        credential: Credential | None = None,
    ) -> None:
        """The handshake's 101, and the session opened for ``address`` (acting for
        ``account`` while ``credential`` holds)."""
        ws, transport = self.ws, self.transport
        assert ws is not None and transport is not None
        ws.send_response(response)
        self._flush()
        query = parse_qs(urlsplit(request.path).query)
        codec: Codec = "msgpack" if query.get("codec") == ["msgpack"] else "json"
        # The parser's suspended frame holds the request for the connection's life: drop
        # its headers, no longer needed (a browser's are 2-3 KB with a user agent and
        # cookies, as much again as the rest of an idle connection's cost).
        request.headers.clear()
        self.conn = Connection(self, codec, transport)
        self.session = admission.open_session(
            self.edge.app, self.conn, address, account, credential
        )
        self.edge.sockets.add(self)
        # As aiohttp logs the HTTP requests it serves (its access log).
        log.info('%s "GET %s" 101 WebSocket (%s)', address, request.path, codec)

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
        if self.conn is not None and self.conn.closing:
            return  # closing: no more requests are taken
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
        if session is None or conn is None:  # the session ended before this task ran
            self.worker = None
            return
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

    async def _teardown(self, session: Session, close: bool) -> None:
        """Once the request under way is done, the session is closed (its rooms told, its
        address counted out); only then is the TCP connection closed, so a client that
        has seen it close finds itself counted out."""
        conn = session.conn
        try:
            await conn.wait_idle()
            conn.closing = True
            await admission.session_closed(session)
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
