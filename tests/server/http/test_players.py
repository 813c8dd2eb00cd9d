"""Leaderboards, profiles and the rating graph.

- The graph (pure): parses as XML, has its points, draws at most the last 500, escapes
  its title, draws an explanatory empty graph.
- The reads (server/ratings/leaderboard.py) on real SQLite and PostgreSQL: who is on a
  board and in what order (provisional, lapsed, inactive and banned accounts left out),
  the bounds; an account's ratings, history and recent games.
- Over HTTP, against real ``kibitz serve`` processes on real Redis, on each database:
  the leaderboard and its typed refusals, a profile built from rated games archived
  through the ratings' exactly-once apply, the history and its SVG, unknown players, and
  the live games a profile lists (seated, then gone once the game ends).
"""

from __future__ import annotations

import asyncio
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis
import sqlalchemy as sa

from kibitz.client.connection import KibitzClient, new_player_key
from kibitz.server.accounts.service import AccountService
from kibitz.server.archive.database import Archive
from kibitz.server.archive.tables import accounts, ratings
from kibitz.server.domain import glicko2
from kibitz.server.domain.players import Account
from kibitz.server.ratings import graph, leaderboard
from kibitz.server.ratings.store import RatingStore
from kibitz.shared.bus import keys
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, new_postgres_database, start_server
from tests.server.accounts.web import signup

SVG = "{http://www.w3.org/2000/svg}"
DAY_MS = 86_400_000
BLITZ = {"initial_ms": 180_000, "increment_ms": 2_000}  # 180 + 40 x 2 s: blitz


def now_ms() -> int:
    return int(time.time() * 1000)


# -- the graph (pure) ---------------------------------------------------------------------------


def polyline_points(svg: str) -> list[tuple[float, float]]:
    line = ET.fromstring(svg).find(f"{SVG}polyline")
    assert line is not None
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.get("points", "").split())]


def test_the_graph_is_svg_with_a_point_per_game_the_line_and_the_band() -> None:
    start = 1_700_000_000_000
    points = [graph.Point(start + i * DAY_MS, 1500 + 10 * i, 300 - 20 * i) for i in range(12)]
    svg = graph.rating_svg(points, "ann: chess blitz rating")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    drawn = polyline_points(svg)
    assert len(drawn) == 12
    xs, ys = [x for x, _ in drawn], [y for _, y in drawn]
    assert xs == sorted(xs) and xs[0] < xs[-1]  # time runs to the right
    assert ys == sorted(ys, reverse=True)  # a rising rating is drawn higher (smaller y)
    band = root.find(f"{SVG}polygon")
    assert band is not None and len(band.get("points", "").split()) == 24  # upper + lower
    assert len(root.findall(f"{SVG}circle")) == 12  # few points: each a dot with a tooltip
    labels = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert "2023-11-14" in labels  # the first game's date (UTC)
    assert any(label.isdigit() and int(label) % 50 == 0 for label in labels)  # rating ticks


def test_the_graph_draws_only_the_newest_points() -> None:
    start = 1_700_000_000_000
    points = [
        graph.Point(start + i * 60_000, 1500 + i % 7, 80) for i in range(graph.MAX_POINTS + 100)
    ]
    svg = graph.rating_svg(points, "many")
    assert len(polyline_points(svg)) == graph.MAX_POINTS
    assert ET.fromstring(svg).findall(f"{SVG}circle") == []  # too many to mark each
    one = graph.rating_svg(points[:1], "one game")
    assert len(polyline_points(one)) == 1 and len(ET.fromstring(one).findall(f"{SVG}circle")) == 1


def test_the_graph_escapes_its_title() -> None:
    hostile = "<script>alert(\"x\")</script> & 'quoted' ]]> <!--"
    svg = graph.rating_svg([graph.Point(1_700_000_000_000, 1500, 100)], hostile)
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}title").text == hostile  # type: ignore[union-attr]
    assert "<script" not in svg and root.find(f".//{SVG}script") is None
    assert [e for e in root.iter() if e.tag.split("}")[-1] in {"a", "image", "use"}] == []


