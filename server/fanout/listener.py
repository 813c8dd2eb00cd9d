"""The node's one pub/sub subscription: which channels it holds, and whether it works.
(On a Redis Cluster the hub uses shards.py instead: one sharded subscription per primary.)

Decides the subscription's life. A room's channel is subscribed when its first local
follower arrives and unsubscribed when its last one leaves (a burst of departures in one
command), so a node decodes only the updates of rooms it serves; :meth:`subscribe_room`
returns only once Redis has confirmed the subscription, so whatever the caller then
reads of the room, no later update can be missed.

The listener is supervised: any error, or a subscription that has gone quiet, makes it
drop the connection and raise, and the node's supervisor (server/loops/supervisor.py)
starts it again with backoff, from ``BACKOFF_MIN_S`` to ``BACKOFF_MAX_S``. Quiet is
detected with a round trip: every ``PROBE_S`` the node publishes a probe on a channel of
its own through the command connection (hub.py), and the listener must hear it back
within ``STALE_S``; any message heard counts as a sign of life (a busy node is not a deaf
one). A frozen Redis or a dead TCP path therefore shows within seconds, as ``healthy``
turning False (``/healthz`` answers 503). Events published while the subscription was
down were missed, so every re-subscription includes every followed room, and once it is
live (its own probe heard back, which follows the rooms' SUBSCRIBE on the same
connection) the owner's ``resync_all`` is called (resync.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from kibitz.server.fanout.followers import Followers
from kibitz.server.fanout.listening import (
    SUBSCRIBE_TIMEOUT_S,
    Confirms,
    Departures,
    await_confirmed,
    hand_on,
)
from kibitz.shared.bus.errors import BusConnectionError, BusError
from kibitz.shared.bus.fanout import FanoutBus
from kibitz.shared.bus.keys import room_channel as channel
from kibitz.shared.bus.link import Subscription

log = logging.getLogger(__name__)

PROBE_S = 1.0  # how often the listener's liveness probe is published
STALE_S = 3.5  # a listener that has not heard its probe this long is reconnected
POLL_S = 0.5  # longest wait for a pub/sub message before checking liveness
# SUBSCRIBE_TIMEOUT_S (a confirmation's longest wait) is listening.py's, imported above.
#: The listener's restarts (server/node.py): a refused connect costs Redis next to nothing.
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.1, 1.0
SUBSCRIBE_BATCH = 500  # channels per SUBSCRIBE/UNSUBSCRIBE command


class Listener:
    """Subscribes to the channels of the rooms followed here and hands on what it hears
    (see the module's doc): room messages to ``followers``, other channels' to their
    handler in ``channels``. ``resync_all`` is called when a subscription is live again
    after a failure, ``resync_room`` with a room whose subscription was confirmed late."""

    def __init__(
        self,
        bus: FanoutBus,
        followers: Followers,
        resync_all: Callable[[], None],
        resync_room: Callable[[str], None],
    ) -> None:
        self.bus = bus
        self.probe_channel = bus.probe_channel
        self.followers = followers
        self._resync_all = resync_all
        self._resync_room = resync_room
        #: More channels to follow (set before the listener starts): channel -> its
        #: handler, called with each message's data (seeks and the lobby use one).
        self.channels: dict[str, Callable[[str], None]] = {}
        self.ready = asyncio.Event()  # set once the first subscription is live
        self._subscribed = False
        self._heard = 0.0  # monotonic time the listener last heard its own probe
        self.reconnects = 0  # re-subscriptions after a failure, for /metrics and tests
        self.room_messages = 0  # room updates received, for /metrics and tests
        #: The subscription in use (None between attempts). Only the listener reads from
        #: it; SUBSCRIBE and UNSUBSCRIBE are written to it at once, in the order made.
        self._pubsub: Subscription | None = None
        #: Rooms whose channel is subscribed on ``_pubsub`` -> done once Redis confirmed it.
        self._room_subs: dict[str, asyncio.Future[None]] = {}
        #: The SUBSCRIBEs sent not yet confirmed (listening.py).
        self._confirms = Confirms()
        #: Rooms whose last local follower left, to unsubscribe (listening.py).
        self._departures = Departures(followers)

    @property
    def healthy(self) -> bool:
        """Subscribed, and the subscription delivered something (at least our own probe)
        recently."""
        return self._subscribed and time.monotonic() - self._heard < STALE_S

    @property
    def subscribed_rooms(self) -> int:
        """Rooms whose channel this node subscribes to now."""
        return len(self._room_subs)

    async def subscribe_room(self, room_id: str) -> None:
        """Have the subscription include ``room_id``'s channel, confirmed by Redis, so that
        a read of the room after this misses no later update.

        While the subscription is down this returns at once: the next one includes every
        followed room and re-syncs them all once it is live. A confirmation slower than
        SUBSCRIBE_TIMEOUT_S (a listener far behind) is not waited for; the room is
        re-synced when it comes.
        """
        self._departures.discard(room_id)
        pubsub = self._pubsub
        if pubsub is None:
            return
        confirmed = self._room_subs.get(room_id)
        if confirmed is None:
            confirmed = self._room_subs[room_id] = self._confirms.expect(channel(room_id))
            try:
                pubsub.subscribe(channel(room_id))
            except BusConnectionError:  # the listener hears it too, and re-syncs
                return
        await await_confirmed(room_id, confirmed, self._resync_room, log)

    async def probe(self) -> None:
        """Publish the liveness probe the listener must hear back (the hub's probe loop,
        every PROBE_S)."""
        await self.bus.publish_probe()

    def room_emptied(self, room_id: str) -> None:
        """The last local follower of ``room_id`` left: unsubscribe it soon, unless one
        comes back first."""
        self._departures.add(room_id)

    async def unsubscriber(self) -> None:
        """Unsubscribe the rooms whose last local follower left (a burst in one command),
        unless a follower came back meanwhile."""
        while True:
            due = await self._departures.next()
            pubsub = self._pubsub
            if pubsub is None:
                continue  # the next subscription leaves them out anyway
            names = [channel(r) for r in due if self._room_subs.pop(r, None) is not None]
            if not names:
                continue
            try:  # a follow from now on subscribes again, after this
                for i in range(0, len(names), SUBSCRIBE_BATCH):
                    pubsub.unsubscribe(*names[i : i + SUBSCRIBE_BATCH])
            except BusConnectionError:
                pass  # gone: the listener hears it too, and the next one leaves them out

    def _begin(self, pubsub: Subscription) -> None:
        self._end()
        self._pubsub = pubsub

    def _end(self) -> None:
        """Forget the subscription: whoever waits for a confirmation goes on (the next
        subscription includes their rooms and re-syncs them)."""
        self._pubsub = None
        self._room_subs.clear()
        self._confirms.release_all()

    async def listen(self) -> None:
        """Subscribe and listen until the subscription fails or goes quiet, then raise:
        the node's supervisor starts this again with backoff (server/node.py gives the
        listener its own, quick, parameters), and the fresh subscription re-syncs."""
        pubsub: Subscription | None = None
        try:
            pubsub = await self.bus.subscribe(SUBSCRIBE_TIMEOUT_S)
            self._begin(pubsub)
            self._subscribe_all(pubsub)
            # Not a retry: a probe that fails here is published again within PROBE_S.
            with contextlib.suppress(BusError, OSError):
                await self.bus.publish_probe()  # no need to wait for the next
            await self._receive(pubsub)
        finally:
            self._subscribed = False
            self._end()
            if pubsub is not None:
                pubsub.close()

    def _subscribe_all(self, pubsub: Subscription) -> None:
        """Every followed room first; the probe's channel last, so hearing the probe
        proves Redis has taken them all (one connection, in order)."""
        rooms = list(self.followers.rooms)
        for room_id in rooms:
            self._room_subs[room_id] = self._confirms.expect(channel(room_id))
        for i in range(0, len(rooms), SUBSCRIBE_BATCH):
            pubsub.subscribe(*(channel(r) for r in rooms[i : i + SUBSCRIBE_BATCH]))
        pubsub.subscribe(self.probe_channel, *self.channels)

    async def _receive(self, pubsub: Subscription) -> None:
        """Deliver messages until the subscription fails or goes quiet.

        Any message proves the subscription alive: under heavy load our probe may queue
        behind thousands of room updates, and that is a busy node, not a deaf one. Only
        silence, while a probe is published every second, means the path is dead.
        """
        started = time.monotonic()
        while True:
            message = await pubsub.get_message(timeout=POLL_S)
            now = time.monotonic()
            if message is not None:
                if self._subscribed:
                    self._heard = now
                kind, name = message.kind, message.channel
                if kind == "subscribe":
                    self._confirms.confirmed(name)
                elif kind != "message":
                    pass  # an unsubscribe's confirmation
                elif name == self.probe_channel:
                    if not self._subscribed:
                        self._heard = now
                        self._on_live()
                elif hand_on(name, message.data, self.channels, self.followers, log):
                    self.room_messages += 1
            last_sign = self._heard if self._subscribed else started
            if now - max(last_sign, started) > STALE_S:
                raise TimeoutError(f"nothing heard for {STALE_S:.1f} s")

    def _on_live(self) -> None:
        """The new subscription works end to end: repair what was missed, if anything."""
        self._subscribed = True
        if self.ready.is_set():
            self.reconnects += 1
            log.warning("fan-out listener live again; re-syncing %d rooms",
                        len(self.followers.rooms))  # fmt: skip
            self._resync_all()
        self.ready.set()
