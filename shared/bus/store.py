"""Rooms in Redis: versioned records, an event log, presence, fan-out and the AI job queue.

This module decides how a room lives in Redis; the server decides what a room is. It deals
in plain data: a room record is a JSON object, a change is a :class:`RoomCommit` (what the
commit writes, by name), who is there is a :class:`PresenceCounts`. The server's adapter
(``kibitz.server.services.room_store``) turns its ``Room`` into these and back, and the
commit's refusals (:class:`StaleVersion`, :class:`AiGamesLimit`, :class:`QueueFull`) into
its own errors.

Keys (built in :mod:`kibitz.shared.bus.keys`; a room's keys share its hash tag):

- ``room:{id}``          hash: ``version``, ``data`` (the room record as JSON), once the
                         game ended ``archive`` (``queued``), and ``ai_watch`` once the
                         AI-turn watchdog queued an AI job again (:meth:`RoomStore.watch_ai_job`)
- ``room:{id}:events``   stream: one compact entry per version (what happened, when), for
                         ``resume`` and as the game's timeline; at most ``EVENTS_KEPT``
- ``room:{id}:chat:{players|spectators}``  list: the channel's last chat lines (written by
                         the chat module), with the room's lifetime
- ``room:{id}:presence`` hash: "seat:node" -> connections attached as that seat's player on
                         that node, "s:node" -> spectators on that node (a dead node's
                         entries stop counting with it), "gone:seat" -> since when that
                         seat's player has been disconnected everywhere (epoch ms)
- ``nodes:{node}``       a server node's heartbeat (TTL ``NODE_TTL_S``)
- ``node-beats``         sorted set: node -> last heartbeat (ms); a node past its TTL is
                         removed and announced on channel ``node-died``
- channel ``room:{id}``  pub/sub: the public snapshot of each new version, to every node
- ``rooms:live``         sorted set: unfinished rooms by last update (the lobby)
- ``archive``            stream, group ``archivers``: rooms whose game ended, to be written
                         to the database
- ``jobs``, ``ai:*``     the AI jobs and the fair queue in front of them (fair_queue.py)
- ``results``            stream, group ``servers``: moves found by workers
- ``deadlines``          sorted set: room id -> server-clock ms of its clock's next automatic
                         action (flag fall, first-move abort), kept by the commit; at an
                         AI's turn the earlier of that and when its move is overdue (the
                         AI-turn watchdog: server/domain/ai_watch.py)

On a Redis Cluster (``keys.grouped()``) a room's keys carry its slot group's tag, and
``rooms:live``, ``deadlines``, ``archive`` and the owners' AI games are per group
(``keys.live(g)``...), in the room's slot, so the commit stays one atomic script. What it
cannot reach there (the fair queue and the jobs stream, on the control slot) it reaches
through the group's **outbox** (``keys.ai_outbox(g)``, a stream of at most ``OUTBOX_KEPT``
jobs; a commit that would add more is refused as a full queue): the committing node relays
its entry at once (:meth:`RoomStore.relay`: one control-slot script, each entry queued
once), and every node sweeps the outboxes (:meth:`RoomStore.relay_stale`,
server/loops/relay.py) for entries ``RELAY_AFTER_MS`` old: it relays them again (a no-op
for those relayed already; the relay a dead node never made, or a failover of the control
slot lost, happens now) and deletes them. Snapshots go out with ``SPUBLISH``
(the room's channel is its slot's). A node is live while its score in the group's copy of
the node beats (``keys.group_node_beats(g)``, which :meth:`RoomStore.heartbeat` writes in
every group) is recent: the presence scripts are handed that key. The per-owner AI game cap
counts every group: a new AI room's commit is handed the other groups' counts, read just
before under a short per-owner lock (``AI_GAMES_LOCK_MS``). Readers of the per-group sets
merge the groups (:meth:`RoomStore.live_rooms_idle_since`: one pipeline;
:meth:`RoomStore.live_room_ids`, :meth:`RoomStore.due_rooms` (every group or those asked
for), the outbox sweep and the heartbeat's beats: the groups at once, leaving out those of
a primary that is down, ``connect.each_group``). On a single Redis all of this is as it
was: one group, the names above, one script.

Every write to a room goes through one Lua script (``scripts/commit.lua``) that commits
only if the room is still at the version the change was computed from (optimistic
concurrency), and in the same atomic step appends the event, publishes the snapshot with
who is there, updates the lobby and the deadlines, and, when an AI is to move, queues its
job fairly and admits what the workers can take now. So a job is never lost between a
commit and its enqueue, and the per-owner AI game limit cannot be raced past by two nodes.
A refused commit writes nothing.

Every room key has a bounded lifetime: a waiting room's keys expire after
``waiting_ttl_ms`` unless somebody joins (the commit that starts the game removes the TTL);
the commit that ends a game queues the room on ``archive`` in the same atomic step, and
:meth:`RoomStore.archived` gives the keys a TTL once the game is in the database. A game
that is not to be archived (``RoomCommit.archive`` false: an aborted game) gets
``finished_ttl_ms`` at once.

Each script is a file in ``scripts/`` run by one method here with named parameters and a
typed result; the file's header names every KEYS and ARGV entry. On a single Redis some
read keys they are not handed (node heartbeats in the presence library, the rooms of
queued jobs in the fair queue's dispatch), which a single Redis allows; on a Redis Cluster
every script is handed every key it touches (each file says how).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import redis.asyncio as aioredis

from kibitz.shared import fastjson
from kibitz.shared.bus import fair_queue as fairness
from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import each_group
from kibitz.shared.bus.consumer import ensure_group
from kibitz.shared.bus.errors import BusError, BusResponseError
from kibitz.shared.bus.fair_queue import AsyncFairQueue
from kibitz.shared.bus.keys import (
    ARCHIVERS_GROUP,
    SERVERS_GROUP,
    WORKERS_GROUP,
    chat_key,
    events_key,
    group_of,
    presence_key,
    room_id_of,
    room_key,
)
from kibitz.shared.bus.keys import room_channel as channel
from kibitz.shared.bus.scripts import source
from kibitz.shared.bus.stopping import raise_if_stopping
from kibitz.shared.protocol.jobs import Job

log = logging.getLogger(__name__)

WAITING_TTL_MS = 30 * 60 * 1000  # a room nobody joins is forgotten after this long
FINISHED_TTL_MS = 60 * 60 * 1000  # a finished room stays this long once archived
EVENTS_KEPT = 10_000  # entries of a room's event stream (approximate MAXLEN); plenty
NODE_TTL_S = 15  # a node's heartbeat lives this long: a node silent longer is dead
HEARTBEAT_S = 5.0  # how often a node beats (well inside NODE_TTL_S)
AI_GAMES_LIMIT = 8  # an owner's AI games being played, at most, unless the caller says
AI_GAMES_GRACE_MS = 10 * 60 * 1000  # a game whose human is gone this long stops counting
#: An owner's unfinished AI games in all, counted or not, at most (or the limit, if more):
#: bounds the owner's set and the create's look at it.
AI_GAMES_KEPT = 64
AI_GAMES_LISTED = 16  # room ids a refusal names, at most
AI_GAMES_TTL_MS = 7 * 24 * 60 * 60 * 1000  # an owner's set lives this long after a commit
LOBBY_ROOMS = 100  # live rooms one lobby read returns, at most (by default)
LOBBY_MAX_IDLE_MS = 86_400_000  # a live room unchanged this long is left out of the lobby
DUE_BATCH = 50  # due rooms one deadline read returns, at most (by default)
NODE_TTL_MS = NODE_TTL_S * 1000
#: A Redis Cluster: a slot group's outbox holds this many AI jobs at most (a commit that
#: would add more is refused as a full queue; relayed entries are deleted at once).
OUTBOX_KEPT = 100_000
#: An outbox entry this old is swept: relayed again (a no-op if its node relayed it: by
#: now the relay's write has reached the control slot's replica) and deleted.
RELAY_AFTER_MS = 2_000
RELAY_BATCH = 200  # outbox entries one sweep relays, at most
#: A Redis Cluster: a group's copy of the node beats drops a node silent this much longer
#: than its TTL (it counts as dead from NODE_TTL_MS on).
GROUP_BEATS_KEEP_MS = 60_000
#: A Redis Cluster: how long the commit of a new AI room holds its owner's lock while it
#: counts the owner's games in every group (so two creates at once cannot both pass).
AI_GAMES_LOCK_MS = 2_000
AI_GAMES_LOCK_WAIT_S = 2.0  # how long a create waits for the lock, at most (then goes on)

# Each script's text, read once when this module loads: a missing file fails the import.
_COMMIT = source("fair_lib", "nodes_lib", "presence_lib", "ai_games_lib", "commit")
_PRESENCE = source("nodes_lib", "presence_lib", "presence")
_PUBLISH_PRESENCE = source("nodes_lib", "presence_lib", "publish_lib", "publish_presence")
_ATTACH = source("nodes_lib", "presence_lib", "attach_lib", "attach")
_LEAVE = source("nodes_lib", "presence_lib", "attach_lib", "publish_lib", "leave")
_AI_GAMES_COUNT = source("nodes_lib", "ai_games_lib", "ai_games_count")
_RELAY = source("fair_lib", "ai_relay")
_ARCHIVED = source("archived")
_QUEUE_LEGACY = source("queue_legacy")
_FORGET = source("forget")
_NODE_BEAT = source("node_beat")
_AI_WATCH = source("fair_lib", "ai_watch")
_LIVE_NODES = source("live_nodes")

SeatFlags = str  # one letter a seat: "a" AI, "p" just seated (connected), "h" human, "-" free
SEAT_FLAG_LETTERS = frozenset("aph-")  # the letters presence_splice reads
STATUSES = ("waiting", "playing", "over")  # a room's status, as the commit script reads it
AiGamesMode = Literal["create", "touch", "end"]
#: What the AI-turn watchdog's step did (:meth:`RoomStore.watch_ai_job`).
WatchOutcome = Literal["moved", "queued", "pushed", "full"]
#: The room hash's field where the AI-turn watchdog marks its last attempt
#: ("version:attempt"; server/domain/ai_watch.py).
AI_WATCH_FIELD = "ai_watch"


@dataclass(frozen=True, slots=True)
class PresenceCounts:
    """Who is in a room across the cluster: whether each seat's player is connected,
    since when a human seat's player has been gone (epoch ms; None while connected and for
    other seats), and how many spectators watch."""

    connected: tuple[bool, bool] = (False, False)
    gone_ms: tuple[int | None, int | None] = (None, None)
    spectators: int = 0


@dataclass(frozen=True, slots=True)
class AiGames:
    """How a commit counts against its owner's AI games: ``create`` adds a new room to
    the owner's unfinished ones, refused when ``limit`` of them are being played (their
    human connected, or gone less than ``grace_ms``: scripts/ai_games_lib.lua) or when
    the owner has ``kept`` unfinished ones in all; ``touch`` keeps it there, ``end``
    takes it out."""

    owner: str
    mode: AiGamesMode
    limit: int = AI_GAMES_LIMIT
    grace_ms: int = AI_GAMES_GRACE_MS

    @property
    def kept(self) -> int:
        """The owner's unfinished AI games in all, at most."""
        return max(AI_GAMES_KEPT, self.limit)


