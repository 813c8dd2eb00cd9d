"""Ratings in the database (the Archive's engine): a seat's rating when it is taken, and
a rated game's change applied exactly once, inside the transaction that archives it.

- ``seat_rating(account_id, game, speed)``: the rounded rating and whether it is
  provisional, with the RD grown for the time since the account's last rated game
  (an account with no rating yet: 1500, provisional).
- ``apply(conn, record)``: on the archive's connection, in its transaction
  (server/archive/database.py, ``save_many``): first a ``rated_games`` row for the game
  (insert-or-nothing on its id), so a game already applied (a second archiver, a retry
  after a crash) returns the changes stored then and writes nothing; else each account's
  ``ratings`` row is read, the game applied (server/ratings/outcome.py), the rows
  written, one ``rating_history`` row per account appended, and the changes stored on
  the ``rated_games`` row. Returns ``{"ratings": [SEAT_CHANGE | None, SEAT_CHANGE |
  None]}`` for the record, or None for a casual game. A record that cannot be rated
  (one account in both seats, an unknown level) is claimed with no change.
- ``lock_batch(conn, records)``: first in that transaction (the archive's
  ``before_batch``), on PostgreSQL: a transaction lock (``pg_advisory_xact_lock``) on
  every account the batch's rated records name and on each of those games, all taken
  in one sorted order before anything is applied. Two nodes archiving batches that
  share players, in any order of games, so wait for each other instead of deadlocking
  (locking per record, a batch [A-B, C-D] and a batch [C-D, A-B] each held what the
  other needed next). The locks cover accounts with no ``ratings`` row yet too, so two
  games making one account's first rating at once are applied one after the other.
  SQLite has one writer at a time: nothing to lock.
- ``leaderboard``, ``history``, ``ratings_of``: the bounded reads of
  server/ratings/leaderboard.py (the profiles' one copy of them) at the store's clock.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from kibitz.server.archive.tables import accounts, rated_games, rating_history, ratings
from kibitz.server.domain import glicko2
from kibitz.server.domain.glicko2 import Rating
from kibitz.server.ratings import leaderboard as queries
from kibitz.server.ratings import outcome
from kibitz.server.ratings.leaderboard import Leader
from kibitz.server.ratings.outcome import Fixed, NotRated, Player, Seat

log = logging.getLogger(__name__)


def wall_ms() -> int:
    return int(time.time() * 1000)


def rating_of_row(row: Mapping[str, Any] | None) -> tuple[Rating, int | None]:
    """A ``ratings`` row's rating and the time it was last updated (None: no row yet)."""
    if row is None:
        return glicko2.DEFAULT, None
    rating = Rating(float(row["rating"]), float(row["rd"]), float(row["volatility"]))
    return rating, int(row["period_ms"])


def grown_to(row: Mapping[str, Any] | None, now_ms: int) -> Rating:
    """The row's rating with its RD grown to ``now_ms``."""
    rating, since = rating_of_row(row)
    return rating if since is None else glicko2.grown(rating, now_ms - since)


def tally(points: float) -> dict[str, int]:
    """The W/D/L counters one game adds for a seat that scored ``points``."""
    return {
        "wins": int(points == 1.0),
        "draws": int(points == 0.5),
        "losses": int(points == 0.0),
    }


