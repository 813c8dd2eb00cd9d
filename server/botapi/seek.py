"""``POST /api/board/seek``: a Board API account seeks a game in the lobby.

The seek is an ordinary lobby seek (server/services/seeks.py): web players see it and
accept it over the WebSocket like any other. It lives while the request stays open: the
answer is an NDJSON stream of keep-alive lines (an empty line every few seconds), which
ends once the seek is taken (the game's ``gameStart`` reaches the account's event stream)
or, if the client closes it first (or the token it was made with is revoked, or its
account banned: the stream registry's credential check), the seek is withdrawn.

The request stands in for a WebSocket session towards the seeks service
(:class:`ApiSeeker`, a ``SeekSession``): when the seek is taken, the seeks service hands
it the ``seat`` message with the seat's token, which is kept in ``SeatKeys`` so that the
Board API plays that seat.

Fields (form or JSON): ``time`` (minutes) and ``increment`` (seconds), or ``days``; none
of them is an untimed game (a kibitz extension); ``rated``, ``variant`` (any kibitz game;
chess is ``standard``), ``color`` (white, black, random), ``ratingRange`` (``1500-1800``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from asyncio import FIRST_COMPLETED
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from kibitz.server.appkeys import NODE_KEY, REDIS_KEY, SEEKS_KEY
from kibitz.server.botapi.challenges import control as time_control
from kibitz.server.botapi.challenges import flag, game_of, whole
from kibitz.server.botapi.errors import (
    api_error,
    identify,
    limit,
    refuse_banned,
    request_fields,
    require_board,
)
from kibitz.server.botapi.events import EVENT_STREAMS_KEY, NDJSON, Stream
from kibitz.server.domain.players import Account
from kibitz.server.http.auth import address_of
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.seat_keys import SeatKeys
from kibitz.shared.protocol.client_in import Seek, parse_rating_range
from kibitz.shared.protocol.client_out import Seat
from kibitz.shared.protocol.codec import Codec, ProtocolError

log = logging.getLogger(__name__)

SEEKS_PER_MINUTE = 10
#: How often the request looks whether its client is still there (s).
POLL_S = 1.0
#: Our error codes that answer 429 (wait) and 503 (try again), the rest 400.
TOO_MANY = ("rate/limited", "seek/limit", "seek/penalty")
UNAVAILABLE = ("server/unavailable",)
COLOUR_SEATS = {"white": 0, "black": 1, "random": None}

_NUMBERS = itertools.count(1)


@dataclass
class _Socket:
    """What the seeks service reads of a connection's socket: whether it is closed."""

    closed: bool = False


@dataclass(eq=False)
class ApiConnection:
    """The seeks service's view of the request as a connection: the messages it sends
    (the seek posted or withdrawn) are dropped; the seat of the game comes through
    :meth:`ApiSeeker.send_seat`."""

    socket: _Socket = field(default_factory=_Socket)
    seat: Seat | None = None
    #: Resolved once the seek is taken (made in the request's handler, on its loop).
    seated: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def closing(self) -> bool:
        return self.socket.closed

    @property
    def codec(self) -> Codec:
        return "json"

    @property
    def ws(self) -> _Socket:
        return self.socket

    def send(self, message: dict[str, Any]) -> None:
        """The seeks service's replies (``seek`` posted...): the HTTP answer says enough."""

    def take_seat(self, seat: Seat) -> None:
        """The seek was taken: ``seat`` is the seeker's in the new room."""
        self.seat = seat
        if not self.seated.done():
            self.seated.set_result(None)

    def send_frame(self, frame: bytes) -> None:
        """Lobby pushes: an API seeker does not subscribe to the lobby."""


