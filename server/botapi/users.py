"""Accounts, users and finished games in lichess's JSON shapes, and the reads behind them.

lichess names a user by its **id** (the username in lower case) and shows it as a *User*
object: ``{"id", "username", "title"?: "BOT", "createdAt": ms, "seenAt"?: ms, "perfs",
"url", "playing"?}``. ``perfs`` has one entry per rating the account has:
``{"games", "rating", "rd", "prog": 0, "prov"}`` (``prog``, the progress over the last
games, we do not keep: always 0), keyed by lichess's perf keys for chess (``bullet``,
``blitz``, ``rapid``, ``classical``, ``correspondence``) and ``GAME_SPEED`` for the
other games (``othello_timed``, ``draughts_blitz``): :func:`perf_key`. The ratings are
the ones of server/ratings/ (per account; a bot's rated games move its rating as
anyone's, and the leaderboards rank bots apart).

A finished or live game is exported as lichess's game JSON (:func:`game_json`) from its
record (server/domain/records.py), with the status, variant and winner of
server/botapi/formats.py.

The builders are pure; the reads (:func:`find_users`, :func:`online_ids`,
:func:`has_unarchived_rooms`) go through the app's stores.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from aiohttp import web

from kibitz.server.accounts.names import username_key, valid_username
from kibitz.server.appkeys import ARCHIVE_KEY, LIMITS_KEY, RATINGS_KEY, REDIS_KEY, STORE_KEY
from kibitz.server.botapi import formats
from kibitz.server.domain.players import Account
from kibitz.server.domain.speeds import ESTIMATED_MOVES, SpeedError, speed_of
from kibitz.server.ratings import leaderboard as boards
from kibitz.server.ratings.leaderboard import ProfileAccount
from kibitz.shared.bus.account_events import AccountEvents

#: The online set read for ``GET /api/bot/online`` (people and bots), at most.
ONLINE_SCAN = 1000
#: Rooms of the per-player index the upgrade to a bot account looks at, at most.
INDEX_ROOMS = 50


def now_ms() -> int:
    return int(time.time() * 1000)


# -- names and places ----------------------------------------------------------------------


def public_origin(request: web.Request) -> str:
    """The site's origin as browsers see it: the first of ``--public-origin`` (sorted),
    else the origin this request was made to."""
    configured = request.app[LIMITS_KEY].public_origins
    return min(configured) if configured else str(request.url.origin())


def user_url(origin: str, username: str) -> str:
    """The web page of a user (its profile)."""
    return f"{origin}/?player={quote(username, safe='')}"


def game_url(origin: str, room_id: str) -> str:
    """The web page of a game (its room)."""
    return f"{origin}/?room={quote(room_id, safe='')}"


def title_of(account: Account | ProfileAccount) -> dict[str, str]:
    """``{"title": "BOT"}`` for a bot account, else nothing (no other titles here)."""
    return {"title": "BOT"} if account.bot else {}


def light_user(account: Account | ProfileAccount) -> dict[str, Any]:
    """lichess's LightUser of an account: ``{"id", "name", "title"?}``."""
    return {"id": formats.user_id(account.username), "name": account.username, **title_of(account)}


# -- perfs ----------------------------------------------------------------------------------


def perf_key(game: str, speed: str) -> str:
    """lichess's perf key of a rating: the speed for chess (``blitz``), else
    ``GAME_SPEED`` (``othello_timed``)."""
    return speed if formats.variant_key(game) == "standard" else f"{game}_{speed}"


