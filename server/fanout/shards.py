"""The node's listener on a Redis Cluster: sharded subscriptions, one per primary needed.

Decides, when pub/sub is sharded (shared/bus/fanout.py), what listener.py decides on a
single Redis, with the same face to the hub: which channels are held (a room's while it
has local followers, plus the global channels of ``channels``), when a room's
subscription counts as confirmed, and what is re-synced after a fault. Where each channel
is subscribed, and whether each subscription lives, is placement.py's.

- :meth:`ShardedListener.subscribe_room` returns once Redis has confirmed the room's
  channel on its primary (or, past SUBSCRIBE_TIMEOUT_S, re-syncs the room when it does).
- A channel lost (its primary's subscription failed or went quiet, or Redis moved its
  slot away) is placed again where the refreshed slot map says, and once Redis confirms
  it there its room is re-synced (resync.py): what was published meanwhile was missed.
  Rooms of the other subscriptions are not touched.
- :meth:`ShardedListener.listen` is the node loop that places what waits, with backoff
  while the cluster cannot tell or take it (a failover under way); when the supervisor
  starts it again (after an error it did not foresee), every channel is placed anew and
  once every subscription is live every room is re-synced, as listener.py does after a
  reconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterable

from kibitz.server.fanout.followers import Followers
from kibitz.server.fanout.listener import POLL_S
from kibitz.server.fanout.listening import Confirms, Departures, await_confirmed, hand_on
from kibitz.server.fanout.placement import Placement
from kibitz.server.fanout.tasks import why
from kibitz.server.loops.supervisor import Backoff
from kibitz.shared.bus import keys
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.fanout import FanoutBus
from kibitz.shared.bus.link import Message

log = logging.getLogger(__name__)

RETRIES = Backoff(first_s=0.1, cap_s=1.0)  # between attempts at placing channels
LOG_EVERY = 30  # of those attempts, one in this many is logged


class ShardedListener:
    """The hub's listener on a Redis Cluster (see the module's doc): ``resync_all`` is
    called when it is live again after a restart, ``resync_rooms`` with the rooms placed
    again after a fault, ``resync_room`` with a room whose subscription was confirmed
    late."""

    def __init__(
        self,
        bus: FanoutBus,
        followers: Followers,
        resync_all: Callable[[], None],
        resync_rooms: Callable[[Iterable[str]], None],
        resync_room: Callable[[str], None],
    ) -> None:
        self.bus = bus
        self.probe_channel = bus.probe_channel
        self.followers = followers
        self._resync_all, self._resync_rooms, self._resync_room = (
            resync_all, resync_rooms, resync_room,
        )  # fmt: skip
        #: More channels to follow (set before the listener starts): channel -> its
        #: handler, called with each message's data (seeks and the lobby use one).
        self.channels: dict[str, Callable[[str], None]] = {}
        self.ready = asyncio.Event()  # set once the first placement is live
        self.room_messages = 0  # room updates received, for /metrics and tests
        self.placement = Placement(bus, self._take, self._wanted, self._lost, self._placed)
        self._running = False
        self._restarts = 0
        self._resync_all_due = False
        #: Rooms whose channel is subscribed (or to be) -> done once Redis confirmed it.
        self._room_subs: dict[str, asyncio.Future[None]] = {}
        #: The SUBSCRIBEs sent not yet confirmed (listening.py, as listener.py's).
        self._confirms = Confirms()
        #: Rooms whose last local follower left, to unsubscribe (listening.py).
        self._departures = Departures(followers)
        self._resync_due: set[str] = set()

    @property
    def healthy(self) -> bool:
        """Every channel placed, every subscription live and heard from recently."""
        return self._running and self.ready.is_set() and self.placement.healthy()

    @property
    def subscribed_rooms(self) -> int:
        """Rooms whose channel this node subscribes to now."""
        return len(self._room_subs)

    @property
    def reconnects(self) -> int:
        """Re-subscriptions after a failure (a restart, or channels lost and placed
        again), for /metrics and tests."""
        return self._restarts + self.placement.lost

    # -- the hub's calls ---------------------------------------------------------------------

    async def subscribe_room(self, room_id: str) -> None:
        """Have ``room_id``'s channel subscribed on its primary, confirmed by Redis (see
        :meth:`Listener.subscribe_room`)."""
        self._departures.discard(room_id)
        if not self._running:
            return  # the next placement includes it, and re-syncs every room
        confirmed = self._room_subs.get(room_id)
        if confirmed is None:
            name = keys.room_channel(room_id)
            confirmed = self._room_subs[room_id] = self._confirms.expect(name)
            self.placement.add(name)
        await await_confirmed(room_id, confirmed, self._resync_room, log)

    def room_emptied(self, room_id: str) -> None:
        """``room_id``'s last local follower left (see :meth:`Listener.room_emptied`)."""
        self._departures.add(room_id)

    async def unsubscriber(self) -> None:
        """Take the channels of the rooms left off their subscriptions (a burst at a
        time; see :meth:`Listener.unsubscriber`)."""
        while True:
            due = await self._departures.next()
            gone = [r for r in due if self._room_subs.pop(r, None) is not None]
            self.placement.remove(keys.room_channel(r) for r in gone)

    async def probe(self) -> None:
        """Publish each subscription's probe (the hub's probe loop, every PROBE_S)."""
        self.placement.probe()

    # -- the node loop -----------------------------------------------------------------------

    async def listen(self) -> None:
        """Place every channel, then keep them placed (see the module's doc); raises only
        on an error not foreseen, and the supervisor starts it again."""
        self._running = True
        self._resync_all_due = self.ready.is_set()
        for name in self.channels:
            self.placement.homeless[name] = False
        for room_id in self.followers.rooms:
            name = keys.room_channel(room_id)
            self._room_subs[room_id] = self._confirms.expect(name)
            self.placement.homeless[name] = False
        placement, tries = self.placement, 0
        try:
            while True:
                placement.wakeup.clear()
                placement.check()
                if placement.homeless or placement.map_stale:
                    try:
                        await placement.place()
                        tries = 0
                    except (BusError, OSError, TimeoutError) as exc:
                        tries += 1
                        if tries % LOG_EVERY == 1:  # a failover takes seconds: not each try
                            log.warning("fan-out: %d channels to place (%s, try %d); "
                                        "retrying", len(placement.homeless), why(exc),
                                        tries)  # fmt: skip
                        await asyncio.sleep(RETRIES.delay(tries, random.random()))
                        continue
                self._check_live()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(placement.wakeup.wait(), POLL_S)
        finally:
            self._running = False
            await placement.stop()
            self._room_subs.clear()
            self._confirms.release_all()

    def _check_live(self) -> None:
        if not self.placement.all_live():
            return
        if not self.ready.is_set():
            self.ready.set()
        elif self._resync_all_due:
            self._restarts += 1
            log.warning("fan-out listener live again; re-syncing %d rooms",
                        len(self.followers.rooms))  # fmt: skip
            self._resync_all()
        self._resync_all_due = False

    # -- what the placement tells ----------------------------------------------------------

    def _take(self, message: Message) -> None:
        """A message a subscription heard (not a probe, not a drop)."""
        kind, name = message.kind, message.channel
        if kind == "subscribe":
            self._confirms.confirmed(name)
        elif kind != "message":
            pass  # an unsubscribe's confirmation
        elif hand_on(name, message.data, self.channels, self.followers, log):
            self.room_messages += 1

    def _wanted(self, name: str) -> bool:
        room_id = keys.room_id_of(name)
        return name in self.channels or (room_id is not None and room_id in self._room_subs)

    def _lost(self, names: Iterable[str]) -> None:
        """These channels are no longer heard: whoever waits for their confirmation goes
        on (their rooms are re-synced once they are placed again)."""
        for name in names:
            self._confirms.release(name)

    def _placed(self, name: str, lost: bool) -> None:
        """``name`` is being subscribed; a room lost before is re-synced once confirmed."""
        room_id = keys.room_id_of(name)
        if lost and room_id is not None and room_id in self._room_subs:
            confirmed = self._room_subs[room_id] = self._confirms.expect(name)
            confirmed.add_done_callback(lambda _f: self._resync_later(room_id))

    def _resync_later(self, room_id: str) -> None:
        """Re-sync ``room_id`` with the others confirmed in the same moment."""
        if not self._resync_due:
            asyncio.get_running_loop().call_soon(self._resync_now)
        self._resync_due.add(room_id)

    def _resync_now(self) -> None:
        rooms, self._resync_due = self._resync_due, set()
        if self._running and rooms:
            self._resync_rooms(sorted(rooms))
