"""A loopback TCP proxy that can stop forwarding: a network fault between one node and Redis.

It runs its own asyncio loop in a daemon thread, so the test's loop (and the nodes under
test) never share its scheduling. ``freeze`` stops forwarding in both directions without
closing anything (bytes wait in the kernel buffers, new connections are accepted and
held), as a partition or a stalled NAT would; ``unfreeze`` lets everything through again;
``cut`` resets every open connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = 0
        self.frozen = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._open: asyncio.Event | None = None
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- control, from any thread ------------------------------------------------------------
    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def freeze(self) -> None:
        """Stop forwarding, both ways; connections stay open, new ones are held."""
        self.frozen = True
        self._call(self._set_open(False))

    def unfreeze(self) -> None:
        self.frozen = False
        self._call(self._set_open(True))

    def cut(self) -> None:
        """Reset every open connection (new ones are still accepted)."""
        self._call(self._cut())

    def close(self) -> None:
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _call(self, coro: Any, timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- the proxy loop ------------------------------------------------------------------------
    async def _start(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._handle, self.listen_host, 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _set_open(self, value: bool) -> None:
        assert self._open is not None
        if value:
            self._open.set()
        else:
            self._open.clear()

    async def _cut(self) -> None:
        for writer in list(self._writers):
            transport = writer.transport
            if isinstance(transport, asyncio.Transport):
                transport.abort()
        self._writers.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()
        for task in list(self._tasks):
            task.cancel()

    async def _hold(self, client: asyncio.StreamWriter) -> None:
        """Wait while forwarding is stopped for the connection of ``client`` (its client
        side): here, while the proxy is frozen. A subclass may hold it longer."""
        assert self._open is not None
        await self._open.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._open is not None
        self._writers.add(writer)
        try:
            await self._hold(writer)  # frozen: the connection is accepted but goes nowhere
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                writer.transport.abort()
                return
            self._writers.add(up_writer)
            pumps = [
                asyncio.ensure_future(self._pump(reader, up_writer, writer)),
                asyncio.ensure_future(self._pump(up_reader, writer, writer)),
            ]
            self._tasks.update(pumps)
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for task in pumps:
                task.cancel()
                self._tasks.discard(task)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()
        finally:
            self._writers.discard(writer)

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, client: asyncio.StreamWriter
    ) -> None:
        """Forward ``src`` to ``dst`` (one way of the connection whose client side is
        ``client``) until either side closes."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await self._hold(client)
                data = await src.read(65536)
                if not data:
                    return
                await self._hold(client)  # read just before a freeze: hold it until unfrozen
                dst.write(data)
                await dst.drain()
