"""``GET /api/stream/event`` (server/botapi/events.py) on two real nodes in this process,
one Redis and one database: games started and finished over the WebSocket reach both
players' streams once, keep-alives, one stream per token on any node, the online set,
the node's bound on streams, drain, and streams ended once their credential ends (a
token revoked, an account banned), with one batched read of the credentials.

The nodes run in the test's event loop so that a test can reach a node's registry (its
bound is lowered for one test instead of opening 1,000 streams)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from multidict import CIMultiDict

from kibitz.server.accounts.credentials import Credential
from kibitz.server.appkeys import ACCOUNTS_KEY, LISTENING_ORIGINS_KEY, MODERATION_KEY
from kibitz.server.botapi.events import (
    EVENT,
    EVENT_STREAMS_KEY,
    EdgeRequest,
    EventStreams,
    Stream,
    is_event_stream,
)
from kibitz.server.gateway.edge import Edge
from kibitz.server.gateway.limits import listening_origins
from kibitz.server.node import create_app, drain
from kibitz.shared.bus import keys
from kibitz.shared.bus.account_events import AccountEvents
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.server.accounts.web import Web

WAIT_S = 10.0
KEEPALIVE_S = 0.25  # the nodes' keep-alive period here (6 s in production)
CHECK_S = 0.5  # how often the nodes look at their streams' credentials (30 s in production)


@dataclass
class Node:
    app: web.Application
    runner: web.AppRunner
    url: str
    edge: Edge | None = None
    listener: asyncio.Server | None = None

    async def stop(self) -> None:
        if self.listener is not None and self.edge is not None:
            self.listener.close()
            await self.edge.shutdown()
        await self.runner.cleanup()


async def start_node(redis_url: str, database_url: str, edge: bool = False) -> Node:
    """A node as ``kibitz serve`` builds it, with a keep-alive of KEEPALIVE_S and its
    streams' credentials looked at every CHECK_S; with
    ``edge``, behind its edge (server/gateway/edge.py), which keeps the event streams out
    of aiohttp, as ``kibitz serve`` does; else served by aiohttp alone."""
    app = create_app(redis_url, database_url=database_url)
    app[EVENT_STREAMS_KEY] = EventStreams(keepalive_s=KEEPALIVE_S, check_s=CHECK_S)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    if edge:
        assert runner.server is not None
        front = Edge(app, runner.server)
        listener = await asyncio.get_running_loop().create_server(front, "127.0.0.1", 0)
        front.start()
        port = listener.sockets[0].getsockname()[1]
        node = Node(app, runner, f"http://127.0.0.1:{port}", front, listener)
    else:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        node = Node(app, runner, f"http://127.0.0.1:{runner.addresses[0][1]}")
    app[LISTENING_ORIGINS_KEY].update(
        listening_origins("127.0.0.1", int(node.url.rsplit(":", 1)[1]))
    )
    return node


@pytest.fixture(scope="module")
async def nodes(
    own_redis: EmbeddedRedis, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[list[Node]]:
    """Node 0 keeps its event streams at its edge (as ``kibitz serve`` does), node 1
    serves them through aiohttp: the tests go through both doors."""
    database = f"sqlite:///{tmp_path_factory.mktemp('events') / 'games.sqlite3'}"
    started = [await start_node(own_redis.url, database, edge=True)]
    try:
        started.append(await start_node(own_redis.url, database))
        yield started
    finally:
        for node in started:
            await node.stop()


@pytest.fixture(scope="module")
async def redis(own_redis: EmbeddedRedis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(own_redis.url)
    yield client
    await client.aclose()


@dataclass
class Account:
    username: str
    token: str
    id: int


async def new_account(node: Node, scopes: tuple[str, ...] = ("play",)) -> Account:
    """A fresh account signed up on ``node``, with a token of ``scopes``."""
    web_client = Web(node.url)
    signed = await web_client.signup()
    assert signed.status == 201, signed.body
    made = await web_client.post("/api/tokens", {"scopes": list(scopes), "description": "t"})
    assert made.status == 201, made.body
    account = await node.app[ACCOUNTS_KEY].by_name(signed.body["account"]["username"])
    assert account is not None
    return Account(account.username, made.body["token"], account.id)


class EventStream:
    """One ``/api/stream/event`` response, read line by line."""

    def __init__(self, session: aiohttp.ClientSession, response: aiohttp.ClientResponse):
        self.session, self.response = session, response

    @classmethod
    async def open(cls, node: Node, token: str, expect: int = 200) -> EventStream:
        session = aiohttp.ClientSession()
        response = await session.get(
            node.url + "/api/stream/event", headers={"Authorization": f"Bearer {token}"}
        )
        stream = cls(session, response)
        if response.status != expect or expect != 200:
            text = await response.text()
            await stream.close()
            assert response.status == expect, f"{response.status}: {text}"
        return stream

    async def raw(self, timeout: float = WAIT_S) -> bytes:
        """The next line as sent, b"" at the end of the stream."""
        return await asyncio.wait_for(self.response.content.readline(), timeout)

    async def line(self, timeout: float = WAIT_S) -> dict[str, Any]:
        """The next line that is not a keep-alive."""
        deadline = time.monotonic() + timeout
        while True:
            data = await self.raw(max(0.01, deadline - time.monotonic()))
            assert data, "the stream ended"
            if data.strip():
                line: dict[str, Any] = json.loads(data)
                return line

    async def quiet(self, seconds: float) -> list[bytes]:
        """What comes in ``seconds`` (keep-alives only, if nothing happened)."""
        got: list[bytes] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                got.append(await self.raw(left))
            except TimeoutError:
                break
        return got

    async def ended(self, timeout: float = WAIT_S) -> bool:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                if await self.raw(left) == b"":
                    return True
            except TimeoutError:
                break
        return False

    async def close(self) -> None:
        self.response.close()
        await self.session.close()


class Player:
    """A WebSocket client of a node, signed in with an API token."""

    def __init__(self, session: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse):
        self.session, self.ws, self.rid = session, ws, 0

    @classmethod
    async def connect(cls, node: Node, token: str) -> Player:
        session = aiohttp.ClientSession()
        ws = await session.ws_connect(
            node.url + "/ws", headers={"Authorization": f"Bearer {token}"}
        )
        player = cls(session, ws)
        assert (await player.receive())["type"] == "welcome"
        return player

    async def receive(self) -> dict[str, Any]:
        message: dict[str, Any] = await asyncio.wait_for(self.ws.receive_json(), WAIT_S)
        return message

    async def until(self, kind: str, **fields: Any) -> dict[str, Any]:
        while True:
            message = await self.receive()
            assert message["type"] != "error", message
            if message["type"] == kind and all(message.get(k) == v for k, v in fields.items()):
                return message

    async def ask(self, **message: Any) -> dict[str, Any]:
        """Send ``message``; its ``seat`` reply."""
        self.rid += 1
        await self.ws.send_json({**message, "rid": self.rid})
        return await self.until("seat", rid=self.rid)

    async def close(self) -> None:
        await self.ws.close()
        await self.session.close()


class Channel:
    """The ``account-events`` channel as a subscriber hears it: what a commit publishes."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.pubsub = redis.pubsub()

    async def __aenter__(self) -> Channel:
        await self.pubsub.subscribe(keys.ACCOUNT_EVENTS)
        assert await self.pubsub.get_message(timeout=WAIT_S)  # the confirmation
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pubsub.aclose()  # type: ignore[no-untyped-call]

    async def heard(self, seconds: float = 0.3) -> list[dict[str, Any]]:
        got = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            message = await self.pubsub.get_message(timeout=left)
            if message is not None and message["type"] == "message":
                got.append(json.loads(message["data"]))
        return got