@dataclass(frozen=True, slots=True)
class RoomCommit:
    """One change of a room, as the commit script writes it.

    ``snapshot`` is the new public ``state``: it is published with who is there, read in
    the same step, and its seats' ``connected``/``gone_ms`` and ``spectators`` are written
    into it to match what went out."""

    room_id: str
    expected_version: int  # the version the change was made from; -1: must not exist
    version: int  # the new version
    record: dict[str, Any]  # the room record (JSON data), stored as ``data``
    event: dict[str, Any]  # the event stream's entry for this version
    updated_ms: int  # when the room changed: the event's time and the lobby's score
    status: str  # "waiting", "playing" or "over"
    archive: bool  # a finished room goes to the archive (False: dropped after a while)
    snapshot: dict[str, Any]  # the public state, published (presence filled in)
    seat_flags: SeatFlags  # who sits where, for presence (see presence_lib.lua)
    deadline_ms: int | None = None  # the room clock's next automatic action (server ms)
    job: Job | None = None  # the AI's search job, queued fairly
    ai_games: AiGames | None = None  # None: no owner, or no AI seat

    def __post_init__(self) -> None:
        """Refuse a plan the script would misread (ValueError), before anything is sent."""
        if self.status not in STATUSES:
            raise ValueError(f"room status {self.status!r} is not one of {STATUSES}")
        if len(self.seat_flags) != 2 or not set(self.seat_flags) <= SEAT_FLAG_LETTERS:
            raise ValueError(f"seat flags {self.seat_flags!r}: two of {sorted(SEAT_FLAG_LETTERS)}")
        if self.expected_version < -1 or self.version < 0:
            raise ValueError(f"versions {self.expected_version} -> {self.version}: out of range")


