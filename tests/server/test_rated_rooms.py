"""Rated rooms and signed-in seats.

The pure rules first (server/domain/room.py, records.py, the ``create`` parser); then end
to end on a real server process with its own Redis and SQLite archive, real sockets and
accounts signed up over HTTP (the session cookie opens the WebSocket as that account).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.server.domain import clocks, records
from kibitz.server.domain import room as rooms
from kibitz.server.domain.anchors import level_rating
from kibitz.server.domain.room import Room, RoomError, SeatAccount
from kibitz.server.domain.speeds import SPEEDS, speed_of
from kibitz.server.services.rooms import ai_rating_of
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.games.registry import GAME_MODULES
from kibitz.shared.protocol.client_in import Create, parse_client_message, player_id
from kibitz.shared.protocol.client_out import SeatRating, SeatView, State
from kibitz.shared.protocol.codec import ProtocolError
from tests.conftest import ServerProcess, new_postgres_database, start_server
from tests.server.accounts.web import signup

ANN = SeatAccount(1, "Ann", "a" * 32, rating=1620, provisional=False)
BOB = SeatAccount(2, "bob", "b" * 32, rating=1500, provisional=True)
#: The keys a guest's seat has always had, in their order (the golden fixtures pin them).
GUEST_SEAT_KEYS = [
    "seat", "kind", "level", "name", "player", "taken", "engine", "connected", "gone_ms"
]  # fmt: skip
RATED_SEAT_KEYS = [
    "seat", "kind", "level", "name", "player", "taken", "engine",
    "account", "rating", "provisional", "bot", "connected", "gone_ms",
]  # fmt: skip


def rated_room(opponent: str = "human", ai_rating: int | None = None) -> Room:
    room, _, _ = rooms.create_room(
        "room1", "tictactoe", {}, opponent, 0, None, "tok-a", now_ms=1,
        rated=True, holder=ANN, ai_rating=ai_rating,
    )  # fmt: skip
    return room


# -- the pure rules ------------------------------------------------------------------------


def test_a_rated_room_needs_its_creator_signed_in() -> None:
    with pytest.raises(RoomError) as refused:
        rooms.create_room("r1", "tictactoe", {}, "human", 0, "ann", "tok", now_ms=1, rated=True)
    assert refused.value.code == "auth/required"


def test_a_rated_room_starts_from_the_initial_position() -> None:
    with pytest.raises(RoomError) as refused:
        rooms.create_room(
            "r1", "tictactoe", {}, "human", 0, None, "tok", now_ms=1,
            position="x........:o", rated=True, holder=ANN,
        )  # fmt: skip
    assert refused.value.code == "room/rated"


def test_a_rated_room_is_played_with_the_default_options() -> None:
    """Options make another game (one match to take: a sure win against the AI): a
    rated room takes only its game's defaults, given or not; a casual one any."""
    anchor = level_rating("matches", 8)
    for options in ({"count": 2}, {"variant": "double"}, {"count": 20, "variant": "double"}):
        with pytest.raises(RoomError) as refused:
            rooms.create_room(
                "r1", "matches", options, "ai:8", 0, None, "tok", now_ms=1,
                rated=True, holder=ANN, ai_rating=anchor,
            )  # fmt: skip
        assert refused.value.code == "room/rated"
        casual, _, _ = rooms.create_room("r1", "matches", options, "ai:8", 0, None, "t", 1)
        assert not casual.rated
    for options in ({}, {"count": 20}, {"count": 20, "variant": "standard"}):
        room, _, _ = rooms.create_room(
            "r1", "matches", options, "ai:8", 0, None, "tok", now_ms=1,
            rated=True, holder=ANN, ai_rating=anchor,
        )  # fmt: skip
        assert room.rated and room.options == {"count": 20, "variant": "standard"}


