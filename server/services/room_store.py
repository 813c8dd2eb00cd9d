"""The bus's room store in the server's terms: a ``Room`` in, ``Room`` and ``Presence`` out.

:class:`kibitz.shared.bus.store.RoomStore` keeps rooms in Redis as plain data and knows
nothing of the server. This adapter decides how a :class:`~kibitz.server.domain.room.Room`
becomes a :class:`~kibitz.shared.bus.store.RoomCommit` (its record, seat flags, whether
it counts against its owner's AI games, whether it is archived) and maps the commit's
refusals to the :class:`~kibitz.server.domain.room.RoomError` a client sees
(``rate/ai_games``, ``server/busy``). :class:`~kibitz.shared.bus.store.StaleVersion`
passes through: the room service retries on it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import Any

from kibitz.server.domain.room import Presence, Room, RoomError, is_aborted
from kibitz.shared.bus import store as bus
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.playing import PlayerRooms
from kibitz.shared.bus.store import AiGames, AiGamesMode, PresenceCounts, RoomCommit
from kibitz.shared.protocol.jobs import Job

log = logging.getLogger(__name__)

#: What runs after each written commit: (room, expected version, event, snapshot).
AfterCommit = Callable[[Room, int, dict[str, Any], dict[str, Any]], Awaitable[None]]

#: A signed-in creator's room owner is this and the account's id (a guest's: the address):
#: the AI game cap and the fair AI queue count per account then.
ACCOUNT_OWNER = "account:"


def ai_owner(account_id: int | None, address: str) -> str:
    """Who a new room's AI games count against: the account, else the address."""
    return address if account_id is None else f"{ACCOUNT_OWNER}{account_id}"


def seat_flags(room: Room, present: int | None = None) -> str:
    """One letter a seat for presence_splice: "a" an AI, "p" the player ``present`` (just
    seated: shown connected), "h" another human player, "-" a free seat."""
    return "".join(
        "a" if seat.kind == "ai" else "p" if i == present else "h" if seat.taken else "-"
        for i, seat in enumerate(room.seats)
    )


def ai_games(
    room: Room, expected_version: int, limit: int, grace_ms: int = bus.AI_GAMES_GRACE_MS
) -> AiGames | None:
    """How the change counts against the owner's AI games (None: not at all)."""
    if not (room.owner and room.has_ai):
        return None
    mode: AiGamesMode = "touch"
    if expected_version < 0:
        mode = "create"
    elif room.status == "over":
        mode = "end"
    return AiGames(room.owner, mode, limit, grace_ms)


def ai_games_refusal(owner: str, refused: bus.AiGamesLimit, grace_ms: int) -> RoomError:
    """The ``rate/ai_games`` refusal: whose games count, which (their ids, also as the
    error's ``rooms``), and how one stops counting."""
    you = owner.startswith(ACCOUNT_OWNER)
    listed = ", ".join(refused.rooms)
    if refused.over_kept:
        text = (
            f"{'you have' if you else 'this address has'} {refused.unfinished} unfinished "
            f"games against the AI (at most {refused.kept}, counting those left): "
            f"{listed}; finish or resign some first"
        )
    else:
        text = (
            f"{'you are' if you else 'this address is'} already playing {refused.games} "
            f"games against the AI (at most {refused.limit}): {listed}; finish, resign or "
            f"leave one first (a game left for {_duration(grace_ms)} stops counting)"
        )
    return RoomError("rate/ai_games", text, {"rooms": list(refused.rooms)})


def _duration(ms: int) -> str:
    if ms >= 60_000 and ms % 60_000 == 0:
        return f"{ms // 60_000} min"
    return f"{ms / 1000:g} s"


