"""Rooms in Redis: versioned records, an event log, fan-out and the AI job queue.

Keys (``kibitz:`` prefix):

- ``room:{id}``          hash: ``version`` and ``data`` (the room record as JSON)
- ``room:{id}:events``   stream: one compact entry per version (what happened, when),
                         for ``resume`` and as the game's timeline
- ``room:{id}:chat:{players|spectators}``  list: the channel's last 100 chat lines
                         (JSON), with the room's lifetime (see chat.py)
- ``room:{id}:presence`` hash: "seat:node" -> connections attached as that seat's player
                         on that node, "s:node" -> spectators on that node (a dead
                         node's entries stop counting with it), "gone:seat" -> since when
                         that seat's player has been disconnected everywhere (epoch ms)
- ``room:{id}:presence-sent`` string with a short TTL: a spectator-count broadcast went
                         out for the room just now (see Hub.spectators_changed)
- ``nodes:{node}``       a server node's heartbeat (with a TTL)
- ``node-beats``         sorted set: node -> last heartbeat (ms); a node past its TTL is
                         removed and announced on channel ``node-died`` (see heartbeat)
- channel ``room:{id}``  pub/sub: the public snapshot of each new version, to every node
- ``rooms:live``         sorted set: room ids of unfinished rooms by last update (lobby)
- ``archive``            stream with consumer group ``archivers``: rooms whose game ended,
                         to be written to the database (see archiver.py)
- ``jobs``               stream with consumer group ``workers``: AI search jobs admitted
                         to the workers (at most one per live worker; see fairness.py)
- ``ai:*``               the fair queue in front of ``jobs`` (see fairness.py)
- ``results``            stream with consumer group ``servers``: moves found by workers
- ``workers:{name}``     worker heartbeats (with a TTL)
- ``deadlines``          sorted set: room id -> server-clock ms of its clock's next automatic
                         action (flag fall, first-move abort); kept by the commit script in
                         the same step as the room, swept by every node (deadlines.py)

Every write to a room goes through one Lua script that commits only if the room is
still at the version the change was computed from (optimistic concurrency), and in the
same atomic step appends the event, publishes it, updates the lobby and, when an AI is
to move, queues its job fairly and admits what the workers can take now. So a job is
never lost between a commit and its enqueue, and the per-owner AI game limit cannot be
raced past by two nodes.

Every room key has a bounded lifetime: a waiting room's keys expire after
``waiting_ttl_ms`` unless somebody joins (the commit that starts the game removes the
TTL); the commit that ends a game queues the room on ``archive`` in the same atomic step,
and the archiver gives the keys a TTL once the game is in the database. An aborted game
(:func:`kibitz.server.domain.room.is_aborted`) is not archived: the commit that ends it gives its
keys ``finished_ttl_ms`` at once. A playing game nobody plays on is ended by the
archiver's sweep (archiver.py), so it reaches one of these ends too.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from kibitz.server.domain.room import Presence, Room, RoomError, is_aborted
from kibitz.shared import fastjson
from kibitz.shared.bus import fair_queue as fairness
from kibitz.shared.bus import keys
from kibitz.shared.bus.fair_queue import LUA_FUNCTIONS, AsyncFairQueue
from kibitz.shared.bus.keys import (
    ARCHIVE,
    ARCHIVERS_GROUP,
    DEADLINES,
    JOBS,
    LIVE,
    NODE_BEATS,
    NODE_DIED,
    NODES,
    RESULTS,
    SERVERS_GROUP,
    WORKERS_GROUP,
    events_key,
    presence_key,
    room_key,
)
from kibitz.shared.bus.keys import room_channel as channel
from kibitz.shared.protocol import Job

WAITING_TTL_MS = 30 * 60 * 1000  # a room nobody joins is forgotten after this long
FINISHED_TTL_MS = 60 * 60 * 1000  # a finished room stays this long once archived
EVENTS_KEPT = 10_000  # per room; plenty for any game
NODE_TTL_S = 15
HEARTBEAT_S = 5.0

# KEYS: the node's heartbeat key, node beats; ARGV: node, TTL s, node-died channel.
# Beats for the node, and announces (once, atomically) every node whose last beat is past
# its TTL: their players now count as gone. Returns how many were announced.
_BEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], t[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[2]) * 1000 - 1000)
for _, node in ipairs(dead) do
  redis.call('ZREM', KEYS[2], node)
  redis.call('PUBLISH', ARGV[3], node)
end
return #dead
"""