def test_a_signed_in_seat_plays_under_its_account() -> None:
    room = rated_room()
    seat = room.seats[0]
    assert room.rated and room.status == "waiting"
    assert (seat.account, seat.account_id, seat.player, seat.name) == ("Ann", 1, "a" * 32, "Ann")
    assert (seat.rating, seat.provisional, seat.bot) == (1620, False, False)
    snap = rooms.snapshot(room, rooms.replay(room))
    assert snap["rated"] is True
    assert list(snap["seats"][0]) == RATED_SEAT_KEYS
    assert snap["seats"][0]["account"] == "Ann" and snap["seats"][0]["rating"] == 1620
    assert "account_id" not in json.dumps(snap)  # the account's id is never shown
    assert list(snap["seats"][1]) == GUEST_SEAT_KEYS  # a free seat shows no account
    # "rated" comes last before event/you, so the broadcast's splice keeps the order.
    assert list(snap)[-1] == "rated"


def test_a_guest_may_not_join_a_rated_room() -> None:
    room = rated_room()
    with pytest.raises(RoomError) as refused:
        rooms.join_room(room, None, "guest", "tok-b", now_ms=2, player="c" * 32)
    assert refused.value.code == "room/rated"
    assert room.version == 0 and not room.seats[1].taken


def test_one_account_may_not_take_both_seats_of_a_rated_room() -> None:
    room = rated_room()
    again = SeatAccount(1, "Ann", "a" * 32, rating=1620)
    with pytest.raises(RoomError) as refused:
        rooms.join_room(room, None, None, "tok-b", now_ms=2, holder=again)
    assert refused.value.code == "room/rated"
    joined, _, seat = rooms.join_room(room, None, None, "tok-b", now_ms=2, holder=BOB)
    assert seat == 1 and joined.status == "playing"
    assert [s.account for s in joined.seats] == ["Ann", "bob"]


def test_a_casual_room_lets_one_account_play_both_seats_and_shows_accounts() -> None:
    room, _, _ = rooms.create_room(
        "r1", "tictactoe", {}, "human", 0, "me", "tok", now_ms=1, holder=ANN
    )
    joined, _, _ = rooms.join_room(room, None, None, "tok-b", now_ms=2, holder=ANN)
    assert not joined.rated and [s.account for s in joined.seats] == ["Ann", "Ann"]
    assert joined.seats[0].name == "me"  # a name given is kept; else the username
    snap = rooms.snapshot(joined, rooms.replay(joined))
    assert "rated" not in snap
    assert [s["rating"] for s in snap["seats"]] == [1620, 1620]


def test_a_rated_room_against_the_ai_rates_it_at_its_anchor() -> None:
    anchor = level_rating("tictactoe", 3)
    room = rated_room("ai:3", ai_rating=anchor)
    ai = room.seats[1]
    assert room.status == "playing"
    assert (ai.kind, ai.account, ai.rating, ai.provisional, ai.bot) == (
        "ai", None, anchor, False, True
    )  # fmt: skip
    snap = rooms.snapshot(room, rooms.replay(room))
    assert snap["seats"][1]["rating"] == anchor and snap["seats"][1]["bot"] is True
    with pytest.raises(RoomError) as refused:
        rated_room("ai:3", ai_rating=None)  # a level without an anchor
    assert refused.value.code == "room/rated"


def test_a_casual_ai_seat_and_a_guest_show_what_they_always_did() -> None:
    room, _, _ = rooms.create_room("r1", "tictactoe", {}, "ai:3", 0, "ann", "tok", now_ms=1)
    snap = rooms.snapshot(room, rooms.replay(room))
    assert "rated" not in snap
    assert [list(s) for s in snap["seats"]] == [GUEST_SEAT_KEYS, GUEST_SEAT_KEYS]
    assert list(rooms.summary(room)["seats"][1]) == ["kind", "level", "name", "player", "taken"]
    assert "rated" not in rooms.summary(room)


def test_seats_round_trip_and_old_records_load_without_accounts() -> None:
    room, _, _ = rooms.join_room(rated_room(), None, None, "tok-b", now_ms=2, holder=BOB)
    stored = json.loads(json.dumps(room.to_json_dict()))
    again = Room.from_json_dict(stored)
    assert again == room
    for seat in stored["seats"]:
        for name in ("account", "account_id", "rating", "provisional", "bot"):
            del seat[name]
    del stored["rated"]
    old = Room.from_json_dict(stored)
    assert not old.rated
    assert [(s.account, s.account_id, s.rating, s.provisional, s.bot) for s in old.seats] == [
        (None, None, None, False, False)
    ] * 2