def _moves_of(room: Room, snapshot: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The snapshot's move list, which is the record's (the snapshot is of ``room``), so
    the record need not build it again; None if it does not match."""
    moves = snapshot.get("moves")
    if isinstance(moves, list) and len(moves) == len(room.moves):
        return moves
    return None


def room_commit(
    room: Room,
    expected_version: int,
    event: dict[str, Any],
    snapshot: dict[str, Any],
    job: Job | None,
    ai_games_limit: int,
    deadline: int | None,
    present: int | None,
    ai_games_grace_ms: int = bus.AI_GAMES_GRACE_MS,
) -> RoomCommit:
    """What committing ``room`` writes (see :meth:`RoomStore.commit`)."""
    return RoomCommit(
        room_id=room.id,
        expected_version=expected_version,
        version=room.version,
        record=room.to_json_dict(moves=_moves_of(room, snapshot)),
        event=event,
        updated_ms=room.updated_ms,
        status=room.status,
        archive=not is_aborted(room),
        snapshot=snapshot,
        seat_flags=seat_flags(room, present),
        deadline_ms=deadline,
        job=job,
        ai_games=ai_games(room, expected_version, ai_games_limit, ai_games_grace_ms),
    )


def seated_players(room: Room, expected_version: int, present: int | None) -> list[str]:
    """The player ids a change seats in an unfinished room, for the per-player index of
    rooms (profiles): every account's seat of a new room, the just-seated one's of a join.
    Only accounts' seats (their account's player id): a guest's player key is made up at
    will, and noting it would let anyone fill Redis with keys."""
    if room.status == "over":
        return []
    seats = range(len(room.seats)) if expected_version < 0 else [] if present is None else [present]
    return [
        player
        for i in seats
        if room.seats[i].account_id is not None and (player := room.seats[i].player) is not None
    ]


def _presence(counts: PresenceCounts) -> Presence:
    return Presence(counts.connected, counts.gone_ms, counts.spectators)


class RoomStore(bus.RoomStore):
    """The bus's store, with rooms read and written as ``Room``."""

    #: Told of each written commit (server/botapi/events.py sets it: the event streams'
    #: game starts and finishes); its failure is logged, the commit stands.
    after_commit: AfterCommit | None = None

    @cached_property
    def playing(self) -> PlayerRooms:
        """The rooms each player sits in (``seated_players`` of each commit)."""
        return PlayerRooms(self.redis)

    async def load(self, room_id: str) -> Room | None:
        record = await self.load_record(room_id)
        return None if record is None else Room.from_json_dict(record)

    async def live_rooms(
        self, limit: int = bus.LOBBY_ROOMS, max_idle_ms: int = bus.LOBBY_MAX_IDLE_MS
    ) -> list[Room]:
        """Unfinished rooms changed in the last day, most recent first."""
        rooms = []
        for room_id in await self.live_room_ids(limit, max_idle_ms):
            room = await self.load(room_id)
            if room is not None:
                rooms.append(room)
        return rooms

    async def commit(
        self,
        room: Room,
        expected_version: int,
        event: dict[str, Any],
        snapshot: dict[str, Any],
        job: Job | None,
        ai_games_limit: int = bus.AI_GAMES_LIMIT,
        deadline: int | None = None,
        present: int | None = None,
        ai_games_grace_ms: int = bus.AI_GAMES_GRACE_MS,
    ) -> Presence:
        """Write ``room`` if it is still at ``expected_version``; else StaleVersion. One
        round trip.

        ``snapshot`` (the new ``state``) is published with who is there, read in the same
        atomic step: its seats' ``connected``/``gone_ms`` and ``spectators`` are set there
        (and in ``snapshot``, to match); the seat ``present`` (a player just seated) shows
        connected. Returns that presence.

        ``deadline``: when the room's clock next needs the sweeper (server-clock ms), kept
        in ``deadlines`` in the same atomic step (None takes the room off it).

        A new room with an AI seat is refused (RoomError ``rate/ai_games``, naming the
        games that count) while its owner plays ``ai_games_limit`` AI games (their human
        connected, or gone less than ``ai_games_grace_ms``: shared/bus/scripts/
        ai_games_lib.lua); a job that does not fit in the fair queue
        refuses the whole change (RoomError ``server/busy``). Refused means unwritten.

        The accounts a change seats (:func:`seated_players`) are noted in the per-player
        index of rooms (:class:`~kibitz.shared.bus.playing.PlayerRooms`) once it is
        written (a refused change notes nothing; a failed note is logged, the change
        stands: the index only feeds profiles).
        """
        plan = room_commit(
            room, expected_version, event, snapshot, job, ai_games_limit, deadline, present,
            ai_games_grace_ms,
        )  # fmt: skip
        try:
            presence = _presence(await self.commit_plan(plan))
        except bus.AiGamesLimit as exc:
            raise ai_games_refusal(room.owner or "", exc, ai_games_grace_ms) from None
        except bus.QueueFull:
            raise RoomError("server/busy", "the AI queue is full; try again in a moment") from None
        await self._note_seated(room, seated_players(room, expected_version, present))
        if self.after_commit is not None:
            try:
                await self.after_commit(room, expected_version, event, snapshot)
            except Exception:  # the commit is written: whatever follows it cannot undo it
                log.exception("after the commit of room %s", room.id)
        return presence

    async def _note_seated(self, room: Room, players: list[str]) -> None:
        if not players:
            return
        try:
            await self.playing.seated(room.id, players, room.updated_ms)
        except (BusError, OSError) as exc:
            log.warning("could not note the players of room %s: %s", room.id, exc)

    async def publish_presence(
        self, room: Room, snapshot: dict[str, Any], leaving: int | None = None
    ) -> Presence | None:
        """Fan out ``snapshot`` (of ``room``, same version) with who is there now (see
        :meth:`kibitz.shared.bus.store.RoomStore.publish_snapshot`)."""
        counts = await self.publish_snapshot(
            room.id, room.version, seat_flags(room), snapshot, leaving
        )
        return None if counts is None else _presence(counts)

    async def presence(self, room_id: str) -> tuple[bool, bool]:
        """Whether each seat's player is connected to a live node."""
        return (await self.presence_counts(room_id)).connected

    async def presence_info(
        self, room_id: str, humans: tuple[bool, bool] = (False, False)
    ) -> Presence:
        """Who is there across the cluster (see ``presence_counts``)."""
        return _presence(await self.presence_counts(room_id, humans))
