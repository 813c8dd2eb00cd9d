"""The account and user paths of lichess's API, and its game export (docs/bot-api.md).

- ``GET /api/account`` (token scope ``read`` or ``play``): the token's account as a
  User (server/botapi/users.py);
- ``POST /api/bot/account/upgrade`` (``play``): the account becomes a bot account for
  good, if it never played: no archived game under any of its player ids, no room in
  Redis seating it (its per-player index); else 400;
- ``GET /api/account/playing?nb=9`` (``read`` or ``play``): ``{"nowPlaying": [G]}``, the
  account's unfinished games as gameStart shows them (server/botapi/game_events.py);
- ``GET|POST /api/token/test``: for each token (POST: the raw body, comma-separated;
  GET: ``?tokens=``, else the request's own), ``{"scopes", "userId", "expires": null}``
  or null; at most MAX_TOKENS per call; nothing is written (no ``used_ms``);
- ``GET /api/users/status?ids=a,b`` (at most MAX_STATUS_IDS): ``[{"id", "name",
  "title"?, "online"?, "playing"?, "playingId"?}]`` for the names that are accounts;
- ``GET /api/user/{username}``: the public User; 404 ``Not found``;
- ``GET /api/bot/online?nb=50`` (NDJSON, at most MAX_ONLINE): bot accounts with an open
  event stream, each a User;
- ``GET /game/export/{id}``: a live or finished game: its notation (PGN for chess, PDN
  for draughts) or, for a game without one, our JSON record; with ``Accept:
  application/json``, lichess's game JSON.

Only ``/api/account``, ``/api/account/playing``, the upgrade and ``GET /api/token/test``
without ``?tokens=`` need a token; the others answer anyone. Where a Bearer token is
given, it must be live (401), and these reads count against the account:
READS_PER_MINUTE per minute, then 429 with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from kibitz.server.accounts.credentials import bearer
from kibitz.server.accounts.errors import AccountError
from kibitz.server.appkeys import ACCOUNTS_KEY, SERVICE_KEY
from kibitz.server.botapi import game_events, users
from kibitz.server.botapi.errors import LICHESS_SCOPES, api_account, api_error, limit, ok
from kibitz.server.botapi.events import NDJSON
from kibitz.server.domain import export
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import RoomError, valid_room_id
from kibitz.server.http.games import load_record
from kibitz.server.http.players import live_rooms_of

READS_PER_MINUTE = 120  # the account's reads of these paths with a token, per minute
MAX_TOKENS = 1000  # tokens one /api/token/test asks about, at most
MAX_TOKEN_BODY = 64 * 1024  # bytes of its body, at most
MAX_STATUS_IDS = 100  # ids one /api/users/status asks about, at most
STATUS_ROOMS = 2  # rooms of each user's index /api/users/status checks for "playing"
DEFAULT_ONLINE, MAX_ONLINE = 50, 300  # /api/bot/online?nb=
DEFAULT_PLAYING, MAX_PLAYING = 9, 20  # /api/account/playing?nb=


def register(app: web.Application) -> None:
    """Add this module's routes."""
    app.router.add_get("/api/account", account)
    app.router.add_post("/api/bot/account/upgrade", upgrade)
    app.router.add_get("/api/account/playing", playing)
    app.router.add_get("/api/token/test", token_test)
    app.router.add_post("/api/token/test", token_test)
    app.router.add_get("/api/users/status", users_status)
    app.router.add_get("/api/user/{username}", public_user)
    app.router.add_get("/api/bot/online", bots_online)
    app.router.add_get("/game/export/{id}", export_game)
    # lichess's game pages, as bridges print them: /{id} and /{id}/{colour}.
    app.router.add_get(f"/{{id:{GAME_PAGE_ID}}}", game_page)
    app.router.add_get(f"/{{id:{GAME_PAGE_ID}}}/{{colour:white|black}}", game_page)


#: A room id in a game page's path (server/domain/room.py::new_room_id: ten characters of
#: its alphabet); a client file's name has a dot, so the two never meet.
GAME_PAGE_ID = "[a-z2-9]{10}"


