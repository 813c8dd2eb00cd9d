"""Raw WebSocket clients that log every frame, for the golden transcripts.

A :class:`Client` keeps each text frame exactly as it arrived (``<`` lines) and each
message it sent (``>`` lines), in order. The scenarios never race: after each message
they wait (:meth:`Client.expect`) for every frame it causes on every client before the
next one is sent, so each client's log is the same on every run. Two orders the server
itself does not fix are written in a fixed form, each under a ``--`` note:

- :meth:`Client.send_unordered`: the frames one message causes on its own connection in
  no fixed order (a resume's ``state`` and the presence broadcast it causes) are logged
  sorted;
- :meth:`Client.send_maybe_twice`: the ``resync`` a rematch action's sender also gets
  when the broadcast beat the direct answer is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import websockets

from tests.golden.normalise import harvest_text

Frame = dict[str, Any]
Predicate = Callable[[Frame], bool]
#: How long any one expected frame may take (the spectators' presence comes after 2 s).
EXPECT_S = 15.0


class Transcript:
    """The lines of one scenario, and the random ids seen in them."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.ids = ids

    def add(self, line: str) -> None:
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class Client:
    """One WebSocket connection whose frames are logged into its own lines."""

    def __init__(self, name: str, url: str, ids: dict[str, str]) -> None:
        self.name = name
        self.url = url
        self.ids = ids
        self.lines: list[str] = []
        self.frames: list[Frame] = []
        self.cursor = 0
        self.recording = True
        self._arrived = asyncio.Event()
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self) -> Frame:
        """Open (or reopen) the connection; the ``welcome`` frame."""
        if self._ws is not None:
            self.lines.append("-- reconnects")
        self._ws = await websockets.connect(self.url, open_timeout=10, max_size=2**20)
        self._reader = asyncio.create_task(self._read(self._ws))
        return await self.expect(kind("welcome"))

    async def _read(self, ws: Any) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for data in ws:
                if not self.recording:
                    continue
                text = data if isinstance(data, str) else "binary:" + data.hex()
                self.lines.append("< " + text)
                harvest_text(text, self.ids)
                self.frames.append(json.loads(text) if isinstance(data, str) else {})
                self._arrived.set()

    async def send(self, message: Frame | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.lines.append("> " + text)
        await self._ws.send(text)

    async def expect(self, predicate: Predicate, what: str = "") -> Frame:
        """The next frame from the cursor on that matches; frames passed over stay in the
        log (they are part of the transcript)."""
        deadline = time.monotonic() + EXPECT_S
        while True:
            while self.cursor < len(self.frames):
                frame = self.frames[self.cursor]
                self.cursor += 1
                if predicate(frame):
                    return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{self.name}: no frame {what or predicate} within {EXPECT_S} s; "
                    f"got:\n" + "\n".join(self.lines[-10:])
                )
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    async def send_unordered(self, message: Frame, *predicates: Predicate) -> None:
        """Send ``message`` and wait for one frame matching each of ``predicates``, which
        the server sends in no fixed order (a resume's reply races with the presence
        broadcast it causes). Those frames are logged sorted, under a ``-- any order``
        line, so the log is the same on every run."""
        await self.send(message)
        start = len(self.lines)
        deadline = time.monotonic() + EXPECT_S
        while True:
            matched = _match_each(self.frames[self.cursor :], predicates)
            if matched is not None:
                self.cursor += matched + 1
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{self.name}: not all of {len(predicates)} frames "
                    f"came within {EXPECT_S} s:\n" + "\n".join(self.lines[-10:])
                )
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)
        received = self.lines[start : start + len(predicates)]
        assert all(line.startswith("< ") for line in received), received
        self.lines[start : start + len(predicates)] = ["-- any order:", *sorted(received)]

    async def send_maybe_twice(self, message: Frame, expected: Predicate, maybe: Predicate) -> None:
        """Send ``message``, wait for ``expected``, then ping: a frame matching ``maybe``
        that came in between is taken out of the log (with a fixed note). For a rematch
        offer or acceptance, the server adds a ``resync`` of the same version when the
        change's broadcast reached this connection before its direct answer (app.py,
        ``Session._answer``): a race, so the extra frame is not part of the transcript."""
        await self.send(message)
        start = len(self.lines)
        await self.expect(expected)
        await self.send({"type": "ping", "rid": "settle"})
        await self.expect(kind("pong", rid="settle"))
        window = self.lines[start:]
        kept = [
            line for line in window if not (line.startswith("< ") and maybe(json.loads(line[2:])))
        ]
        assert len(window) - len(kept) <= 1, window
        self.lines[start:] = [
            *kept[:1],
            "-- (maybe a resync of this version: not logged)",
            *kept[1:],
        ]

    async def drop(self) -> None:
        """Close the connection (as a player whose network went away would, cleanly)."""
        self.lines.append("-- closes")
        await self._ws.close()
        if self._reader is not None:
            await self._reader

    async def close(self) -> None:
        self.recording = False
        with contextlib.suppress(Exception):
            await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await self._reader