def test_a_rematch_of_a_rated_game_is_rated_with_the_same_accounts_swapped() -> None:
    room, _, _ = rooms.join_room(rated_room(), None, None, "tok-b", now_ms=2, holder=BOB)
    over, _ = rooms.resign(room, 1, now_ms=3)
    agreed, _, _ = rooms.answer_offer(over, 0, "rematch", "offer", 4)
    agreed, _, _ = rooms.answer_offer(agreed, 1, "rematch", "accept", 5)
    fresh, _ = rooms.rematch_room(agreed, 6)
    assert fresh.rated and [s.account for s in fresh.seats] == ["bob", "Ann"]
    assert [s.account_id for s in fresh.seats] == [2, 1]


def played(room: Room, moves: list[tuple[int, str]]) -> Room:
    for now, (seat, move) in enumerate(moves, start=10):
        room, _, _ = rooms.play_move(room, seat, move, None, now_ms=now)
    return room


def test_an_abandoned_rated_game_is_lost_by_the_side_to_move() -> None:
    """Leaving a lost rated game is no way to a draw: the side to move (the one that
    stopped) loses it; a casual game abandoned stays a game with no winner."""
    room, _, _ = rooms.join_room(rated_room(), None, None, "tok-b", now_ms=2, holder=BOB)
    room = played(room, [(0, "5"), (1, "1"), (0, "9")])  # O (bob, seat 1) to move
    over, event = rooms.abandon(room, now_ms=99)
    assert over.status == "over" and event.kind == "over"
    assert over.result == {"winner": 0, "reason": "O abandoned the game", "termination": "abandon"}
    assert not rooms.is_aborted(over)
    assert records.record_of(over, [])["result"]["winner"] == 0
    casual, _, _ = rooms.create_room("r2", "tictactoe", {}, "human", 0, "a", "tok-a", now_ms=1)
    casual, _, _ = rooms.join_room(casual, None, "b", "tok-b", now_ms=2)
    casual = played(casual, [(0, "5"), (1, "1"), (0, "9")])
    assert rooms.abandon(casual, now_ms=99)[0].result == {
        "winner": None, "reason": "abandoned", "termination": "abandon"
    }  # fmt: skip


def test_an_abandoned_rated_game_against_the_ai_is_lost_by_the_human() -> None:
    room = played(rated_room("ai:8", ai_rating=level_rating("tictactoe", 8)), [(0, "5")])
    room, _, _ = rooms.play_move(room, 1, "1", None, now_ms=20)  # the AI answers
    over, _ = rooms.abandon(room, now_ms=99)
    assert over.result is not None and over.result["winner"] == 1
    assert over.result["termination"] == "abandon"


def test_a_rated_game_nobody_moved_in_is_aborted_not_lost() -> None:
    room, _, _ = rooms.join_room(rated_room(), None, None, "tok-b", now_ms=2, holder=BOB)
    over, event = rooms.abandon(room, now_ms=99)
    assert event.kind == "abort" and rooms.is_aborted(over)
    assert over.result is not None and over.result["winner"] is None


def test_the_record_and_the_live_list_carry_rated_and_the_accounts() -> None:
    room, _, _ = rooms.join_room(rated_room(), None, None, "tok-b", now_ms=2, holder=BOB)
    record = records.record_of(room, [])
    assert record["rated"] is True
    assert [(p["account"], p["rating"], p["provisional"], p["bot"]) for p in record["players"]] == [
        ("Ann", 1620, False, False),
        ("bob", 1500, True, False),
    ]
    assert [p["player"] for p in record["players"]] == ["a" * 32, "b" * 32]
    entry = rooms.summary(room)
    assert entry["rated"] is True and [s["account"] for s in entry["seats"]] == ["Ann", "bob"]
    guest, _, _ = rooms.create_room("r2", "tictactoe", {}, "human", 0, "g", "tok", now_ms=1)
    guest_record = records.record_of(guest, [])
    assert "rated" not in guest_record
    assert list(guest_record["players"][0]) == [
        "seat", "name", "kind", "level", "player", "engine"
    ]  # fmt: skip


