"""The account and user paths of the lichess-compatible API (server/botapi/account_routes.py)
on two real nodes, driven by ``berserk`` (unmodified) and by raw HTTP for the errors; the
bot upgrade's and the token peek's database rules on SQLite and PostgreSQL; the game JSON
and perfs builders (pure)."""

from __future__ import annotations

import asyncio
import datetime
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import berserk
import pytest
from berserk.exceptions import ResponseError

from kibitz.client.connection import KibitzClient, new_player_key
from kibitz.server.accounts.errors import AccountError
from kibitz.server.accounts.service import AccountService
from kibitz.server.archive.database import Archive
from kibitz.server.botapi.account_routes import READS_PER_MINUTE
from kibitz.server.botapi.users import game_json, perf_key, perfs_json
from kibitz.server.ratings import leaderboard
from kibitz.shared.bus.account_events import AccountEvents
from kibitz.shared.bus.connect import command_client
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess
from tests.server.botapi.conftest import ApiAccount
from tests.server.http.test_players import BLITZ_BOARD, game_record, seed_board

FOOLS_MATE = ["f2f3", "e7e5", "g2g4", "d8h4"]

Client = Callable[[str, ServerProcess], berserk.Client]


async def get(
    url: str, token: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any, Any]:
    """(status, JSON body or text, headers) of a GET, with ``token`` as Bearer if given."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession() as http, http.get(url, headers=sent) as resp:
        text = await resp.text()
        body = await resp.json() if resp.content_type == "application/json" else text
        return resp.status, body, resp.headers


async def post(url: str, token: str | None = None, data: str = "") -> tuple[int, Any]:
    sent = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http, http.post(url, data=data, headers=sent) as resp:
        return resp.status, await resp.json()


def account_id(data_dir: Path, username: str) -> int:
    """The id of an account in the session's SQLite database (which the nodes share)."""
    with sqlite3.connect(data_dir / "games.sqlite3") as db:
        row = db.execute(
            "SELECT id FROM accounts WHERE username_key = ?", (username.lower(),)
        ).fetchone()
    return int(row[0])


async def play_fools_mate(node: ServerProcess, token: str) -> str:
    """The token's account (White, over the WebSocket) loses a chess game to a guest;
    the room's id."""
    bearer = {"Authorization": f"Bearer {token}"}
    async with (
        await KibitzClient.open(node.http_url, additional_headers=bearer) as white,
        await KibitzClient.open(node.http_url) as black,
    ):
        room = (await white.create("chess", seat=0))["room"]
        await black.join(room, seat=1)
        for ply, move in enumerate(FOOLS_MATE):
            player = (white, black)[ply % 2]
            await player.wait_state(room, lambda s, n=ply: len(s["moves"]) == n)
            await player.move(room, move)
        await white.wait_state(room, lambda s: s["status"] == "over")
    return str(room)


# -- the account ------------------------------------------------------------------------------


async def test_account_and_upgrade_to_bot(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], berserk_client: Client
) -> None:
    name, token = make_account()
    client = berserk_client(token, api_nodes[1])
    me = client.account.get()
    assert (me["id"], me["username"]) == (name.lower(), name)
    assert "title" not in me and me["perfs"] == {}
    assert isinstance(me["createdAt"], datetime.datetime)  # berserk read ms
    assert me["url"].endswith(f"/?player={name}")
    client.account.upgrade_to_bot()
    assert client.account.get()["title"] == "BOT"
    with pytest.raises(ResponseError) as again:
        client.account.upgrade_to_bot()
    assert again.value.status_code == 400
    assert again.value.cause == {"error": "This account is already a bot account."}
    public = berserk_client(token, api_nodes[0]).users.get_public_data(name.upper())
    assert (public["id"], public["title"]) == (name.lower(), "BOT")


