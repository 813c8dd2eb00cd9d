"""Finished games in a real database: SQLite by default, PostgreSQL for a cluster.

The table ``games``: the game record as JSON (:mod:`kibitz.server.domain.records`) plus the
columns we look games up by, each indexed together with the listing order
(``ended_ms`` then ``id``, newest first), so listing a player's or a game's records is
an index scan. The schema is versioned with Alembic (``server/archive/migrations``) and
brought to the newest revision when the archive is opened.

- ``save(record)``: insert, or replace the row with the same id (idempotent: saving
  the same game twice leaves one row);
- ``before_save``: a hook run in the save's transaction for each record (the ratings'
  exactly-once ``apply``, set by server/node.py); the fields it returns go into the record;
  ``before_batch``: one run first with all of them (the ratings' ``lock_batch``);
- ``get(id)``: the record, or None;
- ``list(player=, game=, limit=, before=)``: newest first, one page and an opaque
  cursor for the next one (the (ended ms, id) of the page's last game, written by
  :mod:`kibitz.server.domain.cursor`);
- ``save_analysis(analysis)`` / ``get_analysis(id)`` / ``delete_analysis(id)``: a game's
  analysis (``server/services/analysis.py``), one row per game in the table ``analyses``.

URLs: ``sqlite:///PATH`` or ``postgresql://USER@HOST/DB`` are turned into their asyncio
drivers (aiosqlite, asyncpg); URLs that already name a driver are taken as they are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from kibitz.server.archive.tables import analyses, games
from kibitz.server.domain.cursor import ARCHIVE_ID, Cursor, decode_cursor
from kibitz.shared import fastjson

log = logging.getLogger(__name__)

MAX_PAGE = 100  # records per list() call
MIGRATION_ATTEMPTS = 5  # several nodes may start at once on one database
SQLITE_BUSY_MS = 10_000  # a writer waits this long for another process's lock


#: A hook of ``save_many``: (the transaction's connection, a record) -> fields to set on
#: the record before it is stored, or None.
BeforeSave = Callable[[AsyncConnection, dict[str, Any]], Awaitable[dict[str, Any] | None]]
#: A hook of ``save_many``, run once in its transaction before ``before_save``: (the
#: connection, every record of the batch).
BeforeBatch = Callable[[AsyncConnection, list[dict[str, Any]]], Awaitable[None]]


class ArchiveError(ValueError):
    """A request the archive refuses (bad cursor, bad limit, a record it cannot store)."""


class ArchiveUnavailable(RuntimeError):
    """The database could not be reached or brought up to date at startup."""


class Page(NamedTuple):
    """One page of ``Archive.list``: records newest first, and the cursor for the next
    page (None when this is the last)."""

    records: list[dict[str, Any]]
    cursor: str | None


def _cursor(text: str) -> Cursor:
    """The (ended ms, id) a page's cursor names (:mod:`kibitz.server.domain.cursor`);
    ArchiveError if it is not a cursor of ours."""
    cursor = decode_cursor(text, ARCHIVE_ID)
    if cursor is None:
        raise ArchiveError(f"not a cursor from this archive: {text[:80]!r}")
    return cursor


def async_url(url: str) -> str:
    """``url`` with the asyncio driver we use for its database."""
    for plain, driver in (
        ("postgresql://", "postgresql+asyncpg://"),
        ("postgres://", "postgresql+asyncpg://"),
        ("sqlite://", "sqlite+aiosqlite://"),
    ):
        if url.startswith(plain):
            return driver + url[len(plain) :]
    return url


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


def display_url(url: str) -> str:
    """The URL without its password, for logs."""
    return sa.make_url(async_url(url)).render_as_string(hide_password=True)


def row_of(record: dict[str, Any]) -> dict[str, Any]:
    """The table row of a game record (the indexed columns beside the JSON)."""
    if record.get("ended_ms") is None:
        raise ArchiveError(f"game {record.get('id')!r} has not ended; only finished games")
    try:
        players = record["players"]
        result = record["result"] or {}
        return {
            "id": str(record["id"]),
            "game": str(record["game"]),
            "status": str(record["status"]),
            "started_ms": int(record["started_ms"]),
            "ended_ms": int(record["ended_ms"]),
            "player0": players[0].get("player"),
            "player1": players[1].get("player"),
            "winner": result.get("winner"),
            "reason": result.get("reason"),
            "record": record,
        }
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ArchiveError(f"not a game record: {exc!r}") from None


def _json_text(value: Any) -> str:
    """A JSON column's value as the database takes it: text."""
    return fastjson.dumps(value).decode()