def test_an_empty_history_draws_an_empty_graph_that_says_so() -> None:
    svg = graph.rating_svg([], "ann: chess blitz rating")
    root = ET.fromstring(svg)
    assert root.find(f"{SVG}polyline") is None
    note = root.find(f"{SVG}text[@class='empty']")
    assert note is not None and "No rated games yet" in (note.text or "")


# -- the per-player index of rooms: who a change seats (pure) -----------------------------------


def test_the_players_a_change_seats_are_those_the_index_notes() -> None:
    """Only an account's seat is noted (a guest key, made up at will, would let anyone
    fill Redis with keys), by the account's player id."""
    from kibitz.server.domain.room import Room, Seat
    from kibitz.server.services.room_store import seated_players

    ann, bob = "a" * 32, "b" * 32

    def signed(name: str, player: str, account_id: int) -> Seat:
        return Seat("human", None, "t", name, player, account=name, account_id=account_id)

    room = Room("r1", "tictactoe", {}, "start", [signed("ann", ann, 1), Seat()])
    assert seated_players(room, -1, 0) == [ann]  # created: every account's seat
    room.seats[1] = signed("bob", bob, 2)
    assert seated_players(room, -1, None) == [ann, bob]  # an accepted seek seats both
    assert seated_players(room, 3, 1) == [bob]  # a join: the one just seated
    assert seated_players(room, 4, None) == []  # a move seats nobody
    room.seats[1] = Seat("human", None, "u", "guest", "c" * 32)
    assert seated_players(room, 3, 1) == []  # a guest, even with a player key: not noted
    assert seated_players(room, -1, None) == [ann]
    room.seats[1] = Seat("ai", 3, None, "AI level 3")
    assert seated_players(room, -1, 0) == [ann]
    room.status = "over"
    assert seated_players(room, -1, 0) == []


def test_the_index_lives_no_longer_than_a_room_can() -> None:
    from kibitz.server.loops.archiver import IDLE_GAME_LIMIT_MS
    from kibitz.shared.bus import playing

    assert playing.TTL_MS <= IDLE_GAME_LIMIT_MS == 3 * DAY_MS


# -- the reads, on both databases ----------------------------------------------------------------


async def make_account(
    engine: Any, name: str, bot: bool = False, disabled: bool = False
) -> Account:
    account = await AccountService(engine).create(name, None, bot=bot)
    if disabled:
        async with engine.begin() as conn:
            await conn.execute(
                sa.update(accounts).where(accounts.c.id == account.id).values(disabled_ms=1)
            )
    return account


async def put_rating(
    engine: Any,
    account: Account,
    rating: float,
    rd: float,
    days_ago: float,
    game: str = "chess",
    speed: str = "blitz",
    volatility: float = 0.06,
) -> None:
    row = {
        "account_id": account.id, "game": game, "speed": speed, "rating": rating, "rd": rd,
        "volatility": volatility, "games": 20, "wins": 10, "draws": 5, "losses": 5,
        "period_ms": now_ms() - int(days_ago * DAY_MS),
    }  # fmt: skip
    async with engine.begin() as conn:
        await conn.execute(sa.insert(ratings).values(row))


async def seed_board(engine: Any) -> None:
    """A chess blitz board with every case the rule names (see the expectations below)."""
    for name, rating, rd, days_ago, volatility in (
        ("Top", 2100, 60, 1, 0.06),
        ("second", 1900, 50, 2, 0.06),
        ("Tie_b", 1800, 70, 3, 0.06),
        ("tie_a", 1800, 70, 3, 0.06),
        ("tie_c", 1800, 65, 3, 0.06),
        ("prov", 2500, 150, 1, 0.06),  # provisional as stored
        ("lapsing", 2400, 100, 29, 0.06),  # active, but its RD has grown past 110 since
        ("inactive", 2300, 50, 40, 0.01),  # no game in 30 days (RD still low at 60 days)
    ):
        await put_rating(
            engine, await make_account(engine, name), rating, rd, days_ago, volatility=volatility
        )
    await put_rating(engine, await make_account(engine, "botty", bot=True), 2000, 40, 1)
    await put_rating(engine, await make_account(engine, "banned", disabled=True), 2600, 40, 1)
    rapid = await make_account(engine, "rapidonly")
    await put_rating(engine, rapid, 2700, 40, 1, speed="rapid")


