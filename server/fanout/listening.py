"""What both listeners share (listener.py on a single Redis, shards.py on a Redis Cluster).

Decides when a SUBSCRIBE counts as confirmed (:class:`Confirms`: Redis confirms a
channel's SUBSCRIBEs in order, so a confirmation is the oldest waiting one's), how long a
room's follower waits for it (:func:`await_confirmed`: SUBSCRIBE_TIMEOUT_S, then the room
is re-synced once it comes), where a message heard goes (:func:`hand_on`: a global
channel's to its handler, a room's to the local followers), and which rooms are to be
unsubscribed (:class:`Departures`: those whose last local follower left, a burst at a
time, unless one came back meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from kibitz.server.fanout.followers import Followers

SUBSCRIBE_TIMEOUT_S = 5.0


class Confirms:
    """Channel -> the SUBSCRIBEs sent for it not yet confirmed, oldest first (Redis
    confirms in order, so the next confirmation is the oldest's)."""

    def __init__(self) -> None:
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    def expect(self, name: str) -> asyncio.Future[None]:
        """A future done when Redis confirms the SUBSCRIBE to ``name`` about to be sent."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(name, deque()).append(future)
        return future

    def confirmed(self, name: str) -> None:
        """Redis confirmed a SUBSCRIBE to ``name``: the oldest waiting one's."""
        waiting = self._waiting.get(name)
        if not waiting:
            return
        future = waiting.popleft()
        if not waiting:
            del self._waiting[name]
        if not future.done():
            future.set_result(None)

    def release(self, name: str) -> None:
        """Whoever waits for a confirmation of ``name`` goes on without it."""
        for future in self._waiting.pop(name, ()):
            if not future.done():
                future.set_result(None)

    def release_all(self) -> None:
        """Whoever waits for any confirmation goes on without it."""
        for waiting in self._waiting.values():
            for future in waiting:
                if not future.done():
                    future.set_result(None)
        self._waiting.clear()


class Departures:
    """The rooms whose last local follower left, to be unsubscribed soon."""

    def __init__(self, followers: Followers) -> None:
        self.followers = followers
        self._due: set[str] = set()
        self._wakeup = asyncio.Event()

    def add(self, room_id: str) -> None:
        """The last local follower of ``room_id`` left."""
        self._due.add(room_id)
        self._wakeup.set()

    def discard(self, room_id: str) -> None:
        """``room_id`` is followed here (again): keep it."""
        self._due.discard(room_id)

    async def next(self) -> list[str]:
        """Once some left: the rooms due (the departures of one moment together), less
        those a follower came back to meanwhile."""
        await self._wakeup.wait()
        await asyncio.sleep(0)  # let the departures of one moment gather
        self._wakeup.clear()
        due = [r for r in self._due if r not in self.followers.rooms]
        self._due.clear()
        return due


async def await_confirmed(
    room_id: str,
    confirmed: asyncio.Future[None],
    resync_room: Callable[[str], None],
    log: logging.Logger,
) -> None:
    """Wait for ``room_id``'s subscription to be confirmed; past SUBSCRIBE_TIMEOUT_S (a
    listener far behind) stop waiting, and have the room re-synced once it is (logged
    to the caller's ``log``)."""
    if confirmed.done():
        return
    try:
        await asyncio.wait_for(asyncio.shield(confirmed), timeout=SUBSCRIBE_TIMEOUT_S)
    except TimeoutError:
        log.warning("subscription to room %s not confirmed in %.0f s; re-syncing it "
                    "once it is", room_id, SUBSCRIBE_TIMEOUT_S)  # fmt: skip
        confirmed.add_done_callback(lambda _f: resync_room(room_id))


def hand_on(
    name: str,
    data: str,
    channels: dict[str, Callable[[str], None]],
    followers: Followers,
    log: logging.Logger,
) -> bool:
    """Hand on a message heard on ``name`` (not a probe): to its handler in ``channels``
    (a handler's error logged to the caller's ``log``), else to the room's local
    followers. True if it was a room's."""
    if name in channels:
        try:
            channels[name](data)
        except Exception:  # one bad message must not cost the subscription
            log.exception("could not handle a message on %s", name)
        return False
    followers.deliver(name, data)
    return True
