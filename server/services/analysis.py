"""Game analysis by the worker pool: an evaluation of every position of a finished game.

``POST /api/games/{id}/analysis`` (:mod:`kibitz.server.http.games`) starts an analysis:
one atomic Redis step (:data:`_START`) writes the analysis's state and one job per
position (ply 0, the start, to ply N, the final position) to the stream
``kibitz:analysis:jobs``. That stream is not the live one: a worker reads the live jobs
stream first and takes an analysis job only when no live job is there
(``workers/worker.py``), and each analysis job searches for a fixed, short budget
(:func:`budget_for`), cut short when a live job waits meanwhile. Analysis jobs are
leased like live jobs (the ``workers`` consumer group, reclaimed with ``XAUTOCLAIM`` once
idle past the worker's lease), so a killed worker's job is done again by another.

A worker writes its evaluation straight into the analysis's Redis hash (:data:`_WRITE`,
``HSETNX``: a position computed twice is stored once); the write that completes the set
appends the game's id to ``kibitz:analysis:finished``. Every node runs an
:class:`AnalysisCollector` on that stream (consumer group ``analysts``): it classifies
the moves and figures each player's accuracy (:func:`summarise`, pure), stores the
analysis in the archive's ``analyses`` table (one row per game, an upsert), and only then
deletes the Redis state and acknowledges the entry; a node that dies in between leaves
the entry pending for another node to claim.

Scores are from the first player's (White's) point of view, in the game's unit (its
``GamePolicy.analysis_scale``: centipawns in chess, discs, men, seeds...); a proven win
or loss is capped at the scale's ``cap`` and carries ``mate``, the signed number of
plies to the end.
A move's ``loss`` is how much the mover's evaluation fell (0 when it was the best move
found), and is an inaccuracy, a mistake or a blunder past the game's thresholds. A
move's accuracy is ``100 * exp(-drop / 25)``, where ``drop`` is the fall, in percentage
points, of the mover's winning chance (a logistic curve of the score); a player's
accuracy is the mean over their moves.

Keys (``kibitz:`` prefix), each bounded:

- ``analysis:jobs``          stream of ``{analysis, ply}``: at most ``MAX_ACTIVE``
                             analyses of ``MAX_POSITIONS`` positions; entries are deleted
                             when done
- ``analysis:{id}``          hash: game, start, moves (JSON), total, status, created_ms,
                             address (who asked: at most ``MAX_PER_ADDRESS`` each); a
                             TTL of ``STATE_TTL_MS`` renewed by each write
- ``analysis:{id}:evals``    hash: ply -> evaluation JSON, same TTL
- ``analysis:active``        sorted set: id -> start time; entries older than the TTL are
                             pruned; its size caps the analyses under way (``MAX_ACTIVE``)
- ``analysis:finished``      stream of ids whose evaluations are all in (capped)
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any, Literal

import redis.asyncio as aioredis

from kibitz.server.loops.background import raise_if_stopping
from kibitz.server.store import ensure_group
from kibitz.shared.bus import keys
from kibitz.shared.games.policy import AnalysisScale as Scale
from kibitz.shared.games.registry import policy_for
from kibitz.shared.protocol import Budget

if TYPE_CHECKING:
    from kibitz.server.archive.database import Archive

log = logging.getLogger(__name__)

JOBS = keys.ANALYSIS_JOBS
FINISHED = keys.ANALYSIS_FINISHED
ACTIVE = keys.ANALYSIS_ACTIVE
WORKERS_GROUP = "workers"
COLLECTORS_GROUP = "analysts"

MAX_POSITIONS = 401  # positions of one game (the start and 400 plies)
MAX_ACTIVE = 16  # analyses queued or running at once, all nodes together
MAX_PER_ADDRESS = 4  # of those, requested from one address
STATE_TTL_MS = 60 * 60 * 1000  # an analysis's Redis state, renewed by each evaluation
FINISHED_KEPT = 10_000
ANALYSIS_LEVEL = 8  # the strongest level: no randomness
BLOCK_MS = 1000
CLAIM_IDLE_MS = 10_000
RETRY_S = 1.0
DECIDED = 10_000.0  # as kibitz.shared.search.choose.DECIDED: a proven result's score
DECIDED_RANGE = 1000.0  # scores this close to DECIDED are proven results

Status = Literal["queued", "running", "done", "failed"]


MARKS = {"inaccuracy": "?!", "mistake": "?", "blunder": "??"}


def scale_for(game: str) -> Scale:
    """How ``game``'s evaluations are shown and judged (its ``GamePolicy.analysis_scale``)."""
    return policy_for(game).analysis_scale