class CommitRefused(Exception):
    """The commit wrote nothing."""


class StaleVersion(CommitRefused):
    """The room moved on since it was read (or exists, for a new room); re-read and retry."""

    def __init__(self, current: int) -> None:
        super().__init__(f"room is now at version {current}")
        self.current = current


class AiGamesLimit(CommitRefused):
    """The owner is already playing ``games`` AI games, at or past ``limit``, or has
    ``unfinished`` ones in all, at or past ``kept``; ``rooms``: some of them (the ones
    being played first, at most ``AI_GAMES_LISTED``)."""

    def __init__(
        self,
        games: int,
        limit: int,
        rooms: Sequence[str] = (),
        unfinished: int | None = None,
        kept: int = AI_GAMES_KEPT,
    ) -> None:
        super().__init__(f"{games} AI games being played (at most {limit})")
        self.games = games
        self.limit = limit
        self.rooms = tuple(rooms)
        self.unfinished = games if unfinished is None else unfinished
        self.kept = kept

    @property
    def over_kept(self) -> bool:
        """Refused for the games kept in all, not for those being played."""
        return self.games < self.limit


class QueueFull(CommitRefused):
    """The fair queue of AI jobs is full (``waiting`` jobs)."""

    def __init__(self, waiting: int) -> None:
        super().__init__(f"the AI queue is full ({waiting} waiting)")
        self.waiting = waiting


class CommitKeys(NamedTuple):
    """The commit script's KEYS, in order (scripts/commit.lua names them alike)."""

    room: str
    events: str
    presence: str
    chat_players: str
    chat_spectators: str
    live: str
    deadlines: str
    archive: str
    jobs: str
    ai_ready: str
    ai_waiting: str
    ai_owners: str
    ai_clock: str
    ai_workers: str
    ai_games: str


#: The commit's keys that are not the room's own (they hold every room, or every owner's
#: games): on a Redis Cluster the commit is handed the room group's instead
#: (:class:`ClusterCommitKeys`).
GLOBAL_COMMIT_KEYS = frozenset(CommitKeys._fields[5:])


class ClusterCommitKeys(NamedTuple):
    """The commit script's KEYS on a Redis Cluster, in order: every one in the room's slot
    (its group's tag); ``presence_keys``, for a new AI room, go after them."""

    room: str
    events: str
    presence: str
    chat_players: str
    chat_spectators: str
    live: str
    deadlines: str
    archive: str
    ai_outbox: str
    node_beats: str
    ai_games: str


class CommitArgs(NamedTuple):
    """The commit script's ARGV, in order (scripts/commit.lua names them alike)."""

    expected_version: int
    version: int
    record: bytes
    event: bytes
    updated_ms: int
    room_id: str
    channel: str
    status: str
    live: str
    archive: str
    waiting_ttl_ms: int
    finished_ttl_ms: int
    deadline_ms: int | str
    events_kept: int
    node_prefix: str
    seat_flags: str
    head: bytes
    seat0: bytes
    seat1: bytes
    ai_games_mode: str
    ai_games_limit: int
    ai_games_ttl_ms: int
    job: str
    job_id: str
    job_lane: str
    job_cost_ms: int
    max_waiting: int
    max_lead_ms: int
    worker_ttl_ms: int
    room_prefix: str
    dispatch_scan: int
    ai_games_grace_ms: int
    ai_games_kept: int
    ai_games_listed: int
    cluster: str = ""
    outbox_kept: int = OUTBOX_KEPT
    others_counted: int = 0
    others_unfinished: int = 0


class OutboxEntry(NamedTuple):
    """An AI job in a slot group's outbox (a Redis Cluster), on its way to the fair queue."""

    group: int
    entry_id: str
    job_id: str
    job: str  # the job JSON
    lane: str
    cost_ms: int


@dataclass(frozen=True, slots=True)
class OwnerGames:
    """An owner's AI games in the other slot groups (a Redis Cluster): counted (being
    played), unfinished, and some of their ids (the played ones first)."""

    counted: int = 0
    unfinished: int = 0
    rooms: tuple[str, ...] = ()


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


def apply_presence(snapshot: dict[str, Any], presence: PresenceCounts) -> None:
    """Write ``presence`` into ``snapshot`` as presence_splice did into what it published."""
    for seat, connected, gone in zip(
        snapshot["seats"], presence.connected, presence.gone_ms, strict=True
    ):
        seat["connected"] = connected
        seat["gone_ms"] = gone
    snapshot["spectators"] = presence.spectators


def _presence_reply(reply: Sequence[Any]) -> PresenceCounts:
    """The {connected 0, connected 1, spectators, gone 0, gone 1} part of a script's reply."""
    c0, c1, spectators, g0, g1 = (int(x) for x in reply)
    return PresenceCounts(
        connected=(c0 == 1, c1 == 1),
        gone_ms=(g0 if g0 >= 0 else None, g1 if g1 >= 0 else None),
        spectators=spectators,
    )


def _text(value: str | bytes) -> str:
    """A script's string reply, whether the client decodes replies or not."""
    return value.decode() if isinstance(value, bytes) else str(value)


def nodes_arg() -> str:
    """How the scripts tell live nodes (scripts/nodes_lib.lua): the heartbeat key prefix,
    or on a Redis Cluster '@' and the node TTL (ms), with a beats set handed in KEYS (the
    room group's copy for the room scripts, :func:`control_beats` for the control slot's:
    connections, seeks, pools)."""
    return f"@{NODE_TTL_MS}" if keys.grouped() else keys.NODES


def control_beats() -> list[str]:
    """The node beats the control-slot scripts are handed after their own keys: the
    control slot's ``node-beats`` on a Redis Cluster, none on a single Redis."""
    return [keys.NODE_BEATS] if keys.grouped() else []


def _beats(room_id: str) -> list[str]:
    """The presence scripts' last key: the room group's node beats on a Redis Cluster."""
    return [keys.group_node_beats(group_of(room_id))] if keys.grouped() else []