def test_the_seat_and_state_classes_write_the_new_fields_in_their_place() -> None:
    scale = SeatRating("Ann", 1620, False, False)
    seat = SeatView(0, "human", None, "Ann", "a" * 32, True, None, True, None, scale)
    assert list(seat.to_dict()) == RATED_SEAT_KEYS
    plain = {k: v for k, v in seat.to_dict().items() if k not in scale.to_dict()}
    assert SeatView.message(**plain, scale=scale) == seat.to_dict()
    room, _, _ = rooms.join_room(rated_room(), None, None, "tok-b", now_ms=2, holder=BOB)
    snap = rooms.snapshot(room, rooms.replay(room))
    fields = {k: v for k, v in snap.items() if k != "type"}
    built = State(**{**fields, "seats": [seat, seat], "event": {"kind": "resync"}}).to_dict()
    assert list(built)[-2:] == ["rated", "event"] and built["rated"] is True


@pytest.mark.parametrize("game", sorted(GAME_MODULES))
def test_every_game_and_clock_can_be_rated_against_people_and_every_level(game: str) -> None:
    """Rated rooms for every game and any clock (untimed counts as correspondence), and
    a fixed rating for each AI level of each game."""
    for clock in (None, {"initial_ms": 60_000, "increment_ms": 0}, {"days_per_move": 2}):
        room, _, _ = rooms.create_room(
            "r1", game, {}, "human", 0, None, "tok", 1, clock=clock, rated=True, holder=ANN
        )
        assert room.rated and speed_of(game, clocks.control_of(room.clock)) in SPEEDS[game]
    for level in range(1, 9):
        anchor = ai_rating_of(game, f"ai:{level}")
        assert isinstance(anchor, int)
        room, _, _ = rooms.create_room(
            "r1", game, {}, f"ai:{level}", 0, None, "tok", 1, rated=True, holder=ANN,
            ai_rating=anchor,
        )  # fmt: skip
        assert room.seats[1].rating == anchor and room.status == "playing"
    assert ai_rating_of(game, "human") is None


@pytest.mark.parametrize("value", ["yes", 1, 0, "true", [], {}])
def test_create_refuses_a_rated_that_is_not_true_or_false(value: object) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse_client_message({"type": "create", "game": "tictactoe", "rated": value})
    assert refused.value.code == "message/invalid" and "rated" in refused.value.message


def test_create_reads_rated_and_defaults_to_casual() -> None:
    parsed = parse_client_message({"type": "create", "game": "chess", "rated": True})
    assert isinstance(parsed, Create) and parsed.rated is True
    for absent in ({}, {"rated": None}, {"rated": False}):
        parsed = parse_client_message({"type": "create", "game": "chess", **absent})
        assert isinstance(parsed, Create) and parsed.rated is False


# -- end to end: a real server, accounts signed up over HTTP --------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def rated_server(
    request: pytest.FixtureRequest,
    own_redis: EmbeddedRedis,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    """A node on a Redis of this module's own, its accounts, ratings and archive in a
    database of its own: a SQLite file, then a PostgreSQL database."""
    if request.param == "postgresql":
        url = new_postgres_database(request.getfixturevalue("postgres"))
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('rated') / 'games.sqlite3'}"
    server = start_server(own_redis.url, workers=1, database_url=url)
    yield server
    server.stop()


@contextlib.asynccontextmanager
async def signed_in(base: str, cookie: str | None) -> AsyncIterator[KibitzClient]:
    """A client whose socket acts for the session ``cookie`` (None: a guest)."""
    headers = {"Cookie": f"kibitz_session={cookie}"} if cookie else {}
    client = await KibitzClient.open(base, additional_headers=headers)
    try:
        yield client
    finally:
        await client.close()


async def create(client: KibitzClient, **fields: Any) -> dict[str, Any]:
    reply = await client.request({"type": "create", **fields})
    client.tokens[reply["room"]] = (reply["seat"], reply["token"])
    client.following.add(reply["room"])
    return reply