class Archive:
    """The finished-games database. ``await Archive.open(url)``; ``await close()``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._upserts: dict[str, Any] = {}  # table name -> its upsert statement
        #: Called in ``save_many``'s transaction for each record before it is stored
        #: (set by the composition root: the ratings' ``apply``).
        self.before_save: BeforeSave | None = None
        #: Called once in that transaction first, with every record (the ratings'
        #: ``lock_batch``: the batch's locks in one order, so batches do not deadlock).
        self.before_batch: BeforeBatch | None = None

    @classmethod
    async def open(cls, url: str) -> Archive:
        """Connect to ``url`` and bring its schema to the newest migration;
        ArchiveUnavailable if the database cannot be reached or migrated."""
        try:
            engine = create_async_engine(
                async_url(url),
                pool_pre_ping=True,
                json_serializer=_json_text,  # records are written on every game's end
                json_deserializer=fastjson.loads,
            )
        except (SQLAlchemyError, ImportError, ValueError) as exc:
            raise ArchiveUnavailable(f"not a database URL we can use: {exc}") from exc
        if engine.dialect.name == "sqlite":
            sa.event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        archive = cls(engine)
        try:
            await archive.migrate()
        except (SQLAlchemyError, OSError) as exc:
            await engine.dispose()
            raise ArchiveUnavailable(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            await engine.dispose()
            raise
        return archive

    async def close(self) -> None:
        await self.engine.dispose()

    async def migrate(self) -> None:
        """``alembic upgrade head``, retried: two nodes starting on an empty database may
        both try to create the tables, and the loser just finds them made."""
        for attempt in range(1, MIGRATION_ATTEMPTS + 1):
            try:
                async with self.engine.begin() as conn:
                    if conn.dialect.name == "postgresql":
                        # One migrating node at a time; the lock ends with the transaction.
                        await conn.execute(sa.text("SELECT pg_advisory_xact_lock(80087)"))
                    await conn.run_sync(_upgrade_head)
                return
            except (SQLAlchemyError, OSError) as exc:
                if attempt == MIGRATION_ATTEMPTS:
                    raise
                log.warning("migrating the archive failed (%s); retrying", type(exc).__name__)
                await asyncio.sleep(0.2 * attempt)

    async def save(self, record: dict[str, Any]) -> None:
        """Store ``record`` (a dict from ``records.record_of``), replacing any row with
        its id."""
        await self.save_many([record])

    async def save_many(self, records: list[dict[str, Any]]) -> None:
        """Store ``records`` in one transaction: all of them, or (on an error) none.
        ArchiveError, before anything is written, if one of them is not a finished game.

        With a ``before_save`` hook (the ratings: server/ratings/store.py ``apply``), each
        record is first given to it on the same connection, in the same transaction, and
        the fields it returns are set on the record before it is stored, so a game's
        rating change and its archived record are written together or not at all; the
        records given get those fields once the transaction is committed."""
        for record in records:
            row_of(record)  # every record checked before anything is written
        if self.before_save is None:
            await self._upsert(games, "id", [row_of(record) for record in records])
            return
        stored: list[dict[str, Any]] = []
        async with self.engine.begin() as conn:
            if self.before_batch is not None:
                await self.before_batch(conn, records)
            for record in records:
                fields = await self.before_save(conn, record)
                stored.append({**record, **fields} if fields else record)
            await conn.execute(self._upsert_statement(games, "id"), [row_of(r) for r in stored])
        for record, written in zip(records, stored, strict=True):
            if written is not record:
                record.update(written)

    async def save_analysis(self, analysis: dict[str, Any]) -> None:
        """Store a game's analysis (a dict from ``analysis.finished_analysis``), replacing
        any earlier one of the same game."""
        row = {
            "game_id": str(analysis["id"]),
            "status": str(analysis["status"]),
            "finished_ms": int(analysis["finished_ms"]),
            "analysis": analysis,
        }
        await self._upsert(analyses, "game_id", [row])

    async def _upsert(self, table: sa.Table, key: str, rows: list[dict[str, Any]]) -> None:
        """Insert ``rows`` (each with every column of ``table``) into ``table``, each
        replacing the row with the same ``key``, in one transaction."""
        statement = self._upsert_statement(table, key)
        async with self.engine.begin() as conn:
            await conn.execute(statement, rows)

    def _upsert_statement(self, table: sa.Table, key: str) -> Any:
        """The statement inserting rows into ``table``, each replacing the row with the
        same ``key``; built once per table (building it costs more than running it)."""
        statement = self._upserts.get(table.name)
        if statement is None:
            insert = (
                postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
            )
            statement = insert(table)
            statement = statement.on_conflict_do_update(
                index_elements=[table.c[key]],
                set_={c.name: statement.excluded[c.name] for c in table.c if c.name != key},
            )
            self._upserts[table.name] = statement
        return statement

    async def get_analysis(self, game_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = await conn.execute(
                sa.select(analyses.c.analysis).where(analyses.c.game_id == game_id)
            )
            analysis = row.scalar_one_or_none()
        return dict(analysis) if analysis is not None else None

    async def delete_analysis(self, game_id: str) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(sa.delete(analyses).where(analyses.c.game_id == game_id))

    async def get(self, game_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = await conn.execute(sa.select(games.c.record).where(games.c.id == game_id))
            record = row.scalar_one_or_none()
        return dict(record) if record is not None else None

    async def list(
        self,
        player: str | None = None,
        game: str | None = None,
        limit: int = 20,
        before: str | None = None,
    ) -> Page:
        """Finished games, newest first: all, a player's (either seat) and/or a game's.

        ``before`` is the cursor of the previous page. A player's games are two index
        scans (one per seat column) merged, each stopping after ``limit`` rows.
        """
        if not 1 <= limit <= MAX_PAGE:
            raise ArchiveError(f"limit must be 1 to {MAX_PAGE}, not {limit}")
        cursor = _cursor(before) if before else None

        def page(seat_column: sa.Column[Any] | None) -> sa.Select[Any]:
            query = sa.select(games.c.record, games.c.ended_ms, games.c.id)
            if seat_column is not None:
                query = query.where(seat_column == player)
            if game is not None:
                query = query.where(games.c.game == game)
            if cursor is not None:
                query = query.where(
                    sa.or_(
                        games.c.ended_ms < cursor.ms,
                        sa.and_(games.c.ended_ms == cursor.ms, games.c.id < cursor.id),
                    )
                )
            return query.order_by(games.c.ended_ms.desc(), games.c.id.desc()).limit(limit + 1)

        seat_columns = [None] if player is None else [games.c.player0, games.c.player1]
        queries = [page(column) for column in seat_columns]
        rows: dict[str, tuple[int, dict[str, Any]]] = {}
        async with self.engine.connect() as conn:
            for query in queries:
                for record, ended_ms, game_id in await conn.execute(query):
                    rows[game_id] = (int(ended_ms), dict(record))
        ordered = sorted(rows.items(), key=lambda item: (item[1][0], item[0]), reverse=True)
        more = len(ordered) > limit
        ordered = ordered[:limit]
        next_cursor = None
        if more and ordered:
            last_id, (last_ended, _) = ordered[-1]
            next_cursor = Cursor(last_ended, last_id).encode()
        return Page([record for _, (_, record) in ordered], next_cursor)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL lets readers go on while a node writes; busy_timeout makes a writer wait for
    another process's lock instead of failing at once (nodes may share the file)."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cursor.close()


def _upgrade_head(connection: Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
