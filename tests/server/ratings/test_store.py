"""Ratings in the database, on real SQLite and PostgreSQL (the ``archive`` fixture of
tests/server/conftest.py): seat ratings with inactivity, and a rated game's change
applied exactly once in the transaction that archives it."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from kibitz.server.archive.database import Archive
from kibitz.server.archive.tables import accounts, rated_games, rating_history, ratings
from kibitz.server.domain import glicko2, records
from kibitz.server.domain import room as rooms
from kibitz.server.domain.anchors import ANCHOR_RD, level_rating
from kibitz.server.domain.glicko2 import DEFAULT, Rating
from kibitz.server.domain.room import SeatAccount
from kibitz.server.ratings.store import RatingStore

NOW = 1_800_000_000_000
DAY_MS = 24 * 3600 * 1000
BLITZ = {"initial_ms": 180_000, "increment_ms": 2_000}


async def add_account(archive: Archive, username: str) -> int:
    async with archive.engine.begin() as conn:
        result = await conn.execute(
            sa.insert(accounts).values(
                username=username, username_key=username.lower(),
                player_id=uuid.uuid4().hex, created_ms=NOW - 100 * DAY_MS,
            )
        )  # fmt: skip
        return int(result.inserted_primary_key[0])


def seat(index: int, account: str | None = None, level: int | None = None) -> dict[str, Any]:
    kind = "ai" if level is not None else "human"
    return {
        "seat": index, "name": account, "kind": kind, "level": level,
        "player": None, "engine": None, "account": account,
        "rating": 1500 if account else None, "provisional": True, "bot": level is not None,
    }  # fmt: skip


def rated_record(
    game_id: str, players: list[dict[str, Any]], winner: int | None = 0, game: str = "chess",
    clock: dict[str, int] | None = None, rated: bool = True, ended_ms: int = NOW,
) -> dict[str, Any]:  # fmt: skip
    return {
        "id": game_id, "game": game, "options": {}, "start": "start", "players": players,
        "time_control": BLITZ if clock is None else clock,
        "moves": [{"move": "e2e4", "display": "e4", "seat": 0, "at_ms": ended_ms,
                   "clocks_ms": None}],
        "result": {"winner": winner, "reason": "resigned", "termination": "resign"},
        "status": "over", "started_ms": ended_ms - 60_000, "ended_ms": ended_ms, "chat": [],
        "rated": rated,
    }  # fmt: skip


def store_of(archive: Archive, now: int = NOW) -> RatingStore:
    """The store wired into the archive as server/node.py wires it."""
    store = RatingStore(archive.engine, clock=lambda: now)
    archive.before_save = store.apply
    archive.before_batch = store.lock_batch
    return store


async def rows(archive: Archive, table: sa.Table) -> list[dict[str, Any]]:
    async with archive.engine.connect() as conn:
        return [dict(row) for row in (await conn.execute(sa.select(table))).mappings()]


async def rating_rows(archive: Archive) -> dict[tuple[int, str, str], dict[str, Any]]:
    return {(r["account_id"], r["game"], r["speed"]): r for r in await rows(archive, ratings)}


async def test_seat_rating_of_a_new_account_and_after_inactivity(archive: Archive) -> None:
    alice = await add_account(archive, "Alice")
    assert await store_of(archive).seat_rating(alice, "chess", "blitz") == (1500, True)
    async with archive.engine.begin() as conn:
        await conn.execute(
            sa.insert(ratings).values(
                account_id=alice, game="chess", speed="blitz", rating=1650.6, rd=60.0,
                volatility=0.06, games=40, period_ms=NOW - DAY_MS,
            )
        )  # fmt: skip
    assert await store_of(archive).seat_rating(alice, "chess", "blitz") == (1651, False)
    later = store_of(archive, NOW + 60 * DAY_MS)  # two months without a game
    assert await later.seat_rating(alice, "chess", "blitz") == (1651, True)
    assert await later.seat_rating(alice, "chess", "bullet") == (1500, True)


async def test_a_rated_game_is_applied_once_however_often_it_is_saved(archive: Archive) -> None:
    alice, bob = await add_account(archive, "Alice"), await add_account(archive, "bob")
    store_of(archive)
    record = rated_record("g1", [seat(0, "Alice"), seat(1, "bob")], winner=0)
    await archive.save_many([record])
    expected = glicko2.update(DEFAULT, [(DEFAULT, 1.0)])
    first = record["ratings"]
    assert first[0] == {
        "before": 1500, "after": round(expected.rating),
        "change": round(expected.rating) - 1500, "rd": round(expected.rd),
    }  # fmt: skip
    assert first[1]["change"] == -first[0]["change"] and first[1]["after"] < 1500
    assert (await archive.get("g1"))["ratings"] == first
    table = await rating_rows(archive)
    assert table[(alice, "chess", "blitz")]["rating"] == pytest.approx(expected.rating)
    assert table[(alice, "chess", "blitz")]["wins"] == 1
    assert table[(bob, "chess", "blitz")]["losses"] == 1

    # A second archiver, a retry after a crash, a batch again: nothing more changes.
    again = rated_record("g1", [seat(0, "Alice"), seat(1, "bob")], winner=0)
    await archive.save_many([again])
    await archive.save(copy.deepcopy(again))
    await archive.save_many([rated_record("g1", [seat(0, "Alice"), seat(1, "bob")])] * 2)
    assert again["ratings"] == first
    assert await rating_rows(archive) == table
    history = await rows(archive, rating_history)
    assert sorted((h["account_id"], h["game_id"]) for h in history) == [(alice, "g1"), (bob, "g1")]
    assert [r["game_id"] for r in await rows(archive, rated_games)] == ["g1"]
    assert (await archive.get("g1"))["ratings"] == first


async def test_concurrent_saves_of_one_game_apply_it_once(archive: Archive) -> None:
    """Two archivers writing the same game at once (each on its own connection)."""
    await add_account(archive, "carol"), await add_account(archive, "dave")
    store_of(archive)
    records = [rated_record("g2", [seat(0, "carol"), seat(1, "dave")], winner=1) for _ in range(4)]
    await asyncio.gather(*(archive.save_many([r]) for r in records))
    assert all(r["ratings"] == records[0]["ratings"] for r in records)
    table = await rating_rows(archive)
    assert sorted(r["games"] for r in table.values()) == [1, 1]
    assert len(await rows(archive, rating_history)) == 2


async def test_the_change_and_the_record_are_one_transaction(archive: Archive) -> None:
    """A batch whose write fails after the ratings were applied leaves no trace of the
    change; the game is then applied when it is saved."""
    await add_account(archive, "erin"), await add_account(archive, "frank")
    store_of(archive)
    good = rated_record("g3", [seat(0, "erin"), seat(1, "frank")])
    unstorable = {**rated_record("g4", [seat(0, "erin"), seat(1, "frank")]), "options": {1j: 1}}
    with pytest.raises(Exception):  # noqa: B017 - the driver's or the encoder's error
        await archive.save_many([good, unstorable])
    assert await rows(archive, ratings) == []
    assert await rows(archive, rated_games) == []
    assert "ratings" not in good  # the records given change only once it is committed
    assert await rows(archive, rating_history) == []
    assert await archive.get("g3") is None
    await archive.save_many([rated_record("g3", [seat(0, "erin"), seat(1, "frank")])])
    assert sorted(r["games"] for r in (await rating_rows(archive)).values()) == [1, 1]


async def test_an_ai_seat_is_a_fixed_anchor(archive: Archive) -> None:
    gina = await add_account(archive, "gina")
    store_of(archive)
    record = rated_record("g5", [seat(0, level=5), seat(1, "gina")], winner=1)
    await archive.save_many([record])
    anchor = Rating(level_rating("chess", 5), ANCHOR_RD, 0.06)
    expected = glicko2.update(DEFAULT, [(anchor, 1.0)])
    assert record["ratings"][0] is None
    assert record["ratings"][1]["after"] == round(expected.rating)
    assert set(await rating_rows(archive)) == {(gina, "chess", "blitz")}
    # The anchor never moves: the same win again counts against the same 1304.
    second = glicko2.update(expected, [(anchor, 1.0)])
    record2 = rated_record("g6", [seat(0, level=5), seat(1, "gina")], winner=1, ended_ms=NOW)
    await archive.save_many([record2])
    assert record2["ratings"][1]["after"] == round(second.rating)


async def test_speed_draws_and_timing(archive: Archive) -> None:
    """A draw counts as one; the speed comes from the clock; the RD grows between games."""
    hana, ivan = await add_account(archive, "hana"), await add_account(archive, "ivan")
    store_of(archive)
    players = [seat(0, "hana"), seat(1, "ivan")]
    await archive.save_many([rated_record("g7", players, winner=None, game="othello",
                                          clock={"days_per_move": 2})])  # fmt: skip
    table = await rating_rows(archive)
    assert set(table) == {(hana, "othello", "correspondence"), (ivan, "othello", "correspondence")}
    counts = [(r["draws"], r["wins"], r["losses"], r["games"]) for r in table.values()]
    assert counts == [(1, 0, 0, 1), (1, 0, 0, 1)]
    after_first = table[(hana, "othello", "correspondence")]
    later = NOW + 90 * DAY_MS
    record = rated_record("g8", players, winner=0, game="othello", clock={"days_per_move": 2},
                          ended_ms=later)  # fmt: skip
    await archive.save_many([record])
    grown = glicko2.grown(
        Rating(after_first["rating"], after_first["rd"], after_first["volatility"]), 90 * DAY_MS
    )
    opponent_row = table[(ivan, "othello", "correspondence")]
    opponent = glicko2.grown(
        Rating(opponent_row["rating"], opponent_row["rd"], opponent_row["volatility"]), 90 * DAY_MS
    )
    expected = glicko2.update(grown, [(opponent, 1.0)])
    assert record["ratings"][0]["after"] == round(expected.rating)
    assert (await rating_rows(archive))[(hana, "othello", "correspondence")]["period_ms"] == later


async def test_casual_games_and_vanished_accounts(archive: Archive) -> None:
    jack = await add_account(archive, "jack")
    store_of(archive)
    casual = rated_record("g9", [seat(0, "jack"), seat(1, "kim")], rated=False)
    casual_copy = copy.deepcopy(casual)
    await archive.save_many([casual])
    assert casual == casual_copy and "ratings" not in (await archive.get("g9"))
    assert await rows(archive, rated_games) == []
    # "kim" has no account (deleted): her seat is unchanged, jack's counts her as the
    # rating the record gives her, with the largest RD.
    players = [seat(0, "jack"), {**seat(1, "kim"), "rating": 1700}]
    record = rated_record("g10", players, winner=0)
    await archive.save_many([record])
    expected = glicko2.update(DEFAULT, [(Rating(1700, 350, 0.06), 1.0)])
    assert record["ratings"][1] is None
    assert record["ratings"][0]["after"] == round(expected.rating)
    assert set(await rating_rows(archive)) == {(jack, "chess", "blitz")}


async def test_history_ratings_and_board_after_applied_games(archive: Archive) -> None:
    """The reads the profiles use, over games this store applied: one history point per
    game (the values after it), the W/D/L, and the board once a rating is settled."""
    lena, max_ = await add_account(archive, "lena"), await add_account(archive, "max")
    store = store_of(archive)
    async with archive.engine.begin() as conn:  # both settled players already
        for account in (lena, max_):
            await conn.execute(
                sa.insert(ratings).values(
                    account_id=account, game="chess", speed="blitz", rating=1600.0, rd=60.0,
                    volatility=0.06, games=30, wins=10, draws=10, losses=10,
                    period_ms=NOW - DAY_MS,
                )
            )  # fmt: skip
    players = [seat(0, "lena"), seat(1, "max")]
    records = [
        rated_record(f"h{i}", players, winner=0 if i % 3 else None, ended_ms=NOW + i * 60_000)
        for i in range(12)
    ]
    for record in records:
        await archive.save_many([record])
    points = await store.history(lena, "chess", "blitz", limit=5)
    assert [p["game_id"] for p in points] == [f"h{i}" for i in range(7, 12)]
    assert [p["rating"] for p in points] == [r["ratings"][0]["after"] for r in records[7:]]
    assert [p["rd"] for p in points] == [r["ratings"][0]["rd"] for r in records[7:]]
    mine = (await store.ratings_of(lena))["chess"]["blitz"]
    assert (mine["games"], mine["wins"], mine["draws"], mine["losses"]) == (42, 18, 14, 10)
    assert mine["rating"] == records[-1]["ratings"][0]["after"] and not mine["provisional"]
    theirs = (await store.ratings_of(max_))["chess"]["blitz"]
    assert theirs["rating"] == records[-1]["ratings"][1]["after"] < 1600 < mine["rating"]
    board = await store.leaderboard("chess", "blitz", 30, 10)
    assert [(b.rank, b.username, b.rating) for b in board] == [
        (1, "lena", mine["rating"]),
        (2, "max", theirs["rating"]),
    ]


async def test_games_of_the_same_players_written_at_once(archive: Archive) -> None:
    """Several nodes archiving games of the same two players at once, seats either way
    round: every game is applied (rows locked in one order: no deadlock), each once."""
    nina, omar = await add_account(archive, "nina"), await add_account(archive, "omar")
    store_of(archive)
    await archive.save_many([rated_record("w0", [seat(0, "nina"), seat(1, "omar")])])
    records = [
        rated_record(
            f"w{i}",
            [seat(0, "nina"), seat(1, "omar")][:: 1 if i % 2 else -1],
            winner=i % 2,
            ended_ms=NOW + i,
        )  # fmt: skip
        for i in range(1, 7)
    ]
    await asyncio.gather(*(archive.save_many([r]) for r in records))
    table = await rating_rows(archive)
    assert [table[(a, "chess", "blitz")]["games"] for a in (nina, omar)] == [7, 7]
    assert len(await rows(archive, rating_history)) == 14
    assert table[(nina, "chess", "blitz")]["period_ms"] == NOW + 6


async def test_out_of_order_and_impossible_games(archive: Archive) -> None:
    pia = await add_account(archive, "pia")
    await add_account(archive, "quin")
    store_of(archive)
    players = [seat(0, "pia"), seat(1, "quin")]
    await archive.save_many([rated_record("o2", players, ended_ms=NOW + 5000)])
    await archive.save_many([rated_record("o1", players, ended_ms=NOW)])  # archived late
    row = (await rating_rows(archive))[(pia, "chess", "blitz")]
    assert row["games"] == 2 and row["period_ms"] == NOW + 5000
    # One account in both seats (refused when rooms are made): claimed, nothing changes.
    same = rated_record("o3", [seat(0, "pia"), seat(1, "PIA")])
    await archive.save_many([same])
    assert same["ratings"] == [None, None]
    assert (await rating_rows(archive))[(pia, "chess", "blitz")]["games"] == 2
    assert "o3" in [r["game_id"] for r in await rows(archive, rated_games)]
    # A record that cannot be rated at all (no such level) is archived unrated.
    bad = rated_record("o4", [seat(0, "pia"), seat(1, level=42)])
    await archive.save_many([bad])
    assert bad["ratings"] == [None, None] and (await archive.get("o4")) is not None


async def test_apply_twice_on_one_connection_changes_once(archive: Archive) -> None:
    """``apply`` itself, twice in one transaction (as a batch holding the game twice):
    the second call returns the first call's changes and writes nothing."""
    rosa = await add_account(archive, "rosa")
    await add_account(archive, "sam")
    store = RatingStore(archive.engine, clock=lambda: NOW)  # no hook: apply by hand
    record = rated_record("a1", [seat(0, "rosa"), seat(1, "sam")], winner=1)
    async with archive.engine.begin() as conn:
        first = await store.apply(conn, record)
        second = await store.apply(conn, copy.deepcopy(record))
    assert first is not None and first == second
    assert first["ratings"][0]["change"] < 0 < first["ratings"][1]["change"]
    assert (await rating_rows(archive))[(rosa, "chess", "blitz")]["games"] == 1
    async with archive.engine.begin() as conn:
        assert await store.apply(conn, {**record, "rated": False}) is None
        assert await store.apply(conn, record) == first
    assert len(await rows(archive, rating_history)) == 2


