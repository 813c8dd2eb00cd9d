"""The spectators of ``kibitz bench load --spectators N``, in child processes.

A thousand sockets read in the bench's own process cost it more CPU per move than the
server spends sending to them, so the fan-out figure measured the load generator. Here
the spectators are spread over ``P`` child processes (spectator i in process i mod P),
each with its own asyncio loop and its connections' objects frozen out of the garbage
collector's way once connected.

A spectator is light: no task of its own, only an asyncio protocol's callbacks driving
the ``websockets`` library's sans-I/O client (offering per-message deflate as browsers
do; the server declines it unless told to compress, and then the frames are inflated
here as a browser would), its socket read into one buffer per process. Each frame is
still decoded in full (``orjson``; msgpack for binary frames): a spectator has a version
only once it got a valid ``state`` message with it.

Each child tells the parent, over a pipe, as text:

``ready CPU``
    its spectators are all connected and have the room's state (CPU: its
    ``time.process_time()`` then);
``v VERSION TIME``
    the last of its spectators has just received state ``VERSION``, at ``TIME``
    (``time.perf_counter()``, CLOCK_MONOTONIC on Linux, so comparable across processes);
``done CPU``
    the answer to the parent's ``stop``, before it closes its sockets and exits;
``error server CODE MESSAGE`` or ``error other TYPE MESSAGE``
    it failed (an error message from the server, or an exception); it then exits.

The parent (:class:`Spectators`) reads the pipes from its own loop: every child having
reported version v means all the spectators have it, at the latest of the children's times.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import multiprocessing
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import msgpack
import orjson
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from kibitz.client.connection import ServerError, ws_url
from kibitz.shared.protocol.codec import Codec

Buffer = bytes | bytearray | memoryview  # a frame's data

MAX_PROCS = 16
OPENING_AT_ONCE = 50  # spectator connections being opened at the same time, in all
STOP_SECONDS = 10.0  # how long a child may take to answer ``stop`` and exit
OPEN_SECONDS = 60.0  # how long a spectator may take to connect and get the room's state
MAX_MESSAGE = 2**22  # bytes
READ_BUFFER = 2**16  # bytes read from a socket at a time


def _message(opcode: Opcode, data: Buffer) -> dict[str, Any]:
    """A received data frame's message, fully decoded: JSON text or msgpack binary."""
    text = opcode is Opcode.TEXT
    message: dict[str, Any] = orjson.loads(data) if text else msgpack.unpackb(data, raw=False)
    if not isinstance(message, dict):
        raise ValueError(f"a spectator received a {type(message).__name__}, not a message")
    return message


# --- in a child process ---------------------------------------------------------------