BLITZ_BOARD = ["Top", "botty", "second", "tie_c", "tie_a", "Tie_b"]


async def test_who_is_on_a_leaderboard_and_in_what_order(archive: Archive) -> None:
    engine = archive.engine
    await seed_board(engine)
    now = now_ms()
    board = await leaderboard.leaderboard(engine, "chess", "blitz", now, 30, 50)
    assert [leader.username for leader in board] == BLITZ_BOARD
    assert [leader.rank for leader in board] == [1, 2, 3, 4, 5, 6]
    assert [leader.bot for leader in board] == [False, True, False, False, False, False]
    assert board[0].to_dict() == {
        "rank": 1, "username": "Top", "rating": 2100, "rd": board[0].rd, "games": 20, "bot": False
    }  # fmt: skip
    grown = glicko2.grown(glicko2.Rating(2100, 60, 0.06), DAY_MS).rd  # a day without a game
    assert board[0].rd == round(grown) > 60
    # A longer window takes the inactive player in; a shorter one leaves out older games.
    wider = await leaderboard.leaderboard(engine, "chess", "blitz", now, 60, 50)
    assert [leader.username for leader in wider] == ["inactive", *BLITZ_BOARD]
    narrow = await leaderboard.leaderboard(engine, "chess", "blitz", now, 2, 50)
    assert [leader.username for leader in narrow] == ["Top", "botty"]
    # The limit; the lapsed players above are skipped without shortening the page.
    assert [
        leader.username
        for leader in await leaderboard.leaderboard(engine, "chess", "blitz", now, 30, 1)
    ] == ["Top"]
    rapid = await leaderboard.leaderboard(engine, "chess", "rapid", now, 30, 50)
    assert [leader.username for leader in rapid] == ["rapidonly"]
    assert await leaderboard.leaderboard(engine, "othello", "timed", now, 30, 50) == []
    for days, limit in ((0, 10), (366, 10), (30, 0), (30, 101)):
        with pytest.raises(ValueError):
            await leaderboard.leaderboard(engine, "chess", "blitz", now, days, limit)


async def test_a_board_of_lapsed_players_is_read_a_bounded_number_of_batches(
    archive: Archive,
) -> None:
    """Past SCAN_BATCHES x limit lapsed ratings, a page comes back short, not slow."""
    engine = archive.engine
    lapsed = leaderboard.SCAN_BATCHES * 2
    for i in range(lapsed):
        await put_rating(engine, await make_account(engine, f"lapsed{i}"), 2400 - i, 100, 29)
    await put_rating(engine, await make_account(engine, "steady"), 1500, 50, 1)
    now = now_ms()
    assert await leaderboard.leaderboard(engine, "chess", "blitz", now, 30, 2) == []
    found = await leaderboard.leaderboard(engine, "chess", "blitz", now, 30, lapsed + 1)
    assert [leader.username for leader in found] == ["steady"]


