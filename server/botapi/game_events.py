"""When a commit starts or finishes a game, and the ``gameStart``/``gameFinish`` lines
the accounts seated in it are sent (pure: no I/O).

lichess tells a player's event stream once when each of their games starts and once when
it ends. kibitz decides it from each commit of a room (server/services/room_store.py
calls the hook server/botapi/events.py sets): :func:`game_change` says whether the
commit started the game (a room made full, or a second player joining a waiting one) or
finished it (however it ended); :func:`game_lines` then gives one line per account seat,
each seen from that seat (its colour, its turn, its opponent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from kibitz.server.botapi.formats import (
    colour,
    current_fen,
    light_user,
    speed_of_clock,
    status_json,
    times_ms,
    variant_json,
    winner_of,
)
from kibitz.server.domain.room import Room

GameChange = Literal["gameStart", "gameFinish"]

#: The events that can end a game that was on (server/domain/room.py): a move that
#: mates or fills the board, a flag, an abort (a player's, or a first move not made in
#: time), a resignation, an abandoned game (``over``), an agreed draw, a claim. The
#: events a finished room still takes (rematch offers, answers and the agreed rematch)
#: are not among them, so a game is finished once.
ENDINGS = frozenset({"move", "flag", "abort", "resign", "over", "draw", "claim"})

#: Both doors play every game of ours (lichess's ``compat``).
COMPAT = {"bot": True, "board": True}


def game_change(event_kind: str, room: Room, expected_version: int) -> GameChange | None:
    """What the commit of ``room`` (after event ``event_kind``, written over version
    ``expected_version``; negative for a new room) did to its game:

    - ``gameStart``: the room plays now and did not before: a new room made full at
      once (a seek or pool pairing, an accepted challenge, a rematch, a game against the
      AI), or the second player joining a waiting room;
    - ``gameFinish``: the room is over now, by an event that ends a game (``ENDINGS``),
      and both seats were taken (a waiting room called off never started: no line);
    - None: anything else (a move that does not end it, offers, a rematch agreed...).
    """
    if room.status == "playing" and (expected_version < 0 or event_kind == "joined"):
        return "gameStart"
    if (
        room.status == "over"
        and expected_version >= 0
        and event_kind in ENDINGS
        and all(seat.taken for seat in room.seats)
    ):
        return "gameFinish"
    return None


def account_seats(room: Room) -> list[tuple[int, int]]:
    """(seat, account id) of each seat of ``room`` a signed-in account holds."""
    return [
        (index, seat.account_id)
        for index, seat in enumerate(room.seats)
        if seat.account_id is not None
    ]


def seats_of(room: Room, account_id: int) -> list[int]:
    """The seats of ``room`` that ``account_id`` holds (both, in a casual game against
    itself; none for a spectator)."""
    return [seat for seat, holder in account_seats(room) if holder == account_id]


def opponent_json(seat: Mapping[str, Any]) -> dict[str, Any]:
    """gameStart's ``opponent`` from a snapshot's seat: an account's ``{"id",
    "username", "rating"?}``, the AI's ``{"username", "aiLevel"}``, a guest's
    ``{"username"}``."""
    user = light_user(seat)
    if "aiLevel" in user:
        return {"username": seat.get("name") or "", "aiLevel": user["aiLevel"]}
    opponent: dict[str, Any] = {"username": user.get("name", "")}
    if "id" in user:
        opponent = {"id": user["id"], **opponent}
    if "rating" in user:
        opponent["rating"] = user["rating"]
    return opponent


def game_info(room: Room, snapshot: Mapping[str, Any], seat: int) -> dict[str, Any]:
    """lichess's game object ``G`` of gameStart and gameFinish for the player in
    ``seat`` of ``room``, whose public snapshot (same version) is ``snapshot``.

    ``source`` is ``"ai"`` against the AI and left out otherwise (a room does not keep
    whether a seek, the pool or a challenge made it); ``secondsLeft`` only in a game
    with a clock."""
    gone = room.status == "over"
    seats = snapshot["seats"]
    control = snapshot.get("clock")
    last = room.moves[-1].move if room.moves else ""
    info: dict[str, Any] = {
        "gameId": room.id,
        "fullId": room.id + colour(seat)[0],
        "id": room.id,
        "color": colour(seat),
        "fen": current_fen(room.game, str(snapshot["position"])),
        "hasMoved": any(move.seat == seat for move in room.moves),
        "isMyTurn": not gone and snapshot.get("to_move") == seat,
        "lastMove": last,
        "opponent": opponent_json(seats[1 - seat]),
        "perf": speed_of_clock(room.game, control),
        "rated": room.rated,
    }
    if control is not None:
        info["secondsLeft"] = times_ms(snapshot)[seat] // 1000
    if room.seats[1 - seat].kind == "ai":
        info["source"] = "ai"
    info.update(
        speed=info["perf"],
        status=status_json(snapshot),
        variant=variant_json(room.game),
        compat=dict(COMPAT),
    )
    winner = winner_of(snapshot)
    if winner is not None:
        info["winner"] = winner
    return info


def game_lines(
    change: GameChange, room: Room, snapshot: Mapping[str, Any]
) -> list[tuple[int, dict[str, Any]]]:
    """(account id, line) for each account seat of ``room``: ``{"type": change,
    "game": G}``, G seen from that seat."""
    return [
        (account_id, {"type": change, "game": game_info(room, snapshot, seat)})
        for seat, account_id in account_seats(room)
    ]
