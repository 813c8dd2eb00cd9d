"""Fan-out to many spectators, and WebSocket compression only when asked for: a real
server, real Redis and real sockets on loopback."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
import websockets

from kibitz.client.connection import KibitzClient, newer_than, ws_url
from kibitz.server.fanout.hub import StateFrames, _up_to_date
from kibitz.shared import fastjson
from kibitz.shared.protocol import encode_bytes
from tests.conftest import ServerProcess, start_server

SPECTATORS = 200


def test_a_state_is_encoded_once_and_each_viewer_gets_its_seat() -> None:
    snapshot = {"type": "state", "room": "abc", "version": 7, "name": "é", "seats": [{}, {}]}
    frames = StateFrames(snapshot)
    for you in (None, 0, 1):
        for codec in ("json", "msgpack"):
            assert frames.frame(you, codec) == encode_bytes({**snapshot, "you": you}, codec)
    # One that has "you" already is encoded whole: no key twice.
    assert json.loads(StateFrames({**snapshot, "you": 1}).frame(0, "json"))["you"] == 0


def test_a_broadcast_every_follower_has_is_dropped_unread() -> None:
    def state(version: int, kind: str) -> str:
        snapshot = {"type": "state", "room": "r1", "version": version, "event": {"kind": kind}}
        return fastjson.dumps(snapshot).decode()

    behind = [SimpleNamespace(last_version={"r1": 5}), SimpleNamespace(last_version={})]
    assert not _up_to_date("r1", behind, state(5, "move"))  # one has not got it
    followers = [SimpleNamespace(last_version={"r1": 5}), SimpleNamespace(last_version={"r1": 6})]
    assert _up_to_date("r1", followers, state(5, "move"))
    assert not _up_to_date("r1", followers, state(6, "move"))
    assert not _up_to_date("r1", followers, state(5, "presence"))  # sent again at a version
    thinking = fastjson.dumps({"type": "thinking", "room": "r1", "version": 4}).decode()
    assert not _up_to_date("r1", followers, thinking)


@pytest.fixture(scope="module")
def server(redis_server) -> ServerProcess:
    process = start_server(redis_server.url)
    yield process
    process.stop()


async def spectate(url: str, room: str, ready: asyncio.Event) -> list[str]:
    """Watch ``room`` on a raw socket; every state frame as received, until the game ends
    (but the spectator count's own broadcasts, ``presence``: the same version again)."""
    frames: list[str] = []
    async with websockets.connect(ws_url(url), max_size=2**22) as ws:
        await ws.recv()  # welcome
        await ws.send(json.dumps({"type": "watch", "room": room}))
        while True:
            frame = await ws.recv()
            assert isinstance(frame, str)
            message = json.loads(frame)
            if message["type"] != "state" or message["event"]["kind"] == "presence":
                continue
            frames.append(frame)
            ready.set()
            if message["status"] != "playing":
                return frames


async def test_every_spectator_gets_every_version_in_order_byte_identical(server) -> None:
    a = await KibitzClient.open(server.http_url)
    b = await KibitzClient.open(server.http_url)
    try:
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        first = state["version"]
        readies = [asyncio.Event() for _ in range(SPECTATORS)]
        watchers = [
            asyncio.create_task(spectate(server.http_url, room, ready)) for ready in readies
        ]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), timeout=60)

        players = {0: a, 1: b}
        player_states = [state]
        while state["status"] == "playing":
            mover = players[state["to_move"]]
            version = state["version"]
            await mover.move(room, state["legal_moves"][0], version)
            state = await a.wait_state(room, newer_than(version))
            player_states.append(state)
        received = await asyncio.wait_for(asyncio.gather(*watchers), timeout=60)
    finally:
        await a.close()
        await b.close()

    versions = list(range(first, state["version"] + 1))
    assert len(versions) > 5
    reference = received[0]
    assert [json.loads(f)["version"] for f in reference] == versions
    for frames in received[1:]:
        # The first is each one's own reply to ``watch``: the spectators counted then.
        first_state, first_reference = json.loads(frames[0]), json.loads(reference[0])
        assert {**first_state, "spectators": 0} == {**first_reference, "spectators": 0}
        assert frames[1:] == reference[1:]  # the same versions, in order, byte for byte
    assert json.loads(reference[-1])["spectators"] == SPECTATORS
    # A player's frames are the same states, with its seat as ``you``.
    for frame, player_state in zip(reference[1:], player_states[1:], strict=True):
        spectator_state = json.loads(frame)
        assert spectator_state["you"] is None and player_state["you"] == 0
        assert {**spectator_state, "you": 0} == player_state


async def extensions(url: str) -> str | None:
    """The ``Sec-WebSocket-Extensions`` the server answers to a client offering deflate."""
    async with websockets.connect(ws_url(url), compression="deflate") as ws:
        await ws.recv()  # welcome: the server is serving this socket
        assert ws.response is not None
        value: str | None = ws.response.headers.get("Sec-WebSocket-Extensions")
        return value


async def test_compression_is_off_by_default(server) -> None:
    assert await extensions(server.http_url) is None


@pytest.mark.parametrize(
    "how", [{"args": ["--ws-compression"]}, {"extra_env": {"KIBITZ_WS_COMPRESSION": "1"}}]
)
async def test_compression_is_negotiated_when_asked_for(redis_server, how) -> None:
    compressing = start_server(redis_server.url, **how)
    try:
        offered = await extensions(compressing.http_url)
    finally:
        compressing.stop()
    assert offered is not None and "permessage-deflate" in offered