async def test_a_game_over_the_websocket_starts_and_finishes_once_on_both_streams(
    nodes: list[Node], redis: aioredis.Redis
) -> None:
    alice, bob = await new_account(nodes[0]), await new_account(nodes[1])
    a_events = await EventStream.open(nodes[0], alice.token)
    b_events = await EventStream.open(nodes[1], bob.token)
    wa = await Player.connect(nodes[0], alice.token)
    wb = await Player.connect(nodes[1], bob.token)
    async with Channel(redis) as channel:
        try:
            a_seat = await wa.ask(type="create", game="chess", opponent="human", seat=0)
            room = a_seat["room"]
            assert await channel.heard() == []  # a waiting room: no game yet
            b_seat = await wb.ask(type="join", room=room)
            started = await channel.heard()
            assert len(started) == 1 and len(started[0]["lines"]) == 2  # one PUBLISH
            a_start, b_start = await a_events.line(), await b_events.line()
            assert a_start["type"] == b_start["type"] == "gameStart"
            ga, gb = a_start["game"], b_start["game"]
            assert ga["gameId"] == gb["gameId"] == room
            assert (ga["color"], ga["isMyTurn"], gb["color"], gb["isMyTurn"]) == (
                "white", True, "black", False,
            )  # fmt: skip
            assert ga["opponent"]["id"] == bob.username.lower()
            assert gb["opponent"]["username"] == alice.username
            assert ga["status"] == {"id": 20, "name": "started"}

            await wa.ws.send_json({"type": "move", "room": room, "token": a_seat["token"],
                                   "move": "e2e4"})  # fmt: skip
            await wb.until("state", room=room, version=2)
            assert await channel.heard() == []  # a move that does not end it: nothing

            await wb.ws.send_json({"type": "resign", "room": room, "token": b_seat["token"]})
            a_end, b_end = await a_events.line(), await b_events.line()
            assert len(await channel.heard()) == 1
            for end, colour in ((a_end, "white"), (b_end, "black")):
                assert end["type"] == "gameFinish"
                assert end["game"]["color"] == colour and end["game"]["winner"] == "white"
                assert end["game"]["status"] == {"id": 31, "name": "resign"}
            # Nothing more: keep-alive lines only.
            assert set(await a_events.quiet(3 * KEEPALIVE_S)) == {b"\n"}
        finally:
            for closing in (wa, wb, a_events, b_events):
                await closing.close()