def budget_for(game: str) -> Budget:
    """The fixed search budget of one analysis job: the game's ``analysis_time_ms`` (a
    120-ply chess game is 121 jobs, about 30 s of search for two workers)."""
    return Budget(depth=None, time_ms=policy_for(game).analysis_time_ms, nodes=None)


def meta_key(game_id: str) -> str:
    return keys.analysis_key(game_id)


def evals_key(game_id: str) -> str:
    return keys.analysis_evals_key(game_id)


# -- evaluations: worker side (pure) ----------------------------------------------------------


def position_eval(
    game: str,
    ply: int,
    to_move: int,
    score: float,
    best: str | None,
    pv: list[str] | None = None,
    engine: str = "",
) -> dict[str, Any]:
    """One position's evaluation as stored: ``score`` is the searcher's (the mover's point
    of view, evaluation units, proven results as +-(DECIDED - plies)), turned to the first
    player's view in the game's display unit."""
    scale = scale_for(game)
    white = score if to_move == 0 else -score
    out: dict[str, Any] = {"ply": ply, "to_move": to_move, "best": best}
    if abs(white) >= DECIDED - DECIDED_RANGE:
        plies = int(round(DECIDED - abs(white)))
        out["score"] = math.copysign(scale.cap, white)
        out["mate"] = plies if white > 0 else -plies
    else:
        value = white * scale.per_unit
        out["score"] = max(-scale.cap, min(scale.cap, round(value, 2)))
    if pv:
        out["pv"] = pv[:8]
    if engine:
        out["engine"] = engine
    return out


def terminal_eval(game: str, ply: int, to_move: int, winner: int | None) -> dict[str, Any]:
    """The evaluation of a position where the game is over (no search)."""
    scale = scale_for(game)
    out: dict[str, Any] = {"ply": ply, "to_move": to_move, "best": None}
    if winner is None:
        out["score"] = 0.0
    else:
        out["score"] = scale.cap if winner == 0 else -scale.cap
        out["mate"] = 0
    return out


# -- classification and accuracy (pure) -------------------------------------------------------


def win_chance(score: float, scale: Scale) -> float:
    """The first player's winning chance in percent for a (display-unit) score."""
    return 100.0 / (1.0 + math.exp(-scale.k * score))


def classify(loss: float, scale: Scale) -> str | None:
    if loss >= scale.blunder:
        return "blunder"
    if loss >= scale.mistake:
        return "mistake"
    if loss >= scale.inaccuracy:
        return "inaccuracy"
    return None


def summarise(
    game: str, moves: list[str], evals: dict[int, dict[str, Any]], players: int = 2
) -> dict[str, Any]:
    """Moves judged and accuracies from the positions' evaluations.

    ``moves``: the move texts (ply 1 is ``moves[0]``); ``evals``: ply -> evaluation (from
    :func:`position_eval`), one per position 0..len(moves). A move whose position before
    or after has no score (a failed job) is not judged."""
    scale = scale_for(game)
    judged: list[dict[str, Any]] = []
    per_player: list[list[float]] = [[] for _ in range(players)]
    for ply in range(1, len(moves) + 1):
        before, after = evals.get(ply - 1), evals.get(ply)
        if not before or not after or "score" not in before or "score" not in after:
            continue
        mover = int(before.get("to_move", (ply - 1) % players))
        sign = 1.0 if mover == 0 else -1.0
        played_best = before.get("best") is not None and before.get("best") == moves[ply - 1]
        loss = 0.0 if played_best else max(0.0, sign * (before["score"] - after["score"]))
        drop = 0.0
        if not played_best:
            chance_before = win_chance(sign * before["score"], scale)
            chance_after = win_chance(sign * after["score"], scale)
            drop = max(0.0, chance_before - chance_after)
        accuracy = 100.0 * math.exp(-drop / 25.0)
        label = classify(loss, scale)
        if 0 <= mover < players:
            per_player[mover].append(accuracy)
        judged.append(
            {
                "ply": ply,
                "seat": mover,
                "loss": round(loss, 2),
                "accuracy": round(accuracy, 1),
                "class": label,
                "mark": MARKS.get(label or ""),
            }
        )
    counts = [
        {name: sum(1 for m in judged if m["seat"] == seat and m["class"] == name) for name in MARKS}
        for seat in range(players)
    ]
    return {
        "moves": judged,
        "accuracy": [round(sum(a) / len(a), 1) if a else None for a in per_player],
        "counts": counts,
    }


