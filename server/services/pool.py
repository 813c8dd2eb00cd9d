"""The quick pairing pool: players wait per (game, time control, rated), and the closest
ratings are paired.

Rules (decided here, pure: :func:`window`, :func:`may_pair`, :func:`choose_pairs`):

- one pool per game, time control and rated or casual; the game is played with its
  default options, the colours are drawn at random;
- a rated pool needs an account (``auth/required``); a casual one takes guests, who
  count as rated GUEST_RATING (1500); an account waits with its rating in the game at the
  pool's speed;
- a waiting player's window is +-WINDOW_START around their rating, widened by WINDOW_STEP
  for every ``widen_every_ms`` waited, up to +-WINDOW_MOST; two players may be paired when
  their windows overlap (their ratings differ by at most the sum of the two windows), never
  the same player (one player id) with themselves, and never two accounts of which one
  blocks the other;
- of the pairs that may be made, the closest ratings first (ties: whoever has waited
  longest), each player once;
- one entry per connection and per player (an account, or a guest's key, on any node:
  ``pool/already``, leave first), and each player in one pair of a tick at most (entries
  made before this rule); at most PER_ADDRESS entries
  per address, PER_POOL per pool and TOTAL in all (``pool/full``); an entry goes when its
  connection leaves the pool or closes, or when its node dies (its heartbeat), and is
  never paired after;
- a player who abandoned games waits first (``seek/penalty``), as for seeks.

Every node pairs the pools in which it has a player waiting, every TICK_S and at once
when one of its players joins; taking a pair out of Redis is one atomic step
(shared/bus/pool.py), so of two nodes pairing at once one makes the room and the other
moves on. The node that took the pair makes the room with both seated (as an accepted
seek does, server/services/seekers.py ``build_room``), then tells each player's node on
the pool channel; that node sends its player a ``seat`` and makes it follow the room, or,
if the player's connection closed in between, aborts the game.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kibitz.server.domain.room import Event, Room, RoomError, new_token
from kibitz.server.services import seekers
from kibitz.server.services.rooms import RoomService
from kibitz.server.services.seekers import SeekSession, build_room
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.pool import PoolBoard, PoolLimits
from kibitz.shared.games import GameError, find_game
from kibitz.shared.protocol.client_in import Abort, PoolJoin, PoolLeave
from kibitz.shared.protocol.client_out import PoolJoined, PoolLeft, Seat
from kibitz.shared.protocol.codec import ProtocolError
from kibitz.shared.protocol.node import SeekAccepted, parse_seeks_event

log = logging.getLogger(__name__)

WINDOW_START = 100  # +- rating points a player accepts at first
WINDOW_STEP = 50  # added for every ``widen_every_ms`` waited
WINDOW_MOST = 800  # the widest window
WIDEN_EVERY_MS = 5000
TICK_S = 1.0  # how often a node pairs its players' pools (and at once on a join)
PER_ADDRESS = 10  # pool entries one address may have (all its connections, every node)
PER_POOL = 500  # players one pool may hold
TOTAL = 5000  # players all pools together may hold
LIMITS = PoolLimits(PER_ADDRESS, PER_POOL, TOTAL)
MAX_ROUNDS = 8  # pairings redone in one tick after a blocked pair was found
#: A player of this node whose entry has been gone from Redis this long without a pairing
#: reaching us (the pairing node died between taking the pair and telling us) is told
#: ``pool_left`` and may join again.
LOST_AFTER_MS = 10_000
ENTRY_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"


@dataclass(frozen=True, slots=True)
class Waiting:
    """One player waiting in a pool, as the pairing sees them."""

    id: str
    rating: int
    joined_ms: int
    player: str | None = None
    account_id: int | None = None


def window(waited_ms: int, widen_every_ms: int = WIDEN_EVERY_MS) -> int:
    """The +- rating window of a player who has waited ``waited_ms``."""
    steps = max(0, waited_ms) // max(1, widen_every_ms)
    return min(WINDOW_START + WINDOW_STEP * steps, WINDOW_MOST)


def may_pair(a: Waiting, b: Waiting, now_ms: int, widen_every_ms: int = WIDEN_EVERY_MS) -> bool:
    """Whether ``a`` and ``b`` may be paired now: two players (not one player twice)
    whose windows overlap."""
    if a.id == b.id or (a.player is not None and a.player == b.player):
        return False
    if a.account_id is not None and a.account_id == b.account_id:
        return False
    reach = window(now_ms - a.joined_ms, widen_every_ms) + window(
        now_ms - b.joined_ms, widen_every_ms
    )
    return abs(a.rating - b.rating) <= reach


def choose_pairs(
    waiting: Sequence[Waiting],
    now_ms: int,
    widen_every_ms: int = WIDEN_EVERY_MS,
    excluded: frozenset[frozenset[str]] = frozenset(),
) -> list[tuple[Waiting, Waiting]]:
    """The pairs to make in one pool now: of the pairs that may be made (and are not in
    ``excluded``, pairs of entry ids), the closest ratings first, then the longest
    waited; each player in one pair at most. The first of each pair waited longer."""
    candidates: list[tuple[int, int, str, str]] = []
    by_rating = sorted(waiting, key=lambda w: w.rating)
    for i, a in enumerate(by_rating):
        for b in by_rating[i + 1 :]:
            if b.rating - a.rating > 2 * WINDOW_MOST:
                break  # the rest are further still: no window reaches them
            if frozenset((a.id, b.id)) in excluded or not may_pair(a, b, now_ms, widen_every_ms):
                continue
            older, newer = sorted((a, b), key=lambda w: (w.joined_ms, w.id))
            candidates.append((b.rating - a.rating, older.joined_ms, older.id, newer.id))
    by_id = {w.id: w for w in waiting}
    taken: set[str] = set()
    pairs = []
    for _, _, first, second in sorted(candidates):
        who = identities(by_id[first]) | identities(by_id[second])
        if who & taken:
            continue
        taken |= who
        pairs.append((by_id[first], by_id[second]))
    return pairs


def identities(waiting: Waiting) -> set[str]:
    """Who an entry is: the entry, and its player and account when known (one player
    with two entries is paired once)."""
    who = {f"entry:{waiting.id}"}
    if waiting.player is not None:
        who.add(f"player:{waiting.player}")
    if waiting.account_id is not None:
        who.add(f"account:{waiting.account_id}")
    return who


def pool_name(game: str, clock: dict[str, int] | None, rated: bool) -> str:
    """The name of a pool: game, time control and rated or casual."""
    if clock is None:
        control = "untimed"
    elif "days_per_move" in clock:
        control = f"{clock['days_per_move']}d"
    else:
        control = f"{clock['initial_ms']}+{clock.get('increment_ms', 0)}"
    return f"{game}:{control}:{'rated' if rated else 'casual'}"


def waiting_of(entry: dict[str, Any]) -> Waiting | None:
    """A stored entry as the pairing sees it (None: not a well-formed entry)."""
    try:
        account_id = entry.get("account_id")
        return Waiting(
            str(entry["id"]),
            int(entry["pairing_rating"]),
            int(entry["joined_ms"]),
            entry.get("player"),
            account_id if isinstance(account_id, int) else None,
        )
    except (KeyError, TypeError, ValueError):
        return None


class Pool:
    """One node's side of the quick pairing pools: its players' entries, the pairing
    loop and the seating of its players when paired (on any node)."""

    def __init__(
        self,
        board: PoolBoard,
        service: RoomService,
        node: str,
        gate: seekers.Gate | None = None,
        widen_every_ms: int = WIDEN_EVERY_MS,
        limits: PoolLimits = LIMITS,
    ) -> None:
        self.board = board
        self.service = service
        self.node = node
        self.gate = gate
        self.widen_every_ms = widen_every_ms
        self.limits = limits
        self.local: dict[str, SeekSession] = {}  # entry id -> its player's session here
        self.by_session: dict[str, str] = {}  # session id -> its entry id
        self.pools: dict[str, str] = {}  # entry id -> its pool's name
        #: Pairs found blocked (entry ids), not tried again while both wait. Bounded: pruned
        #: to the entries still waiting on every tick.
        self.excluded: set[frozenset[str]] = set()
        #: This node's entries missing from Redis, since when (see LOST_AFTER_MS).
        self.missing: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- client messages -----------------------------------------------------------------
    async def handle(self, session: SeekSession, message: PoolJoin | PoolLeave) -> None:
        if isinstance(message, PoolJoin):
            await self.join(session, message)
        else:
            await self.leave(session, message)

    async def join(self, session: SeekSession, message: PoolJoin) -> None:
        if session.id in self.by_session:
            raise ProtocolError("pool/already", "you are waiting in a pool: pool_leave first")
        try:
            game = find_game(message.game).name
        except GameError as exc:
            raise RoomError(exc.code, str(exc)) from None
        account = session.account
        seeker = await seekers.seeker(
            self.service, account, message.player_key, game, message.clock, message.rated
        )
        await seekers.check_penalty(self.gate, account)
        entry_id = "".join(secrets.choice(ENTRY_ID_ALPHABET) for _ in range(12))
        name = pool_name(game, message.clock, message.rated)
        entry = {
            "id": entry_id,
            "pool": name,
            "game": game,
            "clock": message.clock,
            "rated": message.rated,
            "name": message.name,
            **seeker.facts(),
            "pairing_rating": seeker.rating,
            "joined_ms": self.service.clock_ms(),
            "node": self.node,
            "conn": session.id,
            "address": session.address,
        }
        joined = await self.board.join(entry, self.limits)
        if joined.status != "joined":
            raise self._refusal(joined.status)
        self.local[entry_id] = session
        self.by_session[session.id] = entry_id
        self.pools[entry_id] = name
        reply = PoolJoined(
            game, message.clock, message.rated, seeker.rating, joined.waiting, message.rid
        )
        session.conn.send(reply.to_dict())
        self._wake.set()

    def _refusal(self, status: str) -> ProtocolError:
        if status == "already":
            return ProtocolError(
                "pool/already", "you wait in a pool already (here or in another tab): leave first"
            )
        limits = self.limits
        if status == "address_full":
            text = f"at most {limits.per_address} players of one address may wait in pools"
        elif status == "pool_full":
            text = f"this pool is full ({limits.per_pool} waiting); try again soon"
        else:
            text = f"the pools are full ({limits.total} waiting); try again soon"
        return ProtocolError("pool/full", text)

    async def leave(self, session: SeekSession, message: PoolLeave) -> None:
        entry_id = self.by_session.get(session.id)
        if entry_id is None:
            raise ProtocolError("pool/unknown", "you are not waiting in a pool")
        if not await self.board.leave(session.id, [entry_id]):
            # Paired a moment ago: the seat is on its way.
            raise ProtocolError("pool/unknown", "you were just paired: your seat follows")
        self._forget(entry_id)
        session.conn.send(PoolLeft(message.rid).to_dict())

    async def closed(self, session: SeekSession) -> None:
        """The session's connection closed: its entry goes."""
        entry_id = self.by_session.get(session.id)
        if entry_id is not None:
            self._forget(entry_id)
            await self.board.leave(session.id, [entry_id])

    def _forget(self, entry_id: str) -> None:
        session = self.local.pop(entry_id, None)
        self.pools.pop(entry_id, None)
        if session is not None and self.by_session.get(session.id) == entry_id:
            del self.by_session[session.id]

    # -- pairing -------------------------------------------------------------------------
    async def run(self) -> None:
        """Pair the pools this node's players wait in, every TICK_S and on a join. A
        failure raises to the node's supervisor, which starts this again."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=TICK_S)
            self._wake.clear()
            if self.local:
                await self.pair_once()
            else:
                self.excluded.clear()
                self.missing.clear()

    async def pair_once(self) -> int:
        """One round of pairing over the pools with a player of this node; the pairs
        made."""
        entries = await self.board.live()
        by_pool: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:
            by_pool.setdefault(str(entry.get("pool")), []).append(entry)
        live_ids = {str(e.get("id")) for e in entries}
        self.excluded = {pair for pair in self.excluded if pair <= live_ids}
        self._drop_lost(live_ids)
        mine = set(self.pools.values())
        made = 0
        for name, members in by_pool.items():
            if name in mine and len(members) >= 2:
                made += await self._pair_pool(members)
        return made

    async def _pair_pool(self, members: list[dict[str, Any]]) -> int:
        """Pair one pool's members: the pairs are chosen again without any found blocked
        (at most MAX_ROUNDS times), then made."""
        by_id = {str(e.get("id")): e for e in members}
        waiting = [w for w in map(waiting_of, members) if w is not None]
        for _ in range(MAX_ROUNDS):
            now = self.service.clock_ms()
            pairs = choose_pairs(waiting, now, self.widen_every_ms, frozenset(self.excluded))
            blocked = [frozenset((a.id, b.id)) for a, b in pairs if await self._blocked(a, b)]
            if not blocked:
                made = 0
                for first, second in pairs:
                    made += await self._make(by_id[first.id], by_id[second.id])
                return made
            self.excluded.update(blocked)
        return 0

    def _drop_lost(self, live_ids: set[str]) -> None:
        """Tell this node's players whose entries were lost (see LOST_AFTER_MS) that
        they wait no more (an unasked ``pool_left``)."""
        now = self.service.clock_ms()
        for entry_id in list(self.local):
            if entry_id in live_ids:
                self.missing.pop(entry_id, None)
                continue
            since = self.missing.setdefault(entry_id, now)
            if now - since > LOST_AFTER_MS:
                session = self.local[entry_id]
                self._forget(entry_id)
                session.conn.send(PoolLeft().to_dict())
        for entry_id in list(self.missing):
            if entry_id not in self.local:
                del self.missing[entry_id]

    async def _blocked(self, first: Waiting, second: Waiting) -> bool:
        """Whether one of the two blocks the other (the pairing loop's supervisor retries
        if the database cannot say)."""
        if self.gate is None or first.account_id is None or second.account_id is None:
            return False
        return await self.gate.blocked(first.account_id, second.account_id)

    async def _make(self, first: dict[str, Any], second: dict[str, Any]) -> int:
        """Take ``first`` and ``second`` out of the pool, make their room and tell their
        nodes; 1 if this node made it, 0 if another node took either first (or either
        player was banned since joining: that entry is taken out, the other waits on)."""
        for entry in (first, second):
            if await seekers.banned_since(self.gate, entry):
                await self.board.leave(str(entry.get("conn")), [str(entry.get("id"))])
                return 0
        taken = await self.board.take(str(first["id"]), str(second["id"]))
        if taken is None:
            return 0
        a, b = taken
        try:
            room, seats, tokens = await self._room(a, b)
        except (ProtocolError, BusError, OSError) as exc:
            log.warning("could not make the room of a pool pairing: %s", exc)
            await self.board.restore([a, b])  # they wait on
            return 0
        for entry, seat, token in ((a, seats[0], tokens[0]), (b, seats[1], tokens[1])):
            event = SeekAccepted(entry["id"], entry["conn"], entry["node"], room.id, seat, token)
            await self.board.announce(event.to_dict())
        return 1

    async def _room(self, a: dict[str, Any], b: dict[str, Any]) -> tuple[Room, Any, Any]:
        """The room of a pairing, both seated: (room, (a's seat, b's seat), their tokens)."""
        game, clock, rated = a["game"], a.get("clock"), bool(a.get("rated"))
        holders = []
        for entry in (a, b):
            account = seekers.holder_of(entry)
            holders.append(await self.service.holder(account, game, clock, rated))
        seat_a = random.randrange(2)
        tokens = (new_token(), new_token())
        seek = {
            "game": game,
            "options": {},
            "clock": clock,
            "name": a.get("name"),
            "player": a.get("player"),
            "address": a.get("address"),
        }

        def build(room_id: str) -> tuple[Room, Event]:
            return build_room(
                seek, room_id, tokens[0], tokens[1], b.get("name"), b.get("player"),
                self.service.clock_ms(), seat_a, self.service.first_move_ms,
                rated=rated, creator=holders[0], acceptor=holders[1],
            )  # fmt: skip

        room = await self.service.create_built(build)
        return room, (seat_a, 1 - seat_a), tokens

    # -- pub/sub (called by the hub's listener) ------------------------------------------
    def on_event(self, data: str) -> None:
        event = parse_seeks_event(data)
        if not isinstance(event, SeekAccepted):
            return
        session = self.local.get(event.seek)
        if session is not None and session.id == event.conn:
            self._forget(event.seek)
            self._spawn(self._seat(session, event))
        elif event.node == self.node:
            # The player's connection closed as the pairing was made: the game is called
            # off before it starts.
            self._spawn(self._abort(event))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _seat(self, session: SeekSession, event: SeekAccepted) -> None:
        await session.send_seat(Seat(event.room, event.seat, event.token))
        try:
            await session.follow_room(event.room, event.seat)
        except (ProtocolError, BusError, OSError) as exc:
            log.warning("could not seat a paired player in %s: %s", event.room, exc)

    async def _abort(self, event: SeekAccepted) -> None:
        try:
            await self.service.abort(Abort(event.room, event.token))
        except (ProtocolError, BusError, OSError) as exc:
            log.warning("could not abort %s (pool entry %s): %s", event.room, event.seek, exc)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