async def test_a_new_stream_of_the_token_replaces_the_old_and_starts_with_the_games(
    nodes: list[Node],
) -> None:
    alice, bob = await new_account(nodes[0]), await new_account(nodes[0])
    wa = await Player.connect(nodes[0], alice.token)
    wb = await Player.connect(nodes[0], bob.token)
    first = await EventStream.open(nodes[1], bob.token)
    try:
        room = (await wa.ask(type="create", game="othello", opponent="human", seat=0))["room"]
        await wb.ask(type="join", room=room)
        assert (await first.line())["game"]["gameId"] == room
        # The same token on the other node: the first stream ends, the new one is told
        # the unfinished game first.
        second = await EventStream.open(nodes[0], bob.token)
        try:
            assert await first.ended()
            again = await second.line()
            assert again["type"] == "gameStart" and again["game"]["gameId"] == room
            assert again["game"]["color"] == "black"
            assert again["game"]["variant"]["key"] == "othello"
            # ...and on the same node.
            third = await EventStream.open(nodes[0], bob.token)
            assert await second.ended()
            assert (await third.line())["game"]["gameId"] == room
            await third.close()
        finally:
            await second.close()
    finally:
        for closing in (wa, wb, first):
            await closing.close()


async def test_streams_of_two_tokens_of_one_account_both_stay(nodes: list[Node]) -> None:
    alice = await new_account(nodes[0])
    web_client = Web(nodes[0].url)
    assert (await web_client.login(alice.username)).status == 200
    other = await web_client.post("/api/tokens", {"scopes": ["play"], "description": "2"})
    one = await EventStream.open(nodes[0], alice.token)
    two = await EventStream.open(nodes[1], other.body["token"])
    try:
        assert not await one.ended(4 * KEEPALIVE_S)
        assert not await two.ended(KEEPALIVE_S)
    finally:
        await one.close()
        await two.close()


