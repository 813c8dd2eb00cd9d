"""The AI worker: take search jobs from Redis, search, post the move back.

Each worker process is one consumer in the ``workers`` group of the ``jobs`` stream.
A job stays pending until the worker acknowledges it, which it does only after posting
the result; so when a worker dies mid-search its job is still pending, and another
worker claims it once its lease (idle time) has run out. Results are keyed by the room
version the job was made for, so a job computed twice changes the room at most once.
After ``MAX_DELIVERIES`` failed attempts a job goes to ``jobs:dead`` and the server is
told to play a fallback move.

The lease is short (5 s by default) because a live worker renews it: while it searches,
a :class:`LeaseKeeper` thread resets the job's idle time every tick, so only a dead or
frozen worker's job ever reaches the lease. The same thread watches the job's room and
cancels the search when the room moves on (a resignation, say): a job nobody waits for
posts no result. It also cuts a backlogged owner's search short (the best move so far is
posted) when the fair queue has a newcomer waiting for a worker. Jobs reach the stream
through the fair queue (``shared/bus/fair_queue.py``); each worker counts itself in the
dispatch window with its heartbeat and admits the next jobs after each job and in each
idle round.

What need not be done per job is not: the heartbeat (the worker's hash and its place in
the dispatch window) goes at most every ``BEAT_EVERY_S``, the look for jobs of dead
workers (``XAUTOCLAIM``) at most every ``reclaim_every_s`` of the lease while it finds
none, and a search shorter than half its lease is not checked for a lost lease before
its move is posted (no other worker can have taken a job idle for less than the lease).

Analysis jobs (``server/services/analysis.py`` starts them) come on a stream of their own,
``kibitz:analysis:jobs``, read through the same group: a worker takes one only when the
live stream has nothing for it, searches it for a short fixed budget, and writes the
evaluation straight into the analysis's Redis hash. Live moves therefore always go first:
while an analysis search runs, :class:`LiveJobWatch` cuts it short as soon as a live job
waits in the stream.

Both streams are read through the one stream consumer (``shared/bus/consumer.py``: claim,
read, acknowledge, bury), and every other Redis step goes through the bus too
(``shared/bus/jobs.py``, ``shared/bus/analysis.py``): this module decides, the bus talks.

A worker rides out a Redis outage: it retries with waits that double up to
``RETRY_MAX_S`` and logs a few lines per outage (:class:`Outage`). A worker started by a
node, or by a ``kibitz worker --concurrency`` pool, stops when its parent dies
(workers/lifeline.py).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kibitz.shared.bus import analysis, keys
from kibitz.shared.bus.analysis import AnalysisJobs
from kibitz.shared.bus.connect import ClusterURL, is_cluster_url
from kibitz.shared.bus.consumer import BlockingConsumer, ConsumerPolicy, Entry, missing_group
from kibitz.shared.bus.errors import BusConnectionError, BusError, BusTimeoutError
from kibitz.shared.bus.fair_queue import YIELD_AFTER_MS, owner_lane
from kibitz.shared.bus.jobs import WorkerBus
from kibitz.shared.bus.keys import WORKERS_GROUP
from kibitz.shared.bus.keys import room_key as room_key  # named here by the tests
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_out import Thinking
from kibitz.shared.protocol.codec import ProtocolError
from kibitz.shared.protocol.jobs import (
    ANALYSIS_LEVEL,
    MAX_PV,
    SEARCHER_ENGINE,
    AnalysisJob,
    Budget,
    Job,
    JobResult,
    analysis_budget,
    failed_eval,
    position_eval,
    terminal_eval,
)
from kibitz.shared.search import choose_move, report_score
from kibitz.shared.search.choose import format_line
from kibitz.shared.search.evaluation import evaluation_for
from kibitz.shared.search.limits import CancelToken
from kibitz.workers import lifeline
from kibitz.workers.engines import EnginePool, budget_left

log = logging.getLogger(__name__)


GROUP = WORKERS_GROUP
#: Global key names the tests import from here; read from ``keys`` when asked for, since
#: the worker's URL chooses the layout (a Redis Cluster's names carry the control tag).
_KEY_NAMES = {"JOBS": "JOBS", "RESULTS": "RESULTS", "DEAD": "DEAD_JOBS"}


def __getattr__(name: str) -> str:
    if name in _KEY_NAMES:
        value: str = getattr(keys, _KEY_NAMES[name])
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


BLOCK_MS = 500  # an idle round: heartbeat, dispatch, reclaim, then wait this long for a job
#: The heartbeat's period, well inside HEARTBEAT_TTL_S and the fair queue's WORKER_TTL_MS
#: (a searching worker's lease keeper beats in the dispatch window at every tick too).
BEAT_EVERY_S = 1.0
RECLAIM_EVERY_S = 0.5  # the longest wait between two looks for jobs of dead workers
MAX_DELIVERIES = 3  # a job delivered more often than this (its workers died) is dead
HEARTBEAT_TTL_S = 15
MAX_TICK_S = 0.25  # the lease keeper's period is lease/3, at most this
CLOCK_MARGIN_MS = 40  # kept from a timed job's think time for the trip back to the room
MIN_SEARCH_MS = 20  # a timed job with less than this left searches one ply
ANALYSIS_WATCH_S = 0.02  # how often an analysis search looks for a waiting live job
RETRY_FIRST_S = 0.5  # Redis unreachable: the first wait before trying again ...
RETRY_MAX_S = 30.0  # ... doubled after each failure, up to this


@dataclass
class WorkerConfig:
    redis_url: str
    name: str = ""
    lease_ms: int = 5_000  # a pending job idle this long is taken over by another worker
    max_jobs: int | None = None  # stop after this many jobs (tests, rolling restarts)
    #: game -> UCI engine command (``--engine chess=/usr/games/stockfish``; workers/engines.py)
    engines: dict[str, str] = field(default_factory=dict)


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.name = config.name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        # Reads block for BLOCK_MS at most, so the bus's longer socket timeout only fires
        # when Redis itself hangs; the loop then retries instead of waiting forever.
        self.bus = WorkerBus(config.redis_url)
        # The lease keeper's own connection: it talks while the main thread searches.
        self.lease_bus = WorkerBus(config.redis_url)
        self.jobs = BlockingConsumer(self.bus.client, job_policy(config.lease_ms), self.name)
        self.analysis_jobs = BlockingConsumer(
            self.bus.client, analysis_policy(config.lease_ms), self.name
        )
        self.analyses = AnalysisJobs(self.bus.client)
        self.fair = self.bus.fair_queue()
        self.stopping = False
        self.done = 0
        self.dropped = 0  # jobs whose room moved on: no result posted
        self.hurried = 0  # searches cut short to free the worker for a waiting game
        self.analysed = 0  # analysis jobs done (also counted in ``done``)
        self.engines = EnginePool(config.engines)  # UCI engines serving some games' jobs
        self.outage = Outage()
        self.beats = Every(BEAT_EVERY_S)
        self.reclaims = Every(reclaim_every_s(config.lease_ms))
        self.analysis_reclaims = Every(reclaim_every_s(config.lease_ms))

    def run(self) -> int:
        """Work until stopped (SIGTERM/SIGINT) or ``max_jobs`` are done."""
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self._ensure_group()
        log.info("worker %s ready on %s", self.name, without_password(self.config.redis_url))
        self.engines.start()
        while not self.stopping:
            if self.config.max_jobs is not None and self.done >= self.config.max_jobs:
                break
            try:
                self._round()
            except (BusConnectionError, BusTimeoutError) as exc:
                self._pause(self.outage.failed(exc))
                continue
            except BusError as exc:
                if not missing_group(exc):
                    raise
                self._ensure_group()
            self.outage.over()
        self.engines.close()
        try:
            self.fair.leave(self.name)
            self.bus.sign_off(self.name)
        except BusError as exc:  # it expires on its own
            log.warning("could not sign off: %s", exc)
        return 0

    def _round(self) -> None:
        """Heartbeat (when due) and dispatch, then one job if there is one (waiting up to
        BLOCK_MS)."""
        asked = time.monotonic()  # before any read: a job read now is held since then
        if self.beats.due():
            self._heartbeat()
        self.fair.dispatch()  # after each job and each idle round: admission never stalls
        # Live jobs first; an analysis job only when none is there.
        entry = self._reclaim() or self._read(wait=False)
        if entry is not None:
            self._process(entry, asked)
            return
        work = self._next_analysis()
        if work is not None:
            self._analyse(work)
            return
        entry = self._read()
        if entry is not None:
            self._process(entry, asked)

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def _pause(self, seconds: float) -> None:
        """Sleep, but no longer than until a stop is asked for."""
        deadline = time.monotonic() + seconds
        while not self.stopping and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.1))

    def _ensure_group(self) -> None:
        self.jobs.ensure_group()
        self.analysis_jobs.ensure_group()

    def _heartbeat(self) -> None:
        counters = {
            "done": self.done,
            "dropped": self.dropped,
            "hurried": self.hurried,
            "analysed": self.analysed,
        }
        self.bus.heartbeat(self.name, counters, HEARTBEAT_TTL_S)
        self.fair.beat(self.name)

    def _reclaim(self) -> Entry | None:
        """A job whose worker stopped answering, if any (its lease has run out); looked
        for when due (:func:`reclaim_every_s`), and again at once after one was found."""
        if not self.reclaims.due():
            return None
        for entry in self.jobs.claim():
            log.info("reclaimed job entry %s", entry.id)
            self.reclaims.again()
            return entry
        return None

    def _read(self, wait: bool = True) -> Entry | None:
        """The next live job; without ``wait``, only one already there."""
        for entry in self.jobs.read(wait):
            return entry
        return None

    def _next_analysis(self) -> Entry | None:
        """An analysis job: one whose worker stopped answering (looked for as live ones
        are), else a new one (no wait)."""
        if self.analysis_reclaims.due():
            for entry in self.analysis_jobs.claim():
                self.analysis_reclaims.again()
                return entry
        for entry in self.analysis_jobs.read(wait=False):
            return entry
        return None

    def _analyse(self, entry: Entry) -> None:
        """Evaluate one position of a game under analysis and store the evaluation."""
        try:
            job = AnalysisJob.from_fields(entry.fields)
        except ProtocolError:
            job = None
        inputs = self.analyses.inputs(job.analysis) if job is not None else None
        if job is None or inputs is None:  # malformed, or gone (stored, or expired)
            self.analysis_jobs.ack(entry.id)
            return
        evaluation: dict[str, Any]
        if self.analysis_jobs.exhausted(entry):
            evaluation = failed_eval(job.ply, "job failed too many times")
        else:
            evaluation = self._evaluate(job, inputs)
        text = json.dumps(evaluation, separators=(",", ":"))
        self.analyses.write_eval(job.analysis, job.ply, text, entry.id)  # and acknowledged
        self.analysed += 1
        self.done += 1

    def _evaluate(self, job: AnalysisJob, inputs: analysis.PositionInputs) -> dict[str, Any]:
        """Search one position of an analysis, cut short when a live job comes."""
        cancel = CancelToken()
        watch = LiveJobWatch(self.lease_bus, cancel)
        watch.start()
        try:
            moves = json.loads(inputs.moves_json)[: job.ply]
            return analyse_position(
                job.analysis, inputs.game, inputs.start, moves, self.engines, cancel
            )
        except Exception as exc:  # a bad position or a bug: the position is not judged
            log.error(
                "analysis job %s:%d failed: %s", job.analysis, job.ply, traceback.format_exc()
            )
            return failed_eval(job.ply, f"{type(exc).__name__}: {exc}")
        finally:
            watch.stop()
            if watch.cut:
                self.hurried += 1

    def _process(self, entry: Entry, held_since: float) -> None:
        """A live job read (or claimed) no earlier than ``held_since`` (monotonic)."""
        try:
            job = Job.from_fields(entry.fields)
        except ProtocolError as exc:
            self.jobs.bury(entry, str(exc), worker=self.name)
            return
        if self.jobs.exhausted(entry):
            self.jobs.bury(entry, "too many attempts", worker=self.name)
            fallback = JobResult(
                job.job_id, job.room, job.version, None, worker=self.name,
                error="job failed too many times",
            )  # fmt: skip
            self.bus.post_result(fallback)
            return
        current = self.bus.room_version(job.room)
        if current != job.version:
            # The room moved on (or is gone) while the job waited: nobody needs this move.
            log.info("dropping job %s: its room is at version %s", job.job_id, current)
            self.jobs.ack(entry.id)
            self.dropped += 1
            return
        self._search(entry, job, held_since)

    def _search(self, entry: Entry, job: Job, held_since: float) -> None:
        """Search a live job under its lease and post the move (unless nobody needs it)."""
        job = self._on_the_clock(job)
        cancel = CancelToken()
        keeper = LeaseKeeper(
            self.lease_bus, self.name, entry.id, job, cancel, self.config, held_since
        )
        keeper.start()
        try:
            progress = ProgressPublisher(self.bus, job)
            result = compute(job, self.name, progress, cancel, self.engines)
        except Exception as exc:  # a bad position or a bug: report it, don't die
            log.error("job %s failed: %s", job.job_id, traceback.format_exc())
            result = JobResult(
                job.job_id, job.room, job.version, None, worker=self.name,
                error=f"{type(exc).__name__}: {exc}",
            )  # fmt: skip
        finally:
            keeper.stop()
        if keeper.lost:
            # Another worker took the job over (we were frozen past the lease): it posts
            # the result and acknowledges; we leave the entry alone.
            log.warning("job %s was taken over by another worker; dropped", job.job_id)
            self.dropped += 1
            return
        if keeper.moved_on:
            log.info("job %s cancelled: room %s moved on", job.job_id, job.room)
            self.jobs.ack(entry.id)
            self.dropped += 1
            return
        if keeper.hurried:
            self.hurried += 1
            log.info("job %s cut short after %d ms for a waiting game", job.job_id, result.time_ms)
        self.bus.post_result(result)
        self.jobs.ack(entry.id)
        self.done += 1

    def _on_the_clock(self, job: Job) -> Job:
        """In a timed game, the job with its search cut to what is left of its think time
        (``deadline_ms``, on the Redis server's clock: the time the job waited in the
        queue is gone already). Past the deadline, a depth-1 search: a quick legal move
        beats a flag."""
        if job.deadline_ms is None:
            return job
        left = job.deadline_ms - self.bus.server_time_ms() - CLOCK_MARGIN_MS
        budget = job.budget
        if left < MIN_SEARCH_MS:
            capped = Budget(depth=1, time_ms=MIN_SEARCH_MS, nodes=budget.nodes)
        else:
            time_ms = left if budget.time_ms is None else min(budget.time_ms, left)
            capped = Budget(depth=budget.depth, time_ms=time_ms, nodes=budget.nodes)
        return replace(job, budget=capped)


def reclaim_every_s(lease_ms: int) -> float:
    """How often a worker looks for jobs of dead workers while it finds none: they are
    reclaimable only once idle for the lease, so a quarter of it (at most
    ``RECLAIM_EVERY_S``) adds little to a dead worker's job's wait."""
    return min(RECLAIM_EVERY_S, lease_ms / 4000)


class Every:
    """A step taken at most once per ``period_s`` (on the monotonic clock)."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._next = 0.0

    def due(self) -> bool:
        """Whether the step is due now; if so, the next is ``period_s`` from now."""
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.period_s
        return True

    def again(self) -> None:
        """The step is due again at once."""
        self._next = 0.0