async def test_an_accounts_ratings_and_history_and_profile_name(archive: Archive) -> None:
    engine = archive.engine
    ann = await make_account(engine, "Ann")
    await put_rating(engine, ann, 1620.4, 80, 1)
    await put_rating(engine, ann, 1450, 200, 3, game="othello", speed="timed")
    got = await leaderboard.ratings_of(engine, ann.id, now_ms())
    assert set(got) == {"chess", "othello"}
    blitz = got["chess"]["blitz"]
    grown = glicko2.grown(glicko2.Rating(1620.4, 80, 0.06), DAY_MS).rd
    assert (blitz["rating"], blitz["rd"], blitz["provisional"]) == (1620, round(grown), False)
    assert (blitz["games"], blitz["wins"], blitz["draws"], blitz["losses"]) == (20, 10, 5, 5)
    assert got["othello"]["timed"]["provisional"] is True
    assert await leaderboard.ratings_of(engine, ann.id + 1000, now_ms()) == {}

    found = await leaderboard.profile_account(engine, "ann")
    assert found is not None and (found.id, found.username) == (ann.id, "Ann")
    assert found.player_id == ann.player_id and found.bot is False
    for key in ("nobody", "Ann", "<b>", "", "ann'--"):
        assert await leaderboard.profile_account(engine, key) is None

    assert await leaderboard.history(engine, ann.id, "chess", "blitz") == []


async def test_history_is_the_newest_points_oldest_first(archive: Archive) -> None:
    from kibitz.server.archive.tables import rating_history

    engine = archive.engine
    ann = await make_account(engine, "Ann")
    rows = [
        {
            "account_id": ann.id, "game": "chess", "speed": "blitz", "game_id": f"g{i:04d}",
            "ended_ms": 1_000_000 + i * 1000, "rating": 1500 + i + 0.4, "rd": 300 - i % 100,
            "change": 1.0,
        }
        for i in range(leaderboard.MAX_HISTORY + 20)
    ]  # fmt: skip
    rows.append({**rows[0], "speed": "rapid", "game_id": "other"})
    async with engine.begin() as conn:
        await conn.execute(sa.insert(rating_history), rows)
    points = await leaderboard.history(engine, ann.id, "chess", "blitz")
    assert len(points) == leaderboard.MAX_HISTORY
    assert points[0] == {"ended_ms": 1_020_000, "rating": 1520, "rd": 280, "game_id": "g0020"}
    assert points[-1]["game_id"] == f"g{leaderboard.MAX_HISTORY + 19:04d}"
    assert [p["ended_ms"] for p in points] == sorted(p["ended_ms"] for p in points)
    assert len(await leaderboard.history(engine, ann.id, "chess", "blitz", limit=3)) == 3
    assert [p["game_id"] for p in await leaderboard.history(engine, ann.id, "chess", "rapid")] == [
        "other"
    ]


def game_record(
    game_id: str,
    ended_ms: int,
    players: list[dict[str, Any]],
    winner: int | None,
    rated: bool = True,
) -> dict[str, Any]:
    """A finished chess blitz game as the archive stores it (seats as rated play
    writes them: ``account``, ``rating``, ``provisional``, ``bot``)."""
    return {
        "id": game_id,
        "game": "chess",
        "options": {},
        "start": "startpos",
        "players": [
            {
                "seat": seat,
                "name": p.get("account") or "guest",
                "kind": "human",
                "level": None,
                "player": p["player"],
                "engine": None,
                "account": p.get("account"),
                "rating": p.get("rating"),
                "provisional": p.get("provisional", False),
                "bot": False,
            }
            for seat, p in enumerate(players)
        ],  # fmt: skip
        "time_control": BLITZ,
        "moves": [
            {"move": "e2e4", "display": "e4", "seat": 0, "at_ms": ended_ms, "clocks_ms": None}
        ],
        "result": {"winner": winner, "reason": "resigned", "termination": "resignation"},
        "status": "over",
        "started_ms": ended_ms - 60_000,
        "ended_ms": ended_ms,
        "chat": [],
        "rated": rated,
    }


@dataclass
class Seeded:
    ann: Account
    bob: Account
    guest_key: str  # a guest key Ann claimed
    game_ids: list[str]  # newest first


