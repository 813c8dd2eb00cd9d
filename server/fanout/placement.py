"""Where each channel is subscribed on a Redis Cluster, and whether those subscriptions live.

Decides, when pub/sub is sharded (a channel is heard only on the primary serving its
slot, shared/bus/fanout.py), which subscription holds each channel: the one to the
primary the slot map says serves it, a :class:`Shard`, opened when first needed (the
control slot's is always open: the global channels are its). A channel that cannot be
subscribed at once waits, "homeless", for :meth:`Placement.place`, which the listener's
loop (shards.py) calls until every one is placed, reading the slot map again first when
it may be stale.

Each shard proves itself alive on its own: :meth:`Placement.probe` ``SPUBLISH``\\ es,
through the command client, on a probe channel whose slot that primary serves, each
shard's publish on its own (a frozen primary's must not hold up the others'), and a
shard that hears nothing for STALE_S (a frozen primary) or fails (a dead one) is dropped
by :meth:`Placement.check`. Its channels, and those Redis says it no longer serves there
(the ``sunsubscribe`` Redis pushes when a slot moves, a ``MOVED`` refusal: ``dropped``
messages), are handed to ``on_lost`` and placed again; the other shards are untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from kibitz.server.fanout.listener import STALE_S, SUBSCRIBE_BATCH
from kibitz.server.fanout.listening import SUBSCRIBE_TIMEOUT_S
from kibitz.server.fanout.tasks import why
from kibitz.shared.bus.errors import BusConnectionError, BusError
from kibitz.shared.bus.fanout import FanoutBus
from kibitz.shared.bus.link import Address, Message, Subscription

log = logging.getLogger(__name__)

POLL_S = 0.5  # longest wait for a message before a shard's reader looks again


class Shard:
    """One primary's subscription: the channels placed on it, its probe, its life."""

    def __init__(self, address: Address, pubsub: Subscription, probe: str | None) -> None:
        self.address = address
        self.pubsub = pubsub
        self.probe = probe  # the probe channel it hears (None: none known yet)
        self.channels: set[str] = set()
        self.heard = time.monotonic()  # when it last delivered anything
        self.live = False  # its probe heard once
        self.failure: BaseException | None = None
        self.tasks: list[asyncio.Task[None]] = []  # its reader, its probe in flight

    def close(self) -> None:
        self.pubsub.close()
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()