async def test_an_account_that_played_cannot_become_a_bot(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], berserk_client: Client
) -> None:
    name, token = make_account()
    room = await play_fools_mate(api_nodes[0], token)
    status, body = await post(f"{api_nodes[1].http_url}/api/bot/account/upgrade", token)
    assert status == 400 and "played games" in body["error"]
    client = berserk_client(token, api_nodes[1])
    assert "title" not in client.account.get()
    # The finished game, exported: lichess's JSON (berserk asks for it), then the PGN.
    game = client.games.export(room)
    assert isinstance(game, dict)
    assert (game["id"], game["variant"], game["status"], game["winner"]) == (
        room, "standard", "mate", "black"
    )  # fmt: skip
    assert game["moves"] == "f3 e5 g4 Qh4#" and game["rated"] is False
    assert game["players"]["white"]["user"] == {"id": name.lower(), "name": name}
    assert game["players"]["black"] == {}  # a guest who gave no name
    assert isinstance(game["createdAt"], datetime.datetime)
    assert isinstance(game["lastMoveAt"], datetime.datetime)
    pgn = client.games.export(room, as_pgn=True)
    assert isinstance(pgn, str) and "1. f3 e5 2. g4 Qh4#" in pgn and '[Result "0-1"]' in pgn
    status, _, headers = await get(f"{api_nodes[0].http_url}/game/export/{room}")
    assert status == 200 and headers["Content-Type"].startswith("application/x-chess-pgn")
    status, body, _ = await get(f"{api_nodes[0].http_url}/game/export/nosuchgame")
    assert (status, body) == (404, {"error": "Not found"})


async def test_playing_lists_the_unfinished_games(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], berserk_client: Client
) -> None:
    name, token = make_account()
    client = berserk_client(token, api_nodes[0])
    assert client.games.get_ongoing() == []
    bearer = {"Authorization": f"Bearer {token}"}
    async with await KibitzClient.open(api_nodes[1].http_url, additional_headers=bearer) as c:
        room = (await c.create("othello", seat=1, opponent="ai:1"))["room"]
        await c.wait_state(room, lambda s: s["status"] == "playing")
        ongoing = client.games.get_ongoing()
    assert [g["gameId"] for g in ongoing] == [room]
    assert (ongoing[0]["color"], ongoing[0]["variant"]["key"]) == ("black", "othello")
    assert "aiLevel" in ongoing[0]["opponent"]
    statuses = client.users.get_realtime_statuses(name, with_game_ids=True)
    assert statuses[0]["playing"] is True and statuses[0]["playingId"] == room
    assert client.account.get()["playing"].endswith(f"/?room={room}")


# -- tokens, users, bots ------------------------------------------------------------------------


async def test_token_test_tells_scopes_and_unknown_tokens(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount], berserk_client: Client
) -> None:
    name, token = make_account()
    bad = "kbz_" + "A" * 32
    answer = berserk_client(token, api_nodes[0]).oauth.test_tokens(token, bad, "nonsense")
    assert answer == {
        token: {
            "scopes": "bot:play,board:play,challenge:read,challenge:write",
            "userId": name.lower(),
            "expires": None,
        },
        bad: None,
        "nonsense": None,
    }
    status, body, _ = await get(f"{api_nodes[1].http_url}/api/token/test", token)
    assert status == 200 and body[token]["userId"] == name.lower()
    status, body = await post(
        f"{api_nodes[1].http_url}/api/token/test", data=",".join(["x"] * 1001)
    )
    assert (status, body) == (400, {"error": "At most 1000 tokens"})


