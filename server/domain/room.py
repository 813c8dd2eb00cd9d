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
import operator
import random
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from kibitz.server.domain import clocks
from kibitz.shared.games import Game, GameError, Outcome, Termination, find_game
from kibitz.shared.protocol.client_out import SeatRating, SeatView, State
from kibitz.shared.protocol.codec import ProtocolError
from kibitz.shared.protocol.jobs import SEARCHER_ENGINE, Budget, Job

Status = Literal["waiting", "playing", "over"]
SeatKind = Literal["human", "ai"]

ROOM_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"
assert 256 % len(ROOM_ID_ALPHABET) == 0  # a random byte picks a letter with no bias
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
    #: AI seats: what played the AI's last move ("kibitz", our searcher, or a UCI engine's
    #: name such as "Stockfish 15.1"); None before its first move.
    engine: str | None = None
    #: A signed-in player's seat: their account's name and id (the id is never shown).
    account: str | None = None
    account_id: int | None = None
    #: The seat's rating in the room's game and speed when the seat was taken (an AI
    #: level's fixed anchor in a rated room), and whether it was provisional then.
    rating: int | None = None
    provisional: bool = False
    #: A bot: a bot account's seat, or the AI's in a rated room.
    bot: bool = False

    @property
    def taken(self) -> bool:
        return self.kind == "ai" or self.token_hash is not None

    @property
    def on_scale(self) -> bool:
        """Whether the seat shows account and rating fields: a signed-in player's, or an
        AI's with a rating (a guest's never does)."""
        return self.account is not None or self.rating is not None


@dataclass(frozen=True, slots=True)
class SeatAccount:
    """A signed-in player taking a seat, as the seat keeps them: the account's id, name
    and the player id it plays under, whether it is a bot, and its rating in the room's
    game and speed read just before (None: no rating known)."""

    account_id: int
    username: str
    player_id: str
    rating: int | None = None
    provisional: bool = False
    bot: bool = False


def human_seat(
    token: str, name: str | None, player: str | None, holder: SeatAccount | None
) -> Seat:
    """A human seat for the holder of ``token``: a guest's (``player``: from their key),
    or a signed-in player's (``holder``), who plays under the account's player id, named
    by their username unless they gave a name."""
    if holder is None:
        return Seat("human", None, hash_token(token), name, player)
    return Seat(
        "human",
        None,
        hash_token(token),
        name or holder.username,
        holder.player_id,
        account=holder.username,
        account_id=holder.account_id,
        rating=holder.rating,
        provisional=holder.provisional,
        bot=holder.bot,
    )


