"""The per-game streams and actions of lichess's Bot and Board APIs.

Both doors, ``/api/bot/...`` (bot accounts) and ``/api/board/...`` (everyone else), share
one handler per route; the door decides only which accounts it serves.

**A game stream** (``GET /api/{bot,board}/game/stream/{id}``, NDJSON) is a follower of the
room's hub (server/fanout/): its :class:`~kibitz.server.fanout.connection.Connection`
writes to a :class:`GameStream`, which stands in for the WebSocket and translates each
message the hub delivers into lichess's lines (server/botapi/formats.py). So the hub's
bounds, its slow-client rule and its drain hold for it as for a browser, and it follows
the room as the account's seat: presence counts the API player as there, and the
opponent sees them gone once the stream closes. It begins with ``gameFull`` (the room
read after following it, so no change falls in between), then sends a ``gameState`` for
every version that changes what lichess shows (moves, status, clocks, offers),
``chatLine`` for each line of the players' chat, ``opponentGone`` when the opponent's
presence turns; the node's stream registry (server/botapi/events.py) writes its keep-alive
lines and bounds how many a node holds. It ends once the game's last ``gameState`` is
written, when the client goes, when it falls more than MAX_UNSENT_BYTES behind, when
the credential it was opened with ends (a token revoked, a session ended, the account
banned: the registry's check, every CHECK_CREDENTIALS_S), or when the node drains (the
client reopens it on another node and gets ``gameFull`` again).

**An action** (move, chat, abort, resign, draw, takeback, claim-victory) is played for
the account through the ordinary room commands (:class:`RoomService`, the chat store)
with the token of the account's seat, kept in shared/bus/seat_keys.py by whatever seated
the account (a challenge, a seek, a signed-in browser): no second path to a move. Answers:
``{"ok": true}``; 404 for a game the account does not play; 400 with our reason for a
refusal (nothing changed); 429 past ACTIONS_PER_MINUTE.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from aiohttp import WSCloseCode, WSMsgType, web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import Credential
from kibitz.server.appkeys import (
    CHAT_KEY,
    HUB_KEY,
    MODERATION_KEY,
    REDIS_KEY,
    SERVICE_KEY,
)
from kibitz.server.botapi import formats
from kibitz.server.botapi.errors import (
    api_error,
    identify,
    limit,
    ok,
    refuse_banned,
    request_fields,
    require_board,
    require_bot,
)
from kibitz.server.botapi.events import EVENT_STREAMS_KEY, MAX_UNSENT, NDJSON, Stream, encode
from kibitz.server.botapi.game_events import seats_of
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Room, RoomError
from kibitz.server.fanout.connection import Connection
from kibitz.server.moderation.hooks import abandoned_by_abort, abandoned_by_claim
from kibitz.server.moderation.rules import mute_text
from kibitz.server.services.chat import RATE_LINES, RATE_WINDOW_S, check_text, sender
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.seat_keys import SeatKeys
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_in import MAX_TEXT, Abort, Claim, Offer, PlayMove, Resign
from kibitz.shared.protocol.codec import ProtocolError

log = logging.getLogger(__name__)

#: How often a stream's handler looks whether its client is still there (so that the
#: opponent sees an API player gone within a second of its stream closing).
CHECK_S = 1.0
#: A stream with more than this written and not yet taken by its client is closed.
MAX_UNSENT_BYTES = MAX_UNSENT
#: Game streams an account may open per minute.
STREAMS_PER_MINUTE = 60
#: The kind of stream the node's registry counts these as (at most MAX_STREAMS a node).
GAME = "game"
#: Game actions (moves, offers, chat...) an account may take per minute.
ACTIONS_PER_MINUTE = 600

NOT_FOUND = "Not found"
NOT_YOUR_TURN = "Not your turn, or game already over"
NO_SEAT_KEY = "This game cannot be played through the API"
#: A seat's key may be kept a moment after the game started (a board seek's seeker keeps
#: it once told its seat, after the commit that sent gameStart; a rematch's are copied
#: after its commit): an action looks again this many times, this far apart (s).
SEAT_KEY_TRIES, SEAT_KEY_WAIT_S = 10, 0.1

Door = Callable[[Account], None]
DOORS: dict[str, Door] = {"bot": require_bot, "board": require_board}


def register(app: web.Application) -> None:
    """Add this module's routes: each action once, for both doors."""
    base = "/api/{door:bot|board}/game"
    app.router.add_get(base + "/stream/{id}", stream_game)
    app.router.add_post(base + "/{id}/move/{move}", move)
    app.router.add_post(base + "/{id}/chat", post_chat)
    app.router.add_get(base + "/{id}/chat", chat_history)
    app.router.add_post(base + "/{id}/abort", abort)
    app.router.add_post(base + "/{id}/resign", resign)
    app.router.add_post(base + "/{id}/draw/{answer:yes|no}", draw)
    app.router.add_post(base + "/{id}/takeback/{answer:yes|no}", takeback)
    app.router.add_post(base + "/{id}/claim-victory", claim_victory)
    app.router.add_post(base + "/{id}/claim-victory/", claim_victory)
    app.router.add_post(base + "/{id}/claim-draw", claim_draw)