class Placement:
    """The shards of one listener (see the module's doc). ``on_message`` gets what a
    shard hears (besides probes and drops), ``wanted`` says whether a lost channel is
    still to be heard, ``on_lost`` is told which are lost (to be placed again), and
    ``on_placed`` which are subscribed (with whether they were lost before)."""

    def __init__(
        self,
        bus: FanoutBus,
        on_message: Callable[[Message], None],
        wanted: Callable[[str], bool],
        on_lost: Callable[[Iterable[str]], None],
        on_placed: Callable[[str, bool], None],
    ) -> None:
        self.bus = bus
        self.control_probe = bus.probe_channel  # the control slot's
        self._on_message, self._wanted = on_message, wanted
        self._on_lost, self._on_placed = on_lost, on_placed
        self.shards: dict[Address, Shard] = {}
        self.where: dict[str, Shard] = {}  # channel -> the shard holding it
        self.homeless: dict[str, bool] = {}  # channel to place -> it was lost before
        self.map_stale = True
        self.wakeup = asyncio.Event()  # something to place, or a shard failed
        self.lost = 0  # times channels were lost, to be placed again
        self._probes: set[str] = set()  # every probe channel any shard had

    def all_live(self) -> bool:
        """Every channel placed, and every shard's probe heard."""
        shards = self.shards.values()
        return not self.homeless and bool(shards) and all(s.live for s in shards)

    def healthy(self) -> bool:
        """Also every shard heard from within STALE_S."""
        now = time.monotonic()
        return self.all_live() and all(now - s.heard < STALE_S for s in self.shards.values())

    def add(self, name: str, lost: bool = False) -> None:
        """Subscribe ``name`` at once if its primary's shard is open, else leave it to
        :meth:`place`."""
        self.homeless.setdefault(name, lost)
        owner = self.bus.slots.owner(name)
        shard = self.shards.get(owner) if owner is not None else None
        if shard is not None and shard.failure is None:
            self._subscribe(shard, [name])
        else:
            self.wakeup.set()

    def remove(self, names: Iterable[str]) -> None:
        """Unsubscribe these channels, each on its shard."""
        by_shard: dict[Shard, list[str]] = {}
        for name in names:
            self.homeless.pop(name, None)
            shard = self.where.pop(name, None)
            if shard is not None:
                shard.channels.discard(name)
                by_shard.setdefault(shard, []).append(name)
        for shard, held in by_shard.items():
            with contextlib.suppress(BusConnectionError):  # gone: its reader sees it
                for i in range(0, len(held), SUBSCRIBE_BATCH):
                    shard.pubsub.unsubscribe(*held[i : i + SUBSCRIBE_BATCH])

    def probe(self) -> None:
        """Publish each shard's probe (one at a time per shard)."""
        for shard in self.shards.values():
            self._probe(shard)

    def _probe(self, shard: Shard) -> None:
        shard.tasks = [task for task in shard.tasks if not task.done()]
        if shard.probe is not None and len(shard.tasks) < 2:  # its reader, one probe
            shard.tasks.append(asyncio.create_task(self._publish_probe(shard.probe)))

    async def _publish_probe(self, name: str) -> None:
        with contextlib.suppress(BusError, OSError):  # its subscription goes quiet
            await self.bus.publish_probe(name)

    def check(self) -> None:
        """Drop the shards that failed or went quiet."""
        now = time.monotonic()
        for shard in list(self.shards.values()):
            if shard.failure is not None:
                self._fail(shard, why(shard.failure))
            elif now - shard.heard > STALE_S:
                self._fail(shard, f"nothing heard for {STALE_S:.1f} s")

    async def place(self) -> None:
        """Subscribe every homeless channel where the slot map says (read again first if
        it may be stale), opening the shards needed; the bus's error if any is left."""
        slots = self.bus.slots
        if self.map_stale or not slots.loaded:
            await self.bus.refresh_slots()
            self.map_stale = False
            self._review()
        by_owner: dict[Address, list[str]] = {}
        control = slots.owner(self.control_probe)
        if control is not None and control not in self.shards:
            by_owner[control] = []
        for name in self.homeless:
            owner = slots.owner(name)
            if owner is not None:
                by_owner.setdefault(owner, []).append(name)
        missing = [a for a in by_owner if a not in self.shards]
        opened = await asyncio.gather(*(self._open(a) for a in missing), return_exceptions=True)
        new = [shard for shard in opened if isinstance(shard, Shard)]
        for shard in new:
            self.shards[shard.address] = shard
        for address, names in by_owner.items():
            if address in self.shards:
                self._subscribe(self.shards[address], names)
        for shard in new:  # its probe after its channels: hearing it proves them taken
            if shard.probe is not None:
                self._subscribe_probe(shard, shard.probe)
            shard.tasks.append(asyncio.create_task(self._read(shard)))
            self._probe(shard)
        failures = [f for f in opened if isinstance(f, BaseException)]
        if failures or self.homeless:
            self.map_stale = True
            raise failures[0] if failures else BusConnectionError("slots not served now")

    async def _open(self, address: Address) -> Shard:
        pubsub = await self.bus.subscribe(SUBSCRIBE_TIMEOUT_S, address)
        return Shard(address, pubsub, self.bus.probe_channel_for(address))

    def _subscribe(self, shard: Shard, names: list[str]) -> None:
        names = [name for name in names if name in self.homeless]  # still to place
        for name in names:
            lost = self.homeless.pop(name)
            shard.channels.add(name)
            self.where[name] = shard
            self._on_placed(name, lost)
        with contextlib.suppress(BusConnectionError):  # gone: its reader sees it
            for i in range(0, len(names), SUBSCRIBE_BATCH):
                shard.pubsub.subscribe(*names[i : i + SUBSCRIBE_BATCH])

    def _subscribe_probe(self, shard: Shard, name: str) -> None:
        shard.probe = name
        self._probes.add(name)
        with contextlib.suppress(BusConnectionError):
            shard.pubsub.subscribe(name)

    def _review(self) -> None:
        """After the slot map was read again: a shard of a node that is no longer a
        primary is dropped, and each other one's probe is one of a slot it serves."""
        primaries = self.bus.slots.primaries()
        for shard in list(self.shards.values()):
            if shard.address not in primaries:
                self._fail(shard, "no longer a primary")
                continue
            probe = self.bus.probe_channel_for(shard.address)
            if probe != shard.probe and probe is not None:
                with contextlib.suppress(BusConnectionError):
                    if shard.probe is not None:
                        shard.pubsub.unsubscribe(shard.probe)
                self._subscribe_probe(shard, probe)

    async def _read(self, shard: Shard) -> None:
        try:
            while True:
                message = await shard.pubsub.get_message(timeout=POLL_S)
                if message is None:
                    continue
                shard.heard = time.monotonic()
                if message.kind == "dropped":
                    self._dropped(shard, message.channel)
                elif message.channel not in self._probes:
                    self._on_message(message)
                elif message.channel == shard.probe and not shard.live:
                    shard.live = message.kind == "message"
                    self.wakeup.set()
        except (BusError, OSError) as exc:
            shard.failure = exc
            self.wakeup.set()

    def _dropped(self, shard: Shard, name: str) -> None:
        """Redis no longer serves ``name`` on ``shard`` (its slot moved)."""
        if name == shard.probe:
            shard.probe = None  # another one once the slot map is read again
            self.map_stale = True
            self.wakeup.set()
        elif self.where.get(name) is shard:
            del self.where[name]
            shard.channels.discard(name)
            self._lose([name])

    def _fail(self, shard: Shard, reason: str) -> None:
        """Drop ``shard``; place its channels again."""
        address = shard.address
        log.warning("fan-out: the subscription to %s:%d is lost (%s); %d channels to place "
                    "again", address.host, address.port, reason, len(shard.channels))  # fmt: skip
        shard.close()
        self.shards.pop(address, None)
        for name in shard.channels:
            if self.where.get(name) is shard:
                del self.where[name]
        self._lose(shard.channels)
        shard.channels = set()

    def _lose(self, names: Iterable[str]) -> None:
        names = list(names)
        self._on_lost(names)
        wanted = [name for name in names if self._wanted(name)]
        for name in wanted:
            self.homeless[name] = True
        if wanted:
            self.map_stale = True
            self.lost += 1
        self.wakeup.set()

    async def stop(self) -> None:
        """Close every shard; forget every channel."""
        tasks = [task for shard in self.shards.values() for task in shard.tasks]
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()
        self.where.clear()
        self.homeless.clear()
        self.map_stale = True
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
        await self.bus.stop()
