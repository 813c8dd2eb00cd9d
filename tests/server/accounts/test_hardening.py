"""The accounts' defences at their edges, on real ``kibitz serve`` processes (real Redis,
SQLite): the budget of password checks per address, WebSockets opened by other sites'
pages, sockets whose credential ended while they were open, the cross-site check of
requests with a Bearer token, and the ``Secure`` cookie of an https-only site."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, start_server
from tests.server.accounts.web import PASSWORD, Web, fresh_name

CHECKS = 6  # password checks per address per window on this node
#: How long a socket may go on trusting a credential it checked (server/gateway/session.py).
RECHECK_S = 5.0
EVIL = "https://evil.example"


@pytest.fixture(scope="module")
def node(own_redis: EmbeddedRedis) -> Iterator[ServerProcess]:
    """A node that lets pages of any origin open sockets (``--allow-origin '*'``)."""
    env = {"KIBITZ_PASSWORD_CHECKS_PER_ADDRESS": str(CHECKS)}
    server = start_server(own_redis.url, extra_env=env, args=["--allow-origin", "*"])
    yield server
    server.stop()


async def test_successful_log_ins_count_against_the_address_budget(node: ServerProcess) -> None:
    name = fresh_name()
    web = Web(node.http_url)
    await web.signup(name)
    for _ in range(CHECKS):
        assert (await Web(node.http_url, web.address).login(name)).status == 200
    refused = await Web(node.http_url, web.address).login(name)
    assert (refused.status, refused.code) == (429, "auth/throttled")
    assert (await Web(node.http_url).login(name)).status == 200  # another address: fine


async def seat_player(url: str, headers: dict[str, str], key: str) -> str:
    """The ``player`` of the seat a socket opened with ``headers`` gets by creating a room."""
    async with await KibitzClient.open(url, additional_headers=headers) as client:
        await client.create("tictactoe", seat=0, player_key=key)
        state = await client.next_message(lambda m: m.get("type") == "state")
    return str(state["seats"][0]["player"])


async def test_a_foreign_page_does_not_borrow_the_cookie(node: ServerProcess) -> None:
    web = Web(node.http_url)
    account = (await web.signup()).body["account"]
    cookie = f"kibitz_session={web.cookie}"
    key = uuid.uuid4().hex
    foreign = await seat_player(node.http_url, {"Origin": EVIL, "Cookie": cookie}, key)
    assert foreign == player_id(key) != account["player"]  # a guest's seat
    own = await seat_player(node.http_url, {"Origin": node.http_url, "Cookie": cookie}, key)
    assert own == account["player"]
    # A token is no ambient credential: a page that holds one may use it from anywhere.
    made = await web.post("/api/tokens", {"scopes": ["play"]})
    bearer = {"Origin": EVIL, "Authorization": f"Bearer {made.body['token']}"}
    assert await seat_player(node.http_url, bearer, key) == account["player"]


async def expired(client: KibitzClient) -> None:
    """``create`` is refused with ``auth/expired`` and the server closes the socket."""
    with pytest.raises(ServerError) as refused:
        await client.create("tictactoe", seat=0)
    assert refused.value.code == "auth/expired"
    with pytest.raises(ConnectionError):
        await client.next_message(lambda m: False, timeout=10)
    assert client.ws.close_code == 1008


async def test_a_socket_stops_acting_for_a_revoked_token(node: ServerProcess) -> None:
    """A socket signed in with a token that is then revoked is refused ``auth/expired`` and
    closed past RECHECK_S; so is one whose session then logs out everywhere, while one whose
    session lives on still acts for its account. The three sockets are open at once, so
    that one wait of RECHECK_S serves all three."""
    revoked, logged_out, live = Web(node.http_url), Web(node.http_url), Web(node.http_url)
    await revoked.signup()
    await logged_out.signup()
    account = (await live.signup()).body["account"]
    made = await revoked.post("/api/tokens", {"scopes": ["play"]})
    bearer = {"Authorization": f"Bearer {made.body['token']}"}
    async with (
        await KibitzClient.open(node.http_url, additional_headers=bearer) as by_token,
        await KibitzClient.open(node.http_url, additional_headers=cookie(logged_out)) as gone,
        await KibitzClient.open(node.http_url, additional_headers=cookie(live)) as staying,
    ):
        await by_token.create("tictactoe", seat=0)
        await gone.create("tictactoe", seat=0)
        assert (await revoked.call("DELETE", f"/api/tokens/{made.body['id']}")).status == 200
        assert (await logged_out.post("/api/auth/logout-all")).status == 200
        await asyncio.sleep(RECHECK_S + 0.5)
        await expired(by_token)
        await expired(gone)
        await staying.create("tictactoe", seat=0)
        state = await staying.next_message(lambda m: m.get("type") == "state")
    assert state["seats"][0]["player"] == account["player"]


def cookie(web: Web) -> dict[str, str]:
    """The headers of a socket signed in with ``web``'s session."""
    return {"Cookie": f"kibitz_session={web.cookie}"}


async def test_only_a_real_bearer_token_skips_the_cross_site_check(node: ServerProcess) -> None:
    web = Web(node.http_url)
    await web.signup()
    for header in ("Bearer nonsense", "Bearer ", "Bearer kbz_short"):
        reply = await web.post("/api/auth/logout", origin=EVIL,
                               headers={"Authorization": header})  # fmt: skip
        assert (reply.status, reply.code) == (403, "auth/csrf"), header
    made = await web.post("/api/tokens", {"scopes": ["read"]})
    token = {"Authorization": f"Bearer {made.body['token']}"}
    # With a token and the cookie, the request acts for the token only: the cookie's
    # session is not ended by a log-out it did not ask for.
    reply = await web.post("/api/auth/logout", origin=EVIL, headers=token)
    assert reply.status == 200
    assert (await web.get("/api/auth/me")).body["account"] is not None


async def test_the_cookie_is_secure_on_an_https_only_site(own_redis: EmbeddedRedis) -> None:
    site = "https://kibitz.example"
    node = start_server(own_redis.url, args=["--public-origin", site])
    try:
        web = Web(node.http_url)
        body = {"username": fresh_name(), "password": PASSWORD}
        reply = await web.post("/api/auth/signup", body, origin=site)
        assert reply.status == 201, reply.body
        assert reply.cookies["kibitz_session"]["secure"]
    finally:
        node.stop()
