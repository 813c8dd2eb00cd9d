"""Game streams and game actions of the Bot and Board APIs (server/botapi/games.py), on
two real nodes, a real Redis and berserk, the lichess client, unmodified.

Rooms are made the way a browser makes them: each account opens a WebSocket with its
token, one creates and the other joins, and the seats' tokens are kept for the API
(shared/bus/seat_keys.py), as every path that seats an account does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
import requests

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.seat_keys import SeatKeys
from tests.conftest import ServerProcess, start_server
from tests.server.botapi.conftest import WAIT_S, ApiAccount, Stream, client_for


@pytest.fixture(scope="module")
async def seat_keys(own_redis: EmbeddedRedis) -> AsyncIterator[SeatKeys]:
    client = aioredis.from_url(own_redis.url, decode_responses=True)
    yield SeatKeys(client)
    await client.aclose()


def auth(account: ApiAccount) -> dict[str, str]:
    return {"Authorization": f"Bearer {account.token}"}


async def web_player(node: ServerProcess, account: ApiAccount) -> KibitzClient:
    """A WebSocket client acting for ``account`` (as a signed-in browser)."""
    return await KibitzClient.open(node.http_url, additional_headers=auth(account))


async def new_game(
    node: ServerProcess,
    keys: SeatKeys,
    white: ApiAccount,
    black: ApiAccount,
    game: str = "tictactoe",
    keep_white: bool = False,
    **create: Any,
) -> tuple[str, KibitzClient | None]:
    """A room of ``game``: ``white`` in seat 0, ``black`` in seat 1, both seats' tokens
    kept for the API. White's WebSocket stays open if ``keep_white`` (returned)."""
    first = await web_player(node, white)
    second = await web_player(node, black)
    created = await first.create(game, seat=0, **create)
    room = created["room"]
    joined = await second.join(room)
    await keys.put(room, {0: created["token"], 1: joined["token"]})
    await second.close()
    if keep_white:
        return room, first
    await first.close()
    return room, None


class Player:
    """An account and the door it comes through (``bot`` or ``board``)."""

    def __init__(self, account: ApiAccount, door: str) -> None:
        self.account = account
        self.door = door

    def stream(self, room: str, node: ServerProcess) -> Stream:
        client = client_for(self.account.token, node)
        api = client.bots if self.door == "bot" else client.board
        return Stream.open(client, lambda: api.stream_game_state(room))

    def act(self, node: ServerProcess, path: str, **kwargs: Any) -> requests.Response:
        url = f"{node.http_url}/api/{self.door}/game/{path}"
        return requests.post(url, headers=auth(self.account), timeout=WAIT_S, **kwargs)


@pytest.fixture(scope="module")
def person(make_account: Callable[..., ApiAccount]) -> Player:
    return Player(make_account(), "board")


@pytest.fixture(scope="module")
def bot(make_account: Callable[..., ApiAccount]) -> Player:
    return Player(make_account(bot=True), "bot")


def room_state(node: ServerProcess, room: str) -> dict[str, Any]:
    reply = requests.get(f"{node.http_url}/api/rooms/{room}", timeout=WAIT_S)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def ok(reply: requests.Response) -> None:
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"ok": True}


# -- tests -------------------------------------------------------------------------------------


async def test_streams_and_moves_by_both_doors(
    api_nodes: list[ServerProcess], seat_keys: SeatKeys, person: Player, bot: Player
) -> None:
    a, b = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account)
    white = person.stream(room, a)
    black = bot.stream(room, b)  # the other node
    full = white.wait_type("gameFull")
    assert full["id"] == room
    assert full["variant"]["key"] == "tictactoe"
    assert full["white"]["id"] == person.account.username.lower()
    assert full["black"] == {
        "id": bot.account.username.lower(),
        "name": bot.account.username,
        "title": "BOT",
        "rating": 1500,
        "provisional": True,
    }
    assert full["initialFen"] == ".........:x"
    assert full["state"]["moves"] == "" and full["state"]["status"] == "started"
    assert black.wait_type("gameFull")["id"] == room

    played: list[str] = []
    for mover, text in ((person, "1"), (bot, "4"), (person, "2"), (bot, "5")):
        ok(mover.act(b if mover is bot else a, f"{room}/move/{text}"))
        played.append(text)
        for stream in (white, black):
            state = stream.wait_type("gameState")
            assert state["moves"] == " ".join(played)
            assert state["status"] == "started"
    ok(person.act(a, f"{room}/move/3"))
    for stream in (white, black):
        last = stream.wait_type("gameState")
        assert last["moves"] == "1 4 2 5 3"
        assert last["status"] == "variantEnd" and last["winner"] == "white"
        assert stream.ended()  # closed by the server once the game is over