def ai_seat(level: int, rating: int | None) -> Seat:
    """An AI seat of ``level``; ``rating``: its fixed anchor, in a rated room only."""
    return Seat("ai", level, None, f"AI level {level}", rating=rating, bot=rating is not None)


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
    #: {"winner": 0|1|None, "reason": str, "termination": code} (see :func:`result_of`);
    #: "termination" is absent in a room whose game ended before terminations existed.
    result: dict[str, Any] | None = None
    version: int = 0
    created_ms: int = 0
    updated_ms: int = 0
    #: The address that created the room: AI jobs are queued fairly per owner and an
    #: owner may keep only so many AI games open. Never shown to other clients.
    #: Records written before owners existed load with None.
    owner: str | None = None
    #: Pending offers by kind ("draw", "takeback", "rematch") -> the offering seat.
    offers: dict[str, int] = field(default_factory=dict)
    #: The rematch of this room, once agreed; the room this one is the rematch of.
    next_room: str | None = None
    previous_room: str | None = None
    #: The last applied AI move's score, from the AI's point of view (draw offers).
    ai_eval: float | None = None
    #: The version at which the position (the move list) last changed: a move pinned to
    #: an older version is stale only if the position changed since.
    position_version: int = 0
    #: "kind:seat" -> the position_version at which that seat's draw or takeback offer
    #: was declined: it may offer that again only once the position has changed.
    declined: dict[str, int] = field(default_factory=dict)
    #: The time control and running clocks (see server/domain/clocks.py); None: untimed.
    clock: dict[str, Any] | None = None
    #: A rated game: its result moves its players' ratings once archived.
    rated: bool = False

    @property
    def has_ai(self) -> bool:
        return any(seat.kind == "ai" for seat in self.seats)

    # -- (de)serialisation --------------------------------------------------------------
    def to_json_dict(self, moves: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The record as plain JSON values (what ``dataclasses.asdict`` gives, without its
        deep copy: the result is read, not kept). ``moves``: the moves as ``move_dict``
        gives them, if the caller has them already (a snapshot of this room has)."""
        data = {name: getattr(self, name) for name in _ROOM_FIELDS}
        data["seats"] = [
            {name: getattr(s, name) for name in (_SEAT_FIELDS if s.on_scale else _PLAIN)}
            for s in self.seats
        ]
        data["moves"] = [move_dict(m) for m in self.moves] if moves is None else moves
        return data

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> Room:
        data = dict(data)
        data["seats"] = [Seat(**s) for s in data["seats"]]
        data["moves"] = [MoveRecord(**m) for m in data["moves"]]
        # Records from before position_version: assume the position changed last at
        # the current version (the strict reading of a pinned move, as before).
        data.setdefault("position_version", data.get("version", 0))
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Event:
    """What happened in one room change; broadcast with the new snapshot."""

    kind: str  # created, joined, move, resign, over, draw_offer, abort, rematch...
    seat: int | None = None
    move: str | None = None
    room: str | None = None  # the new room of a "rematch"
    undone: int | None = None  # plies a "takeback" took back
    #: On an AI's move: the line it expected, its move first. Kept in the room's event
    #: stream; players are shown it only once the game is over (see ``hide_lines``).
    pv: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k in _EVENT_FIELDS if (v := getattr(self, k)) is not None}


_ROOM_FIELDS = tuple(f.name for f in fields(Room))
_SEAT_FIELDS = tuple(f.name for f in fields(Seat))
#: A seat's fields stored for every seat; the account's (name, id, rating...) are stored
#: only on a seat that has them (``Seat.on_scale``: a signed-in player's, a rated room's
#: AI); elsewhere their defaults are read back, so a guest's room is stored, and every
#: commit encodes it, as before accounts.
_ACCOUNT_FIELDS = frozenset({"account", "account_id", "rating", "provisional", "bot"})
_PLAIN = tuple(name for name in _SEAT_FIELDS if name not in _ACCOUNT_FIELDS)
# Every field of each, in order: what their constructors take positionally.
_room_values = operator.attrgetter(*_ROOM_FIELDS)
_seat_values = operator.attrgetter(*_SEAT_FIELDS)
_EVENT_FIELDS = tuple(f.name for f in fields(Event))
# move_dict spells the fields out (it runs for every move of every snapshot).
assert tuple(f.name for f in fields(MoveRecord)) == ("move", "display", "seat")


def move_dict(move: MoveRecord) -> dict[str, Any]:
    """A move record as JSON values (``dataclasses.asdict`` of it, faster)."""
    return {"move": move.move, "display": move.display, "seat": move.seat}


def hide_lines(events: list[dict[str, Any]], status: str) -> list[dict[str, Any]]:
    """``events`` as players may see them: an AI's line (``pv``) is a hint while the game
    runs, so it is left out until the game is over."""
    if status == "over":
        return events
    return [{k: v for k, v in e.items() if k != "pv"} if "pv" in e else e for e in events]


# -- tokens and ids -----------------------------------------------------------------------


def new_token() -> str:
    return secrets.token_urlsafe(24)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_room_id() -> str:
    """Ten characters of the alphabet, uniformly from one read of the system's random
    source (32 letters: each byte's last five bits pick one)."""
    return "".join(ROOM_ID_ALPHABET[b % len(ROOM_ID_ALPHABET)] for b in secrets.token_bytes(10))


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


def result_of(winner: int | None, reason: str, termination: Termination) -> dict[str, Any]:
    """A room's ``result``: the winner (None for a draw or no game), the reason in words
    and the termination code (one of :data:`kibitz.shared.games.TERMINATIONS`), in this
    key order (it is the order on the wire)."""
    return {"winner": winner, "reason": reason, "termination": termination}


def _outcome_result(outcome: Outcome) -> dict[str, Any]:
    if outcome.termination is None:
        raise ValueError(f"the game's outcome {outcome.reason!r} has no termination")
    return result_of(outcome.winner, outcome.reason, outcome.termination)


def _finish_if_over(room: Room, game: Game[Any, Any], state: Any) -> Room:
    outcome = game.outcome(state)
    if outcome is None and len(room.moves) >= MAX_MOVES:
        room.status = "over"
        room.result = result_of(None, f"{MAX_MOVES} moves played", "move-limit")
    elif outcome is not None:
        room.status = "over"
        room.result = _outcome_result(outcome)
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
    clock: dict[str, int] | None = None,
    first_move_ms: int = clocks.FIRST_MOVE_MS,
    *,
    rated: bool = False,
    holder: SeatAccount | None = None,
    ai_rating: int | None = None,
) -> tuple[Room, Event, int]:
    """A new room with its creator seated; returns (room, event, creator's seat).

    ``holder``: the creator's account, if signed in (the seat plays under its player id
    and shows its rating). ``rated``: a rated game, which needs ``holder``
    (``auth/required``) and the initial position; against the AI, the level's fixed
    rating ``ai_rating`` (``room/rated`` without one).

    ``clock``: the time control (see :func:`kibitz.shared.protocol.parse_clock`); the
    clocks start when the game does (see :func:`kibitz.server.domain.clocks.settle`), and each
    side has ``first_move_ms`` for its first move.

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
    if rated:
        _check_rated_create(game, opts, opponent, position, holder, ai_rating)
    seat_index = creator_seat if creator_seat is not None else (rng or random).randrange(2)
    seats = [Seat(), Seat()]
    seats[seat_index] = human_seat(token, creator_name, player, holder)
    if opponent.startswith("ai:"):
        seats[1 - seat_index] = ai_seat(int(opponent[3:]), ai_rating if rated else None)
    room = Room(
        id=room_id,
        game=game.name,
        options=dict(opts),
        start=game.format_position(state),
        seats=seats,
        created_ms=now_ms,
        updated_ms=now_ms,
        owner=owner,
        clock=clocks.new_clock(clock, first_move_ms),
        rated=rated,
    )
    if all(seat.taken for seat in seats):
        room.status = "playing"
    return room, Event("created", seat_index), seat_index


RATED_NEEDS_ACCOUNT = "a rated game needs you signed in; sign in, or play a casual game"


def _check_rated_create(
    game: Game[Any, Any],
    options: Mapping[str, Any],
    opponent: str,
    position: str | None,
    holder: SeatAccount | None,
    ai: int | None,
) -> None:
    """The rules a rated room's creation keeps (see :func:`create_room`)."""
    if holder is None:
        raise RoomError("auth/required", RATED_NEEDS_ACCOUNT)
    if position is not None:
        raise RoomError("room/rated", "a rated game starts from the initial position")
    check_rated_options(game, options)
    if opponent.startswith("ai:") and ai is None:
        raise RoomError("room/rated", f"AI level {opponent[3:]} has no rating in {game.name}")


def check_rated_options(game: Game[Any, Any], options: Mapping[str, Any]) -> None:
    """A rated game is played with its game's default options (``options`` normalized
    as :meth:`Game.normalize_options` gives them): other options make another game (one
    match to take, a smaller board) that the rating would not measure; ``room/rated``."""
    if dict(options) != dict(game.normalize_options({})):
        raise RoomError(
            "room/rated", f"a rated game of {game.name} is played with its default options"
        )


def _check_rated_join(room: Room, index: int, holder: SeatAccount | None) -> None:
    """A rated room's second seat: a signed-in player (``room/rated`` for a guest) other
    than the one in the first seat."""
    if holder is None:
        raise RoomError("room/rated", f"room {room.id} is rated: sign in to play in it")
    other = room.seats[1 - index]
    if other.account_id is not None and other.account_id == holder.account_id:
        raise RoomError("room/rated", f"you hold the other seat of rated room {room.id}")


def join_room(
    room: Room,
    seat: int | None,
    name: str | None,
    token: str,
    now_ms: int,
    player: str | None = None,
    holder: SeatAccount | None = None,
) -> tuple[Room, Event, int]:
    """Seat a second human player (``player``: a guest's public id; ``holder``: the
    account of a signed-in one, which a rated room needs); returns (room, event, seat)."""
    free = [i for i, s in enumerate(room.seats) if not s.taken]
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is over; watch it instead")
    if seat is not None and seat not in free:
        raise RoomError("room/seat_taken", f"seat {seat} of room {room.id} is taken")
    if not free:
        raise RoomError("room/full", f"room {room.id} has no free seat; watch it instead")
    index = seat if seat is not None else free[0]
    if room.rated:
        _check_rated_join(room, index, holder)
    new = _next(room, now_ms)
    new.seats[index] = human_seat(token, name, player, holder)
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
    *,
    lag_ms: int = 0,
    clock_ms: int | None = None,
    turn_ms: int | None = None,
) -> tuple[Room, Event, Any]:
    """Apply ``seat``'s move; returns (room, event, new game state).

    ``state`` is the current game state if the caller has it cached (it must match
    ``room.version``); otherwise it is rebuilt from the move list.

    In a timed game the move is charged to the mover's clock at ``clock_ms`` (the
    server clock; default ``now_ms``), less a lag credit for ``lag_ms`` (the mover's
    connection's estimate). A move that comes too late is not played: the room ends on
    time instead (event ``flag``, or ``abort`` for a first move past its deadline). The
    opponent's turn starts at ``turn_ms`` (the server clock now; default ``clock_ms``).
    """
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is over; {move_text!r} cannot be played")
    if room.status == "waiting":
        raise RoomError("room/waiting", f"room {room.id} is waiting for a second player")
    if expected_version is not None and expected_version > room.version:
        raise RoomError(
            "message/invalid",
            f"move {move_text!r} names version {expected_version}, which is ahead of "
            f"room {room.id} (at version {room.version}); use the version of a state you got",
        )
    if expected_version is not None and expected_version < room.position_version:
        raise RoomError(
            "room/stale",
            f"move {move_text!r} was made for version {expected_version}, but the position "
            f"of room {room.id} changed at version {room.position_version}",
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
    charged: clocks.Charge | None = None
    at = now_ms if clock_ms is None else clock_ms
    if room.clock is not None:
        charged = clocks.charge(room.clock, seat, at, lag_ms)
        if charged.late is not None:
            new, event = _time_out(room, game, state, charged.late, now_ms, at)
            return new, event, state
    new_state = game.apply(state, move)
    new = _next(room, now_ms)
    new.moves.append(MoveRecord(canonical, display, seat))
    new.position_version = new.version
    _clear_game_offers(new)
    _finish_if_over(new, game, new_state)
    if charged is not None:
        turn = at if turn_ms is None else max(at, turn_ms)
        new.clock = clocks.settle(charged.clock, game.to_move(new_state), new.status, turn)
    return new, Event("move", seat, canonical), new_state


def _time_out(
    room: Room, game: Game[Any, Any], state: Any, due: clocks.Due, now_ms: int, clock_ms: int
) -> tuple[Room, Event]:
    """The room ended by its clock: the side to move lost on time (a draw if the other
    side cannot win), or, for a first move not made in time, the game is aborted."""
    loser = game.to_move(state)
    new = _next(room, now_ms)
    new.status = "over"
    if due == "flag":
        new.result = clocks.flag_result(game.players, loser, game.can_win(state, 1 - loser))
        event = Event("flag", loser)
    else:
        new.result = clocks.first_move_abort_result(game.players, loser)
        event = Event("abort", loser)
    _clear_game_offers(new)
    new.clock = clocks.settle(room.clock, loser, "over", clock_ms)
    return new, event


def expire(room: Room, clock_ms: int, now_ms: int, state: Any = None) -> tuple[Room, Event]:
    """End the room on time if its clock says so at ``clock_ms`` (the deadline sweeper's
    command); ``room/not_due`` if nothing is due (a move came first, or not yet)."""
    due = clocks.due(room.clock, room.status, clock_ms)
    if due is None:
        raise RoomError("room/not_due", f"nothing is due in room {room.id}")
    game = find_game(room.game)
    if state is None:
        state = replay(room)
    return _time_out(room, game, state, due, now_ms, clock_ms)


def resign(room: Room, seat: int, now_ms: int) -> tuple[Room, Event]:
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is already over")
    if room.status == "waiting":
        # Nobody to lose to yet: that is an abort, not a resignation.
        raise RoomError("room/waiting", f"room {room.id} has not started: use 'abort' to cancel it")
    game = find_game(room.game)
    new = _next(room, now_ms)
    new.status = "over"
    new.result = result_of(1 - seat, f"{game.players[seat]} resigned", "resignation")
    _clear_game_offers(new)
    return new, Event("resign", seat)


def abandon(room: Room, now_ms: int, state: Any = None) -> tuple[Room, Event]:
    """End a game nobody plays on any more (idle too long, or its players gone).

    If nobody has moved yet: aborted as a first move not made in time is (event ``abort``
    by the side to move): a game that never started is not archived (see
    :func:`is_aborted`), rated or not. Else a casual game ends with no winner, reason
    "abandoned"; a rated one is lost by the side to move, the one that stopped playing
    (against the AI, the human is always to move), so leaving a lost rated game is never
    a draw. Termination ``abandon`` either way."""
    if room.status != "playing":
        raise RoomError("room/not_playing", f"room {room.id} is {room.status}, not playing")
    new = _next(room, now_ms)
    new.status = "over"
    _clear_game_offers(new)
    if room.moves and not room.rated:
        new.result = result_of(None, "abandoned", "abandon")
        return new, Event("over")
    game = find_game(room.game)
    late = game.to_move(replay(room) if state is None else state)
    if room.moves:
        reason = f"{game.players[late]} abandoned the game"
        new.result = result_of(1 - late, reason, "abandon")
        return new, Event("over")
    new.result = clocks.first_move_abort_result(game.players, late)
    return new, Event("abort", late)


def is_aborted(room: Room) -> bool:
    """Whether ``room``'s game was called off before it really started: an ``abort``, a
    first move not made in time, or a game nobody moved in lapsing. Such a game is not
    written to the archive (its room leaves Redis after the finished-room lifetime)."""
    if room.status != "over" or not room.result:
        return False
    if "termination" in room.result:
        return bool(room.result["termination"] == "abort")
    reason = room.result.get("reason")  # a room that ended before terminations existed
    return isinstance(reason, str) and reason.startswith("aborted")


# -- player actions: offers, abort, claim, rematch ---------------------------------------------

OfferKind = Literal["draw", "takeback", "rematch"]
OfferAction = Literal["offer", "accept", "decline"]
OFFER_KINDS: tuple[OfferKind, ...] = ("draw", "takeback", "rematch")

AI_TAKEBACK_MAX_LEVEL = 4  # an AI accepts takebacks at levels 1 to this
#: How long a human player must have been gone before the opponent may claim.
CLAIM_AFTER_TIMED_MS = 30_000
CLAIM_AFTER_UNTIMED_MS = 120_000


def is_timed(room: Room) -> bool:
    """Whether the room has a time control."""
    return room.clock is not None


def ends_when_left(room: Room) -> bool:
    """Whether the sweep may end ``room``'s game when nobody plays on (see
    :mod:`kibitz.server.loops.archiver`): an untimed game, or a correspondence game nobody has
    moved in (its first move may take days: players who have all left must not hold a room
    that long). Other timed games are ended by their clocks."""
    if room.clock is None:
        return True
    return clocks.is_correspondence(room.clock) and not room.moves


def claim_after_ms(room: Room, override: int | None = None) -> int:
    """How long a disconnect must last before the opponent may claim (``override``: the
    server's setting, for every room)."""
    if override is not None:
        return override
    return CLAIM_AFTER_TIMED_MS if is_timed(room) else CLAIM_AFTER_UNTIMED_MS


def ai_accepts(room: Room, kind: OfferKind, ai_seat: int) -> bool:
    """How an AI seat answers an offer: a rematch always; a takeback at low levels; a
    draw once the game is past its opening (``GamePolicy.ai_draw_min_plies``) and the
    AI's last score says it is not ahead by more than the game's margin
    (``GamePolicy.draw_margin``; no score yet: it plays on)."""
    if kind == "rematch":
        return True
    if kind == "takeback":
        level = room.seats[ai_seat].level
        return level is not None and level <= AI_TAKEBACK_MAX_LEVEL
    policy = find_game(room.game).policy
    if room.ai_eval is None or len(room.moves) < policy.ai_draw_min_plies:
        return False
    return room.ai_eval <= policy.draw_margin


def _clear_game_offers(room: Room) -> None:
    """Draw and takeback offers are about the position: a move or the end clears them."""
    room.offers.pop("draw", None)
    room.offers.pop("takeback", None)


def _end(room: Room, winner: int | None, reason: str, termination: Termination) -> None:
    room.status = "over"
    room.result = result_of(winner, reason, termination)
    _clear_game_offers(room)


def takeback_plies(room: Room, seat: int) -> int:
    """How many plies a takeback for ``seat`` undoes: its last move and every move after
    it (the opponent's reply), so it is ``seat``'s turn again."""
    for index in range(len(room.moves) - 1, -1, -1):
        if room.moves[index].seat == seat:
            return len(room.moves) - index
    raise RoomError("offer/not_allowed", f"there is no move of seat {seat} to take back")


def _check_can_offer(room: Room, seat: int, kind: OfferKind) -> None:
    if kind == "rematch":
        if room.status != "over":
            raise RoomError(
                "offer/not_allowed", f"room {room.id} is {room.status}: rematch after the end"
            )
        if room.next_room is not None:
            raise RoomError("offer/not_allowed", f"the rematch is already room {room.next_room}")
        if not all(s.taken for s in room.seats):
            raise RoomError("offer/not_allowed", f"room {room.id} never had two players")
        return
    if room.status != "playing":
        raise RoomError(
            "offer/not_allowed", f"room {room.id} is {room.status}: a {kind} needs a game on"
        )
    if kind == "draw" and not find_game(room.game).policy.draw_offers:
        raise RoomError("offer/not_allowed", f"{room.game} has no drawn ending: no draw to offer")
    if kind == "takeback":
        takeback_plies(room, seat)


def answer_offer(
    room: Room,
    seat: int,
    kind: OfferKind,
    action: OfferAction,
    now_ms: int,
    state: Any = None,
) -> tuple[Room, Event, Any]:
    """Offer, accept or decline a draw, a takeback or a rematch for ``seat``; returns
    (room, event, game state after it).

    Offering what the opponent has offered accepts it. An offer to an AI seat is answered
    at once (see :func:`ai_accepts`). An agreed rematch sets ``next_room``: the caller
    creates that room (see :func:`rematch_room`). ``state``: the current game state, if
    the caller has it.
    """
    other = 1 - seat
    # A draw or takeback offer lives only while the game is on.
    pending = room.offers.get(kind) if kind == "rematch" or room.status == "playing" else None
    if action == "offer" and pending == other:
        action = "accept"
    if action == "offer":
        _check_can_offer(room, seat, kind)
        if pending == seat:
            raise RoomError("offer/not_allowed", f"you have already offered a {kind}")
        if kind != "rematch" and room.declined.get(f"{kind}:{seat}") == room.position_version:
            raise RoomError(
                "offer/not_allowed",
                f"your {kind} offer was declined; you may offer again after the next move",
            )
        if room.seats[other].kind == "ai":
            if ai_accepts(room, kind, other):
                return _agree(room, kind, seat, other, now_ms, state)
            new = _next(room, now_ms)
            new.declined[f"{kind}:{seat}"] = room.position_version
            return new, Event(f"{kind}_decline", other), state
        new = _next(room, now_ms)
        new.offers[kind] = seat
        return new, Event(f"{kind}_offer", seat), state
    if pending != other:
        raise RoomError("offer/none", f"your opponent has not offered a {kind} in room {room.id}")
    if action == "decline":
        new = _next(room, now_ms)
        new.offers.pop(kind, None)
        new.declined[f"{kind}:{other}"] = room.position_version
        return new, Event(f"{kind}_decline", seat), state
    _check_can_offer(room, other, kind)
    return _agree(room, kind, other, seat, now_ms, state)


def _agree(
    room: Room, kind: OfferKind, offerer: int, accepter: int, now_ms: int, state: Any
) -> tuple[Room, Event, Any]:
    new = _next(room, now_ms)
    new.offers.pop(kind, None)
    if kind == "draw":
        _end(new, None, "draw agreed", "agreement")
        return new, Event("draw", accepter), state
    if kind == "takeback":
        undone = takeback_plies(room, offerer)
        del new.moves[len(new.moves) - undone :]
        new.position_version = new.version
        new.ai_eval = None  # it was about a position no longer on the board
        _clear_game_offers(new)
        return new, Event("takeback", accepter, undone=undone), replay(new)
    new.next_room = rematch_id(room.id)
    return new, Event("rematch", accepter, room=new.next_room), state


def abort(room: Room, seat: int, now_ms: int) -> tuple[Room, Event]:
    """Cancel a game that has not really started: a waiting room, or a game in which
    not both seats have moved yet. No winner, reason "aborted"."""
    if room.status == "over":
        raise RoomError("game/over", f"room {room.id} is already over")
    if room.status == "playing" and {0, 1} <= {m.seat for m in room.moves}:
        raise RoomError(
            "abort/too_late",
            f"both sides have moved in room {room.id}: resign, or offer a draw, instead",
        )
    new = _next(room, now_ms)
    _end(new, None, "aborted", "abort")
    return new, Event("abort", seat)


def claim(
    room: Room,
    seat: int,
    result: Literal["win", "draw"],
    opponent_gone_ms: int | None,
    claim_after: int,
    now_ms: int,
) -> tuple[Room, Event]:
    """End the game because the opponent has left: ``seat`` wins (``result`` "win") or
    it is a draw. Only against a human seat gone (``opponent_gone_ms``: since when, None
    while connected) for at least ``claim_after`` ms."""
    game = find_game(room.game)
    other = 1 - seat
    if room.status != "playing":
        raise RoomError("claim/not_allowed", f"room {room.id} is {room.status}, not playing")
    if room.seats[other].kind != "human":
        raise RoomError("claim/not_allowed", "your opponent is the AI: it never leaves")
    if opponent_gone_ms is None:
        raise RoomError("claim/not_allowed", f"{game.players[other]} is connected")
    remaining = opponent_gone_ms + claim_after - now_ms
    if remaining > 0:
        raise RoomError(
            "claim/too_early",
            f"{game.players[other]} has been gone for {(now_ms - opponent_gone_ms) // 1000} s; "
            f"you can claim in {-(-remaining // 1000)} s",
        )
    name = game.players[other]
    new = _next(room, now_ms)
    if result == "win":
        _end(new, seat, f"{name} left the game", "claim")
    else:
        _end(new, None, f"draw: {name} left the game", "claim")
    return new, Event("claim", seat)


def rematch_id(room_id: str) -> str:
    """The id of ``room_id``'s rematch: derived, so every node agrees on it."""
    digest = hashlib.sha256(f"kibitz-rematch:{room_id}".encode()).digest()
    return "".join(ROOM_ID_ALPHABET[b % len(ROOM_ID_ALPHABET)] for b in digest[:10])


def rematch_room(room: Room, now_ms: int) -> tuple[Room, Event]:
    """The new room of an agreed rematch (``room.next_room``): same game, options, start
    position, time control, seat kinds and accounts, rated or not, colours swapped; each
    player keeps their token (so they ``resume`` it with the token they have). The
    seats' ratings are the old room's until the caller reads them again."""
    if room.next_room is None:
        raise RoomError("offer/none", f"room {room.id} has no agreed rematch")
    new = Room(
        id=room.next_room,
        game=room.game,
        options=dict(room.options),
        start=room.start,
        seats=[replace(room.seats[1]), replace(room.seats[0])],
        status="playing",
        created_ms=now_ms,
        updated_ms=now_ms,
        owner=room.owner,
        previous_room=room.id,
        clock=clocks.new_clock(clocks.control_of(room.clock)),
        rated=room.rated,
    )
    return new, Event("created")


def _next(room: Room, now_ms: int) -> Room:
    """A copy of ``room`` one version later (lists copied so the input never changes).
    Built from its fields in order, as ``dataclasses.replace`` would, at a fraction of
    its cost (this runs on every change)."""
    new = Room(*_room_values(room))
    new.seats = [Seat(*_seat_values(s)) for s in room.seats]
    new.moves = list(room.moves)
    new.options = dict(room.options)
    new.offers = dict(room.offers)
    new.declined = dict(room.declined)
    new.version = room.version + 1
    new.updated_ms = now_ms
    return new


# -- AI jobs and views ------------------------------------------------------------------------

MAX_ENGINE_NAME = 64


def record_engine(room: Room, seat: int, engine: str | None) -> None:
    """Note on an AI seat what played its move: ``engine`` from the worker's result (a
    UCI engine's name), or our searcher (None, or results from older workers)."""
    if room.seats[seat].kind == "ai":
        room.seats[seat].engine = (engine or SEARCHER_ENGINE)[:MAX_ENGINE_NAME]


def ai_job(room: Room, state: Any, budget: Budget, deadline_ms: int | None = None) -> Job | None:
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
        deadline_ms=deadline_ms,
    )


@dataclass(frozen=True, slots=True)
class Presence:
    """Who is there, across the cluster: whether each seat's player is connected, since
    when a human seat's player has been gone (epoch ms; None while connected, and for
    free and AI seats), and how many spectators watch."""

    connected: tuple[bool, bool] = (False, False)
    gone_ms: tuple[int | None, int | None] = (None, None)
    spectators: int = 0


def snapshot(
    room: Room,
    state: Any,
    connected: tuple[bool, bool] | Presence = (False, False),
    claim_after: int | None = None,
    clock_ms: int | None = None,
) -> dict[str, Any]:
    """The public ``state`` message for ``room`` (no tokens), without ``you``/``event``.

    ``connected``: the seats' presence (a :class:`Presence`, or just who is connected);
    ``claim_after``: the server's override of :func:`claim_after_ms`, if any;
    ``clock_ms``: the server clock now, for the time left on a running clock (default:
    the room's last update)."""
    presence = connected if isinstance(connected, Presence) else Presence(connected)
    connected = presence.connected
    game = find_game(room.game)
    playing = room.status == "playing"
    last = room.moves[-1] if room.moves else None
    return State.message(
        room=room.id,
        version=room.version,
        game=room.game,
        options=room.options,
        status=room.status,
        players=list(game.players),
        seats=[
            SeatView.message(
                seat=i,
                kind=s.kind,
                level=s.level,
                name=s.name,
                player=s.player,
                taken=s.taken,
                engine=s.engine,
                connected=s.kind == "ai" or connected[i],
                gone_ms=(
                    presence.gone_ms[i]
                    if s.kind == "human" and s.taken and not connected[i]
                    else None
                ),
                scale=seat_rating(s),
            )
            for i, s in enumerate(room.seats)
        ],
        position=game.format_position(state),
        to_move=game.to_move(state),
        legal_moves=game.legal_move_texts(state) if playing else [],
        moves=[move_dict(m) for m in room.moves],
        last_move=move_dict(last) if last else None,
        result=room.result,
        view=game.view(state),
        clock=clocks.view(room.clock, room.updated_ms if clock_ms is None else clock_ms),
        # Draw and takeback offers are about a game on (however it ended, they went).
        offers={
            kind: room.offers.get(kind) if kind == "rematch" or playing else None
            for kind in OFFER_KINDS
        },
        next_room=room.next_room,
        previous_room=room.previous_room,
        spectators=presence.spectators,
        claim_after_ms=claim_after_ms(room, claim_after),
        rated=room.rated,
    )


def seat_rating(seat: Seat) -> SeatRating | None:
    """The account and rating fields a seat shows, if it has them (see ``on_scale``)."""
    if not seat.on_scale:
        return None
    return SeatRating(seat.account, seat.rating, seat.provisional, seat.bot)


def _summary_seat(seat: Seat) -> dict[str, Any]:
    entry = {
        "kind": seat.kind,
        "level": seat.level,
        "name": seat.name,
        "player": seat.player,
        "taken": seat.taken,
    }
    rating = seat_rating(seat)
    return entry if rating is None else {**entry, **rating.to_dict()}


def summary(room: Room) -> dict[str, Any]:
    """One line of the live-rooms list."""
    return {
        "room": room.id,
        "game": room.game,
        "status": room.status,
        "version": room.version,
        "moves": len(room.moves),
        "seats": [_summary_seat(s) for s in room.seats],
        "updated_ms": room.updated_ms,
        **({"rated": True} if room.rated else {}),
    }
