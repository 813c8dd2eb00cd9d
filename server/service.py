"""Room commands against the store: load, decide with the pure room logic, commit.

Every command reads the room, lets :mod:`kibitz.server.room` decide, and commits through
the store's versioned script. If another node committed in between, the command is
decided again on the fresh room (a move pinned to a version is refused instead).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from kibitz.server import room as rooms
from kibitz.server.limits import Limits
from kibitz.server.room import Event, Room, RoomError
from kibitz.server.store import RoomStore, StaleVersion
from kibitz.shared.games import find_game
from kibitz.shared.protocol import Budget, Create, JobResult, Join, PlayMove, Resign, player_id

log = logging.getLogger(__name__)

RETRIES = 5
STATE_CACHE_SIZE = 2000


def now_ms() -> int:
    return int(time.time() * 1000)


def level_budget(game: str, level: int) -> Budget:
    """The search budget of an AI level (from the searcher's level table)."""
    from kibitz.shared.search import budget_for_level

    return budget_for_level(game, level)


Decision = tuple[Room, Event, Any]
ResultOutcome = Literal["applied", "fallback", "ignored"]  # new room, event, new game state


class RoomService:
    def __init__(self, store: RoomStore, ai_games_per_owner: int | None = None) -> None:
        """``ai_games_per_owner``: unfinished AI games one address may have (default:
        :class:`~kibitz.server.limits.Limits`' ``ai_games_per_address``)."""
        self.store = store
        self.ai_games_per_owner = (
            Limits().ai_games_per_address if ai_games_per_owner is None else ai_games_per_owner
        )
        self._states: OrderedDict[str, tuple[int, Any]] = OrderedDict()

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

    def _remember(self, room: Room, state: Any) -> None:
        self._states[room.id] = (room.version, state)
        self._states.move_to_end(room.id)
        while len(self._states) > STATE_CACHE_SIZE:
            self._states.popitem(last=False)

    # -- reads -------------------------------------------------------------------------
    async def get(self, room_id: str) -> Room:
        if not rooms.valid_room_id(room_id):
            raise RoomError("room/unknown", f"no room {room_id!r}")
        room = await self.store.load(room_id)
        if room is None:
            raise RoomError("room/unknown", f"no room {room_id!r}")
        return room

    async def snapshot(self, room: Room) -> dict[str, Any]:
        presence = await self.store.presence(room.id)
        return rooms.snapshot(room, self.state_of(room), presence)

    async def publish_presence(self, room_id: str) -> None:
        """Tell every follower that a player connected or left (same version)."""
        room = await self.store.load(room_id)
        if room is None:
            return
        snap = await self.snapshot(room)
        snap["event"] = {"kind": "presence"}
        await self.store.publish(room_id, snap)

    # -- commands ----------------------------------------------------------------------
    async def create(self, msg: Create, token: str, owner: str | None = None) -> tuple[Room, int]:
        """A new room; ``owner`` (the creator's address) is what the AI queue is fair
        between and what the AI game limit counts (``rate/ai_games`` past it)."""
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
            )
            state = find_game(room.game).parse_position(room.start)
            try:
                await self._commit(room, -1, event, state)
            except StaleVersion:
                continue  # id collision: draw another
            return room, seat
        raise RoomError("server/busy", "could not allocate a room id")

    async def join(self, msg: Join, token: str) -> tuple[Room, int]:
        seat_taken: list[int] = []

        def decide(room: Room) -> Decision:
            player = player_id(msg.player_key) if msg.player_key else None
            new, event, seat = rooms.join_room(room, msg.seat, msg.name, token, now_ms(), player)
            seat_taken.append(seat)
            return new, event, self.state_of(room)

        room = await self._update(msg.room, decide)
        return room, seat_taken[-1]

    async def move(self, msg: PlayMove) -> Room:
        def decide(room: Room) -> Decision:
            seat = rooms.seat_for_token(room, msg.token)
            return rooms.play_move(room, seat, msg.move, msg.version, now_ms(), self.state_of(room))

        return await self._update(msg.room, decide)

    async def resign(self, msg: Resign) -> Room:
        def decide(room: Room) -> Decision:
            seat = rooms.seat_for_token(room, msg.token)
            new, event = rooms.resign(room, seat, now_ms())
            return new, event, self.state_of(room)

        return await self._update(msg.room, decide)

    async def abandon_if_idle(self, room_id: str, idle_ms: int) -> bool:
        """End a playing game untouched for ``idle_ms`` as abandoned (versioned, like any
        command); False if it is not (any more) such a game."""

        def decide(room: Room) -> Decision:
            if room.status != "playing" or now_ms() - room.updated_ms < idle_ms:
                raise RoomError("room/active", f"room {room.id} is not an idle game")
            new, event = rooms.abandon(room, now_ms())
            return new, event, self.state_of(room)

        try:
            await self._update(room_id, decide)
        except RoomError:
            return False
        return True

    async def apply_result(self, result: JobResult) -> ResultOutcome:
        """Play a worker's move if the room still waits for it.

        Returns "applied" (the worker's move was played), "fallback" (a fallback move
        was played instead) or "ignored".

        A late or duplicate result finds the room at another version and changes
        nothing. A result the room still waits for but cannot use (a failed job, or a
        move the rules refuse) is replaced by a quick fallback move, so the game goes on.
        """
        room = await self.store.load(result.room)
        if room is None or room.version != result.version or room.status != "playing":
            return "ignored"
        state = self.state_of(room)
        seat = find_game(room.game).to_move(state)
        if room.seats[seat].kind != "ai":
            return "ignored"
        if result.move is not None and result.error is None:
            try:
                new, event, new_state = rooms.play_move(
                    room, seat, result.move, result.version, now_ms(), state
                )
            except RoomError as exc:
                log.error("worker %s sent an unusable move for %s: %s", result.worker, room.id, exc)
            else:
                committed = await self._try_commit(new, room.version, event, new_state)
                return "applied" if committed else "ignored"
        return "fallback" if await self._play_fallback(room, seat, state) else "ignored"

    async def _play_fallback(self, room: Room, seat: int, state: Any) -> bool:
        """A shallow search here, for a room whose AI job could not produce a move."""
        from kibitz.shared.search import choose_move

        game = find_game(room.game)
        found = choose_move(game, state, level=1, budget=Budget(depth=1), seed=room.version)
        new, event, new_state = rooms.play_move(
            room, seat, found.move_text, room.version, now_ms(), state
        )
        return await self._try_commit(new, room.version, event, new_state)

    async def _try_commit(self, room: Room, expected: int, event: Event, state: Any) -> bool:
        try:
            await self._commit(room, expected, event, state)
        except StaleVersion:
            return False
        return True

    # -- the commit loop ---------------------------------------------------------------
    async def _update(self, room_id: str, decide: Callable[[Room], Decision]) -> Room:
        for _ in range(RETRIES):
            room = await self.get(room_id)
            new, event, state = decide(room)
            try:
                await self._commit(new, room.version, event, state)
            except StaleVersion:
                continue
            return new
        raise RoomError("room/busy", f"room {room_id} is changing too fast; try again")

    async def _commit(self, room: Room, expected: int, event: Event, state: Any) -> None:
        presence = await self.store.presence(room.id)
        snap = rooms.snapshot(room, state, presence)
        record = event.to_dict()
        if event.kind == "move":
            record["display"] = room.moves[-1].display
        if room.status == "over":
            record["result"] = room.result
        snap["event"] = record
        job = rooms.ai_job(room, state, self._budget(room, state))
        await self.store.commit(room, expected, record, snap, job, self.ai_games_per_owner)
        self._remember(room, state)

    def _budget(self, room: Room, state: Any) -> Budget:
        seat = room.seats[find_game(room.game).to_move(state)]
        if seat.kind != "ai" or seat.level is None:
            return Budget()
        return level_budget(room.game, seat.level)
