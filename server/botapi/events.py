"""``GET /api/stream/event``: an account's event stream, and every API stream's keep-alive.

An event stream is lichess's NDJSON feed of what happens to an account: a ``gameStart``
and a ``gameFinish`` for each of its games, a ``challenge`` line for each challenge to
or from it, ``challengeCanceled``/``challengeDeclined``, and an empty line every
KEEPALIVE_S seconds. A stream that opens is first sent the state: a ``gameStart`` for
each unfinished game of the account and a ``challenge`` line for each open challenge to
it; then the lines published for the account on the ``account-events`` channel
(shared/bus/account_events.py), from whichever node decided them.

A stream asked for with a Bearer token over HTTP/1.1 (every bot's) is kept by the
node's edge, out of aiohttp (:func:`take_over`): an idle one is its transport, a slotted
protocol, its :class:`Stream` and one task awaiting its end, about 5 KB (aiohttp's
objects for a connection weigh about 15; docs/performance.md). Others (the browser's,
with its session cookie) are served by the aiohttp route :func:`stream_events`; both
doors share :func:`begin`, :func:`hold` and :func:`end`.

Each node keeps one :class:`EventStreams` registry: the event streams by account,
written to without waiting (:meth:`Stream.send`, straight to the transport). One loop
per node writes the keep-alive line to every stream (of every kind: the game, seek and
challenge streams register theirs too), beats the ``online`` set and, every
CHECK_CREDENTIALS_S for each stream, looks again whether the credential it was opened
with still holds (one batched read for all the streams due: credentials.py): a stream
whose token was revoked, whose session ended or whose account was banned is ended. A
stream whose client is gone (its transport closing), or that has more than MAX_UNSENT
bytes unsent, is closed. At most MAX_STREAMS streams of each kind per node (429 past
it); one stream per credential (a newer one closes the older, on any node); on drain
every stream is ended, so the client reconnects to another node.

The registry also wakes the ``keepAliveStream`` challenges waiting here
(:meth:`EventStreams.wait_challenge`): the lines of the channel that decide a challenge
(its ``challengeDeclined``, ``challengeCanceled``, or the ``gameStart`` of the room it
became), addressed to its challenger, resolve its waiter.

The commit hook :func:`announce` publishes each game's start and finish (decided in
game_events.py) to the event streams of the accounts seated in it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from aiohttp import web
from aiohttp.http import HttpVersion11
from multidict import CIMultiDict
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import Credential
from kibitz.server.appkeys import ACCOUNTS_KEY, LIMITS_KEY, REDIS_KEY, SERVICE_KEY, STORE_KEY
from kibitz.server.botapi import game_events
from kibitz.server.botapi.credentials import live_credentials
from kibitz.server.botapi.errors import api_error, identify, take
from kibitz.server.botapi.users import public_origin
from kibitz.server.domain import room as rooms
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Room
from kibitz.server.fanout.hub import Hub, Spawn
from kibitz.shared.bus import keys
from kibitz.shared.bus.account_events import AccountEvents
from kibitz.shared.bus.errors import BusError

log = logging.getLogger(__name__)

NDJSON = "application/x-ndjson"
#: Streams of each kind (``event``, ``game``, ``seek``, ``challenge``) one node holds.
MAX_STREAMS = 1000
#: Every stream is sent an empty line this often (lichess: every few seconds).
KEEPALIVE_S = 6.0
#: A stream with more than this unsent (a client that stopped reading) is dropped.
MAX_UNSENT = 64 * 1024
#: Event streams an account may open per minute.
OPENS_PER_MINUTE = 60
#: How often (s) each open stream's credential is looked at again (by the keep-alive
#: loop, so a stream is checked within CHECK_CREDENTIALS_S + KEEPALIVE_S of the last).
CHECK_CREDENTIALS_S = 30.0
#: The longest the batched credential read may hold the keep-alive loop (s): past it, it
#: counts as a failed read (the streams stay open; the next round reads again).
CHECK_TIMEOUT_S = 5.0
EVENT = "event"

#: ``(token ids, session digests)`` -> the live ones among them (credentials.py).
LiveCredentials = Callable[[set[int], set[str]], Awaitable[tuple[set[int], set[str]]]]
#: The event lines that decide a challenge, and the outcome each tells its maker.
OUTCOMES = {
    "challengeDeclined": "declined",
    "challengeCanceled": "canceled",
    "gameStart": "accepted",
}


def now_ms() -> int:
    return int(time.time() * 1000)


def encode(line: Mapping[str, Any]) -> bytes:
    """One NDJSON line."""
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


class Stream:
    """One open streamed response, written to without waiting: each write goes to the
    connection's transport at once (a chunk of the chunked body on HTTP/1.1, the bytes
    themselves on HTTP/1.0). For an aiohttp ``response`` with no compression and no
    content length (every API stream), or (``response`` None) a connection the node's
    edge kept (:func:`take_over`), written to once ``ready``. ``done`` is set when the
    stream is to end: its handler awaits it (or its own end) and returns.
    ``credential``: what the request was identified by, looked at again every
    CHECK_CREDENTIALS_S (``checked``: when last, on the monotonic clock); None: never."""

    __slots__ = (
        "_response", "account_id", "checked", "chunked", "credential", "done", "id", "kind",
        "ready", "transport",
    )  # fmt: skip

    def __init__(
        self,
        request: web.BaseRequest | EdgeRequest,
        response: web.StreamResponse | None,
        kind: str,
        account_id: int | None = None,
        credential: Credential | None = None,
    ) -> None:
        self._response = response
        self.ready = False
        self.transport = request.transport
        self.chunked = request.version >= HttpVersion11
        self.kind = kind
        self.account_id = account_id
        self.credential = credential
        self.checked = time.monotonic()  # the request was identified just now
        self.id = secrets.token_hex(8)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def send(self, data: bytes) -> bool:
        """Write ``data`` now, unless the stream has ended; a stream whose client is
        gone is ended, and one with more than MAX_UNSENT bytes unsent is dropped. A
        stream whose answer's head is not written yet skips it. True if written."""
        transport = self.transport
        prepared = self.ready if self._response is None else self._response.prepared
        if self.done.done() or not prepared:
            return False
        if transport is None or transport.is_closing():
            self.close()
            return False
        if transport.get_write_buffer_size() > MAX_UNSENT:
            self.close(abort=True)
            return False
        self.write(data)
        return True

    @property
    def response(self) -> web.StreamResponse:
        """The aiohttp response (not for a stream the edge kept)."""
        assert self._response is not None, "a stream the edge kept has no aiohttp response"
        return self._response

    def write(self, data: bytes) -> None:
        """``data`` as the body's next bytes (the caller checked the transport)."""
        assert self.transport is not None
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)

    def close(self, abort: bool = False) -> None:
        """End the stream (``abort``: drop the connection too, unsent bytes and all)."""
        if abort and self.transport is not None:
            self.transport.abort()
        if not self.done.done():
            self.done.set_result(None)