class _Spectator(asyncio.BufferedProtocol):
    """One spectator: a socket driven by callbacks (no task of its own) and the
    ``websockets`` library's sans-I/O client. Every data frame is decoded.

    Buffered: the socket is read into its process's one buffer (``recv_into``), not with
    ``recv(256 KiB)``, whose allocation cost ~14 us per read, more than parsing a frame."""

    def __init__(self, watchers: _Watchers, url: str) -> None:
        self.watchers = watchers
        self.protocol = ClientProtocol(
            parse_uri(url),
            extensions=[ClientPerMessageDeflateFactory()],  # offered, as browsers do
            max_size=MAX_MESSAGE,
        )
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.opened: asyncio.Future[None] = loop.create_future()  # first state received
        self.lost: asyncio.Future[None] = loop.create_future()
        self.newest = -1  # the newest state version received; -1 until the first
        self.fragments: list[Buffer] = []  # a fragmented message's frames so far
        self.fragment_opcode = Opcode.TEXT  # and its type
        self.closing = False  # we are closing it: its end is no failure

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.protocol.send_request(self.protocol.connect())
        self._flush()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.watchers.view  # shared: filled, then handed over at once, in one callback

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.protocol.receive_data(self.watchers.view[:nbytes].tobytes())
            for event in self.protocol.events_received():
                if isinstance(event, Response):
                    self._on_handshake()
                elif isinstance(event, Frame):
                    self._on_frame(event)
            if self.protocol.parser_exc is not None:
                raise self.protocol.parser_exc
        except Exception as exc:  # the first failure ends the child
            self._fail(exc)
        finally:
            self._flush()

    def eof_received(self) -> bool | None:
        self.protocol.receive_eof()
        self._flush()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        if not self.closing:
            self._fail(ConnectionError(f"a spectator's socket closed ({exc or 'EOF'})"))

    # the WebSocket's events

    def _on_handshake(self) -> None:
        if self.protocol.handshake_exc is not None:
            raise self.protocol.handshake_exc
        watch = json.dumps({"type": "watch", "room": self.watchers.room})
        self.protocol.send_text(watch.encode())

    def _on_frame(self, frame: Frame) -> None:
        opcode = frame.opcode
        if opcode is Opcode.TEXT or opcode is Opcode.BINARY:
            if not frame.fin:
                self.fragments = [frame.data]
                self.fragment_opcode = opcode
                return
            self._on_message(_message(opcode, frame.data))
        elif opcode is Opcode.CONT:
            self.fragments.append(frame.data)
            if frame.fin:
                data, self.fragments = b"".join(self.fragments), []
                self._on_message(_message(self.fragment_opcode, data))
        elif opcode is Opcode.CLOSE:
            raise ConnectionError("a spectator's socket closed")
        # PING: the pong is queued by the protocol, and flushed after; PONG: nothing.

    def _on_message(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "error":
            raise ServerError(message["code"], message["message"])
        if kind != "state":
            return
        version = message["version"]
        if not isinstance(version, int):
            raise ValueError(f"a state's version is {version!r}, not a number")
        if version <= self.newest:
            return
        first, self.newest = self.newest < 0, version
        if first:  # connected: counted from now on
            self.watchers.count += 1
            self.opened.set_result(None)
        else:
            self.watchers.received(version)

    # helpers

    def _flush(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        for data in self.protocol.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():  # the protocol's end: half-close
                transport.write_eof()
            else:
                transport.close()

    def _fail(self, exc: BaseException) -> None:
        if self.closing:
            return
        self.closing = True
        if self.transport is not None:
            self.transport.abort()
        self.watchers.fail(exc)

    def close(self) -> None:
        """Close the WebSocket (a close frame, then the socket) without failing."""
        if self.closing or self.transport is None:
            self.closing = True
            return
        self.closing = True
        with contextlib.suppress(Exception):
            self.protocol.send_close()
            self._flush()
        self.transport.close()


class _Watchers:
    """One child's spectators, watching one room. For each state version it reports when
    the last of them received it."""

    def __init__(self, room: str, codec: Codec, report: Callable[[str], None]) -> None:
        self.room = room
        self.codec = codec
        self.report = report
        self.count = 0
        self.seen: dict[int, int] = {}  # version -> spectators that have it
        self.failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.spectators: list[_Spectator] = []
        self.view = memoryview(bytearray(READ_BUFFER))  # the spectators' reads, in turn

    async def add(self, url: str) -> None:
        """Connect, watch the room until its state arrives; it then reads on by callbacks."""
        loop = asyncio.get_running_loop()
        spectator = _Spectator(self, ws_url(url, self.codec))
        self.spectators.append(spectator)
        uri = spectator.protocol.uri
        async with asyncio.timeout(OPEN_SECONDS):
            await loop.create_connection(
                lambda: spectator, uri.host, uri.port, ssl=True if uri.secure else None
            )
            await spectator.opened

    def received(self, version: int) -> None:
        seen = self.seen[version] = self.seen.get(version, 0) + 1
        if seen == self.count:
            self.report(f"v {version} {time.perf_counter()!r}")

    def fail(self, exc: BaseException) -> None:
        if not self.failed.done():
            self.failed.set_exception(exc)

    async def close(self) -> None:
        for spectator in self.spectators:
            spectator.close()
        lost = [s.lost for s in self.spectators if s.transport is not None]
        if lost:
            await asyncio.wait(lost, timeout=2.0)


async def _watch(conn: Connection, room: str, codec: Codec, urls: list[str], at_once: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_command() -> None:
        try:
            command = conn.recv_bytes()
        except (EOFError, OSError):  # the parent is gone: stop too
            loop.remove_reader(conn.fileno())
            stop.set()
            return
        if command == b"stop":
            stop.set()

    def report(line: str) -> None:
        conn.send_bytes(line.encode())

    loop.add_reader(conn.fileno(), on_command)
    watchers = _Watchers(room, codec, report)
    opening = asyncio.Semaphore(at_once)

    async def spectate(url: str) -> None:
        async with opening:
            await watchers.add(url)

    try:
        connecting: asyncio.Future[Any] = asyncio.gather(*(spectate(url) for url in urls))
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        failed: asyncio.Future[Any] = watchers.failed
        try:
            done, _ = await asyncio.wait(
                [connecting, failed, stopping], return_when=asyncio.FIRST_COMPLETED
            )
            if connecting not in done:  # a reader failed, or the parent stopped us early
                connecting.cancel()
                await asyncio.wait([connecting])
                with contextlib.suppress(asyncio.CancelledError):
                    connecting.exception()  # retrieved: the failure is reported below
                if watchers.failed.done():
                    watchers.failed.result()
                return
            connecting.result()
            # A thousand connections' objects: out of the collector's way during the moves.
            gc.collect()
            gc.freeze()
            report(f"ready {time.process_time()!r}")
            await asyncio.wait([failed, stopping], return_when=asyncio.FIRST_COMPLETED)
            if watchers.failed.done():
                watchers.failed.result()
            report(f"done {time.process_time()!r}")
        finally:
            stopping.cancel()
    finally:
        loop.remove_reader(conn.fileno())
        if watchers.failed.done():
            watchers.failed.exception()  # reported already, or beside the one reported
        await watchers.close()


def child_main(
    conn: Connection, room: str, codec: Codec, urls: list[str], at_once: int, seconds: float
) -> None:
    """A child process: watch ``room`` with one spectator per URL in ``urls`` until the
    parent says ``stop`` (or goes away), or ``seconds`` pass."""

    # Named for ps and pgrep (without -f: the command line is multiprocessing's own).
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:
        comm.write("spectators")

    async def main() -> None:
        async with asyncio.timeout(seconds):
            await _watch(conn, room, codec, urls, at_once)

    try:
        asyncio.run(main())
    except BaseException as exc:
        if isinstance(exc, ServerError):
            line = f"error server {exc.code} {exc.message}"
        else:
            line = f"error other {type(exc).__name__} {exc}"
        with contextlib.suppress(OSError):
            conn.send_bytes(line.encode())
        raise SystemExit(1) from None
    finally:
        conn.close()


# --- in the bench's process -----------------------------------------------------------


class SpectatorError(ConnectionError):
    """A spectators' process failed (its socket closed, its connection was refused, ...)."""


class Spectators:
    """N spectators of one room, spread over child processes: spectator i in process
    i mod ``procs``, on ``urls[i % len(urls)]``. Use as an async context manager: the
    children are stopped, or terminated, on the way out."""

    def __init__(
        self, room: str, codec: Codec, urls: list[str], count: int, procs: int, seconds: float
    ) -> None:
        self.room = room
        self.codec = codec
        self.count = count
        self.procs = max(1, min(procs, count))  # no process without a spectator
        self.seconds = seconds
        self.urls = urls
        self.children: list[BaseProcess] = []
        self.conns: list[Connection] = []
        self.ready_cpu: dict[int, float] = {}  # child -> its CPU seconds when ready
        self.done_cpu: dict[int, float] = {}  # child -> its CPU seconds when stopped
        self.times: list[dict[int, float]] = []  # child -> {version: when its last got it}
        self.error: BaseException | None = None
        self.changed = asyncio.Event()

    async def __aenter__(self) -> Spectators:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def start(self) -> None:
        """Start the children; they connect at once (``OPENING_AT_ONCE`` at a time in all)."""
        context = multiprocessing.get_context("spawn")  # not fork: our loop is running
        loop = asyncio.get_running_loop()
        at_once = max(1, OPENING_AT_ONCE // self.procs)
        for j in range(self.procs):
            ours = [self.urls[i % len(self.urls)] for i in range(j, self.count, self.procs)]
            parent_end, child_end = context.Pipe()
            child = context.Process(
                target=child_main,
                args=(child_end, self.room, self.codec, ours, at_once, self.seconds),
                name=f"kibitz-spectators-{j}",
                daemon=True,
            )
            self.children.append(child)
            self.conns.append(parent_end)
            self.times.append({})
            child.start()
            child_end.close()  # the child's copy is its own: EOF here when it exits
            loop.add_reader(parent_end.fileno(), self._on_report, j)

    def _on_report(self, j: int) -> None:
        conn = self.conns[j]
        try:
            while conn.poll():
                self._handle(j, conn.recv_bytes().decode())
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(conn.fileno())
            if j not in self.done_cpu:
                self._fail(SpectatorError(f"spectators' process {j} exited"))
        self.changed.set()

    def _handle(self, j: int, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "v":
            version, when = rest.split()
            self.times[j][int(version)] = float(when)
        elif kind == "ready":
            self.ready_cpu[j] = float(rest)
        elif kind == "done":
            self.done_cpu[j] = float(rest)
        elif kind == "error":
            origin, code, message = (rest.split(" ", 2) + ["", ""])[:3]
            print(f"kibitz bench load: spectators' process {j}: {code}: {message}", file=sys.stderr)
            if origin == "server":
                self._fail(ServerError(code, message))
            else:
                self._fail(SpectatorError(f"spectators' process {j}: {code}: {message}"))

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc

    async def _until(self, done: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not done():
                if self.error is not None:
                    raise self.error
                self.changed.clear()
                await self.changed.wait()

    async def ready(self, timeout: float = 60.0) -> None:
        """Wait until every child has connected all its spectators."""
        await self._until(lambda: len(self.ready_cpu) == self.procs, timeout)

    async def all_have(self, version: int, timeout: float = 60.0) -> float:
        """When the last spectator received ``version`` (waiting for it if need be)."""
        await self._until(lambda: all(version in seen for seen in self.times), timeout)
        return max(seen[version] for seen in self.times)

    async def stop(self, timeout: float = STOP_SECONDS) -> float | None:
        """Ask the children to stop; the CPU seconds they spent since ready, in all (None
        if one did not say)."""
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.send_bytes(b"stop")
        with contextlib.suppress(TimeoutError, ConnectionError, ServerError):
            await self._until(lambda: len(self.done_cpu) == self.procs, timeout)
        if len(self.done_cpu) < self.procs or len(self.ready_cpu) < self.procs:
            return None
        return sum(self.done_cpu[j] - self.ready_cpu[j] for j in range(self.procs))

    async def close(self) -> None:
        """Stop the children: terminated if they do not exit by themselves in time."""
        loop = asyncio.get_running_loop()
        for conn in self.conns:
            with contextlib.suppress(OSError, ValueError):
                loop.remove_reader(conn.fileno())
            with contextlib.suppress(OSError):
                conn.send_bytes(b"stop")
        deadline = time.monotonic() + STOP_SECONDS
        while any(child.is_alive() for child in self.children) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for child in self.children:
            if child.is_alive():
                child.terminate()
        for child in self.children:
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join()
        for conn in self.conns:
            conn.close()