# Presence fields: "SEAT:NODE" -> connections of that seat's player on that node, "s:NODE"
# -> spectators on that node (a dead node's entries stop counting with it), "gone:SEAT" ->
# epoch ms since when that seat's player has had no connection anywhere.
_PRESENCE_LIB = """
local function presence_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- {seat 0 connections, seat 1 connections, spectators} on live nodes.
local function presence_counts(hash, node_prefix)
  local live = {}
  local counts = {0, 0, 0}
  local entries = redis.call('HGETALL', hash)
  for i = 1, #entries, 2 do
    local n = tonumber(entries[i + 1]) or 0
    local seat, node = string.match(entries[i], '^(%d+):(.+)$')
    local slot = seat and (tonumber(seat) + 1)
    if not seat then
      node = string.match(entries[i], '^s:(.+)$')
      slot = node and 3
    end
    if slot and slot <= 3 and n > 0 then
      if live[node] == nil then live[node] = redis.call('EXISTS', node_prefix .. node) == 1 end
      if live[node] then counts[slot] = counts[slot] + n end
    end
  end
  return counts
end
-- The presence hash lives as long as its room (its TTL, if any; a minute if it is gone).
local function presence_ttl(hash, room)
  local ttl = redis.call('PTTL', room)
  if ttl == -2 then ttl = 60000 end
  if ttl > 0 then redis.call('PEXPIRE', hash, ttl) end
end
-- A snapshot with who is there spliced in. flags: one letter a seat: "a" an AI, "p" the
-- player just seated (connected, whatever the counts say), "h" another human player
-- (gone since the recorded time when no connection counts; a missing time is recorded
-- as now: its node died), "-" a free seat. head, s0, s1: the snapshot's JSON without
-- "seats" and "spectators", and each seat's without "connected" and "gone_ms", each
-- without its closing brace. Returns the JSON and {connected 0, connected 1,
-- spectators, gone 0 or -1, gone 1 or -1}.
local function presence_splice(hash, room, node_prefix, flags, head, s0, s1)
  local counts = presence_counts(hash, node_prefix)
  local out = {0, 0, counts[3], -1, -1}
  local parts = {head, ',"seats":['}
  local wrote = false
  for seat = 0, 1 do
    local flag = string.sub(flags, seat + 1, seat + 1)
    local connected = flag == 'a' or flag == 'p' or counts[seat + 1] > 0
    local gone = 'null'
    if flag == 'h' and not connected then
      gone = redis.call('HGET', hash, 'gone:' .. seat)
      if not (gone and string.match(gone, '^%d+$')) then
        gone = string.format('%d', presence_now())
        redis.call('HSET', hash, 'gone:' .. seat, gone)
        wrote = true
      end
      out[seat + 4] = tonumber(gone)
    end
    if connected then out[seat + 1] = 1 end
    if seat == 1 then parts[#parts + 1] = ',' end
    parts[#parts + 1] = seat == 0 and s0 or s1
    parts[#parts + 1] = ',"connected":' .. (connected and 'true' or 'false')
    parts[#parts + 1] = ',"gone_ms":' .. gone .. '}'
  end
  parts[#parts + 1] = '],"spectators":' .. string.format('%d', counts[3]) .. '}'
  if wrote then presence_ttl(hash, room) end
  return table.concat(parts), out
end
"""

