"""WebSocket admission: who may open a socket, and what opening and closing one does.

It decides, for both ways a socket arrives (a fresh connection's upgrade taken by
server/gateway/edge.py, and ``GET /ws`` on a connection aiohttp already serves): the
origin check, the refusal while the node drains, the per-address connection count in
Redis (counted in on admission, out when the session closes or the handshake fails), the
greeting, and the session (server/gateway/session.py) that handles the frames.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping
from typing import NamedTuple

from aiohttp import WSCloseCode, WSMsgType, web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import Credential
from kibitz.server.accounts.errors import AccountError
from kibitz.server.appkeys import (
    ACCOUNTS_KEY,
    HUB_KEY,
    LIMITER_KEY,
    LIMITS_KEY,
    LISTENING_ORIGINS_KEY,
    METRICS_KEY,
    MODERATION_KEY,
    NODE_KEY,
    SEEKS_KEY,
    WS_COMPRESSION_KEY,
)
from kibitz.server.domain.players import Account
from kibitz.server.fanout.connection import Connection
from kibitz.server.gateway.csrf import cookie_trusted
from kibitz.server.gateway.limits import client_address, origin_allowed
from kibitz.server.gateway.session import Session
from kibitz.server.services.limits import LimitExceeded
from kibitz.shared.bus.errors import BusError
from kibitz.shared.protocol.client_out import Error, Welcome
from kibitz.shared.protocol.codec import Codec

log = logging.getLogger(__name__)

# aiohttp refuses frames past this outright (close 1009); frames between MAX_FRAME_BYTES
# (shared/protocol) and this get a typed error first, then the same close.
HARD_FRAME_LIMIT = 1024 * 1024


def requested_codec(values: Collection[str]) -> Codec:
    """The codec a WebSocket URL asks for, from its ``codec`` values: msgpack when that is
    the one value given, else JSON (the default)."""
    return "msgpack" if list(values) == ["msgpack"] else "json"


class Refusal(Exception):
    """A WebSocket handshake turned away: the HTTP status and the typed error to send."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = Error(code, message).to_dict()


class Admitted(NamedTuple):
    """A handshake let in: the client's address (counted in), whom it acts for and the
    credential that said so (re-checked while the socket lives: server/accounts/liveness.py)."""

    address: str
    account: Account | None
    credential: Credential | None = None


async def admit(app: web.Application, remote: str | None, headers: Mapping[str, str]) -> Admitted:
    """Decide whether a WebSocket handshake may go ahead; the client's address (counted in
    the per-address connections: :func:`session_closed` counts it out) and its account
    (the session cookie's, read only for a page of our own origins, server/gateway/csrf.py
    ``cookie_trusted``; or a Bearer token's with the ``play`` scope; a present but bad
    token is refused, 401), or :class:`Refusal`. The same checks for both ways a socket
    arrives (server/gateway/edge.py and the aiohttp route)."""
    limits = app[LIMITS_KEY]
    listening: set[str] = app[LISTENING_ORIGINS_KEY]
    own = limits.public_origins or frozenset(listening)
    if not origin_allowed(headers, limits.allowed_origins, own):
        raise Refusal(403, "auth/origin", "WebSockets from this origin are not allowed")
    if app[HUB_KEY].draining:
        raise Refusal(503, "server/unavailable", "this node is shutting down; use another")
    address = client_address(remote, headers, limits.trusted_proxies)
    cookie = cookie_trusted(headers, own, limits.allowed_origins)
    account, credential = await handshake_account(app, headers, cookie)
    await refuse_banned(app, address, None if account is None else account.id)
    try:
        await app[LIMITER_KEY].connect(address)
    except LimitExceeded as exc:
        raise Refusal(429, exc.code, exc.message) from None
    except (BusError, OSError):
        raise Refusal(503, "server/unavailable", "storage unavailable; try again") from None
    return Admitted(address, account, credential)


async def handshake_account(
    app: web.Application, headers: Mapping[str, str], cookie: bool = True
) -> tuple[Account | None, Credential | None]:
    """The account a handshake acts for and by what (server/accounts/service.py
    ``identify_by``; ``cookie`` False: the session cookie is not read)."""
    try:
        return await app[ACCOUNTS_KEY].identify_by(headers, "play", cookie)
    except AccountError as exc:
        raise Refusal(exc.status, exc.code, exc.message) from None
    except (SQLAlchemyError, OSError):
        raise Refusal(503, "server/unavailable", "storage unavailable; try again") from None


