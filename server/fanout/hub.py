"""The node's fan-out: its clients, the rooms they follow, and how updates reach them.

Every room change is published by the commit script on the room's channel; each node
subscribes to the channels of the rooms it has local followers for (and only those, so
adding nodes divides the fan-out instead of repeating it) and forwards each snapshot to
its local followers. A change made on this node goes to its followers here at once
(:meth:`Hub.deliver_state`), and the broadcast's copy, which then finds them up to date,
is dropped unread.

:class:`Hub` composes the parts, each in a module of its own, and decides what is left:
the order of following and leaving (counts first, then the subscription), the liveness
probe's pace, the pings of seated connections for their lag, and the node's drain.

- connection.py: one client and the write path to it, with its backpressure bounds;
- frames.py: a snapshot encoded once per kind of viewer, as whole WebSocket frames;
- followers.py: who follows which room here, and which of them gets each message;
- listener.py: the one pub/sub subscription, its liveness and its re-subscription;
- shards.py: on a Redis Cluster instead, one sharded subscription per primary needed,
  each with its own probe, following slots when they move or fail over;
- resync.py: what followers are sent after updates may have been missed;
- presence.py: this node's share of its rooms' presence counts and their broadcasts;
- lag.py: each seated connection's round trips, from the pings sent here;
- tasks.py: the hub's background tasks, stopped together.

Its Redis commands go through the room store and shared/bus/fanout.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import WSCloseCode

from kibitz.server.fanout.connection import MAX_BEHIND_S, Connection
from kibitz.server.fanout.followers import Followers
from kibitz.server.fanout.lag import PING_CHECK_S, PING_INTERVAL_S
from kibitz.server.fanout.listener import PROBE_S, Listener
from kibitz.server.fanout.presence import ABSENT, Presence
from kibitz.server.fanout.resync import Resync
from kibitz.server.fanout.shards import ShardedListener
from kibitz.server.fanout.tasks import TaskSet
from kibitz.server.services.rooms import RoomService
from kibitz.shared.bus import keys
from kibitz.shared.bus.fanout import FanoutBus
from kibitz.shared.bus.link import Address

log = logging.getLogger(__name__)
#: Runs one named loop for as long as the node runs (the supervisor's ``start``).
Spawn = Callable[[str, Callable[[], Coroutine[Any, Any, None]]], None]

#: A seated client with more than this waiting in its socket is not pinged this round.
PING_BACKLOG_BYTES = 16 * 1024
#: On SIGTERM, how long requests under way may take to finish before every client is told
#: to reconnect elsewhere (1001).
DRAIN_S = 5.0
START_S = 10.0  # how long :meth:`Hub.start` waits for the first subscription to be live


class Hub:
    """Follows the channels of the rooms followed here on one pub/sub connection
    (listener.py; on a Redis Cluster one per primary, shards.py) and fans out locally
    (followers.py).

    :meth:`follow` returns only once Redis has confirmed the room's subscription: whatever
    the caller then reads of the room, no later update can be missed. ``healthy`` is
    False while the subscription is down or has gone quiet (``/healthz`` answers 503).
    """

    def __init__(
        self,
        address: Address,
        service: RoomService,
        node: str = "local",
        slow_client_s: float = MAX_BEHIND_S,
    ) -> None:
        self.address = address  # where the listener subscribes, on a connection of its own
        #: A client whose frames wait this long is dropped (connection.py; the node
        #: config's ``slow_client_s``), set on each connection as it is added.
        self.slow_client_s = slow_client_s
        self.service = service
        self.store = service.store
        self.bus = FanoutBus.of(service.store, address, node)
        self.probe_channel = self.bus.probe_channel
        self.tasks = TaskSet()
        self.followers = Followers(on_emptied=self._room_emptied)
        self.presence = Presence(service, self.followers, self.bus, self.tasks)
        self.resync = Resync(service, self.followers, self.presence, self.tasks)
        self.listener: Listener | ShardedListener
        if self.bus.sharded:  # a Redis Cluster: one subscription per primary (shards.py)
            self.listener = ShardedListener(
                self.bus, self.followers, self.resync.all_later, self.resync.rooms_later,
                self.resync.room_later,
            )  # fmt: skip
        else:
            self.listener = Listener(
                self.bus, self.followers, self.resync.all_later, self.resync.room_later
            )
        self.listener.channels[keys.NODE_DIED] = self.presence.on_node_died
        #: Set on SIGTERM: no request is taken any more (see :meth:`drain`).
        self.draining = False

    # -- what the rest of the node reads -------------------------------------------------

    @property
    def channels(self) -> dict[str, Callable[[str], None]]:
        """More channels to follow (set before ``start``): channel -> its handler, called
        with each message's data (seeks and the lobby use one)."""
        return self.listener.channels

    @property
    def connections(self) -> set[Connection]:
        return self.followers.connections

    @property
    def seated(self) -> set[Connection]:
        """Connections holding a seat somewhere: the ones whose lag is measured."""
        return self.followers.seated

    @property
    def healthy(self) -> bool:
        """Subscribed, and the subscription delivered something (at least our own probe)
        recently."""
        return self.listener.healthy

    @property
    def subscribed_rooms(self) -> int:
        """Rooms whose channel this node subscribes to now."""
        return self.listener.subscribed_rooms

    @property
    def reconnects(self) -> int:
        """Re-subscriptions after a failure, for /metrics and tests."""
        return self.listener.reconnects

    @property
    def room_messages(self) -> int:
        """Room updates received, for /metrics and tests."""
        return self.listener.room_messages

    # -- life ------------------------------------------------------------------------------

    async def start(self, spawn: Spawn) -> None:
        """Start the listener, the probe, the unsubscriber and the pings, each as a loop
        of the node's supervisor (``spawn(name, body)``, server/loops/supervisor.py);
        return once the first subscription is live (``TimeoutError`` after START_S)."""
        loops: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {
            "fanout-listener": self.listener.listen,
            "fanout-probe": self._probe,
            "fanout-unsubscriber": self.listener.unsubscriber,
            "fanout-pings": self._ping_seated,
        }
        for name, body in loops.items():
            spawn(name, body)
        await asyncio.wait_for(self.listener.ready.wait(), timeout=START_S)

    async def drain(self, timeout: float = DRAIN_S) -> None:
        """Shut down gracefully (SIGTERM): take no more requests, let each connection's
        request under way finish (its commit and its reply), at most ``timeout`` seconds,
        then tell every client to reconnect elsewhere (1001) after what is queued for it.

        A request that arrives meanwhile is not handled: the client sends it again on its
        new connection (a move names its version, so it is never played twice)."""
        self.draining = True
        deadline = time.monotonic() + timeout
        await asyncio.gather(
            *(self._close_when_idle(conn, deadline) for conn in list(self.connections))
        )

    async def _close_when_idle(self, conn: Connection, deadline: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(conn.wait_idle(), max(0.0, deadline - time.monotonic()))
        await conn.close(WSCloseCode.GOING_AWAY, b"server shutting down")

    def left_cleanly(self) -> bool:
        """Every follower gone and every departure recorded in Redis: the node may leave
        without being announced as dead (:meth:`RoomStore.leave`)."""
        return not self.connections and not self.presence.owed_leaves

    async def stop(self) -> None:
        await self.tasks.stop()
        # Tell every client to reconnect (elsewhere), all at once: one slow client must
        # not hold up the others.
        await asyncio.gather(
            *(conn.close(WSCloseCode.GOING_AWAY, b"server shutting down")
              for conn in list(self.connections))
        )  # fmt: skip

    # -- connections and the rooms they follow --------------------------------------------

    def add(self, conn: Connection) -> None:
        """A client is open (before anything is sent to it): followed from now on."""
        conn.max_behind_s = self.slow_client_s
        self.connections.add(conn)

    async def remove(self, conn: Connection) -> None:
        """Forget ``conn``: it is counted out of the rooms it followed, and where it was
        a player, the room's followers are told (one step each, see
        :meth:`RoomService.leave`).

        Local bookkeeping goes first, so a Redis failure cannot leave a closed
        connection among the followers (the departure is owed, see presence.py).
        """
        self.connections.discard(conn)
        seats = dict(conn.rooms)
        for room_id in seats:
            self.followers.drop(conn, room_id)
        for room_id, seat in seats.items():
            await self.presence.count_out_or_owe(room_id, seat)

    async def follow(self, conn: Connection, room_id: str, seat: int | None) -> bool:
        """Follow ``room_id`` as ``seat`` (None: spectator); True if a player's presence
        changed (a spectator count change is broadcast later, see
        :meth:`spectators_changed`)."""
        previous = conn.rooms.get(room_id, None) if room_id in conn.rooms else ABSENT
        changed = previous != seat and (isinstance(previous, int) or seat is not None)
        await self.presence.moved(room_id, previous, seat)
        self.followers.add(conn, room_id, seat)
        await self.listener.subscribe_room(room_id)
        return changed

    async def unfollow(self, conn: Connection, room_id: str) -> None:
        """Stop following: counted out, and where ``conn`` was a player, the room's
        followers are told."""
        if room_id not in conn.rooms:
            return
        seat = conn.rooms[room_id]
        self.followers.drop(conn, room_id)
        await self.presence.count_out(room_id, seat)

    def spectators_changed(self, room_id: str) -> None:
        """A spectator came or went (see :meth:`Presence.spectators_changed`)."""
        self.presence.spectators_changed(room_id)

    def deliver_state(self, room_id: str, snapshot: dict[str, Any]) -> None:
        """A snapshot this node committed, to the room's followers here, players first,
        without waiting for its broadcast (see :meth:`Followers.deliver_state`)."""
        self.followers.deliver_state(room_id, snapshot)

    async def resync_room(self, room_id: str) -> None:
        """Send ``room_id``'s current state to its local followers, whatever they saw."""
        await self.resync.room(room_id)

    def _room_emptied(self, room_id: str) -> None:
        self.listener.room_emptied(room_id)

    # -- loops -----------------------------------------------------------------------------

    async def _probe(self) -> None:
        """Publish the liveness probe the listener must hear back (listener.py); while
        Redis answers, also pay back the departures it could not be told of. A failure
        raises to the supervisor, which starts this again within about PROBE_S."""
        while True:
            await self.listener.probe()
            if self.presence.owed_leaves:
                await self.presence.pay_owed_leaves()
            await asyncio.sleep(PROBE_S)

    async def _ping_seated(self) -> None:
        """Ping each connection that holds a seat every PING_INTERVAL_S, the first time
        within PING_CHECK_S of taking it, so its lag is known when it moves (lag.py).
        One loop for the node: a spectator costs nothing. A client whose socket has a
        backlog is skipped (the ping would wait for it; its lag is not what is slow)."""
        while True:
            now = time.monotonic()
            for conn in list(self.seated):
                lag = conn.lag
                transport = conn.transport
                if (
                    lag is None
                    or conn.closing
                    or conn.ws.closed
                    or now - lag.last_sent < PING_INTERVAL_S
                    or transport is None
                    or transport.get_write_buffer_size() > PING_BACKLOG_BYTES
                ):
                    continue
                try:
                    async with asyncio.timeout(PING_INTERVAL_S):
                        await conn.ws.ping(lag.ping_payload(now))
                except (ConnectionError, RuntimeError, TimeoutError):
                    continue  # one client's socket, not the loop's failure: the next one
            await asyncio.sleep(PING_CHECK_S)
