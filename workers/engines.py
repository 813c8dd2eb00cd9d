"""Real engines as AI backends: any UCI engine (Stockfish, ...) serves a game's jobs.

``kibitz worker --engine chess=/usr/games/stockfish`` makes the worker hand its chess
jobs to that engine through python-chess's ``chess.engine``. The engine process is
started once (when the worker starts) and reused by every job; a job gets a
``ucinewgame`` (a cleared hash) when it is for another room than the job before. A job
whose engine fails (it died, would not start, did not answer in time, or named a move
that is not legal) is searched by our own searcher instead, on what is left of its
budget, so the room still gets a move; the next job starts a fresh engine (after a
failed start, jobs use our searcher for ``RETRY_START_S`` before the next attempt).

Levels map to the engine's strength settings (:data:`LEVEL_ELO`, :data:`LEVEL_SKILL`),
and the job's budget to the engine's limit (:func:`limit_for`): its ``time_ms`` (in a
timed game already cut to the job's ``deadline_ms`` by the worker) becomes the
engine's ``movetime``. The lease keeper's cancellation (the room moved on, or a waiting
game needs the worker) sends the engine ``stop``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import chess
import chess.engine

from kibitz.shared.games.registry import available_games, policy_for
from kibitz.shared.protocol.jobs import SEARCHER_ENGINE, Budget, Job
from kibitz.shared.search.choose import DECIDED
from kibitz.shared.search.limits import CancelToken
from kibitz.shared.search.scores import WIN

log = logging.getLogger(__name__)

#: Bot level -> ``UCI_Elo`` with ``UCI_LimitStrength`` on (index 0 = level 1); None: the
#: engine's full strength (``UCI_LimitStrength`` off). Clamped to the engine's range
#: (Stockfish 15.1: 1350-2850).
LEVEL_ELO: tuple[int | None, ...] = (1350, 1500, 1650, 1800, 2000, 2200, 2500, None)
#: Bot level -> ``Skill Level`` on a 0-20 scale, for engines without ``UCI_Elo`` (scaled to
#: the option's own range). Stockfish 15.1 rates skill s at about
#: 1347 + 143 * s**0.806 Elo, so these are the skills nearest to :data:`LEVEL_ELO`.
LEVEL_SKILL: tuple[int, ...] = (0, 1, 3, 4, 7, 9, 13, 20)
#: Longest a UCI engine may take to start and answer ``uci``/``isready``.
START_TIMEOUT_S = 10.0
#: Once started, longest it may take over any other exchange (``isready``, ``quit``...).
COMMAND_TIMEOUT_S = 2.0
#: After a failed start, jobs use our searcher this long before the next attempt.
RETRY_START_S = 30.0
#: An engine still searching this long past its limit is sent ``stop`` ...
LATE_S = 1.0
#: ... and one that has not answered this long after ``stop`` is given up (killed).
STOP_GRACE_S = 2.0
#: How often the job's cancellation and progress are looked at while the engine searches.
POLL_S = 0.05
#: A depth- or node-bound job (no time limit) is given up after this long.
UNTIMED_CAP_S = 120.0
#: A job with no limit at all (never sent by the server) searches this long.
DEFAULT_TIME_MS = 1000
#: Longest engine name recorded (from the engine's ``id name``).
MAX_ENGINE_NAME = 64
#: A job with less time than this left for its fallback search searches one ply.
MIN_FALLBACK_MS = 20


class EngineFailure(Exception):
    """The engine could not produce a legal move for this job."""


class EngineUnavailable(EngineFailure):
    """The engine is not running (its start failed; the next attempt is not due yet)."""


def parse_engine_specs(specs: list[str] | None) -> dict[str, str]:
    """``GAME=COMMAND`` options (``chess=/usr/games/stockfish``) as {game: command}."""
    engines: dict[str, str] = {}
    for spec in specs or []:
        game, sep, command = spec.partition("=")
        game, command = game.strip(), command.strip()
        if not sep or not game or not command:
            raise ValueError(
                f"--engine wants GAME=COMMAND (chess=/usr/games/stockfish), not {spec!r}"
            )
        if policy_for(game).engine_protocol != "uci":
            raise ValueError(f"--engine {spec!r}: UCI engines play {', '.join(uci_games())} only")
        engines[game] = command
    return engines


def uci_games() -> list[str]:
    """The games a UCI engine can play (``GamePolicy.engine_protocol``), sorted."""
    return sorted(g.name for g in available_games() if g.policy.engine_protocol == "uci")


def launch(
    command: str | list[str], timeout_s: float = START_TIMEOUT_S
) -> chess.engine.SimpleEngine:
    """Start a UCI engine (``command``: a path, or a command line split like a shell does).

    python-chess runs each engine's event loop on a thread of its own, which inherits the
    daemon flag of the thread that starts it: starting from a daemon thread means a
    process that exits without closing the engine does not hang on that thread (the
    engine then reads end-of-file and quits). The engine runs in its own process group,
    so a Ctrl-C meant for the worker does not kill it mid-job.
    """
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise EngineFailure("empty engine command")
    box: list[chess.engine.SimpleEngine | BaseException] = []

    def start() -> None:
        try:
            box.append(chess.engine.SimpleEngine.popen_uci(argv, timeout=timeout_s, setpgrp=True))
        except BaseException as exc:  # reported to the caller
            box.append(exc)

    starter = threading.Thread(target=start, name="engine-start", daemon=True)
    starter.start()
    starter.join(timeout_s + 5.0)
    if not box:
        raise EngineFailure(f"{argv[0]} did not answer within {timeout_s:.0f} s")
    started = box[0]
    if isinstance(started, BaseException):
        raise EngineFailure(f"{argv[0]}: {type(started).__name__}: {started}") from started
    return started


def engine_board(state: Any) -> chess.Board:
    """The board of a chess state with the moves since its last irreversible move on the
    stack, so the engine sees the repetitions that matter."""
    root = state.root if state.root is not None else state
    board: chess.Board = root.board.copy(stack=False)
    for move in state.line:
        board.push(move)
    return board


def limit_for(budget: Budget) -> tuple[chess.engine.Limit, float]:
    """The engine's limit for a job's budget, and how long to wait for its answer.

    ``time_ms`` becomes ``movetime``; a budget's depth is passed on only when it has no
    time limit (the server's level budgets carry our searcher's depths, which mean
    nothing to another engine); ``nodes`` always."""
    if budget.time_ms is not None:
        seconds = max(1, budget.time_ms) / 1000
        return chess.engine.Limit(time=seconds, nodes=budget.nodes), seconds
    if budget.depth is not None or budget.nodes is not None:
        return chess.engine.Limit(depth=budget.depth, nodes=budget.nodes), UNTIMED_CAP_S
    seconds = DEFAULT_TIME_MS / 1000
    return chess.engine.Limit(time=seconds), seconds


def strength_options(options: Any, level: int) -> dict[str, Any]:
    """The engine options that set bot level ``level`` (1-8) on an engine with these
    ``options``: ``UCI_LimitStrength``/``UCI_Elo`` where supported, else ``Skill Level``,
    else none (the level then changes nothing but the job's time)."""
    index = min(max(level, 1), len(LEVEL_ELO)) - 1
    if "UCI_LimitStrength" in options and "UCI_Elo" in options:
        elo = LEVEL_ELO[index]
        if elo is None:
            return {"UCI_LimitStrength": False}
        option = options["UCI_Elo"]
        low = option.min if option.min is not None else elo
        high = option.max if option.max is not None else elo
        return {"UCI_LimitStrength": True, "UCI_Elo": min(max(elo, low), high)}
    if "Skill Level" in options:
        option = options["Skill Level"]
        low = option.min if option.min is not None else 0
        high = option.max if option.max is not None else 20
        return {"Skill Level": low + round((high - low) * LEVEL_SKILL[index] / 20)}
    return {}


def reported_score(score: chess.engine.PovScore | None) -> tuple[int, float]:
    """An engine score as (our internal integer score, the float sent on the wire), from
    the side to move: centipawns, or a mate as +-(10000 - plies to the mate)."""
    if score is None:
        return 0, 0.0
    relative = score.relative
    mate = relative.mate()
    if mate is None:
        centipawns = relative.score() or 0
        return centipawns, round(centipawns / 100, 3)
    plies = 2 * mate - 1 if mate > 0 else -2 * mate
    sign = 1 if mate > 0 else -1
    return sign * (WIN - plies), sign * (DECIDED - plies)


def budget_left(budget: Budget, spent_ms: int) -> Budget:
    """What is left of ``budget`` after ``spent_ms`` (an engine's start, or its failed
    search before our searcher stands in); under ``MIN_FALLBACK_MS``, a one-ply search."""
    if budget.time_ms is None:
        return budget
    left = budget.time_ms - spent_ms
    if left < MIN_FALLBACK_MS:
        return Budget(depth=1, time_ms=MIN_FALLBACK_MS, nodes=budget.nodes)
    return Budget(depth=budget.depth, time_ms=left, nodes=budget.nodes)


@dataclass(frozen=True, slots=True)
class EngineMove:
    """An engine's answer to a job."""

    move_text: str
    score: float  # the game's units from the mover's side (pawns; mates as +-(10000 - plies))
    depth: int
    nodes: int
    time_ms: int
    engine: str
    pv: list[str] = field(default_factory=list)  # the engine's line, as UCI moves


def _line(move: chess.Move, pv: list[chess.Move]) -> list[str]:
    """The engine's line as UCI moves, starting with the move it played."""
    return [m.uci() for m in pv] if pv and pv[0] == move else [move.uci()]


class EngineStep(NamedTuple):
    """An engine's progress, shaped like the searcher's (for the worker's publisher)."""

    depth: int
    score: int
    pv: list[chess.Move]
    nodes: int


class UciEngine:
    """One UCI engine process serving one game's jobs, started once and restarted when it
    dies. Not thread-safe: the worker uses it from its main thread only."""

    def __init__(self, game: str, command: str) -> None:
        self.game = game
        self.command = command
        self.name = command  # the engine's id name once it has started
        self._engine: chess.engine.SimpleEngine | None = None
        self._retry_at = 0.0
        self.starts = 0
        self.failures = 0

    @property
    def pid(self) -> int | None:
        """The engine process's id while it runs."""
        engine = self._engine
        return None if engine is None else engine.transport.get_pid()

    def start(self) -> chess.engine.SimpleEngine | None:
        """The running engine, started if need be; None (logged) if it cannot start."""
        engine = self._engine
        if engine is not None and not engine.returncode.done():
            return engine
        if engine is not None:
            log.warning("engine %s (%s) has exited; restarting it", self.name, self.command)
            self._close()
        if time.monotonic() < self._retry_at:
            return None
        try:
            engine = launch(self.command)
        except EngineFailure as exc:
            self._retry_at = time.monotonic() + RETRY_START_S
            log.error(
                "engine for %s (%s) could not be started: %s; %s jobs use our searcher "
                "(next attempt in %.0f s)",
                self.game, self.command, exc, self.game, RETRY_START_S,
            )  # fmt: skip
            return None
        engine.timeout = COMMAND_TIMEOUT_S
        self._engine = engine
        self.starts += 1
        self.name = (engine.id.get("name") or self.command)[:MAX_ENGINE_NAME]
        log.info("engine %s (pid %s) serves %s jobs", self.name, self.pid, self.game)
        return engine

    def play(
        self,
        job: Job,
        state: Any,
        cancel: CancelToken | None = None,
        progress: Any = None,
    ) -> EngineMove:
        """The engine's move for ``job`` (whose position is ``state``); raises
        :class:`EngineFailure` when there is none (the engine is then closed, and the
        next job starts a new one)."""
        started = time.monotonic()
        engine = self.start()  # a restart's time counts against the job
        if engine is None:
            raise EngineUnavailable(f"no engine for {self.game}")
        budget = budget_left(job.budget, int((time.monotonic() - started) * 1000))
        try:
            return self._search(engine, job, budget, state, cancel, progress, started)
        except Exception as exc:  # anything an engine does wrong costs it this job only
            self.failures += 1
            self._close()
            raise EngineFailure(f"{type(exc).__name__}: {exc}") from exc

    def _search(
        self,
        engine: chess.engine.SimpleEngine,
        job: Job,
        budget: Budget,
        state: Any,
        cancel: CancelToken | None,
        progress: Any,
        started: float,
    ) -> EngineMove:
        board = engine_board(state)
        limit, expected_s = limit_for(budget)
        engine.configure(strength_options(engine.options, job.level))
        analysis = engine.analysis(
            board, limit, game=job.room, info=chess.engine.INFO_SCORE | chess.engine.INFO_PV
        )
        loop = engine.protocol.loop
        best = asyncio.run_coroutine_threadsafe(analysis.inner.wait(), loop)
        give_up = started + expected_s + LATE_S
        stopped = False
        # Bounded: each pass waits at most POLL_S, and the passes end by ``give_up`` (then
        # ``stop``, then at most STOP_GRACE_S more).
        while True:
            try:
                found = best.result(timeout=POLL_S)
                break
            except concurrent.futures.TimeoutError:
                pass
            now = time.monotonic()
            if not stopped and cancel is not None and cancel.cancelled:
                analysis.stop()
                stopped, give_up = True, now + STOP_GRACE_S
            elif now >= give_up:
                if stopped:  # (not cancelling ``best``: that would cancel the analysis too)
                    raise EngineFailure(f"no answer {STOP_GRACE_S:.0f} s after stop")
                log.warning(
                    "engine %s still searching %.1f s past its limit: stop", self.name, LATE_S
                )
                analysis.stop()
                stopped, give_up = True, now + STOP_GRACE_S
            if progress is not None:
                self._publish(analysis, progress)
        move = found.move
        if move is None or move not in board.legal_moves:
            raise EngineFailure(f"the engine played {move!r}, not a legal move")
        info = analysis.info
        _raw, score = reported_score(info.get("score"))
        return EngineMove(
            move_text=move.uci(),
            score=score,
            depth=int(info.get("depth", 0)),
            nodes=int(info.get("nodes", 0)),
            time_ms=int((time.monotonic() - started) * 1000),
            engine=self.name,
            pv=_line(move, info.get("pv", [])),
        )

    @staticmethod
    def _publish(analysis: chess.engine.SimpleAnalysisResult, progress: Any) -> None:
        try:
            info = analysis.info
            if "depth" not in info:
                return
            raw, _score = reported_score(info.get("score"))
            progress(
                EngineStep(
                    int(info["depth"]), raw, list(info.get("pv", [])), int(info.get("nodes", 0))
                )
            )
        except Exception as exc:  # progress is optional; the move is not
            log.debug("engine progress not published: %s", exc)

    def _close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()  # kills the process if it still runs

    def close(self) -> None:
        """Ask the engine to quit (briefly), then close it."""
        engine = self._engine
        if engine is not None and not engine.returncode.done():
            try:
                engine.quit()
            except Exception as exc:  # it is being closed anyway
                log.debug("engine %s did not quit cleanly: %s", self.name, exc)
        self._close()


class EnginePool:
    """The worker's engines, one per game given with ``--engine``."""

    def __init__(self, commands: dict[str, str]) -> None:
        self.engines = {game: UciEngine(game, command) for game, command in commands.items()}

    def __bool__(self) -> bool:
        return bool(self.engines)

    def start(self) -> None:
        """Start every engine now (a bad path is logged at start-up, not at the first job)."""
        for engine in self.engines.values():
            engine.start()

    def play(
        self, job: Job, state: Any, cancel: CancelToken | None = None, progress: Any = None
    ) -> EngineMove | None:
        """The engine's move for ``job``, or None: no engine for its game, or the engine
        failed (logged), and our searcher is to play."""
        engine = self.engines.get(job.game)
        if engine is None:
            return None
        try:
            return engine.play(job, state, cancel, progress)
        except EngineUnavailable:  # logged when its start failed
            return None
        except EngineFailure as exc:
            log.warning(
                "engine %s failed on job %s (%s); our searcher plays", engine.name, job.job_id, exc
            )
            return None

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()


__all__ = [
    "LEVEL_ELO",
    "LEVEL_SKILL",
    "SEARCHER_ENGINE",
    "EngineFailure",
    "EngineUnavailable",
    "EngineMove",
    "EnginePool",
    "UciEngine",
    "engine_board",
    "budget_left",
    "launch",
    "limit_for",
    "parse_engine_specs",
    "strength_options",
    "uci_games",
]