async def seed_profiles(archive: Archive) -> Seeded:
    """Ann and Bob play three rated chess blitz games (archived through the ratings'
    apply, as the archiver does); Ann also played a casual game under a guest key she
    then claimed, and an unrated one against a stranger."""
    service = AccountService(archive.engine)
    ann = await service.create("Ann", None)
    bob = await service.create("bob", None)
    key = new_player_key()
    await service.claim(ann.id, key)
    archive.before_save = RatingStore(archive.engine).apply
    start = now_ms() - 10 * DAY_MS
    a = {"account": "Ann", "player": ann.player_id}
    b = {"account": "bob", "player": bob.player_id}
    guest = {"player": player_id(key)}
    stranger = {"player": "f" * 32}
    games = [
        game_record("rated1", start, [a, b], 0),
        game_record("rated2", start + DAY_MS, [b, a], None),
        game_record("rated3", start + 2 * DAY_MS, [a, b], 1),
        game_record("casual", start + 3 * DAY_MS, [stranger, guest], 1, rated=False),
        game_record("others", start + 4 * DAY_MS, [stranger, b], 0, rated=False),
    ]
    for record in games:
        await archive.save(record)
    return Seeded(ann, bob, key, ["others", "casual", "rated3", "rated2", "rated1"])


async def test_recent_games_are_those_of_every_player_id_of_the_account(archive: Archive) -> None:
    seeded = await seed_profiles(archive)
    ids = await AccountService(archive.engine).player_ids(seeded.ann.id)
    assert ids == [seeded.ann.player_id, player_id(seeded.guest_key)]
    recent = await leaderboard.recent_games(archive.engine, ids, 10)
    assert [r["id"] for r in recent] == ["casual", "rated3", "rated2", "rated1"]
    assert [r["id"] for r in await leaderboard.recent_games(archive.engine, ids, 2)] == [
        "casual",
        "rated3",
    ]
    assert await leaderboard.recent_games(archive.engine, [], 10) == []
    rated = next(r for r in recent if r["id"] == "rated3")
    assert rated["ratings"][0]["before"] > rated["ratings"][0]["after"]  # Ann lost it


# -- over HTTP, on each database ---------------------------------------------------------------


@dataclass
class Site:
    server: ServerProcess
    seeded: Seeded

    @property
    def url(self) -> str:
        return self.server.http_url


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, own_redis: Any
) -> AsyncIterator[Site]:
    """A server on a database seeded with a leaderboard and Ann's and Bob's games."""
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("players") / "games.sqlite3"
        url = f"sqlite:///{path}"
    else:
        url = new_postgres_database(request.getfixturevalue("postgres"))
    archive = await Archive.open(url)
    try:
        await seed_board(archive.engine)
        seeded = await seed_profiles(archive)
    finally:
        await archive.close()
    server = start_server(own_redis.url, database_url=url)
    yield Site(server, seeded)
    server.stop()


async def get(url: str) -> tuple[int, Any, aiohttp.typedefs.LooseHeaders]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        body = await resp.json() if resp.content_type == "application/json" else await resp.text()
        return resp.status, body, resp.headers


