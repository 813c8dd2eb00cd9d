"""``/api/rooms`` and ``/api/seeks``: the live rooms, one room, its record, the seeks.

It decides what these routes answer: a page of the unfinished rooms (``limit``,
``before``), a room as a spectator's ``state`` would show it, a room's whole record (with
its game in the game's standard format, such as PGN), and the open seeks.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kibitz.server.appkeys import LIVE_ROOMS_KEY, SEEKS_KEY, SERVICE_KEY
from kibitz.server.domain import export
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Room, RoomError
from kibitz.server.http import query
from kibitz.server.http.rooms_list import MAX_ROOMS_PAGE, live_rooms_page
from kibitz.server.services.seeks import lobby_game
from kibitz.shared.games import Outcome, find_game
from kibitz.shared.protocol.client_out import Error


def register(app: web.Application) -> None:
    """Add the routes of this module to ``app``."""
    app.router.add_get("/api/rooms", api_rooms)
    app.router.add_get("/api/rooms/{room}", api_room)
    app.router.add_get("/api/rooms/{room}/record", api_record)
    app.router.add_get("/api/seeks", api_seeks)


async def api_rooms(request: web.Request) -> web.Response:
    """The unfinished rooms, most recent first, a page at a time (``limit``, ``before``)."""
    service = request.app[SERVICE_KEY]
    try:
        limit = query.whole_number(request.query, "limit", MAX_ROOMS_PAGE, 1, MAX_ROOMS_PAGE)
        before = query.cursor(request.query, "before", "cursor")
    except query.QueryError as exc:
        return query.refusal(exc)
    live = request.app[LIVE_ROOMS_KEY]
    rooms, next_cursor = await live_rooms_page(live, service, limit, before)
    entries = [await lobby_game(service, room) for room in rooms]
    return web.json_response({"rooms": entries, "next": next_cursor})


async def api_seeks(request: web.Request) -> web.Response:
    """The open seeks, oldest first (as the lobby lists them)."""
    return web.json_response({"seeks": await request.app[SEEKS_KEY].open_seeks()})


async def _room_or_404(request: web.Request) -> Room | web.Response:
    """The room the URL names, or the 404 answer with the room's error."""
    try:
        return await request.app[SERVICE_KEY].get(request.match_info["room"])
    except RoomError as exc:
        return web.json_response(Error(exc.code, exc.message).to_dict(), status=404)


async def api_room(request: web.Request) -> web.Response:
    """A room as a spectator's ``state`` on ``watch`` would show it."""
    room = await _room_or_404(request)
    if isinstance(room, web.Response):
        return room
    snap = await request.app[SERVICE_KEY].snapshot(room)
    return web.json_response({**snap, "event": {"kind": "resync"}, "you": None})


async def api_record(request: web.Request) -> web.Response:
    """The whole game for archives: moves, result, the event timeline and, where the
    game has a standard format (PGN for chess), the game in it."""
    room = await _room_or_404(request)
    if isinstance(room, web.Response):
        return room
    service = request.app[SERVICE_KEY]
    game = find_game(room.game)
    moves = [m.move for m in room.moves]
    record: dict[str, Any] = {
        "room": room.id,
        "game": room.game,
        "options": room.options,
        "start": room.start,
        "players": list(game.players),
        "seats": [{"kind": s.kind, "level": s.level, "name": s.name} for s in room.seats],
        "status": room.status,
        "result": room.result,
        "moves": moves,
        "display": [m.display for m in room.moves],
        "created_ms": room.created_ms,
        "updated_ms": room.updated_ms,
        "events": rooms.hide_lines(await service.store.events_since(room.id, -1), room.status),
    }
    if game.record_format:
        headers = {"Event": f"kibitz room {room.id}", "Site": "kibitz"}
        for name, seat in zip(game.players, room.seats, strict=True):
            headers[name] = seat.name or ("AI" if seat.kind == "ai" else "?")
        outcome = Outcome(**room.result) if room.result else None
        start = game.parse_position(room.start)
        record[game.record_format] = game.export_record(
            start,
            moves,
            outcome,
            export.tags(headers),  # escaped: names are typed by people
        )
    return web.json_response(record)