# -- who acts, in which seat ------------------------------------------------------------------


async def _player(request: web.Request) -> Account:
    """The request's account, if its door serves it (400 otherwise)."""
    return (await _player_by(request))[0]


async def _player_by(request: web.Request) -> tuple[Account, Credential]:
    """:func:`_player`, with the credential that told (a stream keeps it, to be looked
    at again while it stays open)."""
    account, credential = await identify(request.app, request.headers, "play")
    DOORS[request.match_info["door"]](account)
    return account, credential


async def _room_and_seat(request: web.Request, account: Account) -> tuple[Room, int]:
    """The game of the path and the account's seat in it: 404 for a game that does not
    exist or that the account does not play. An account that holds both seats (a casual
    game against itself) acts in the seat to move."""
    service = request.app[SERVICE_KEY]
    try:
        room = await service.get(request.match_info["id"])
    except RoomError:
        raise api_error(404, NOT_FOUND) from None
    except (BusError, OSError):
        raise api_error(503, "Server unavailable; try again") from None
    seats = seats_of(room, account.id)
    if not seats:
        raise api_error(404, NOT_FOUND)
    if len(seats) > 1 and room.status == "playing":
        return room, int(find_game(room.game).to_move(service.state_of(room)))
    return room, seats[0]


async def _seat_token(request: web.Request, room: Room, seat: int) -> str:
    """The token of ``seat`` in ``room`` (400 if it was not kept for the API, looked
    for during SEAT_KEY_TRIES x SEAT_KEY_WAIT_S, since a new game's may come late)."""
    seat_keys = SeatKeys(request.app[REDIS_KEY])
    for tries_left in range(SEAT_KEY_TRIES - 1, -1, -1):
        try:
            token = await seat_keys.get(room.id, seat)
        except (BusError, OSError):
            raise api_error(503, "Server unavailable; try again") from None
        if token is not None:
            return token
        if tries_left:
            await asyncio.sleep(SEAT_KEY_WAIT_S)
    raise api_error(400, NO_SEAT_KEY)


# -- actions ---------------------------------------------------------------------------------


Command = Callable[[str, str], Awaitable[Room]]  # (room id, seat token) -> the room after


async def _act(request: web.Request, command: Command) -> tuple[Account, Room, str]:
    """Play ``command`` for the request's account in its seat of the path's game; the
    account, the room after and the seat's token. Its change goes to this node's
    followers of the room at once (the broadcast reaches the others)."""
    account = await _player(request)
    await limit(request, account, "game-actions", ACTIONS_PER_MINUTE, 60)
    room, seat = await _room_and_seat(request, account)
    token = await _seat_token(request, room, seat)
    try:
        after = await command(room.id, token)
    except RoomError as exc:
        raise _refusal(exc) from None
    except (BusError, OSError):
        raise api_error(503, "Server unavailable; try again") from None
    _deliver(request, after)
    return account, after, token


def _refusal(exc: ProtocolError) -> web.HTTPException:
    """lichess's answer to a command the room refused (nothing changed)."""
    if exc.code in ("move/not_your_turn", "game/over"):
        return api_error(400, NOT_YOUR_TURN)
    return api_error(400, exc.message)


def _deliver(request: web.Request, room: Room) -> None:
    """The snapshot this node just committed, to the room's followers here."""
    snapshot = request.app[SERVICE_KEY].committed_state(room.id, room.version)
    if snapshot is not None:
        request.app[HUB_KEY].deliver_state(room.id, snapshot)