def _merge_newest(pages: Iterable[Sequence[tuple[Any, Any]]], count: int) -> list[str]:
    """The ``count`` members of highest score over pages each sorted that way."""
    merged = heapq.merge(*pages, key=lambda pair: -float(pair[1]))
    return [str(member) for member, _score in list(merged)[:count]]


def _merge_oldest(pages: Iterable[Sequence[tuple[Any, Any]]], count: int) -> list[str]:
    """The ``count`` members of lowest score over pages each sorted that way."""
    merged = heapq.merge(*pages, key=lambda pair: float(pair[1]))
    return [str(member) for member, _score in list(merged)[:count]]


async def _by_score(
    client: aioredis.Redis,
    key_of: Callable[[int], str],
    low: Any,
    high: Any,
    limit: int,
    what: str,
    *,
    newest: bool,
    groups: Iterable[int] | None = None,
) -> list[str]:
    """Up to ``limit`` members of the sorted set ``key_of(group)`` scored from ``low`` to
    ``high``, highest score first if ``newest``, else lowest first: on a Redis Cluster
    the slot groups' (``groups``, or every one), merged (all at once; a group whose
    primary is down is left out, connect.each_group, which logs it as ``what``)."""

    async def read(group: int, withscores: bool) -> Any:
        if newest:
            return await client.zrevrangebyscore(
                key_of(group), high, low, start=0, num=limit, withscores=withscores
            )
        return await client.zrangebyscore(
            key_of(group), low, high, start=0, num=limit, withscores=withscores
        )

    if not keys.grouped():
        return list(await read(0, withscores=False))
    pages = await each_group(client, lambda group: read(group, withscores=True), what, groups)
    merge = _merge_newest if newest else _merge_oldest
    return merge((found for _group, found in pages), limit)


def _room_keys(room_id: str) -> tuple[str, str, str, str, str]:
    """Every key of one room (record, events, presence, both chats), in scripts' order."""
    return (
        room_key(room_id),
        events_key(room_id),
        presence_key(room_id),
        chat_key(room_id, "players"),
        chat_key(room_id, "spectators"),
    )


