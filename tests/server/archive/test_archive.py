"""The finished-games database, against real SQLite files and a real PostgreSQL: save,
get, list by player and game, paging, idempotency; and the record shape."""

from __future__ import annotations

import pytest

from kibitz.server.archive.database import MAX_PAGE, Archive, ArchiveError
from kibitz.server.domain.records import record_of
from kibitz.server.domain.room import MoveRecord, Room, Seat


def record(game_id: str, ended_ms: int, players=(None, None), game="tictactoe") -> dict:
    return {
        "id": game_id,
        "game": game,
        "options": {},
        "start": "start",
        "players": [
            {"seat": seat, "name": None, "kind": "human", "level": None, "player": player}
            for seat, player in enumerate(players)
        ],
        "time_control": None,
        "moves": [{"move": "5", "display": "5", "seat": 0, "at_ms": ended_ms, "clocks_ms": None}],
        "result": {"winner": 0, "reason": "three in a row"},
        "status": "over",
        "started_ms": ended_ms - 10,
        "ended_ms": ended_ms,
        "chat": [],
    }


async def test_save_get_and_idempotent_upsert(archive: Archive) -> None:
    first = record("g1", 1000, ("alice", "bob"))
    await archive.save(first)
    await archive.save(first)  # a second archiver's retry: still one row
    assert await archive.get("g1") == first
    assert await archive.get("nope") is None
    changed = {**first, "result": {"winner": None, "reason": "abandoned"}}
    await archive.save(changed)
    assert (await archive.get("g1"))["result"] == {"winner": None, "reason": "abandoned"}
    page = await archive.list()
    assert [r["id"] for r in page.records] == ["g1"] and page.cursor is None


async def test_a_batch_is_saved_whole_or_not_at_all(archive: Archive) -> None:
    batch = [record(f"b{i}", 2000 + i, ("alice", "bob")) for i in range(5)]
    await archive.save_many(batch)
    await archive.save_many(batch[:2])  # written again: still one row each
    assert [await archive.get(f"b{i}") for i in range(5)] == batch
    unfinished = {**record("b9", 3000), "ended_ms": None}
    with pytest.raises(ArchiveError):
        await archive.save_many([record("b7", 3000), unfinished])
    assert await archive.get("b7") is None
    assert len((await archive.list(limit=MAX_PAGE)).records) == 5


