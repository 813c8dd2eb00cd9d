"""A rated game's rating change is applied exactly once when the node archiving it is
killed: real Redis, real ``kibitz serve`` processes, real WebSockets, two accounts signed
up over HTTP, a real SQLite file or PostgreSQL database.

Two kill points (the archiver's fault-injection knobs, server/loops/archiver.py):
- after reading the archive entry, before writing (``KIBITZ_ARCHIVE_DELAY_MS``): nothing
  is written; the survivor claims the entry and applies the change;
- after the database write (the record and the rating change, one transaction), before
  the acknowledgement (``KIBITZ_ARCHIVE_RELEASE_DELAY_MS``): the survivor claims the
  entry and writes the game again, and the change is not applied a second time.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
import sqlalchemy as sa

from kibitz.client.connection import KibitzClient
from kibitz.server.archive.database import Archive
from kibitz.server.archive.tables import rated_games, rating_history, ratings
from kibitz.server.domain import glicko2
from kibitz.server.domain.anchors import ANCHOR_RD, level_rating
from kibitz.server.domain.glicko2 import Rating
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.keys import ARCHIVERS_GROUP
from tests.conftest import new_postgres_database, start_server
from tests.server.accounts.web import signup
from tests.server.archive.test_archiving import SHORT, eventually
from tests.server.test_rooms import play_random


async def sign_up(url: str, username: str) -> str:
    """A new account's session cookie header (``kibitz_session=...``)."""
    return f"kibitz_session={await signup(url, username)}"


async def create_rated(client: KibitzClient, opponent: str) -> str:
    """A rated tic-tac-toe room made by ``client`` in seat 0 (the Python client's
    ``create`` has no ``rated``); its id."""
    message = {"type": "create", "game": "tictactoe", "opponent": opponent, "seat": 0}
    reply = await client.request({**message, "rated": True})
    client.tokens[reply["room"]] = (reply["seat"], reply["token"])
    client.following.add(reply["room"])
    return str(reply["room"])


async def play_rated(url: str, cookies: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    """The two accounts play a rated tic-tac-toe game to the end; (room, final state)."""
    first = await KibitzClient.open(url, additional_headers={"Cookie": cookies[0]})
    second = await KibitzClient.open(url, additional_headers={"Cookie": cookies[1]})
    async with first as a, second as b:
        room = await create_rated(a, "human")
        await b.join(room)
        rng = random.Random(21)
        final, _ = await asyncio.gather(play_random(a, room, 0, rng), play_random(b, room, 1, rng))
    return room, final


async def table(archive: Archive, which: sa.Table) -> list[dict[str, Any]]:
    async with archive.engine.connect() as conn:
        return [dict(row) for row in (await conn.execute(sa.select(which))).mappings()]


def database_url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'games.sqlite3'}"
    return new_postgres_database(request.getfixturevalue("postgres"))


