"""Leaderboards and players' profiles over HTTP, and the rating graph as an SVG image.

It decides what these public, read-only routes answer (shapes in docs/protocol.md and
docs/accounts.md, *Leaderboards and profiles*):

- ``GET /api/leaderboard/{game}/{speed}?days=30&limit=50``: the board
  (:func:`kibitz.server.ratings.leaderboard.leaderboard` says who is on it, on the
  ``RatingStore``'s engine and clock, as are the ratings and histories below): people's
  accounts only, or with ``bots=1`` bot accounts only (their own pool, as on lichess);
- ``GET /api/players/{username}``: the profile: the account's public facts, its ratings
  per game and speed with W/D/L, its newest finished games (summaries, from the archive,
  by every player id of the account) and the live rooms it is seated in signed in (from
  the bus's per-player index of accounts' seats, at most MAX_PLAYING rooms read, each
  checked against the room: unfinished and seating the account's player id; stale
  entries are dropped from the index);
- ``GET /api/players/{username}/history?game=G&speed=S``: the rating after each rated
  game (the newest ``MAX_HISTORY``), and ``.../rating.svg`` the same drawn
  (:mod:`kibitz.server.ratings.graph`).

Errors: an unknown player 404 ``player/unknown``; a game or speed without ratings 404
``rating/unknown``; a malformed query 400 ``query/invalid`` (server/http/query.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kibitz.server.accounts.names import username_key, valid_username
from kibitz.server.appkeys import ACCOUNTS_KEY, ARCHIVE_KEY, RATINGS_KEY, STORE_KEY
from kibitz.server.domain.speeds import SPEEDS, SpeedError, speed_of
from kibitz.server.http import query
from kibitz.server.ratings import leaderboard as boards
from kibitz.server.ratings.graph import Point, rating_svg
from kibitz.server.ratings.leaderboard import ProfileAccount
from kibitz.shared.protocol.client_out import Error

DEFAULT_DAYS = 30
DEFAULT_LIMIT = 50
RECENT_GAMES = 10  # finished games a profile lists
#: What a recent game's summary keeps of each seat (guests' seats: account and rating null).
SUMMARY_SEAT = ("seat", "name", "kind", "level", "account", "rating", "provisional", "bot")
MAX_PLAYING = 20  # live rooms a profile lists, and rooms it reads for that, at most
BOTS_CHOICES = ("0", "1", "false", "true")  # ?bots=: the people's board or the bots'
CACHE = "public, max-age=30"  # leaderboards and graphs may be this stale
#: The graph is our own drawing: nothing in it may load or run anything.
SVG_HEADERS = {
    "Cache-Control": CACHE,
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
}


def register(app: web.Application) -> None:
    """Add the routes of this module to ``app``."""
    app.router.add_get("/api/leaderboard/{game}/{speed}", api_leaderboard)
    app.router.add_get("/api/players/{username}", api_profile)
    app.router.add_get("/api/players/{username}/history", api_history)
    app.router.add_get("/api/players/{username}/rating.svg", api_rating_svg)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(Error(code, message).to_dict(), status=status)


def _unknown_board(game: str, speed: str) -> web.Response | None:
    """The 404 for a game or speed that has no ratings; None when both have."""
    if speed in SPEEDS.get(game, ()):
        return None
    return _error(404, "rating/unknown", f"no ratings for {game[:40]!r} at {speed[:40]!r}")


async def _account_or_404(request: web.Request) -> ProfileAccount | web.Response:
    """The account the URL names, in any case; a name no account can have is not looked
    up."""
    name = request.match_info["username"]
    account = None
    if valid_username(name):
        engine = request.app[ARCHIVE_KEY].engine
        account = await boards.profile_account(engine, username_key(name))
    if account is None:
        return _error(404, "player/unknown", f"no player named {name[:40]!r}")
    return account


# -- leaderboards ------------------------------------------------------------------------------


async def api_leaderboard(request: web.Request) -> web.Response:
    """``{"game", "speed", "days", "bots", "players": [{"rank", "username", "rating",
    "rd", "games", "bot"}]}``, best first: people, or with ``bots=1`` bots."""
    game, speed = request.match_info["game"], request.match_info["speed"]
    unknown = _unknown_board(game, speed)
    if unknown is not None:
        return unknown
    try:
        days = query.whole_number(request.query, "days", DEFAULT_DAYS, 1, boards.MAX_DAYS)
        limit = query.whole_number(request.query, "limit", DEFAULT_LIMIT, 1, boards.MAX_LIMIT)
        bots = query.choice(request.query, "bots", BOTS_CHOICES, "1 (bots) or 0 (people)")
    except query.QueryError as exc:
        return query.refusal(exc)
    store = request.app[RATINGS_KEY]
    pool = bots in ("1", "true")
    leaders = await boards.leaderboard(
        store.engine, game, speed, store.clock(), days, limit, bots=pool
    )
    body = {
        "game": game,
        "speed": speed,
        "days": days,
        "bots": pool,
        "players": [leader.to_dict() for leader in leaders],
    }
    return web.json_response(body, headers={"Cache-Control": CACHE})


# -- profiles ----------------------------------------------------------------------------------


async def api_profile(request: web.Request) -> web.Response:
    """The profile of the account the URL names (see the module's docstring)."""
    account = await _account_or_404(request)
    if isinstance(account, web.Response):
        return account
    engine = request.app[ARCHIVE_KEY].engine
    player_ids = await request.app[ACCOUNTS_KEY].player_ids(account.id) or [account.player_id]
    ratings, recent, playing = await asyncio.gather(
        request.app[RATINGS_KEY].ratings_of(account.id),
        boards.recent_games(engine, player_ids, RECENT_GAMES),
        live_rooms_of(request.app, account.player_id),
    )
    own = set(player_ids)
    return web.json_response(
        {
            "username": account.username,
            "player": account.player_id,
            "created_ms": account.created_ms,
            "bot": account.bot,
            "mark": account.mark,
            "ratings": ratings,
            "recent": [game_summary(record, own) for record in recent],
            "playing": playing,
        }
    )


def _outcome(winner: Any, seat: int | None) -> str | None:
    """The game's result for the player in ``seat``: "win", "loss" or "draw"."""
    if seat is None:
        return None
    if winner is None:
        return "draw"
    return "win" if winner == seat else "loss"


def _speed(record: dict[str, Any]) -> str | None:
    try:
        return speed_of(str(record.get("game")), record.get("time_control"))
    except SpeedError:
        return None


def game_summary(record: dict[str, Any], own: set[str]) -> dict[str, Any]:
    """One line of a profile's recent games: the record without its moves and chat, the
    seat of the profile's player in it and how it ended for them."""
    players = record.get("players") or []
    seat = next((p.get("seat") for p in players if p.get("player") in own), None)
    result = record.get("result") or {}
    return {
        "id": record.get("id"),
        "game": record.get("game"),
        "speed": _speed(record),
        "rated": bool(record.get("rated", False)),
        "time_control": record.get("time_control"),
        "started_ms": record.get("started_ms"),
        "ended_ms": record.get("ended_ms"),
        "plies": len(record.get("moves") or []),
        "result": result or None,
        "players": [{key: p.get(key) for key in SUMMARY_SEAT} for p in players],
        "ratings": record.get("ratings"),
        "seat": seat,
        "outcome": _outcome(result.get("winner"), seat),
    }


async def live_rooms_of(app: web.Application, player: str, count: int = MAX_PLAYING) -> list[str]:
    """The unfinished rooms (ids, the newest seating first) the account whose player id
    is ``player`` sits in: its per-player index (only accounts' seats are noted), at
    most ``count`` (at most MAX_PLAYING) rooms read and checked; what fails the check is
    taken off it."""
    store = app[STORE_KEY]
    listed = await store.playing.rooms(player, max(1, min(count, MAX_PLAYING)))
    records = await asyncio.gather(*(store.load_record(room_id) for room_id in listed))
    live = [r for r, record in zip(listed, records, strict=True) if _seats(record, player)]
    await store.playing.drop(player, [r for r in listed if r not in live])
    return live


def _seats(record: dict[str, Any] | None, player: str) -> bool:
    """Whether a room record is unfinished and seats ``player``."""
    if record is None or record.get("status") == "over":
        return False
    seats = record.get("seats") or []
    return any(isinstance(s, dict) and s.get("player") == player for s in seats)


# -- rating history ----------------------------------------------------------------------------


def _board_of(request: web.Request) -> tuple[str, str] | web.Response:
    """The ``game`` and ``speed`` a history is asked for: both needed (400), both rated
    (404)."""
    try:
        game = query.text(request.query, "game")
        speed = query.text(request.query, "speed")
    except query.QueryError as exc:
        return query.refusal(exc)
    if game is None or speed is None:
        return query.refusal(query.QueryError("give both game and speed"))
    return _unknown_board(game, speed) or (game, speed)


async def _history(
    request: web.Request,
) -> tuple[ProfileAccount, str, str, list[Any]] | web.Response:
    board = _board_of(request)
    if isinstance(board, web.Response):
        return board
    account = await _account_or_404(request)
    if isinstance(account, web.Response):
        return account
    game, speed = board
    points = await request.app[RATINGS_KEY].history(account.id, game, speed)
    return account, game, speed, points


async def api_history(request: web.Request) -> web.Response:
    """``{"username", "game", "speed", "points": [{"ended_ms", "rating", "rd",
    "game_id"}]}``, oldest first."""
    found = await _history(request)
    if isinstance(found, web.Response):
        return found
    account, game, speed, points = found
    body = {"username": account.username, "game": game, "speed": speed, "points": points}
    return web.json_response(body)


async def api_rating_svg(request: web.Request) -> web.Response:
    """The history drawn: ``image/svg+xml``."""
    found = await _history(request)
    if isinstance(found, web.Response):
        return found
    account, game, speed, points = found
    drawn = [Point(p["ended_ms"], p["rating"], p["rd"]) for p in points]
    title = f"{account.username}: {game} {speed} rating"
    return web.Response(
        text=rating_svg(drawn, title),
        content_type="image/svg+xml",
        headers=SVG_HEADERS,
    )