async def test_an_abandoned_rated_game_is_rated_as_a_loss(archive: Archive) -> None:
    """The record of a rated game left by the side to move (server/domain/room.py
    ``abandon``): the archive applies it as a loss for that side, never a draw."""
    stayer, leaver = await add_account(archive, "stayer"), await add_account(archive, "leaver")
    store_of(archive)
    holders = [SeatAccount(stayer, "stayer", "a" * 32), SeatAccount(leaver, "leaver", "b" * 32)]
    room, _, _ = rooms.create_room(
        "ab1", "tictactoe", {}, "human", 0, None, "t0", NOW, rated=True, holder=holders[0]
    )
    room, _, _ = rooms.join_room(room, None, None, "t1", NOW, holder=holders[1])
    for seat, move in ((0, "5"), (1, "1"), (0, "9")):  # then the leaver, to move, leaves
        room, _, _ = rooms.play_move(room, seat, move, None, NOW)
    over, _ = rooms.abandon(room, NOW + DAY_MS)
    record = records.record_of(over, [])
    await archive.save_many([record])
    table = await rating_rows(archive)
    assert table[(stayer, "tictactoe", "correspondence")]["wins"] == 1
    assert table[(leaver, "tictactoe", "correspondence")]["losses"] == 1
    assert record["ratings"][0]["change"] > 0 > record["ratings"][1]["change"]


async def test_crossed_batches_of_rated_games_both_commit(archive: Archive) -> None:
    """Two nodes archiving batches of several rated games at once, the same players'
    games in crossed orders ([A-B, C-D] and [C-D, A-B]): each batch is one transaction,
    and both commit (the accounts of a batch are locked in one order up front), rather
    than one being killed as a deadlock (PostgreSQL) and written again."""
    names = ["ka", "kb", "kc", "kd"]
    ids = [await add_account(archive, name) for name in names]
    store_of(archive)
    ab, cd = [seat(0, "ka"), seat(1, "kb")], [seat(0, "kc"), seat(1, "kd")]
    await archive.save_many([rated_record("x0", ab), rated_record("x1", cd)])  # rows exist
    for round_ in range(4):
        first = [rated_record(f"y{round_}a{i}", ab if i % 2 else cd) for i in range(6)]
        second = [rated_record(f"y{round_}b{i}", cd if i % 2 else ab) for i in range(6)]
        await asyncio.gather(archive.save_many(first), archive.save_many(second))
    table = await rating_rows(archive)
    assert [table[(i, "chess", "blitz")]["games"] for i in ids] == [25, 25, 25, 25]