async def test_the_leaderboard_over_http(site: Site) -> None:
    status, body, headers = await get(f"{site.url}/api/leaderboard/chess/blitz")
    assert status == 200, body
    assert (body["game"], body["speed"], body["days"]) == ("chess", "blitz", 30)
    # People only by default; the bot is ranked in the bots' own list.
    assert [p["username"] for p in body["players"]] == [n for n in BLITZ_BOARD if n != "botty"]
    assert body["bots"] is False
    assert set(body["players"][0]) == {"rank", "username", "rating", "rd", "games", "bot"}
    assert "max-age" in headers["Cache-Control"]
    _, body, _ = await get(f"{site.url}/api/leaderboard/chess/blitz?days=60&limit=2")
    assert [p["username"] for p in body["players"]] == ["inactive", "Top"]
    _, body, _ = await get(f"{site.url}/api/leaderboard/chess/blitz?days=9999&limit=500")
    assert body["days"] == 365 and len(body["players"]) == 6  # both clamped, not refused
    _, body, _ = await get(f"{site.url}/api/leaderboard/chess/blitz?bots=1")
    assert [p["username"] for p in body["players"]] == ["botty"] and body["bots"] is True
    assert body["players"][0]["rank"] == 1 and body["players"][0]["bot"] is True
    # Ann's and Bob's three games leave them provisional: on no board.
    _, body, _ = await get(f"{site.url}/api/leaderboard/othello/timed")
    assert body["players"] == []


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/leaderboard/chess/blitz?days=0", 400, "query/invalid"),
        ("/api/leaderboard/chess/blitz?days=-3", 400, "query/invalid"),
        ("/api/leaderboard/chess/blitz?limit=ten", 400, "query/invalid"),
        ("/api/leaderboard/chess/blitz?limit=1&limit=2", 400, "query/invalid"),
        ("/api/leaderboard/chess/blitz?days=%C2%B2", 400, "query/invalid"),
        ("/api/leaderboard/chess/timed", 404, "rating/unknown"),
        ("/api/leaderboard/othello/blitz", 404, "rating/unknown"),
        ("/api/leaderboard/go/blitz", 404, "rating/unknown"),
        ("/api/players/nobody", 404, "player/unknown"),
        ("/api/players/%3Cscript%3E", 404, "player/unknown"),
        ("/api/players/" + "a" * 300, 404, "player/unknown"),
        ("/api/players/nobody/history?game=chess&speed=blitz", 404, "player/unknown"),
        ("/api/players/nobody/rating.svg?game=chess&speed=blitz", 404, "player/unknown"),
        ("/api/players/Ann/history?game=chess", 400, "query/invalid"),
        ("/api/players/Ann/history", 400, "query/invalid"),
        ("/api/players/Ann/rating.svg?game=chess&speed=timed", 404, "rating/unknown"),
        ("/api/players/Ann/history?game=chess&speed=blitz&game=othello", 400, "query/invalid"),
    ],
)
async def test_bad_requests_get_typed_errors(site: Site, path: str, status: int, code: str) -> None:
    logged = len(site.server.log)
    got, body, _ = await get(site.url + path)
    assert (got, body["type"], body["code"]) == (status, "error", code), body
    log = "".join(site.server.log[logged:])
    assert "Traceback" not in log and " ERROR " not in log, log[-2000:]


#: Numbers the query parser refuses (tests/security/test_injection.py has the reasons).
BAD_NUMBERS = [
    "%C2%B2",
    "%EF%BC%95",
    "-1",
    "%2B5",
    "0",
    "1" + "0" * 40,
    "%205",
    "2.5",
    "",
    "%FF",
    "5%00",
]


async def test_bad_numbers_never_reach_the_database(site: Site) -> None:
    logged = len(site.server.log)
    for name in ("days", "limit"):
        for value in BAD_NUMBERS:
            got, body, _ = await get(f"{site.url}/api/leaderboard/chess/blitz?{name}={value}")
            assert (got, body["code"]) == (400, "query/invalid"), (name, value, body)
    log = "".join(site.server.log[logged:])
    assert "Traceback" not in log and " ERROR " not in log, log[-2000:]


async def test_a_profile_shows_ratings_record_and_recent_games(site: Site) -> None:
    status, body, _ = await get(f"{site.url}/api/players/ANN")
    assert status == 200, body
    ann = site.seeded.ann
    assert (body["username"], body["player"], body["bot"], body["mark"]) == (
        "Ann",
        ann.player_id,
        False,
        None,
    )
    assert body["created_ms"] > now_ms() - 3600_000
    blitz = body["ratings"]["chess"]["blitz"]
    assert (blitz["games"], blitz["wins"], blitz["draws"], blitz["losses"]) == (3, 1, 1, 1)
    assert blitz["provisional"] is True and set(body["ratings"]) == {"chess"}
    recent = body["recent"]
    assert [g["id"] for g in recent] == ["casual", "rated3", "rated2", "rated1"]
    assert [g["outcome"] for g in recent] == ["win", "loss", "draw", "win"]
    assert [g["seat"] for g in recent] == [1, 0, 1, 0]
    assert [g["rated"] for g in recent] == [False, True, True, True]
    assert all(g["speed"] == "blitz" and "moves" not in g and "chat" not in g for g in recent)
    first = recent[-1]
    assert first["ratings"][0]["before"] == 1500 and first["ratings"][0]["change"] > 0
    assert first["players"][1]["account"] == "bob"
    # The history ends at the rating the profile shows.
    status, history, _ = await get(f"{site.url}/api/players/ann/history?game=chess&speed=blitz")
    assert status == 200 and history["username"] == "Ann"
    points = history["points"]
    assert [p["game_id"] for p in points] == ["rated1", "rated2", "rated3"]
    assert points[-1]["rating"] == blitz["rating"]
    assert points[0]["rating"] == first["ratings"][0]["after"]
    _, bob, _ = await get(f"{site.url}/api/players/bob")
    assert [g["id"] for g in bob["recent"]] == ["others", "rated3", "rated2", "rated1"]