# KEYS: room, events, live, jobs, ai ready, ai waiting, ai owners, workers live, owner's AI
#       games, ai clock, archive stream, presence, deadlines
# ARGV: [1] expected version (-1: must not exist), [2] new version, [3] record JSON,
#       [4] event JSON, [5] unused (""), [6] channel, [7] room id, [8] live (1/0),
#       [9] updated ms, [10] job JSON or "", [11] max events, [12] job id, [13] job's owner,
#       [14] job cost ms, [15] AI games mode ("", create, touch, end), [16] AI games limit,
#       [17] game idle ms, [18] max waiting jobs, [19] max lead ms, [20] worker ttl ms,
#       [21] room key prefix, [22] dispatch scan, [23] room status, [24] waiting TTL ms,
#       [25] finished TTL ms (how long the room stays once archived), [26] the room's
#       clock deadline ms, or "" for none (KEYS[13]: the deadlines sorted set), [27] node
#       key prefix, [28] seat flags, [29]-[31] the snapshot's parts (see presence_splice),
#       [32] "1" if a finished room goes to the archive, "0" if not (an aborted game)
# Returns {1, version, connected 0, connected 1, spectators, gone 0, gone 1} committed
# (who is there, as published: the snapshot on the channel is spliced together here, so
# presence costs no round trip of its own); {0, current version} stale; {-1, AI games}
# over the owner's AI game limit; {-2, waiting jobs} the AI queue is full. Only {1, ...}
# writes.
_COMMIT = (
    LUA_FUNCTIONS
    + _PRESENCE_LIB
    + """
local current = redis.call('HGET', KEYS[1], 'version')
local expected = tonumber(ARGV[1])
if expected < 0 then
  if current then return {0, tonumber(current)} end
elseif (not current) or tonumber(current) ~= expected then
  return {0, tonumber(current or -1)}
end
local now = fair_now()
local games_mode = ARGV[15]
if games_mode == 'create' then
  redis.call('ZREMRANGEBYSCORE', KEYS[9], '-inf', now - tonumber(ARGV[17]))
  local games = redis.call('ZCARD', KEYS[9])
  if games >= tonumber(ARGV[16]) then return {-1, games} end
end
if ARGV[10] ~= '' and not fair_has_room(KEYS[6], ARGV[12], ARGV[18]) then
  return {-2, redis.call('HLEN', KEYS[6])}
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'data', ARGV[3])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[11], ARGV[2] .. '-1',
           'version', ARGV[2], 'event', ARGV[4], 'at', ARGV[9])
if ARGV[8] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[9], ARGV[7])
else
  redis.call('ZREM', KEYS[3], ARGV[7])
end
if ARGV[23] == 'waiting' then
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[12], KEYS[1] .. ':chat:players',
                        KEYS[1] .. ':chat:spectators'}) do
    redis.call('PEXPIRE', key, ARGV[24])
  end
elseif ARGV[23] == 'playing' then
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[12], KEYS[1] .. ':chat:players',
                        KEYS[1] .. ':chat:spectators'}) do
    redis.call('PERSIST', key)
  end
elseif ARGV[32] == '1' then
  -- The game ended: the archiver takes it from here. Only the first commit of a finished
  -- room queues it (later ones, rematch offers, find it queued).
  if redis.call('HEXISTS', KEYS[1], 'archive') == 0 then
    redis.call('HSET', KEYS[1], 'archive', 'queued')
    redis.call('XADD', KEYS[11], '*', 'room', ARGV[7], 'ttl_ms', ARGV[25])
  end
else
  -- An aborted game is not archived: its keys get the finished room's lifetime now (no
  -- "archive" field, so nothing queues it later).
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[12], KEYS[1] .. ':chat:players',
                        KEYS[1] .. ':chat:spectators'}) do
    redis.call('PEXPIRE', key, ARGV[25])
  end
end
-- After the lifetimes above: a presence hash this creates takes the room's.
local snapshot, present = presence_splice(KEYS[12], KEYS[1], ARGV[27], ARGV[28], ARGV[29],
                                          ARGV[30], ARGV[31])
redis.call('PUBLISH', ARGV[6], snapshot)
if ARGV[26] == '' then
  redis.call('ZREM', KEYS[13], ARGV[7])
else
  redis.call('ZADD', KEYS[13], ARGV[26], ARGV[7])
end
if games_mode == 'end' then
  redis.call('ZREM', KEYS[9], ARGV[7])
elseif games_mode ~= '' then
  redis.call('ZADD', KEYS[9], now, ARGV[7])
  redis.call('PEXPIRE', KEYS[9], ARGV[17])
end
-- Only a commit that queues a job has anything new to admit (workers admit the rest as
-- they free up), so a move between people pays nothing for the AI queue.
if ARGV[10] ~= '' then
  fair_enqueue(KEYS[5], KEYS[6], KEYS[7], KEYS[10], ARGV[13], ARGV[12], ARGV[10], ARGV[14],
               ARGV[19])
  fair_dispatch(KEYS[5], KEYS[6], KEYS[10], KEYS[4], KEYS[8], now, ARGV[20], ARGV[21], ARGV[22])
end
return {1, tonumber(ARGV[2]), present[1], present[2], present[3], present[4], present[5]}
"""
)