async def refuse_banned(app: web.Application, address: str, account_id: int | None = None) -> None:
    """A banned address (or account) is refused at the handshake (403 ``auth/banned``)."""
    try:
        refusal = await app[MODERATION_KEY].banned(account_id, address)
    except (BusError, OSError):
        raise Refusal(503, "server/unavailable", "storage unavailable; try again") from None
    if refusal is not None:
        raise Refusal(403, "auth/banned", refusal)


def open_session(
    app: web.Application,
    conn: Connection,
    address: str,
    account: Account | None = None,
    credential: Credential | None = None,
) -> Session:
    """A socket is open: register it, greet it, and give it its session (acting for
    ``account`` as long as ``credential`` holds, or a guest)."""
    app[HUB_KEY].add(conn)
    app[METRICS_KEY].connections.inc()
    conn.send(Welcome(app[NODE_KEY]).to_dict())
    return Session(app, conn, address, account, credential)


async def session_closed(session: Session) -> None:
    """The socket is gone: its seeks go, its rooms are told, its address counted out
    (both at once: their Redis commands share the round trips)."""
    session.app[METRICS_KEY].connections.dec()
    await asyncio.gather(_leave_all(session), address_closed(session.app, session.address))


async def _leave_all(session: Session) -> None:
    """A closed connection's seeks go, and its rooms are told it left."""
    app, conn = session.app, session.conn
    try:
        await app[SEEKS_KEY].closed(session)  # its seeks go with it
    except (BusError, OSError) as exc:
        log.warning("could not remove a closed connection's seeks: %s", exc)
    await app[HUB_KEY].remove(conn)  # its rooms told (a Redis failure is paid back later)


async def address_closed(app: web.Application, address: str) -> None:
    try:
        await app[LIMITER_KEY].disconnect(address)
    except (BusError, OSError) as exc:
        log.warning("could not count a connection out: %s", type(exc).__name__)


async def websocket(request: web.Request) -> web.StreamResponse:
    """``GET /ws`` on a connection aiohttp already serves: a WebSocket upgrade on a
    kept-alive HTTP connection (a fresh connection's upgrade is taken by server/gateway/edge.py
    before aiohttp sees it), or a request that is no valid upgrade (answered 400 before
    anything is counted: only a WebSocket that opens holds one of its address's places)."""
    app = request.app
    ws = web.WebSocketResponse(
        max_msg_size=HARD_FRAME_LIMIT,
        heartbeat=30,
        compress=app[WS_COMPRESSION_KEY],
        autoping=False,  # pongs are ours to read: they measure the lag (server/fanout/lag.py)
    )
    if not ws.can_prepare(request).ok:  # aiohttp's own 400 says why; nothing counted in
        await ws.prepare(request)  # raises web.HTTPBadRequest
    try:
        address, account, credential = await admit(app, request.remote, request.headers)
    except Refusal as refused:
        return web.json_response(refused.body, status=refused.status)
    codec = requested_codec(request.query.getall("codec", []))
    session: Session | None = None
    try:
        await ws.prepare(request)
        conn = Connection(ws, codec, request.transport)
        session = open_session(app, conn, address, account, credential)
    except ConnectionResetError:  # the client gave up before we answered: nothing to do
        return ws
    finally:
        if session is None:  # refused or gone mid-handshake (any error): counted out again
            await address_closed(app, address)
    try:
        if app[HUB_KEY].draining:  # upgraded as the node began to shut down: go elsewhere
            await conn.close(WSCloseCode.GOING_AWAY, b"shutting down")
        async for frame in ws:
            if frame.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                if not await session.handle(frame.data):
                    break
            elif frame.type == WSMsgType.PING:
                await ws.pong(frame.data)
            elif frame.type == WSMsgType.PONG and conn.lag is not None:
                conn.lag.on_pong(frame.data)
            elif frame.type == WSMsgType.ERROR:
                break
    finally:
        try:
            await session_closed(session)
        finally:
            if not ws.closed:
                await conn.close(session.close_code, session.close_reason)
            if conn.writer is not None:
                conn.writer.cancel()
    return ws
