"""Fair admission of AI jobs: who gets the next free worker.

Workers read ``kibitz:jobs`` first come, first served, so before this module one
connection that opened forty strong chess games made everybody else's bot wait for all
forty searches. Now a job is not written to the stream when its move is committed: it
waits in a fair queue in front of the stream, and a dispatch step moves jobs into the
stream only while the stream holds fewer jobs than there are live workers. The stream
therefore holds only jobs that a worker will start at once, and the order in which jobs
start is decided by the fair queue, not by arrival.

The fair queue is start-time fair queueing (SFQ) by *owner* (the address that created
the room), with job costs in milliseconds of expected search time:

- the queue has a virtual clock ``v`` (``kibitz:ai:clock``): the start tag of the job
  dispatched last;
- each owner has the finish tag of its last queued job (``kibitz:ai:owners``);
- a new job starts at ``max(v, owner's finish tag)`` and finishes ``cost`` later;
- dispatch takes the job with the smallest start tag, the cheaper job on a tie.

An owner with forty queued 2.5 s searches has its jobs starting at 0 s, 2.5 s, ... 97.5 s
of virtual time; a newcomer's job starts at ``v``, the front of the queue, and goes
next. With several owners backlogged, each gets workers in proportion to its share and
an owner that was idle is served first. Nobody is starved, and when nobody else waits
the flooder's jobs go out as fast as workers free up (the queue never idles a worker).
When the queue runs empty everybody is even again (the owners' tags are forgotten).

Jobs are not preempted, so with every worker deep in a long search a newcomer would
still wait for one of them to finish (up to 2.5 s for level-8 chess). To keep live games
responsive, a worker whose search has run ``YIELD_AFTER_MS`` asks
``FairQueue.should_yield`` at each lease tick; the answer is yes when the stream is
full, a waiting job's owner has nothing running, and the searching job's owner is
backlogged (has another job running or waiting). The worker then stops its search
early and posts the best move found so far, as if its time had run out. A lone player's
single game is never cut short; a flooder's searches are, to no less than
``YIELD_AFTER_MS``, and each waiting job makes at most one search yield
(``ai:yield:{job id}``, a marker with a TTL).

Room for later: a low-priority class (analysis, hints) would add a large constant to
its tags (say a day of work) so that every live game's job sorts before it; a game with
a clock (issue 7) would get the tag ``v`` (the front) when its time left runs short.
Both are changes to the tag only.

Keys (``kibitz:`` prefix), each bounded:

- ``ai:ready``        sorted set: job id -> start tag + cost/10000 (the cost breaks ties;
                      it adds less than 1 to an integer tag); members leave on dispatch or drop
- ``ai:waiting``      hash: job id -> job JSON; at most ``MAX_WAITING`` entries (a commit
                      that would add more is refused with ``server/busy``)
- ``ai:owners``       sorted set: owner -> finish tag of its last job; owners the clock
                      has passed are pruned (they are no different from new ones), all of
                      them when the queue is empty, and no owner starts more than
                      ``MAX_LEAD_MS`` of work ahead of the clock
- ``ai:clock``        string: the virtual clock ``v`` (ms of work)
- ``ai:workers``      sorted set: worker name -> last beat (ms); beats older than
                      ``WORKER_TTL_MS`` are pruned; its size is the dispatch window
- ``ai:yield:{job}``  string with a TTL: a search already yielded for this waiting job
                      (a Redis Cluster: ``ai:yielded``, one sorted set job id -> expiry ms,
                      pruned as it is written: :func:`yielded_key`)
- ``ai:relayed``      a Redis Cluster only: sorted set "group/outbox entry id" -> when it
                      was relayed (ms), so an entry relayed twice is queued once; kept
                      ``RELAYED_KEEP_MS``, at most ``RELAYED_MOST`` (:func:`relayed_key`)
- ``ai:games:{owner}`` sorted set: unfinished rooms with an AI seat -> last commit (ms);
                      the AI game cap's (store.py ``AiGames``, scripts/ai_games_lib.lua);
                      at most ``AI_GAMES_KEPT``, rooms that left the lobby are pruned

Dispatch drops (never sends) a job whose room is gone or no longer at the job's version:
the player resigned or the game moved on while the job waited. Wall-clock times come
from the Redis server's clock (``TIME``), so nodes and workers with skewed clocks agree.

On a Redis Cluster there is still one fair queue and one jobs stream, on the control
slot, so fairness stays exact across the slot groups (a fair queue split over groups
would not be fair across them, and a worker reading many streams is handed one job per
stream per read). A commit there cannot reach them (another slot): it adds its job to its
group's outbox stream, and the node relays it here at once (``scripts/ai_relay.lua``,
``RoomStore.relay``; a sweeper relays what a dead node left, each job queued once).
Dispatch there reads no room (rooms are in other slots): it sends every job it takes, and
the worker drops a stale one by reading its room's version before it searches.

The Lua is in ``scripts/fair_lib.lua`` (the functions the store's commit shares),
``fair_dispatch.lua``, ``fair_beat.lua``, ``fair_should_yield.lua`` and ``ai_relay.lua``,
each run by one method here or in the store. On a single Redis two touch keys they are
not handed, which a single Redis server allows (each file says so): dispatch reads the
rooms of queued jobs, and should_yield marks the newcomer it picks; on a Redis Cluster
neither does (every key each touches is handed to it).
"""