async def test_statuses_public_users_and_online_bots(
    api_nodes: list[ServerProcess],
    make_account: Callable[..., ApiAccount],
    berserk_client: Client,
    own_redis: EmbeddedRedis,
    data_dir: Path,
) -> None:
    person, token = make_account()
    bot, bot_token = make_account(bot=True)
    client = berserk_client(token, api_nodes[0])
    redis = command_client(own_redis.url)
    try:
        online = [account_id(data_dir, bot), account_id(data_dir, person)]
        await AccountEvents(redis).beat(online, int(time.time() * 1000))
    finally:
        await redis.aclose()
    statuses = client.users.get_realtime_statuses(person, bot, "nobody_here", "x")
    assert statuses == [
        {"id": person.lower(), "name": person, "online": True},
        {"id": bot.lower(), "name": bot, "title": "BOT", "online": True},
    ]
    bots = list(berserk_client(bot_token, api_nodes[1]).bots.get_online_bots())
    assert [b["username"] for b in bots] == [bot]  # the person online is no bot
    assert bots[0]["title"] == "BOT" and isinstance(bots[0]["createdAt"], datetime.datetime)
    user = client.users.get_public_data(person)
    assert (user["username"], user["perfs"], "title" in user) == (person, {}, False)
    base = api_nodes[1].http_url
    status, body, _ = await get(f"{base}/api/user/nobody_here")
    assert (status, body) == (404, {"error": "Not found"})
    status, body, _ = await get(f"{base}/api/users/status?ids=" + ",".join(["a"] * 101))
    assert status == 400 and "100" in body["error"]
    status, body, _ = await get(f"{base}/api/bot/online?nb=0")
    assert status == 400
    status, body, _ = await get(f"{base}/api/leaderboard/chess/blitz?bots=1")
    assert (status, body["bots"], body["players"]) == (200, True, [])
    status, body, _ = await get(f"{base}/api/leaderboard/chess/blitz?bots=maybe")
    assert (status, body["code"]) == (400, "query/invalid")


# -- errors and limits -------------------------------------------------------------------------