class EventStreams:
    """One node's open API streams: event streams by account, the others by kind; the
    ``account-events`` channel's handler and the keep-alive loop, with its credential
    check; the challenges waiting for their outcome here."""

    def __init__(
        self,
        max_streams: int = MAX_STREAMS,
        keepalive_s: float = KEEPALIVE_S,
        check_s: float = CHECK_CREDENTIALS_S,
    ) -> None:
        self.max_streams = max_streams
        self.keepalive_s = keepalive_s
        self.check_s = check_s
        #: challenge id -> (its challenger's account id, the futures waiting for it).
        self._challenges: dict[str, tuple[int, set[asyncio.Future[dict[str, Any]]]]] = {}
        self._check_failing = False
        #: account id -> stream id -> its event stream.
        self._events: dict[int, dict[str, Stream]] = {}
        #: kind -> the other streams kept alive here.
        self._others: dict[str, set[Stream]] = {}
        #: The tasks serving the event streams the edge kept (:func:`take_over`).
        self.tasks: set[asyncio.Task[None]] = set()
        self.draining = False

    # -- streams -------------------------------------------------------------------------

    def count(self, kind: str = EVENT) -> int:
        """Open streams of ``kind``."""
        if kind == EVENT:
            return sum(len(streams) for streams in self._events.values())
        return len(self._others.get(kind, ()))

    def accounts(self) -> list[int]:
        """The accounts with an event stream here."""
        return list(self._events)

    def add_keepalive(self, stream: Stream) -> None:
        """Keep ``stream`` alive (and, for an event stream, send it its account's lines)
        until :meth:`remove`. Call it before the response is prepared: past MAX_STREAMS
        streams of its kind, 429; while the node drains, 503. Nothing is written to it
        before it is prepared."""
        if self.draining:
            raise api_error(503, "This server is shutting down; try again")
        if self.count(stream.kind) >= self.max_streams:
            raise api_error(429, "Too many requests. Try again later.", {"Retry-After": "60"})
        if stream.kind == EVENT and stream.account_id is not None:
            self._events.setdefault(stream.account_id, {})[stream.id] = stream
        else:
            self._others.setdefault(stream.kind, set()).add(stream)

    def remove(self, stream: Stream) -> None:
        """Forget ``stream`` (its handler ends)."""
        stream.close()
        if stream.kind == EVENT and stream.account_id is not None:
            streams = self._events.get(stream.account_id, {})
            streams.pop(stream.id, None)
            if not streams:
                self._events.pop(stream.account_id, None)
        else:
            self._others.get(stream.kind, set()).discard(stream)

    def _all(self) -> list[Stream]:
        found = [s for streams in self._events.values() for s in streams.values()]
        return found + [s for streams in self._others.values() for s in streams]

    def close_all(self) -> None:
        """Drain: end every stream (each client reconnects, to another node) and take
        no new one."""
        self.draining = True
        for stream in self._all():
            stream.close()

    # -- the channel ---------------------------------------------------------------------

    def on_message(self, data: str | bytes) -> None:
        """A message of ``account-events`` (shared/bus/account_events.py): lines for
        the event streams of its accounts held here, or a stream to close."""
        message = json.loads(data)
        if "close" in message:
            held = self._events.get(int(message["account"]), {})
            stream = held.get(str(message["close"]))
            if stream is not None:
                stream.close()
        elif "lines" in message:
            for account_id, line in message["lines"]:
                self._send(int(account_id), encode(line))
                self._decided(int(account_id), line)
        elif "to" in message:
            encoded = encode(message["line"])
            for account_id in message["to"]:
                self._send(int(account_id), encoded)
                self._decided(int(account_id), message["line"])

    def _send(self, account_id: int, data: bytes) -> None:
        for stream in list(self._events.get(account_id, {}).values()):
            stream.send(data)

    # -- challenges waiting for their outcome ------------------------------------------

    def wait_challenge(self, challenge_id: str, challenger: int) -> asyncio.Future[dict[str, Any]]:
        """A future resolved with the line that decides challenge ``challenge_id`` (made
        by the account ``challenger``) once the channel carries it to that account: its
        ``challengeDeclined``, ``challengeCanceled``, or the ``gameStart`` of its room.
        Pass it to :meth:`forget_challenge` when done. (A line published while this
        node's subscription was down is not seen: the waiter reads the record now and
        then as well.)"""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._challenges.setdefault(challenge_id, (challenger, set()))[1].add(future)
        return future

    def forget_challenge(self, challenge_id: str, future: asyncio.Future[dict[str, Any]]) -> None:
        """Stop waiting with ``future`` (from :meth:`wait_challenge`)."""
        entry = self._challenges.get(challenge_id)
        if entry is not None:
            entry[1].discard(future)
            if not entry[1]:
                del self._challenges[challenge_id]
        future.cancel()

    def _decided(self, account_id: int, line: dict[str, Any]) -> None:
        """Resolve the waiters of the challenge ``line`` decides, if it goes to its maker."""
        if not self._challenges or line.get("type") not in OUTCOMES:
            return
        about = line.get("game") if line.get("type") == "gameStart" else line.get("challenge")
        entry = self._challenges.get(str((about or {}).get("id")))
        if entry is None or entry[0] != account_id:
            return
        for future in entry[1]:
            if not future.done():
                future.set_result(line)

    # -- the keep-alive loop -------------------------------------------------------------

    def ping(self) -> None:
        """One empty line to every stream (a stream whose client is gone ends)."""
        for stream in self._all():
            stream.send(b"\n")

    async def check_credentials(self, live: LiveCredentials) -> int:
        """End the streams whose credential has ended (a token revoked, a session
        logged out or expired, an account banned), looking at those not looked at for
        ``check_s``: one call of ``live`` for them all. A read that fails (or takes more
        than CHECK_TIMEOUT_S) keeps every stream open, is logged once until a read
        succeeds, and is tried again at the next round. How many streams it ended."""
        now = time.monotonic()
        due = [
            stream for stream in self._all()
            if stream.credential is not None and now - stream.checked >= self.check_s
            and not stream.done.done()
        ]  # fmt: skip
        if not due:
            return 0
        token_ids: set[int] = set()
        digests: set[str] = set()
        for stream in due:
            assert stream.credential is not None
            if stream.credential.kind == "token":
                token_ids.add(int(stream.credential.key))
            else:
                digests.add(stream.credential.key)
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                live_tokens, live_sessions = await live(token_ids, digests)
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            if not self._check_failing:
                log.warning("could not check the open streams' credentials: %r", exc)
            self._check_failing = True
            return 0
        self._check_failing = False
        ended = 0
        for stream in due:
            assert stream.credential is not None
            stream.checked = now
            kind, key = stream.credential
            if (int(key) not in live_tokens) if kind == "token" else (key not in live_sessions):
                stream.close()
                ended += 1
        return ended

    async def run(self, bus: AccountEvents, live: LiveCredentials | None = None) -> None:
        """Every ``keepalive_s``: the keep-alive line to every stream, the beat of the
        ``online`` set (this node's event streams' accounts), then (given ``live``) the
        credential check of the streams due (:meth:`check_credentials`). A beat that fails
        is logged (the keep-alives go on; the next beat tries again)."""
        failing = False
        while True:
            await asyncio.sleep(self.keepalive_s)
            self.ping()
            try:
                await bus.beat(self.accounts(), now_ms())
            except (BusError, OSError) as exc:
                if not failing:
                    log.warning("could not beat the online accounts: %s", exc)
                failing = True
            else:
                failing = False
            if live is not None:
                await self.check_credentials(live)