from __future__ import annotations

import math
from typing import Any

import redis
import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source

MAX_WAITING = 10_000  # jobs in the fair queue, all owners together
MAX_COST_MS = 3_000  # a job's expected cost, whatever its budget says
DEFAULT_COST_MS = 1_000  # for a budget with no time limit (depth- or node-bound)
MAX_LEAD_MS = 600_000  # an owner's tags run at most this far ahead of the clock
WORKER_TTL_MS = 10_000  # a worker that has not beaten for this long is not counted
MAX_DISPATCH_SCAN = 64  # ready jobs looked at by one dispatch call (bounded script time)
YIELD_AFTER_MS = 1_000  # a search this old may be cut short for a waiting newcomer
YIELD_MARK_MS = 5_000  # lifetime of the "a search yielded for this job" marker
RELAYED_KEEP_MS = 600_000  # a Redis Cluster: how long a relayed outbox entry is remembered
RELAYED_MOST = 100_000  # ... and how many, at most


def relayed_key() -> str:
    """A Redis Cluster: the outbox entries relayed to the fair queue (sorted set: "group/
    entry id" -> when, ms), on the control slot."""
    return keys.AI_READY.removesuffix("ready") + "relayed"


def yielded_key() -> str:
    """A Redis Cluster: the yield markers (sorted set: waiting job id -> expiry, ms), on
    the control slot."""
    return keys.AI_READY.removesuffix("ready") + "yielded"


def owner_lane(owner: str, room: str) -> str:
    """Whose turn in the fair queue a job takes: its owner's, or, for rooms made before
    owners were recorded, a lane of its own."""
    return owner or f"room:{room}"


def job_cost_ms(time_ms: int | None) -> int:
    """The expected search time of a job with this time budget, for the virtual clock."""
    if time_ms is None:
        return DEFAULT_COST_MS
    return max(1, min(time_ms, MAX_COST_MS))


# The scripts (scripts/fair_*.lua), read once when this module loads: a missing file fails
# the import. fair_lib.lua is also joined before the store's commit script, which queues
# and admits a job in the same atomic step as its move.
_DISPATCH = source("fair_lib", "fair_dispatch")
_BEAT = source("fair_lib", "fair_beat")
_SHOULD_YIELD = source("fair_should_yield")


def _dispatch_keys() -> list[str]:
    """fair_dispatch.lua's KEYS (named in its header), read when used: the global names
    are the control slot's on a Redis Cluster."""
    return [keys.AI_READY, keys.AI_WAITING, keys.AI_CLOCK, keys.JOBS, keys.AI_WORKERS_LIVE]


