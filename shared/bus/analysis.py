"""Game analysis in Redis: the jobs of an analysis, the evaluations workers write, and
what the nodes read back (``server/services/analysis.py`` decides when and what).

:class:`AnalysisStore` is the nodes' side (asyncio): start an analysis (one atomic step,
``scripts/analysis_start.lua``), read one under way, forget a stored one.
:class:`AnalysisJobs` is the workers' side (blocking): read a game's position inputs and
write one evaluation and finish its job in one step (``scripts/analysis_write_eval.lua``:
stored once; the write that completes the set queues the game for a node to collect).

Keys (``keys.py``), each bounded:

- ``analysis:jobs``          stream of ``{analysis, ply}``: at most ``max_active``
                             analyses of the game's positions; entries are deleted when done
- ``analysis:{id}``          hash: game, start, moves (JSON), total, status, created_ms,
                             address; a TTL of ``STATE_TTL_MS`` renewed by each write
- ``analysis:{id}:evals``    hash: ply -> evaluation JSON, same TTL
- ``analysis:active``        sorted set: id -> start time; entries older than the TTL are
                             pruned; its size caps the analyses under way
- ``analysis:finished``      stream of ids whose evaluations are all in (``FINISHED_KEPT``)

All of them are global: on a Redis Cluster they carry the control slot's tag
(``kibitz:{c}:analysis:...``), so every script and multi-key command here is on one slot.
Their names are read from ``keys`` when used (``keys.configure`` rebinds them): this
module's ``JOBS``, ``FINISHED`` and ``ACTIVE`` are looked up on each read, never copied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis
import redis.asyncio as aioredis

from kibitz.shared.bus import keys
from kibitz.shared.bus.consumer import ensure_group
from kibitz.shared.bus.scripts import source

#: The module's global key names, each the ``keys`` name it reads at use time.
_GLOBAL_KEYS = {
    "JOBS": "ANALYSIS_JOBS",
    "FINISHED": "ANALYSIS_FINISHED",
    "ACTIVE": "ANALYSIS_ACTIVE",
}
JOBS_GROUP = keys.WORKERS_GROUP  # the workers read analysis jobs in their own group
COLLECTORS_GROUP = "analysts"  # the nodes' group on FINISHED
STATE_TTL_MS = 60 * 60 * 1000  # an analysis's Redis state, renewed by each evaluation
FINISHED_KEPT = 10_000  # entries of FINISHED kept (approximate trim)

StartOutcome = Literal["started", "exists", "busy", "limited"]
_OUTCOMES: dict[int, StartOutcome] = {1: "started", 0: "exists", -1: "busy", -2: "limited"}


def __getattr__(name: str) -> str:
    """``JOBS``, ``FINISHED``, ``ACTIVE``: the key as ``keys.configure`` named it (read
    as ``analysis.JOBS`` at the time of use)."""
    try:
        return str(getattr(keys, _GLOBAL_KEYS[name]))
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def meta_key(game_id: str) -> str:
    """An analysis's state hash."""
    return keys.analysis_key(game_id)


def evals_key(game_id: str) -> str:
    """An analysis's evaluations hash (ply -> evaluation JSON)."""
    return keys.analysis_evals_key(game_id)


@dataclass(frozen=True, slots=True)
class PositionInputs:
    """What a worker needs to rebuild the positions of a game under analysis."""

    game: str
    start: str
    moves_json: str


class AnalysisStore:
    """The nodes' side of analyses in Redis."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self._start = client.register_script(source("analysis_start"))

    async def start(
        self,
        *,
        game_id: str,
        game: str,
        start: str,
        moves: Sequence[str],
        address: str,
        now_ms: int,
        max_active: int,
        max_per_address: int,
    ) -> StartOutcome:
        """Queue one job per position (the start and each move) of a finished game, with
        its state; nothing when one is under way already or too many are.

        On a Redis Cluster the script may read only the keys it is handed: the state
        hashes of the analyses under way (to count the address's) are read from
        ``ACTIVE`` just before and handed over (at most ``max_active`` and those not yet
        pruned; one started meanwhile counts as the address's, so the cap holds)."""
        jobs, active = keys.ANALYSIS_JOBS, keys.ANALYSIS_ACTIVE
        await ensure_group(self.client, jobs, JOBS_GROUP)
        moves_json = json.dumps(list(moves), separators=(",", ":"))
        states: list[str] = []
        cluster: list[str] = []
        if keys.grouped():
            under_way: Any = await self.client.zrange(active, 0, -1)
            states = [meta_key(str(other)) for other in under_way]
            cluster = ["1"]
        reply: Any = await self._start(
            keys=[meta_key(game_id), jobs, active, *states],
            args=[
                game_id, now_ms, STATE_TTL_MS, max_active, len(moves) + 1, game, start,
                moves_json, address, max_per_address, meta_key(""), *cluster,
            ],
        )  # fmt: skip
        return _OUTCOMES[int(reply[0])]

    async def meta(self, game_id: str) -> dict[str, str]:
        """An analysis's state ({} when there is none)."""
        found: Any = await self.client.hgetall(meta_key(game_id))
        return dict(found)

    async def evals(self, game_id: str) -> dict[str, str]:
        """An analysis's evaluations so far, ply -> evaluation JSON."""
        found: Any = await self.client.hgetall(evals_key(game_id))
        return dict(found)

    async def forget(self, game_id: str) -> None:
        """Drop a stored analysis's Redis state."""
        await self.client.delete(meta_key(game_id), evals_key(game_id))  # one slot
        await self.client.zrem(keys.ANALYSIS_ACTIVE, game_id)


class AnalysisJobs:
    """The workers' side of analyses in Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._write = client.register_script(source("analysis_write_eval"))

    def inputs(self, game_id: str) -> PositionInputs | None:
        """The game under analysis ``game_id``; None when its analysis is gone (stored,
        or expired)."""
        meta: Any = self.client.hmget(meta_key(game_id), ["game", "start", "moves"])
        if None in meta:
            return None
        return PositionInputs(str(meta[0]), str(meta[1]), str(meta[2]))

    def write_eval(self, game_id: str, ply: int, evaluation_json: str, entry_id: str) -> int:
        """Store one position's evaluation and finish its job (the entry ``entry_id`` of
        the jobs stream, acknowledged and deleted in the same step): 1 stored, 0 there
        already, -1 analysis gone."""
        stored: Any = self._write(
            keys=[
                meta_key(game_id),
                evals_key(game_id),
                keys.ANALYSIS_FINISHED,
                keys.ANALYSIS_JOBS,
            ],
            args=[ply, evaluation_json, STATE_TTL_MS, game_id, FINISHED_KEPT, JOBS_GROUP, entry_id],
        )
        return int(stored)
