"""Fixtures of the Bot and Board API tests (docs/bot-api.md): two real ``kibitz serve``
nodes on one Redis of the module's own and the session's SQLite database, accounts with
``play`` tokens, ``berserk`` clients (the lichess client from PyPI, unmodified) pointed at
a node, and :class:`Stream`, which reads one of berserk's blocking NDJSON iterators in a
thread so that every wait of a test is bounded.

- ``api_nodes``: the two nodes (module scope); ``node.http_url`` is a berserk base URL.
- ``make_account(bot=False)``: a new account and a ``play`` token of it, as
  :class:`ApiAccount` ``(username, token)``; ``bot=True`` upgrades it to a bot account
  (``POST /api/bot/account/upgrade``).
- ``berserk_client(token, node)``: a ``berserk.Client`` for that token on that node.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import berserk
import pytest
import requests

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server

#: The longest any test waits for one thing (a line, an answer, a game's end).
WAIT_S = 20.0
#: berserk sets no timeout; ours: connect, then between two reads of a stream (the server
#: writes a keep-alive line every 6 s, so a live stream never stays silent this long).
REQUEST_TIMEOUT = (5.0, 30.0)
PASSWORD = "a long enough password"


class ApiAccount(NamedTuple):
    """An account made for a test: its username as typed and a ``play`` token."""

    username: str
    token: str


@pytest.fixture(scope="module")
def api_nodes(own_redis: EmbeddedRedis) -> Iterator[list[ServerProcess]]:
    """Two nodes on one Redis (the module's own) and one database: a client may stream
    from one and act on the other, or reopen its stream on the other."""
    with ThreadPoolExecutor(2) as pool:  # each takes seconds to start: together
        starting = [pool.submit(start_server, own_redis.url) for _ in range(2)]
    started = [future.result() for future in starting if not future.exception()]
    try:
        assert len(started) == 2, [future.exception() for future in starting]
        yield started
    finally:
        for node in started:
            node.stop()


@pytest.fixture(scope="module")
def make_account(api_nodes: list[ServerProcess]) -> Callable[..., ApiAccount]:
    """``make_account(bot=False)``: a fresh account signed up on the first node, and a
    ``play`` token made with its session; a bot account if ``bot``."""
    base = api_nodes[0].http_url

    def make(bot: bool = False) -> ApiAccount:
        account = new_account(base)
        return upgrade(base, account) if bot else account

    return make


@pytest.fixture(scope="module")
def berserk_client() -> Callable[[str, ServerProcess], berserk.Client]:
    """``berserk_client(token, node)``: berserk pointed at the node, acting for the token."""
    return client_for


def client_for(token: str, node: ServerProcess) -> berserk.Client:
    """A berserk client of ``node`` for ``token``, whose requests time out."""
    return berserk.Client(session=ApiSession(token), base_url=node.http_url)


def new_account(base: str) -> ApiAccount:
    """Sign a fresh username up at ``base`` and make a ``play`` token with its cookie."""
    username = "u" + uuid.uuid4().hex[:12]
    origin = {"Origin": base}
    body = {"username": username, "password": PASSWORD}
    signed = requests.post(f"{base}/api/auth/signup", json=body, headers=origin, timeout=WAIT_S)
    assert signed.status_code == 201, signed.text
    cookie = {"Cookie": f"kibitz_session={signed.cookies['kibitz_session']}", **origin}
    scopes = {"scopes": ["play"], "description": "berserk tests"}
    made = requests.post(f"{base}/api/tokens", json=scopes, headers=cookie, timeout=WAIT_S)
    assert made.status_code == 201, made.text
    return ApiAccount(username, made.json()["token"])


def upgrade(base: str, account: ApiAccount) -> ApiAccount:
    """Make ``account`` a bot account through the API, as lichess bots do."""
    auth = {"Authorization": f"Bearer {account.token}"}
    reply = requests.post(f"{base}/api/bot/account/upgrade", headers=auth, timeout=WAIT_S)
    assert reply.status_code == 200 and reply.json() == {"ok": True}, reply.text
    return account


class ApiSession(berserk.TokenSession):
    """berserk's token session with a timeout on every request (berserk sets none), which
    tells the :class:`Stream` reading in the calling thread which response it reads."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.local = threading.local()

    def request(
        self, method: str, url: str | bytes, *args: Any, **kwargs: Any
    ) -> requests.Response:
        kwargs.setdefault("timeout", REQUEST_TIMEOUT)
        response = super().request(method, url, *args, **kwargs)
        reader = getattr(self.local, "reader", None)
        if reader is not None and kwargs.get("stream"):
            reader.opened(response)
        return response


class StreamEnded(Exception):
    """The stream's server closed it (or its connection failed: ``__cause__``)."""


class Stream:
    """One of berserk's blocking stream iterators, read in a daemon thread into a queue.

    ``Stream.open(client, lambda: client.bots.stream_game_state(game_id))`` returns once
    the server answered (its error, such as berserk's ``ResponseError``, is raised there).
    Every line read is kept in ``lines``; :meth:`next` and :meth:`wait_for` wait at most
    ``WAIT_S``; :meth:`close` hangs the connection up at once, as a client that goes away."""

    _END = object()

    def __init__(self, session: ApiSession, lines: Callable[[], Iterator[Any]]):
        self.session = session
        self.response: requests.Response | None = None
        self.lines: list[dict[str, Any]] = []
        self.closed = False
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=10_000)
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._ready = threading.Event()  # answered: 200 with headers, or ended
        self._thread = threading.Thread(target=self._read, args=(lines,), daemon=True)
        self._thread.start()

    @classmethod
    def open(cls, client: berserk.Client, lines: Callable[[], Iterator[Any]]) -> Stream:
        session = client.account._r.session  # the one session of all of its sub-clients
        assert isinstance(session, ApiSession), "make the client with berserk_client"
        stream = cls(session, lines)
        if not stream._ready.wait(WAIT_S):
            raise AssertionError(f"no answer in {WAIT_S} s")
        if stream._error is not None:
            raise stream._error
        return stream

    def opened(self, response: requests.Response) -> None:
        """The session's news, in the reading thread: the server answered."""
        self.response = response
        if response.ok:
            self._ready.set()

    def _read(self, lines: Callable[[], Iterator[Any]]) -> None:
        self.session.local.reader = self
        try:
            for line in lines():
                self._queue.put(line, timeout=WAIT_S)
                if self.closed:
                    break
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting test
            if not self.closed:
                self._error = exc
        finally:
            if self.response is not None:
                self.response.close()
            self._queue.put(self._END)
            self._done.set()
            self._ready.set()

    def next(self, timeout: float = WAIT_S) -> dict[str, Any]:
        """The next line (keep-alive lines are not lines: berserk skips them)."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout} s; so far: {self.lines}") from None
        if line is self._END:
            self._queue.put(self._END)  # every later call ends too
            raise StreamEnded(f"the stream ended after {self.lines}") from self._error
        self.lines.append(line)
        return dict(line)

    def wait_for(
        self, wanted: Callable[[dict[str, Any]], bool], timeout: float = WAIT_S
    ) -> dict[str, Any]:
        """The first line from now on for which ``wanted`` is true (others are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(0.0, deadline - time.monotonic()))
            if wanted(line):
                return line

    def wait_type(self, kind: str, timeout: float = WAIT_S) -> dict[str, Any]:
        """The next line of ``type`` ``kind``."""
        return self.wait_for(lambda line: line.get("type") == kind, timeout)

    def ended(self, timeout: float = WAIT_S) -> bool:
        """Whether the stream ends within ``timeout`` (the lines before are kept)."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self.next(max(0.0, deadline - time.monotonic()))
        except StreamEnded:
            return True
        except AssertionError:
            return False

    def close(self) -> None:
        """Hang up now: shut the connection's socket, so the server sees it go at once."""
        self.closed = True
        connection = getattr(self.response.raw, "connection", None) if self.response else None
        sock = getattr(connection, "sock", None)
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # already gone
                sock.shutdown(socket.SHUT_RDWR)
        self._done.wait(WAIT_S)