async def test_bad_tokens_scopes_and_the_rate_limit(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    base = api_nodes[0].http_url
    status, body, _ = await get(f"{base}/api/account", "kbz_" + "B" * 32)
    assert (status, body) == (401, {"error": "No such token"})
    status, body, _ = await get(f"{base}/api/account")
    assert (status, body) == (401, {"error": "No such token"})
    status, body, _ = await get(f"{base}/api/user/whoever", "kbz_" + "B" * 32)
    assert status == 401  # a token given must be live, even where none is needed
    # A read token reads the account but does not upgrade it.
    name, token = make_account()
    read_token = await read_scoped_token(base, name)
    status, body, _ = await get(f"{base}/api/account", read_token)
    assert status == 200 and body["id"] == name.lower()
    status, body = await post(f"{base}/api/bot/account/upgrade", read_token)
    assert (status, body) == (403, {"error": "Missing scope"})
    # READS_PER_MINUTE reads with the account's tokens, then 429 with a wait; nothing
    # counts against anonymous readers.
    sent = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http:

        async def read() -> int:
            async with http.get(f"{base}/api/user/{name}", headers=sent) as resp:
                return resp.status

        statuses = await asyncio.gather(*(read() for _ in range(READS_PER_MINUTE - 1)))
        assert set(statuses) == {200}  # one read was the account's above
        async with http.get(f"{base}/api/user/{name}", headers=sent) as resp:
            assert resp.status == 429 and int(resp.headers["Retry-After"]) >= 1
            assert await resp.json() == {"error": "Too many requests. Try again later."}
    assert (await get(f"{base}/api/user/{name}"))[0] == 200


async def read_scoped_token(base: str, username: str) -> str:
    """A ``read`` token of ``username`` (logged in again: the password is the fixture's)."""
    from tests.server.botapi.conftest import PASSWORD

    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        login = {"username": username, "password": PASSWORD}
        origin = {"Origin": base}
        async with http.post(f"{base}/api/auth/login", json=login, headers=origin) as resp:
            assert resp.status == 200
            cookie = resp.cookies["kibitz_session"].value
        sent = {**origin, "Cookie": f"kibitz_session={cookie}"}
        async with http.post(f"{base}/api/tokens", json={"scopes": ["read"]}, headers=sent) as resp:
            assert resp.status == 201
            return str((await resp.json())["token"])


# -- the database rules ---------------------------------------------------------------------------


async def test_make_bot_and_peek_tokens_in_the_database(archive: Archive) -> None:
    service = AccountService(archive.engine)
    fresh = await service.create("Fresh", None)
    await service.make_bot(fresh.id)
    made = await service.get(fresh.id)
    assert made is not None and made.bot
    with pytest.raises(AccountError) as already:
        await service.make_bot(fresh.id)
    assert already.value.code == "bot/already"
    # A game played as a guest, under a key claimed since, is the account's game.
    played = await service.create("Played", None)
    key = new_player_key()
    await service.claim(played.id, key)
    await archive.save(game_record("g1", 1_000, [{"player": "f" * 32}, {"player": player_id(key)}],
                                   0, rated=False))  # fmt: skip
    with pytest.raises(AccountError) as refused:
        await service.make_bot(played.id)
    assert refused.value.code == "bot/played"
    kept = await service.get(played.id)
    assert kept is not None and not kept.bot
    secret, _ = await service.tokens.create(played, "", ("play", "read"))
    peeked = await service.peek_tokens([secret, "kbz_" + "C" * 32, "not a token"])
    assert list(peeked) == [secret]
    assert peeked[secret][0].id == played.id and peeked[secret][1] == {"play", "read"}
    assert (await service.tokens.listing(played.id))[0]["used_ms"] is None  # only peeked


async def test_bots_have_their_own_leaderboards(archive: Archive) -> None:
    await seed_board(archive.engine)
    now = int(time.time() * 1000)
    people = await leaderboard.leaderboard(archive.engine, "chess", "blitz", now, 30, 50, False)
    assert [leader.username for leader in people] == [n for n in BLITZ_BOARD if n != "botty"]
    assert [leader.rank for leader in people] == [1, 2, 3, 4, 5]
    bots = await leaderboard.leaderboard(archive.engine, "chess", "blitz", now, 30, 50, True)
    assert [(leader.username, leader.rank, leader.bot) for leader in bots] == [("botty", 1, True)]


# -- the builders ---------------------------------------------------------------------------------


def test_perf_keys_and_perfs() -> None:
    ratings = {
        "chess": {"blitz": {"rating": 1600, "rd": 80, "provisional": False, "games": 12}},
        "othello": {"timed": {"rating": 1450, "rd": 200, "provisional": True, "games": 2}},
    }
    assert perfs_json(ratings) == {
        "blitz": {"games": 12, "rating": 1600, "rd": 80, "prog": 0, "prov": False},
        "othello_timed": {"games": 2, "rating": 1450, "rd": 200, "prog": 0, "prov": True},
    }
    assert perf_key("draughts", "bullet") == "draughts_bullet"


def test_game_json_of_a_rated_record_against_the_ai() -> None:
    record = game_record("g2", 5_000, [{"player": "a" * 32}, {"player": None}], 1)
    record["players"][0].update(account="Ann", rating=1512, provisional=True, bot=False)
    record["players"][1].update(kind="ai", level=4, account=None)
    record["ratings"] = [{"before": 1512, "after": 1500, "change": -12, "rd": 90}, None]
    record["time_control"] = {"initial_ms": 180_000, "increment_ms": 2_000}
    body = game_json(record)
    assert body["players"] == {
        "white": {"user": {"id": "ann", "name": "Ann"}, "rating": 1512, "provisional": True,
                  "ratingDiff": -12},
        "black": {"aiLevel": 4},
    }  # fmt: skip
    assert (body["speed"], body["perf"], body["winner"]) == ("blitz", "blitz", "black")
    assert body["clock"] == {"initial": 180, "increment": 2, "totalTime": 260}
    assert isinstance(body["createdAt"], int) and isinstance(body["lastMoveAt"], int)


def test_game_json_of_a_draw_between_guests() -> None:
    body = game_json(game_record("g3", 5_000, [{"player": "b" * 32}, {"player": "c" * 32}], None))
    assert body["players"]["black"] == {"user": {"name": "guest"}}
    assert "winner" not in body and body["moves"] == "e4" and body["rated"] is True


async def test_lichess_game_pages_lead_to_the_room(api_nodes: list[ServerProcess]) -> None:
    """Bridges print lichess's game links (``/{id}``, ``/{id}/white``): they open the room;
    a client file is still a file."""
    base = api_nodes[0].http_url
    async with aiohttp.ClientSession() as session:
        for path in ("/abcd2345xy", "/abcd2345xy/white", "/abcd2345xy/black"):
            async with session.get(base + path, allow_redirects=False) as resp:
                assert resp.status == 302, path
                assert resp.headers["Location"].endswith("/?room=abcd2345xy")
        async with session.get(base + "/abcd2345xy/green", allow_redirects=False) as resp:
            assert resp.status == 404
        async with session.get(base + "/index.html", allow_redirects=False) as resp:
            assert resp.status == 200