async def test_keepalive_lines_and_the_online_set(nodes: list[Node], redis: aioredis.Redis) -> None:
    alice = await new_account(nodes[1])
    events = AccountEvents(redis)
    assert await events.online([alice.id], int(time.time() * 1000)) == set()
    stream = await EventStream.open(nodes[1], alice.token)
    try:
        assert stream.response.headers["Content-Type"] == "application/x-ndjson"
        assert await events.online([alice.id], int(time.time() * 1000)) == {alice.id}
        seen = await redis.zscore(keys.ONLINE, str(alice.id))
        lines = await stream.quiet(4 * KEEPALIVE_S)
        assert len(lines) >= 2 and set(lines) == {b"\n"}
        later = await redis.zscore(keys.ONLINE, str(alice.id))
        assert seen is not None and later is not None and later > seen  # beaten again
        assert 0 < await redis.pttl(keys.ONLINE) <= 20_000
        listed = await events.online_list(1000, int(time.time() * 1000))
        assert alice.id in listed
    finally:
        await stream.close()


async def test_a_token_without_play_and_no_token_are_refused(nodes: list[Node]) -> None:
    reader = await new_account(nodes[0], scopes=("read",))
    async with aiohttp.ClientSession() as session:
        async with session.get(nodes[0].url + "/api/stream/event") as resp:
            assert (resp.status, await resp.json()) == (401, {"error": "No such token"})
        headers = {"Authorization": f"Bearer {reader.token}"}
        async with session.get(nodes[0].url + "/api/stream/event", headers=headers) as resp:
            assert (resp.status, await resp.json()) == (403, {"error": "Missing scope"})


async def test_past_the_bound_a_node_answers_429(nodes: list[Node]) -> None:
    registry = nodes[0].app[EVENT_STREAMS_KEY]
    alice, bob = await new_account(nodes[0]), await new_account(nodes[0])
    bound = registry.max_streams
    registry.max_streams = registry.count() + 1
    try:
        held = await EventStream.open(nodes[0], alice.token)
        async with aiohttp.ClientSession() as session:
            headers = {"Authorization": f"Bearer {bob.token}"}
            async with session.get(nodes[0].url + "/api/stream/event", headers=headers) as resp:
                assert resp.status == 429 and "Retry-After" in resp.headers
                assert (await resp.json())["error"] == "Too many requests. Try again later."
        assert registry.count() == registry.max_streams  # the refused one holds nothing
        # A client that goes frees its place (noticed by the next keep-alive).
        await held.close()
        deadline = time.monotonic() + WAIT_S
        while registry.count() >= registry.max_streams and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await (await EventStream.open(nodes[0], bob.token)).close()
    finally:
        registry.max_streams = bound


@pytest.mark.parametrize("edge", [True, False], ids=["kept-at-the-edge", "aiohttp"])
async def test_drain_ends_every_stream(
    own_redis: EmbeddedRedis, tmp_path: Path, edge: bool
) -> None:
    node = await start_node(own_redis.url, f"sqlite:///{tmp_path / 'games.sqlite3'}", edge)
    try:
        alice = await new_account(node)
        stream = await EventStream.open(node, alice.token)
        try:
            registry = node.app[EVENT_STREAMS_KEY]
            assert len(registry.tasks) == (1 if edge else 0)  # which door served it
            await drain(node.app)
            assert await stream.ended(2.0)  # a clean end of the body: the client reconnects
            assert registry.count() == 0 and not registry.tasks
            await EventStream.open(node, alice.token, expect=503)
        finally:
            await stream.close()
    finally:
        await node.stop()


async def test_challenges_reach_the_stream_and_a_new_stream_starts_with_them(
    nodes: list[Node],
) -> None:
    alice, bob = await new_account(nodes[0]), await new_account(nodes[1])
    streaming = await EventStream.open(nodes[1], bob.token)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(
                f"{nodes[0].url}/api/challenge/{bob.username}",
                json={"rated": False, "clock.limit": 300, "clock.increment": 2},
                headers={"Authorization": f"Bearer {alice.token}"},
            ) as resp:
                assert resp.status == 200, await resp.text()
                challenge_id = (await resp.json())["id"]
        line = await streaming.line()
        assert line["type"] == "challenge" and line["challenge"]["id"] == challenge_id
        # A stream opened now is told of the open challenge first.
        reopened = await EventStream.open(nodes[0], bob.token)
        try:
            first = await reopened.line()
            assert first["type"] == "challenge" and first["challenge"]["id"] == challenge_id
            assert first["challenge"]["challenger"]["id"] == alice.username.lower()
        finally:
            await reopened.close()
    finally:
        await streaming.close()