def job_policy(lease_ms: int) -> ConsumerPolicy:
    """How a worker reads live jobs: one at a time; a job idle past the lease is a dead
    worker's; one delivered more than ``MAX_DELIVERIES`` times, or malformed, goes to
    ``jobs:dead``; a finished job is deleted, so the stream holds only unfinished jobs
    (what the fair queue's dispatch window counts)."""
    return ConsumerPolicy(
        keys.JOBS, GROUP, claim_idle_ms=lease_ms, count=1, block_ms=BLOCK_MS,
        max_deliveries=MAX_DELIVERIES, dead_letters=keys.DEAD_JOBS,
    )  # fmt: skip


def analysis_policy(lease_ms: int) -> ConsumerPolicy:
    """How a worker reads analysis jobs: as live ones, never waiting; a job delivered
    more than ``MAX_DELIVERIES`` times is stored as a failed evaluation (no dead letters)."""
    return ConsumerPolicy(
        keys.ANALYSIS_JOBS, GROUP, claim_idle_ms=lease_ms, count=1, block_ms=None,
        max_deliveries=MAX_DELIVERIES,
    )  # fmt: skip


class Outage:
    """Retries while Redis cannot be reached: the waits double from ``RETRY_FIRST_S`` up
    to ``RETRY_MAX_S`` (with jitter, so a fleet of workers does not come back in step),
    and the log gets a line on the 1st, 2nd, 4th, 8th... failure of an outage and one
    when it ends: a worker left on a dead Redis writes a few lines an hour, not 7,000."""

    def __init__(self, first_s: float = RETRY_FIRST_S, max_s: float = RETRY_MAX_S) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.failures = 0
        self.since = 0.0

    def failed(self, exc: Exception) -> float:
        """Count a failure; the seconds to wait before the next try."""
        if self.failures == 0:
            self.since = time.monotonic()
        self.failures += 1
        wait = min(self.max_s, self.first_s * 2.0 ** min(self.failures - 1, 16))
        if self.failures & (self.failures - 1) == 0:  # 1, 2, 4, 8, ...
            log.warning(
                "redis unavailable for %.0f s (%d failures: %s); next try in %.1f s",
                time.monotonic() - self.since, self.failures, exc, wait,
            )  # fmt: skip
        return wait * random.uniform(0.8, 1.0)

    def over(self) -> None:
        """Redis answered: the next outage starts from the shortest wait."""
        if self.failures:
            log.info(
                "redis reachable again after %.0f s (%d failures)",
                time.monotonic() - self.since, self.failures,
            )  # fmt: skip
            self.failures = 0