class RatingStore:
    """Ratings on the archive's engine. ``clock``: milliseconds since the epoch."""

    def __init__(self, engine: AsyncEngine, clock: Callable[[], int] = wall_ms) -> None:
        self.engine = engine
        self.clock = clock

    async def seat_rating(self, account_id: int, game: str, speed: str) -> tuple[int, bool]:
        """The account's rating in ``game`` at ``speed`` now: rounded, and provisional?"""
        async with self.engine.connect() as conn:
            row = await _rating_row(conn, account_id, game, speed, lock=False)
        rating = grown_to(row, self.clock())
        return round(rating.rating), glicko2.provisional(rating)

    async def leaderboard(
        self, game: str, speed: str, active_days: int, limit: int
    ) -> list[Leader]:
        """The board of ``game`` at ``speed`` now (server/ratings/leaderboard.py: bounded,
        non-provisional accounts active in the last ``active_days``); ValueError for
        ``active_days`` or ``limit`` out of their bounds."""
        return await queries.leaderboard(self.engine, game, speed, self.clock(), active_days, limit)

    async def history(
        self, account_id: int, game: str, speed: str, limit: int = queries.MAX_HISTORY
    ) -> list[dict[str, Any]]:
        """The account's newest ``limit`` rating points (at most MAX_HISTORY), oldest
        first: {"ended_ms", "rating", "rd", "game_id"}, the values after each game."""
        return await queries.history(self.engine, account_id, game, speed, limit)

    async def ratings_of(self, account_id: int) -> dict[str, dict[str, dict[str, Any]]]:
        """Every rating of the account now: {game: {speed: {"rating", "rd", "provisional",
        "games", "wins", "draws", "losses"}}}."""
        return await queries.ratings_of(self.engine, account_id, self.clock())

    async def apply(
        self, conn: AsyncConnection, record: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Apply a rated game's record once (see the module's docstring); None for a
        casual game or one that cannot be rated (nothing is written then)."""
        if not outcome.is_rated(record):
            return None
        try:
            game = RatedGame.of(record)
        except (NotRated, KeyError, TypeError, ValueError):
            log.warning("rated game %r cannot be rated; left unrated", record.get("id"))
            return None
        if not await _claim(conn, game.game_id, self.clock()):
            return {"ratings": await _stored_changes(conn, game.game_id)}
        changes = await _apply_claimed(conn, game)
        await conn.execute(
            sa.update(rated_games)
            .where(rated_games.c.game_id == game.game_id)
            .values(changes=changes)
        )
        return {"ratings": changes}

    async def lock_batch(self, conn: AsyncConnection, records: list[dict[str, Any]]) -> None:
        """Lock, in one sorted order, the accounts and games of a batch's rated records
        (see the module's docstring); nothing on SQLite or for a casual batch."""
        if conn.dialect.name != "postgresql":
            return
        rated = [record for record in records if outcome.is_rated(record)]
        names = {name for record in rated for name in _names_of(record)}
        keys = {(GAME_LOCKS, _game_key(str(record.get("id")))) for record in rated}
        if names:
            found = await conn.execute(
                sa.select(accounts.c.id).where(accounts.c.username_key.in_(sorted(names)))
            )
            keys |= {(ACCOUNT_LOCKS, int(account)) for account in found.scalars()}
        for space, key in sorted(keys):
            await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(space, key)))


#: The two key spaces of the ratings' transaction locks (pg_advisory_xact_lock(int, int)).
ACCOUNT_LOCKS = 2101
GAME_LOCKS = 2102


def _names_of(record: Mapping[str, Any]) -> list[str]:
    """The lower-case usernames of a rated record's accounts' seats."""
    players = record.get("players")
    if not isinstance(players, list):
        return []
    names = [outcome.account_name(seat) for seat in players if isinstance(seat, Mapping)]
    return [name.lower() for name in names if name is not None][:2]


def _game_key(game_id: str) -> int:
    """A game's lock key: a signed 32-bit number from its id."""
    return zlib.crc32(game_id.encode()) - 2**31


@dataclass(frozen=True, slots=True)
class RatedGame:
    """What applying a rated record needs of it."""

    game_id: str
    game: str
    speed: str
    ended_ms: int
    points: tuple[float, float]
    seats: list[Mapping[str, Any]]

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> RatedGame:
        return cls(
            game_id=str(record["id"]),
            game=str(record["game"]),
            speed=outcome.speed_of_record(record),
            ended_ms=int(record["ended_ms"]),
            points=outcome.scores(record),
            seats=outcome.seats_of(record),
        )


async def _apply_claimed(conn: AsyncConnection, game: RatedGame) -> list[dict[str, int] | None]:
    """Rate a claimed game: read the seats (accounts' rows locked in id order), compute,
    write. A game that cannot be rated after all (one account in both seats, numbers the
    system cannot use) stays claimed with no change."""
    try:
        seats = await _seats(conn, game)
        after = outcome.new_ratings(seats, game.points)
    except (NotRated, ArithmeticError, ValueError) as exc:
        log.error("rated game %s not rated: %s", game.game_id, exc)
        return [None, None]
    for seat, new, points in zip(seats, after, game.points, strict=True):
        if isinstance(seat, Player) and new is not None:
            await _write(conn, seat, new, game, points)
    return outcome.changes_of(seats, after)


