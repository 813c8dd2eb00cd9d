"""Accounts over HTTP and WebSocket on real ``kibitz serve`` processes: two nodes on one
Redis and one database (SQLite, then PostgreSQL), each test a client of its own loopback
address (tests/server/accounts/web.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, new_postgres_database, start_server
from tests.server.accounts.web import PASSWORD, Web, fresh_name

ACCOUNT_FAILURES = 3  # failed log-ins per username per window on these nodes
ADDRESS_FAILURES = 8  # ... per address
SIGNUPS = 4  # sign-ups per address per hour
NODE_ENV = {
    "KIBITZ_LOGIN_FAILURES_PER_ACCOUNT": str(ACCOUNT_FAILURES),
    "KIBITZ_LOGIN_FAILURES_PER_ADDRESS": str(ADDRESS_FAILURES),
    "KIBITZ_SIGNUPS_PER_ADDRESS": str(SIGNUPS),
    "KIBITZ_LOGIN_WINDOW": "600",
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> str | None:
    """None: the session's SQLite file (in the data directory); else a fresh PostgreSQL."""
    if request.param == "sqlite":
        return None
    return new_postgres_database(request.getfixturevalue("postgres"))


@pytest.fixture(scope="module")
def nodes(own_redis: EmbeddedRedis, database: str | None) -> Iterator[list[ServerProcess]]:
    started = [start_server(own_redis.url, extra_env=NODE_ENV, database_url=database)]
    try:
        started.append(start_server(own_redis.url, extra_env=NODE_ENV, database_url=database))
        yield started
    finally:
        for node in started:
            node.stop()


@pytest.fixture
def web(nodes: list[ServerProcess]) -> Web:
    return Web(nodes[0].http_url)


