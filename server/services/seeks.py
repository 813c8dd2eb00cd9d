"""Seeks (open challenges in the lobby) and the lobby's live push.

A seek is an offer to play: game, options, time control and the creator's colour. It
lives in Redis while its creator's connection lives, so every node lists it; another
person accepts it, and the accepting node makes the room with both players seated in
one commit. Accepting is one Lua step that removes the seek, so of two people accepting
at once (on any nodes) exactly one gets the game and the other ``seek/unknown``.

Seeks make rooms, so they cost the per-address room budget (``rate/limited`` past it; see
server/services/limits.py): posting a seek costs its poster's address one room,
accepting one costs the acceptor's address one. A refused accept changes nothing: the
seek stays open.

The creator may be connected to another node than the acceptor: the accepting node
publishes the creator's seat (token included, on Redis pub/sub between our nodes only)
on ``seeks:events``; the creator's node hands it to the creator's connection and makes
it follow the room, like a ``join``.

The seeks live in Redis behind the bus's :class:`~kibitz.shared.bus.lobby.SeekBoard`
(keys ``seeks``, a hash of seek id -> the seek as JSON with its creator's node, connection
and address, pruned of dead nodes' seeks; and the channel ``seeks:events``:
``{"kind": "changed"}`` when seeks change (lobby pushes) and ``{"kind": "accepted", ...}``
for the creator's node). This module decides who may post, withdraw and accept.

A seek may be ``rated`` (its poster and acceptor signed in: ``auth/required``) and may
have a ``rating_range`` [min, max] the acceptor's rating must lie in
(``seek/out_of_range``; a guest may not accept such a seek: ``auth/required``); the
acceptor's rating is their seat rating in the seek's game and speed. Seeks between two
accounts of which one blocks the other are refused (``seek/blocked``), and a player who
abandoned games waits before posting or accepting one (``seek/penalty``); these shared
rules are server/services/seekers.py's. The room of a rated seek is rated. The lobby lists
a signed-in seeker's ``account``, ``rating`` and ``provisional``, ``rated`` (when true) and
the ``rating_range`` (when set). The quick pairing pool (server/services/pool.py) comes
through here too: ``pool_join`` and ``pool_leave`` are handed to it, and a closed
connection leaves it.

Lobby subscribers get ``{"type": "lobby", "seeks", "games"}`` when they subscribe, within
``PUSH_INTERVAL_S`` of a change to the seeks (never more often), and when the list of
live games has changed, looked at every ``GAMES_REFRESH_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import secrets
from typing import Any

from kibitz.server.domain import clocks
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Room, RoomError, SeatAccount, new_token
from kibitz.server.services import seekers
from kibitz.server.services.pool import Pool
from kibitz.server.services.rooms import RoomService, now_ms
from kibitz.server.services.seekers import LobbyConnection, Seeker, SeekSession, build_room
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.lobby import SeekBoard
from kibitz.shared.games import GameError, find_game
from kibitz.shared.protocol.client_in import (
    Abort,
    AcceptSeek,
    Lobby,
    PoolJoin,
    PoolLeave,
    Seek,
    Unseek,
)
from kibitz.shared.protocol.client_out import LobbyLeft, LobbyList, Seat, SeekPosted, SeekWithdrawn
from kibitz.shared.protocol.codec import Codec, ProtocolError, encode_bytes
from kibitz.shared.protocol.node import SeekAccepted, parse_seeks_event

__all__ = ["LobbyConnection", "SeekSession", "Seeks", "build_room", "lobby_game", "public"]

log = logging.getLogger(__name__)

PER_CONNECTION = 3  # open seeks one connection may have
PER_ADDRESS = 10  # open seeks one address may have, all its connections on every node
PUSH_INTERVAL_S = 0.5  # lobby pushes: at most two a second
GAMES_REFRESH_S = 5.0  # how often the live games are looked at for a push
LOBBY_GAMES = 50  # live games listed in the lobby
SEEK_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"

PUBLIC_FIELDS = ("id", "game", "options", "clock", "seat", "name", "player", "created_ms")


def public(seek: dict[str, Any]) -> dict[str, Any]:
    """A seek as the lobby shows it (no node, connection, address or account id): the
    fields every seek has, then ``rated`` (a rated seek only), ``rating_range`` (when
    set) and the seeker's ``account``, ``rating`` and ``provisional`` (signed in only)."""
    out = {name: seek.get(name) for name in PUBLIC_FIELDS}
    if seek.get("rated"):
        out["rated"] = True
    if seek.get("rating_range") is not None:
        out["rating_range"] = seek["rating_range"]
    return out | seekers.shown(seek)