# KEYS: presence hash, room; ARGV: node key prefix, human seats ("10": a human player holds
# seat 0, not seat 1). Returns {seat 0 connected 1/0, seat 1 connected, spectators, seat 0
# gone ms or -1, seat 1 gone ms or -1}. A human seat found without a connection and
# without a "gone" time (its node died) is recorded as gone from now.
_PRESENCE = (
    _PRESENCE_LIB
    + """
local counts = presence_counts(KEYS[1], ARGV[1])
local out = {counts[1] > 0 and 1 or 0, counts[2] > 0 and 1 or 0, counts[3], -1, -1}
local wrote = false
for seat = 0, 1 do
  if counts[seat + 1] == 0 and string.sub(ARGV[2], seat + 1, seat + 1) == '1' then
    local gone = redis.call('HGET', KEYS[1], 'gone:' .. seat)
    if not gone and redis.call('EXISTS', KEYS[2]) == 1 then
      gone = string.format('%d', presence_now())
      redis.call('HSET', KEYS[1], 'gone:' .. seat, gone)
      wrote = true
    end
    out[seat + 4] = tonumber(gone or '-1')
  end
end
if wrote then presence_ttl(KEYS[1], KEYS[2]) end
return out
"""
)

# Counts a connection of a seat's player (field "seat:node") or a spectator ("s:node") on
# a node in or out. mode "add": n is a delta; "set": n is the count. Drops fields that
# reach zero; for a seat, records since when its player has had no connection anywhere
# (or clears that once it has one). Returns the count.
_ATTACH_LIB = """
local function presence_attach(hash, room, field, n, mode, node_prefix)
  n = tonumber(n)
  if mode == 'add' then n = redis.call('HINCRBY', hash, field, n) end
  if n <= 0 then
    redis.call('HDEL', hash, field)
  elseif mode == 'set' then
    redis.call('HSET', hash, field, n)
  end
  local seat = string.match(field, '^(%d+):')
  if seat then
    local counts = presence_counts(hash, node_prefix)
    if (counts[tonumber(seat) + 1] or 0) > 0 then
      redis.call('HDEL', hash, 'gone:' .. seat)
    elseif redis.call('HEXISTS', hash, 'gone:' .. seat) == 0 then
      redis.call('HSET', hash, 'gone:' .. seat, string.format('%d', presence_now()))
    end
  end
  presence_ttl(hash, room)
  return n
end
"""

# Publishes a snapshot (its three parts, see presence_splice) with who is there now, if
# the room is still at the version it was made from. Returns {1, version, connected 0,
# connected 1, spectators, gone 0, gone 1}, or {0, current version or -1} if the room
# moved on (or is gone).
_PUBLISH_LIB = """
local function publish_presence(room, hash, version, node_prefix, flags, head, s0, s1, chan)
  local current = redis.call('HGET', room, 'version')
  if (not current) or tonumber(current) ~= tonumber(version) then
    return {0, tonumber(current or -1)}
  end
  local snapshot, present = presence_splice(hash, room, node_prefix, flags, head, s0, s1)
  redis.call('PUBLISH', chan, snapshot)
  return {1, tonumber(current), present[1], present[2], present[3], present[4], present[5]}
end
"""