EVENT_STREAMS_KEY = web.AppKey("event_streams", EventStreams)


def open_stream(request: web.Request, kind: str) -> Stream:
    """A new NDJSON stream of ``kind`` (``game``, ``seek``, ``challenge``) for
    ``request``, kept alive by the node's registry from the moment its response is
    prepared: call it before anything is written (429 past the node's bound of that
    kind, 503 while it drains); ``stream.response`` to prepare and write; and, in a
    ``finally``, ``request.app[EVENT_STREAMS_KEY].remove(stream)``."""
    stream = Stream(request, web.StreamResponse(headers={"Content-Type": NDJSON}), kind)
    request.app[EVENT_STREAMS_KEY].add_keepalive(stream)
    return stream


#: The open challenges to an account as event lines: ``(app, account id, origin)`` ->
#: ``[{"type": "challenge", ...}]``. The challenges module plugs its function in here
#: when it registers its routes (it imports this module for the keep-alives, so this
#: module cannot import it).
ChallengeLines = Callable[[web.Application, int, str], Awaitable[list[dict[str, Any]]]]
CHALLENGE_LINES_KEY: web.AppKey[ChallengeLines] = web.AppKey("challenge_lines")


# -- the stream --------------------------------------------------------------------------


async def _account(app: web.Application, headers: Mapping[str, str]) -> tuple[Account, Credential]:
    """The account of the request's token (or, through aiohttp, session cookie) with
    scope ``play``, and its credential, the stream opened counted (OPENS_PER_MINUTE an
    account): errors as ``api_account`` and ``limit`` answer them."""
    account, credential = await identify(app, headers, "play")
    await take(app, account.id, "event-streams", OPENS_PER_MINUTE, 60)
    return account, credential