def test_the_edge_keeps_only_bearer_event_streams_over_http_1_1() -> None:
    bearer = b"GET /api/stream/event HTTP/1.1\r\nHost: x\r\nauthorization:  bearer kbz_x"
    assert is_event_stream(bearer)
    assert is_event_stream(bearer.replace(b"event ", b"event?x=1 "))
    assert not is_event_stream(bearer.replace(b"HTTP/1.1", b"HTTP/1.0"))
    assert not is_event_stream(bearer.replace(b"GET", b"POST"))
    assert not is_event_stream(bearer.replace(b"/event", b"/events"))
    assert not is_event_stream(b"GET /api/stream/event HTTP/1.1\r\nCookie: kibitz_session=x")


async def test_a_bad_head_kept_at_the_edge_is_answered_400(nodes: list[Node]) -> None:
    host, port = nodes[0].url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            b"GET /api/stream/event HTTP/1.1\r\nAuthorization: Bearer kbz_x\r\n folded: no\r\n\r\n"
        )
        answer = await asyncio.wait_for(reader.read(), WAIT_S)  # then the node closes it
        assert answer.startswith(b"HTTP/1.1 400 ")
        assert b'{"error": "Bad request: ' in answer
    finally:
        writer.close()


async def test_the_browser_streams_with_its_cookie_through_aiohttp(nodes: list[Node]) -> None:
    browser = Web(nodes[0].url)
    assert (await browser.signup()).status == 201
    registry = nodes[0].app[EVENT_STREAMS_KEY]
    kept = len(registry.tasks)
    async with aiohttp.ClientSession() as session:
        cookie = {"Cookie": f"kibitz_session={browser.cookie}"}
        async with session.get(nodes[0].url + "/api/stream/event", headers=cookie) as resp:
            assert resp.status == 200
            assert await asyncio.wait_for(resp.content.readline(), WAIT_S) == b"\n"
            assert len(registry.tasks) == kept  # aiohttp's, not the edge's


# -- credentials that end --------------------------------------------------------------------

#: A stream whose credential ended is ended within this (a check is due CHECK_S after the
#: last, and made at the next keep-alive round), with a margin for a loaded machine.
ENDS_WITHIN_S = CHECK_S + KEEPALIVE_S + 1.0