class LeaseKeeper:
    """Renews a job's lease while the worker searches it, and stops the search when the
    job has become useless or another game needs the worker more.

    Every tick (lease/3, at most ``MAX_TICK_S``) a background thread, on a Redis
    connection of its own, resets the job's idle time (so no other worker reclaims it
    while this one is alive), refreshes the worker's place in the dispatch window, and
    reads the room's version; the last look, once the search is over, only reads the
    version while the job has been held for less than half the lease (``held_since``:
    when the read that delivered it, or the last renewal, was sent): nobody can have
    taken it over yet. It cancels the search when the room moved on
    (``moved_on``: post nothing) or another worker owns the job now (``lost``: post
    nothing, leave the entry alone), and hurries it (``hurried``: post the best move so
    far) when the fair queue says a waiting newcomer needs this worker. A frozen worker
    freezes this thread too, so its job is reclaimed once the lease runs out.
    """

    def __init__(
        self,
        bus: WorkerBus,
        worker: str,
        entry_id: str,
        job: Job,
        cancel: CancelToken,
        config: WorkerConfig,
        held_since: float,
    ) -> None:
        self.bus = bus
        self.worker = worker
        self.entry_id = entry_id
        self.job = job
        self.cancel = cancel
        self.lane = owner_lane(job.owner, job.room)
        self.tick_s = min(MAX_TICK_S, max(0.01, config.lease_ms / 3000))
        self.lease_s = config.lease_ms / 1000
        self.held_since = held_since
        self.lost = False
        self.moved_on = False
        self.hurried = False
        self._started = time.monotonic()
        self._fair = bus.fair_queue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{entry_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing, then look once more: a room that moved on (or a lease lost)
        since the last tick must not get a result either."""
        self._stopped.set()
        self._thread.join(timeout=15)
        try:
            if time.monotonic() - self.held_since < self.lease_s / 2:
                self.look()
            else:
                self.renew(searching=False)
        except BusError as exc:  # posting is harmless: results are versioned
            log.warning("could not check job %s before posting: %s", self.job.job_id, exc)

    def _run(self) -> None:
        while not self._stopped.wait(self.tick_s):
            try:
                self.renew(searching=True)
            except BusError as exc:  # the next tick tries again
                log.warning("could not renew the lease of %s: %s", self.job.job_id, exc)

    def look(self) -> None:
        """Whether the room moved on: the lease is still held (see the class doc)."""
        if self.bus.room_version(self.job.room) != self.job.version:
            self.moved_on = True
            self.cancel.cancel()

    def renew(self, searching: bool) -> None:
        """Renew the lease and look at the room; while ``searching``, also beat in the
        dispatch window (the worker's own beat waits for the search to end) and see
        whether to yield."""
        asked = time.monotonic()
        lease = self.bus.renew_lease(self.entry_id, self.worker, self.job.room)
        if searching:
            self._fair.beat(self.worker)
        if not lease.owned:
            self.lost = True
            self.cancel.cancel()
            return
        self.held_since = asked
        if lease.room_version != self.job.version:
            self.moved_on = True
            self.cancel.cancel()
        elif (
            searching
            and not self.cancel.cancelled
            and (time.monotonic() - self._started) * 1000 >= YIELD_AFTER_MS
            and self._fair.should_yield(self.lane)
        ):
            self.hurried = True
            self.cancel.cancel()


class LiveJobWatch:
    """While a worker searches an analysis job, looks every ``ANALYSIS_WATCH_S`` for a live
    job no worker has taken, and cuts the search short when there is one (``cut``): the
    evaluation is then the deepest finished iteration, and the live move waits no more."""

    def __init__(self, bus: WorkerBus, cancel: CancelToken) -> None:
        self.cancel = cancel
        self.cut = False
        self.bus = bus
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopped.wait(ANALYSIS_WATCH_S):
            try:
                if self.bus.live_jobs_waiting() > 0:
                    self.cut = True
                    self.cancel.cancel()
                    return
            except BusError as exc:  # the search ends on its budget anyway
                log.debug("could not look at the live jobs: %s", exc)


class ProgressPublisher:
    """Publishes the search's completed depths to the room's followers, throttled."""

    def __init__(self, bus: WorkerBus, job: Job, every_s: float = 0.25) -> None:
        self.bus = bus
        self.job = job
        self.every_s = every_s
        self.started = time.monotonic()
        self.last = self.started
        self.game: Any = None
        self.state: Any = None

    def __call__(self, step: Any) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            return
        self.last = now
        message = Thinking(
            self.job.room,
            self.job.version,
            self.game.to_move(self.state),
            step.depth,
            report_score(step.score, evaluation_for(self.game).unit),
            format_line(self.game, self.state, list(step.pv)[:12]),
            step.nodes,
            int((now - self.started) * 1000),
        )
        try:
            self.bus.publish_to_room(self.job.room, json.dumps(message.to_dict()))
        except BusError as exc:  # progress is optional; the move is not
            log.warning("could not publish progress: %s", exc)


def compute(
    job: Job,
    worker: str,
    progress: ProgressPublisher | None = None,
    cancel: CancelToken | None = None,
    engines: EnginePool | None = None,
) -> JobResult:
    """Search the job's position within its budget; ``progress`` hears each depth and
    ``cancel`` can stop the search early (the result is then meaningless). A game with
    an engine in ``engines`` is played by that engine; when it fails, our searcher plays
    on what is left of the budget."""
    game = find_game(job.game)
    state = game.parse_position(job.position)
    for text in job.moves:
        state = game.play(state, text)
    if progress is not None:
        progress.game, progress.state = game, state
    started = time.monotonic()
    budget = job.budget
    played = engines.play(job, state, cancel, progress) if engines else None
    if played is not None:
        move, score, depth, nodes, engine, pv = (
            played.move_text,
            played.score,
            played.depth,
            played.nodes,
            played.engine,
            played.pv,
        )
    else:  # no engine for this game, or it failed: our searcher, with the time left
        if engines:
            budget = budget_left(budget, int((time.monotonic() - started) * 1000))
        found = choose_move(
            game,
            state,
            level=job.level,
            budget=budget,
            seed=job.seed,
            progress=progress,
            cancel=cancel,
        )
        move, score, depth, nodes, engine, pv = (
            found.move_text,
            float(found.score),
            found.depth,
            found.nodes,
            SEARCHER_ENGINE,
            found.pv,
        )
    return JobResult(
        job_id=job.job_id,
        room=job.room,
        version=job.version,
        move=move,
        score=score,
        depth=depth,
        nodes=nodes,
        time_ms=int((time.monotonic() - started) * 1000),
        worker=worker,
        engine=engine,
        pv=pv[:MAX_PV],
    )


def analyse_position(
    game_id: str,
    game_name: str,
    start: str,
    moves: list[str],
    engines: EnginePool | None = None,
    cancel: CancelToken | None = None,
) -> dict[str, Any]:
    """The evaluation of the position after ``moves`` of a game under analysis: searched
    at the strongest level for the analysis budget, by the game's engine when the worker
    has one (our searcher when it has none or it fails); no search in a finished position.
    ``cancel`` cuts the search short (the deepest finished iteration is the evaluation)."""
    game = find_game(game_name)
    state = game.parse_position(start)
    for text in moves:
        state = game.play(state, text)
    ply = len(moves)
    to_move = int(game.to_move(state))
    outcome = game.outcome(state)
    if outcome is not None:
        winner = None if outcome.winner is None else int(outcome.winner)
        return terminal_eval(game_name, ply, to_move, winner)
    budget = analysis_budget(game_name)
    if engines:
        job = Job(
            f"{game_id}:a{ply}", game_id, ply, game_name, start, list(moves),
            ANALYSIS_LEVEL, budget,
        )  # fmt: skip
        played = engines.play(job, state, cancel)
        if played is not None:
            return position_eval(
                game_name, ply, to_move, played.score, played.move_text, None, played.engine
            )
    found = choose_move(game, state, level=ANALYSIS_LEVEL, budget=budget, seed=ply, cancel=cancel)
    return position_eval(
        game_name, ply, to_move, found.score, found.move_text, found.pv, SEARCHER_ENGINE
    )


def without_password(url: str) -> str:
    """A Redis URL fit for logs (a Redis Cluster's too)."""
    if is_cluster_url(url):
        scheme = url.split("://", 1)[0]
        try:
            parsed = ClusterURL.parse(url)
        except ValueError:
            return f"{scheme}://..."
        nodes = ",".join(f"{host}:{port}" for host, port in parsed.nodes)
        return f"{scheme}://{nodes}?groups={parsed.groups}"
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))


def run_worker(config: WorkerConfig) -> int:
    logging.basicConfig(
        level=os.environ.get("KIBITZ_LOG", "INFO"),
        format="%(asctime)s worker %(process)d %(levelname)s %(message)s",
    )
    lifeline.hold()  # a local worker of a node, or a pool's child: it dies with its parent
    return Worker(config).run()