async def test_refusals_change_nothing(
    api_nodes: list[ServerProcess],
    seat_keys: SeatKeys,
    person: Player,
    bot: Player,
    make_account: Callable[..., ApiAccount],
) -> None:
    a, _ = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account, game="chess")
    before = room_state(a, room)["version"]
    illegal = person.act(a, f"{room}/move/e2e5")
    assert illegal.status_code == 400 and "illegal" in illegal.json()["error"]
    not_yours = bot.act(a, f"{room}/move/e7e5")
    assert not_yours.status_code == 400
    assert not_yours.json() == {"error": "Not your turn, or game already over"}
    assert room_state(a, room)["version"] == before
    # Not a game of theirs, no such game, the wrong door.
    stranger = Player(bot.account, "board")
    assert stranger.act(a, f"{room}/move/e2e4").status_code == 400  # a bot at the board door
    assert person.act(a, "nosuchgame/move/e2e4").json() == {"error": "Not found"}
    outsider = Player(make_account(), "board")
    assert outsider.act(a, f"{room}/move/e2e4").json() == {"error": "Not found"}
    watching = requests.get(
        f"{a.http_url}/api/board/game/stream/{room}", headers=auth(outsider.account), timeout=WAIT_S
    )
    assert watching.status_code == 404
    reply = requests.get(
        f"{a.http_url}/api/board/game/stream/nosuchgame",
        headers=auth(person.account),
        timeout=WAIT_S,
    )
    assert reply.status_code == 404
    # A move longer than the WebSocket takes; chat whose text is not a string.
    too_long = person.act(a, f"{room}/move/{'e' * 600}")
    assert too_long.status_code == 400 and "at most 512" in too_long.json()["error"]
    numbered = person.act(a, f"{room}/chat", json={"room": "player", "text": 5})
    assert numbered.json() == {"error": "text must be a string"}
    assert room_state(a, room)["version"] == before


async def test_a_seat_key_kept_late_is_waited_for_briefly(
    api_nodes: list[ServerProcess],
    own_redis: EmbeddedRedis,
    seat_keys: SeatKeys,
    person: Player,
    bot: Player,
) -> None:
    a, _ = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account, game="chess")
    token = await seat_keys.get(room, 0)
    assert token is not None
    redis = aioredis.from_url(own_redis.url)
    try:
        await redis.delete(keys.seat_keys_key(room))
        never = person.act(a, f"{room}/move/e2e4")
        assert never.json() == {"error": "This game cannot be played through the API"}
        # Kept a moment after the action came (a board seek's seeker keeps its key just
        # after the game's start is announced): the action waits for it.
        late = asyncio.create_task(asyncio.to_thread(person.act, a, f"{room}/move/e2e4"))
        await asyncio.sleep(0.3)
        await seat_keys.put(room, {0: token})
        ok(await late)
    finally:
        await redis.aclose()
    assert room_state(a, room)["moves"][0]["move"] == "e2e4"


async def test_draw_offered_with_a_move_then_accepted(
    api_nodes: list[ServerProcess], seat_keys: SeatKeys, person: Player, bot: Player
) -> None:
    a, b = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account, game="chess")
    black = bot.stream(room, b)
    full = black.wait_type("gameFull")
    assert full["variant"] == {"key": "standard", "name": "Standard", "short": "Std"}
    assert full["initialFen"] == "startpos"
    ok(person.act(a, f"{room}/move/e2e4", params={"offeringDraw": "true"}))
    offered = black.wait_for(lambda line: line.get("wdraw") is True)
    assert offered["moves"] == "e2e4" and offered["bdraw"] is False
    ok(bot.act(b, f"{room}/draw/yes"))
    drawn = black.wait_for(lambda line: line.get("status") != "started")
    assert drawn["status"] == "draw" and "winner" not in drawn
    assert black.ended()