class GameStream(EventStream):
    """``GET /api/board/game/stream/{id}``: read as an event stream is."""

    @classmethod
    async def open_game(cls, node: Node, token: str, room: str) -> GameStream:
        session = aiohttp.ClientSession()
        response = await session.get(
            f"{node.url}/api/board/game/stream/{room}",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status == 200, await response.text()
        return cls(session, response)


async def test_a_revoked_token_ends_its_event_and_game_streams(nodes: list[Node]) -> None:
    owner = Web(nodes[0].url)
    assert (await owner.signup()).status == 201
    made = await owner.post("/api/tokens", {"scopes": ["play"], "description": "doomed"})
    assert made.status == 201, made.body
    doomed, token_id = made.body["token"], made.body["id"]
    bob = await new_account(nodes[1])
    wa = await Player.connect(nodes[0], doomed)
    wb = await Player.connect(nodes[1], bob.token)
    room = (await wa.ask(type="create", game="chess", opponent="human", seat=0))["room"]
    await wb.ask(type="join", room=room)
    await wa.close()  # the account plays on through its game stream only
    events = await EventStream.open(nodes[0], doomed)  # kept at node 0's edge
    game = await GameStream.open_game(nodes[1], doomed, room)  # served by aiohttp
    bobs = await EventStream.open(nodes[1], bob.token)
    try:
        assert (await events.line())["type"] == "gameStart"
        assert (await game.line())["type"] == "gameFull"
        # Alive past a few checks while the token holds.
        assert not await events.ended(3 * CHECK_S)
        revoked = await owner.call("DELETE", f"/api/tokens/{token_id}")
        assert revoked.status in (200, 204), revoked.body
        started = time.monotonic()
        assert await events.ended(ENDS_WITHIN_S), "the event stream outlived its token"
        assert await game.ended(ENDS_WITHIN_S - (time.monotonic() - started))
        # Bob's token holds: his stream goes on; the game goes on too (the seat is gone,
        # as when a client drops: Bob may claim the win once the wait is over).
        assert not await bobs.ended(2 * CHECK_S)
        status = await owner.call("GET", f"/api/rooms/{room}")
        assert status.status == 200 and status.body["status"] == "playing", status.body
        # The revoked token opens nothing more.
        await EventStream.open(nodes[0], doomed, expect=401)
    finally:
        for closing in (events, game, bobs, wb):
            await closing.close()


async def test_a_banned_account_loses_its_token_and_cookie_streams(nodes: list[Node]) -> None:
    browser = Web(nodes[1].url)
    signed = await browser.signup()
    assert signed.status == 201
    made = await browser.post("/api/tokens", {"scopes": ["play"], "description": "t"})
    by_token = await EventStream.open(nodes[0], made.body["token"])
    session = aiohttp.ClientSession()
    cookie = {"Cookie": f"kibitz_session={browser.cookie}", "Origin": nodes[1].url}
    response = await session.get(nodes[1].url + "/api/stream/event", headers=cookie)
    assert response.status == 200
    by_cookie = EventStream(session, response)
    try:
        assert not await by_cookie.ended(2 * CHECK_S)
        moderation = nodes[0].app[MODERATION_KEY]
        await moderation.ban(None, "account", signed.body["account"]["username"], "a test")
        assert await by_token.ended(ENDS_WITHIN_S), "the token's stream outlived the ban"
        assert await by_cookie.ended(ENDS_WITHIN_S), "the cookie's stream outlived the ban"
    finally:
        await by_token.close()
        await by_cookie.close()


def idle_stream(kind: str, credential: Credential, account_id: int | None = None) -> Stream:
    """A stream with no connection behind it (nothing is written to it here)."""
    request = EdgeRequest(None, (1, 1), CIMultiDict())  # type: ignore[arg-type]
    return Stream(request, None, kind, account_id, credential)


async def test_the_credential_check_reads_once_for_all_and_keeps_streams_on_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = EventStreams(check_s=0.0)
    digest = "ab" * 32
    one = idle_stream(EVENT, Credential("token", "7"), account_id=1)
    same = idle_stream("game", Credential("token", "7"))
    other = idle_stream("seek", Credential("token", "8"))
    browser = idle_stream(EVENT, Credential("session", digest), account_id=2)
    streams = (one, same, other, browser)
    for stream in streams:
        registry.add_keepalive(stream)
    asked: list[tuple[set[int], set[str]]] = []

    async def failing(token_ids: set[int], digests: set[str]) -> tuple[set[int], set[str]]:
        asked.append((token_ids, digests))
        raise OSError("the database is down")

    with caplog.at_level("WARNING", logger="kibitz.server.botapi.events"):
        assert await registry.check_credentials(failing) == 0
        assert await registry.check_credentials(failing) == 0
    assert asked == [({7, 8}, {digest})] * 2  # one read for all four streams, each time
    assert not any(stream.done.done() for stream in streams)  # an outage ends nothing
    assert len([r for r in caplog.records if "credentials" in r.getMessage()]) == 1

    async def token_8_revoked(token_ids: set[int], digests: set[str]) -> tuple[set[int], set[str]]:
        return token_ids - {8}, set(digests)

    assert await registry.check_credentials(token_8_revoked) == 1
    assert other.done.done() and not any(s.done.done() for s in (one, same, browser))
    # Not due again before check_s has passed since the last look.
    registry.check_s = 60.0
    assert await registry.check_credentials(failing) == 0 and len(asked) == 2
