"""Challenges (server/botapi/challenges.py) on two real nodes and a real Redis: the
challenge lines both accounts' event streams are sent, the room an accept makes, decline,
cancel, two accepts at once, the rules between two accounts, the keep-alive stream, and
the seat keys (``GET /api/rooms/{id}/seat``) of rooms made by challenges, the WebSocket
and rematches.

The event lines are read where every node reads them: the account-events channel."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess
from tests.server.botapi.conftest import ApiAccount

# -- helpers (test_seek.py uses them too) ---------------------------------------------------


def bearer(account: ApiAccount) -> dict[str, str]:
    return {"Authorization": f"Bearer {account.token}"}


def uid(account: ApiAccount) -> str:
    return account.username.lower()


async def call(
    node: ServerProcess,
    method: str,
    path: str,
    account: ApiAccount | None,
    json_body: Any = None,
    form: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """One API request with the account's token: (status, JSON body or text)."""
    headers = {} if account is None else bearer(account)
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method, node.http_url + path, json=json_body, data=form, headers=headers,
            timeout=aiohttp.ClientTimeout(total=30),
        ) as resp,
    ):  # fmt: skip
        text = await resp.text()
    try:
        return resp.status, json.loads(text)
    except ValueError:
        return resp.status, text


class Lines:
    """Every line published for the accounts' event streams since it started."""

    def __init__(self, redis_url: str) -> None:
        self.redis = aioredis.Redis.from_url(redis_url, decode_responses=True)
        self.pubsub = self.redis.pubsub()
        self.seen: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.pubsub.subscribe(keys.ACCOUNT_EVENTS)
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.pubsub.listen():
            if message.get("type") == "message":
                data = json.loads(message["data"])
                if "line" in data:  # {"to": [...], "line": ...}
                    self.seen.append(data["line"])
                for _account, line in data.get("lines", ()):  # [[account, line], ...]
                    self.seen.append(line)

    async def wait(self, wanted: Callable[[dict[str, Any]], bool], timeout: float = 5.0) -> Any:
        """The first line seen that ``wanted`` accepts (waiting for it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for line in self.seen:
                if wanted(line):
                    return line
            assert loop.time() < deadline, f"no such line; the last: {self.seen[-5:]}"
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.pubsub.aclose()
        await self.redis.aclose()


def about(kind: str, challenge_id: str, direction: str | None = None) -> Callable[..., bool]:
    """Whether a line is a ``kind`` line about ``challenge_id`` (seen from ``direction``)."""

    def match(line: dict[str, Any]) -> bool:
        challenge = line.get("challenge") or {}
        return (
            line.get("type") == kind
            and challenge.get("id") == challenge_id
            and (direction is None or challenge.get("direction") == direction)
        )

    return match


@pytest.fixture(scope="module")
async def lines(own_redis: EmbeddedRedis, api_nodes: list[ServerProcess]) -> AsyncIterator[Lines]:
    listener = Lines(own_redis.url)
    await listener.start()
    yield listener
    await listener.stop()


async def challenge(
    node: ServerProcess, by: ApiAccount, to: ApiAccount, **fields: Any
) -> dict[str, Any]:
    """A challenge made as berserk makes it (a JSON body, absent options null)."""
    body = {"rated": False, "clock.limit": None, "clock.increment": None, "days": None,
            "color": None, "variant": None, "fen": None, **fields}  # fmt: skip
    status, made = await call(node, "POST", f"/api/challenge/{to.username}", by, body)
    assert status == 200, made
    return dict(made)


async def room_of(node: ServerProcess, room_id: str) -> dict[str, Any]:
    status, room = await call(node, "GET", f"/api/rooms/{room_id}", None)
    assert status == 200, room
    return dict(room)


# -- tests ------------------------------------------------------------------------------------


async def test_a_challenge_accepted_makes_the_room(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], lines: Lines
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    made = await challenge(
        a, alice, bob, **{"clock.limit": 180, "clock.increment": 2}, color="white"
    )
    cid = made["id"]
    assert made["status"] == "created" and made["url"].endswith(f"/?room={cid}")
    assert made["challenger"]["id"] == uid(alice) and made["destUser"]["name"] == bob.username
    assert made["variant"]["key"] == "standard" and made["speed"] == "blitz"
    assert made["timeControl"] == {"type": "clock", "limit": 180, "increment": 2, "show": "3+2"}
    assert (made["color"], made["rated"], made["perf"]) == ("white", False, {"name": "Blitz"})
    seen_in = await lines.wait(about("challenge", cid, "in"))
    assert seen_in["compat"] == {"bot": True, "board": True}
    await lines.wait(about("challenge", cid, "out"))
    # Both lists show it, from either node.
    _, bobs = await call(b, "GET", "/api/challenge", bob)
    assert [c["id"] for c in bobs["in"]] == [cid] and bobs["out"] == []
    _, alices = await call(b, "GET", "/api/challenge", alice)
    assert [(c["id"], c["direction"]) for c in alices["out"]] == [(cid, "out")]
    # Only its destination accepts it: to anyone else it is not found (as at lichess).
    carol = make_account()
    assert (await call(a, "POST", f"/api/challenge/{cid}/accept", alice))[0] == 404
    for action in ("accept", "decline", "cancel"):
        refused = await call(a, "POST", f"/api/challenge/{cid}/{action}", carol)
        assert refused == (404, {"error": "Challenge not found"}), action
    assert await call(b, "POST", f"/api/challenge/{cid}/accept", bob) == (200, {"ok": True})
    room = await room_of(a, cid)
    assert [s.get("account") for s in room["seats"]] == [alice.username, bob.username]
    assert room["status"] == "playing" and room["game"] == "chess" and not room.get("rated")
    assert room["clock"]["initial_ms"] == 180_000 and room["clock"]["increment_ms"] == 2_000
    # Each seat's key is kept for its own account, and for nobody else.
    _, seat_a = await call(a, "GET", f"/api/rooms/{cid}/seat", alice)
    _, seat_b = await call(b, "GET", f"/api/rooms/{cid}/seat", bob)
    assert (seat_a["seat"], seat_b["seat"]) == (0, 1) and seat_a["token"] != seat_b["token"]
    assert (await call(a, "GET", f"/api/rooms/{cid}/seat", carol))[0] == 404
    # The key plays the seat: white resigns over the WebSocket with it.
    async with await KibitzClient.open(a.http_url, additional_headers=bearer(alice)) as ws:
        ws.tokens[cid] = (0, seat_a["token"])
        await ws.resume(cid, seat_a["token"])
        await ws.resign(cid)
        await ws.wait_state(cid, lambda s: s["status"] == "over", timeout=10)
    # Decided once: accepting again, declining or canceling it is refused.
    assert (await call(b, "POST", f"/api/challenge/{cid}/accept", bob))[0] == 400
    assert (await call(a, "POST", f"/api/challenge/{cid}/cancel", alice))[0] == 400
    assert (await call(a, "GET", "/api/challenge", alice))[1]["out"] == []
    assert (await call(a, "POST", "/api/challenge/nosuchchallenge/accept", bob))[0] == 404


async def test_a_rated_othello_challenge_with_a_random_colour(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, _ = api_nodes
    alice, bob = make_account(), make_account()
    made = await challenge(a, alice, bob, variant="othello", rated=True, days=3)
    assert made["variant"]["key"] == "othello" and made["rated"]
    # The colour is drawn when the challenge is made (lichess-bot reads finalColor at once).
    assert made["color"] == "random" and made["finalColor"] in ("white", "black")
    assert made["timeControl"] == {"type": "correspondence", "daysPerTurn": 3}
    assert made["speed"] == "correspondence"
    assert await call(a, "POST", f"/api/challenge/{made['id']}/accept", bob) == (200, {"ok": True})
    room = await room_of(a, made["id"])
    assert room["game"] == "othello" and room["rated"]
    assert room["clock"]["days_per_move"] == 3
    accounts = [s.get("account") for s in room["seats"]]
    assert sorted(accounts) == sorted([alice.username, bob.username])
    _, seat = await call(a, "GET", f"/api/rooms/{made['id']}/seat", alice)
    assert accounts[seat["seat"]] == alice.username
    assert seat["seat"] == ("white", "black").index(made["finalColor"])


async def test_decline_and_cancel_tell_the_other_side(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], lines: Lines
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    first = (await challenge(a, alice, bob))["id"]
    assert (await call(a, "POST", f"/api/challenge/{first}/decline", alice))[0] == 404
    refused = await call(b, "POST", f"/api/challenge/{first}/decline", bob, {"reason": "nope"})
    assert refused[0] == 400 and "tooFast" in refused[1]["error"]
    # lichess-bot declines with a form; the key's case does not matter.
    reply = await call(
        b, "POST", f"/api/challenge/{first}/decline", bob, form={"reason": "toofast"}
    )
    assert reply == (200, {"ok": True})
    declined = await lines.wait(about("challengeDeclined", first, "out"))
    assert declined["challenge"]["status"] == "declined"
    assert declined["challenge"]["declineReasonKey"] == "tooFast"
    assert "too fast" in declined["challenge"]["declineReason"]
    assert (await call(b, "POST", f"/api/challenge/{first}/accept", bob))[0] == 400

    second = (await challenge(a, alice, bob))["id"]
    assert (await call(b, "POST", f"/api/challenge/{second}/cancel", bob))[0] == 404
    assert await call(b, "POST", f"/api/challenge/{second}/cancel", alice) == (200, {"ok": True})
    canceled = await lines.wait(about("challengeCanceled", second, "in"))
    assert canceled["challenge"]["status"] == "canceled"
    assert (await call(a, "POST", f"/api/challenge/{second}/accept", bob))[0] == 400
    assert (await call(a, "GET", f"/api/rooms/{second}", None))[0] == 404  # no room


async def test_two_accepts_at_once_make_one_room(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    alice, bob = make_account(), make_account()
    cid = (await challenge(api_nodes[0], alice, bob, variant="tictactoe"))["id"]
    answers = await asyncio.gather(
        *(call(api_nodes[i % 2], "POST", f"/api/challenge/{cid}/accept", bob) for i in range(6))
    )
    assert sorted(status for status, _ in answers) == [200] + [400] * 5
    room = await room_of(api_nodes[1], cid)
    assert room["version"] == 0 and room["status"] == "playing"


async def test_bad_challenges_are_refused_and_change_nothing(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, _ = api_nodes
    alice, bob = make_account(), make_account()
    path = f"/api/challenge/{bob.username}"
    refused = [
        ("clock.limit", 0, "1 to 10800 seconds"),  # our clocks start at a second
        ("clock.increment", 200, "clock.increment needs clock.limit"),
        ("clock.increment", "9" * 5000, "whole number"),  # never read as a number
        ("days", 20, "1 to 14"),
        ("days", 10**12, "whole number"),
        ("variant", "crazyhouse", "variant"),
        ("color", "green", "color"),
        ("rated", "maybe", "rated"),
        ("fen", "8/8/8/8/8/8/8/8 w - - 0 1", "fen"),
    ]
    for name, value, said in refused:
        status, body = await call(a, "POST", path, alice, {name: value})
        assert status == 400 and said in body["error"], (name, body)
    both = {"clock.limit": 60, "days": 2}
    assert (await call(a, "POST", path, alice, both))[0] == 400
    long = await call(a, "POST", path, alice, {"variant": "x" * 5000})
    assert long == (400, {"error": "variant: at most 32 characters"})
    huge = await call(a, "POST", path, alice, form={"pad": "x" * 70_000})
    assert huge == (400, {"error": "The body is too large"})
    slow = {"clock.limit": 60, "clock.increment": 200}
    status, body = await call(a, "POST", path, alice, slow)
    assert status == 400 and "0 to 180 seconds" in body["error"]
    assert (await call(a, "POST", "/api/challenge/nosuchuser12", alice, {}))[0] == 404
    assert (await call(a, "POST", f"/api/challenge/{alice.username}", alice, {}))[0] == 400
    assert (await call(a, "POST", path, None, {}))[0] == 401
    assert (await call(a, "GET", "/api/challenge", bob))[1] == {"in": [], "out": []}


async def test_a_blocked_pair_cannot_challenge(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, _ = api_nodes
    alice = make_account()
    async with aiohttp.ClientSession() as http:
        blocker = make_account()
        # Blocks are made by a browser session; log the blocker in to make one.
        login = {"username": blocker.username, "password": "a long enough password"}
        async with http.post(
            f"{a.http_url}/api/auth/login", json=login, headers={"Origin": a.http_url}
        ) as resp:
            assert resp.status == 200
            cookie = resp.cookies["kibitz_session"].value
        async with http.post(
            f"{a.http_url}/api/players/{alice.username}/block",
            headers={"Origin": a.http_url, "Cookie": f"kibitz_session={cookie}"},
        ) as resp:
            assert resp.status == 200, await resp.text()
    status, body = await call(a, "POST", f"/api/challenge/{blocker.username}", alice, {})
    assert status == 400 and "block" in body["error"]
    assert (await call(a, "GET", "/api/challenge", blocker))[1]["in"] == []


async def test_challenges_are_rate_limited(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, _ = api_nodes
    alice, bob = make_account(), make_account()
    path = f"/api/challenge/{bob.username}"
    for _ in range(30):  # refused ones count too: nothing is stored
        assert (await call(a, "POST", path, alice, {"color": "green"}))[0] == 400
    status, body = await call(a, "POST", path, alice, {})
    assert status == 429 and body == {"error": "Too many requests. Try again later."}


async def keep_alive_stream(
    node: ServerProcess, by: ApiAccount, to: ApiAccount
) -> tuple[aiohttp.ClientSession, aiohttp.ClientResponse, dict[str, Any]]:
    """A challenge made with ``keepAliveStream=true`` as a browser's form; the open
    response and its first line (the challenge)."""
    http = aiohttp.ClientSession()
    form = {"variant": "tictactoe", "keepAliveStream": "true"}
    resp = await http.post(
        f"{node.http_url}/api/challenge/{to.username}", data=form, headers=bearer(by)
    )
    assert resp.status == 200 and resp.content_type == "application/x-ndjson"
    first = json.loads(await asyncio.wait_for(resp.content.readline(), 5))
    return http, resp, first


async def rest_of(resp: aiohttp.ClientResponse) -> list[Any]:
    """The lines until the server ends the stream (keep-alive lines as "")."""
    text = (await asyncio.wait_for(resp.content.read(), 10)).decode()
    return [json.loads(line) if line else "" for line in text.splitlines()]


async def test_a_keep_alive_challenge_lasts_as_long_as_its_request(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], lines: Lines
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    # Accepted: the stream says so once the seats' keys are there, and ends.
    http, resp, first = await keep_alive_stream(a, alice, bob)
    cid = first["id"]
    assert first["status"] == "created"
    assert await call(b, "POST", f"/api/challenge/{cid}/accept", bob) == (200, {"ok": True})
    assert [x for x in await rest_of(resp) if x] == [{"done": "accepted"}]
    await http.close()
    assert (await call(a, "GET", f"/api/rooms/{cid}/seat", alice))[0] == 200
    # Declined: the reason comes with the outcome.
    http, resp, first = await keep_alive_stream(a, alice, bob)
    reply = await call(b, "POST", f"/api/challenge/{first['id']}/decline", bob, {"reason": "later"})
    assert reply[0] == 200
    done = [x for x in await rest_of(resp) if x]
    assert done[0]["done"] == "declined" and done[0]["declineReasonKey"] == "later"
    await http.close()
    # The client hangs up: the challenge is canceled, and its destination told.
    http, resp, first = await keep_alive_stream(b, alice, bob)
    resp.close()
    await http.close()
    await lines.wait(about("challengeCanceled", first["id"], "in"), timeout=5)
    assert (await call(a, "GET", "/api/challenge", bob))[1]["in"] == []


async def test_seats_taken_over_the_websocket_keep_their_keys(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, _ = api_nodes
    alice, bob = make_account(), make_account()
    async with (
        await KibitzClient.open(a.http_url, additional_headers=bearer(alice)) as first,
        await KibitzClient.open(a.http_url, additional_headers=bearer(bob)) as second,
    ):
        created = await first.create("tictactoe", seat=1)
        room = created["room"]
        joined = await second.join(room)
        _, seat = await call(a, "GET", f"/api/rooms/{room}/seat", alice)
        assert seat == {"room": room, "seat": 1, "token": created["token"]}
        _, seat = await call(a, "GET", f"/api/rooms/{room}/seat", bob)
        assert seat == {"room": room, "seat": 0, "token": joined["token"]}
        # A guest's seat keeps no key.
        async with await KibitzClient.open(a.http_url) as guest:
            made = await guest.create("tictactoe", seat=0)
        assert await call(a, "GET", f"/api/rooms/{made['room']}/seat", alice) == (
            404, {"error": "You hold no seat in this room that the API can play"},
        )  # fmt: skip


async def test_players_paired_by_the_pool_keep_their_keys(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    clock = {"initial_ms": 77_000, "increment_ms": 0}  # a pool of this test's own
    async with (
        await KibitzClient.open(a.http_url, additional_headers=bearer(alice)) as first,
        await KibitzClient.open(b.http_url, additional_headers=bearer(bob)) as second,
    ):
        await first.pool_join("oware", clock=clock)
        await second.pool_join("oware", clock=clock)
        seats = [await first.wait_paired(10), await second.wait_paired(10)]
    for who, seat in zip((alice, bob), seats, strict=True):
        _, kept = await call(a, "GET", f"/api/rooms/{seat['room']}/seat", who)
        assert kept == {"room": seat["room"], "seat": seat["seat"], "token": seat["token"]}


async def test_a_rematch_keeps_the_keys_of_its_seats(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    cid = (await challenge(a, alice, bob, variant="tictactoe", color="white"))["id"]
    assert (await call(b, "POST", f"/api/challenge/{cid}/accept", bob))[0] == 200
    tokens = {}
    for who in (alice, bob):
        _, seat = await call(a, "GET", f"/api/rooms/{cid}/seat", who)
        tokens[who.username] = (seat["seat"], seat["token"])
    async with await KibitzClient.open(a.http_url, additional_headers=bearer(alice)) as ws:
        ws.tokens[cid] = tokens[alice.username]
        await ws.resume(cid, tokens[alice.username][1])
        await ws.resign(cid)
        await ws.wait_state(cid, lambda s: s["status"] == "over", timeout=10)
        await ws.rematch(cid)
        ws.tokens[cid] = tokens[bob.username]
        await ws.rematch(cid)
        state = await ws.wait_state(cid, lambda s: bool(s.get("next_room")), timeout=10)
    new = state["next_room"]
    _, seat = await call(a, "GET", f"/api/rooms/{new}/seat", alice)
    assert seat == {"room": new, "seat": 1, "token": tokens[alice.username][1]}
    _, seat = await call(a, "GET", f"/api/rooms/{new}/seat", bob)
    assert seat == {"room": new, "seat": 0, "token": tokens[bob.username][1]}


async def test_a_new_event_stream_is_sent_the_open_challenges(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    cid = (await challenge(a, alice, bob, variant="kono"))["id"]
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{b.http_url}/api/stream/event", headers=bearer(bob)) as resp,
    ):
        assert resp.status == 200
        line = json.loads(await asyncio.wait_for(resp.content.readline(), 5))
    assert line["type"] == "challenge" and line["challenge"]["id"] == cid
    assert line["challenge"]["direction"] == "in"
    assert line["challenge"]["variant"]["key"] == "kono"


def ban(username: str) -> None:
    """Ban ``username`` with the operators' command (the nodes' database)."""
    done = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "admin", "ban", "account", username,
         "--reason", "a test"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


async def test_a_banned_challenger_is_refused(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], lines: Lines
) -> None:
    a, b = api_nodes
    mallory, bob = make_account(), make_account()
    cid = (await challenge(a, mallory, bob))["id"]
    ban(mallory.username)
    path = f"/api/challenge/{bob.username}"

    async def refused() -> tuple[int, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5  # the nodes read the bans table every second
        while (answer := await call(a, "POST", path, mallory, {}))[0] == 200:
            assert loop.time() < deadline, "the ban did not reach the node"
            await asyncio.sleep(0.2)
        return answer

    # A banned account's tokens no longer act for it (a banned address: 403).
    assert await refused() == (401, {"error": "No such token"})
    # A challenge made before the ban is not accepted: it is canceled. (The tokens die
    # with the ban in the database; the nodes' Redis copy of the bans follows within the
    # second the nodes compare the table in.)
    await asyncio.sleep(1.2)
    status, body = await call(b, "POST", f"/api/challenge/{cid}/accept", bob)
    assert status == 400 and "canceled" in body["error"]
    await lines.wait(about("challengeCanceled", cid, "in"))
    assert (await call(a, "GET", f"/api/rooms/{cid}", None))[0] == 404


async def test_a_keep_alive_challenge_hears_its_outcome_within_a_second(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    """The outcome wakes the request (the line that decides the challenge, heard on the
    channel by the node that holds it), whichever node decides it: no waiting for a
    poll of the record (those are 10 s apart now)."""
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    loop = asyncio.get_running_loop()
    decisions = (
        (b, bob, "decline", {"done": "declined"}),
        (b, alice, "cancel", {"done": "canceled"}),
        (a, bob, "accept", {"done": "accepted"}),
    )
    for node, by, action, expected in decisions:
        http, resp, first = await keep_alive_stream(a, alice, bob)
        try:
            path = f"/api/challenge/{first['id']}/{action}"
            assert await call(node, "POST", path, by) == (200, {"ok": True})
            decided = loop.time()
            while not (line := await asyncio.wait_for(resp.content.readline(), 2)).strip():
                pass  # keep-alive lines
            assert loop.time() - decided < 1.0, f"{action}: told after {loop.time() - decided}"
            done = json.loads(line)
            assert {"done": done["done"]} == expected, done
            assert await asyncio.wait_for(resp.content.read(), 2) == b""  # and it ends
        finally:
            resp.close()
            await http.close()