def credential_name(credential: Credential) -> str:
    """How the one-stream-per-credential hash names it: ``token:ID``, ``session:DIGEST``."""
    return f"{credential.kind}:{credential.key}"


async def begin(
    app: web.Application,
    stream: Stream,
    account: Account,
    credential: str,
    origin: str,
    start: Callable[[], Awaitable[None]],
    write: Callable[[bytes], Awaitable[None]],
) -> bool:
    """Begin the event stream ``stream`` of an admitted request, whichever door it came
    in by: registered (429 past the node's bound, nothing written), noted as its
    credential's newest stream (503 if Redis cannot say), then ``start()`` writes the
    answer's head and ``write`` the first lines. False if it could not start (logged;
    the stream is ended: the client reconnects). What began it (the request's headers,
    the account) is not kept while the stream stays open: :func:`hold` waits then."""
    registry = app[EVENT_STREAMS_KEY]
    registry.add_keepalive(stream)
    try:
        await AccountEvents(app[REDIS_KEY]).opened(account.id, credential, stream.id, now_ms())
    except (BusError, OSError):
        registry.remove(stream)
        raise api_error(503, "Server unavailable; try again") from None
    started = False
    try:
        await start()
        for line in await first_lines(app, account, origin):
            await write(encode(line))
        started = True
    except (BusError, OSError) as exc:
        log.warning("event stream of account %d: could not start: %s", account.id, exc)
    finally:
        if not started:
            await end(app, stream, credential)
    return started