async def test_list_by_player_and_game_newest_first_in_pages(archive: Archive) -> None:
    # 25 games; alice plays seat 0 in the even ones and seat 1 in every third.
    for i in range(25):
        players = ("alice" if i % 2 == 0 else "carol", "alice" if i % 3 == 0 else "bob")
        game = "chess" if i % 5 == 0 else "tictactoe"
        # Ties on ended_ms (pairs of games end in the same ms) are ordered by id.
        await archive.save(record(f"g{i:02d}", 1000 + i // 2, players, game))
    everything = await archive.list(limit=MAX_PAGE)
    ids = [r["id"] for r in everything.records]
    assert len(ids) == 25 and everything.cursor is None
    assert ids == sorted(ids, key=lambda g: (1000 + int(g[1:]) // 2, g), reverse=True)

    alice = [g for g in ids if int(g[1:]) % 2 == 0 or int(g[1:]) % 3 == 0]
    pages, cursor = [], None
    while True:
        page = await archive.list(player="alice", limit=4, before=cursor)
        pages.append([r["id"] for r in page.records])
        cursor = page.cursor
        if cursor is None:
            break
    assert [g for page in pages for g in page] == alice
    assert all(len(page) == 4 for page in pages[:-1])

    chess = await archive.list(game="chess")
    assert [r["id"] for r in chess.records] == [g for g in ids if int(g[1:]) % 5 == 0]
    bob_chess = await archive.list(player="bob", game="chess")
    assert [r["id"] for r in bob_chess.records] == ["g20", "g10", "g05"]
    assert (await archive.list(player="nobody")).records == []


async def test_page_cursors_keep_their_bytes(archive: Archive) -> None:
    """A page's cursor is URL-safe base64 of ``ENDED_MS:ID``, padded, as clients hold it."""
    await archive.save(record("g01", 1000))
    await archive.save(record("g02", 1001))
    first = await archive.list(limit=1)
    assert [r["id"] for r in first.records] == ["g02"] and first.cursor == "MTAwMTpnMDI="
    rest = await archive.list(limit=1, before="MTAwMTpnMDI=")
    assert [r["id"] for r in rest.records] == ["g01"] and rest.cursor is None


async def test_bad_requests_are_refused(archive: Archive) -> None:
    with pytest.raises(ArchiveError):
        await archive.list(before="not a cursor!")
    with pytest.raises(ArchiveError):
        await archive.list(limit=0)
    with pytest.raises(ArchiveError):
        await archive.save({**record("g1", 5), "ended_ms": None})  # not finished
    with pytest.raises(ArchiveError):
        await archive.save({"id": "g2", "ended_ms": 5})  # not a record


async def test_migrations_run_once_and_keep_the_data(archive: Archive) -> None:
    await archive.save(record("kept", 7))
    again = await Archive.open(str(archive.engine.url.render_as_string(hide_password=False)))
    try:
        assert (await again.get("kept"))["id"] == "kept"
    finally:
        await again.close()


async def test_the_migrations_make_the_tables_the_code_declares(archive: Archive) -> None:
    """Alembic's comparison of the migrated database with server/archive/tables.py finds
    nothing to add, drop or change (tables, columns, indexes)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from kibitz.server.archive.tables import metadata

    def differences(connection):  # type: ignore[no-untyped-def]
        return compare_metadata(MigrationContext.configure(connection), metadata)

    async with archive.engine.connect() as conn:
        found = await conn.run_sync(differences)
    assert found == []


def test_record_of_a_room_and_its_events() -> None:
    room = Room(
        id="abcd1234",
        game="tictactoe",
        options={},
        start="start",
        seats=[Seat("human", None, "h", "Ann"), Seat("ai", 3, None, "AI level 3")],
        moves=[MoveRecord("5", "5", 0), MoveRecord("1", "1", 1)],
        status="over",
        result={"winner": None, "reason": "abandoned"},
        version=4,
        created_ms=100,
        updated_ms=400,
    )
    events = [
        {"kind": "created", "seat": 0, "version": 1, "at": 100},
        {"kind": "move", "seat": 0, "move": "5", "version": 2, "at": 200},
        {"kind": "move", "seat": 1, "move": "1", "version": 3, "at": 300},
        {"kind": "over", "version": 4, "at": 390},
    ]
    got = record_of(room, events)
    assert got == {
        "id": "abcd1234",
        "game": "tictactoe",
        "options": {},
        "start": "start",
        "players": [
            {
                "seat": 0,
                "name": "Ann",
                "kind": "human",
                "level": None,
                "player": None,
                "engine": None,
            },
            {
                "seat": 1,
                "name": "AI level 3",
                "kind": "ai",
                "level": 3,
                "player": None,
                "engine": None,
            },
        ],
        "time_control": None,
        "moves": [
            {"move": "5", "display": "5", "seat": 0, "at_ms": 200, "clocks_ms": None},
            {"move": "1", "display": "1", "seat": 1, "at_ms": 300, "clocks_ms": None},
        ],
        "result": {"winner": None, "reason": "abandoned"},
        "status": "over",
        "started_ms": 100,
        "ended_ms": 390,
        "chat": [],
    }
    # A trimmed event stream: the lost move times fall back to the room's last update.
    assert [m["at_ms"] for m in record_of(room, events[2:])["moves"]] == [400, 300]


def test_a_takeback_drops_the_undone_moves_from_the_record() -> None:
    room = Room(
        id="abcd1234",
        game="tictactoe",
        options={},
        start="start",
        seats=[Seat("human", None, "h", "Ann"), Seat("human", None, "g", "Bob")],
        moves=[MoveRecord("5", "5", 0), MoveRecord("2", "2", 1)],
        version=7,
        created_ms=100,
        updated_ms=700,
    )
    events = [
        {"kind": "move", "seat": 0, "move": "5", "version": 2, "at": 200},
        {"kind": "move", "seat": 1, "move": "1", "version": 3, "at": 300},
        {"kind": "move", "seat": 0, "move": "9", "version": 4, "at": 400},
        {"kind": "takeback_offer", "seat": 1, "version": 5, "at": 500},
        {"kind": "takeback", "seat": 0, "undone": 2, "version": 6, "at": 600},
        {"kind": "move", "seat": 1, "move": "2", "version": 7, "at": 700},
    ]
    moves = record_of(room, events)["moves"]
    assert [(m["move"], m["at_ms"]) for m in moves] == [("5", 200), ("2", 700)]


CHAT = [
    {"channel": "players", "id": 1, "seat": 0, "name": "Ann", "text": "gl <b>hf</b>", "at": 150},
    {"channel": "spectators", "id": 1, "seat": None, "name": "kib", "text": "é\u00a0✓", "at": 160},
]


async def test_the_chat_is_kept_in_the_archived_record(archive: Archive) -> None:
    """Both channels' lines, in the record's JSON: no column of their own, so no
    migration; they come back exactly as they were said."""
    with_chat = {**record("chatty", 2000), "chat": CHAT}
    await archive.save(with_chat)
    assert (await archive.get("chatty"))["chat"] == CHAT


def test_record_of_carries_the_chat_it_is_given() -> None:
    seats = [Seat("human", None, "h", "Ann"), Seat("human", None, "g", "Bob")]
    room = Room(id="abcd1234", game="tictactoe", options={}, start="start", seats=seats)
    assert record_of(room, [])["chat"] == []
    assert record_of(room, [], CHAT)["chat"] == CHAT