async def game_page(request: web.Request) -> web.StreamResponse:
    """lichess's page of a game (``/{id}``, ``/{id}/white``): the web client's room page."""
    raise web.HTTPFound(users.game_url(users.public_origin(request), request.match_info["id"]))


# -- who asks ---------------------------------------------------------------------------------


async def reader(request: web.Request) -> Account:
    """The account of a token with the ``read`` or the ``play`` scope (lichess bots hold
    ``bot:play`` only), or of the session cookie; counted against READS_PER_MINUTE."""
    try:
        found = await api_account(request, "read")
    except web.HTTPForbidden:
        found = await api_account(request, "play")
    await limit(request, found, "read", READS_PER_MINUTE, 60)
    return found


async def optional_reader(request: web.Request) -> None:
    """For the paths anyone may read: a Bearer token, if given, must be live, and the
    request counts against its account (no token: the edge's limits only)."""
    if bearer(request.headers) is not None:
        found = await api_account(request, "")
        await limit(request, found, "read", READS_PER_MINUTE, 60)


def whole(request: web.Request, name: str, default: int, most: int) -> int:
    """The query's ``name``, a whole number from 1, clamped to ``most``; 400 if not."""
    text = request.query.get(name)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit() and len(text) <= 6) or int(text) < 1:
        raise api_error(400, f"{name} must be a whole number from 1")
    return min(int(text), most)


def ndjson(items: Sequence[dict[str, Any]]) -> web.Response:
    text = "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in items)
    return web.Response(text=text, content_type=NDJSON)


# -- the account ------------------------------------------------------------------------------


async def account(request: web.Request) -> web.Response:
    """``GET /api/account``: the token's account as a User."""
    me = await reader(request)
    found = await users.find_users(request.app, names=[me.username])
    if not found:
        raise api_error(401, "No such token")
    ratings, rooms = await asyncio.gather(
        users.ratings_of(request.app, found),
        live_rooms_of(request.app, me.player_id, 1),
    )
    origin = users.public_origin(request)
    room = rooms[0] if rooms else None
    return web.json_response(users.user_json(found[0], ratings.get(me.id, {}), origin, room))


async def upgrade(request: web.Request) -> web.Response:
    """``POST /api/bot/account/upgrade``: a bot account, for good (see the module)."""
    me = await api_account(request, "play")
    if me.bot:
        raise api_error(400, "This account is already a bot account.")
    if await users.has_unarchived_rooms(request.app, me.player_id):
        raise api_error(400, "This account has played games: it cannot become a bot account.")
    try:
        await request.app[ACCOUNTS_KEY].make_bot(me.id)
    except AccountError as exc:
        if exc.code == "bot/already":
            raise api_error(400, "This account is already a bot account.") from None
        raise api_error(
            400, "This account has played games: it cannot become a bot account."
        ) from None
    return ok()


async def playing(request: web.Request) -> web.Response:
    """``GET /api/account/playing?nb=``: the account's unfinished games, newest first,
    each as gameStart's game object (seen from the account's seat)."""
    me = await reader(request)
    count = whole(request, "nb", DEFAULT_PLAYING, MAX_PLAYING)
    service = request.app[SERVICE_KEY]
    games: list[dict[str, Any]] = []
    for room_id in await live_rooms_of(request.app, me.player_id, count):
        try:
            room = await service.get(room_id)
        except RoomError:
            continue  # gone since the index was read
        seats = game_events.seats_of(room, me.id)
        if seats and room.status != "over":
            snapshot = await service.snapshot(room)
            games.append(game_events.game_info(room, snapshot, seats[0]))
    return web.json_response({"nowPlaying": games})


# -- tokens -------------------------------------------------------------------------------------


