"""Seeks (open challenges in the lobby) and the lobby's live push.

A seek is an offer to play: game, options, time control and the creator's colour. It
lives in Redis while its creator's connection lives, so every node lists it; another
person accepts it, and the accepting node makes the room with both players seated in
one commit. Accepting is one Lua step that removes the seek, so of two people accepting
at once (on any nodes) exactly one gets the game and the other ``seek/unknown``.

Seeks make rooms, so they cost the per-address room budget (``rate/limited`` past it;
see limits.py): posting a seek costs its poster's address one room, accepting one costs the
acceptor's address one. A refused accept changes nothing: the seek stays open.

The creator may be connected to another node than the acceptor: the accepting node
publishes the creator's seat (token included, on Redis pub/sub between our nodes only)
on ``seeks:events``; the creator's node hands it to the creator's connection and makes
it follow the room, like a ``join``.

Keys and channels (``kibitz:`` prefix):

- ``seeks``          hash: seek id -> the seek as JSON, with the node and connection of
                     its creator (and the creator's address, for the per-address limit).
                     A seek whose node's heartbeat is gone no longer counts and is pruned.
- ``seeks:events``   pub/sub: ``{"kind": "changed"}`` when seeks change (lobby pushes) and
                     ``{"kind": "accepted", ...}`` for the creator's node.

Lobby subscribers get ``{"type": "lobby", "seeks", "games"}`` when they subscribe, within
``PUSH_INTERVAL_S`` of a change to the seeks (never more often), and when the list of
live games has changed, looked at every ``GAMES_REFRESH_S``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import random
import secrets
import time
from dataclasses import replace
from typing import Any, Protocol

import redis.asyncio as aioredis

from kibitz.server.domain import clocks
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Event, Room, RoomError, new_token
from kibitz.server.fanout.hub import Connection
from kibitz.server.http import query
from kibitz.server.loops.background import raise_if_stopping
from kibitz.server.services.rooms import RoomService, now_ms
from kibitz.shared.bus.keys import LIVE, NODES, SEEKS, SEEKS_CHANNEL
from kibitz.shared.games import GameError, find_game
from kibitz.shared.protocol import (
    Abort,
    AcceptSeek,
    Codec,
    Lobby,
    ProtocolError,
    Seek,
    Unseek,
    encode_bytes,
    player_id,
    seat_message,
)

log = logging.getLogger(__name__)

PER_CONNECTION = 3  # open seeks one connection may have
PER_ADDRESS = 10  # open seeks one address may have, all its connections on every node
PUSH_INTERVAL_S = 0.5  # lobby pushes: at most two a second
GAMES_REFRESH_S = 5.0  # how often the live games are looked at for a push
LOBBY_GAMES = 50  # live games listed in the lobby
SEEK_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"

# KEYS: seeks; ARGV: id, seek JSON, creator's address, per-address limit, node key
# prefix, events channel. Prunes the seeks of dead nodes, counts the address's seeks and
# adds this one unless that is over the limit (then returns -count).
_ADD = """
local count = 0
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  local ok, seek = pcall(cjson.decode, entries[i + 1])
  if not ok or type(seek) ~= 'table' or type(seek['node']) ~= 'string'
     or redis.call('EXISTS', ARGV[5] .. seek['node']) == 0 then
    redis.call('HDEL', KEYS[1], entries[i])
  elseif seek['address'] == ARGV[3] then
    count = count + 1
  end