async def move(request: web.Request) -> web.Response:
    """``POST .../move/{move}`` in the game's wire notation (chess: UCI, ``e2e4``,
    ``e1g1``, ``e7e8q``); ``?offeringDraw=true`` also offers (or accepts) a draw."""
    service = request.app[SERVICE_KEY]
    text = request.match_info["move"]
    received_ms = service.clock_ms()  # what the mover's clock counts to
    if len(text) > MAX_TEXT:  # the WebSocket's bound on a move's text
        raise api_error(400, f"A move has at most {MAX_TEXT} characters")

    async def play(room_id: str, token: str) -> Room:
        # No lag credit: an HTTP client's round trips are not measured.
        return await service.move(PlayMove(room_id, token, text), 0, received_ms)

    _, room, token = await _act(request, play)
    if request.query.get("offeringDraw", "").lower() == "true" and room.status == "playing":
        # The move stands whatever becomes of the offer (a game with no draws, say).
        with contextlib.suppress(RoomError):
            _deliver(request, await service.offer(Offer("draw", room.id, token)))
    return ok()


async def resign(request: web.Request) -> web.Response:
    """``POST .../resign``."""
    service = request.app[SERVICE_KEY]
    await _act(request, lambda room_id, token: service.resign(Resign(room_id, token)))
    return ok()


async def abort(request: web.Request) -> web.Response:
    """``POST .../abort``: before both sides have moved."""
    service = request.app[SERVICE_KEY]
    account, room, _ = await _act(
        request, lambda room_id, token: service.abort(Abort(room_id, token))
    )
    await _record_abandonment(abandoned_by_abort(request.app[MODERATION_KEY], account, room))
    return ok()


async def draw(request: web.Request) -> web.Response:
    """``POST .../draw/yes`` offers a draw, or accepts the opponent's; ``.../draw/no``
    declines it."""
    return await _offer(request, "draw")


async def takeback(request: web.Request) -> web.Response:
    """``POST .../takeback/yes`` asks for a takeback, or accepts the opponent's;
    ``.../takeback/no`` declines it."""
    return await _offer(request, "takeback")


async def _offer(request: web.Request, kind: Literal["draw", "takeback"]) -> web.Response:
    service = request.app[SERVICE_KEY]
    yes = request.match_info["answer"] == "yes"

    async def answer(room_id: str, token: str) -> Room:
        return await service.offer(Offer(kind, room_id, token, "offer" if yes else "decline"))

    await _act(request, answer)
    return ok()


async def claim_victory(request: web.Request) -> web.Response:
    """``POST .../claim-victory``: the opponent has been gone long enough."""
    return await _claim(request, "win")


async def claim_draw(request: web.Request) -> web.Response:
    """``POST .../claim-draw``: end as a draw, the opponent having been gone long enough."""
    return await _claim(request, "draw")


async def _claim(request: web.Request, result: Literal["win", "draw"]) -> web.Response:
    service = request.app[SERVICE_KEY]

    async def claim(room_id: str, token: str) -> Room:
        return await service.claim(Claim(room_id, token, result))

    _, room, token = await _act(request, claim)
    await _record_abandonment(abandoned_by_claim(request.app[MODERATION_KEY], room, token))
    return ok()


async def _record_abandonment(recording: Awaitable[None]) -> None:
    """Moderation's note of an abandoned game; the action stands if it cannot be written."""
    try:
        await recording
    except (SQLAlchemyError, OSError) as exc:
        log.warning("abandonment not recorded: %s", type(exc).__name__)


# -- chat ------------------------------------------------------------------------------------


async def post_chat(request: web.Request) -> web.Response:
    """``POST .../chat`` with ``room`` (``player``: the players' channel, as the seat;
    ``spectator``: the spectators', as the account) and ``text``."""
    account = await _player(request)
    fields = await request_fields(request)  # a form (lichess-bot) or JSON (berserk)
    which, text = fields.get("room", "player"), fields.get("text", "")
    if which not in ("player", "spectator"):
        raise api_error(400, "room must be player or spectator")
    if not isinstance(text, str):
        raise api_error(400, "text must be a string")
    try:
        text = check_text(text)
    except ProtocolError as exc:
        raise api_error(400, exc.message) from None
    await limit(request, account, "game-actions", ACTIONS_PER_MINUTE, 60)
    await limit(request, account, "game-chat", RATE_LINES, int(RATE_WINDOW_S))
    room, seat = await _room_and_seat(request, account)
    await refuse_banned(request, account)  # as the WebSocket refuses a banned player chat
    await _refuse_muted(request, account)
    chat = request.app[CHAT_KEY]
    try:
        if which == "player":
            token = await _seat_token(request, room, seat)
            channel, seat_of, name = sender(room, token, None)
            await chat.post(room, channel, seat_of, name, text, account.username)
        else:
            await chat.post(room, "spectators", None, account.username, text, account.username)
    except ProtocolError as exc:
        raise api_error(400, exc.message) from None
    except (BusError, OSError):
        raise api_error(503, "Server unavailable; try again") from None
    return ok()