def _dispatch_args() -> list[Any]:
    """fair_dispatch.lua's ARGV: no room prefix on a Redis Cluster (no room is read)."""
    return [WORKER_TTL_MS, "" if keys.grouped() else keys.ROOM_PREFIX, MAX_DISPATCH_SCAN]


def _should_yield_keys() -> list[str]:
    """fair_should_yield.lua's KEYS: the markers' set too on a Redis Cluster."""
    names = [keys.AI_READY, keys.AI_WAITING, keys.JOBS, keys.AI_WORKERS_LIVE]
    return [*names, yielded_key()] if keys.grouped() else names


class FairQueue:
    """The dispatch and liveness steps for a synchronous client (the workers)."""

    def __init__(self, client: redis.Redis) -> None:
        self.redis = client
        self._dispatch = client.register_script(_DISPATCH)
        self._beat = client.register_script(_BEAT)
        self._should_yield = client.register_script(_SHOULD_YIELD)

    def dispatch(self) -> tuple[int, int]:
        """Admit waiting jobs into the stream up to the window: (sent, dropped)."""
        sent, dropped = self._dispatch(keys=_dispatch_keys(), args=_dispatch_args())
        return int(sent), int(dropped)

    def beat(self, worker: str) -> int:
        """Count ``worker`` as live now; returns the number of live workers."""
        return int(self._beat(keys=[keys.AI_WORKERS_LIVE], args=[worker, WORKER_TTL_MS]))

    def should_yield(self, lane: str) -> bool:
        """Whether a search for owner ``lane`` should stop now to free its worker for a
        waiting newcomer (claims that newcomer, so only one search yields for it)."""
        answer = self._should_yield(
            keys=_should_yield_keys(),
            args=[lane, MAX_DISPATCH_SCAN, keys.AI_YIELD_PREFIX, YIELD_MARK_MS],
        )
        return bool(int(answer))

    def leave(self, worker: str) -> None:
        """Stop counting ``worker`` (it exits cleanly)."""
        self.redis.zrem(keys.AI_WORKERS_LIVE, worker)

    def waiting(self) -> int:
        return int(self.redis.hlen(keys.AI_WAITING))


class AsyncFairQueue:
    """The same steps for an asyncio client (server nodes, tests, benchmarks)."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.redis = client
        self._dispatch = client.register_script(_DISPATCH)

    async def dispatch(self) -> tuple[int, int]:
        sent, dropped = await self._dispatch(keys=_dispatch_keys(), args=_dispatch_args())
        return int(sent), int(dropped)

    async def waiting(self) -> int:
        return int(await self.redis.hlen(keys.AI_WAITING))


class FairModel:
    """The fair queue's policy in plain Python, step for step as the Lua does it (room
    versions aside): for unit tests and for reasoning about the policy."""

    def __init__(self) -> None:
        self.clock = 0
        self.owners: dict[str, int] = {}  # owner -> finish tag of its last job
        self.ready: dict[str, float] = {}  # job id -> start tag + cost / 10000

    def enqueue(self, owner: str, job_id: str, cost: int) -> int:
        """Queue a job; returns its start tag."""
        if not self.ready:
            self.owners = {}
        self.owners = {o: t for o, t in self.owners.items() if t > self.clock}
        last = self.owners.get(owner, self.clock)
        start = min(max(self.clock, last), self.clock + MAX_LEAD_MS)
        self.ready[job_id] = start + cost / 10000
        self.owners[owner] = start + cost
        return start

    def dispatch(self) -> str | None:
        """The job a free worker gets next (ties go to the smaller id, as in Redis)."""
        if not self.ready:
            return None
        job_id = min(self.ready, key=lambda j: (self.ready[j], j))
        self.clock = max(self.clock, math.floor(self.ready.pop(job_id)))
        return job_id