def perfs_json(ratings: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """``perfs`` of a User from an account's ratings ({game: {speed: {"rating", "rd",
    "provisional", "games", ...}}}, as the rating store reads them)."""
    return {
        perf_key(game, speed): {
            "games": int(rating["games"]),
            "rating": int(rating["rating"]),
            "rd": int(rating["rd"]),
            "prog": 0,
            "prov": bool(rating["provisional"]),
        }
        for game, speeds in sorted(ratings.items())
        for speed, rating in speeds.items()
    }


def user_json(
    account: ProfileAccount,
    ratings: Mapping[str, Mapping[str, Mapping[str, Any]]],
    origin: str,
    playing: str | None = None,
) -> dict[str, Any]:
    """lichess's User object of ``account`` (public parts only: the account's own view
    adds nothing private here). ``playing``: a room it plays in now. A banned account
    shows only ``{"id", "username", "disabled": true}``."""
    if account.disabled:
        return {"id": formats.user_id(account.username), "username": account.username,
                "disabled": True}  # fmt: skip
    user: dict[str, Any] = {
        "id": formats.user_id(account.username),
        "username": account.username,
        **title_of(account),
        "createdAt": account.created_ms,
        "perfs": perfs_json(ratings),
        "url": user_url(origin, account.username),
    }
    if account.seen_ms is not None:
        user["seenAt"] = account.seen_ms
    if playing is not None:
        user["playing"] = game_url(origin, playing)
    return user


# -- reads ------------------------------------------------------------------------------------


async def find_users(
    app: web.Application,
    names: Sequence[str] = (),
    ids: Sequence[int] = (),
    bot: bool | None = None,
) -> list[ProfileAccount]:
    """The accounts named (in any case; a name no account can have is not looked up) or
    of these ids, in the order asked (see
    :func:`kibitz.server.ratings.leaderboard.profile_accounts` for the bounds)."""
    keys = [username_key(name) for name in names if valid_username(name)]
    engine = app[ARCHIVE_KEY].engine
    return await boards.profile_accounts(engine, keys=keys, ids=ids, bot=bot)


async def ratings_of(
    app: web.Application, accounts: Sequence[ProfileAccount]
) -> dict[int, dict[str, dict[str, dict[str, Any]]]]:
    """Every rating of each of ``accounts``, now, in one read."""
    store = app[RATINGS_KEY]
    ids = [account.id for account in accounts]
    return await boards.ratings_of_many(store.engine, ids, store.clock())


async def online_ids(app: web.Application, account_ids: Sequence[int]) -> set[int]:
    """Which of the accounts have an open event stream now (on any node)."""
    return await AccountEvents(app[REDIS_KEY]).online(account_ids, now_ms())


async def online_bots(app: web.Application, count: int) -> list[ProfileAccount]:
    """Up to ``count`` bot accounts with an open event stream, the most recently seen
    first (the online set, at most ONLINE_SCAN entries, read in batches of accounts)."""
    ids = await AccountEvents(app[REDIS_KEY]).online_list(ONLINE_SCAN, now_ms())
    found: list[ProfileAccount] = []
    batch = boards.MAX_ACCOUNTS
    for start in range(0, len(ids), batch):
        bots = await find_users(app, ids=ids[start : start + batch], bot=True)
        found.extend(bot for bot in bots if not bot.disabled)
        if len(found) >= count:
            break
    return found[:count]


async def has_unarchived_rooms(app: web.Application, player: str) -> bool:
    """Whether a room Redis still holds (unfinished, or finished and not yet archived)
    seats ``player``, by its per-player index (the newest INDEX_ROOMS rooms)."""
    store = app[STORE_KEY]
    listed = await store.playing.rooms(player, INDEX_ROOMS)
    records = await asyncio.gather(*(store.load_record(room_id) for room_id in listed))
    return any(
        isinstance(seat, dict) and seat.get("player") == player
        for record in records
        if record is not None
        for seat in record.get("seats") or []
    )


# -- games ------------------------------------------------------------------------------------


def _speed(record: Mapping[str, Any]) -> str:
    try:
        return speed_of(str(record["game"]), record.get("time_control"))
    except SpeedError:
        return "correspondence"


def _player_json(record: Mapping[str, Any], seat: int) -> dict[str, Any]:
    """One side of lichess's game JSON: an account's ``{"user": {"id", "name",
    "title"?}, "rating"?, "provisional"?, "ratingDiff"?}``, a guest's ``{"user":
    {"name"}}`` (``{}`` for a guest without a name), the AI's ``{"aiLevel"}``."""
    players = record.get("players") or []
    entry: Mapping[str, Any] = players[seat] if seat < len(players) else {}
    if entry.get("kind") == "ai":
        return {"aiLevel": entry.get("level")}
    account = entry.get("account")
    if not isinstance(account, str):  # a guest: its seat's name, if it gave one
        return {"user": {"name": str(entry["name"])}} if entry.get("name") else {}
    user: dict[str, Any] = {"id": formats.user_id(account), "name": account}
    if entry.get("bot"):
        user["title"] = "BOT"
    side: dict[str, Any] = {"user": user}
    if entry.get("rating") is not None:
        side["rating"] = int(entry["rating"])
    if entry.get("provisional"):
        side["provisional"] = True
    changes = record.get("ratings")
    change = changes[seat] if isinstance(changes, list) and seat < len(changes) else None
    if isinstance(change, Mapping) and change.get("change") is not None:
        side["ratingDiff"] = int(change["change"])
    return side


def game_json(record: Mapping[str, Any]) -> dict[str, Any]:
    """lichess's game JSON (``GET /game/export/{id}``, ``Accept: application/json``) of a
    game record: ``{"id", "rated", "variant", "speed", "perf", "createdAt",
    "lastMoveAt", "status", "players": {"white", "black"}, "winner"?, "moves",
    "clock"? | "daysPerTurn"?}``. ``moves`` are the moves as people write them (SAN in
    chess), space-separated; ``clock`` is in seconds, as lichess's export has it."""
    game = str(record["game"])
    speed = _speed(record)
    moves = record.get("moves") or []
    started = int(record.get("started_ms") or 0)
    last = int(moves[-1].get("at_ms") or started) if moves else started
    body: dict[str, Any] = {
        "id": record["id"],
        "rated": bool(record.get("rated", False)),
        "variant": formats.variant_key(game),
        "speed": speed,
        "perf": perf_key(game, speed),
        "createdAt": started,
        "lastMoveAt": int(record.get("ended_ms") or last),
        "status": formats.status_name(record),
        "players": {formats.colour(seat): _player_json(record, seat) for seat in (0, 1)},
    }
    winner = formats.winner_of(record)
    if winner is not None:
        body["winner"] = winner
    body["moves"] = " ".join(str(move.get("display") or move.get("move")) for move in moves)
    control = record.get("time_control")
    clock = formats.clock_json(control)
    if clock is not None:
        initial, increment = clock["initial"] // 1000, clock["increment"] // 1000
        total = initial + ESTIMATED_MOVES * increment
        body["clock"] = {"initial": initial, "increment": increment, "totalTime": total}
    days = formats.days_per_turn(control)
    if days is not None:
        body["daysPerTurn"] = days
    return body