async def test_takeback_asked_and_accepted(
    api_nodes: list[ServerProcess], seat_keys: SeatKeys, person: Player, bot: Player
) -> None:
    a, b = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account, game="chess")
    white = person.stream(room, a)
    white.wait_type("gameFull")
    ok(person.act(a, f"{room}/move/e2e4"))
    ok(bot.act(b, f"{room}/move/e7e5"))
    white.wait_for(lambda line: line.get("moves") == "e2e4 e7e5")
    ok(person.act(a, f"{room}/takeback/yes"))
    assert white.wait_type("gameState")["wtakeback"] is True
    ok(bot.act(b, f"{room}/takeback/yes"))
    back = white.wait_type("gameState")
    assert back["moves"] == "" and back["wtakeback"] is False
    ok(person.act(a, f"{room}/resign"))
    assert white.wait_type("gameState")["status"] == "resign"
    assert white.ended()


async def test_chat_both_ways_and_the_opponent_gone(
    api_nodes: list[ServerProcess], seat_keys: SeatKeys, person: Player, bot: Player
) -> None:
    a, b = api_nodes
    room, web = await new_game(a, seat_keys, person.account, bot.account, keep_white=True)
    assert web is not None
    black = bot.stream(room, b)
    black.wait_type("gameFull")
    await web.chat(room, "good luck")
    line = black.wait_type("chatLine")
    assert line == {
        "type": "chatLine",
        "room": "player",
        "username": person.account.username,
        "text": "good luck",
    }
    # berserk posts JSON; lichess-bot posts a form: both are read.
    client = client_for(bot.account.token, b)
    client.bots.post_message(room, "thanks")
    ok(bot.act(b, f"{room}/chat", data={"room": "player", "text": "have fun"}))
    said = await web.next_message(
        lambda m: m["type"] == "chat" and m["messages"][-1]["text"] == "thanks"
    )
    assert said["messages"][0]["account"] == bot.account.username
    history = requests.get(
        f"{b.http_url}/api/bot/game/{room}/chat", headers=auth(bot.account), timeout=WAIT_S
    )
    assert history.json() == [
        {"user": person.account.username, "text": "good luck"},
        {"user": bot.account.username, "text": "thanks"},
        {"user": bot.account.username, "text": "have fun"},
    ]
    bad = bot.act(b, f"{room}/chat", data={"room": "player", "text": "two\nlines"})
    assert bad.status_code == 400
    # The web player goes: the bot is told, with the time before it may claim.
    await web.close()
    gone = black.wait_type("opponentGone")
    assert gone["gone"] is True and 0 < gone["claimWinInSeconds"] <= 120
    too_soon = bot.act(b, f"{room}/claim-victory/")
    assert too_soon.status_code == 400
    back = await web_player(a, person.account)
    await back.resume(room, (await seat_keys.get(room, 0)) or "")
    assert black.wait_type("opponentGone")["gone"] is False
    ok(bot.act(b, f"{room}/abort"))
    assert black.wait_type("gameState")["status"] == "aborted"
    assert black.ended()
    await back.close()


async def test_a_resumed_stream_has_every_move(
    api_nodes: list[ServerProcess], seat_keys: SeatKeys, person: Player, bot: Player
) -> None:
    a, b = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account, game="chess")
    black = bot.stream(room, b)
    black.wait_type("gameFull")
    black.close()
    for mover, text in ((person, "e2e4"), (bot, "e7e5"), (person, "g1f3")):
        ok(mover.act(a, f"{room}/move/{text}"))
    again = bot.stream(room, a).wait_type("gameFull")
    assert again["state"]["moves"] == "e2e4 e7e5 g1f3"


async def test_a_draining_node_closes_its_streams(
    api_nodes: list[ServerProcess],
    own_redis: EmbeddedRedis,
    seat_keys: SeatKeys,
    person: Player,
    bot: Player,
) -> None:
    a, b = api_nodes
    room, _ = await new_game(a, seat_keys, person.account, bot.account, game="chess")
    third = start_server(own_redis.url)
    try:
        black = bot.stream(room, third)
        black.wait_type("gameFull")
        ok(person.act(a, f"{room}/move/d2d4"))
        assert black.wait_type("gameState")["moves"] == "d2d4"
        third.stop()  # SIGTERM: the node drains, closing every stream
        assert black.ended()
    finally:
        third.stop()
    ok(bot.act(b, f"{room}/move/d7d5"))
    ok(person.act(a, f"{room}/move/c2c4"))
    resumed = bot.stream(room, b)
    assert resumed.wait_type("gameFull")["state"]["moves"] == "d2d4 d7d5 c2c4"
