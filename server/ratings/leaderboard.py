"""The reads behind leaderboards and profiles: SQLAlchemy Core on the players' tables.

It decides who is on a leaderboard and what a profile's ratings and history are:

- a leaderboard (one game and speed) lists the accounts that are not banned, whose rating
  is not provisional once its RD has grown with their inactivity
  (:func:`kibitz.server.domain.glicko2.grown`), and that finished a rated game of that
  game and speed in the last ``days`` (the rating's ``period_ms``, the time of its last
  update, is that game's end); best rating first, then the smaller RD, then the name.
  It is read a bounded batch at a time (the index ``ratings_by_board`` in rating order),
  at most ``SCAN_BATCHES`` batches, so a board full of lapsed players costs a bounded
  read, and may then list fewer than asked;
- an account's ratings: every game and speed it has a rating in, RD grown to now;
- a rating history: the rating and RD after each rated game (``rating_history``), the
  newest ``limit`` points, oldest first;
- a profile's account: by its name's key (the caller checks the name and makes the key:
  server/accounts/names.py, which the ratings do not import); several at once, by keys
  or by ids (at most ``MAX_ACCOUNTS``), with their ratings (``ratings_of_many``), for
  the lichess-compatible API's user lists (server/botapi/users.py);
- a profile's recent games: the newest finished games of any of the account's player ids
  (its own and the guest keys it claimed), one index read per seat column.

Numbers leave here as the API shows them: ratings and RDs rounded to whole points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from kibitz.server.archive.tables import accounts, games, rating_history, ratings
from kibitz.server.domain.glicko2 import PROVISIONAL_RD, Rating, grown, provisional

DAY_MS = 86_400_000
MAX_DAYS = 365
MAX_LIMIT = 100
SCAN_BATCHES = 4  # batches of ``limit`` rows one leaderboard read looks at, at most
MAX_HISTORY = 500  # points of one history, at most
MAX_RATINGS = 200  # rating rows of one account (games x speeds), at most
MAX_RECENT = 50  # a profile's recent games, at most
MAX_PLAYER_IDS = 101  # an account's player ids a read looks at (its own + claimed keys)
MAX_ACCOUNTS = 300  # accounts one read of several looks at, at most


@dataclass(frozen=True, slots=True)
class Leader:
    """One line of a leaderboard."""

    rank: int
    username: str
    rating: int
    rd: int
    games: int
    bot: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "username": self.username,
            "rating": self.rating,
            "rd": self.rd,
            "games": self.games,
            "bot": self.bot,
        }


@dataclass(frozen=True, slots=True)
class ProfileAccount:
    """The public facts of an account a profile shows, and its id for the reads after."""

    id: int
    username: str
    player_id: str
    created_ms: int
    bot: bool
    mark: str | None
    seen_ms: int | None = None  # when it was last seen signed in (a minute's precision)
    disabled: bool = False  # banned: its profile shows no more than its name


def current(row: Any, now_ms: int) -> Rating:
    """A ratings row's rating with its RD grown from its last update to ``now_ms``."""
    stored = Rating(float(row.rating), float(row.rd), float(row.volatility))
    return grown(stored, now_ms - int(row.period_ms))


def _board_query(game: str, speed: str, since_ms: int, bots: bool | None) -> sa.Select[Any]:
    """The candidates of a board, best first: active since ``since_ms``, not banned, bot
    accounts only or people only (``bots`` None: both)."""
    query = (
        sa.select(
            accounts.c.username,
            accounts.c.bot,
            ratings.c.rating,
            ratings.c.rd,
            ratings.c.volatility,
            ratings.c.games,
            ratings.c.period_ms,
        )
        .join(accounts, accounts.c.id == ratings.c.account_id)
        .where(
            ratings.c.game == game,
            ratings.c.speed == speed,
            ratings.c.period_ms >= since_ms,
            # A stored RD above this is provisional whatever the time (it only grows).
            ratings.c.rd <= PROVISIONAL_RD,
            accounts.c.disabled_ms.is_(None),
        )
        .order_by(ratings.c.rating.desc(), ratings.c.rd.asc(), accounts.c.username_key.asc())
    )
    return query if bots is None else query.where(accounts.c.bot == bots)


async def leaderboard(
    engine: AsyncEngine,
    game: str,
    speed: str,
    now_ms: int,
    days: int,
    limit: int,
    bots: bool | None = None,
) -> list[Leader]:
    """The board of ``game`` at ``speed``: at most ``limit`` (1 to MAX_LIMIT) accounts
    active in the last ``days`` (1 to MAX_DAYS), best first (see the module's rule);
    ``bots``: True the bots' pool, False the people's, None both."""
    if not (1 <= days <= MAX_DAYS and 1 <= limit <= MAX_LIMIT):
        raise ValueError(f"days {days} (1-{MAX_DAYS}), limit {limit} (1-{MAX_LIMIT})")
    query = _board_query(game, speed, now_ms - days * DAY_MS, bots)
    found: list[Leader] = []
    async with engine.connect() as conn:
        for batch in range(SCAN_BATCHES):
            rows = (await conn.execute(query.offset(batch * limit).limit(limit))).all()
            for row in rows:
                rating = current(row, now_ms)
                if not provisional(rating) and len(found) < limit:
                    found.append(_leader(len(found) + 1, row, rating))
            if len(found) >= limit or len(rows) < limit:
                break
    return found


def _leader(rank: int, row: Any, rating: Rating) -> Leader:
    return Leader(
        rank=rank,
        username=str(row.username),
        rating=round(rating.rating),
        rd=round(rating.rd),
        games=int(row.games),
        bot=bool(row.bot),
    )