def thresholds(game: str) -> dict[str, Any]:
    scale = scale_for(game)
    return {
        "unit": scale.unit,
        "cap": scale.cap,
        "inaccuracy": scale.inaccuracy,
        "mistake": scale.mistake,
        "blunder": scale.blunder,
    }


# -- Redis: starting, writing, reading --------------------------------------------------------

# KEYS: meta, jobs, active; ARGV: id, now ms, ttl ms, max active, total, game, start,
# moves JSON, address, max per address, meta key prefix. Returns {1} (started), {0,
# status} (one exists already), {-1} (too many in all) or {-2} (too many from the address).
_START = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, redis.call('HGET', KEYS[1], 'status') or 'queued'}
end
local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - ttl)
local active = redis.call('ZRANGE', KEYS[3], 0, -1)
if #active >= tonumber(ARGV[4]) then return {-1} end
local mine = 0
for _, id in ipairs(active) do
  if redis.call('HGET', ARGV[11] .. id, 'address') == ARGV[9] then mine = mine + 1 end
end
if mine >= tonumber(ARGV[10]) then return {-2} end
redis.call('HSET', KEYS[1], 'game', ARGV[6], 'start', ARGV[7], 'moves', ARGV[8],
           'total', ARGV[5], 'status', 'queued', 'created_ms', ARGV[2], 'address', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[3], now, ARGV[1])
for ply = 0, tonumber(ARGV[5]) - 1 do
  redis.call('XADD', KEYS[2], '*', 'analysis', ARGV[1], 'ply', ply)
end
return {1}
"""

# KEYS: meta, evals, finished; ARGV: ply, evaluation JSON, ttl ms, id, finished cap.
# Stores the evaluation once; the write that completes the set queues the id for a node.
# Returns 1 when stored, 0 when it was there already, -1 when the analysis is gone.
WRITE_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local stored = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
if redis.call('HGET', KEYS[1], 'status') == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'running')
end
local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
if redis.call('HLEN', KEYS[2]) >= total and redis.call('HSETNX', KEYS[1], 'finished', '1') == 1 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'analysis', ARGV[4])
end
return stored
"""


def status_of(meta: dict[str, str], evals: dict[str, str]) -> dict[str, Any]:
    """The answer to ``GET .../analysis`` while the analysis is in Redis."""
    total = int(meta.get("total", "0") or 0)
    status = meta.get("status", "queued")
    if status not in ("queued", "running", "failed"):
        status = "running"
    positions = sorted((json.loads(v) for v in evals.values()), key=lambda e: int(e["ply"]))
    game = meta.get("game", "")
    return {
        "status": status,
        "game": game,
        "progress": {"done": len(positions), "total": total},
        "thresholds": thresholds(game),
        "positions": positions,
        "created_ms": int(meta.get("created_ms", "0") or 0),
    }


class StartOutcome:
    STARTED = "started"
    EXISTS = "exists"
    BUSY = "busy"  # MAX_ACTIVE analyses under way
    LIMITED = "limited"  # MAX_PER_ADDRESS of them from this address


