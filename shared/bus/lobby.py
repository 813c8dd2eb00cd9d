"""The lobby's data in Redis: the open seeks, their channel, and the live rooms by page.

Who may post or accept a seek, and what a seek holds, is decided by the server
(``server/services/seeks.py``); this module keeps the seeks so that every node lists them,
and takes one off the lobby in one atomic step, so of two people accepting at once (on any
nodes) exactly one gets it.

- ``seeks``          hash: seek id -> the seek as JSON, with the node and connection of its
                     creator (and the creator's address). A seek whose node's heartbeat is
                     gone (on a Redis Cluster: its score in the control slot's
                     ``node-beats``, handed to the scripts) no longer counts and is
                     pruned. Bounded by the server's limits per connection and per
                     address, and by the connections of live nodes.
- ``seeks:events``   pub/sub: ``{"kind": "changed"}`` when seeks change (the scripts
                     publish it) and the server's ``{"kind": "accepted", ...}``
                     (:meth:`SeekBoard.announce`). On a Redis Cluster a control-slot
                     channel: ``SPUBLISH``.

It also reads ``rooms:live`` (written by the store's commit) a page at a time, for
``GET /api/rooms``: on a Redis Cluster every slot group's (``keys.live(g)``), merged.
"""

from __future__ import annotations

import contextlib
import heapq
import json
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import each_group
from kibitz.shared.bus.scripts import source
from kibitz.shared.bus.store import control_beats, nodes_arg

TakeStatus = Literal["taken", "unknown", "own"]
_TAKE_STATUS: dict[int, TakeStatus] = {1: "taken", 0: "unknown", -1: "own"}


@dataclass(frozen=True, slots=True)
class Posted:
    """A seek posted (``admitted``) or refused, and the address's open seeks then."""

    admitted: bool
    count: int


@dataclass(frozen=True, slots=True)
class Taken:
    """An accept: ``taken`` (``seek`` is its JSON, now off the lobby), ``unknown`` (no such
    live seek) or ``own`` (the acceptor's own seek: it stays)."""

    status: TakeStatus
    seek: str = ""


@dataclass(frozen=True, slots=True)
class LiveEntry:
    """One unfinished room in the live-rooms index and when it last changed (ms)."""

    room_id: str
    updated_ms: int


class SeekBoard:
    """The seeks of every node, as one node posts, takes, withdraws and lists them."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis
        self._add = redis.register_script(source("nodes_lib", "seek_add"))
        self._accept = redis.register_script(source("nodes_lib", "seek_accept"))
        self._remove = redis.register_script(source("nodes_lib", "seek_remove"))

    async def add(self, seek_id: str, seek: str, address: str, per_address: int) -> Posted:
        """Post ``seek`` (JSON with ``node``, ``conn`` and ``address``) unless ``address``
        has ``per_address`` live seeks open already (then nothing changes but the pruning
        of dead nodes' seeks)."""
        reply: Any = await self._add(
            keys=[keys.SEEKS, *control_beats()],
            args=[seek_id, seek, address, per_address, nodes_arg(), keys.SEEKS_CHANNEL],
        )
        count = int(reply)
        return Posted(admitted=count >= 0, count=abs(count))

    async def take(self, seek_id: str, conn: str, player: str | None) -> Taken:
        """Take a live seek off the lobby for the acceptor on connection ``conn`` (and
        player id ``player``): refused (``own``) if the seek is theirs."""
        reply: Any = await self._accept(
            keys=[keys.SEEKS, *control_beats()],
            args=[seek_id, conn, player or "", nodes_arg(), keys.SEEKS_CHANNEL],
        )
        status, data = reply
        return Taken(_TAKE_STATUS.get(int(status), "unknown"), str(data))

    async def get(self, seek_id: str) -> dict[str, Any] | None:
        """The open seek ``seek_id`` if its node is alive (read only: a seek never changes
        while it is open, so what is checked on it holds when it is taken), else None."""
        data: Any = await self._redis.hget(keys.SEEKS, seek_id)
        if data is None:
            return None
        try:
            seek: dict[str, Any] | None = json.loads(data)
        except ValueError:
            return None
        node = seek.get("node") if isinstance(seek, dict) else None
        if not isinstance(node, str) or not await self._redis.exists(keys.node_key(node)):
            return None
        return seek

    async def remove(self, conn: str, seek_ids: list[str]) -> int:
        """Withdraw those of ``seek_ids`` that connection ``conn`` posted; how many went."""
        if not seek_ids:
            return 0
        sharded = ["@"] if keys.grouped() else []
        reply: Any = await self._remove(
            keys=[keys.SEEKS], args=[conn, keys.SEEKS_CHANNEL, *sharded, *seek_ids]
        )
        return int(reply)

    async def announce(self, event: dict[str, Any]) -> None:
        """Publish ``event`` on the seeks' channel (every node's lobby hears it)."""
        message = json.dumps(event, separators=(",", ":"))
        if keys.grouped():
            await self._redis.spublish(keys.SEEKS_CHANNEL, message)
        else:
            await self._redis.publish(keys.SEEKS_CHANNEL, message)

    async def live_seeks(self) -> list[dict[str, Any]]:
        """Every open seek whose node is alive (heartbeat key present), in no order; an
        entry that is not a JSON object is skipped."""
        entries: Any = await self._redis.hvals(keys.SEEKS)
        seeks: list[dict[str, Any]] = []
        for data in entries:
            with contextlib.suppress(ValueError):
                seek = json.loads(data)
                if isinstance(seek, dict):
                    seeks.append(seek)
        nodes = sorted({str(s["node"]) for s in seeks if isinstance(s.get("node"), str)})
        live = {node for node in nodes if await self._redis.exists(keys.node_key(node))}
        return [s for s in seeks if s.get("node") in live]


class LiveRooms:
    """Reads the live-rooms index (``rooms:live``: room -> last change, ms) by score; on
    a Redis Cluster every slot group's, merged (all at once; a group whose primary is
    down is left out)."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self._redis = redis

    async def newest(
        self, top_ms: int | None, cutoff_ms: int, offset: int, count: int
    ) -> list[LiveEntry]:
        """Up to ``count`` rooms changed at or before ``top_ms`` (None: any time) and at or
        after ``cutoff_ms``, most recent first, skipping the first ``offset``."""
        top: int | str = "+inf" if top_ms is None else top_ms
        if not keys.grouped():
            batch: Any = await self._redis.zrevrangebyscore(
                keys.live(0), top, cutoff_ms, start=offset, num=count, withscores=True
            )
            return [LiveEntry(str(member), int(score)) for member, score in batch]

        # Each group's first offset + count, merged newest first (ties: by room id, as
        # ZREVRANGEBYSCORE orders them within a group), then the page.
        # A group whose primary is down (failing over) is left out (each_group).
        async def page(group: int) -> Any:
            return await self._redis.zrevrangebyscore(
                keys.live(group), top, cutoff_ms, start=0, num=offset + count, withscores=True
            )

        pages = await each_group(self._redis, page, "lobby")
        merged = heapq.merge(
            *([(str(m), int(s)) for m, s in found] for _group, found in pages),
            key=lambda entry: (-entry[1], _descending(entry[0])),
        )
        entries = [LiveEntry(room, score) for room, score in merged]
        return entries[offset : offset + count]


def _descending(text: str) -> tuple[int, ...]:
    """A key that sorts strings in reverse (as ZREVRANGEBYSCORE orders equal scores)."""
    return tuple(-ord(c) for c in text) + (1,)
