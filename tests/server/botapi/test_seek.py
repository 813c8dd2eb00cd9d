"""Board API seeks (server/botapi/seek.py) on two real nodes and a real Redis: a seek
posted over HTTP is an ordinary lobby seek that a web player takes over the WebSocket
(and the seeker's seat key is kept for the API), it is withdrawn when its request
closes, and bad seeks are refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess
from tests.server.botapi.conftest import ApiAccount
from tests.server.botapi.test_challenges import Lines, bearer, call


@pytest.fixture(scope="module")
async def lines(own_redis: EmbeddedRedis, api_nodes: list[ServerProcess]) -> AsyncIterator[Lines]:
    listener = Lines(own_redis.url)
    await listener.start()
    yield listener
    await listener.stop()


async def open_seek(
    node: ServerProcess, account: ApiAccount, **fields: str
) -> tuple[aiohttp.ClientSession, aiohttp.ClientResponse]:
    """A seek posted as berserk posts it (a form); the open response."""
    http = aiohttp.ClientSession()
    form = {"rated": "false", "variant": "standard", "color": "random", "ratingRange": ""}
    resp = await http.post(
        f"{node.http_url}/api/board/seek", data={**form, **fields}, headers=bearer(account)
    )
    assert resp.status == 200, await resp.text()
    assert resp.content_type == "application/x-ndjson"
    return http, resp


async def listed(node: ServerProcess, account: ApiAccount) -> list[dict[str, Any]]:
    """The lobby's open seeks of ``account``."""
    _, body = await call(node, "GET", "/api/seeks", None)
    return [s for s in body["seeks"] if s.get("account") == account.username]


async def until(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    """``await check()`` until it is truthy (its value), for at most ``timeout`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := await check()):
        assert loop.time() < deadline, "not in time"
        await asyncio.sleep(0.05)
    return found


async def test_a_board_seek_is_taken_by_a_web_player(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], lines: Lines
) -> None:
    a, b = api_nodes
    alice, bob = make_account(), make_account()
    http, resp = await open_seek(a, alice, time="3", increment="2", color="white")
    try:
        seek = (await until(lambda: listed(b, alice)))[0]
        assert seek["game"] == "chess" and seek["seat"] == 0
        assert seek["clock"] == {"initial_ms": 180_000, "increment_ms": 2_000}
        # A signed-in web player on the other node takes it.
        async with await KibitzClient.open(b.http_url, additional_headers=bearer(bob)) as web:
            seat = await web.accept_seek(seek["id"])
            room = seat["room"]
            assert seat["seat"] == 1
            # The request ends once its seek is taken.
            rest = await asyncio.wait_for(resp.content.read(), 10)
            assert rest.strip() == b""
    finally:
        resp.close()
        await http.close()
    started = await lines.wait(
        lambda line: line.get("type") == "gameStart" and line["game"]["gameId"] == room
    )
    assert started["game"]["color"] == "white"
    assert await listed(a, alice) == []
    # The seeker's seat key is kept: the API (and this WebSocket) plays with it.
    _, kept = await until(lambda: _seat(a, room, alice))
    assert kept["seat"] == 0
    # So is the web player's, as for every seat a signed-in player takes.
    assert await call(b, "GET", f"/api/rooms/{room}/seat", bob) == (
        200, {"room": room, "seat": 1, "token": seat["token"]},
    )  # fmt: skip
    async with await KibitzClient.open(a.http_url, additional_headers=bearer(alice)) as ws:
        ws.tokens[room] = (0, kept["token"])
        await ws.resume(room, kept["token"])
        await ws.move(room, "e2e4")
        await ws.wait_state(room, lambda s: len(s.get("moves", [])) == 1, timeout=10)


async def _seat(node: ServerProcess, room: str, account: ApiAccount) -> Any:
    found = await call(node, "GET", f"/api/rooms/{room}/seat", account)
    return found if found[0] == 200 else None


async def test_a_seek_is_withdrawn_when_its_request_closes(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, b = api_nodes
    alice = make_account()
    http, resp = await open_seek(a, alice, variant="othello", days="2", ratingRange="1000-2000")
    seek = (await until(lambda: listed(b, alice)))[0]
    assert seek["game"] == "othello" and seek["rating_range"] == [1000, 2000]
    assert seek["clock"] == {"days_per_move": 2}
    resp.close()
    await http.close()

    async def gone() -> bool:
        return not await listed(b, alice)

    await until(gone)


async def test_bad_seeks_are_refused(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    a, _ = api_nodes
    alice = make_account()
    refused = {
        "ratingRange": ("1800-1500", "ratingRange"),
        "color": ("green", "color"),
        "variant": ("atomic", "variant"),
        "time": ("500", "clock.limit"),
        "rated": ("perhaps", "rated"),
    }
    for name, (value, said) in refused.items():
        status, body = await call(a, "POST", "/api/board/seek", alice, form={name: value})
        assert status == 400 and said in body["error"], (name, body)
    bot = make_account(bot=True)
    status, body = await call(a, "POST", "/api/board/seek", bot, form={"time": "3"})
    assert status == 400 and "Bot account" in body["error"]
    assert (await call(a, "POST", "/api/board/seek", None, form={}))[0] == 401
    assert await listed(a, alice) == []
    # Ten a minute, the refused ones included.
    for _ in range(10 - len(refused)):
        assert (await call(a, "POST", "/api/board/seek", alice, form={"color": "x"}))[0] == 400
    status, body = await call(a, "POST", "/api/board/seek", alice, form={"time": "3"})
    assert status == 429 and json.dumps(body) == '{"error": "Too many requests. Try again later."}'