def unique(stem: str) -> str:
    return f"{stem}{int(time.time() * 1000) % 10_000_000}"


async def get_json(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.json()


async def archived_record(base: str, game_id: str) -> dict[str, Any]:
    """The rated game's record once it is archived with its rating changes (bounded: 20 s)."""
    body: dict[str, Any] = {}
    for _ in range(200):
        status, body = await get_json(f"{base}/api/games/{game_id}")
        if status == 200 and body.get("ratings"):
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"game {game_id} was not archived: {body}")


async def test_a_rated_game_between_two_accounts_end_to_end(rated_server: ServerProcess) -> None:
    base = rated_server.http_url
    ann_name, bob_name = unique("ann"), unique("bob")
    ann_cookie, bob_cookie = await signup(base, ann_name), await signup(base, bob_name)
    async with signed_in(base, ann_cookie) as ann, signed_in(base, bob_cookie) as bob:
        key = "a-guest-key-that-is-ignored-00001"
        seat = await ann.create("tictactoe", seat=0, rated=True, player_key=key)
        room = seat["room"]
        await bob.join(room)
        state = await ann.wait_state(room, lambda s: s["status"] == "playing")
        assert state["rated"] is True
        seats = state["seats"]
        assert [s["account"] for s in seats] == [ann_name, bob_name]
        assert [(s["rating"], s["provisional"], s["bot"]) for s in seats] == [
            (1500, True, False)
        ] * 2
        assert seats[0]["player"] != player_id(key)  # the account's id, not the key's
        assert [s["name"] for s in seats] == [ann_name, bob_name]
        status, listed = await get_json(f"{base}/api/rooms")
        entry = next(r for r in listed["rooms"] if r["room"] == room)
        assert entry["rated"] is True and [s["rating"] for s in entry["seats"]] == [1500, 1500]
        for version, (mover, move) in enumerate(
            [(ann, "1"), (bob, "4"), (ann, "2"), (bob, "5"), (ann, "3")], start=1
        ):
            await mover.move(room, move, version)
            await mover.wait_state(room, lambda s, v=version: s["version"] >= v + 1)
        record = await archived_record(base, room)
        assert record["rated"] is True and record["result"]["winner"] == 0
        players = record["players"]
        assert [(p["account"], p["rating"], p["provisional"]) for p in players] == [
            (ann_name, 1500, True),
            (bob_name, 1500, True),
        ]
        assert players[0]["player"] == seats[0]["player"]
        after = [change["after"] for change in record["ratings"]]
        assert after[0] > 1500 > after[1]  # ann won
        # The rematch: rated, the same accounts swapped, their ratings read again.
        await ann.wait_state(room, lambda s: s["status"] == "over")
        await ann.rematch(room)
        await bob.wait_state(room, lambda s: s["offers"]["rematch"] == 0)
        await bob.rematch(room, "accept")
        await ann.wait_state(room, lambda s: s["next_room"] is not None)
        again = await ann.follow_rematch(room)
        assert again["rated"] is True and again["previous_room"] == room
        assert [s["account"] for s in again["seats"]] == [bob_name, ann_name]
        assert [s["rating"] for s in again["seats"]] == [after[1], after[0]]


async def test_a_guest_is_refused_a_rated_seat_and_nothing_changes(
    rated_server: ServerProcess,
) -> None:
    base = rated_server.http_url
    cookie = await signup(base, unique("cy"))
    async with signed_in(base, cookie) as cy, signed_in(base, None) as guest:
        seat = await create(cy, game="tictactoe", rated=True)
        room = seat["room"]
        with pytest.raises(ServerError) as refused:
            await guest.join(room)
        assert refused.value.code == "room/rated"
        with pytest.raises(ServerError) as refused:
            await create(guest, game="tictactoe", rated=True)
        assert refused.value.code == "auth/required"
        status, snap = await get_json(f"{base}/api/rooms/{room}")
        assert status == 200 and snap["status"] == "waiting" and snap["version"] == 0
        assert not snap["seats"][1 - seat["seat"]]["taken"]