async def hold(app: web.Application, stream: Stream, credential: str) -> None:
    """Wait for the stream's end (its client gone, a newer stream of its credential, the
    node draining), then :func:`end` it."""
    try:
        await stream.done
    finally:
        await end(app, stream, credential)


async def end(app: web.Application, stream: Stream, credential: str) -> None:
    """Forget an event stream here and, unless a newer one replaced it, in Redis."""
    app[EVENT_STREAMS_KEY].remove(stream)
    assert stream.account_id is not None
    try:
        await AccountEvents(app[REDIS_KEY]).closed(stream.account_id, credential, stream.id)
    except (BusError, OSError) as exc:
        log.warning("could not note the end of an event stream: %s", exc)


async def stream_events(request: web.Request) -> web.StreamResponse:
    """``GET /api/stream/event`` served by aiohttp (when the node's edge did not keep
    the connection: see :func:`take_over`)."""
    account, identified = await _account(request.app, request.headers)
    credential = credential_name(identified)
    response = web.StreamResponse(headers={"Content-Type": NDJSON})
    stream = Stream(request, response, EVENT, account.id, identified)

    async def start() -> None:
        await response.prepare(request)

    origin = public_origin(request)
    if await begin(request.app, stream, account, credential, origin, start, response.write):
        await hold(request.app, stream, credential)
    return response


# -- the edge's door: a stream kept out of aiohttp ------------------------------------------

#: What the node's edge hands over (see :func:`take_over`).
EVENT_STREAM_PATH = b"/api/stream/event"
#: A kept connection's client has nothing to say: past this much, it is dropped.
MAX_RECEIVED = 16 * 1024


class EdgeRequest(NamedTuple):
    """A request head the node's edge read (server/gateway/edge.py)."""

    transport: asyncio.Transport
    version: tuple[int, int]
    headers: CIMultiDict[str]


def is_event_stream(head: bytes) -> bool:
    """Whether a request head is ``GET /api/stream/event`` (any query) over HTTP/1.1
    with an ``Authorization: Bearer`` token: the node's edge hands such a connection to
    :func:`take_over` instead of aiohttp. (The browser's, with its session cookie, goes
    on to aiohttp, whose route applies the cookie's origin rule.)"""
    request_line, *lines = head.split(b"\r\n")
    method, _, rest = request_line.partition(b" ")
    target, _, version = rest.partition(b" ")
    if method != b"GET" or version != b"HTTP/1.1":
        return False
    if target.split(b"?", 1)[0] != EVENT_STREAM_PATH:
        return False
    return any(
        name.strip().lower() == b"authorization" and value.strip()[:7].lower() == b"bearer "
        for name, _, value in (line.partition(b":") for line in lines)
    )


def parse_head(transport: asyncio.Transport, head: bytes) -> EdgeRequest:
    """The request head (up to its blank line) of a kept connection; ValueError for one
    that is not a plain HTTP/1.x GET without a body."""
    lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise ValueError(f"not an HTTP/1.x request line: {lines[0]!r}")
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise ValueError(f"not a header line: {line!r}")
        headers.add(name, value.strip())
    if "Transfer-Encoding" in headers or headers.get("Content-Length", "0") != "0":
        raise ValueError("a GET with a body")
    return EdgeRequest(transport, (1, 1) if parts[2] == "HTTP/1.1" else (1, 0), headers)