async def ratings_of(
    engine: AsyncEngine, account_id: int, now_ms: int
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every rating of an account: {game: {speed: {"rating", "rd", "provisional",
    "games", "wins", "draws", "losses"}}}, RD grown to ``now_ms``."""
    return (await ratings_of_many(engine, [account_id], now_ms)).get(account_id, {})


async def ratings_of_many(
    engine: AsyncEngine, account_ids: Sequence[int], now_ms: int
) -> dict[int, dict[str, dict[str, dict[str, Any]]]]:
    """:func:`ratings_of` for several accounts (at most MAX_ACCOUNTS, the first ones) in
    one read: {account id: its ratings}; an account without ratings is left out."""
    ids = list(dict.fromkeys(account_ids))[:MAX_ACCOUNTS]
    if not ids:
        return {}
    query = (
        sa.select(ratings)
        .where(ratings.c.account_id.in_(ids))
        .order_by(ratings.c.account_id, ratings.c.game, ratings.c.speed)
        .limit(MAX_RATINGS * len(ids))
    )
    found: dict[int, dict[str, dict[str, dict[str, Any]]]] = {}
    async with engine.connect() as conn:
        for row in await conn.execute(query):
            rating = current(row, now_ms)
            games_of = found.setdefault(int(row.account_id), {})
            games_of.setdefault(str(row.game), {})[str(row.speed)] = {
                "rating": round(rating.rating),
                "rd": round(rating.rd),
                "provisional": provisional(rating),
                "games": int(row.games),
                "wins": int(row.wins),
                "draws": int(row.draws),
                "losses": int(row.losses),
            }
    return found


async def history(
    engine: AsyncEngine, account_id: int, game: str, speed: str, limit: int = MAX_HISTORY
) -> list[dict[str, Any]]:
    """The newest ``limit`` (at most MAX_HISTORY) points of an account's rating in
    ``game`` at ``speed``, oldest first: {"ended_ms", "rating", "rd", "game_id"}."""
    query = (
        sa.select(
            rating_history.c.ended_ms,
            rating_history.c.rating,
            rating_history.c.rd,
            rating_history.c.game_id,
        )
        .where(
            rating_history.c.account_id == account_id,
            rating_history.c.game == game,
            rating_history.c.speed == speed,
        )
        .order_by(rating_history.c.ended_ms.desc(), rating_history.c.id.desc())
        .limit(min(max(1, limit), MAX_HISTORY))
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return [
        {
            "ended_ms": int(row.ended_ms),
            "rating": round(float(row.rating)),
            "rd": round(float(row.rd)),
            "game_id": str(row.game_id),
        }
        for row in reversed(rows)
    ]


#: The columns a :class:`ProfileAccount` is made of.
_PROFILE_COLUMNS = (
    accounts.c.id,
    accounts.c.username,
    accounts.c.player_id,
    accounts.c.created_ms,
    accounts.c.bot,
    accounts.c.mark,
    accounts.c.seen_ms,
    accounts.c.disabled_ms,
)


def _profile_of(row: Any) -> ProfileAccount:
    return ProfileAccount(
        id=int(row.id),
        username=str(row.username),
        player_id=str(row.player_id),
        created_ms=int(row.created_ms),
        bot=bool(row.bot),
        mark=None if row.mark is None else str(row.mark),
        seen_ms=None if row.seen_ms is None else int(row.seen_ms),
        disabled=row.disabled_ms is not None,
    )


async def profile_account(engine: AsyncEngine, key: str) -> ProfileAccount | None:
    """The account whose name's key (``accounts.username_key``: the name as uniqueness
    sees it, server/accounts/names.py) is ``key``, or None."""
    found = await profile_accounts(engine, keys=[key])
    return found[0] if found else None


async def profile_accounts(
    engine: AsyncEngine,
    keys: Sequence[str] = (),
    ids: Sequence[int] = (),
    bot: bool | None = None,
) -> list[ProfileAccount]:
    """The accounts whose name's key is one of ``keys`` or whose id is one of ``ids``
    (at most MAX_ACCOUNTS of each, the first ones), bots only or people only if ``bot``
    says, in the order asked (keys first); what no account matches is left out."""
    wanted_keys = list(dict.fromkeys(keys))[:MAX_ACCOUNTS]
    wanted_ids = list(dict.fromkeys(ids))[:MAX_ACCOUNTS]
    if not wanted_keys and not wanted_ids:
        return []
    query = sa.select(*_PROFILE_COLUMNS, accounts.c.username_key).where(
        sa.or_(accounts.c.username_key.in_(wanted_keys), accounts.c.id.in_(wanted_ids))
    )
    if bot is not None:
        query = query.where(accounts.c.bot == bot)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    order = {key: n for n, key in enumerate(wanted_keys)}
    order_ids = {account_id: len(order) + n for n, account_id in enumerate(wanted_ids)}
    rows = sorted(rows, key=lambda r: order.get(r.username_key, order_ids.get(r.id, 0)))
    return [_profile_of(row) for row in rows]


async def recent_games(
    engine: AsyncEngine, player_ids: Sequence[str], limit: int = MAX_RECENT
) -> list[dict[str, Any]]:
    """The newest ``limit`` (at most MAX_RECENT) finished games any of ``player_ids`` (at
    most MAX_PLAYER_IDS of them, the first ones) played in either seat: their records."""
    ids = list(player_ids)[:MAX_PLAYER_IDS]
    if not ids:
        return []
    query = (
        sa.select(games.c.record)
        .where(sa.or_(games.c.player0.in_(ids), games.c.player1.in_(ids)))
        .order_by(games.c.ended_ms.desc(), games.c.id.desc())
        .limit(min(max(1, limit), MAX_RECENT))
    )
    async with engine.connect() as conn:
        return [dict(record) for record in (await conn.execute(query)).scalars()]
