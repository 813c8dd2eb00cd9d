"""The quick pairing pools in Redis: who waits in which pool, taken out two at a time.

Who may join, what an entry holds and which two are paired is decided by the server
(``server/services/pool.py``); this module keeps the entries so that every node sees every
pool, and takes a chosen pair out in one atomic step, so that of two nodes pairing at once
exactly one gets a given player.

- ``pool``         hash: entry id -> one waiting player as JSON: its ``pool`` (the pool's
                   name), node, connection and address, and what the pairing reads.
                   Every pool's entries are in this one hash. An entry whose node's
                   heartbeat is gone (on a Redis Cluster: its score in the control
                   slot's ``node-beats``, handed to the scripts) no longer counts and is
                   pruned. Bounded by
                   :meth:`PoolBoard.join`'s limits (per address, per pool, in all). One
                   entry per connection and per player (an account's or a guest key's
                   player id, whatever its connections).
- ``pool:gone``    sorted set: entry id -> when (ms) its connection left the pool while
                   the entry was out being paired; :meth:`PoolBoard.restore` does not put
                   such an entry back. Kept GONE_KEEP_MS, at most GONE_MOST ids.
- ``pool:events``  pub/sub: a pairing, told to the node of each of the two players
                   (:meth:`PoolBoard.announce`; the payload is the seeks channel's
                   ``accepted`` event, its ``seek`` field the entry id). On a Redis
                   Cluster a control-slot channel: ``SPUBLISH``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.scripts import source
from kibitz.shared.bus.store import control_beats, nodes_arg

#: How long (ms) and how many ids of entries left while out being paired are kept.
GONE_KEEP_MS = 120_000
GONE_MOST = 10_000

JoinStatus = Literal["joined", "address_full", "pool_full", "already", "all_full"]
_JOIN_STATUS: dict[int, JoinStatus] = {
    1: "joined",
    -1: "address_full",
    -2: "pool_full",
    -3: "already",
    -4: "all_full",
}


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """How many entries one address (all its connections, on every node), one pool, and
    all pools together may hold."""

    per_address: int
    per_pool: int
    total: int


@dataclass(frozen=True, slots=True)
class Joined:
    """A join: ``joined``, or why not (``address_full``, ``pool_full``, ``already``: the
    connection or the player waits in a pool already, ``all_full``); ``waiting``: the
    players in that pool then (this one included when joined)."""

    status: JoinStatus
    waiting: int


class PoolBoard:
    """Every node's pool entries, as one node adds, lists, pairs and removes them."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._join = redis.register_script(source("nodes_lib", "pool_join"))
        self._leave = redis.register_script(source("pool_leave"))
        self._live = redis.register_script(source("nodes_lib", "pool_live"))
        self._take = redis.register_script(source("nodes_lib", "pool_take"))
        self._restore = redis.register_script(source("pool_restore"))

    async def join(self, entry: dict[str, Any], limits: PoolLimits) -> Joined:
        """Add ``entry`` (a dict with ``id``, ``pool``, ``node``, ``conn``, ``address`` and
        ``player``, None for a guest without a key) unless its connection or its player
        waits already or a limit is reached (then nothing changes but the pruning of dead
        nodes' entries)."""
        player = entry.get("player")
        reply: Any = await self._join(
            keys=[keys.POOL, *control_beats()],
            args=[
                entry["id"],
                json.dumps(entry, separators=(",", ":")),
                entry["address"],
                entry["pool"],
                entry["conn"],
                limits.per_address,
                limits.per_pool,
                limits.total,
                nodes_arg(),
                player if isinstance(player, str) else "",
            ],
        )
        status, waiting = reply
        return Joined(_JOIN_STATUS.get(int(status), "all_full"), int(waiting))

    async def leave(self, conn: str, entry_ids: list[str]) -> int:
        """Take out those of ``entry_ids`` that connection ``conn`` put in; how many went
        (0 when they were paired already). An id not there (out being paired) is noted,
        so that :meth:`restore` does not put it back."""
        if not entry_ids:
            return 0
        reply: Any = await self._leave(
            keys=[keys.POOL, keys.POOL_GONE], args=[conn, GONE_KEEP_MS, GONE_MOST, *entry_ids]
        )
        return int(reply)

    async def live(self) -> list[dict[str, Any]]:
        """Every entry whose node is alive, in no order (dead nodes' are pruned)."""
        reply: Any = await self._live(keys=[keys.POOL, *control_beats()], args=[nodes_arg()])
        entries: list[dict[str, Any]] = []
        for data in reply:
            try:
                entry = json.loads(data)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        return entries

    async def take(self, first: str, second: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """Take entries ``first`` and ``second`` out together, both or neither: their
        entries, or None when either is gone (paired elsewhere, left, its node dead)."""
        reply: Any = await self._take(
            keys=[keys.POOL, *control_beats()], args=[first, second, nodes_arg()]
        )
        if int(reply[0]) != 1:
            return None
        return json.loads(reply[1]), json.loads(reply[2])

    async def restore(self, entries: list[dict[str, Any]]) -> int:
        """Put taken entries back (their pairing could not make a room), but not one
        whose connection left while it was out (see :meth:`leave`); how many went back."""
        if not entries:
            return 0
        args = [part for e in entries for part in (e["id"], json.dumps(e, separators=(",", ":")))]
        reply: Any = await self._restore(keys=[keys.POOL, keys.POOL_GONE], args=args)
        return int(reply)

    async def announce(self, event: dict[str, Any]) -> None:
        """Publish ``event`` on the pool's channel (every node hears it)."""
        message = json.dumps(event, separators=(",", ":"))
        if keys.grouped():
            await self._redis.spublish(keys.POOL_CHANNEL, message)
        else:
            await self._redis.publish(keys.POOL_CHANNEL, message)