@pytest.mark.parametrize(
    ("kind", "knob"),
    [
        ("sqlite", "KIBITZ_ARCHIVE_DELAY_MS"),
        ("sqlite", "KIBITZ_ARCHIVE_RELEASE_DELAY_MS"),
        ("postgresql", "KIBITZ_ARCHIVE_RELEASE_DELAY_MS"),
    ],
)
async def test_a_rated_change_is_applied_once_across_a_killed_archiver(
    kind: str, knob: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = database_url(kind, tmp_path, request)
    with EmbeddedRedis(tmp_path / "redis", persist=False) as own:
        client = aioredis.from_url(own.url, decode_responses=True)
        victim = start_server(own.url, database_url=url, args=SHORT,
                              extra_env={knob: "600000"})  # fmt: skip
        survivor = None
        archive = await Archive.open(url)
        try:
            cookies = (
                await sign_up(victim.http_url, "Alice"),
                await sign_up(victim.http_url, "bob"),
            )
            room, final = await play_rated(victim.http_url, cookies)
            winner = final["result"]["winner"]

            async def taken() -> bool:
                pending = await client.xpending(keys.archive(0), ARCHIVERS_GROUP)
                return int(pending["pending"]) == 1

            await eventually(taken)  # the victim holds the entry, unacknowledged
            if knob == "KIBITZ_ARCHIVE_RELEASE_DELAY_MS":  # wait for the write to commit
                await eventually(lambda: archive.get(room), timeout=20)
                first = await archive.get(room)
                assert first is not None and first["rated"] is True
                assert all(change is not None for change in first["ratings"])
            victim.process.send_signal(signal.SIGKILL)
            victim.process.wait(timeout=10)
            written_before = await archive.get(room)
            if knob == "KIBITZ_ARCHIVE_DELAY_MS":
                assert written_before is None and await table(archive, rated_games) == []

            survivor = start_server(own.url, database_url=url, args=SHORT)

            async def released() -> bool:
                pending = await client.xpending(keys.archive(0), ARCHIVERS_GROUP)
                return int(pending["pending"]) == 0 and await client.xlen(keys.archive(0)) == 0

            await eventually(released, timeout=30)  # the survivor wrote it and let it go
            record = await archive.get(room)
            assert record is not None and record["result"] == final["result"]
            changes = record["ratings"]
            if written_before is not None:
                assert changes == written_before["ratings"]
            rows = await table(archive, ratings)
            assert sorted(r["games"] for r in rows) == [1, 1]  # once each, not twice
            assert len(await table(archive, rating_history)) == 2
            assert [r["game_id"] for r in await table(archive, rated_games)] == [room]
            if winner is None:
                assert all(r["draws"] == 1 for r in rows)
            else:
                assert changes[winner]["change"] > 0 > changes[1 - winner]["change"]
            # The record over HTTP shows the same changes.
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{survivor.http_url}/api/games/{room}") as response:
                    assert (await response.json())["ratings"] == changes
        finally:
            await archive.close()
            victim.stop()
            if survivor is not None:
                survivor.stop()
            await client.aclose()


async def test_a_rated_game_against_the_ai_counts_the_level_as_a_fixed_opponent(
    tmp_path: Path,
) -> None:
    """An account plays the AI at level 1 rated (a real worker moves for it): the
    player's change is Glicko-2 against the level's anchor with its fixed RD; the AI's
    seat has no change and no rating row."""
    url = f"sqlite:///{tmp_path / 'games.sqlite3'}"
    with EmbeddedRedis(tmp_path / "redis", persist=False) as own:
        server = start_server(own.url, workers=1, database_url=url, args=SHORT)
        archive = await Archive.open(url)
        try:
            cookie = await sign_up(server.http_url, "Robin")
            async with await KibitzClient.open(
                server.http_url, additional_headers={"Cookie": cookie}
            ) as client:
                room = await create_rated(client, "ai:1")
                final = await play_random(client, room, 0, random.Random(5))

            async def rated_record() -> dict[str, Any] | None:
                record = await archive.get(room)
                return record if record is not None and "ratings" in record else None

            record = await eventually(rated_record, timeout=20)
            assert record["players"][1]["kind"] == "ai" and record["ratings"][1] is None
            assert record["players"][1]["rating"] == level_rating("tictactoe", 1)
            winner = final["result"]["winner"]
            score = 0.5 if winner is None else (1.0 if winner == 0 else 0.0)
            anchor = Rating(level_rating("tictactoe", 1), ANCHOR_RD, 0.06)
            expected = glicko2.update(glicko2.DEFAULT, [(anchor, score)])
            assert record["ratings"][0] == {
                "before": 1500, "after": round(expected.rating),
                "change": round(expected.rating) - 1500, "rd": round(expected.rd),
            }  # fmt: skip
            rows = await table(archive, ratings)
            assert [(r["game"], r["speed"], r["games"]) for r in rows] == [
                ("tictactoe", "correspondence", 1)
            ]
        finally:
            await archive.close()
            server.stop()