# KEYS: presence hash, room; ARGV: "seat:node" (or "s:node" for spectators), count, "add"
# or "set", node key prefix (see presence_attach).
_ATTACH = (
    _PRESENCE_LIB
    + _ATTACH_LIB
    + """
return presence_attach(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""
)

# KEYS: room, presence hash; ARGV: the version the snapshot was made from, node key
# prefix, seat flags, the snapshot's three parts, channel (see publish_presence).
_PUBLISH_PRESENCE = (
    _PRESENCE_LIB
    + _PUBLISH_LIB
    + """
return publish_presence(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
                        ARGV[6], ARGV[7])
"""
)

# A player's connection on this node left: counted out, and the room's snapshot published
# with who is there now, in one step. KEYS and ARGV as _PUBLISH_PRESENCE's, and ARGV[8]
# the field ("seat:node") counted out. Returns as publish_presence.
_LEAVE = (
    _PRESENCE_LIB
    + _ATTACH_LIB
    + _PUBLISH_LIB
    + """
presence_attach(KEYS[2], KEYS[1], ARGV[8], -1, 'add', ARGV[2])
return publish_presence(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
                        ARGV[6], ARGV[7])
"""
)

# KEYS: room, events, presence, live, archive stream; ARGV: archive group, entry id,
# room id, TTL ms. The game is in the database: acknowledge and drop its archive entry,
# and give the room's keys their remaining lifetime, all in one step.
_ARCHIVED = """
redis.call('XACK', KEYS[5], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[5], ARGV[2])
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[3], KEYS[1] .. ':chat:players',
                      KEYS[1] .. ':chat:spectators'}) do
  redis.call('PEXPIRE', key, ARGV[4])
end
redis.call('ZREM', KEYS[4], ARGV[3])
return 1
"""

# KEYS: room, archive stream; ARGV: room id, TTL ms. Queues a finished room for archiving
# if it never was (it ended before the archive existed: no "archive" field, no TTL).
_QUEUE_LEGACY = """
if redis.call('PTTL', KEYS[1]) ~= -1 or redis.call('HEXISTS', KEYS[1], 'archive') == 1 then
  return 0
end
local ok, room = pcall(cjson.decode, redis.call('HGET', KEYS[1], 'data') or '')
if not ok or type(room) ~= 'table' or room['status'] ~= 'over' then return 0 end
redis.call('HSET', KEYS[1], 'archive', 'queued')
redis.call('XADD', KEYS[2], '*', 'room', ARGV[1], 'ttl_ms', ARGV[2])
return 1
"""

# KEYS: room, events, presence, live; ARGV: room id, version ("" when the room must be
# gone). Deletes what is left of a room that is gone or still at that version, and takes
# it off the lobby; 0 if the room is there at another version (it moved on).
_FORGET = """
local version = redis.call('HGET', KEYS[1], 'version')
if version and version ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[1] .. ':chat:players',
           KEYS[1] .. ':chat:spectators')
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
"""


def seat_flags(room: Room, present: int | None = None) -> str:
    """One letter a seat for presence_splice: "a" an AI, "p" the player ``present`` (just
    seated: shown connected), "h" another human player, "-" a free seat."""
    return "".join(
        "a" if seat.kind == "ai" else "p" if i == present else "h" if seat.taken else "-"
        for i, seat in enumerate(room.seats)
    )


def snapshot_parts(snapshot: dict[str, Any]) -> tuple[bytes, bytes, bytes]:
    """``snapshot`` as JSON in the three parts presence_splice joins with who is there:
    everything but "seats" and "spectators", then each seat but "connected" and
    "gone_ms", each without its closing brace."""
    head = fastjson.dumps({k: v for k, v in snapshot.items() if k != "seats" and k != "spectators"})
    seats = [
        fastjson.dumps({k: v for k, v in seat.items() if k != "connected" and k != "gone_ms"})
        for seat in snapshot["seats"]
    ]
    return head[:-1], seats[0][:-1], seats[1][:-1]


def _moves_of(room: Room, snapshot: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The snapshot's move list, which is the record's (the snapshot is of ``room``), so
    the record need not build it again; None if it does not match."""
    moves = snapshot.get("moves")
    if isinstance(moves, list) and len(moves) == len(room.moves):
        return moves
    return None


def _presence_reply(reply: Sequence[Any]) -> Presence:
    """The {connected 0, connected 1, spectators, gone 0, gone 1} part of a script's reply."""
    c0, c1, spectators, g0, g1 = (int(x) for x in reply)
    return Presence(
        connected=(c0 == 1, c1 == 1),
        gone_ms=(g0 if g0 >= 0 else None, g1 if g1 >= 0 else None),
        spectators=spectators,
    )


