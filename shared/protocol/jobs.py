"""Server to worker and back: an AI move to compute (:class:`Job`, with its
:class:`Budget`) and the move found (:class:`JobResult`), as Redis stream entries.

Each class writes itself as flat stream fields (``to_fields``) and reads itself back
(``from_fields``), raising :class:`ProtocolError` (``job/invalid``, ``result/invalid``)
on an entry it cannot trust. An analysis job (:class:`AnalysisJob`) asks for one
position of a finished game; its evaluation is a small dict (:func:`position_eval`,
:func:`terminal_eval`, :func:`failed_eval`) stored as JSON and served as it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kibitz.shared.games.registry import policy_for
from kibitz.shared.protocol.codec import ProtocolError

#: Fields of a Redis stream entry, typed loosely to match redis-py's signatures.
StreamFields = dict[Any, Any]
MAX_PV = 16  # moves of an AI's line kept with its move
MAX_MOVE_TEXT = 64  # longest move text in an AI's line


@dataclass(frozen=True, slots=True)
class Budget:
    """Search limits; any of them may be None (unbounded), not all of them."""

    depth: int | None = None
    time_ms: int | None = None
    nodes: int | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """One AI move to compute, for ``room`` at ``version``.

    ``position`` is the game's start position and ``moves`` the moves played since, so
    the worker rebuilds the exact state, repetition history included. ``owner`` is the
    address that created the room ("" for rooms made before owners were recorded): jobs
    are queued fairly per owner.
    """

    job_id: str
    room: str
    version: int
    game: str
    position: str
    moves: list[str]
    level: int
    budget: Budget
    seed: int = 0
    owner: str = ""
    #: In timed games: the server-clock time (epoch ms, the Redis server's clock) by
    #: which the move should be back; the worker caps its search by it, so time spent
    #: waiting in the queue counts against the AI's clock. None: untimed.
    deadline_ms: int | None = None

    def to_fields(self) -> StreamFields:
        """Flat string fields for a Redis stream entry."""
        return {"job": json.dumps(asdict(self), separators=(",", ":"))}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> Job:
        try:
            data = json.loads(fields["job"])
            budget = Budget(**data.pop("budget"))
            job = cls(budget=budget, **data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError("job/invalid", f"malformed job entry: {exc}") from None
        if (
            not isinstance(job.position, str)
            or not isinstance(job.version, int)
            or not isinstance(job.moves, list)
            or not isinstance(job.owner, str)
            or not (job.deadline_ms is None or isinstance(job.deadline_ms, int))
        ):
            raise ProtocolError("job/invalid", "malformed job entry: bad field types")
        return job


#: The ``engine`` of a move found by our own searcher (see ``JobResult.engine``).
SEARCHER_ENGINE = "kibitz"


@dataclass(frozen=True, slots=True)
class JobResult:
    """The move a worker found for a job (or an error text when it could not).

    ``engine`` says what found the move: ``"kibitz"`` (our searcher; also what results
    from workers older than the field mean) or a UCI engine's name (``"Stockfish 15.1"``)."""

    job_id: str
    room: str
    version: int
    move: str | None
    score: float = 0.0
    depth: int = 0
    nodes: int = 0
    time_ms: int = 0
    worker: str = ""
    error: str | None = None
    engine: str = SEARCHER_ENGINE
    #: The line the move starts, as move texts (the move first): a hint while the game
    #: runs, so it is kept and shown to the players only once the game is over.
    pv: list[str] = field(default_factory=list)

    def to_fields(self) -> StreamFields:
        return {"result": json.dumps(asdict(self), separators=(",", ":"))}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> JobResult:
        try:
            result = cls(**json.loads(fields["result"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError("result/invalid", f"malformed result entry: {exc}") from None
        expected: dict[str, tuple[type, ...]] = {
            "job_id": (str,),
            "room": (str,),
            "version": (int,),
            "move": (str, type(None)),
            "score": (int, float),
            "depth": (int,),
            "nodes": (int,),
            "time_ms": (int,),
            "worker": (str,),
            "error": (str, type(None)),
            "engine": (str,),
        }
        for name, types in expected.items():
            value = getattr(result, name)
            if not isinstance(value, types) or isinstance(value, bool):
                raise ProtocolError("result/invalid", f"result field {name!r} has a bad type")
        if not isinstance(result.pv, list) or not all(
            isinstance(m, str) and len(m) <= MAX_MOVE_TEXT for m in result.pv
        ):
            raise ProtocolError("result/invalid", "result field 'pv' has a bad type")
        return replace(result, pv=result.pv[:MAX_PV])


# -- analysis: one position of a finished game to evaluate, and its evaluation ----------------

#: The level of analysis searches: the strongest (no randomness).
ANALYSIS_LEVEL = 8
DECIDED = 10_000.0  # as kibitz.shared.search.choose.DECIDED: a proven result's score
DECIDED_RANGE = 1000.0  # scores this close to DECIDED are proven results
MAX_PLY_DIGITS = 4  # an analysis job's ply: at most 9999 (games have at most 401 positions)


@dataclass(frozen=True, slots=True)
class AnalysisJob:
    """Evaluate the position after ``ply`` moves of the game under analysis ``analysis``
    (its id). The Lua script that starts an analysis writes these entries."""

    analysis: str
    ply: int

    def to_fields(self) -> StreamFields:
        return {"analysis": self.analysis, "ply": self.ply}

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> AnalysisJob:
        analysis, ply = fields.get("analysis", ""), fields.get("ply", "")
        if not (ply.isascii() and ply.isdigit() and len(ply) <= MAX_PLY_DIGITS):
            raise ProtocolError("job/invalid", "malformed analysis job entry: bad ply")
        return cls(analysis, int(ply))


def analysis_budget(game: str) -> Budget:
    """The fixed search budget of one analysis job: the game's ``analysis_time_ms`` (a
    120-ply chess game is 121 jobs, about 30 s of search for two workers)."""
    return Budget(depth=None, time_ms=policy_for(game).analysis_time_ms, nodes=None)


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
    player's view in the game's display unit (its ``GamePolicy.analysis_scale``)."""
    scale = policy_for(game).analysis_scale
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
    scale = policy_for(game).analysis_scale
    out: dict[str, Any] = {"ply": ply, "to_move": to_move, "best": None}
    if winner is None:
        out["score"] = 0.0
    else:
        out["score"] = scale.cap if winner == 0 else -scale.cap
        out["mate"] = 0
    return out


def failed_eval(ply: int, error: str) -> dict[str, Any]:
    """The evaluation of a position no search could judge (the move is not judged)."""
    return {"ply": ply, "error": error}
