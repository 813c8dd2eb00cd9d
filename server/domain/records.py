"""The one JSON shape of a finished (or live) game: what the archive stores and the HTTP
API serves. Pure: a room record and its event stream in, a plain dict out.

```
{"id", "game", "options", "start",                      # start: start position text
 "players": [{"seat", "name", "kind", "level", "player", "engine",
              "account", "rating", "provisional", "bot"}, ...],  # one per seat; see below
 "time_control": None | {"initial_ms", "increment_ms"} | {"days_per_move"},
 "rated": true,                                       # a rated game's only
 "moves": [{"move", "display", "seat", "at_ms", "clocks_ms": [a, b] | None,
            "pv": [...]}, ...],                       # pv: see below
 "result": {"winner": 0 | 1 | None, "reason": str, "termination": str} | None,
 "status": "waiting" | "playing" | "over",
 "started_ms", "ended_ms" (None until over),
 "chat": [{"channel": "players" | "spectators", "id", "seat", "name", "text", "at"}, ...]}
```

``result.termination``: why the game ended, one code of
:data:`kibitz.shared.games.TERMINATIONS` (``reason`` says it in words); absent in records
archived before it was kept (those rows are read as they are, never rewritten).

``chat``: both channels' kept lines (the last 100 of each), in the order they were said,
as :func:`kibitz.server.services.chat.record_chat` reads them; the spectators' channel is public to
the game's audience, so the record has it too.

``players[].engine``: on an AI seat, what played its last move (``"kibitz"``, our
searcher, or a UCI engine's name), as the room's ``seats[].engine``; None on human seats,
before the AI's first move, and in records archived before it was kept.

``players[].account``, ``rating``, ``provisional``, ``bot``: only on the seat of a
signed-in player (its account's name, its rating in the game and speed when the seat was
taken, whether that was provisional, whether the account is a bot) and on the AI's seat
of a rated game (no account, the level's fixed rating, ``bot`` true); a guest's seat has
none of them. ``rated``: true in a rated game's record, absent in a casual one. (The
archive adds a rated game's rating changes, ``ratings``: server/ratings/.)

``moves[].pv``: on an AI's move, the line it expected (its move first, as move texts),
present only once the game is over (while it runs the line is a hint to the player).

Times come from the room's event stream (each version's ``at``). The stream is capped
(``store.EVENTS_KEPT``), so an event it no longer holds falls back to the room's own
times: ``updated_ms`` for a move, ``created_ms`` for the start.
"""

from __future__ import annotations

from typing import Any

from kibitz.server.domain.clocks import control_of
from kibitz.server.domain.room import Room, Seat, seat_rating


def record_of(
    room: Room, events: list[dict[str, Any]], chat: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The game record of ``room``; ``events`` as ``RoomStore.events_since(id, -1)``
    returns them (oldest first, each with ``kind`` and ``at``), ``chat`` as
    ``chat.record_chat`` does (None: no lines)."""
    move_events = moves_standing(events)
    move_times = [int(e["at"]) for e in move_events]
    # Each seat's time left after the move, in timed games (the move event carries it).
    move_clocks = [e.get("clocks_ms") for e in move_events]
    # An AI's line with its move: a hint while the game runs, so only once it is over.
    over = room.status == "over"
    move_lines = [e.get("pv") if over else None for e in move_events]
    # The n-th move event is the n-th move; a stream trimmed at the front lost the first.
    missing = len(room.moves) - len(move_times)
    move_times = [room.updated_ms] * max(0, missing) + move_times[max(0, -missing) :]
    move_clocks = [None] * max(0, missing) + move_clocks[max(0, -missing) :]
    move_lines = [None] * max(0, missing) + move_lines[max(0, -missing) :]
    joins = [int(e["at"]) for e in events if e.get("kind") == "joined"]
    ended_ms: int | None = None
    if room.status == "over":
        last = [int(e["at"]) for e in events if e.get("version") == room.version]
        ended_ms = last[0] if last else room.updated_ms
    return {
        "id": room.id,
        "game": room.game,
        "options": dict(room.options),
        "start": room.start,
        "players": [player_of(index, seat) for index, seat in enumerate(room.seats)],
        "time_control": control_of(getattr(room, "clock", None)),
        **({"rated": True} if room.rated else {}),
        "moves": [
            {
                "move": m.move,
                "display": m.display,
                "seat": m.seat,
                "at_ms": at,
                "clocks_ms": list(clocks) if isinstance(clocks, list) else None,
                **({"pv": list(line)} if isinstance(line, list) and line else {}),
            }
            for m, at, clocks, line in zip(
                room.moves, move_times, move_clocks, move_lines, strict=True
            )
        ],
        "result": dict(room.result) if room.result is not None else None,
        "status": room.status,
        # The game starts when its last seat is taken: at the join, or at creation
        # (a game against the AI, or a room over before anybody joined).
        "started_ms": joins[-1] if joins else room.created_ms,
        "ended_ms": ended_ms,
        "chat": [dict(line) for line in chat or []],
    }


def player_of(index: int, seat: Seat) -> dict[str, Any]:
    """One seat's entry in ``players``: with the account and rating fields when the seat
    has them (a signed-in player's, or the AI's of a rated game)."""
    entry = {
        "seat": index,
        "name": seat.name,
        "kind": seat.kind,
        "level": seat.level,
        "player": seat.player,
        "engine": seat.engine,
    }
    rating = seat_rating(seat)
    return entry if rating is None else {**entry, **rating.to_dict()}


def moves_standing(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The move events of the moves still on the board: a takeback event removes the
    move events of the plies it took back (``undone``)."""
    standing: list[dict[str, Any]] = []
    for event in events:
        if event.get("kind") == "move":
            standing.append(event)
        elif event.get("kind") == "takeback":
            del standing[len(standing) - min(len(standing), int(event.get("undone", 0))) :]
    return standing
