"""Games over HTTP: one game's record, its exports and positions, and the list of games.

A game has one URL, ``/api/games/{id}``, for its whole life: while Redis holds the room
(live, or finished and not yet expired) the record is built from it
(:func:`kibitz.server.domain.records.record_of`), afterwards it comes from the archive (the
database, :class:`kibitz.server.archive.database.Archive`). The record's shape is in
docs/protocol.md.

``GET /api/games`` without parameters answers the catalogue of game kinds; with any of
``player``, ``game``, ``limit`` or ``before`` it lists played games, newest first, a page
at a time (the cursor: :mod:`kibitz.server.domain.cursor`).

``POST /api/games/{id}/analysis`` asks the worker pool to analyse a finished game and
``GET /api/games/{id}/analysis`` reads the analysis, under way or stored
(:mod:`kibitz.server.services.analysis`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web

from kibitz.server.appkeys import ANALYSIS_KEY, ARCHIVE_KEY, CHAT_LOG_KEY, LIMITS_KEY, SERVICE_KEY
from kibitz.server.archive.database import ArchiveError
from kibitz.server.domain import export
from kibitz.server.domain.records import record_of
from kibitz.server.domain.room import RoomError
from kibitz.server.gateway.limits import client_address
from kibitz.server.http import query
from kibitz.server.services import analysis
from kibitz.server.services.chat import record_chat
from kibitz.shared.games import GameError, available_games, find_game
from kibitz.shared.protocol.client_out import Error
from kibitz.shared.search.strength import catalog_levels

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
LIST_PARAMETERS = ("player", "game", "limit", "before")
PLAYER_ID = re.compile(r"[0-9a-f]{32}")


def register(app: web.Application) -> None:
    app.router.add_get("/api/games", list_games)
    app.router.add_get("/api/games/{id}", get_game)
    app.router.add_get("/api/games/{id}/export", export_game)
    app.router.add_get("/api/games/{id}/positions", game_positions)
    app.router.add_post("/api/games/{id}/analysis", start_analysis)
    app.router.add_get("/api/games/{id}/analysis", get_analysis)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(Error(code, message).to_dict(), status=status)


# -- one game ----------------------------------------------------------------------------------


async def load_record(request: web.Request, game_id: str) -> dict[str, Any] | None:
    """The record of ``game_id``: from Redis while it holds the room, else the archive."""
    service = request.app[SERVICE_KEY]
    try:
        room = await service.get(game_id)
    except RoomError:
        room = None
    if room is not None:
        events, chat = await asyncio.gather(
            service.store.events_since(room.id, -1),
            record_chat(request.app[CHAT_LOG_KEY], room.id),
        )
        record = record_of(room, events, chat)
        if room.status == "over" and room.rated:
            # The rating change is written by the archiver, into the archived copy only.
            archived = await request.app[ARCHIVE_KEY].get(game_id)
            if archived is not None and "ratings" in archived:
                record["ratings"] = archived["ratings"]
        return record
    return await request.app[ARCHIVE_KEY].get(game_id)


async def _record_or_404(request: web.Request) -> dict[str, Any] | web.Response:
    game_id = request.match_info["id"]
    record = await load_record(request, game_id)
    if record is None:
        return _error(404, "game/not_found", f"no game with id {game_id!r}")
    return record


async def get_game(request: web.Request) -> web.Response:
    record = await _record_or_404(request)
    if isinstance(record, web.Response):
        return record
    return web.json_response(with_line_display(record))


async def export_game(request: web.Request) -> web.Response:
    """The game as a file: ``?format=pgn`` (chess), ``pdn`` (draughts) or ``json``."""
    try:
        fmt = query.text(request.query, "format")
    except query.QueryError as exc:
        return query.refusal(exc)
    record = await _record_or_404(request)
    if isinstance(record, web.Response):
        return record
    fmt = "json" if fmt is None else fmt
    try:
        text, content_type = export.export(record, fmt)
    except export.ExportError as exc:
        return _error(400, exc.code, exc.message)
    filename = f"kibitz-{record['game']}-{record['id']}.{fmt}"
    return web.Response(
        text=text,
        content_type=content_type,
        headers={"Content-Disposition": f'inline; filename="{filename}"'},
    )


async def game_positions(request: web.Request) -> web.Response:
    """What the game page shows beside the record, as it applies no rules itself: the
    board after every ply (ply 0 is the start) and the export formats of the game:
    ``{"id", "formats": ["pgn", "json"], "positions": [{"ply", "position", "to_move",
    "view"}, ...]}``."""
    record = await _record_or_404(request)
    if isinstance(record, web.Response):
        return record
    game = find_game(record["game"])
    state = game.parse_position(record["start"])
    positions = []
    for ply in range(len(record["moves"]) + 1):
        if ply:
            state = game.play(state, record["moves"][ply - 1]["move"])
        positions.append(
            {
                "ply": ply,
                "position": game.format_position(state),
                "to_move": game.to_move(state),
                "view": game.view(state),
            }
        )
    return web.json_response(
        {"id": record["id"], "formats": export.formats_for(record["game"]), "positions": positions}
    )


# -- analysis ----------------------------------------------------------------------------------


async def start_analysis(request: web.Request) -> web.Response:
    """Queue an analysis of a finished game: 202 with its status when queued now, 200 with
    its status when one is queued, running or done already (nothing more is queued); 404
    for an unknown game, 409 for a game not over or too long, 429 when too many analyses
    are under way (in all, or asked for from this address)."""
    record = await _record_or_404(request)
    if isinstance(record, web.Response):
        return record
    game_id = record["id"]
    if record["status"] != "over":
        return _error(409, "analysis/not_finished", "only a finished game can be analysed")
    if len(record["moves"]) + 1 > analysis.MAX_POSITIONS:
        return _error(
            409,
            "analysis/too_long",
            f"games of up to {analysis.MAX_POSITIONS - 1} plies can be analysed",
        )
    archive = request.app[ARCHIVE_KEY]
    stored = await archive.get_analysis(game_id)
    if stored is not None and stored.get("status") == "done":
        return web.json_response(with_best_display(stored, record))
    queue = request.app[ANALYSIS_KEY]
    address = client_address(
        request.remote, request.headers, request.app[LIMITS_KEY].trusted_proxies
    )
    outcome = await queue.start(record, address)
    if outcome == analysis.StartOutcome.BUSY:
        return _error(429, "analysis/busy", "too many analyses under way; try again later")
    if outcome == analysis.StartOutcome.LIMITED:
        return _error(
            429,
            "analysis/limit",
            f"at most {analysis.MAX_PER_ADDRESS} analyses under way per address; "
            "try again when one is done",
        )
    if outcome == analysis.StartOutcome.STARTED and stored is not None:
        await archive.delete_analysis(game_id)  # a failed one, done again now
    status = await queue.status(game_id)
    if status is None:  # stored between our two reads
        stored = await archive.get_analysis(game_id)
        if stored is None:
            return _error(503, "analysis/retry", "try again")
        return web.json_response(with_best_display(stored, record))
    return web.json_response(
        with_best_display(status, record),
        status=202 if outcome == analysis.StartOutcome.STARTED else 200,
    )


async def get_analysis(request: web.Request) -> web.Response:
    """A game's analysis: stored (``done`` or ``failed``) or under way (``queued`` or
    ``running``, with the evaluations in so far); ``{"id", "game", "status": "none"}`` for a
    game never analysed, 404 for an unknown game. Each position with a best move also has
    ``best_display``, that move as people write it (:func:`with_best_display`)."""
    game_id = request.match_info["id"]
    record = await load_record(request, game_id)
    stored = await request.app[ARCHIVE_KEY].get_analysis(game_id)
    if stored is None:
        stored = await request.app[ANALYSIS_KEY].status(game_id)
    if stored is not None:
        return web.json_response(with_best_display(stored, record))
    if record is None:
        return _error(404, "game/not_found", f"no game with id {game_id!r}")
    return web.json_response({"id": record["id"], "game": record["game"], "status": "none"})


def with_best_display(answer: dict[str, Any], record: dict[str, Any] | None) -> dict[str, Any]:
    """``answer`` (an analysis) with ``best_display`` on each position whose ``best`` is a
    move: the game's notation for people (SAN in chess; the wire text in games without
    one), found by replaying ``record``'s moves; and ``pv_display`` beside its ``pv``, that
    line in the same notation (:func:`display_line`). A position the record does not reach,
    or a move that does not parse there, gets none."""
    positions = answer.get("positions")
    if record is None or not isinstance(positions, list):
        return answer
    game = find_game(record["game"])
    wanted: dict[int, dict[str, Any]] = {
        int(p["ply"]): p for p in positions if isinstance(p, dict) and p.get("best")
    }
    if not wanted:
        return answer
    displays: dict[int, str] = {}
    lines: dict[int, list[str]] = {}
    try:
        state = game.parse_position(record["start"])
        for ply in range(min(max(wanted), len(record["moves"])) + 1):
            if ply:
                state = game.play(state, record["moves"][ply - 1]["move"])
            if ply in wanted:
                pv = wanted[ply].get("pv")
                if isinstance(pv, list) and pv:
                    lines[ply] = display_line(game, state, pv)
                try:
                    best = game.parse_move(state, str(wanted[ply]["best"]))
                except GameError:
                    continue
                displays[ply] = game.display_move(state, best)
    except GameError:
        pass  # a record that does not replay: what was found so far
    return {
        **answer,
        "positions": [
            {
                **p,
                **({"best_display": displays[p["ply"]]} if p.get("ply") in displays else {}),
                **({"pv_display": lines[p["ply"]]} if lines.get(p.get("ply")) else {}),
            }
            for p in positions
        ],
    }


def display_line(game: Any, state: Any, line: list[Any]) -> list[str]:
    """``line`` (moves in wire notation, played one after the other from ``state``) in the
    game's notation for people (SAN in chess): at most one text per move of ``line``,
    ending before the first move that does not parse or play."""
    shown: list[str] = []
    for text in line:
        try:
            move = game.parse_move(state, str(text))
            shown.append(game.display_move(state, move))
            state = game.play(state, str(text))
        except GameError:
            break
    return shown


def with_line_display(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with ``pv_display`` beside each move's ``pv`` (the line an AI expected,
    its move first): that line in the game's notation for people (:func:`display_line`),
    from the position the move was played in. Moves after one that does not replay get
    none."""
    moves = record.get("moves")
    if not isinstance(moves, list) or not any(isinstance(m, dict) and m.get("pv") for m in moves):
        return record
    try:
        game = find_game(record["game"])
        state = game.parse_position(record["start"])
    except (GameError, KeyError):
        return record
    shown: list[Any] = []
    for index, move in enumerate(moves):
        pv = move.get("pv")
        shown.append(
            {**move, "pv_display": display_line(game, state, pv)}
            if isinstance(pv, list) and pv
            else move
        )
        try:
            state = game.play(state, move["move"])
        except GameError:
            shown.extend(moves[index + 1 :])
            break
    return {**record, "moves": shown}