async def token_test(request: web.Request) -> web.Response:
    """``GET|POST /api/token/test``: what each token is (see the module)."""
    if request.method == "POST":
        body = await request.content.read(MAX_TOKEN_BODY + 1)
        if len(body) > MAX_TOKEN_BODY:
            raise api_error(400, f"At most {MAX_TOKENS} tokens")
        text = body.decode("utf-8", errors="replace")
    else:
        text = request.query.get("tokens") or bearer(request.headers) or ""
    asked = [t.strip() for t in text.split(",") if t.strip()]
    if not asked:
        raise api_error(400, "No tokens given")
    if len(asked) > MAX_TOKENS:
        raise api_error(400, f"At most {MAX_TOKENS} tokens")
    found = await request.app[ACCOUNTS_KEY].peek_tokens(asked)
    answer: dict[str, Any] = {}
    for token in asked:
        if token not in found:
            answer[token] = None
            continue
        holder, scopes = found[token]
        named = [name for scope in sorted(scopes) for name in LICHESS_SCOPES.get(scope, ())]
        answer[token] = {
            "scopes": ",".join(dict.fromkeys(named)),
            "userId": holder.username.lower(),
            "expires": None,
        }
    return web.json_response(answer)


# -- users ----------------------------------------------------------------------------------------


async def users_status(request: web.Request) -> web.Response:
    """``GET /api/users/status?ids=a,b[&withGameIds=true]``."""
    await optional_reader(request)
    asked = [name.strip() for name in request.query.get("ids", "").split(",") if name.strip()]
    if len(asked) > MAX_STATUS_IDS:
        raise api_error(400, f"At most {MAX_STATUS_IDS} ids")
    with_ids = request.query.get("withGameIds", "").lower() == "true"
    found = await users.find_users(request.app, names=asked)
    online = await users.online_ids(request.app, [a.id for a in found])
    rooms = await asyncio.gather(
        *(live_rooms_of(request.app, a.player_id, STATUS_ROOMS) for a in found)
    )
    answer = []
    for user, live in zip(found, rooms, strict=True):
        entry = users.light_user(user)
        if user.id in online:
            entry["online"] = True
        if live:
            entry["playing"] = True
            if with_ids:
                entry["playingId"] = live[0]
        answer.append(entry)
    return web.json_response(answer)


async def public_user(request: web.Request) -> web.Response:
    """``GET /api/user/{username}``: the public User, or 404 ``Not found``."""
    await optional_reader(request)
    found = await users.find_users(request.app, names=[request.match_info["username"]])
    if not found:
        raise api_error(404, "Not found")
    user = found[0]
    ratings, rooms = await asyncio.gather(
        users.ratings_of(request.app, found), live_rooms_of(request.app, user.player_id, 1)
    )
    origin = users.public_origin(request)
    room = rooms[0] if rooms else None
    return web.json_response(users.user_json(user, ratings.get(user.id, {}), origin, room))


async def bots_online(request: web.Request) -> web.Response:
    """``GET /api/bot/online?nb=``: NDJSON, one User per online bot account."""
    await optional_reader(request)
    count = whole(request, "nb", DEFAULT_ONLINE, MAX_ONLINE)
    bots = await users.online_bots(request.app, count)
    ratings = await users.ratings_of(request.app, bots)
    origin = users.public_origin(request)
    return ndjson([users.user_json(bot, ratings.get(bot.id, {}), origin) for bot in bots])


# -- games -----------------------------------------------------------------------------------------


async def export_game(request: web.Request) -> web.Response:
    """``GET /game/export/{id}``: the game's notation, or with ``Accept:
    application/json`` lichess's game JSON; 404 ``Not found``."""
    await optional_reader(request)
    game_id = request.match_info["id"]
    record = await load_record(request, game_id) if valid_room_id(game_id) else None
    if record is None:
        raise api_error(404, "Not found")
    if "application/json" in request.headers.get("Accept", ""):
        return web.json_response(users.game_json(record))
    notations = [f for f in export.formats_for(record["game"]) if f != export.JSON_FORMAT]
    text, content_type = export.export(record, notations[0] if notations else export.JSON_FORMAT)
    return web.Response(text=text, content_type=content_type)