class Kept(asyncio.Protocol):
    """The protocol of a connection kept for an event stream: its request ``head`` until
    read, then its :class:`Stream`. What the client sends is dropped (past MAX_RECEIVED,
    the connection), and its going ends the stream."""

    __slots__ = ("gone", "head", "received", "stream", "transport")

    def __init__(self, transport: asyncio.Transport, head: bytes) -> None:
        self.transport = transport
        self.head: bytes | None = head
        self.stream: Stream | None = None
        self.received = 0
        self.gone = False

    def data_received(self, data: bytes) -> None:
        self.received += len(data)
        if self.received > MAX_RECEIVED:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        if self.stream is not None:
            self.stream.close()


def take_over(app: web.Application, transport: asyncio.Transport, head: bytes) -> None:
    """The edge's hand-over (server/gateway/edge.py): serve the event stream asked for by
    ``head`` on ``transport`` without aiohttp, so that an open stream costs only its
    transport, a :class:`Kept` protocol, its :class:`Stream` and the one task that awaits
    its end (a few KB; aiohttp's objects for a connection weigh several times that)."""
    kept = Kept(transport, head)
    transport.set_protocol(kept)
    task = asyncio.create_task(_serve_kept(app, kept))
    tasks = app[EVENT_STREAMS_KEY].tasks
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _serve_kept(app: web.Application, kept: Kept) -> None:
    try:
        begun = await _begin_kept(app, kept)
        if begun is None:  # refused (answered), or it could not begin: nothing more
            kept.transport.close()
            return
        stream, credential = begun
        await hold(app, stream, credential)
    except Exception:
        log.exception("an event stream failed")
        kept.transport.abort()
        return
    if not kept.transport.is_closing():  # ended by the server: the client reconnects
        if stream.chunked:
            kept.transport.write(b"0\r\n\r\n")
        kept.transport.close()


async def _begin_kept(app: web.Application, kept: Kept) -> tuple[Stream, str] | None:
    """Read the kept connection's request and :func:`begin` its stream: the stream and
    its credential, or None once answered otherwise (a refusal, a client gone)."""
    transport, head, kept.head = kept.transport, kept.head or b"", None
    try:
        request = parse_head(transport, head)
    except ValueError as exc:
        _refuse(transport, (1, 1), api_error(400, f"Bad request: {exc}"))
        return None
    try:
        account, identified = await _account(app, request.headers)
    except web.HTTPException as refused:
        _refuse(transport, request.version, refused)
        return None
    credential = credential_name(identified)
    kept.stream = stream = Stream(request, None, EVENT, account.id, identified)
    if kept.gone:
        return None

    async def start() -> None:
        version = "1.1" if stream.chunked else "1.0"
        framing = "Transfer-Encoding: chunked" if stream.chunked else "Connection: close"
        transport.write(
            f"HTTP/{version} 200 OK\r\nContent-Type: {NDJSON}\r\n"
            f"Cache-Control: no-store\r\n{framing}\r\n\r\n".encode()
        )
        stream.ready = True

    async def write(data: bytes) -> None:
        if not transport.is_closing():
            stream.write(data)

    origin = _origin(app, request.headers)
    try:
        began = await begin(app, stream, account, credential, origin, start, write)
    except web.HTTPException as refused:  # before anything was written
        _refuse(transport, request.version, refused)
        return None
    return (stream, credential) if began else None