# -- the list of games -------------------------------------------------------------------------


def catalogue() -> web.Response:
    """The kinds of game: name, title, players, options, the AI's levels of each and
    whether a draw can be offered in it (``draws``)."""
    return web.json_response(
        [
            {
                "name": g.name,
                "title": g.title,
                "players": list(g.players),
                "options": {s.name: s.describe() for s in g.option_specs},
                "levels": catalog_levels(g.name),
                "draws": g.policy.draw_offers,
            }
            for g in available_games()
        ]
    )


async def list_games(request: web.Request) -> web.Response:
    """Played games, newest first: ``{"games": [record, ...], "next": cursor | null}``."""
    if not any(name in request.query for name in LIST_PARAMETERS):
        return catalogue()
    try:
        player, game, limit, before = _list_parameters(request.query)
    except query.QueryError as exc:
        return query.refusal(exc)
    try:
        games, cursor = await request.app[ARCHIVE_KEY].list(player, game, limit, before)
    except ArchiveError:
        return _error(400, "query/invalid", "before must be a cursor from an earlier page")
    return web.json_response({"games": games, "next": cursor})


def _list_parameters(given: query.Query) -> tuple[str | None, str | None, int, str | None]:
    """``player``, ``game``, ``limit`` and ``before`` (as the archive's cursor text) of
    the list, each checked by the query parser (QueryError)."""
    player = query.matching(given, "player", PLAYER_ID, "a player id (32 hex digits)")
    names = [g.name for g in available_games()]
    game = query.choice(given, "game", names, "a game name (see GET /api/games)")
    limit = query.whole_number(given, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    before = query.cursor(given, "before")
    return player, game, limit, None if before is None else before.encode()