async def _refuse_muted(request: web.Request, account: Account) -> None:
    """400 with the time left if the account's chat is muted now."""
    try:
        until = await request.app[MODERATION_KEY].muted_until(account.id)
    except (SQLAlchemyError, OSError):
        raise api_error(503, "Storage unavailable; try again") from None
    if until is not None:
        raise api_error(400, mute_text(until, request.app[SERVICE_KEY].clock_ms()))


async def chat_history(request: web.Request) -> web.Response:
    """``GET .../chat``: the players' chat of the game, ``[{"user", "text"}]``, oldest
    first (the last lines the room keeps)."""
    account = await _player(request)
    room, _ = await _room_and_seat(request, account)
    try:
        lines = await request.app[CHAT_KEY].history(room.id, "players")
    except (BusError, OSError):
        raise api_error(503, "Server unavailable; try again") from None
    hidden = await _hidden(request, account)
    return web.json_response(
        [
            {"user": line.get("account") or line.get("name") or "", "text": line["text"]}
            for line in lines
            if (line.get("account") or "").lower() not in hidden
        ]
    )


async def _hidden(request: web.Request, account: Account) -> frozenset[str]:
    """The usernames (lower case) whose chat the account is not shown (blocks)."""
    try:
        return await request.app[MODERATION_KEY].hidden_names(account.id)
    except (SQLAlchemyError, OSError) as exc:
        log.warning("blocks unreadable; chat shown unfiltered: %s", type(exc).__name__)
        return frozenset()


# -- streams ---------------------------------------------------------------------------------