async def test_sign_up_sets_a_safe_cookie_and_me_shows_the_account(web: Web) -> None:
    name = fresh_name()
    reply = await web.signup(name.upper())
    assert reply.status == 201, reply.body
    account = reply.body["account"]
    assert account["username"] == name.upper() and len(account["player"]) == 32
    assert account["roles"] == [] and account["bot"] is False and account["mark"] is None
    cookie = reply.cookies["kibitz_session"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/"
    assert not cookie["secure"]  # plain HTTP on loopback
    me = await web.get("/api/auth/me")
    assert me.body == {"account": account}
    assert (await web.get("/api/auth/me", cookie=None)).body == {"account": None}
    taken = await Web(web.url).signup(name.lower())
    assert (taken.status, taken.code) == (409, "auth/taken")


async def test_behind_a_tls_proxy_the_cookie_is_secure(own_redis: EmbeddedRedis) -> None:
    env = {**NODE_ENV, "KIBITZ_TRUSTED_PROXIES": "127.0.0.1"}
    node = start_server(own_redis.url, extra_env=env)
    try:
        web = Web(node.http_url, address="127.0.0.1")
        forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
        reply = await web.post("/api/auth/signup", {"username": fresh_name(),
                               "password": PASSWORD}, headers=forwarded)  # fmt: skip
        assert reply.status == 201, reply.body
        assert reply.cookies["kibitz_session"]["secure"]
    finally:
        node.stop()


async def test_bad_bodies_are_refused(web: Web) -> None:
    for body in ("not json", [1, 2], None):
        reply = await web.call("POST", "/api/auth/signup", body, headers={})
        if body is None:
            continue
        assert (reply.status, reply.code) == (400, "request/invalid"), reply.body
    bad_name = await web.signup("x")
    assert (bad_name.status, bad_name.code) == (400, "auth/username")
    bad_password = await web.post("/api/auth/signup", {"username": fresh_name(), "password": "1"})
    assert (bad_password.status, bad_password.code) == (400, "auth/password")


async def test_log_in_rotates_the_session_and_log_out_ends_it(
    web: Web, nodes: list[ServerProcess]
) -> None:
    name = fresh_name()
    signed_up = (await web.signup(name), web.cookie)[1]
    assert (await web.login(name)).status == 200
    logged_in = web.cookie
    assert logged_in and logged_in != signed_up
    # The session the log-in replaced is over; the new one works on the other node too.
    assert (await web.get("/api/auth/me", cookie=signed_up)).body == {"account": None}
    other = Web(nodes[1].http_url, web.address, logged_in)
    assert (await other.get("/api/auth/me")).body["account"]["username"] == name
    out = await web.post("/api/auth/logout")
    assert out.status == 200 and out.body == {"account": None}
    assert (await web.get("/api/auth/me", cookie=logged_in)).body == {"account": None}


async def test_a_failed_log_in_says_nothing_about_which_part_was_wrong(web: Web) -> None:
    name = fresh_name()
    await web.signup(name)
    wrong_password = await web.login(name, "not the password")
    unknown = await web.login(fresh_name(), PASSWORD)
    assert wrong_password.status == unknown.status == 401
    assert wrong_password.body == unknown.body
    assert wrong_password.body["code"] == "auth/failed"


async def test_log_out_everywhere_ends_every_session(web: Web, nodes: list[ServerProcess]) -> None:
    name = fresh_name()
    await web.signup(name)
    elsewhere = Web(nodes[1].http_url)
    await elsewhere.login(name)
    assert elsewhere.cookie
    reply = await web.post("/api/auth/logout-all")
    assert reply.status == 200 and reply.body["ended"] == 2
    assert (await elsewhere.get("/api/auth/me")).body == {"account": None}
    assert (await web.get("/api/auth/me")).body == {"account": None}


async def test_a_new_password_ends_the_other_sessions(web: Web, nodes: list[ServerProcess]) -> None:
    name = fresh_name()
    await web.signup(name)
    elsewhere = Web(nodes[1].http_url)
    await elsewhere.login(name)
    wrong = await web.post("/api/auth/password", {"password": "nope nope", "new_password": "x" * 9})
    assert (wrong.status, wrong.code) == (401, "auth/failed")
    changed = await web.post(
        "/api/auth/password", {"password": PASSWORD, "new_password": "another password"}
    )
    assert changed.status == 200, changed.body
    assert (await web.get("/api/auth/me")).body["account"]["username"] == name  # this one stays
    assert (await elsewhere.get("/api/auth/me")).body == {"account": None}
    assert (await Web(web.url).login(name)).status == 401
    assert (await Web(web.url).login(name, "another password")).status == 200


async def test_the_csrf_defence(web: Web) -> None:
    await web.signup()
    body = {"description": "x", "scopes": ["read"]}
    foreign = await web.post("/api/tokens", body, origin="https://evil.example")
    assert (foreign.status, foreign.code) == (403, "auth/csrf")
    no_origin = await web.post("/api/tokens", body, origin=None)
    assert (no_origin.status, no_origin.code) == (403, "auth/csrf")
    referer = await web.post("/api/tokens", body, origin=None,
                             headers={"Referer": "https://evil.example/" + web.url})  # fmt: skip
    assert (referer.status, referer.code) == (403, "auth/csrf")
    null = await web.post("/api/tokens", body, origin="null")
    assert (null.status, null.code) == (403, "auth/csrf")
    own_referer = await web.post(
        "/api/tokens", body, origin=None, headers={"Referer": web.url + "/#/lobby"}
    )
    assert own_referer.status == 201, own_referer.body
    same = await web.post("/api/tokens", body)
    assert same.status == 201, same.body
    # Nothing was made by the refused requests: two tokens, from the two that passed.
    assert len((await web.get("/api/tokens")).body["tokens"]) == 2
    # A cross-site log-out or log-in is refused as well (it would change the session).
    assert (await web.post("/api/auth/logout", origin="https://evil.example")).status == 403
    assert (await web.get("/api/auth/me")).body["account"] is not None


async def test_a_cross_site_sign_up_is_refused_and_makes_nothing(web: Web) -> None:
    name = fresh_name()
    reply = await web.post("/api/auth/signup", {"username": name, "password": PASSWORD},
                           origin="http://evil.example")  # fmt: skip
    assert (reply.status, reply.code) == (403, "auth/csrf")
    assert (await Web(web.url).login(name)).status == 401


async def test_log_in_failures_are_throttled_across_nodes(nodes: list[ServerProcess]) -> None:
    name = fresh_name()
    await Web(nodes[0].http_url).signup(name)
    # Failures from two addresses, on both nodes: the username's count is shared.
    for i in range(ACCOUNT_FAILURES):
        reply = await Web(nodes[i % 2].http_url).login(name, "wrong password")
        assert reply.status == 401, reply.body
    throttled = await Web(nodes[1].http_url).login(name)  # even the right password waits
    assert (throttled.status, throttled.code) == (429, "auth/throttled")
    assert 0 < int(throttled.headers["Retry-After"]) <= 600
    # Another account is not held up by this one's failures.
    other = fresh_name()
    await Web(nodes[0].http_url).signup(other)
    assert (await Web(nodes[1].http_url).login(other)).status == 200


async def test_one_address_is_throttled_across_usernames_and_nodes(
    nodes: list[ServerProcess],
) -> None:
    attacker = Web(nodes[0].http_url)
    for i in range(ADDRESS_FAILURES):
        node = nodes[i % 2].http_url
        reply = await Web(node, attacker.address).login(fresh_name(), "guess guess")
        assert reply.status == 401, (i, reply.body)
    name = fresh_name()
    await Web(nodes[0].http_url).signup(name)
    throttled = await Web(nodes[1].http_url, attacker.address).login(name)
    assert (throttled.status, throttled.code) == (429, "auth/throttled")
    assert (await Web(nodes[1].http_url).login(name)).status == 200  # from elsewhere: fine


async def test_sign_ups_are_limited_per_address(nodes: list[ServerProcess]) -> None:
    web = Web(nodes[0].http_url)
    for i in range(SIGNUPS):
        assert (await Web(nodes[i % 2].http_url, web.address).signup()).status == 201
    refused = await Web(nodes[1].http_url, web.address).signup()
    assert (refused.status, refused.code) == (429, "auth/throttled")
    assert int(refused.headers["Retry-After"]) > 0


async def eventually(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = await check()
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.3)


async def play_a_short_game(url: str, key: str) -> str:
    """Two guests, the first with ``key``: one move each, then the first resigns. The
    room id (the game's id once archived)."""
    async with await KibitzClient.open(url) as a, await KibitzClient.open(url) as b:
        seat = await a.create("tictactoe", seat=0, player_key=key)
        room = seat["room"]
        await b.join(room, player_key=uuid.uuid4().hex)
        await a.move(room, "5")
        await a.next_message(lambda m: m.get("type") == "state" and m.get("version", 0) >= 2)
        await b.move(room, "1")
        await b.next_message(lambda m: m.get("type") == "state" and len(m.get("moves", [])) >= 2)
        await a.resign(room)
        await a.next_message(lambda m: m.get("type") == "state" and m.get("status") == "over")
    return str(room)


async def test_claiming_a_guest_key_brings_its_games(web: Web) -> None:
    key = uuid.uuid4().hex
    room = await play_a_short_game(web.url, key)

    async def archived() -> bool:
        reply = await web.get(f"/api/games/{room}")
        return reply.status == 200

    assert await eventually(archived), "the game was not archived"
    name = fresh_name()
    await web.signup(name)
    reply = await web.post("/api/auth/claim", {"player_key": key})
    assert reply.status == 200 and reply.body == {"claimed": player_id(key)}
    profile = await web.get(f"/api/players/{name}")
    assert profile.status == 200, profile.body
    assert room in [game["id"] for game in profile.body["recent"]]
    again = await Web(web.url).signup()
    assert again.status == 201
    stolen = await Web(web.url, cookie=None).post("/api/auth/claim", {"player_key": key})
    assert (stolen.status, stolen.code) == (401, "auth/required")


async def test_api_tokens_scopes_and_revocation(web: Web) -> None:
    await web.signup()
    made = await web.post("/api/tokens", {"description": "reader", "scopes": ["read"]})
    assert made.status == 201, made.body
    token = made.body["token"]
    assert token.startswith("kbz_") and made.body["scopes"] == ["read"]
    listed = (await web.get("/api/tokens")).body["tokens"]
    assert [t["id"] for t in listed] == [made.body["id"]] and "token" not in listed[0]
    bearer = {"Authorization": f"Bearer {token}"}
    me = await web.get("/api/auth/me", cookie=None, headers=bearer)
    assert (
        me.body["account"]["username"]
        == (await web.get("/api/auth/me")).body["account"]["username"]
    )
    # A read token does not play: the WebSocket handshake is refused.
    with pytest.raises(InvalidStatus) as refused:
        await KibitzClient.open(web.url, additional_headers=bearer)
    assert refused.value.response.status_code == 403
    # A token cannot make tokens; admin scope is for admins only.
    assert (await web.post("/api/tokens", {"scopes": ["play"]}, cookie=None,
                           headers=bearer)).code == "auth/session"  # fmt: skip
    assert (await web.post("/api/tokens", {"scopes": ["admin"]})).code == "auth/forbidden"
    assert (await web.post("/api/tokens", {"scopes": ["sudo"]})).code == "request/invalid"
    revoked = await web.call("DELETE", f"/api/tokens/{made.body['id']}")
    assert revoked.status == 200
    gone = await web.get("/api/auth/me", cookie=None, headers=bearer)
    assert (gone.status, gone.code) == (401, "auth/token")
    assert (await web.call("DELETE", f"/api/tokens/{made.body['id']}")).status == 404


async def test_the_websocket_acts_for_the_account(web: Web, nodes: list[ServerProcess]) -> None:
    account = (await web.signup()).body["account"]
    cookie = {"Cookie": f"kibitz_session={web.cookie}"}
    async with await KibitzClient.open(nodes[1].http_url, additional_headers=cookie) as c:
        seat = await c.create("tictactoe", seat=0, player_key=uuid.uuid4().hex)
        state = await c.next_message(lambda m: m.get("type") == "state")
    assert seat["room"] == state["room"]
    assert state["seats"][0]["player"] == account["player"]  # not the key's
    made = await web.post("/api/tokens", {"scopes": ["play"]})
    bearer = {"Authorization": f"Bearer {made.body['token']}"}
    async with await KibitzClient.open(web.url, additional_headers=bearer) as c:
        await c.create("tictactoe", seat=0)
        state = await c.next_message(lambda m: m.get("type") == "state")
    assert state["seats"][0]["player"] == account["player"]


async def test_a_bad_bearer_token_is_refused_at_the_handshake(web: Web) -> None:
    made = (await web.signup(), await web.post("/api/tokens", {"scopes": ["play"]}))[1]
    good = "Bearer " + made.body["token"]
    for headers in (
        [("Authorization", "Bearer kbz_" + "A" * 32)],
        [("Authorization", "Bearer nonsense")],
        [("Authorization", "Bearer ")],
        [("Authorization", good), ("Authorization", good)],  # sent twice: no choosing
    ):
        with pytest.raises(InvalidStatus) as refused:
            await KibitzClient.open(web.url, additional_headers=headers)
        assert refused.value.response.status_code == 401, headers
    async with await KibitzClient.open(web.url, additional_headers={"Authorization": good}):
        pass


async def test_a_session_expires(own_redis: EmbeddedRedis, database: str | None) -> None:
    node = start_server(own_redis.url, extra_env={**NODE_ENV, "KIBITZ_SESSION_TTL": "2"},
                        database_url=database)  # fmt: skip
    try:
        web = Web(node.http_url)
        signed = await web.signup()
        assert signed.cookies["kibitz_session"]["max-age"] == "2"
        assert (await web.get("/api/auth/me")).body["account"] is not None
        await asyncio.sleep(2.2)
        assert (await web.get("/api/auth/me")).body == {"account": None}
        # A guest socket is still fine: an expired cookie is no refusal.
        async with await KibitzClient.open(
            web.url, additional_headers={"Cookie": f"kibitz_session={web.cookie}"}
        ) as guest:
            await guest.create("tictactoe", seat=0)
    finally:
        node.stop()
