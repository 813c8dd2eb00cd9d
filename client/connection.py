"""A Python client for the kibitz WebSocket protocol, used by bots, tests and the bench.

It speaks the messages of :mod:`kibitz.shared.protocol` over the ``websockets`` library,
JSON or msgpack, and keeps the latest ``state`` of each room it follows.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from typing import Any

import msgpack
import websockets

from kibitz.shared.protocol import Codec


class ServerError(Exception):
    """An ``error`` message from the server."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def ws_url(base: str, codec: Codec = "json") -> str:
    """``http://host:port`` (or a ws:// URL) -> the WebSocket endpoint."""
    url = base.rstrip("/")
    if url.startswith("http"):
        url = "ws" + url[4:]
    if not url.endswith("/ws"):
        url += "/ws"
    return url + ("?codec=msgpack" if codec == "msgpack" else "")


def newer_than(version: int) -> Callable[[dict[str, Any]], bool]:
    """A ``wait_state`` predicate: a state past ``version``."""
    return lambda state: int(state["version"]) > version


class KibitzClient:
    """One WebSocket connection. Use ``async with KibitzClient.connect(url) as c``."""

    def __init__(self, ws: Any, codec: Codec) -> None:
        self.ws = ws
        self.codec = codec
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.states: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, tuple[int, str]] = {}  # room -> (seat, token)
        self.welcome: dict[str, Any] | None = None
        self._rids = itertools.count(1)
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, url: str, codec: Codec = "json", **kwargs: Any) -> KibitzClient:
        ws = await websockets.connect(ws_url(url, codec), max_size=2**22, **kwargs)
        client = cls(ws, codec)
        client._reader = asyncio.create_task(client._read())
        client.welcome = await client.next_message(lambda m: m["type"] == "welcome")
        return client

    async def close(self) -> None:
        await self.ws.close()
        if self._reader:
            self._reader.cancel()

    async def __aenter__(self) -> KibitzClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- raw I/O ----------------------------------------------------------------------------
    async def send(self, message: dict[str, Any]) -> None:
        if self.codec == "msgpack":
            await self.ws.send(msgpack.packb(message, use_bin_type=True))
        else:
            await self.ws.send(json.dumps(message))

    async def send_raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                if isinstance(frame, bytes):
                    message = msgpack.unpackb(frame, raw=False)
                else:
                    message = json.loads(frame)
                if message.get("type") == "state":
                    self.states[message["room"]] = message
                await self.inbox.put(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            await self.inbox.put({"type": "closed"})

    async def next_message(
        self, match: Callable[[dict[str, Any]], bool] | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """The next incoming message that ``match`` accepts (others are dropped)."""
        async with asyncio.timeout(timeout):
            while True:
                message = await self.inbox.get()
                if message["type"] == "closed":
                    await self.inbox.put(message)
                    raise ConnectionError("connection closed by the server")
                if match is None or match(message):
                    return message

    async def request(self, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        """Send with a fresh ``rid`` and return the reply carrying it (errors raise)."""
        rid = next(self._rids)
        await self.send({**message, "rid": rid})
        reply = await self.next_message(lambda m: m.get("rid") == rid, timeout)
        if reply["type"] == "error":
            raise ServerError(reply["code"], reply["message"])
        return reply

    # -- protocol -----------------------------------------------------------------------------
    async def create(
        self,
        game: str,
        opponent: str = "human",
        seat: int | str | None = None,
        options: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"type": "create", "game": game, "opponent": opponent}
        if seat is not None:
            message["seat"] = seat
        if options:
            message["options"] = options
        if name:
            message["name"] = name
        reply = await self.request(message)
        self.tokens[reply["room"]] = (reply["seat"], reply["token"])
        return reply

    async def join(self, room: str, seat: int | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"type": "join", "room": room}
        if seat is not None:
            message["seat"] = seat
        reply = await self.request(message)
        self.tokens[reply["room"]] = (reply["seat"], reply["token"])
        return reply

    async def watch(self, room: str) -> dict[str, Any]:
        await self.send({"type": "watch", "room": room})
        return await self.wait_state(room, lambda s: True)

    async def resume(self, room: str, token: str | None = None, since: int | None = None) -> None:
        message: dict[str, Any] = {"type": "resume", "room": room}
        if token:
            message["token"] = token
        if since is not None:
            message["since"] = since
        await self.send(message)

    async def move(self, room: str, move: str, version: int | None = None) -> None:
        """Send a move; errors arrive as ``error`` messages (see ``request`` to await one)."""
        _seat, token = self.tokens[room]
        message: dict[str, Any] = {"type": "move", "room": room, "token": token, "move": move}
        if version is not None:
            message["version"] = version
        await self.send(message)

    async def resign(self, room: str) -> None:
        _seat, token = self.tokens[room]
        await self.send({"type": "resign", "room": room, "token": token})

    async def wait_state(
        self,
        room: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """The first ``state`` of ``room`` (current included) that satisfies ``predicate``."""
        current = self.states.get(room)
        if current is not None and predicate(current):
            return current

        def match(m: dict[str, Any]) -> bool:
            if m["type"] == "error":
                raise ServerError(m["code"], m["message"])
            return m["type"] == "state" and m["room"] == room and predicate(m)

        return await self.next_message(match, timeout)
