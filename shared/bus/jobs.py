"""A worker's Redis besides its job streams (those are read through ``consumer.py``).

:class:`WorkerBus` holds one blocking connection and does what a worker asks of Redis:
its heartbeat and sign-off, a room's version, the Redis server's clock, posting a result
(``kibitz:results``, trimmed to ``RESULTS_KEPT``), publishing search progress to a room's
followers, renewing a job's lease (``scripts/jobs_renew_lease.lua``) and counting the
live jobs no worker has taken yet (``scripts/jobs_live_waiting.lua``). A worker runs two:
one for its main loop, one for the thread that renews leases while it searches.

Keys written: ``workers:{name}`` (hash, a TTL of the heartbeat's), ``results`` (stream,
approximately ``RESULTS_KEPT`` entries); the room's channel (pub/sub, nothing kept).

The connection is :func:`~kibitz.shared.bus.connect.blocking_client`'s: a single Redis
or a Redis Cluster, where the job and result streams, the heartbeats and the fair queue
are on the control slot and a room's version and channel on its group's slot (so the
lease renewal reads the version with an HGET of its own there, and progress goes out
with SPUBLISH). Every name is read from ``keys`` when used: the URL chose the layout.

:class:`JobsProbe` is for tools and benchmarks (``benchmarks/workers.py``,
``benchmarks/faults.py``): it looks at the job streams and the workers from outside, and
can queue jobs straight onto the stream (past the fair queue) for a measurement.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import blocking_client
from kibitz.shared.bus.fair_queue import FairQueue
from kibitz.shared.bus.scripts import source
from kibitz.shared.protocol.jobs import Job, JobResult

RESULTS_KEPT = 100_000  # entries of the results stream kept (approximate trim)
SOCKET_TIMEOUT_S = 10  # a worker's reads block for less; past this Redis itself hangs
CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True, slots=True)
class Lease:
    """What a lease renewal found: whether this worker still owns the job, and the
    version its room is at (-1: the room is gone)."""

    owned: bool
    room_version: int


class WorkerBus:
    """One worker connection to Redis (see the module doc)."""

    def __init__(self, url: str) -> None:
        self.client = _connect(url)
        self._renew = self.client.register_script(source("jobs_renew_lease"))
        self._waiting = self.client.register_script(source("jobs_live_waiting"))

    def fair_queue(self) -> FairQueue:
        """The fair queue in front of the jobs stream, on this connection."""
        return FairQueue(self.client)

    def heartbeat(self, name: str, counters: dict[str, int], ttl_s: int) -> None:
        """Say this worker is alive, with its counters and the time (s)."""
        key = keys.worker_key(name)
        beat: Any = {"name": name, **counters, "at": int(time.time())}
        self.client.hset(key, mapping=beat)
        self.client.expire(key, ttl_s)

    def sign_off(self, name: str) -> None:
        """Forget this worker's heartbeat (it would expire on its own)."""
        self.client.delete(keys.worker_key(name))

    def room_version(self, room: str) -> int | None:
        """The room's version, None when it is gone."""
        version: Any = self.client.hget(keys.room_key(room), "version")
        return None if version is None else int(version)

    def server_time_ms(self) -> int:
        """The Redis server's clock (epoch ms): the clock job deadlines are on."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def post_result(self, result: JobResult) -> None:
        """Post a job's result for the nodes (``kibitz:results``)."""
        self.client.xadd(keys.RESULTS, result.to_fields(), maxlen=RESULTS_KEPT, approximate=True)

    def publish_to_room(self, room: str, text: str) -> None:
        """Publish a message to the room's followers (sharded pub/sub on a cluster)."""
        if keys.grouped():
            self.client.spublish(keys.room_channel(room), text)
        else:
            self.client.publish(keys.room_channel(room), text)

    def renew_lease(self, entry_id: str, worker: str, room: str) -> Lease:
        """Reset the idle time of the job entry ``entry_id`` if ``worker`` still owns it
        (no delivery counted), and read the job's room version (on a Redis Cluster the
        room is on another slot: read with an HGET of its own)."""
        group_args = [keys.WORKERS_GROUP, worker, entry_id]
        if not keys.grouped():
            reply: Any = self._renew(keys=[keys.JOBS, keys.room_key(room)], args=group_args)
            owned, version = reply
            return Lease(bool(int(owned)), int(version))
        owned, _ = self._renew(keys=[keys.JOBS], args=group_args)
        current = self.room_version(room)
        return Lease(bool(int(owned)), -1 if current is None else current)

    def live_jobs_waiting(self) -> int:
        """Live jobs in the stream that no worker has taken yet."""
        return int(self._waiting(keys=[keys.JOBS], args=[keys.WORKERS_GROUP]))

    def close(self) -> None:
        self.client.close()


def _connect(url: str) -> redis.Redis:
    """A single Redis's or a Redis Cluster's blocking client (it sets the key layout)."""
    return blocking_client(url, SOCKET_TIMEOUT_S, CONNECT_TIMEOUT_S)


class JobsProbe:
    """The job streams and the workers seen from outside (see the module doc)."""

    def __init__(self, url: str) -> None:
        self.client = _connect(url)

    def worker_counted(self, name: str) -> bool:
        """Whether worker ``name`` is counted in the fair queue's dispatch window."""
        return self.client.zscore(keys.AI_WORKERS_LIVE, name) is not None

    def jobs_idle(self) -> bool:
        """No live job queued in the stream, and none being searched."""
        pending: Any = self.client.xpending(keys.JOBS, keys.WORKERS_GROUP)
        return not pending["pending"] and not self.client.xlen(keys.JOBS)

    def job_owner(self) -> str | None:
        """The worker holding the oldest pending live job, if any."""
        entries: Any = self.client.xpending_range(
            keys.JOBS, keys.WORKERS_GROUP, min="-", max="+", count=1
        )
        return str(entries[0]["consumer"]) if entries else None

    def seed_rooms(self, rooms: Sequence[str], version: int, ttl_s: int) -> None:
        """Make bare rooms at ``version`` (for jobs to be made for), in one round trip
        (one per cluster node on a Redis Cluster)."""
        pipe = self.client.pipeline(transaction=False)
        for room in rooms:
            pipe.hset(keys.room_key(room), mapping={"version": version})
            pipe.expire(keys.room_key(room), ttl_s)
        pipe.execute()

    def queue_jobs(self, jobs: Sequence[Job]) -> None:
        """Put jobs straight onto the stream (past the fair queue), in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for job in jobs:
            pipe.xadd(keys.JOBS, job.to_fields())
        pipe.execute()

    def results_count(self) -> int:
        return int(self.client.xlen(keys.RESULTS))

    def results(self) -> list[dict[str, str]]:
        """The fields of every result entry, oldest first."""
        entries: Any = self.client.xrange(keys.RESULTS)
        return [dict(fields) for _id, fields in entries]

    def clear_results(self) -> None:
        self.client.delete(keys.RESULTS)

    def close(self) -> None:
        self.client.close()