def _refuse(
    transport: asyncio.Transport, version: tuple[int, int], refused: web.HTTPException
) -> None:
    """Answer a kept connection's request with ``refused`` (an ``api_error``) and close."""
    body = (refused.text or "").encode()
    head = [
        f"HTTP/{version[0]}.{version[1]} {refused.status} {refused.reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if "Retry-After" in refused.headers:
        head.append(f"Retry-After: {refused.headers['Retry-After']}")
    if not transport.is_closing():
        transport.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        transport.close()


def _origin(app: web.Application, headers: Mapping[str, str]) -> str:
    """The site's origin as browsers see it (as ``users.public_origin`` says for an
    aiohttp request): the first public origin configured, else this request's host."""
    configured = app[LIMITS_KEY].public_origins
    return min(configured) if configured else f"http://{headers.get('Host', '')}"


async def first_lines(app: web.Application, account: Account, origin: str) -> list[dict[str, Any]]:
    """What a new stream is sent first: a ``gameStart`` for each unfinished game of the
    account, then a ``challenge`` line for each open challenge to it."""
    games = await unfinished_games(app, account)
    return [*games, *await open_challenges(app, account, origin)]


async def unfinished_games(app: web.Application, account: Account) -> list[dict[str, Any]]:
    """A ``gameStart`` line for each room of the per-player index (shared/bus/playing.py)
    that is not over and has a seat of ``account`` (stale entries are dropped from the
    index)."""
    store, service = app[STORE_KEY], app[SERVICE_KEY]
    lines: list[dict[str, Any]] = []
    stale: list[str] = []
    for room_id in await store.playing.rooms(account.player_id):
        room = await store.load(room_id)
        seats = [] if room is None else game_events.seats_of(room, account.id)
        if room is None or room.status == "over" or not seats:
            stale.append(room_id)
            continue
        snapshot = rooms.snapshot(room, service.state_of(room), clock_ms=service.clock_ms())
        for seat in seats:
            lines.append({"type": "gameStart", "game": game_events.game_info(room, snapshot, seat)})
    await store.playing.drop(account.player_id, stale)
    return lines


async def open_challenges(
    app: web.Application, account: Account, origin: str
) -> list[dict[str, Any]]:
    """A ``challenge`` line for each open challenge to ``account``: what the function
    under CHALLENGE_LINES_KEY gives (server/botapi/challenges.py puts it there; none
    without it)."""
    lines = app.get(CHALLENGE_LINES_KEY)
    if lines is None:
        return []
    return await lines(app, account.id, origin)


# -- the commit hook ------------------------------------------------------------------------


async def announce(
    bus: AccountEvents,
    room: Room,
    expected_version: int,
    event: dict[str, Any],
    snapshot: dict[str, Any],
) -> None:
    """After a commit (RoomStore.after_commit): if it started or finished the game and
    a seat holds an account, one message (one PUBLISH) with each account seat's line.
    A failure is logged: the commit stands, and a stream that opens later is sent the
    unfinished games anyway."""
    if not game_events.account_seats(room):
        return
    change = game_events.game_change(str(event.get("kind")), room, expected_version)
    if change is None:
        return
    try:
        await bus.publish_each(game_events.game_lines(change, room, snapshot))
    except (BusError, OSError) as exc:
        log.warning("could not announce the %s of room %s: %s", change, room.id, exc)


# -- wiring ---------------------------------------------------------------------------------


def register(app: web.Application) -> None:
    """Add this module's routes."""
    app.router.add_get("/api/stream/event", stream_events)


def start(app: web.Application, hub: Hub, spawn: Spawn) -> None:
    """Listen on the account-events channel (``hub.channels``, before the hub starts),
    tell the room store's commits to :func:`announce`, and start the keep-alive loop
    (``spawn(name, body)``), which checks the streams' credentials in the accounts'
    database. The registry is the one already under EVENT_STREAMS_KEY, if any (tests set
    smaller bounds and periods so), else a new one."""
    registry = app.get(EVENT_STREAMS_KEY)
    if registry is None:
        app[EVENT_STREAMS_KEY] = registry = EventStreams()
    bus = AccountEvents(app[REDIS_KEY])
    hub.channels[keys.ACCOUNT_EVENTS] = registry.on_message

    async def after_commit(
        room: Room, expected_version: int, event: dict[str, Any], snapshot: dict[str, Any]
    ) -> None:
        await announce(bus, room, expected_version, event, snapshot)

    app[STORE_KEY].after_commit = after_commit
    engine = app[ACCOUNTS_KEY].engine

    async def live(token_ids: set[int], digests: set[str]) -> tuple[set[int], set[str]]:
        return await live_credentials(engine, token_ids, digests)

    spawn("event-streams", lambda: registry.run(bus, live))


async def drain(app: web.Application, timeout: float = 2.0) -> None:
    """Drain (server/node.py): end every API stream of this node, and wait (at most
    ``timeout`` seconds) for the streams the edge kept to be ended and forgotten (the
    aiohttp handlers are waited for by aiohttp)."""
    registry = app.get(EVENT_STREAMS_KEY)
    if registry is None:
        return
    registry.close_all()
    if registry.tasks:
        await asyncio.wait(set(registry.tasks), timeout=timeout)