class RoomStore:
    """Async access to rooms, their events and presence, and the job streams."""

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
        self._node_beat = redis.register_script(_NODE_BEAT)
        self._relay = redis.register_script(_RELAY)
        self._ai_watch = redis.register_script(_AI_WATCH)
        self.fair = AsyncFairQueue(redis)
        #: A Redis Cluster: the fair queue's waiting jobs as the last relay saw them (the
        #: commit cannot read them: another slot); a job past MAX_WAITING is refused.
        self.ai_waiting = 0

    async def ensure_groups(self) -> None:
        """The consumer groups of the streams a node writes or reads: the AI jobs, the
        results and the archive (every slot group's, on a Redis Cluster)."""
        streams = [(keys.JOBS, WORKERS_GROUP), (keys.RESULTS, SERVERS_GROUP)]
        streams += [(keys.archive(group), ARCHIVERS_GROUP) for group in keys.groups()]
        for stream, group_name in streams:
            await ensure_group(self.redis, stream, group_name)

    async def server_time_ms(self) -> int:
        """The Redis server's clock (epoch ms): one ``TIME``."""
        seconds, micros = await self.redis.time()
        return int(seconds) * 1000 + int(micros) // 1000

    # -- records -------------------------------------------------------------------------
    async def load_record(self, room_id: str) -> dict[str, Any] | None:
        """The room's record (JSON data), or None if there is no such room."""
        data = await self.redis.hget(room_key(room_id), "data")
        if data is None:
            return None
        record: dict[str, Any] = fastjson.loads(data)
        return record

    async def version(self, room_id: str) -> int | None:
        """The room's current version (None: no such room), without reading the record."""
        version = await self.redis.hget(room_key(room_id), "version")
        return None if version is None else int(version)

    async def live_room_ids(
        self, limit: int = LOBBY_ROOMS, max_idle_ms: int = LOBBY_MAX_IDLE_MS
    ) -> list[str]:
        """Unfinished rooms changed in the last ``max_idle_ms``, most recent first (every
        slot group's, merged: all at once; a group whose primary is down is left out,
        connect.each_group)."""
        cutoff = int(time.time() * 1000) - max_idle_ms
        return await _by_score(
            self.redis, keys.live, cutoff, "+inf", limit, "live rooms", newest=True
        )

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

    # -- the commit ----------------------------------------------------------------------
    def commit_call(
        self,
        plan: RoomCommit,
        presence_keys: Sequence[str] = (),
        others: OwnerGames = OwnerGames(),
    ) -> tuple[CommitKeys | ClusterCommitKeys, CommitArgs]:
        """The commit script's KEYS and ARGV for ``plan``: the one place they are built.

        On a Redis Cluster the KEYS are the room group's (:class:`ClusterCommitKeys`;
        ``presence_keys``, for a new AI room, go after them) and ``others`` are the
        owner's AI games in the other groups."""
        job, games = plan.job, plan.ai_games
        head, seat0, seat1 = snapshot_parts(plan.snapshot)
        owner = games.owner if games else ""
        script_keys: CommitKeys | ClusterCommitKeys
        if keys.grouped():
            group = group_of(plan.room_id)
            script_keys = ClusterCommitKeys(
                *_room_keys(plan.room_id),
                live=keys.live(group),
                deadlines=keys.deadlines(group),
                archive=keys.archive(group),
                ai_outbox=keys.ai_outbox(group),
                node_beats=keys.group_node_beats(group),
                ai_games=keys.ai_games_key(owner, group),
            )
        else:
            script_keys = CommitKeys(
                *_room_keys(plan.room_id),
                live=keys.live(0),
                deadlines=keys.deadlines(0),
                archive=keys.archive(0),
                jobs=keys.JOBS,
                ai_ready=keys.AI_READY,
                ai_waiting=keys.AI_WAITING,
                ai_owners=keys.AI_OWNERS,
                ai_clock=keys.AI_CLOCK,
                ai_workers=keys.AI_WORKERS_LIVE,
                ai_games=keys.ai_games_key(owner),
            )
        return script_keys, CommitArgs(
            expected_version=plan.expected_version,
            version=plan.version,
            record=fastjson.dumps(plan.record),
            event=fastjson.dumps(plan.event),
            updated_ms=plan.updated_ms,
            room_id=plan.room_id,
            channel=channel(plan.room_id),
            status=plan.status,
            live="1" if plan.status != "over" else "0",
            archive="1" if plan.archive else "0",
            waiting_ttl_ms=self.waiting_ttl_ms,
            finished_ttl_ms=self.finished_ttl_ms,
            deadline_ms="" if plan.deadline_ms is None else plan.deadline_ms,
            events_kept=EVENTS_KEPT,
            node_prefix=nodes_arg(),
            seat_flags=plan.seat_flags,
            head=head,
            seat0=seat0,
            seat1=seat1,
            ai_games_mode=games.mode if games else "",
            ai_games_limit=games.limit if games else AI_GAMES_LIMIT,
            ai_games_ttl_ms=AI_GAMES_TTL_MS,
            job=job.to_fields()["job"] if job else "",
            job_id=job.job_id if job else "",
            job_lane=fairness.owner_lane(job.owner, job.room) if job else "",
            job_cost_ms=fairness.job_cost_ms(job.budget.time_ms) if job else 0,
            max_waiting=fairness.MAX_WAITING,
            max_lead_ms=fairness.MAX_LEAD_MS,
            worker_ttl_ms=fairness.WORKER_TTL_MS,
            room_prefix=keys.ROOM_PREFIX,
            dispatch_scan=fairness.MAX_DISPATCH_SCAN,
            ai_games_grace_ms=games.grace_ms if games else AI_GAMES_GRACE_MS,
            ai_games_kept=games.kept if games else AI_GAMES_KEPT,
            ai_games_listed=AI_GAMES_LISTED,
            cluster="1" if keys.grouped() else "",
            outbox_kept=OUTBOX_KEPT,
            others_counted=others.counted,
            others_unfinished=others.unfinished,
        )

    async def commit_plan(self, plan: RoomCommit) -> PresenceCounts:
        """Write ``plan`` if the room is still at ``plan.expected_version``, in one atomic
        step and one round trip; returns who is there, as published (and written into
        ``plan.snapshot``).

        Refused, writing nothing: :class:`StaleVersion` (the room moved on),
        :class:`AiGamesLimit` (a new AI room past its owner's limit), :class:`QueueFull`
        (the job does not fit in the fair queue).

        On a Redis Cluster a new AI room first counts its owner's games in the other slot
        groups (under the owner's lock, :meth:`_count_other_groups`), and a job the commit
        adds to its group's outbox is relayed to the fair queue at once (:meth:`relay`;
        the sweep relays it again and deletes it, or relays it if this failed)."""
        if not keys.grouped():
            script_keys, args = self.commit_call(plan)
            return self._committed(
                plan, args, await self._commit(keys=list(script_keys), args=list(args))
            )
        if plan.job is not None and self.ai_waiting >= fairness.MAX_WAITING:
            raise QueueFull(self.ai_waiting)
        games = plan.ai_games
        if games is None or games.mode != "create":
            script_keys, args = self.commit_call(plan)
            reply: Any = await self._commit(keys=list(script_keys), args=list(args))
            return await self._committed_cluster(plan, args, reply, OwnerGames())
        lock = _ai_games_lock(games.owner)
        token = secrets.token_hex(8)
        locked = await self._lock(lock, token)
        try:
            presence_keys, others = await self._count_other_groups(plan.room_id, games)
            script_keys, args = self.commit_call(plan, presence_keys, others)
            reply = await self._commit(keys=[*script_keys, *presence_keys], args=list(args))
        finally:
            if locked:
                await self.redis.delete(lock)
        return await self._committed_cluster(plan, args, reply, others)

    def _committed(
        self, plan: RoomCommit, args: CommitArgs, reply: Any, others: OwnerGames = OwnerGames()
    ) -> PresenceCounts:
        """The commit's reply as its outcome (see :meth:`commit_plan`)."""
        status, value = int(reply[0]), int(reply[1])
        if status == 1:
            presence = _presence_reply(reply[2:7])
            apply_presence(plan.snapshot, presence)
            return presence
        if status == 0:
            raise StaleVersion(value)
        if status == -1:
            unfinished, rooms = int(reply[2]), [_text(room) for room in reply[3:]]
            rooms = [*rooms, *(room for room in others.rooms if room not in rooms)]
            raise AiGamesLimit(
                value + others.counted,
                args.ai_games_limit,
                rooms[:AI_GAMES_LISTED],
                unfinished + others.unfinished,
                args.ai_games_kept,
            )
        if status == -2:
            raise QueueFull(value)
        raise BusResponseError(f"the commit script answered {reply!r}")

    async def _committed_cluster(
        self, plan: RoomCommit, args: CommitArgs, reply: Any, others: OwnerGames
    ) -> PresenceCounts:
        """:meth:`_committed` on a Redis Cluster, relaying the commit's outbox entry at
        once. The entry stays in the outbox: the sweep (:meth:`relay_stale`) relays it
        again ``RELAY_AFTER_MS`` later, which is a no-op (the relay remembers it), and
        deletes it. So a failover of the control slot's primary that lost this relay's
        write (Redis replicates asynchronously) is repaired by the second relay."""
        presence = self._committed(plan, args, reply, others)
        entry_id = _text(reply[7]) if len(reply) > 7 else ""
        if entry_id and plan.job is not None:
            entry = OutboxEntry(
                group_of(plan.room_id), entry_id, args.job_id, args.job, args.job_lane,
                args.job_cost_ms,
            )  # fmt: skip
            try:
                await self.relay([entry], delete=False)
            except (BusError, OSError) as exc:  # the commit stands: the sweep relays it
                raise_if_stopping()
                log.warning("could not relay the AI job of room %s: %s", plan.room_id, exc)
        return presence

    async def _lock(self, lock: str, token: str) -> bool:
        """Take ``lock`` (a short per-owner lock, AI_GAMES_LOCK_MS), waiting for it at most
        AI_GAMES_LOCK_WAIT_S; False if it could not be had (the commit goes on: a lock
        held that long belongs to a node that stopped)."""
        deadline = time.monotonic() + AI_GAMES_LOCK_WAIT_S
        while True:
            if await self.redis.set(lock, token, nx=True, px=AI_GAMES_LOCK_MS):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)

    async def _count_other_groups(
        self, room_id: str, games: AiGames
    ) -> tuple[list[str], OwnerGames]:
        """A Redis Cluster: the presence keys of the owner's rooms in ``room_id``'s group
        (for the commit to read) and the owner's AI games in the other groups (counted by
        ai_games_count.lua). Two pipelines: the owner's sets, then the counts."""
        own = group_of(room_id)
        pipe = self.redis.pipeline(transaction=False)
        for group in keys.groups():
            pipe.zrange(keys.ai_games_key(games.owner, group), 0, -1)
        members: list[Any] = await pipe.execute()
        presence_keys = [presence_key(_text(room)) for room in members[own]]
        others = [g for g in keys.groups() if g != own and members[g]]
        if not others:
            return presence_keys, OwnerGames()
        pipe = self.redis.pipeline(transaction=False)
        for group in others:
            handed = [presence_key(_text(room)) for room in members[group]]
            pipe.eval(
                _AI_GAMES_COUNT,
                3 + len(handed),
                keys.ai_games_key(games.owner, group),
                keys.live(group),
                keys.group_node_beats(group),
                *handed,
                nodes_arg(),
                games.grace_ms,
                AI_GAMES_LISTED,
            )
        counted = unfinished = 0
        playing: list[str] = []
        idle: list[str] = []
        for reply in await pipe.execute():
            counted += int(reply[0])
            unfinished += int(reply[1])
            shown = int(reply[2])
            playing += [_text(room) for room in reply[3 : 3 + shown]]
            idle += [_text(room) for room in reply[3 + shown :]]
        return presence_keys, OwnerGames(
            counted, unfinished, tuple((playing + idle)[:AI_GAMES_LISTED])
        )

    async def dispatch(self) -> tuple[int, int]:
        """Admit queued AI jobs the workers can take now: (sent, dropped)."""
        return await self.fair.dispatch()

    # -- the outboxes (a Redis Cluster) --------------------------------------------------
    async def relay(self, entries: Sequence[OutboxEntry], delete: bool = True) -> int:
        """Queue outbox entries' jobs fairly (each entry once, however often it is
        relayed: scripts/ai_relay.lua) and admit what the workers can take now, in one
        control-slot script, then (``delete``) delete the entries from their outboxes;
        how many jobs were queued (not counting duplicates)."""
        if not entries:
            return 0
        args: list[str | int] = [
            fairness.MAX_LEAD_MS, fairness.WORKER_TTL_MS, fairness.MAX_DISPATCH_SCAN,
            fairness.RELAYED_KEEP_MS, fairness.RELAYED_MOST,
        ]  # fmt: skip
        for entry in entries:
            args += [f"{entry.group}/{entry.entry_id}", entry.job_id, entry.job, entry.lane]
            args.append(entry.cost_ms)
        reply: Any = await self._relay(
            keys=[
                keys.AI_READY, keys.AI_WAITING, keys.AI_OWNERS, keys.AI_CLOCK, keys.JOBS,
                keys.AI_WORKERS_LIVE, fairness.relayed_key(),
            ],
            args=args,
        )  # fmt: skip
        self.ai_waiting = int(reply[4])
        if not delete:
            return int(reply[0])
        by_group: dict[int, list[str]] = {}
        for entry in entries:
            by_group.setdefault(entry.group, []).append(entry.entry_id)
        if len(by_group) == 1:
            [(group, ids)] = by_group.items()
            await self.redis.xdel(keys.ai_outbox(group), *ids)
        else:
            pipe = self.redis.pipeline(transaction=False)
            for group, ids in by_group.items():
                pipe.xdel(keys.ai_outbox(group), *ids)
            await pipe.execute()
        return int(reply[0])

    async def relay_stale(
        self, older_than_ms: int = RELAY_AFTER_MS, limit: int = RELAY_BATCH
    ) -> int:
        """A Redis Cluster: relay the outbox entries older than ``older_than_ms`` and
        delete them, at most ``limit``, the oldest of each group first; how many jobs
        were queued (0 on a single Redis). Most were relayed by their node at once (then
        nothing is queued again); the others were left by a node that died between its
        commit and its relay, or lost by a failover of the control slot's primary."""
        if not keys.grouped():
            return 0
        before = int(time.time() * 1000) - older_than_ms

        async def stale(group: int) -> Any:
            return await self.redis.xrange(keys.ai_outbox(group), "-", str(before), count=limit)

        entries: list[OutboxEntry] = []
        for group, page in await each_group(self.redis, stale, "outbox sweep"):
            for entry_id, fields in page or ():
                if len(entries) >= limit:
                    break
                entries.append(_outbox_entry(group, entry_id, fields))
        return await self.relay(entries)

    # -- fan-out and presence ------------------------------------------------------------
    async def publish(self, room_id: str, snapshot: dict[str, Any]) -> None:
        """Fan out a snapshot that is not a new version (a presence change)."""
        if keys.grouped():
            await self.redis.spublish(channel(room_id), fastjson.dumps(snapshot))
        else:
            await self.redis.publish(channel(room_id), fastjson.dumps(snapshot))

    async def publish_snapshot(
        self,
        room_id: str,
        version: int,
        seat_flags: SeatFlags,
        snapshot: dict[str, Any],
        leaving: int | None = None,
    ) -> PresenceCounts | None:
        """Fan out ``snapshot`` (of the room at ``version``) with who is there now, read in
        the same atomic step (one round trip); None, and nothing sent, if the room is no
        longer at ``version`` (or gone).

        ``leaving``: a seat whose player's connection on this node has just gone, counted
        out (as ``attach(room_id, leaving, -1)``) in the same step, whatever the version."""
        head, seat0, seat1 = snapshot_parts(snapshot)
        script_keys = [room_key(room_id), presence_key(room_id), *_beats(room_id)]
        args: list[str | bytes | int] = [
            version, nodes_arg(), seat_flags, head, seat0, seat1, channel(room_id)
        ]  # fmt: skip
        if leaving is None:
            reply: Any = await self._publish_presence(keys=script_keys, args=args)
        else:
            field = self._presence_field(leaving)
            reply = await self._leave(keys=script_keys, args=[*args, field])
        if int(reply[0]) != 1:
            return None
        presence = _presence_reply(reply[2:])
        apply_presence(snapshot, presence)
        return presence

    async def presence_counts(
        self, room_id: str, humans: tuple[bool, bool] = (False, False)
    ) -> PresenceCounts:
        """Who is there across the cluster: connected seats, spectators, and since when
        each seat in ``humans`` (the seats a human player holds) has been gone. A human
        seat found gone without a recorded time (its node died) is recorded as gone now."""
        flags = "".join("1" if human else "0" for human in humans)
        reply: Any = await self._presence(
            keys=[presence_key(room_id), room_key(room_id), *_beats(room_id)],
            args=[nodes_arg(), flags],
        )
        return _presence_reply(reply)

    def _presence_field(self, seat: int | None) -> str:
        return f"{'s' if seat is None else seat}:{self.node}"

    async def attach(self, room_id: str, seat: int | None, delta: int) -> None:
        """Count a connection of ``seat``'s player (None: a spectator) on this node in
        (+1) or out (-1)."""
        await self._attach(
            keys=[presence_key(room_id), room_key(room_id), *_beats(room_id)],
            args=[self._presence_field(seat), delta, "add", nodes_arg()],
        )

    async def restate(self, room_id: str, seat: int | None, count: int) -> None:
        """Set the count of ``seat``'s connections (None: spectators) on this node to
        ``count`` (absolute)."""
        await self._attach(
            keys=[presence_key(room_id), room_key(room_id), *_beats(room_id)],
            args=[self._presence_field(seat), count, "set", nodes_arg()],
        )

    # -- archiving and forgetting --------------------------------------------------------
    async def archived(self, room_id: str, entry_id: str, ttl_ms: int) -> None:
        """The room's game is in the database: acknowledge its ``archive`` entry, give its
        keys ``ttl_ms`` more to live and take it off the lobby (one atomic step; the room
        group's lobby and archive on a Redis Cluster, in the room's slot)."""
        group = group_of(room_id)
        await self._archived(
            keys=[*_room_keys(room_id), keys.live(group), keys.archive(group)],
            args=[ARCHIVERS_GROUP, entry_id, room_id, ttl_ms],
        )

    async def queue_if_legacy(self, room_id: str) -> bool:
        """Queue ``room_id`` for archiving if it is a finished room that never was (it
        ended before the archive existed); atomic, so only one node queues it."""
        done = await self._queue_legacy(
            keys=[room_key(room_id), keys.archive(group_of(room_id))],
            args=[room_id, self.finished_ttl_ms],
        )
        return bool(int(done))

    async def scan_room_records(self, cursor: int, count: int) -> tuple[int, list[str]]:
        """One ``SCAN`` step over room records (not their events, presence or chat): the
        next cursor (0 when the pass is over) and the ids of the rooms seen.

        On a Redis Cluster there is nothing to scan for: the pass looks for rooms that
        ended before the archive existed, and a cluster holds none (kibitz came to the
        cluster long after), so it answers (0, []) at once."""
        if keys.grouped():
            return 0, []
        reply: Any = await self.redis.scan(cursor, match=room_key("*"), count=count, _type="HASH")
        next_cursor, found = reply
        ids = [room_id_of(key) for key in found]
        return int(next_cursor), [
            room_id for room_id, key in zip(ids, found, strict=True)
            if room_id and key == room_key(room_id)
        ]  # fmt: skip

    async def live_rooms_idle_since(
        self, before_ms: int, offset: int, count: int, group: int | None = None
    ) -> list[str]:
        """Lobby entries last changed before ``before_ms``, one page from ``offset``, the
        oldest first: of slot group ``group`` (the archiver pages through each group in
        turn), or with None of every group (on a Redis Cluster group after group, the
        oldest first in each: one pipeline counts each group's, a second reads the page).
        On a single Redis there is one group."""
        if not keys.grouped() or group is not None:
            ids: Any = await self.redis.zrangebyscore(
                keys.live(group or 0), "-inf", before_ms, start=offset, num=count
            )
            return list(ids)
        pipe = self.redis.pipeline(transaction=False)
        for group in keys.groups():
            pipe.zcount(keys.live(group), "-inf", before_ms)
        sizes = [int(n) for n in await pipe.execute()]
        pipe = self.redis.pipeline(transaction=False)
        start, wanted = offset, count
        for group, size in zip(keys.groups(), sizes, strict=True):
            if wanted <= 0:
                break
            if start >= size:
                start -= size
                continue
            pipe.zrangebyscore(keys.live(group), "-inf", before_ms, start=start, num=wanted)
            wanted -= size - start
            start = 0
        found: list[str] = []
        for page in await pipe.execute():
            found += [str(room) for room in page]
        return found[:count]

    async def has_lifetime(self, room_id: str) -> bool:
        """Whether the room's record has a TTL (False also when it is gone)."""
        return int(await self.redis.pttl(room_key(room_id))) >= 0

    async def forget(self, room_id: str, version: int | None) -> bool:
        """Delete what is left of a room that is gone (``version`` None) or still at
        ``version``, and take it off the lobby; False if the room moved on meanwhile."""
        done = await self._forget(
            keys=[*_room_keys(room_id), keys.live(group_of(room_id))],
            args=[room_id, "" if version is None else version],
        )
        return bool(int(done))

    # -- deadlines and heartbeats --------------------------------------------------------
    async def due_rooms(
        self, now_ms: int, limit: int = DUE_BATCH, groups: Iterable[int] | None = None
    ) -> list[str]:
        """Rooms whose clock deadline is at or before ``now_ms``, earliest first. On a
        Redis Cluster those of the slot groups ``groups`` (None: every group), merged: all
        at once; a group whose primary is down is left out, so the others' flags still
        fall (connect.each_group). On a single Redis ``groups`` is ignored: one read."""
        return await _by_score(
            self.redis, keys.deadlines, "-inf", now_ms, limit, "deadline sweep",
            newest=False, groups=groups,
        )  # fmt: skip

    async def drop_deadline(self, room_id: str) -> None:
        """Take a room that is gone off ``deadlines``."""
        await self.redis.zrem(keys.deadlines(group_of(room_id)), room_id)

    # -- the AI-turn watchdog ------------------------------------------------------------
    async def ai_watch_mark(self, room_id: str) -> str | None:
        """The room's watch mark: the AI-turn watchdog's last attempt, ``version:attempt``
        (None: it never queued a job of this room again)."""
        mark = await self.redis.hget(room_key(room_id), AI_WATCH_FIELD)
        return None if mark is None else _text(mark)

    async def job_waiting(self, job_id: str) -> bool:
        """Whether the AI job ``job_id`` waits in the fair queue (not yet handed to the
        workers)."""
        return bool(await self.redis.hexists(keys.AI_WAITING, job_id))

    async def watch_ai_job(
        self,
        room_id: str,
        version: int,
        seen: str | None,
        due_by_ms: int,
        deadline_ms: int | None,
        job: Job | None = None,
        mark: str = "",
    ) -> WatchOutcome:
        """The AI-turn watchdog's step on a due room (server/domain/ai_watch.py): queue
        ``job`` again (None: no job) and set the room's deadline to ``deadline_ms`` (None:
        off the deadlines set), writing ``mark`` as the room's watch mark with the job, in
        one atomic step (scripts/ai_watch.lua) taken only if the room is still at
        ``version``, its mark still ``seen`` and its deadline due by ``due_by_ms``
        ("moved": nothing written: a commit or another node came first). The job is
        queued as a commit queues one: fairly, and admitted at once if a worker is free
        (single Redis); into the room group's outbox, relayed at once (a Redis
        Cluster). "full": the queue could not take it; the deadline moved all the same.
        "pushed": no job was given, the deadline moved."""
        if job is not None and keys.grouped() and self.ai_waiting >= fairness.MAX_WAITING:
            outcome = await self.watch_ai_job(room_id, version, seen, due_by_ms, deadline_ms)
            return "full" if outcome == "pushed" else outcome
        script_keys = [room_key(room_id), keys.deadlines(group_of(room_id))]
        if keys.grouped():
            script_keys.append(keys.ai_outbox(group_of(room_id)))
        else:
            script_keys += [
                keys.JOBS, keys.AI_READY, keys.AI_WAITING, keys.AI_OWNERS, keys.AI_CLOCK,
                keys.AI_WORKERS_LIVE,
            ]  # fmt: skip
        job_json = job.to_fields()["job"] if job else ""
        lane = fairness.owner_lane(job.owner, job.room) if job else ""
        cost = fairness.job_cost_ms(job.budget.time_ms) if job else 0
        reply: Any = await self._ai_watch(
            keys=script_keys,
            args=[
                room_id, version, seen or "", due_by_ms,
                "" if deadline_ms is None else deadline_ms, mark,
                job_json, job.job_id if job else "", lane, cost,
                fairness.MAX_WAITING, fairness.MAX_LEAD_MS, fairness.WORKER_TTL_MS,
                keys.ROOM_PREFIX, fairness.MAX_DISPATCH_SCAN,
                "1" if keys.grouped() else "", OUTBOX_KEPT,
            ],
        )  # fmt: skip
        status, entry_id = int(reply[0]), _text(reply[1])
        if status == 0:
            return "moved"
        if status == -2:
            return "full"
        if status == 2:
            return "pushed"
        if entry_id and job is not None:  # a Redis Cluster: relayed now, swept later
            entry = OutboxEntry(group_of(room_id), entry_id, job.job_id, job_json, lane, cost)
            try:
                await self.relay([entry], delete=False)
            except (BusError, OSError) as exc:  # queued in the outbox: the sweep relays it
                raise_if_stopping()
                log.warning("could not relay the AI job of room %s: %s", room_id, exc)
        return "queued"

    async def heartbeat(self) -> int:
        """Say this node is alive; its players count as connected while it is. Also
        announce on NODE_DIED any node that stopped beating (once, whichever node finds
        it), so the rooms followed elsewhere learn that its players are gone. Returns how
        many it announced.

        On a Redis Cluster the beat is also written into every slot group's copy of the
        node beats (all at once; a group whose primary is down is skipped), which the
        presence scripts are handed."""
        beat_keys = [keys.node_key(self.node), keys.NODE_BEATS]
        if not keys.grouped():
            dead = await self._node_beat(
                keys=beat_keys, args=[self.node, NODE_TTL_S, keys.NODE_DIED]
            )
            return int(dead)
        reply: Any = await self._node_beat(
            keys=beat_keys, args=[self.node, NODE_TTL_S, keys.NODE_DIED, "1"]
        )
        dead, now = int(reply[0]), int(reply[1])

        async def beat(group: int) -> None:
            beats = keys.group_node_beats(group)
            await asyncio.gather(
                self.redis.zadd(beats, {self.node: now}),
                self.redis.zremrangebyscore(beats, "-inf", now - NODE_TTL_MS - GROUP_BEATS_KEEP_MS),
            )

        await each_group(self.redis, beat, "heartbeat")
        return dead

    async def live_nodes(self) -> list[str]:
        """The server nodes that beat within ``NODE_TTL_MS``, sorted (:func:`live_nodes`)."""
        return await live_nodes(self.redis)

    async def leave(self) -> None:
        """This node stops cleanly, every departure of its followers recorded: its beats
        are removed, so no other node announces it as dead later (an announcement makes
        every node broadcast the presence of every room it follows, for nothing here)."""
        await self.redis.delete(keys.node_key(self.node))
        await self.redis.zrem(keys.NODE_BEATS, self.node)
        if keys.grouped():

            async def forget(group: int) -> None:
                await self.redis.zrem(keys.group_node_beats(group), self.node)

            await each_group(self.redis, forget, "leave")


async def live_nodes(redis: aioredis.Redis) -> list[str]:
    """The server nodes of ``NODE_BEATS`` that beat within ``NODE_TTL_MS`` by the Redis
    clock their beats are on, sorted (one script on the control slot: no SCAN, so a
    Redis Cluster's list too)."""
    script = redis.register_script(_LIVE_NODES)
    nodes: Any = await script(keys=[keys.NODE_BEATS], args=[NODE_TTL_MS])
    return sorted(_text(node) for node in nodes)


def _ai_games_lock(owner: str) -> str:
    """A Redis Cluster: the short lock of an owner's new AI rooms (a string with a TTL)."""
    return keys.ai_games_key(owner, 0) + ":creating"


def _outbox_entry(group: int, entry_id: Any, fields: dict[Any, Any]) -> OutboxEntry:
    """An outbox stream entry as written by the commit (fields job, id, lane, cost)."""
    get = {_text(k): _text(v) for k, v in fields.items()}.get
    return OutboxEntry(
        group, _text(entry_id), get("id", ""), get("job", ""), get("lane", ""),
        int(get("cost", "0") or 0),
    )  # fmt: skip