async def test_the_rating_graph_over_http(site: Site) -> None:
    status, svg, headers = await get(
        f"{site.url}/api/players/Ann/rating.svg?game=chess&speed=blitz"
    )
    assert status == 200
    assert headers["Content-Type"].startswith("image/svg+xml")
    assert (
        "max-age" in headers["Cache-Control"]
        and "default-src 'none'" in headers["Content-Security-Policy"]
    )
    assert len(polyline_points(svg)) == 3
    assert ET.fromstring(svg).find(f"{SVG}title").text == "Ann: chess blitz rating"  # type: ignore[union-attr]
    status, empty, _ = await get(f"{site.url}/api/players/Ann/rating.svg?game=othello&speed=timed")
    assert status == 200 and "No rated games yet" in empty
    assert ET.fromstring(empty).find(f"{SVG}polyline") is None


async def until(check: Any, what: str, seconds: float = 20.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_profile_lists_the_live_games_the_player_sits_in(site: Site) -> None:
    """A signed-in player creates a room (listed), a guest joins, the player resigns:
    the room is no longer listed."""
    url = site.url
    name = "eve" + str(now_ms() % 10_000_000)
    a = await signed_in(url, await signup(url, name))
    b = await KibitzClient.open(url)
    try:
        room = (await a.create("tictactoe", seat=0))["room"]

        async def playing(who: str) -> list[str]:
            return list((await get(f"{url}/api/players/{who}"))[1]["playing"])

        assert await playing(name) == [room]
        assert await playing("bob") == []
        await b.join(room, player_key=new_player_key())
        assert await playing(name) == [room]
        await a.resign(room)
        await until(lambda: _empty(playing(name)), "the ended game to leave the profile")
    finally:
        await a.close()
        await b.close()


def index_keys(redis_url: str) -> set[str]:
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        return set(client.scan_iter(match=keys.player_rooms_key("*"), count=1000))


async def test_guests_seats_make_no_index_and_an_accounts_expires_with_its_games(
    site: Site, own_redis: Any
) -> None:
    """Ten guest rooms under fresh player keys write no per-player key; an account's
    room writes its key, with a lifetime no longer than a room's (3 days)."""
    url = site.url
    before = index_keys(own_redis.url)
    async with await KibitzClient.open(url) as guest:
        for _ in range(10):
            await guest.create("tictactoe", player_key=new_player_key())
    assert index_keys(own_redis.url) == before
    name = "fay" + str(now_ms() % 10_000_000)
    player = await signed_in(url, await signup(url, name))
    try:
        room = (await player.create("tictactoe", seat=0))["room"]
        own = (await get(f"{url}/api/players/{name}"))[1]["player"]
        assert index_keys(own_redis.url) == before | {keys.player_rooms_key(own)}
        with redis.Redis.from_url(own_redis.url, decode_responses=True) as client:
            ttl = client.pttl(keys.player_rooms_key(own))
            assert 0 < ttl <= 3 * DAY_MS
            assert client.zrange(keys.player_rooms_key(own), 0, -1) == [room]
    finally:
        await player.close()


async def test_a_profile_reads_a_bounded_number_of_rooms(site: Site, own_redis: Any) -> None:
    """However many rooms an index names, one profile request reads at most
    MAX_PLAYING of them (stale ones are dropped as they are read)."""
    from kibitz.server.http.players import MAX_PLAYING

    url = site.url
    name = "gus" + str(now_ms() % 10_000_000)
    await signup(url, name)
    own = (await get(f"{url}/api/players/{name}"))[1]["player"]
    key = keys.player_rooms_key(own)
    with redis.Redis.from_url(own_redis.url, decode_responses=True) as client:
        client.zadd(key, {f"never{i:05d}": now_ms() + i for i in range(MAX_PLAYING + 30)})
        status, profile, _ = await get(f"{url}/api/players/{name}")
        assert status == 200 and profile["playing"] == []
        assert MAX_PLAYING <= 20
        assert client.zcard(key) == 30  # only MAX_PLAYING were read (and dropped)
        client.delete(key)


async def _empty(listing: Any) -> bool:
    return (await listing) == []


async def signed_in(base: str, cookie: str) -> KibitzClient:
    return await KibitzClient.open(base, additional_headers={"Cookie": f"kibitz_session={cookie}"})


async def test_a_rated_game_between_accounts_shows_on_both_profiles(site: Site) -> None:
    """Two accounts play a rated tic-tac-toe game: while it runs, each profile lists it
    and the live list shows their ratings; once archived, the profiles show the new
    ratings, the W/D/L, the game with its rating changes, and the graph its point."""
    base = site.url
    stamp = str(now_ms() % 10_000_000)
    cy, di = "cy" + stamp, "di" + stamp
    cy_client = await signed_in(base, await signup(base, cy))
    di_client = await signed_in(base, await signup(base, di))
    try:
        reply = await cy_client.request(
            {"type": "create", "game": "tictactoe", "seat": 0, "rated": True}
        )
        room = reply["room"]
        cy_client.tokens[room] = (reply["seat"], reply["token"])
        cy_client.following.add(room)
        await di_client.join(room)
        for name in (cy, di):
            assert (await get(f"{base}/api/players/{name}"))[1]["playing"] == [room]
        _, listed, _ = await get(f"{base}/api/rooms")
        entry = next(r for r in listed["rooms"] if r["room"] == room)
        assert [(s["account"], s["rating"]) for s in entry["seats"]] == [(cy, 1500), (di, 1500)]
        moves = [(cy_client, "1"), (di_client, "4"), (cy_client, "2"), (di_client, "5")]
        for version, (mover, move) in enumerate([*moves, (cy_client, "3")], start=1):
            await mover.move(room, move, version)
            await mover.wait_state(room, lambda s, v=version: s["version"] >= v + 1)
    finally:
        await cy_client.close()
        await di_client.close()

    async def rated_profile() -> dict[str, Any] | None:
        _, body, _ = await get(f"{base}/api/players/{cy}")
        return body if body["ratings"] else None

    profile = await until(rated_profile, "the rated game to be archived")
    assert profile["playing"] == []
    line = profile["ratings"]["tictactoe"]["correspondence"]  # untimed: correspondence
    assert (line["games"], line["wins"], line["draws"], line["losses"]) == (1, 1, 0, 0)
    assert line["rating"] > 1500 and line["provisional"] is True
    game = profile["recent"][0]
    assert (game["id"], game["rated"], game["outcome"], game["seat"]) == (room, True, "win", 0)
    assert game["ratings"][0]["after"] == line["rating"] and game["ratings"][1]["change"] < 0
    _, loser, _ = await get(f"{base}/api/players/{di}")
    assert loser["ratings"]["tictactoe"]["correspondence"]["losses"] == 1
    assert loser["recent"][0]["outcome"] == "loss"
    path = f"/api/players/{cy}/history?game=tictactoe&speed=correspondence"
    _, history, _ = await get(base + path)
    assert [(p["game_id"], p["rating"]) for p in history["points"]] == [(room, line["rating"])]
    _, svg, _ = await get(base + path.replace("/history", "/rating.svg"))
    assert len(polyline_points(svg)) == 1
