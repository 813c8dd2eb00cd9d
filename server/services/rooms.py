"""Room commands against the store: load, decide with the pure room logic, commit.

Every command reads the room, lets :mod:`kibitz.server.domain.room` decide, and commits through
the store's versioned script. If another node committed in between, the command is
decided again on the fresh room (a move pinned to a version is refused instead).

Every room a client causes costs its address one of the per-minute room budget
(:meth:`RoomService.count_room`, through :class:`~kibitz.server.services.limits.AddressLimiter`):
the ``create`` handler (server/gateway/session.py), seeks posted and accepted
(server/services/seeks.py) and agreed rematches
(here, charged to the room's owner) all count there.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal, Protocol

from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.domain import ai_watch, clocks
from kibitz.server.domain import room as rooms
from kibitz.server.domain.anchors import AnchorError, level_rating
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Event, Presence, Room, RoomError, SeatAccount
from kibitz.server.domain.speeds import SpeedError, speed_of
from kibitz.server.services.limits import AddressLimiter, LimitExceeded, Limits
from kibitz.server.services.room_store import RoomStore, ai_owner
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.seat_keys import SeatKeys
from kibitz.shared.bus.store import AI_GAMES_GRACE_MS, StaleVersion
from kibitz.shared.games import GameError, find_game
from kibitz.shared.protocol.client_in import (
    Abort,
    Claim,
    Create,
    Join,
    Offer,
    PlayMove,
    Resign,
    player_id,
)
from kibitz.shared.protocol.jobs import Budget, JobResult

log = logging.getLogger(__name__)

RETRIES = 5
CLOCK_SYNC_MAX_RTT_MS = 20.0  # a TIME round trip slower than this does not set the clock
STATE_CACHE_SIZE = 2000
SEATING = ("created", "joined")  # events that seat a player, who then follows the room


def now_ms() -> int:
    return int(time.time() * 1000)


def _game_name(name: str) -> str:
    """The registered name of the game ``name`` (``game/unknown`` if there is none)."""
    try:
        return find_game(name).name
    except GameError as exc:
        raise RoomError(exc.code, str(exc)) from None


def ai_rating_of(game: str, opponent: str) -> int | None:
    """The fixed rating of the AI level ``opponent`` names in ``game`` (None: a human
    opponent, or a level without one)."""
    if not opponent.startswith("ai:"):
        return None
    try:
        return level_rating(game, int(opponent[3:]))
    except AnchorError:
        return None


def level_budget(game: str, level: int) -> Budget:
    """The search budget of an AI level (from the searcher's level table)."""
    from kibitz.shared.search import budget_for_level

    return budget_for_level(game, level)


class SeatRatings(Protocol):
    """Where a seat's rating is read when a signed-in player takes it (the rating store,
    server/ratings/store.py): the rounded rating in ``game`` at ``speed``, inactivity
    growth applied, and whether it is provisional."""

    async def seat_rating(self, account_id: int, game: str, speed: str) -> tuple[int, bool]: ...


class Bans(Protocol):
    """Whether an account is banned (the moderation service, server/moderation/): the
    refusal, or None."""

    async def banned(self, account_id: int | None, address: str | None) -> str | None: ...


Decision = tuple[Room, Event, Any]
ResultOutcome = Literal["applied", "fallback", "ignored"]  # new room, event, new game state


class RoomService:
    def __init__(
        self,
        store: RoomStore,
        ai_games_per_owner: int | None = None,
        first_move_ms: int = clocks.FIRST_MOVE_MS,
        limiter: AddressLimiter | None = None,
        claim_after_ms: int | None = None,
        ai_game_grace_ms: int = AI_GAMES_GRACE_MS,
        ai_watch_grace_ms: int = ai_watch.GRACE_MS,
        ai_watch_attempts: int = ai_watch.ATTEMPTS,
    ) -> None:
        """``ai_games_per_owner``: AI games one owner (an address, or an account) may be
        playing (default: :class:`~kibitz.server.services.limits.Limits`'
        ``ai_games_per_address``), those whose human is connected or gone less than
        ``ai_game_grace_ms``;
        ``first_move_ms``: how long each side of a timed game has for its first move;
        ``limiter``: the per-address room budget (None: rooms are not counted);
        ``claim_after_ms``: the node config's (server/config.py);
        ``ai_watch_grace_ms``, ``ai_watch_attempts``: the AI-turn watchdog's grace past
        the time an AI's move is expected back, and how often it queues a job again at
        most (:meth:`watch_ai`)."""
        self.store = store
        self.limiter = limiter
        self.ai_games_per_owner = (
            Limits().ai_games_per_address if ai_games_per_owner is None else ai_games_per_owner
        )
        self.ai_game_grace_ms = ai_game_grace_ms
        self.ai_watch_grace_ms = ai_watch_grace_ms
        self.ai_watch_attempts = ai_watch_attempts
        self.first_move_ms = first_move_ms
        #: How long a player must be gone before the opponent may claim, for every room
        #: (KIBITZ_CLAIM_AFTER_MS; None: 30 s in timed games, 120 s in untimed ones).
        self.claim_after_ms = claim_after_ms
        #: This node's clock minus the Redis server's (see :meth:`sync_clock`).
        self.clock_offset_ms = 0
        self._states: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        #: The room as this node last committed or read it, per room: a command decides on
        #: it without reading Redis first, and the commit's version check says whether it
        #: was still current (if not, the command reads the room and decides again).
        self._rooms: OrderedDict[str, Room] = OrderedDict()
        # The last snapshot this node committed per room, to answer the request itself, and
        # the one before if it seated a player (who may follow only after the next change).
        self._committed: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        #: The rating store seats read their ratings from, set by the composition root
        #: (server/node.py); None: signed-in seats show their accounts without ratings.
        self.ratings: SeatRatings | None = None
        #: Checked when a rematch is agreed: a player banned since is not given a new game
        #: (set by server/node.py; None: no check).
        self.bans: Bans | None = None

    # -- the server clock ----------------------------------------------------------------
    def clock_ms(self) -> int:
        """The server clock (epoch ms): this node's clock set to the Redis server's, so
        every node and worker reads game clocks and deadlines alike."""
        return now_ms() + self.clock_offset_ms

    async def sync_clock(self, samples: int = 3) -> int:
        """Measure the offset to the Redis server's clock (``TIME``, taken halfway through
        the round trip) and adopt it; returns it. Of a few samples the one with the
        shortest round trip counts (its halfway guess is the best), and none if even that
        took longer than CLOCK_SYNC_MAX_RTT_MS (a stalled process would guess wrong by up
        to half of it): the offset in use is kept then."""
        best: tuple[float, int] | None = None
        for _ in range(samples):
            before = time.time()
            redis_ms = await self.store.server_time_ms()
            after = time.time()
            sample = ((after - before) * 1000, redis_ms - int((before + after) * 500))
            if best is None or sample[0] < best[0]:
                best = sample
        if best is not None and best[0] <= CLOCK_SYNC_MAX_RTT_MS:
            self.clock_offset_ms = best[1]
        return self.clock_offset_ms

    # -- state cache -------------------------------------------------------------------
    def state_of(self, room: Room) -> Any:
        """The game state of ``room`` at its version, cached per node."""
        cached = self._states.get(room.id)
        if cached is not None and cached[0] == room.version:
            self._states.move_to_end(room.id)
            return cached[1]
        state = rooms.replay(room)
        self._remember(room, state)
        return state

    def committed_state(self, room_id: str, version: int) -> dict[str, Any] | None:
        """The snapshot of ``room_id`` at ``version`` if this node committed it (and still
        has it): the requester gets it at once, ahead of the broadcast's copy."""
        for snap in self._committed.get(room_id, ()):
            if snap["version"] == version:
                return snap
        return None

    def _remember(self, room: Room, state: Any) -> None:
        self._states[room.id] = (room.version, state)
        self._states.move_to_end(room.id)
        while len(self._states) > STATE_CACHE_SIZE:
            self._states.popitem(last=False)

    def _remember_room(self, room: Room) -> None:
        self._rooms[room.id] = room
        self._rooms.move_to_end(room.id)
        while len(self._rooms) > STATE_CACHE_SIZE:
            self._rooms.popitem(last=False)

    def cached(self, room_id: str) -> Room | None:
        """The room as this node last committed or read it (maybe no longer current)."""
        return self._rooms.get(room_id)

    async def _load(self, room_id: str) -> Room | None:
        room = await self.store.load(room_id)
        if room is None:
            self._rooms.pop(room_id, None)
        else:
            self._remember_room(room)
        return room

    # -- reads -------------------------------------------------------------------------
    async def get(self, room_id: str) -> Room:
        if not rooms.valid_room_id(room_id):
            raise RoomError("room/unknown", f"no room {room_id!r}")
        room = await self._load(room_id)
        if room is None:
            raise RoomError("room/unknown", f"no room {room_id!r}")
        return room

    async def presence(self, room: Room, present: int | None = None) -> Presence:
        """Who is in ``room`` across the cluster; ``present``: a seat to count as connected
        whatever Redis says (the player being seated, whose connection follows next)."""
        humans = tuple(
            s.kind == "human" and s.taken and i != present for i, s in enumerate(room.seats)
        )
        presence = await self.store.presence_info(room.id, (humans[0], humans[1]))
        if present is None:
            return presence
        connected = [*presence.connected]
        gone = [*presence.gone_ms]
        connected[present], gone[present] = True, None
        return Presence((connected[0], connected[1]), (gone[0], gone[1]), presence.spectators)

    async def snapshot(self, room: Room) -> dict[str, Any]:
        presence = await self.presence(room)
        return rooms.snapshot(
            room, self.state_of(room), presence, self.claim_after_ms, clock_ms=self.clock_ms()
        )

    async def publish_presence(self, room_id: str) -> None:
        """Tell every follower that a player connected or left (same version). One round
        trip when this node has the room's current version: the presence is read, put into
        the snapshot and published in one step that checks the version."""
        room, fresh = self.cached(room_id), False
        for _ in range(2):  # the cached copy, then (if it was old) the room read now
            if room is None:
                room, fresh = await self._load(room_id), True
                if room is None:
                    return
            sent = await self.store.publish_presence(room, self._presence_snapshot(room))
            if sent is not None or fresh:
                # Sent; or the room moved on since it was read, after the presence change:
                # the commit that moved it published who is there (it reads presence).
                return
            room = None

    async def leave(self, room_id: str, seat: int) -> None:
        """The connection of ``seat``'s player on this node has gone: counted out, and
        every follower told, in one round trip when this node has the room's current
        version (else a second tells them). A Redis error means not counted out; once
        counted out, a failure to tell is only logged."""
        room = self.cached(room_id) or await self._load(room_id)
        if room is None:
            await self.store.attach(room_id, seat, -1)
            return
        snapshot = self._presence_snapshot(room)
        if await self.store.publish_presence(room, snapshot, leaving=seat) is not None:
            return
        # The room moved on before the count changed: tell them who is there now.
        try:
            await self.publish_presence(room_id)
        except (BusError, OSError) as exc:
            log.warning("presence update failed: %s", exc)

    def _presence_snapshot(self, room: Room) -> dict[str, Any]:
        """The room as a presence update: its current version with who is there (filled
        in by the script that publishes it)."""
        snap = rooms.snapshot(
            room, self.state_of(room), Presence(), self.claim_after_ms, self.clock_ms()
        )
        snap["event"] = {"kind": "presence"}
        return snap

    # -- the room budget ---------------------------------------------------------------
    async def count_room(self, address: str | None) -> str | None:
        """Count a room that ``address`` causes against its per-minute budget: RoomError
        ``rate/limited`` past it (counted nothing). The answer is for :meth:`uncount_room`
        if the room is not made after all (None: nothing was counted)."""
        if self.limiter is None or not address:
            return None
        try:
            return await self.limiter.count_create(address)
        except LimitExceeded as exc:
            raise RoomError(exc.code, exc.message) from None

    async def uncount_room(self, counted: str | None) -> None:
        """Give back a room :meth:`count_room` counted that was not made."""
        if self.limiter is not None and counted is not None:
            await self.limiter.refund_create(counted)

    # -- commands ----------------------------------------------------------------------
    async def create(
        self, msg: Create, token: str, owner: str | None = None, account: Account | None = None
    ) -> tuple[Room, int]:
        """A new room; ``owner`` (the creator's address) is what the AI queue is fair
        between and what the AI game limit counts (``rate/ai_games`` past it), unless
        ``account`` is given: the signed-in creator (None: a guest), who owns it then
        (``account:ID``: :func:`~kibitz.server.services.room_store.ai_owner`) and whose
        seat shows it with its rating (read now); ``msg.rated`` needs one (see
        :func:`rooms.create_room`)."""
        if account is not None:
            owner = ai_owner(account.id, owner or "")
        game = _game_name(msg.game)
        holder = await self.holder(account, game, msg.clock, msg.rated)
        ai_rating = ai_rating_of(game, msg.opponent) if msg.rated else None
        for _ in range(RETRIES):
            room, event, seat = rooms.create_room(
                rooms.new_room_id(),
                msg.game,
                msg.options,
                msg.opponent,
                msg.seat,
                msg.name,
                token,
                now_ms(),
                position=msg.position,
                owner=owner,
                player=player_id(msg.player_key) if msg.player_key else None,
                clock=msg.clock,
                first_move_ms=self.first_move_ms,
                rated=msg.rated,
                holder=holder,
                ai_rating=ai_rating,
            )
            state = find_game(room.game).parse_position(room.start)
            try:
                await self._commit(room, -1, event, state)
            except StaleVersion:
                continue  # id collision: draw another
            return room, seat
        raise RoomError("server/busy", "could not allocate a room id")

    async def holder(
        self,
        account: Account | None,
        game: str,
        control: dict[str, Any] | None,
        rated: bool,
    ) -> SeatAccount | None:
        """The seat ``account`` takes in a room of ``game`` with the time control
        ``control``, its rating at that speed read now (one database read, made only as
        a signed-in player takes a seat, never per move); None for a guest. If the
        ratings cannot be read, a casual seat shows none and a ``rated`` one is refused
        (``server/unavailable``)."""
        if account is None:
            return None
        rating, provisional = await self._rating(account.id, game, control, rated)
        return SeatAccount(
            account.id, account.username, account.player_id, rating, provisional, account.bot
        )

    async def _rating(
        self, account_id: int, game: str, control: dict[str, Any] | None, rated: bool
    ) -> tuple[int | None, bool]:
        """(rating, provisional) of ``account_id`` for a seat (see :meth:`holder`)."""
        if self.ratings is None:
            return None, False
        try:
            speed = speed_of(game, control)
            return await self.ratings.seat_rating(account_id, game, speed)
        except SpeedError:
            return None, False  # a game without ratings: the seat shows none
        except (SQLAlchemyError, OSError) as exc:
            if rated:
                raise RoomError(
                    "server/unavailable", "ratings cannot be read now; try again"
                ) from None
            log.warning("no rating for account %s: %s", account_id, type(exc).__name__)
            return None, False

    async def _rerated(self, room: Room) -> Room:
        """``room`` (a rematch, not yet committed) with its signed-in seats' ratings read
        again: the game before may have moved them."""
        control = clocks.control_of(room.clock)
        for index, seat in enumerate(room.seats):
            if seat.account_id is not None:
                rating, provisional = await self._rating(
                    seat.account_id, room.game, control, room.rated
                )
                room.seats[index] = replace(seat, rating=rating, provisional=provisional)
        return room

    async def create_built(
        self, build: Callable[[str], tuple[Room, Event]], room_id: str | None = None
    ) -> Room:
        """Commit a new room made by ``build(room_id)``, a fresh id each try (an accepted
        seek seats both players in one commit this way); with ``room_id`` (an accepted
        challenge's), that id in one try: ``room/exists`` if a room has it."""
        for _ in range(RETRIES if room_id is None else 1):
            room, event = build(room_id or rooms.new_room_id())
            state = find_game(room.game).parse_position(room.start)
            try:
                await self._commit(room, -1, event, state)
            except StaleVersion:
                if room_id is not None:
                    raise RoomError("room/exists", f"a room {room_id} exists already") from None
                continue  # id collision: draw another
            return room
        raise RoomError("server/busy", "could not allocate a room id")

    async def join(self, msg: Join, token: str, account: Account | None = None) -> tuple[Room, int]:
        """Take a seat of ``msg.room``; ``account``: the signed-in player (None: a
        guest), whose rating in the room's game and speed is read first."""
        seat_taken: list[int] = []
        holder: SeatAccount | None = None
        if account is not None:  # game, time control and rated never change in a room
            known = self.cached(msg.room) or await self.get(msg.room)
            control = clocks.control_of(known.clock)
            holder = await self.holder(account, known.game, control, known.rated)

        def decide(room: Room) -> Decision:
            player = player_id(msg.player_key) if msg.player_key else None
            new, event, seat = rooms.join_room(
                room, msg.seat, msg.name, token, now_ms(), player, holder
            )
            seat_taken.append(seat)
            return new, event, self.state_of(room)

        room = await self._update(msg.room, decide)
        return room, seat_taken[-1]

    async def move(self, msg: PlayMove, lag_ms: int = 0, received_ms: int | None = None) -> Room:
        """``lag_ms``: the mover's connection's lag estimate (see server/fanout/lag.py);
        ``received_ms``: when the move arrived (server clock), which its clock counts to."""
        at = self.clock_ms() if received_ms is None else received_ms

        def decide(room: Room) -> Decision:
            seat = rooms.seat_for_token(room, msg.token)
            return rooms.play_move(
                room,
                seat,
                msg.move,
                msg.version,
                now_ms(),
                self.state_of(room),
                lag_ms=lag_ms,
                clock_ms=at,
                turn_ms=self.clock_ms(),
            )

        return await self._update(msg.room, decide)

    async def expire(self, room_id: str) -> bool:
        """Commit what a room's clock says is due now (a flag fall, a first-move abort),
        through the versioned commit; False if nothing is (a move came first, another node
        did it, or the room is gone)."""

        def decide(room: Room) -> Decision:
            new, event = rooms.expire(room, self.clock_ms(), now_ms(), self.state_of(room))
            return new, event, self.state_of(room)

        try:
            await self._update(room_id, decide)
        except RoomError:
            return False
        return True

    async def watch_ai(self, room_id: str) -> ai_watch.Step | None:
        """The AI-turn watchdog (server/domain/ai_watch.py), for a room the deadline
        sweeper found due with nothing due on its clock: if it is still at an AI's turn
        (its move overdue: its job lost, or very late), queue the AI's job again under the
        next attempt's id and push its deadline out; only push it out while the last
        attempt's job still waits in the fair queue; after ``ai_watch_attempts`` attempts
        log an error and give the room back to its clock (an untimed one leaves the
        deadlines: the abandon rules end it). The store's step checks the room is still
        as judged here (version, watch mark, due deadline), so a move, or another node's
        sweeper, that came first wins. Returns the step taken (None: none; not an AI's
        turn, or the room moved on)."""
        room = await self._load(room_id)
        if room is None or room.status != "playing":
            return None
        state = self.state_of(room)
        budget, job_deadline = self._budget(room, state)
        job = rooms.ai_job(room, state, budget, job_deadline)
        if job is None:
            return None
        now = self.clock_ms()
        clock_deadline = clocks.deadline(room.clock, room.status)
        if clock_deadline is not None and clock_deadline <= now:
            return None  # the clock's own deadline: expire() ends the game
        seen = await self.store.ai_watch_mark(room.id)
        attempt = ai_watch.attempt_of(seen, room.version)
        waiting = await self.store.job_waiting(ai_watch.attempt_job_id(job.job_id, attempt))
        step = ai_watch.next_step(attempt, waiting, self.ai_watch_attempts)
        if step == "give_up":
            outcome = await self.store.watch_ai_job(
                room.id, room.version, seen, now, clock_deadline
            )
            if outcome != "moved":
                log.error(
                    "room %s: no AI move at version %d after %d attempts; left to its clock",
                    room.id, room.version, attempt,
                )  # fmt: skip
            return step if outcome != "moved" else None
        again = replace(job, job_id=ai_watch.attempt_job_id(job.job_id, attempt + 1))
        deadline = ai_watch.watch_deadline(clock_deadline, again, now, self.ai_watch_grace_ms)
        if step == "wait":
            outcome = await self.store.watch_ai_job(room.id, room.version, seen, now, deadline)
            return step if outcome != "moved" else None
        outcome = await self.store.watch_ai_job(
            room.id, room.version, seen, now, deadline, again, f"{room.version}:{attempt + 1}"
        )
        if outcome == "moved":
            return None
        if outcome == "full":
            log.warning("room %s: the AI queue is full; its job is queued again later", room.id)
            return "wait"
        log.warning(
            "room %s: no AI move at version %d in time; its job is queued again (%s)",
            room.id, room.version, again.job_id,
        )  # fmt: skip
        return step

    async def resign(self, msg: Resign) -> Room:
        return await self._by_seat(msg.room, msg.token, rooms.resign)

    async def offer(self, msg: Offer) -> Room:
        """A draw, takeback or rematch offer, acceptance or refusal. An agreed rematch
        creates the new room first (under a derived id, so two nodes agreeing at once
        make one), then points the old room at it."""
        if msg.kind == "rematch":
            return await self._rematch(msg)

        def decide(room: Room) -> Decision:
            seat = rooms.seat_for_token(room, msg.token)
            state = self.state_of(room)
            return rooms.answer_offer(room, seat, msg.kind, msg.action, now_ms(), state)

        return await self._update(msg.room, decide)

    async def _rematch(self, msg: Offer) -> Room:
        for _ in range(RETRIES):
            room = await self.get(msg.room)
            seat = rooms.seat_for_token(room, msg.token)
            if room.next_room is not None and msg.action != "decline":
                return room  # already agreed (another node, or a second copy): done
            state = self.state_of(room)
            new, event, _ = rooms.answer_offer(room, seat, "rematch", msg.action, now_ms(), state)
            if new.next_room is not None:
                await self._create_rematch(new)
            try:
                await self._commit(new, room.version, event, state)
            except StaleVersion:
                continue
            return new
        raise RoomError("room/busy", f"room {msg.room} is changing too fast; try again")

    async def _create_rematch(self, agreed: Room) -> None:
        """Commit the new room of ``agreed``'s rematch, counted against the owner's room
        budget (``rate/limited``: nothing is changed, the offer stays)."""
        fresh, created = rooms.rematch_room(agreed, now_ms())
        if await self.store.version(fresh.id) is not None:
            return  # another node (or an earlier try) made it for the same agreement
        await self._refuse_banned(fresh)
        fresh = await self._rerated(fresh)
        fresh_state = find_game(fresh.game).parse_position(fresh.start)
        counted = await self.count_room(agreed.owner)
        # Kept before the commit that starts the game (and tells the players' API event
        # streams so): the players may act through the API at once.
        await self._carry_seat_keys(agreed.id, fresh.id)
        try:
            await self._commit(fresh, -1, created, fresh_state)
        except StaleVersion:
            # It exists: another node (or an earlier try) made it for the same agreement.
            await self.uncount_room(counted)
        except RoomError:  # refused, so unwritten (a Redis error may have written it)
            await self.uncount_room(counted)
            raise

    async def _carry_seat_keys(self, old: str, new: str) -> None:
        """The HTTP API's seat keys of a rematch: the old room's, for the seats the same
        players take (colours swapped, tokens kept). A failure is logged: the rematch is
        made, and can be played over the WebSocket."""
        seat_keys = SeatKeys(self.store.redis)
        try:
            kept = await seat_keys.all(old)
            await seat_keys.put(new, {1 - seat: token for seat, token in kept.items()})
        except (BusError, OSError) as exc:
            log.warning("could not keep the seat keys of rematch %s: %s", new, exc)

    async def _refuse_banned(self, room: Room) -> None:
        """``auth/banned`` if a signed-in player of ``room`` is banned now."""
        for seat in room.seats:
            if self.bans is not None and seat.account_id is not None:
                refusal = await self.bans.banned(seat.account_id, None)
                if refusal is not None:
                    raise RoomError("auth/banned", "no rematch: a player of this game is banned")

    async def abort(self, msg: Abort) -> Room:
        return await self._by_seat(msg.room, msg.token, rooms.abort)

    async def _by_seat(
        self, room_id: str, token: str, change: Callable[[Room, int, int], tuple[Room, Event]]
    ) -> Room:
        """A change made by the seat that holds ``token`` (``change(room, seat, now_ms)``)
        that leaves the position as it is (resign, abort)."""

        def decide(room: Room) -> Decision:
            new, event = change(room, rooms.seat_for_token(room, token), now_ms())
            return new, event, self.state_of(room)

        return await self._update(room_id, decide)

    async def claim(self, msg: Claim) -> Room:
        """A win (or draw) claimed because the opponent's player has been gone long enough
        (how long: :func:`kibitz.server.domain.room.claim_after_ms`)."""
        for _ in range(RETRIES):
            room = await self.get(msg.room)
            seat = rooms.seat_for_token(room, msg.token)
            presence = await self.presence(room)
            gone = presence.gone_ms[1 - seat]
            after = rooms.claim_after_ms(room, self.claim_after_ms)
            new, event = rooms.claim(room, seat, msg.result, gone, after, now_ms())
            try:
                await self._commit(new, room.version, event, self.state_of(room))
            except StaleVersion:
                continue
            return new
        raise RoomError("room/busy", f"room {msg.room} is changing too fast; try again")

    async def abandon_if_idle(self, room_id: str, idle_ms: int, version: int | None = None) -> bool:
        """End an untimed playing game (or a correspondence game nobody has moved in:
        :func:`rooms.ends_when_left`) untouched for ``idle_ms`` (versioned, like any
        command): abandoned, or aborted if nobody has moved (see :func:`rooms.abandon`).
        ``version``: only if the room is still at that version (what it was judged on,
        such as its players' presence, was read there). False if it is not (any more)
        such a game."""

        def decide(room: Room) -> Decision:
            if room.status != "playing" or now_ms() - room.updated_ms < idle_ms:
                raise RoomError("room/active", f"room {room.id} is not an idle game")
            if not rooms.ends_when_left(room):  # its clock ends it
                raise RoomError("room/active", f"room {room.id} is timed")
            if version is not None and room.version != version:
                raise RoomError("room/active", f"room {room.id} moved on")
            state = self.state_of(room)
            new, event = rooms.abandon(room, now_ms(), state)
            return new, event, state

        try:
            await self._update(room_id, decide)
        except RoomError:
            return False
        return True

    async def players_gone_since(self, room: Room) -> int | None:
        """Since when (server clock, ms) every human player of ``room`` has had no
        connection anywhere (the latest of their ``gone`` times in the presence hash);
        None while any of them is connected, or if no seat is a human's. An AI seat is
        never gone."""
        presence = await self.presence(room)
        times = [
            gone
            for seat, gone in zip(room.seats, presence.gone_ms, strict=True)
            if seat.kind == "human"
        ]
        if not times or any(gone is None for gone in times):
            return None
        return max(gone for gone in times if gone is not None)

    async def apply_result(self, result: JobResult) -> ResultOutcome:
        """Play a worker's move if the room still waits for it.

        Returns "applied" (the worker's move was played), "fallback" (a fallback move
        was played instead) or "ignored".

        A late or duplicate result finds the room at another version and changes
        nothing. A result the room still waits for but cannot use (a failed job, or a
        move the rules refuse) is replaced by a quick fallback move, so the game goes on.
        """
        room = self.cached(result.room)
        if room is None or room.version != result.version:
            # Not cached at the job's version (a newer cached one may be stale): read it.
            room = await self._load(result.room)
        if room is None or room.version != result.version or room.status != "playing":
            return "ignored"
        state = self.state_of(room)
        seat = find_game(room.game).to_move(state)
        if room.seats[seat].kind != "ai":
            return "ignored"
        if result.move is not None and result.error is None:
            try:
                new, event, new_state = rooms.play_move(
                    room, seat, result.move, result.version, now_ms(), state,
                    clock_ms=self.clock_ms(),
                )  # fmt: skip
            except RoomError as exc:
                log.error("worker %s sent an unusable move for %s: %s", result.worker, room.id, exc)
            else:
                new.ai_eval = result.score  # what the AI answers a draw offer from
                if event.kind == "move":
                    rooms.record_engine(new, seat, result.engine)
                    event = replace(event, pv=list(result.pv) or None)
                committed = await self._try_commit(new, room.version, event, new_state)
                return "applied" if committed else "ignored"
        return "fallback" if await self._play_fallback(room, seat, state) else "ignored"

    async def _play_fallback(self, room: Room, seat: int, state: Any) -> bool:
        """A shallow search here, for a room whose AI job could not produce a move."""
        from kibitz.shared.search import choose_move

        game = find_game(room.game)
        found = choose_move(game, state, level=1, budget=Budget(depth=1), seed=room.version)
        new, event, new_state = rooms.play_move(
            room, seat, found.move_text, room.version, now_ms(), state, clock_ms=self.clock_ms()
        )
        if event.kind == "move":
            rooms.record_engine(new, seat, None)  # our searcher played it
        return await self._try_commit(new, room.version, event, new_state)

    async def _try_commit(self, room: Room, expected: int, event: Event, state: Any) -> bool:
        try:
            await self._commit(room, expected, event, state)
        except StaleVersion:
            return False
        return True

    # -- the commit loop ---------------------------------------------------------------
    async def _update(self, room_id: str, decide: Callable[[Room], Decision]) -> Room:
        """Decide on the room and commit, deciding again on a fresh read if it moved on.

        The first try decides on the room as this node last had it, without reading
        Redis: the commit's version check says whether it was current. A refusal is given
        only when decided on the room as read from Redis, never on a cached copy."""
        room = self.cached(room_id)
        for _ in range(RETRIES):
            fresh = room is None
            if room is None:
                room = await self.get(room_id)
            try:
                new, event, state = decide(room)
            except RoomError:
                if fresh:
                    raise
                room = None  # maybe refused only because the copy is old: read it
                continue
            try:
                await self._commit(new, room.version, event, state)
            except StaleVersion:
                room = None
                continue
            return new
        raise RoomError("room/busy", f"room {room_id} is changing too fast; try again")

    async def _commit(self, room: Room, expected: int, event: Event, state: Any) -> None:
        clock_now = self.clock_ms()
        if room.clock is not None:
            # Whatever the change, the clock follows it: started with the game, switched
            # by a takeback, stopped at the end (a move has done this already).
            to_move = find_game(room.game).to_move(state)
            room.clock = clocks.settle(room.clock, to_move, room.status, clock_now)
        # The player just seated follows the room right after: shown connected already.
        present = event.seat if event.kind in SEATING else None
        # Who is there is read and written into the snapshot by the commit itself.
        snap = rooms.snapshot(room, state, Presence(), self.claim_after_ms, clock_ms=clock_now)
        record = event.to_dict()
        if event.kind == "move":
            record["display"] = room.moves[-1].display
            if room.clock is not None:
                record["clocks_ms"] = list(room.clock["remaining_ms"])
                record["credit_ms"] = int(room.clock.get("last_credit_ms", 0))
        if room.status == "over" and not event.kind.startswith("rematch"):
            record["result"] = room.result  # the change ended the game (a rematch did not)
        # The event stream keeps the AI's line; the state shows it once the game is over.
        snap["event"] = rooms.hide_lines([record], room.status)[0]
        budget, job_deadline = self._budget(room, state)
        job = rooms.ai_job(room, state, budget, job_deadline)
        # At an AI's turn the room is also due when its move is overdue (the watchdog).
        deadline = ai_watch.watch_deadline(
            clocks.deadline(room.clock, room.status), job, clock_now, self.ai_watch_grace_ms
        )
        await self.store.commit(
            room,
            expected,
            record,
            snap,
            job,
            self.ai_games_per_owner,
            deadline=deadline,
            present=present,
            ai_games_grace_ms=self.ai_game_grace_ms,
        )
        self._remember(room, state)
        self._remember_room(room)
        # The one before is kept only if it seated a player (see follow_seated in
        # server/gateway/session.py).
        before = [s for s in self._committed.get(room.id, ())[-1:] if s["event"]["kind"] in SEATING]
        self._committed[room.id] = [*before, snap]
        self._committed.move_to_end(room.id)
        while len(self._committed) > STATE_CACHE_SIZE:
            self._committed.popitem(last=False)

    def _budget(self, room: Room, state: Any) -> tuple[Budget, int | None]:
        """The AI's search budget, and in a timed game the server-clock time by which its
        move should be back (its think time counts from the start of its turn, so the time
        its job waits in the queue counts against it)."""
        to_move = find_game(room.game).to_move(state)
        seat = room.seats[to_move]
        if seat.kind != "ai" or seat.level is None:
            return Budget(), None
        budget = level_budget(room.game, seat.level)
        started = clocks.turn_started(room.clock)
        if room.clock is None or started is None:
            return budget, None
        think = clocks.ai_think_ms(room.clock, to_move, budget.time_ms)
        assert think is not None
        return Budget(budget.depth, think, budget.nodes), started + think