def _match_each(frames: list[Frame], predicates: tuple[Predicate, ...]) -> int | None:
    """The index of the last of the first ``len(predicates)`` frames when they match the
    predicates one to one (in some order), else None (not all there yet)."""
    if len(frames) < len(predicates):
        return None
    window = frames[: len(predicates)]
    left = list(predicates)
    for frame in window:
        hit = next((p for p in left if p(frame)), None)
        if hit is None:
            raise AssertionError(f"unexpected frame among unordered ones: {frame}")
        left.remove(hit)
    return len(predicates) - 1


def kind(message_type: str, **fields: Any) -> Predicate:
    """A frame of ``type`` whose top-level ``fields`` are these values."""
    return lambda f: f.get("type") == message_type and all(f.get(k) == v for k, v in fields.items())


def state(version: int, event: str) -> Predicate:
    """The ``state`` of ``version`` whose event is ``event``."""
    return lambda f: (
        f.get("type") == "state"
        and f.get("version") == version
        and f.get("event", {}).get("kind") == event
    )


def error(code: str) -> Predicate:
    return lambda f: f.get("type") == "error" and f.get("code") == code


def chat(text: str) -> Predicate:
    return lambda f: (
        f.get("type") == "chat" and any(m.get("text") == text for m in f.get("messages", []))
    )


async def barrier(clients: list[Client]) -> None:
    """Each client pings and waits for its pong: all its earlier replies are in."""
    for client in clients:
        await client.send({"type": "ping", "rid": "barrier"})
        await client.expect(kind("pong", rid="barrier"), "pong")


async def http(
    session: aiohttp.ClientSession, base: str, method: str, path: str, transcript: Transcript
) -> tuple[int, str]:
    """One request; its status, the headers that describe the body, and the body as sent
    go into the transcript (Date and Server vary, and say nothing of ours)."""
    async with session.request(method, base + path) as resp:
        body = await resp.text()
    transcript.add(f"{method} {path}")
    transcript.add(f"  {resp.status} {resp.headers.get('Content-Type', '')}")
    disposition = resp.headers.get("Content-Disposition")
    if disposition is not None:
        transcript.add(f"  Content-Disposition: {disposition}")
    transcript.add(body)
    harvest_text(body, transcript.ids)
    return resp.status, body


async def wait_gone(
    session: aiohttp.ClientSession, base: str, room: str, seconds: float = 60.0
) -> None:
    """Until Redis has let the finished room go (so a record comes from the database)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        async with session.get(f"{base}/api/rooms/{room}") as resp:
            await resp.read()
            if resp.status == 404:
                return
        await asyncio.sleep(0.25)
    raise AssertionError(f"room {room} still in Redis after {seconds} s")