end
if count >= tonumber(ARGV[4]) then return -count end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[6], '{"kind":"changed"}')
return count + 1
"""

# KEYS: seeks; ARGV: id, acceptor's connection id, acceptor's player id or "", node key
# prefix, events channel. Returns {1, seek JSON} (it is removed: the caller makes the
# room), {0, ""} no such live seek, {-1, ""} the acceptor's own seek.
_ACCEPT = """
local data = redis.call('HGET', KEYS[1], ARGV[1])
if not data then return {0, ''} end
local seek = cjson.decode(data)
if redis.call('EXISTS', ARGV[4] .. seek['node']) == 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {0, ''}
end
if seek['conn'] == ARGV[2] or (ARGV[3] ~= '' and seek['player'] == ARGV[3]) then
  return {-1, ''}
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[5], '{"kind":"changed"}')
return {1, data}
"""

# KEYS: seeks; ARGV: connection id, events channel, seek ids... Removes those of the ids
# that belong to that connection; returns how many.
_REMOVE = """
local removed = 0
for i = 3, #ARGV do
  local data = redis.call('HGET', KEYS[1], ARGV[i])
  if data and cjson.decode(data)['conn'] == ARGV[1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    removed = removed + 1
  end
end
if removed > 0 then redis.call('PUBLISH', ARGV[2], '{"kind":"changed"}') end
return removed
"""

PUBLIC_FIELDS = ("id", "game", "options", "clock", "seat", "name", "player", "created_ms")


class SeekSession(Protocol):
    """What seeks need of a connection's session (app.Session)."""

    id: str
    address: str
    conn: Connection

    async def follow_room(self, room_id: str, seat: int | None) -> None: ...


def public(seek: dict[str, Any]) -> dict[str, Any]:
    """A seek as the lobby shows it (no node, connection or address)."""
    return {name: seek.get(name) for name in PUBLIC_FIELDS}


def build_room(
    seek: dict[str, Any],
    room_id: str,
    creator_token: str,
    acceptor_token: str,
    acceptor_name: str | None,
    acceptor_player: str | None,
    now: int,
    creator_seat: int,
    first_move_ms: int,
) -> tuple[Room, Event]:
    """The room of an accepted seek, both players seated, at version 0 (event
    ``created``, by the creator's seat), with the seek's game, options and clock."""
    room, _event, seat = rooms.create_room(
        room_id,
        seek["game"],
        seek["options"],
        "human",
        creator_seat,
        seek.get("name"),
        creator_token,
        now,
        owner=seek.get("address"),
        player=seek.get("player"),
        clock=seek.get("clock"),
        first_move_ms=first_move_ms,
    )
    joined, _joined_event, _ = rooms.join_room(
        room, 1 - seat, acceptor_name, acceptor_token, now, acceptor_player
    )
    # One change, not two: the room is born with both seats taken.
    return replace(joined, version=room.version), Event("created", seat)


class Seeks:
    """One node's seeks: the Redis side, its own connections' seeks and the lobby push."""

    def __init__(self, redis: aioredis.Redis, service: RoomService, node: str) -> None:
        self.redis = redis
        self.service = service
        self.node = node
        self._add = redis.register_script(_ADD)
        self._accept = redis.register_script(_ACCEPT)
        self._remove = redis.register_script(_REMOVE)
        self.local: dict[str, SeekSession] = {}  # seek id -> its creator's session here
        self.by_session: dict[str, set[str]] = {}  # session id -> its open seeks
        self.subscribers: set[Connection] = set()
        self._changed = asyncio.Event()
        self._last_push: bytes | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- pub/sub (called by the hub's listener) ------------------------------------------
    def on_event(self, data: str) -> None:
        event = json.loads(data)
        if event.get("kind") == "accepted":
            session = self.local.get(event["seek"])
            if session is not None and session.id == event["conn"]:
                self._spawn(self._seat_creator(session, event))
            elif event.get("node") == self.node:
                # The creator's connection closed as its seek was taken: nobody holds
                # that seat's token, so the game is called off before it starts.
                self._spawn(self._abort(event))
        self._changed.set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _seat_creator(self, session: SeekSession, event: dict[str, Any]) -> None:
        """The creator's side of an accepted seek: its seat, then the room's state."""
        self._forget(session, event["seek"])
        message = seat_message(event["room"], event["seat"], event["token"])
        session.conn.send({**message, "seek": event["seek"]})
        try:
            await session.follow_room(event["room"], event["seat"])
        except (ProtocolError, aioredis.RedisError, OSError) as exc:
            log.warning("could not seat the creator of seek %s: %s", event["seek"], exc)

    async def _abort(self, event: dict[str, Any]) -> None:
        try:
            await self.service.abort(Abort(event["room"], event["token"]))
        except (ProtocolError, aioredis.RedisError, OSError) as exc:
            log.warning("could not abort %s (seek %s): %s", event["room"], event["seek"], exc)

    # -- client messages -----------------------------------------------------------------
    async def handle(
        self, session: SeekSession, message: Seek | Unseek | AcceptSeek | Lobby
    ) -> None:
        if isinstance(message, Seek):
            await self.seek(session, message)
        elif isinstance(message, Unseek):
            await self.unseek(session, message)
        elif isinstance(message, AcceptSeek):
            await self.accept(session, message)
        elif message.subscribe:
            self.subscribers.add(session.conn)
            lobby = await self.lobby()
            session.conn.send({**lobby, "rid": message.rid} if message.rid is not None else lobby)
        else:
            self.subscribers.discard(session.conn)
            reply: dict[str, Any] = {"type": "lobby", "subscribed": False}
            if message.rid is not None:
                reply["rid"] = message.rid
            session.conn.send(reply)

    async def seek(self, session: SeekSession, message: Seek) -> None:
        mine = self.by_session.setdefault(session.id, set())
        if len(mine) >= PER_CONNECTION:
            raise ProtocolError("seek/limit", f"at most {PER_CONNECTION} open seeks per connection")
        try:
            game = find_game(message.game)
            options = dict(game.normalize_options(message.options))
        except GameError as exc:
            raise RoomError(exc.code, str(exc)) from None
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
            "player": player_id(message.player_key) if message.player_key else None,
            "created_ms": now_ms(),
            "node": self.node,
            "conn": session.id,
            "address": session.address,
        }
        count = int(
            await self._add(
                keys=[SEEKS],
                args=[
                    seek_id,
                    json.dumps(record, separators=(",", ":")),
                    session.address,
                    PER_ADDRESS,
                    NODES,
                    SEEKS_CHANNEL,
                ],
            )
        )
        if count < 0:  # not posted: its room is given back
            await self.service.uncount_room(counted)
            raise ProtocolError("seek/limit", f"at most {PER_ADDRESS} open seeks per address")
        mine.add(seek_id)
        self.local[seek_id] = session
        reply: dict[str, Any] = {"type": "seek", "seek": public(record)}
        if message.rid is not None:
            reply["rid"] = message.rid
        session.conn.send(reply)

    async def unseek(self, session: SeekSession, message: Unseek) -> None:
        if message.seek not in self.by_session.get(session.id, set()):
            raise ProtocolError("seek/unknown", f"you have no open seek {message.seek!r}")
        await self._remove(keys=[SEEKS], args=[session.id, SEEKS_CHANNEL, message.seek])
        self._forget(session, message.seek)
        reply: dict[str, Any] = {"type": "unseek", "seek": message.seek}
        if message.rid is not None:
            reply["rid"] = message.rid
        session.conn.send(reply)

    async def accept(self, session: SeekSession, message: AcceptSeek) -> None:
        # The acceptor pays for the room first: refused (rate/limited), the seek stays.
        counted = await self.service.count_room(session.address)
        try:
            room, creator_seat, acceptor_token = await self._take(session, message)
        except ProtocolError:  # refused: no room was made (a Redis error may have made it)
            await self.service.uncount_room(counted)
            raise
        session.conn.send(seat_message(room.id, 1 - creator_seat, acceptor_token, message.rid))
        await session.follow_room(room.id, 1 - creator_seat)

    async def _take(self, session: SeekSession, message: AcceptSeek) -> tuple[Room, int, str]:
        """Take the seek off the lobby, make its room and tell its creator's node; (the
        room, the creator's seat, the acceptor's token)."""
        player = player_id(message.player_key) if message.player_key else None
        status, data = await self._accept(
            keys=[SEEKS], args=[message.seek, session.id, player or "", NODES, SEEKS_CHANNEL]
        )
        if int(status) == -1:
            raise ProtocolError("seek/own", "that is your own seek; unseek it instead")
        if int(status) != 1:
            raise ProtocolError(
                "seek/unknown", f"no open seek {message.seek!r} (taken, withdrawn or gone)"
            )
        seek = json.loads(data)
        creator_seat = seek["seat"] if seek["seat"] in (0, 1) else random.randrange(2)
        creator_token, acceptor_token = new_token(), new_token()
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
            )
        )
        event = {
            "kind": "accepted",
            "seek": seek["id"],
            "conn": seek["conn"],
            "node": seek["node"],
            "room": room.id,
            "seat": creator_seat,
            "token": creator_token,
        }
        await self.redis.publish(SEEKS_CHANNEL, json.dumps(event, separators=(",", ":")))
        return room, creator_seat, acceptor_token

    # -- connections ---------------------------------------------------------------------
    async def closed(self, session: SeekSession) -> None:
        """The session's connection closed: its seeks go, and it leaves the lobby."""
        self.subscribers.discard(session.conn)
        mine = self.by_session.pop(session.id, set())
        for seek_id in mine:
            self.local.pop(seek_id, None)
        if mine:
            await self._remove(keys=[SEEKS], args=[session.id, SEEKS_CHANNEL, *sorted(mine)])

    def _forget(self, session: SeekSession, seek_id: str) -> None:
        self.local.pop(seek_id, None)
        self.by_session.get(session.id, set()).discard(seek_id)

    # -- the lobby -----------------------------------------------------------------------
    async def open_seeks(self) -> list[dict[str, Any]]:
        """The open seeks of live nodes, oldest first, as the lobby shows them."""
        entries: Any = await self.redis.hvals(SEEKS)
        seeks = []
        for data in entries:
            with contextlib.suppress(ValueError):
                seeks.append(json.loads(data))
        nodes = sorted({s.get("node") for s in seeks if isinstance(s.get("node"), str)})
        live = set()
        for node in nodes:
            if await self.redis.exists(NODES + node):
                live.add(node)
        seeks = [s for s in seeks if s.get("node") in live]
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

    async def lobby(self) -> dict[str, Any]:
        return {"type": "lobby", "seeks": await self.open_seeks(), "games": await self.games()}

    async def run(self) -> None:
        """Push the lobby to this node's subscribers when it changes (throttled)."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=GAMES_REFRESH_S)
            self._changed.clear()
            if self.subscribers:
                try:
                    self._push(await self.lobby())
                except (aioredis.RedisError, OSError) as exc:
                    raise_if_stopping()
                    log.warning("lobby not pushed: %s", type(exc).__name__)
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


async def lobby_game(service: RoomService, room: Room) -> dict[str, Any]:
    """One live game as the lobby and ``GET /api/rooms`` list it."""
    entry = rooms.summary(room)
    entry["options"] = room.options
    entry["clock"] = clocks.view(room.clock, service.clock_ms())  # as in ``state``
    entry["spectators"] = (await service.presence(room)).spectators
    return entry


__all__ = ["SEEKS", "SEEKS_CHANNEL", "Seeks", "build_room", "lobby_game"]


# -- GET /api/rooms paging -----------------------------------------------------------------

MAX_ROOMS_PAGE = 100
MAX_IDLE_MS = 86_400_000  # rooms untouched for a day are not listed
_PAGE_SCANS = 10  # bound on the reads that skip rooms tied with the cursor


def encode_cursor(updated_ms: int, room_id: str) -> str:
    return base64.urlsafe_b64encode(f"{updated_ms}:{room_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The (updated ms, room id) a cursor names; ValueError if it is not one of ours (the
    rule is :func:`kibitz.server.http.query.decode_cursor`'s)."""
    decoded = query.decode_cursor(cursor)
    if decoded is None:
        raise ValueError("not a cursor of ours")
    return decoded.ms, decoded.id


async def live_rooms_page(
    service: RoomService, limit: int, before: tuple[int, str] | None
) -> tuple[list[Room], str | None]:
    """Unfinished rooms changed in the last day, most recent first (ties by id, down),
    ``limit`` of them after the ``before`` cursor; and the cursor of the next page."""
    redis = service.store.redis
    cutoff = int(time.time() * 1000) - MAX_IDLE_MS
    top: int | str = "+inf" if before is None else before[0]
    found: list[tuple[str, int]] = []
    offset = 0
    for _ in range(_PAGE_SCANS):
        batch: Any = await redis.zrevrangebyscore(
            LIVE, top, cutoff, start=offset, num=limit + 1, withscores=True
        )
        for member, score in batch:
            if before is not None and int(score) == before[0] and member >= before[1]:
                continue  # at or before the cursor, among rooms updated in the same ms
            found.append((member, int(score)))
        offset += len(batch)
        if len(found) > limit or len(batch) < limit + 1:
            break
    page = found[:limit]
    next_cursor = encode_cursor(page[-1][1], page[-1][0]) if len(found) > limit else None
    loaded = []
    for room_id, _score in page:
        room = await service.store.load(room_id)
        if room is not None:
            loaded.append(room)
    return loaded, next_cursor