class GameStream:
    """A game stream's response, as the socket of a hub :class:`Connection`.

    The connection hands it each message for the room (``compress`` is True, so every
    frame goes through the connection's queue and :meth:`send_frame`, written by the
    connection's own writer in order); it translates and writes lichess's lines. It
    keeps what it last sent, so a snapshot that changes nothing lichess shows (presence,
    spectators) writes nothing and the stream never goes back to an older version."""

    def __init__(
        self,
        kept: Stream,
        response: web.StreamResponse,
        request: web.Request,
        room_id: str,
        seat: int,
        clock_ms: Callable[[], int],
    ) -> None:
        #: The stream's entry in the node's registry: its ``done`` is set once the stream
        #: must end (the game over, the client gone or too far behind, the node draining).
        self.kept = kept
        self.response = response
        self.request = request
        self.room_id = room_id
        self.seat = seat
        self.clock_ms = clock_ms
        #: Set once ``gameFull`` is written: the hub's messages wait for it.
        self.started = asyncio.Event()
        self.version = -1
        self.last_state: tuple[Any, ...] | None = None
        self.opponent_gone: bool | None = None
        self._lock = asyncio.Lock()

    # -- the Socket protocol (server/fanout/connection.py) --------------------------------

    @property
    def ended(self) -> bool:
        """Whether the stream is to end (see ``kept``)."""
        return self.kept.done.done()

    def end(self) -> None:
        """End the stream: its handler returns."""
        self.kept.close()

    @property
    def closed(self) -> bool:
        transport = self.request.transport
        return self.ended or transport is None or transport.is_closing()

    @property
    def compress(self) -> bool:
        return True  # every frame through the queue and send_frame

    async def send_frame(
        self, message: bytes, opcode: WSMsgType, compress: int | None = None
    ) -> None:
        """One message of the hub for this follower: translated and written."""
        await self.started.wait()
        data = json.loads(message)
        if data.get("type") == "state":
            await self.state(data)
        elif data.get("type") == "chat" and data.get("room") == self.room_id:
            for line in formats.chat_lines(data):
                await self.write(line)

    async def ping(self, message: bytes = b"") -> None:
        """Nothing: the stream's client is not pinged (its lag is not measured)."""

    async def close(self, *, code: int = WSCloseCode.OK, message: bytes = b"") -> bool:
        """End the stream (the hub drains, or drops a slow client)."""
        self.end()
        return True

    # -- lines -----------------------------------------------------------------------------

    async def begin(self, room: Room, snapshot: dict[str, Any]) -> None:
        """Write ``gameFull`` of ``snapshot`` (read after following the room), then let
        the hub's messages through."""
        full = formats.game_full(room, snapshot, self.clock_ms())
        self.version = int(snapshot["version"])
        self.last_state = formats.state_key(full["state"])
        await self.write(full)
        await self._presence(snapshot, first=True)
        if full["state"]["status"] != "started":
            self.end()
        self.started.set()

    async def state(self, snapshot: dict[str, Any]) -> None:
        """A snapshot of the room: its gameState if it shows something new, the opponent's
        going or return; the end of the stream once the game is over."""
        version = int(snapshot["version"])
        if version < self.version or snapshot.get("room") != self.room_id:
            return
        self.version = version
        line = formats.game_state(snapshot, self.clock_ms())
        key = formats.state_key(line)
        if key != self.last_state:
            self.last_state = key
            await self.write(line)
        if line["status"] not in ("started", "created"):
            self.end()
            return
        await self._presence(snapshot)

    async def _presence(self, snapshot: dict[str, Any], first: bool = False) -> None:
        line = formats.opponent_gone(snapshot, self.seat, self.clock_ms())
        if line is None or line["gone"] == self.opponent_gone:
            return
        self.opponent_gone = line["gone"]
        if line["gone"] or not first:
            await self.write(line)

    async def write(self, line: dict[str, Any]) -> None:
        """One NDJSON line. A client that has gone, or fallen too far behind, ends the
        stream."""
        data = encode(line)
        transport = self.request.transport
        if transport is None or transport.is_closing():
            self.end()
            raise ConnectionResetError("the stream's client has gone")
        if transport.get_write_buffer_size() > MAX_UNSENT_BYTES:
            log.warning("closing a game stream %d bytes behind", transport.get_write_buffer_size())
            self.end()
            raise ConnectionResetError("the stream's client reads too slowly")
        async with self._lock:
            try:
                await self.response.write(data)
            except (ConnectionError, RuntimeError):
                self.end()
                raise ConnectionResetError("the stream's client has gone") from None

    async def run(self) -> None:
        """Until the stream ends, looking every CHECK_S whether the client is still
        there (waiting on the registry's future: no task of its own)."""
        while not self.closed:
            await asyncio.wait([self.kept.done], timeout=CHECK_S)
        self.end()


async def stream_game(request: web.Request) -> web.StreamResponse:
    """``GET /api/{bot,board}/game/stream/{id}``: the account's own game, as NDJSON."""
    account, credential = await _player_by(request)
    hub = request.app[HUB_KEY]
    service = request.app[SERVICE_KEY]
    registry = request.app[EVENT_STREAMS_KEY]
    await limit(request, account, "game-streams", STREAMS_PER_MINUTE, 60)
    room, seat = await _room_and_seat(request, account)
    response = web.StreamResponse(headers={"Content-Type": NDJSON})
    kept = Stream(request, response, GAME, credential=credential)
    registry.add_keepalive(kept)  # 429 past the node's bound, 503 while it drains
    stream = GameStream(kept, response, request, room.id, seat, service.clock_ms)
    conn = Connection(stream, "json")
    try:
        conn.hidden = await _hidden(request, account)
        await response.prepare(request)
        hub.add(conn)
        if await hub.follow(conn, room.id, seat):
            await service.publish_presence(room.id)
        room = await service.get(room.id)  # read after following: nothing falls between
        snapshot = await service.snapshot(room)
        conn.last_version[room.id] = room.version
        await stream.begin(room, snapshot)
        await stream.run()
    except (ConnectionResetError, RoomError, BusError, OSError) as exc:
        log.debug("game stream of %s ended: %s", room.id, exc)
    finally:
        registry.remove(kept)  # the stream ended
        stream.started.set()  # a writer waiting for gameFull stops waiting
        conn.closing = True  # no more frames are queued
        writer = conn.writer
        if writer is not None:
            # Let the lines queued before the end go out (the last gameState), briefly.
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(writer), timeout=1.0)
            writer.cancel()
        await hub.remove(conn)
    with contextlib.suppress(ConnectionError, RuntimeError):
        await response.write_eof()
    return response