def apply_presence(snapshot: dict[str, Any], presence: Presence) -> None:
    """Write ``presence`` into ``snapshot`` as presence_splice did into what it published."""
    for seat, connected, gone in zip(
        snapshot["seats"], presence.connected, presence.gone_ms, strict=True
    ):
        seat["connected"] = connected
        seat["gone_ms"] = gone
    snapshot["spectators"] = presence.spectators


class StaleVersion(Exception):
    """The room moved on since it was read; re-read and retry."""

    def __init__(self, current: int) -> None:
        super().__init__(f"room is now at version {current}")
        self.current = current


class RoomStore:
    """Async access to rooms, their events and the job streams."""

    def __init__(
        self,
        redis: aioredis.Redis,
        node: str = "local",
        waiting_ttl_ms: int = WAITING_TTL_MS,
        finished_ttl_ms: int = FINISHED_TTL_MS,
    ) -> None:
        """``waiting_ttl_ms``: how long a room nobody joins lives; ``finished_ttl_ms``:
        how long a finished room stays once archived (written into its archive entry, so
        the node that ended the game decides, whichever node archives it)."""
        self.redis = redis
        self.node = node
        self.waiting_ttl_ms = waiting_ttl_ms
        self.finished_ttl_ms = finished_ttl_ms
        self._commit = redis.register_script(_COMMIT)
        self._presence = redis.register_script(_PRESENCE)
        self._publish_presence = redis.register_script(_PUBLISH_PRESENCE)
        self._attach = redis.register_script(_ATTACH)
        self._leave = redis.register_script(_LEAVE)
        self._archived = redis.register_script(_ARCHIVED)
        self._forget = redis.register_script(_FORGET)
        self._queue_legacy = redis.register_script(_QUEUE_LEGACY)
        self._beat = redis.register_script(_BEAT)
        self.fair = AsyncFairQueue(redis)

    async def ensure_groups(self) -> None:
        for stream, group in (
            (JOBS, WORKERS_GROUP),
            (RESULTS, SERVERS_GROUP),
            (ARCHIVE, ARCHIVERS_GROUP),
        ):
            await ensure_group(self.redis, stream, group)

    async def load(self, room_id: str) -> Room | None:
        data = await self.redis.hget(room_key(room_id), "data")
        if data is None:
            return None
        return Room.from_json_dict(fastjson.loads(data))

    async def version(self, room_id: str) -> int | None:
        """The room's current version (None: no such room), without reading the record."""
        version = await self.redis.hget(room_key(room_id), "version")
        return None if version is None else int(version)

    async def commit(
        self,
        room: Room,
        expected_version: int,
        event: dict[str, Any],
        snapshot: dict[str, Any],
        job: Job | None,
        ai_games_limit: int = 8,
        deadline: int | None = None,
        present: int | None = None,
    ) -> Presence:
        """Write ``room`` if it is still at ``expected_version``; else StaleVersion. One
        round trip.

        ``snapshot`` (the new ``state``) is published with who is there, read in the same
        atomic step: its seats' ``connected``/``gone_ms`` and ``spectators`` are set there
        (and in ``snapshot``, to match); the seat ``present`` (a player just seated) shows
        connected. Returns that presence.

        ``deadline``: when the room's clock next needs the sweeper (server-clock ms), kept
        in ``deadlines`` in the same atomic step (None takes the room off it).

        A new room with an AI seat counts against its owner's ``ai_games_limit``
        (RoomError ``rate/ai_games`` past it); a job that does not fit in the fair queue
        refuses the whole change (RoomError ``server/busy``). Refused means unwritten.
        """
        job_json = job.to_fields()["job"] if job else ""
        games_mode = ""
        if room.owner and room.has_ai:
            if expected_version < 0:
                games_mode = "create"
            elif room.status == "over":
                games_mode = "end"
            else:
                games_mode = "touch"
        owner = room.owner or ""
        head, seat0, seat1 = snapshot_parts(snapshot)
        reply: Any = await self._commit(
            keys=[
                room_key(room.id),
                events_key(room.id),
                LIVE,
                JOBS,
                keys.AI_READY,
                keys.AI_WAITING,
                keys.AI_OWNERS,
                keys.AI_WORKERS_LIVE,
                keys.ai_games_key(owner),
                keys.AI_CLOCK,
                ARCHIVE,
                presence_key(room.id),
                DEADLINES,
            ],
            args=[
                expected_version,
                room.version,
                fastjson.dumps(room.to_json_dict(moves=_moves_of(room, snapshot))),
                fastjson.dumps(event),
                "",  # (the snapshot: now ARGV[29]-[31])
                channel(room.id),
                room.id,
                "1" if room.status != "over" else "0",
                room.updated_ms,
                job_json,
                EVENTS_KEPT,
                job.job_id if job else "",
                fairness.owner_lane(job.owner, job.room) if job else "",
                fairness.job_cost_ms(job.budget.time_ms) if job else 0,
                games_mode,
                ai_games_limit,
                fairness.GAME_IDLE_MS,
                fairness.MAX_WAITING,
                fairness.MAX_LEAD_MS,
                fairness.WORKER_TTL_MS,
                keys.ROOM_PREFIX,
                fairness.MAX_DISPATCH_SCAN,
                room.status,
                self.waiting_ttl_ms,
                self.finished_ttl_ms,
                "" if deadline is None else deadline,
                NODES,
                seat_flags(room, present),
                head,
                seat0,
                seat1,
                "0" if is_aborted(room) else "1",
            ],
        )
        status, value = int(reply[0]), int(reply[1])
        if status == 1:
            presence = _presence_reply(reply[2:])
            apply_presence(snapshot, presence)
            return presence
        if status == 0:
            raise StaleVersion(value)
        if status == -1:
            raise RoomError(
                "rate/ai_games",
                f"this address already has {value} unfinished games against the AI "
                f"(at most {ai_games_limit}); finish or resign one first",
            )
        if status == -2:
            raise RoomError("server/busy", "the AI queue is full; try again in a moment")
        raise RuntimeError(f"the commit script answered {reply!r}")

    async def dispatch(self) -> tuple[int, int]:
        """Admit queued AI jobs the workers can take now: (sent, dropped)."""
        return await self.fair.dispatch()

    async def events_since(self, room_id: str, version: int) -> list[dict[str, Any]]:
        """The events after ``version``, oldest first, each with its version and time."""
        # Entry ids are "<version>-1", so the range starts right after ``version``.
        entries: Any = await self.redis.xrange(events_key(room_id), min=f"{version + 1}-0")
        return [
            {
                **fastjson.loads(fields["event"]),
                "version": int(fields["version"]),
                "at": int(fields["at"]),
            }
            for _id, fields in entries
        ]

    async def live_rooms(self, limit: int = 100, max_idle_ms: int = 86_400_000) -> list[Room]:
        """Unfinished rooms changed in the last day, most recent first."""
        cutoff = int(time.time() * 1000) - max_idle_ms
        ids: Any = await self.redis.zrevrangebyscore(LIVE, "+inf", cutoff, start=0, num=limit)
        rooms = []
        for room_id in ids:
            room = await self.load(room_id)
            if room is not None:
                rooms.append(room)
        return rooms

    async def publish(self, room_id: str, snapshot: dict[str, Any]) -> None:
        """Fan out a snapshot that is not a new version (a presence change)."""
        await self.redis.publish(channel(room_id), fastjson.dumps(snapshot))

    async def publish_presence(
        self, room: Room, snapshot: dict[str, Any], leaving: int | None = None
    ) -> Presence | None:
        """Fan out ``snapshot`` (of ``room``, same version) with who is there now, read in
        the same atomic step (one round trip); None, and nothing sent, if the room is no
        longer at ``room.version`` (or gone).

        ``leaving``: a seat whose player's connection on this node has just gone, counted
        out (as ``attach(room.id, leaving, -1)``) in the same step, whatever the version."""
        head, seat0, seat1 = snapshot_parts(snapshot)
        keys = [room_key(room.id), presence_key(room.id)]
        args: list[str | bytes | int] = [
            room.version, NODES, seat_flags(room), head, seat0, seat1, channel(room.id)
        ]  # fmt: skip
        if leaving is None:
            reply: Any = await self._publish_presence(keys=keys, args=args)
        else:
            reply = await self._leave(keys=keys, args=[*args, self._presence_field(leaving)])
        if int(reply[0]) != 1:
            return None
        presence = _presence_reply(reply[2:])
        apply_presence(snapshot, presence)
        return presence

    async def presence(self, room_id: str) -> tuple[bool, bool]:
        """Whether each seat's player is connected to a live node."""
        return (await self.presence_info(room_id)).connected

    async def presence_info(
        self, room_id: str, humans: tuple[bool, bool] = (False, False)
    ) -> Presence:
        """Who is there across the cluster: connected seats, spectators, and since when
        each seat in ``humans`` (the seats a human player holds) has been gone. A human
        seat found gone without a recorded time (its node died) is recorded as gone now."""
        flags = "".join("1" if human else "0" for human in humans)
        reply: Any = await self._presence(keys=[presence_key(room_id), room_key(room_id)],
                                          args=[NODES, flags])  # fmt: skip
        return _presence_reply(reply)

    def _presence_field(self, seat: int | None) -> str:
        return f"{'s' if seat is None else seat}:{self.node}"

    async def attach(self, room_id: str, seat: int | None, delta: int) -> None:
        """Count a connection of ``seat``'s player (None: a spectator) on this node in
        (+1) or out (-1)."""
        await self._attach(
            keys=[presence_key(room_id), room_key(room_id)],
            args=[self._presence_field(seat), delta, "add", NODES],
        )

    async def restate(self, room_id: str, seat: int | None, count: int) -> None:
        """Set the count of ``seat``'s connections (None: spectators) on this node to
        ``count`` (absolute)."""
        await self._attach(
            keys=[presence_key(room_id), room_key(room_id)],
            args=[self._presence_field(seat), count, "set", NODES],
        )

    async def archived(self, room_id: str, entry_id: str, ttl_ms: int) -> None:
        """The room's game is in the database: acknowledge its ``archive`` entry, give its
        keys ``ttl_ms`` more to live and take it off the lobby (one atomic step)."""
        await self._archived(
            keys=[room_key(room_id), events_key(room_id), presence_key(room_id), LIVE, ARCHIVE],
            args=[ARCHIVERS_GROUP, entry_id, room_id, ttl_ms],
        )

    async def queue_if_legacy(self, room_id: str) -> bool:
        """Queue ``room_id`` for archiving if it is a finished room that never was (it
        ended before the archive existed); atomic, so only one node queues it."""
        done = await self._queue_legacy(
            keys=[room_key(room_id), ARCHIVE], args=[room_id, self.finished_ttl_ms]
        )
        return bool(int(done))

    async def drop_archive_entry(self, entry_id: str) -> None:
        """Acknowledge and delete an ``archive`` entry that names no finished room."""
        await self.redis.xack(ARCHIVE, ARCHIVERS_GROUP, entry_id)
        await self.redis.xdel(ARCHIVE, entry_id)

    async def forget(self, room_id: str, version: int | None) -> bool:
        """Delete what is left of a room that is gone (``version`` None) or still at
        ``version``, and take it off the lobby; False if the room moved on meanwhile."""
        done = await self._forget(
            keys=[room_key(room_id), events_key(room_id), presence_key(room_id), LIVE],
            args=[room_id, "" if version is None else version],
        )
        return bool(int(done))

    async def due_rooms(self, now_ms: int, limit: int = 50) -> list[str]:
        """Rooms whose clock deadline is at or before ``now_ms``, earliest first."""
        ids: Any = await self.redis.zrangebyscore(DEADLINES, "-inf", now_ms, start=0, num=limit)
        return list(ids)

    async def drop_deadline(self, room_id: str) -> None:
        """Take a room that is gone off ``deadlines``."""
        await self.redis.zrem(DEADLINES, room_id)

    async def heartbeat(self) -> None:
        """Say this node is alive; its players count as connected while it is. Also
        announce on NODE_DIED any node that stopped beating (once, whichever node finds
        it), so the rooms followed elsewhere learn that its players are gone."""
        await self._beat(
            keys=[NODES + self.node, NODE_BEATS], args=[self.node, NODE_TTL_S, NODE_DIED]
        )


async def ensure_group(redis: aioredis.Redis, stream: str, group: str) -> None:
    """Create ``group`` on ``stream`` (and the stream) unless it exists."""
    try:
        await redis.xgroup_create(stream, group, id="0", mkstream=True)
    except aioredis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise
