"""The room state machine, without sockets or Redis.

A room is a plain record (stored in Redis as JSON). Every change goes through one of the
``handle_*`` functions here: record + actor + command in, new record + event out, or a
:class:`RoomError` with a stable code. The validation order is the same everywhere:
message shape (already checked by the protocol), credentials, room state, turn,
version, then the move itself through the game's rules.

Each accepted change increments ``version`` by one, so every event has a version and a
client can resume from the last one it saw.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import secrets
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from kibitz.shared.games import Game, GameError, find_game
from kibitz.shared.protocol import Budget, Job, ProtocolError

Status = Literal["waiting", "playing", "over"]
SeatKind = Literal["human", "ai"]

ROOM_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
MAX_MOVES = 2000  # a room that reaches this many moves ends in a draw


class RoomError(ProtocolError):
    """A command the room refuses; nothing changed."""


@dataclass(slots=True)
class Seat:
    kind: SeatKind = "human"
    level: int | None = None  # AI level, for AI seats
    token_hash: str | None = None  # sha256 of the player's token; None while free
    name: str | None = None
    #: The public id of the player in this seat (from their player key), if they gave one.
    player: str | None = None

    @property
    def taken(self) -> bool:
        return self.kind == "ai" or self.token_hash is not None


@dataclass(slots=True)
class MoveRecord:
    move: str  # wire notation
    display: str  # notation for people (SAN in chess)
    seat: int


@dataclass(slots=True)
class Room:
    id: str
    game: str
    options: dict[str, Any]
    start: str  # start position text
    seats: list[Seat]
    moves: list[MoveRecord] = field(default_factory=list)
    status: Status = "waiting"
    result: dict[str, Any] | None = None  # {"winner": 0|1|None, "reason": str}
    version: int = 0
    created_ms: int = 0
    updated_ms: int = 0
    #: The address that created the room: AI jobs are queued fairly per owner and an
    #: owner may keep only so many AI games open. Never shown to other clients.
    #: Records written before owners existed load with None.
    owner: str | None = None

    @property
    def has_ai(self) -> bool:
        return any(seat.kind == "ai" for seat in self.seats)

    # -- (de)serialisation --------------------------------------------------------------
    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Room:
        data = dict(data)
        data["seats"] = [Seat(**s) for s in data["seats"]]
        data["moves"] = [MoveRecord(**m) for m in data["moves"]]
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Event:
    """What happened in one room change; broadcast with the new snapshot."""

    kind: str  # created, joined, move, resign, over
    seat: int | None = None
    move: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


# -- tokens and ids -----------------------------------------------------------------------


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_room_id() -> str:
    return "".join(secrets.choice(ROOM_ID_ALPHABET) for _ in range(10))


def valid_room_id(room_id: str) -> bool:
    return 4 <= len(room_id) <= 32 and all(c.isalnum() or c in "-_" for c in room_id)


def seat_for_token(room: Room, token: str) -> int:
    """The seat that ``token`` owns in ``room``; raises ``auth/token``."""
    digest = hash_token(token)
    for index, seat in enumerate(room.seats):
        if seat.token_hash is not None and hmac.compare_digest(seat.token_hash, digest):
            return index
    raise RoomError("auth/token", f"this token holds no seat in room {room.id}")


# -- game state -----------------------------------------------------------------------------


def replay(room: Room) -> Any:
    """The game state after every recorded move (the rules check each one again)."""
    game = find_game(room.game)
    state = game.parse_position(room.start)
    for record in room.moves:
        state = game.play(state, record.move)
    return state


def _finish_if_over(room: Room, game: Game[Any, Any], state: Any) -> Room:
    outcome = game.outcome(state)
    if outcome is None and len(room.moves) >= MAX_MOVES:
        room.status = "over"
        room.result = {"winner": None, "reason": f"{MAX_MOVES} moves played"}
    elif outcome is not None:
        room.status = "over"
        room.result = {"winner": outcome.winner, "reason": outcome.reason}
    return room


# -- commands ---------------------------------------------------------------------------------


def create_room(
    room_id: str,
    game_name: str,
    options: dict[str, Any],
    opponent: str,
    creator_seat: int | None,
    creator_name: str | None,
    token: str,
    now_ms: int,
    rng: random.Random | None = None,
    position: str | None = None,
    owner: str | None = None,
    player: str | None = None,
) -> tuple[Room, Event, int]:
    """A new room with its creator seated; returns (room, event, creator's seat).

    ``position`` starts the game from that position text instead of the initial one;
    ``owner`` is the creator's address (see :attr:`Room.owner`); ``player`` is the
    creator's public player id (see :attr:`Seat.player`).
    """
    try:
        game = find_game(game_name)
        opts = game.normalize_options(options)
        state = game.parse_position(position) if position else game.initial(opts)
    except GameError as exc:
        raise RoomError(exc.code, str(exc)) from None
    if game.outcome(state) is not None:
        raise RoomError("position/invalid", f"the game is already over in {position!r}")
    seat_index = creator_seat if creator_seat is not None else (rng or random).randrange(2)
    seats = [Seat(), Seat()]
    seats[seat_index] = Seat("human", None, hash_token(token), creator_name, player)
    if opponent.startswith("ai:"):
        seats[1 - seat_index] = Seat("ai", int(opponent[3:]), None, f"AI level {opponent[3:]}")
    room = Room(
        id=room_id,
        game=game.name,
        options=dict(opts),
        start=game.format_position(state),
        seats=seats,
        created_ms=now_ms,
        updated_ms=now_ms,
        owner=owner,
    )
    if all(seat.taken for seat in seats):
        room.status = "playing"
    return room, Event("created", seat_index), seat_index


def join_room(
    room: Room,
    seat: int | None,
    name: str | None,
    token: str,
    now_ms: int,
    player: str | None = None,
) -> tuple[Room, Event, int]:
    """Seat a second human player (``player``: their public id); returns (room, event, seat)."""
    free = [i for i, s in enumerate(room.seats) if not s.taken]
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is over; watch it instead")
    if seat is not None and seat not in free:
        raise RoomError("room/seat_taken", f"seat {seat} of room {room.id} is taken")
    if not free:
        raise RoomError("room/full", f"room {room.id} has no free seat; watch it instead")
    index = seat if seat is not None else free[0]
    new = _next(room, now_ms)
    new.seats[index] = Seat("human", None, hash_token(token), name, player)
    if all(s.taken for s in new.seats):
        new.status = "playing"
    return new, Event("joined", index), index


def play_move(
    room: Room,
    seat: int,
    move_text: str,
    expected_version: int | None,
    now_ms: int,
    state: Any = None,
) -> tuple[Room, Event, Any]:
    """Apply ``seat``'s move; returns (room, event, new game state).

    ``state`` is the current game state if the caller has it cached (it must match
    ``room.version``); otherwise it is rebuilt from the move list.
    """
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is over; {move_text!r} cannot be played")
    if room.status == "waiting":
        raise RoomError("room/waiting", f"room {room.id} is waiting for a second player")
    if expected_version is not None and expected_version != room.version:
        raise RoomError(
            "room/stale",
            f"move {move_text!r} was made for version {expected_version}, "
            f"room {room.id} is at version {room.version}",
        )
    game = find_game(room.game)
    if state is None:
        state = replay(room)
    to_move = game.to_move(state)
    if seat != to_move:
        raise RoomError(
            "move/not_your_turn",
            f"it is {game.players[to_move]}'s turn in room {room.id}, not {game.players[seat]}'s",
        )
    try:
        move = game.parse_move(state, move_text)
    except GameError as exc:
        raise RoomError(exc.code, str(exc)) from None
    display = game.display_move(state, move)
    canonical = game.format_move(state, move)
    new_state = game.apply(state, move)
    new = _next(room, now_ms)
    new.moves.append(MoveRecord(canonical, display, seat))
    _finish_if_over(new, game, new_state)
    return new, Event("move", seat, canonical), new_state


def resign(room: Room, seat: int, now_ms: int) -> tuple[Room, Event]:
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is already over")
    game = find_game(room.game)
    new = _next(room, now_ms)
    new.status = "over"
    if room.status == "waiting":
        # Nobody to lose to yet: the room is abandoned, not won.
        new.result = {"winner": None, "reason": f"{game.players[seat]} left before the start"}
    else:
        new.result = {"winner": 1 - seat, "reason": f"{game.players[seat]} resigned"}
    return new, Event("resign", seat)


def abandon(room: Room, now_ms: int) -> tuple[Room, Event]:
    """End a game nobody has played on for too long: no winner, reason "abandoned"."""
    if room.status != "playing":
        raise RoomError("room/not_playing", f"room {room.id} is {room.status}, not playing")
    new = _next(room, now_ms)
    new.status = "over"
    new.result = {"winner": None, "reason": "abandoned"}
    return new, Event("over")


def _next(room: Room, now_ms: int) -> Room:
    """A copy of ``room`` one version later (lists copied so the input never changes)."""
    return replace(
        room,
        seats=[replace(s) for s in room.seats],
        moves=list(room.moves),
        options=dict(room.options),
        version=room.version + 1,
        updated_ms=now_ms,
    )


# -- AI jobs and views ------------------------------------------------------------------------


def ai_job(room: Room, state: Any, budget: Budget) -> Job | None:
    """The search job this room needs now, if an AI seat is to move."""
    if room.status != "playing":
        return None
    game = find_game(room.game)
    seat = room.seats[game.to_move(state)]
    if seat.kind != "ai" or seat.level is None:
        return None
    return Job(
        job_id=f"{room.id}:{room.version}",
        room=room.id,
        version=room.version,
        game=room.game,
        position=room.start,
        moves=[m.move for m in room.moves],
        level=seat.level,
        budget=budget,
        seed=room.version,
        owner=room.owner or "",
    )


def snapshot(
    room: Room, state: Any, connected: tuple[bool, bool] = (False, False)
) -> dict[str, Any]:
    """The public ``state`` message for ``room`` (no tokens), without ``you``/``event``."""
    game = find_game(room.game)
    playing = room.status == "playing"
    last = room.moves[-1] if room.moves else None
    return {
        "type": "state",
        "room": room.id,
        "version": room.version,
        "game": room.game,
        "options": room.options,
        "status": room.status,
        "players": list(game.players),
        "seats": [
            {
                "seat": i,
                "kind": s.kind,
                "level": s.level,
                "name": s.name,
                "player": s.player,
                "taken": s.taken,
                "connected": s.kind == "ai" or connected[i],
            }
            for i, s in enumerate(room.seats)
        ],
        "position": game.format_position(state),
        "to_move": game.to_move(state),
        "legal_moves": game.legal_move_texts(state) if playing else [],
        "moves": [asdict(m) for m in room.moves],
        "last_move": asdict(last) if last else None,
        "result": room.result,
        "view": game.view(state),
    }


def summary(room: Room) -> dict[str, Any]:
    """One line of the live-rooms list."""
    return {
        "room": room.id,
        "game": room.game,
        "status": room.status,
        "version": room.version,
        "moves": len(room.moves),
        "seats": [
            {"kind": s.kind, "level": s.level, "name": s.name, "player": s.player, "taken": s.taken}
            for s in room.seats
        ],
        "updated_ms": room.updated_ms,
    }