class Seeks:
    """One node's seeks: the Redis side, its own connections' seeks and the lobby push."""

    def __init__(
        self,
        board: SeekBoard,
        service: RoomService,
        node: str,
        gate: seekers.Gate | None = None,
        pool: Pool | None = None,
    ) -> None:
        """``gate``: blocks and abandonment penalties (the moderation service; None: no
        such checks); ``pool``: the quick pairing pool (None: ``pool_join`` is refused)."""
        self.board = board
        self.service = service
        self.node = node
        self.gate = gate
        self.pool = pool
        self.local: dict[str, SeekSession] = {}  # seek id -> its creator's session here
        self.by_session: dict[str, set[str]] = {}  # session id -> its open seeks
        self.subscribers: set[LobbyConnection] = set()
        self._changed = asyncio.Event()
        self._last_push: bytes | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- pub/sub (called by the hub's listener) ------------------------------------------
    def on_event(self, data: str) -> None:
        event = parse_seeks_event(data)
        if isinstance(event, SeekAccepted):
            session = self.local.get(event.seek)
            if session is not None and session.id == event.conn:
                self._spawn(self._seat_creator(session, event))
            elif event.node == self.node:
                # The creator's connection closed as its seek was taken: nobody holds
                # that seat's token, so the game is called off before it starts.
                self._spawn(self._abort(event))
        self._changed.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _seat_creator(self, session: SeekSession, event: SeekAccepted) -> None:
        """The creator's side of an accepted seek: its seat, then the room's state."""
        self._forget(session, event.seek)
        await session.send_seat(Seat(event.room, event.seat, event.token, seek=event.seek))
        try:
            await session.follow_room(event.room, event.seat)
        except (ProtocolError, BusError, OSError) as exc:
            log.warning("could not seat the creator of seek %s: %s", event.seek, exc)

    async def _abort(self, event: SeekAccepted) -> None:
        try:
            await self.service.abort(Abort(event.room, event.token))
        except (ProtocolError, BusError, OSError) as exc:
            log.warning("could not abort %s (seek %s): %s", event.room, event.seek, exc)

    # -- client messages -----------------------------------------------------------------
    async def handle(
        self,
        session: SeekSession,
        message: Seek | Unseek | AcceptSeek | Lobby | PoolJoin | PoolLeave,
    ) -> None:
        if isinstance(message, PoolJoin | PoolLeave):
            if self.pool is None:
                raise ProtocolError("pool/unavailable", "this server has no pairing pool")
            await self.pool.handle(session, message)
        elif isinstance(message, Seek):
            await self.seek(session, message)
        elif isinstance(message, Unseek):
            await self.unseek(session, message)
        elif isinstance(message, AcceptSeek):
            await self.accept(session, message)
        elif message.subscribe:
            self.subscribers.add(session.conn)
            lobby = await self.lobby(message.rid)
            session.conn.send(lobby)
        else:
            self.subscribers.discard(session.conn)
            session.conn.send(LobbyLeft(message.rid).to_dict())

    async def seek(self, session: SeekSession, message: Seek) -> None:
        mine = self.by_session.setdefault(session.id, set())
        if len(mine) >= PER_CONNECTION:
            raise ProtocolError("seek/limit", f"at most {PER_CONNECTION} open seeks per connection")
        try:
            game = find_game(message.game)
            options = dict(game.normalize_options(message.options))
        except GameError as exc:
            raise RoomError(exc.code, str(exc)) from None
        if message.rated:
            rooms.check_rated_options(game, options)  # room/rated: only the defaults
        seeker = await seekers.seeker(
            self.service, session.account, message.player_key, game.name, message.clock,
            message.rated,
        )  # fmt: skip
        await seekers.check_penalty(self.gate, session.account)
        # A seek offers a room: its poster pays for it now (rate/limited: nothing posted).
        counted = await self.service.count_room(session.address)
        seek_id = "".join(secrets.choice(SEEK_ID_ALPHABET) for _ in range(10))
        record = {
            "id": seek_id,
            "game": game.name,
            "options": options,
            "clock": message.clock,
            "seat": "random" if message.seat is None else message.seat,
            "name": message.name,
            "created_ms": now_ms(),
            **seeker.facts(),
            "rated": message.rated,
            "rating_range": None if message.rating_range is None else [*message.rating_range],
            "node": self.node,
            "conn": session.id,
            "address": session.address,
        }
        encoded = json.dumps(record, separators=(",", ":"))
        posted = await self.board.add(seek_id, encoded, session.address, PER_ADDRESS)
        if not posted.admitted:  # not posted: its room is given back
            await self.service.uncount_room(counted)
            raise ProtocolError("seek/limit", f"at most {PER_ADDRESS} open seeks per address")
        mine.add(seek_id)
        self.local[seek_id] = session
        session.conn.send(SeekPosted(public(record), message.rid).to_dict())

    async def unseek(self, session: SeekSession, message: Unseek) -> None:
        if message.seek not in self.by_session.get(session.id, set()):
            raise ProtocolError("seek/unknown", f"you have no open seek {message.seek!r}")
        await self.board.remove(session.id, [message.seek])
        self._forget(session, message.seek)
        session.conn.send(SeekWithdrawn(message.seek, message.rid).to_dict())

    async def accept(self, session: SeekSession, message: AcceptSeek) -> None:
        acceptor, creator = await self._parties(session, message)
        # The acceptor pays for the room first: refused (rate/limited), the seek stays.
        counted = await self.service.count_room(session.address)
        try:
            room, creator_seat, acceptor_token = await self._take(
                session, message, acceptor, creator
            )
        except ProtocolError:  # refused: no room was made (a Redis error may have made it)
            await self.service.uncount_room(counted)
            raise
        await session.send_seat(Seat(room.id, 1 - creator_seat, acceptor_token, message.rid))
        await session.follow_room(room.id, 1 - creator_seat)

    async def _parties(
        self, session: SeekSession, message: AcceptSeek
    ) -> tuple[Seeker, SeatAccount | None]:
        """The acceptor of the seek, once every rule between them and it holds (nothing
        changes when one does not: the seek stays open), and the seat its creator takes
        now (a game since it was posted may have moved their rating)."""
        seek = await self.board.get(message.seek)
        if seek is None:
            raise ProtocolError(
                "seek/unknown", f"no open seek {message.seek!r} (taken, withdrawn or gone)"
            )
        account = session.account
        player = account.player_id if account else seekers.guest_player(message.player_key)
        if seek.get("conn") == session.id or (player is not None and seek.get("player") == player):
            raise ProtocolError("seek/own", "that is your own seek; unseek it instead")
        if await seekers.banned_since(self.gate, seek):  # withdrawn: nobody may take it
            await self.board.remove(str(seek.get("conn")), [message.seek])
            raise ProtocolError("auth/banned", "this seek's player is banned; it is withdrawn")
        rated, rating_range = bool(seek.get("rated")), seek.get("rating_range")
        if account is None and (rated or rating_range is not None):
            raise ProtocolError(
                "auth/required", "this seek is rated or has a rating range: sign in to accept it"
            )
        acceptor = await seekers.seeker(
            self.service, account, message.player_key, seek["game"], seek.get("clock"),
            rated or rating_range is not None,
        )  # fmt: skip
        seekers.check_range(acceptor, rating_range)
        await seekers.check_penalty(self.gate, account)
        await seekers.check_not_blocked(self.gate, seek.get("account_id"), acceptor.account_id)
        creator = await self.service.holder(
            seekers.holder_of(seek), seek["game"], seek.get("clock"), rated
        )
        return acceptor, creator

    async def _take(
        self,
        session: SeekSession,
        message: AcceptSeek,
        acceptor: Seeker,
        creator: SeatAccount | None,
    ) -> tuple[Room, int, str]:
        """Take the seek off the lobby, make its room and tell its creator's node; (the
        room, the creator's seat, the acceptor's token)."""
        player = acceptor.player
        taken = await self.board.take(message.seek, session.id, player)
        if taken.status == "own":
            raise ProtocolError("seek/own", "that is your own seek; unseek it instead")
        if taken.status != "taken":
            raise ProtocolError(
                "seek/unknown", f"no open seek {message.seek!r} (taken, withdrawn or gone)"
            )
        seek = json.loads(taken.seek)
        creator_seat = seek["seat"] if seek["seat"] in (0, 1) else random.randrange(2)
        creator_token, acceptor_token = new_token(), new_token()
        rated = bool(seek.get("rated"))
        room = await self.service.create_built(
            lambda room_id: build_room(
                seek,
                room_id,
                creator_token,
                acceptor_token,
                message.name,
                player,
                now_ms(),
                creator_seat,
                self.service.first_move_ms,
                rated=rated,
                creator=creator,
                acceptor=acceptor.holder,
            )
        )
        event = SeekAccepted(
            seek["id"], seek["conn"], seek["node"], room.id, creator_seat, creator_token
        )
        await self.board.announce(event.to_dict())
        return room, creator_seat, acceptor_token

    # -- connections ---------------------------------------------------------------------
    async def closed(self, session: SeekSession) -> None:
        """The session's connection closed: its seeks go, it leaves the lobby and the
        pool."""
        self.subscribers.discard(session.conn)
        if self.pool is not None:
            await self.pool.closed(session)
        mine = self.by_session.pop(session.id, set())
        for seek_id in mine:
            self.local.pop(seek_id, None)
        if mine:
            await self.board.remove(session.id, sorted(mine))

    def _forget(self, session: SeekSession, seek_id: str) -> None:
        self.local.pop(seek_id, None)
        self.by_session.get(session.id, set()).discard(seek_id)

    # -- the lobby -----------------------------------------------------------------------
    async def open_seeks(self) -> list[dict[str, Any]]:
        """The open seeks of live nodes, oldest first, as the lobby shows them."""
        seeks = await self.board.live_seeks()
        seeks.sort(key=lambda s: (s.get("created_ms", 0), s.get("id", "")))
        return [public(s) for s in seeks]

    async def games(self) -> list[dict[str, Any]]:
        """Live games to watch, most recently active first."""
        out = []
        for room in await self.service.store.live_rooms(limit=2 * LOBBY_GAMES):
            if room.status != "playing":
                continue
            out.append(await lobby_game(self.service, room))
            if len(out) >= LOBBY_GAMES:
                break
        return out

    async def lobby(self, rid: str | int | None = None) -> dict[str, Any]:
        """The ``lobby`` message (with ``rid``: the reply to a ``lobby`` request)."""
        return LobbyList(await self.open_seeks(), await self.games(), rid).to_dict()

    async def run(self) -> None:
        """Push the lobby to this node's subscribers when it changes (throttled). A
        failure to read it raises to the node's supervisor, which starts this again with
        backoff; a (re)start pushes at once what a failed push left unsent."""
        self._changed.set()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=GAMES_REFRESH_S)
            self._changed.clear()
            if self.subscribers:
                self._push(await self.lobby())
            await asyncio.sleep(PUSH_INTERVAL_S)

    def _push(self, lobby: dict[str, Any]) -> None:
        """Send ``lobby`` to every subscriber, unless it is what they got last (running
        clocks aside: clients tick them from ``at``)."""
        games = [(g["room"], g["version"], g["spectators"]) for g in lobby["games"]]
        key = json.dumps([lobby["seeks"], games], sort_keys=True).encode()
        if key == self._last_push:
            return
        self._last_push = key
        encoded: dict[Codec, bytes] = {}
        for conn in list(self.subscribers):
            if conn.closing or conn.ws.closed:
                self.subscribers.discard(conn)
                continue
            if conn.codec not in encoded:
                encoded[conn.codec] = encode_bytes(lobby, conn.codec)
            conn.send_frame(encoded[conn.codec])

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.pool is not None:
            await self.pool.stop()


async def lobby_game(service: RoomService, room: Room) -> dict[str, Any]:
    """One live game as the lobby and ``GET /api/rooms`` list it."""
    entry = rooms.summary(room)
    entry["options"] = room.options
    entry["clock"] = clocks.view(room.clock, service.clock_ms())  # as in ``state``
    entry["spectators"] = (await service.presence(room)).spectators
    return entry
