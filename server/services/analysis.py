"""Game analysis by the worker pool: an evaluation of every position of a finished game.

``POST /api/games/{id}/analysis`` (:mod:`kibitz.server.http.games`) starts an analysis:
one atomic Redis step (``AnalysisStore.start`` in ``shared/bus/analysis.py``) writes the
analysis's state and one job per position (ply 0, the start, to ply N, the final
position) to the stream ``kibitz:analysis:jobs``. That stream is not the live one: a
worker reads the live jobs stream first and takes an analysis job only when no live job
is there (``workers/worker.py``), and each analysis job searches for a fixed, short
budget (:func:`budget_for`), cut short when a live job waits meanwhile. Analysis jobs
are leased like live jobs (the ``workers`` consumer group, reclaimed with ``XAUTOCLAIM``
once idle past the worker's lease), so a killed worker's job is done again by another.

A worker writes its evaluation straight into the analysis's Redis hash
(``AnalysisJobs.write_eval``, ``HSETNX``: a position computed twice is stored once); the
write that completes the set appends the game's id to ``kibitz:analysis:finished``.
Every node runs an :class:`AnalysisCollector` on that stream (consumer group
``analysts``): it classifies the moves and figures each player's accuracy
(:func:`summarise`, pure), stores the analysis in the archive's ``analyses`` table (one
row per game, an upsert), and only then deletes the Redis state and acknowledges the
entry; a node that dies in between leaves the entry pending for another node to claim.
The collector reads through the one stream consumer (``shared/bus/consumer.py``) with
:func:`collect_policy`: an entry whose storing fails (the database away, or anything
else) stays pending and is tried again.

Scores are from the first player's (White's) point of view, in the game's unit (its
``GamePolicy.analysis_scale``: centipawns in chess, discs, men, seeds...); a proven win
or loss is capped at the scale's ``cap`` and carries ``mate``, the signed number of
plies to the end.
A move's ``loss`` is how much the mover's evaluation fell (0 when it was the best move
found), and is an inaccuracy, a mistake or a blunder past the game's thresholds. A
move's accuracy is ``100 * exp(-drop / 25)``, where ``drop`` is the fall, in percentage
points, of the mover's winning chance (a logistic curve of the score); a player's
accuracy is the mean over their moves.

The Redis keys of an analysis and their bounds: ``shared/bus/analysis.py``; the bounds
decided here: ``MAX_POSITIONS`` positions a game, ``MAX_ACTIVE`` analyses under way,
``MAX_PER_ADDRESS`` of them asked for from one address.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import TYPE_CHECKING, Any, Literal

from kibitz.shared.bus import analysis as bus
from kibitz.shared.bus.analysis import AnalysisStore
from kibitz.shared.bus.analysis import evals_key as evals_key  # re-exported: callers and tests
from kibitz.shared.bus.analysis import meta_key as meta_key
from kibitz.shared.bus.connect import AsyncClient
from kibitz.shared.bus.consumer import ConsumerPolicy, Entry, StreamConsumer
from kibitz.shared.games.policy import AnalysisScale as Scale
from kibitz.shared.games.registry import policy_for
from kibitz.shared.protocol.jobs import ANALYSIS_LEVEL as ANALYSIS_LEVEL  # re-exported
from kibitz.shared.protocol.jobs import DECIDED as DECIDED
from kibitz.shared.protocol.jobs import DECIDED_RANGE as DECIDED_RANGE
from kibitz.shared.protocol.jobs import Budget, analysis_budget
from kibitz.shared.protocol.jobs import position_eval as position_eval
from kibitz.shared.protocol.jobs import terminal_eval as terminal_eval

if TYPE_CHECKING:
    from kibitz.server.archive.database import Archive

log = logging.getLogger(__name__)

WORKERS_GROUP = bus.JOBS_GROUP
COLLECTORS_GROUP = bus.COLLECTORS_GROUP
STATE_TTL_MS = bus.STATE_TTL_MS
FINISHED_KEPT = bus.FINISHED_KEPT

MAX_POSITIONS = 401  # positions of one game (the start and 400 plies)
MAX_ACTIVE = 16  # analyses queued or running at once, all nodes together
MAX_PER_ADDRESS = 4  # of those, requested from one address
BLOCK_MS = 1000  # the longest wait of the collector's read
CLAIM_IDLE_MS = 10_000  # a finished entry pending this long was left by a dead node
COLLECT_BATCH = 10  # finished entries claimed, or read, at once


def __getattr__(name: str) -> str:
    """``JOBS``, ``FINISHED``, ``ACTIVE``: the bus's key names as ``keys.configure`` left
    them (read at the time of use; a Redis Cluster names them on the control slot)."""
    if name in ("JOBS", "FINISHED", "ACTIVE"):
        return str(getattr(bus, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def collect_policy() -> ConsumerPolicy:
    """How the finished analyses are read (the stream's name read now)."""
    return ConsumerPolicy(
        bus.FINISHED, COLLECTORS_GROUP, claim_idle_ms=CLAIM_IDLE_MS, count=COLLECT_BATCH,
        block_ms=BLOCK_MS,  # on_failure "raise": an entry not stored stays pending, no limit
    )  # fmt: skip


Status = Literal["queued", "running", "done", "failed"]


MARKS = {"inaccuracy": "?!", "mistake": "?", "blunder": "??"}


def scale_for(game: str) -> Scale:
    """How ``game``'s evaluations are shown and judged (its ``GamePolicy.analysis_scale``)."""
    return policy_for(game).analysis_scale


def budget_for(game: str) -> Budget:
    """The fixed search budget of one analysis job: the game's ``analysis_time_ms`` (a
    120-ply chess game is 121 jobs, about 30 s of search for two workers)."""
    return analysis_budget(game)


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


# -- what the nodes answer and store ----------------------------------------------------------


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

    def __init__(self, redis: AsyncClient) -> None:
        self.store = AnalysisStore(redis)

    async def start(self, record: dict[str, Any], address: str = "") -> str:
        """Queue one job per position of the finished game ``record`` for a request from
        ``address``: ``STARTED``, ``EXISTS`` (one is queued or running already: nothing
        queued), ``BUSY`` or ``LIMITED``."""
        return await self.store.start(
            game_id=record["id"],
            game=record["game"],
            start=record["start"],
            moves=[m["move"] for m in record["moves"]],
            address=address,
            now_ms=int(time.time() * 1000),
            max_active=MAX_ACTIVE,
            max_per_address=MAX_PER_ADDRESS,
        )

    async def status(self, game_id: str) -> dict[str, Any] | None:
        """The state of an analysis under way, or None (none, or stored already)."""
        meta = await self.store.meta(game_id)
        if not meta:
            return None
        evals = await self.store.evals(game_id)
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

    def __init__(self, redis: AsyncClient, archive: Archive, node: str) -> None:
        self.store = AnalysisStore(redis)
        self.stream = StreamConsumer(redis, collect_policy(), node)
        self.archive = archive
        self.node = node

    async def run(self) -> None:
        """Collect until cancelled. A failure (Redis or the database away) raises to the
        node's supervisor, which starts this again with backoff; the entry stays pending."""
        await self.stream.ensure_group()
        while True:
            await self.stream.round(self._handle)

    async def _handle(self, entry: Entry) -> None:
        game_id = entry.fields.get("analysis", "")
        if game_id:
            await self.collect(game_id)

    async def collect(self, game_id: str) -> bool:
        """Store ``game_id``'s complete analysis and forget its Redis state; False when
        there is nothing (left) to store."""
        meta = await self.store.meta(game_id)
        evals = await self.store.evals(game_id)
        if not meta or len(evals) < int(meta.get("total", "0") or 0):
            log.warning("analysis of %s is gone or incomplete; not stored", game_id)
            return False
        analysis = finished_analysis(game_id, meta, evals)
        await self.archive.save_analysis(analysis)
        await self.store.forget(game_id)
        log.info("analysis of %s stored (%s)", game_id, analysis["status"])
        return True