class AnalysisQueue:
    """The server side in Redis: start an analysis, read one under way."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._start = redis.register_script(_START)

    async def start(self, record: dict[str, Any], address: str = "") -> str:
        """Queue one job per position of the finished game ``record`` for a request from
        ``address``: ``STARTED``, ``EXISTS`` (one is queued or running already: nothing
        queued), ``BUSY`` or ``LIMITED``."""
        await ensure_group(self.redis, JOBS, WORKERS_GROUP)
        moves = [m["move"] for m in record["moves"]]
        now = int(time.time() * 1000)
        reply: Any = await self._start(
            keys=[meta_key(record["id"]), JOBS, ACTIVE],
            args=[
                record["id"], now, STATE_TTL_MS, MAX_ACTIVE, len(moves) + 1, record["game"],
                record["start"], json.dumps(moves, separators=(",", ":")), address,
                MAX_PER_ADDRESS, meta_key(""),
            ],
        )  # fmt: skip
        return {
            1: StartOutcome.STARTED,
            0: StartOutcome.EXISTS,
            -1: StartOutcome.BUSY,
            -2: StartOutcome.LIMITED,
        }[int(reply[0])]

    async def status(self, game_id: str) -> dict[str, Any] | None:
        """The state of an analysis under way, or None (none, or stored already)."""
        meta: Any = await self.redis.hgetall(meta_key(game_id))
        if not meta:
            return None
        evals: Any = await self.redis.hgetall(evals_key(game_id))
        return {"id": game_id, **status_of(meta, evals)}


def finished_analysis(game_id: str, meta: dict[str, str], evals: dict[str, str]) -> dict[str, Any]:
    """The stored form of a complete analysis (what ``GET .../analysis`` answers)."""
    game = meta.get("game", "")
    moves: list[str] = json.loads(meta.get("moves", "[]"))
    by_ply = {int(ply): json.loads(text) for ply, text in evals.items()}
    positions = [by_ply[ply] for ply in sorted(by_ply)]
    failed = [p["ply"] for p in positions if "error" in p]
    engines = sorted({str(p["engine"]) for p in positions if p.get("engine")})
    summary = summarise(game, moves, by_ply)
    return {
        "id": game_id,
        "status": "failed" if failed else "done",
        "game": game,
        "progress": {"done": len(positions), "total": int(meta.get("total", "0") or 0)},
        "thresholds": thresholds(game),
        "engines": engines,
        "positions": positions,
        **summary,
        "failed_plies": failed,
        "created_ms": int(meta.get("created_ms", "0") or 0),
        "finished_ms": int(time.time() * 1000),
    }


class AnalysisCollector:
    """A node's loop storing complete analyses in the archive (see the module doc)."""

    def __init__(self, redis: aioredis.Redis, archive: Archive, node: str) -> None:
        self.redis = redis
        self.archive = archive
        self.node = node

    async def run(self) -> None:
        claim_cursor = "0-0"
        while True:
            try:
                await ensure_group(self.redis, FINISHED, COLLECTORS_GROUP)
                while True:
                    reply: Any = await self.redis.xautoclaim(
                        FINISHED, COLLECTORS_GROUP, self.node, CLAIM_IDLE_MS, claim_cursor,
                        count=10,
                    )  # fmt: skip
                    claim_cursor = reply[0]
                    await self._handle(reply[1])
                    batches: Any = await self.redis.xreadgroup(
                        COLLECTORS_GROUP, self.node, {FINISHED: ">"}, count=10, block=BLOCK_MS
                    )
                    for _stream, entries in batches or []:
                        await self._handle(entries)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis or the database away: entries stay pending
                raise_if_stopping()
                log.warning("collecting analyses paused (%s: %s)", type(exc).__name__, exc)
                await asyncio.sleep(RETRY_S)

    async def _handle(self, entries: list[tuple[str, dict[str, str] | None]]) -> None:
        for entry_id, fields in entries:
            game_id = (fields or {}).get("analysis", "")
            if game_id:
                await self.collect(game_id)
            await self.redis.xack(FINISHED, COLLECTORS_GROUP, entry_id)
            await self.redis.xdel(FINISHED, entry_id)

    async def collect(self, game_id: str) -> bool:
        """Store ``game_id``'s complete analysis and forget its Redis state; False when
        there is nothing (left) to store."""
        meta: Any = await self.redis.hgetall(meta_key(game_id))
        evals: Any = await self.redis.hgetall(evals_key(game_id))
        if not meta or len(evals) < int(meta.get("total", "0") or 0):
            log.warning("analysis of %s is gone or incomplete; not stored", game_id)
            return False
        analysis = finished_analysis(game_id, meta, evals)
        await self.archive.save_analysis(analysis)
        await self.redis.delete(meta_key(game_id), evals_key(game_id))
        await self.redis.zrem(ACTIVE, game_id)
        log.info("analysis of %s stored (%s)", game_id, analysis["status"])
        return True
