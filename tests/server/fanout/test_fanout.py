"""Fan-out to many spectators, and WebSocket compression only when asked for: a real
server, real Redis and real sockets on loopback."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
import websockets

from kibitz.client.connection import KibitzClient, newer_than, ws_url
from kibitz.server.fanout.followers import up_to_date as _up_to_date
from kibitz.server.fanout.frames import StateFrames
from kibitz.shared import fastjson
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.keys import room_channel
from kibitz.shared.bus.link import Address, Subscription
from kibitz.shared.protocol.codec import encode_bytes
from kibitz.shared.protocol.node import state_version
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


def test_a_snapshot_in_another_key_order_is_decoded_not_dropped() -> None:
    """The head is a fast path only: a snapshot that begins otherwise (keys sorted, or
    spaced) gives no version, so it is decoded whole and never dropped unread."""
    snapshot = {"type": "state", "room": "r1", "version": 5, "event": {"kind": "move"}}
    followers = [SimpleNamespace(last_version={"r1": 5})]
    assert _up_to_date("r1", followers, fastjson.dumps(snapshot).decode())
    for other in (json.dumps(snapshot, sort_keys=True), json.dumps(snapshot)):
        assert state_version(other) is None
        assert not _up_to_date("r1", followers, other)


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


async def test_what_a_node_publishes_is_read_by_its_head(
    server, redis_server: EmbeddedRedis
) -> None:
    """The fast path that drops a broadcast every follower here has already
    (followers.up_to_date) reads a snapshot's version from its head (state_version): it
    relies on the encoder writing compact JSON in insertion order and on "type", "room",
    "version" coming first. Every state a real node publishes on a room's channel must
    give its version there, and every presence update None (it comes again at the same
    version); this fails if the encoder or the snapshot's key order changes."""
    subscription = await Subscription.open(Address.from_url(redis_server.url), 5.0)
    a = await KibitzClient.open(server.http_url)
    b = await KibitzClient.open(server.http_url)
    watcher = await KibitzClient.open(server.http_url)
    heads: dict[str, list[tuple[int | None, int]]] = {"state": [], "presence": []}
    try:
        room = (await a.create("tictactoe", seat=0))["room"]
        subscription.subscribe(room_channel(room))
        await b.join(room)
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        for _ in range(2):
            mover = a if state["to_move"] == 0 else b
            await mover.move(room, state["legal_moves"][0], state["version"])
            state = await a.wait_state(room, newer_than(state["version"]))
        await watcher.watch(room)  # a spectator: its count is broadcast shortly
        deadline = asyncio.get_running_loop().time() + 15
        while not heads["presence"] or len(heads["state"]) < 3:
            assert asyncio.get_running_loop().time() < deadline, f"heard only {heads}"
            message = await subscription.get_message(timeout=0.5)
            if message is None or message.kind != "message":
                continue
            decoded = json.loads(message.data)
            if decoded["type"] == "state":
                kind = "presence" if decoded["event"]["kind"] == "presence" else "state"
                heads[kind].append((state_version(message.data), decoded["version"]))
    finally:
        subscription.close()
        for client in (a, b, watcher):
            await client.close()
    assert all(head == version for head, version in heads["state"]), heads
    assert all(head is None for head, _ in heads["presence"]), heads