class ApiSeeker:
    """A Board API request as a ``SeekSession`` of the seeks service."""

    def __init__(self, node: str, address: str, account: Account, seat_keys: SeatKeys) -> None:
        self.id = f"{node}:api-seek:{next(_NUMBERS)}"  # unique in the cluster
        self.address = address
        self.account: Account | None = account
        self._conn = ApiConnection()
        self._seat_keys = seat_keys

    @property
    def conn(self) -> ApiConnection:
        return self._conn

    async def send_seat(self, seat: Seat) -> None:
        """The seek was taken: the request ends, and the seat's token is kept for the
        Board API to play it (not kept: logged, the seat stands)."""
        self._conn.take_seat(seat)
        try:
            await self._seat_keys.put(seat.room, {seat.seat: seat.token})
        except (BusError, OSError) as exc:
            log.warning("could not keep the seat key of %s: %s", seat.room, exc)

    async def follow_room(self, room_id: str, seat: int | None) -> None:
        """The seat's player follows the game over its own game stream, not here."""


def seek_of(fields: dict[str, Any], name: str) -> Seek:
    """The lobby seek lichess's fields ask for (400 with the reason if they cannot be)."""
    minutes, increment = whole(fields, "time"), whole(fields, "increment")
    clock = time_control(
        None if minutes is None else minutes * 60,
        increment if minutes is not None or increment else None,
        whole(fields, "days"),
    )
    color = str(fields.get("color") or "random")
    if color not in COLOUR_SEATS:
        raise api_error(400, "color: must be white, black or random")
    given = str(fields.get("ratingRange") or "").strip()
    try:
        low, _, high = given.partition("-")
        rating_range = parse_rating_range([int(low), int(high)] if given else None)
    except (ValueError, ProtocolError):
        raise api_error(400, "ratingRange: must be like 1500-1800") from None
    return Seek(
        game=game_of(fields),
        clock=clock,
        seat=COLOUR_SEATS[color],
        name=name,
        rated=flag(fields, "rated"),
        rating_range=rating_range,
    )


def refusal(exc: ProtocolError) -> web.HTTPException:
    """Our refusal of a seek as lichess's error answer."""
    if exc.code in TOO_MANY:
        return api_error(429, exc.message, {"Retry-After": "60"})
    if exc.code in UNAVAILABLE:
        return api_error(503, exc.message)
    return api_error(400, exc.message)


async def seek(request: web.Request) -> web.StreamResponse:
    """``POST /api/board/seek``."""
    account, credential = await identify(request.app, request.headers, "play")
    require_board(account)
    await limit(request, account, "seek", SEEKS_PER_MINUTE, 60)
    message = seek_of(await request_fields(request), account.username)
    await refuse_banned(request, account)  # as the WebSocket refuses a banned seeker
    seeks = request.app[SEEKS_KEY]
    seat_keys = SeatKeys(request.app[REDIS_KEY])
    seeker = ApiSeeker(request.app[NODE_KEY], address_of(request), account, seat_keys)
    registry = request.app[EVENT_STREAMS_KEY]
    response = web.StreamResponse(headers={"Content-Type": NDJSON})
    stream = Stream(request, response, "seek", credential=credential)
    registry.add_keepalive(stream)  # past the node's bound: 429, nothing posted
    try:
        try:
            await seeks.seek(seeker, message)
        except ProtocolError as exc:
            raise refusal(exc) from None
        except (BusError, OSError):
            raise api_error(503, "Storage unavailable; try again") from None
        await stream.response.prepare(request)
        await _taken(request, stream, seeker)
        return stream.response
    finally:
        registry.remove(stream)
        seeker.conn.socket.closed = True
        if seeker.conn.seat is None:
            await seeks.closed(seeker)  # withdrawn (if it was posted and not taken)


async def _taken(request: web.Request, stream: Stream, seeker: ApiSeeker) -> None:
    """Wait until the seek is taken, or the client leaves, or the node drains (the node's
    keep-alive loop writes an empty line every few seconds meanwhile), looking every
    POLL_S whether the client is still there: two futures, no task of its own."""
    either = [seeker.conn.seated, stream.done]
    while not seeker.conn.seated.done() and not stream.done.done():
        await asyncio.wait(either, timeout=POLL_S, return_when=FIRST_COMPLETED)
        if request.transport is None or request.transport.is_closing():
            return


def register(app: web.Application) -> None:
    """Add this module's routes."""
    app.router.add_post("/api/board/seek", seek)