async def _claim(conn: AsyncConnection, game_id: str, now_ms: int) -> bool:
    """Insert the game's ``rated_games`` row; False if it was there (already applied)."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = (
        insert(rated_games)
        .values(game_id=game_id, applied_ms=now_ms, changes=[None, None])
        .on_conflict_do_nothing(index_elements=[rated_games.c.game_id])
    )
    result = await conn.execute(statement)
    return bool(result.rowcount)


async def _stored_changes(conn: AsyncConnection, game_id: str) -> list[Any]:
    row = await conn.execute(
        sa.select(rated_games.c.changes).where(rated_games.c.game_id == game_id)
    )
    changes = row.scalar_one_or_none()
    return list(changes) if isinstance(changes, list) else [None, None]


async def _rating_row(
    conn: AsyncConnection, account_id: int, game: str, speed: str, lock: bool
) -> Mapping[str, Any] | None:
    query = sa.select(ratings).where(
        ratings.c.account_id == account_id, ratings.c.game == game, ratings.c.speed == speed
    )
    if lock and conn.dialect.name == "postgresql":
        query = query.with_for_update()
    row = (await conn.execute(query)).mappings().first()
    return dict(row) if row is not None else None


async def _account_id(conn: AsyncConnection, username: str) -> int | None:
    row = await conn.execute(
        sa.select(accounts.c.id).where(accounts.c.username_key == username.lower())
    )
    found = row.scalar_one_or_none()
    return int(found) if found is not None else None


async def _seats(conn: AsyncConnection, game: RatedGame) -> list[Seat]:
    """What each seat is for the rating: the AI, an account (its rating grown to the
    game's end), or a vanished account. Accounts' rows are read (and on PostgreSQL
    locked) in the order of their ids; the batch's transaction locks
    (:meth:`RatingStore.lock_batch`) were taken before, so no other batch holds them."""
    ids: list[int | None] = []
    for seat in game.seats:
        name = outcome.account_name(seat)
        ids.append(await _account_id(conn, name) if name is not None else None)
    accounts_seen = [account for account in ids if account is not None]
    if len(set(accounts_seen)) != len(accounts_seen):
        raise NotRated("one account in both seats")
    rows = {
        account: await _rating_row(conn, account, game.game, game.speed, lock=True)
        for account in sorted(accounts_seen)
    }
    seats: list[Seat] = []
    for seat, account in zip(game.seats, ids, strict=True):
        if seat.get("kind") == "ai":
            seats.append(Fixed(outcome.ai_rating(game.game, seat)))
        elif account is None:
            seats.append(Fixed(outcome.vanished_rating(seat)))
        else:
            row = rows[account]
            since = rating_of_row(row)[1]
            seats.append(Player(account, grown_to(row, game.ended_ms), since))
    return seats


async def _write(
    conn: AsyncConnection, seat: Player, new: Rating, game: RatedGame, points: float
) -> None:
    """The account's new rating (its row made or updated) and its history point."""
    key = {"account_id": seat.account_id, "game": game.game, "speed": game.speed}
    counts = tally(points)
    values = {
        "rating": new.rating, "rd": new.rd, "volatility": new.volatility,
        "period_ms": max(game.ended_ms, seat.since_ms or 0),  # games archived out of order
    }  # fmt: skip
    where = [ratings.c[name] == value for name, value in key.items()]
    updated = await conn.execute(
        sa.update(ratings)
        .where(*where)
        .values(
            **values,
            games=ratings.c.games + 1,
            wins=ratings.c.wins + counts["wins"],
            draws=ratings.c.draws + counts["draws"],
            losses=ratings.c.losses + counts["losses"],
        )
    )
    if not updated.rowcount:
        await conn.execute(sa.insert(ratings).values(**key, **values, games=1, **counts))
    await conn.execute(
        sa.insert(rating_history).values(
            account_id=seat.account_id, game=game.game, speed=game.speed,
            game_id=game.game_id, ended_ms=game.ended_ms, rating=new.rating, rd=new.rd,
            change=new.rating - seat.rating.rating,
        )
    )  # fmt: skip