async def test_one_account_is_refused_both_seats_of_a_rated_room(
    rated_server: ServerProcess,
) -> None:
    base = rated_server.http_url
    cookie = await signup(base, unique("dee"))
    async with signed_in(base, cookie) as first, signed_in(base, cookie) as second:
        seat = await create(first, game="tictactoe", rated=True)
        room = seat["room"]
        with pytest.raises(ServerError) as refused:
            await second.join(room)
        assert refused.value.code == "room/rated"
        status, snap = await get_json(f"{base}/api/rooms/{room}")
        assert status == 200 and snap["version"] == 0
        assert not snap["seats"][1 - seat["seat"]]["taken"]


async def test_a_rated_game_against_an_ai_level_shows_its_anchor(
    rated_server: ServerProcess,
) -> None:
    base = rated_server.http_url
    name = unique("eve")
    async with signed_in(base, await signup(base, name)) as eve:
        room = (await create(eve, game="othello", opponent="ai:2", seat=0, rated=True))["room"]
        state = await eve.wait_state(room, lambda s: s["status"] == "playing")
        assert state["rated"] is True
        human, ai = state["seats"]
        assert (human["account"], human["rating"], human["bot"]) == (name, 1500, False)
        assert (ai["kind"], ai["account"], ai["bot"]) == ("ai", None, True)
        assert ai["rating"] == level_rating("othello", 2) and ai["provisional"] is False


async def test_casual_by_default_and_a_guest_sees_what_it_always_did(
    rated_server: ServerProcess,
) -> None:
    base = rated_server.http_url
    async with signed_in(base, None) as guest:
        room = (await create(guest, game="tictactoe", name="gus"))["room"]
        state = await guest.wait_state(room, lambda s: True)
        assert "rated" not in state
        assert [list(s) for s in state["seats"]] == [GUEST_SEAT_KEYS, GUEST_SEAT_KEYS]
        # A guest cannot dress up as an account: such fields of its own are not read.
        forged = {"account": "admin", "rating": 3000, "bot": True, "account_id": 1}
        room = (await create(guest, game="tictactoe", **forged))["room"]
        state = await guest.wait_state(room, lambda s: True)
        assert [list(s) for s in state["seats"]] == [GUEST_SEAT_KEYS, GUEST_SEAT_KEYS]
    name = unique("fay")
    async with signed_in(base, await signup(base, name)) as fay:
        room = (await create(fay, game="tictactoe"))["room"]
        state = await fay.wait_state(room, lambda s: True)
        assert "rated" not in state  # casual, though signed in
        assert state["seats"][state["you"]]["account"] == name


async def test_a_bad_rated_value_is_refused_and_nothing_is_made(
    rated_server: ServerProcess,
) -> None:
    base = rated_server.http_url
    async with signed_in(base, await signup(base, unique("gil"))) as gil:
        before = (await get_json(f"{base}/api/rooms"))[1]["rooms"]
        for value in ("yes", 1, {"x": 1}):
            with pytest.raises(ServerError) as refused:
                await gil.request({"type": "create", "game": "tictactoe", "rated": value})
            assert refused.value.code == "message/invalid"
            assert "rated" in refused.value.message
        after = (await get_json(f"{base}/api/rooms"))[1]["rooms"]
        assert [r["room"] for r in after] == [r["room"] for r in before]
        assert gil.tokens == {}
        await gil.request({"type": "ping"})  # the connection is still open


async def test_rated_creates_and_seeks_with_other_options_are_refused(
    rated_server: ServerProcess,
) -> None:
    base = rated_server.http_url
    cookie = await signup(base, unique("opt"))
    async with signed_in(base, cookie) as player:
        for message in (
            {"type": "create", "game": "matches", "options": {"count": 2}, "opponent": "ai:8"},
            {"type": "seek", "game": "matches", "options": {"count": 2}},
        ):
            with pytest.raises(ServerError) as refused:
                await player.request({**message, "rated": True})
            assert refused.value.code == "room/rated", message
        seat = await create(player, game="matches", opponent="ai:8", rated=True)
        snap = await player.wait_state(seat["room"], lambda s: s["status"] == "playing")
        assert snap["options"] == {"count": 20, "variant": "standard"}
