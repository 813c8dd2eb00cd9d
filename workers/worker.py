"""The AI worker: take search jobs from Redis, search, post the move back.

Each worker process is one consumer in the ``workers`` group of the ``jobs`` stream.
A job stays pending until the worker acknowledges it, which it does only after posting
the result; so when a worker dies mid-search its job is still pending, and another
worker claims it once its lease (idle time) has run out. Results are keyed by the room
version the job was made for, so a job computed twice changes the room at most once.
After ``MAX_DELIVERIES`` failed attempts a job goes to ``jobs:dead`` and the server is
told to play a fallback move.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from kibitz.shared.games import find_game
from kibitz.shared.protocol import (
    Job,
    JobResult,
    ProtocolError,
    StreamFields,
    thinking_message,
)
from kibitz.shared.search import choose_move, report_score
from kibitz.shared.search.choose import format_line
from kibitz.shared.search.evaluation import evaluation_for

log = logging.getLogger(__name__)

PREFIX = "kibitz:"
JOBS = PREFIX + "jobs"
RESULTS = PREFIX + "results"
DEAD = PREFIX + "jobs:dead"
GROUP = "workers"
BLOCK_MS = 1000
MAX_DELIVERIES = 3
HEARTBEAT_TTL_S = 15
RESULTS_KEPT = 100_000


@dataclass
class WorkerConfig:
    redis_url: str
    name: str = ""
    lease_ms: int = 15_000  # a pending job idle this long is taken over by another worker
    max_jobs: int | None = None  # stop after this many jobs (tests, rolling restarts)


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.name = config.name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        # Reads block for BLOCK_MS at most, so a longer socket timeout only fires when
        # Redis itself hangs; the loop then retries instead of waiting forever.
        self.redis = redis.Redis.from_url(
            config.redis_url, decode_responses=True, socket_timeout=10, socket_connect_timeout=5
        )
        self.stopping = False
        self.done = 0
        self._claim_cursor = "0-0"

    def run(self) -> int:
        """Work until stopped (SIGTERM/SIGINT) or ``max_jobs`` are done."""
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        self._ensure_group()
        log.info("worker %s ready on %s", self.name, without_password(self.config.redis_url))
        while not self.stopping:
            if self.config.max_jobs is not None and self.done >= self.config.max_jobs:
                break
            try:
                self._heartbeat()
                entry = self._reclaim() or self._read()
                if entry is not None:
                    self._process(*entry)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                log.warning("redis unavailable (%s); retrying", exc)
                time.sleep(0.5)
            except redis.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._ensure_group()
        self.redis.delete(PREFIX + "workers:" + self.name)
        return 0

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def _ensure_group(self) -> None:
        try:
            self.redis.xgroup_create(JOBS, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _heartbeat(self) -> None:
        key = PREFIX + "workers:" + self.name
        self.redis.hset(key, mapping={"name": self.name, "done": self.done, "at": int(time.time())})
        self.redis.expire(key, HEARTBEAT_TTL_S)

    def _reclaim(self) -> tuple[str, dict[str, str]] | None:
        """A job whose worker stopped answering, if any (its lease has run out)."""
        reply: Any = self.redis.xautoclaim(
            JOBS, GROUP, self.name, self.config.lease_ms, self._claim_cursor, count=1
        )
        cursor, claimed = reply[0], reply[1]
        self._claim_cursor = cursor
        for entry_id, fields in claimed:
            if fields is None:  # trimmed away meanwhile
                self.redis.xack(JOBS, GROUP, entry_id)
                continue
            log.info("reclaimed job entry %s", entry_id)
            return entry_id, fields
        return None

    def _read(self) -> tuple[str, dict[str, str]] | None:
        batches: Any = self.redis.xreadgroup(GROUP, self.name, {JOBS: ">"}, count=1, block=BLOCK_MS)
        for _stream, entries in batches or []:
            for entry_id, fields in entries:
                return entry_id, fields
        return None

    def _deliveries(self, entry_id: str) -> int:
        info = self.redis.xpending_range(JOBS, GROUP, min=entry_id, max=entry_id, count=1)
        return int(info[0]["times_delivered"]) if info else 1

    def _process(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            job = Job.from_fields(fields)
        except ProtocolError as exc:
            log.warning("dead job entry %s: %s", entry_id, exc)
            self._bury(entry_id, fields, str(exc))
            return
        if self._deliveries(entry_id) > MAX_DELIVERIES:
            self._bury(entry_id, fields, "too many attempts")
            self._post(
                JobResult(
                    job.job_id,
                    job.room,
                    job.version,
                    None,
                    worker=self.name,
                    error="job failed too many times",
                )
            )
            self.redis.xack(JOBS, GROUP, entry_id)
            return
        try:
            result = compute(job, self.name, ProgressPublisher(self.redis, job))
        except Exception as exc:  # a bad position or a bug: report it, don't die
            log.error("job %s failed: %s", job.job_id, traceback.format_exc())
            result = JobResult(
                job.job_id,
                job.room,
                job.version,
                None,
                worker=self.name,
                error=f"{type(exc).__name__}: {exc}",
            )
        self._post(result)
        self.redis.xack(JOBS, GROUP, entry_id)
        self.redis.xdel(JOBS, entry_id)
        self.done += 1

    def _post(self, result: JobResult) -> None:
        self.redis.xadd(RESULTS, result.to_fields(), maxlen=RESULTS_KEPT, approximate=True)

    def _bury(self, entry_id: str, fields: dict[str, str], reason: str) -> None:
        dead: StreamFields = {**fields, "reason": reason, "worker": self.name}
        self.redis.xadd(DEAD, dead, maxlen=10_000)
        self.redis.xack(JOBS, GROUP, entry_id)
        self.redis.xdel(JOBS, entry_id)


class ProgressPublisher:
    """Publishes the search's completed depths to the room's followers, throttled."""

    def __init__(self, redis_client: redis.Redis, job: Job, every_s: float = 0.25) -> None:
        self.redis = redis_client
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
        message = thinking_message(
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
            self.redis.publish(PREFIX + "room:" + self.job.room, json.dumps(message))
        except redis.RedisError as exc:  # progress is optional; the move is not
            log.warning("could not publish progress: %s", exc)


def compute(job: Job, worker: str, progress: ProgressPublisher | None = None) -> JobResult:
    """Search the job's position within its budget; ``progress`` hears each depth."""
    game = find_game(job.game)
    state = game.parse_position(job.position)
    for text in job.moves:
        state = game.play(state, text)
    if progress is not None:
        progress.game, progress.state = game, state
    started = time.monotonic()
    found = choose_move(
        game, state, level=job.level, budget=job.budget, seed=job.seed, progress=progress
    )
    return JobResult(
        job_id=job.job_id,
        room=job.room,
        version=job.version,
        move=found.move_text,
        score=float(found.score),
        depth=found.depth,
        nodes=found.nodes,
        time_ms=int((time.monotonic() - started) * 1000),
        worker=worker,
    )


def without_password(url: str) -> str:
    """A Redis URL fit for logs."""
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
    return Worker(config).run()
