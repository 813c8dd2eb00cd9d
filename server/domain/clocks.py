"""Game clocks: pure arithmetic on a room's clock record, no I/O.

A room's ``clock`` is None (untimed) or a plain dict kept in the room record::

    {"initial_ms": N, "increment_ms": M}      # Fischer, or
    {"days_per_move": D}                       # correspondence
    # plus the running state:
    "remaining_ms": [a, b]     # each seat's time, as of "started_ms" for the running seat
    "running": seat | None     # the seat whose time is running down
    "turn": seat | None        # the seat whose turn started at "started_ms"
    "started_ms": ms | None    # when that turn started (server clock)
    "first_move_by": ms | None # the side to move must make its first move by then
    "moved": [bool, bool]      # whether each seat has made its first move
    "lag_bank_ms": [x, y]      # what is left of each seat's lag-compensation quota

Rules (docs/protocol.md, "Clocks"):

- A seat's clock does not run for its first move; that move must come within
  ``FIRST_MOVE_MS`` (30 s; correspondence: the days per move) of the turn's start, or the
  game is aborted. Once a seat has moved, its time runs whenever it is to move.
- Fischer: a move costs the time since the turn started, less the lag credit; then the
  increment is added. Correspondence: each move has ``days_per_move`` days; the time
  left resets after every move.
- Lag credit: ``min(lag estimate, LAG_CREDIT_MAX_MS, bank)``, never more than the move
  took; the bank starts full (``LAG_BANK_MAX_MS``) and each move refills it by
  ``LAG_BANK_GAIN_MS`` (after the credit is taken), up to ``LAG_BANK_MAX_MS``.
- The flag: a move whose cost exceeds the time left loses on time; with no move, the
  flag falls at ``started + remaining + grace`` where grace is the most credit the move
  could still have got (``min(LAG_CREDIT_MAX_MS, bank)``), so the automatic flag never
  beats a move that would have been accepted.
- The loser's opponent who cannot win (chess: insufficient material) draws instead.

Every function returns a new dict and never changes its input.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

FIRST_MOVE_MS = 30_000
DAY_MS = 86_400_000
LAG_CREDIT_MAX_MS = 500  # most lag credited for one move
LAG_BANK_MAX_MS = 1_500  # the quota: most credit available at once (also its start)
LAG_BANK_GAIN_MS = 250  # refilled after every move
#: AI time management: the think time of one move is the usable time over this many
#: moves (plus most of the increment), capped by the level's budget.
AI_MOVES_TO_GO = 30
AI_RESERVE_MS = 300  # kept back for queueing and the trip through Redis
AI_FIRST_MOVE_MS = 3_000  # most think time for an AI's (untimed) first move

Clock = dict[str, Any]
Due = Literal["flag", "abort"]


def new_clock(
    control: dict[str, int] | None, first_move_limit_ms: int = FIRST_MOVE_MS
) -> Clock | None:
    """The clock of a new room with time control ``control`` (None: untimed);
    ``first_move_limit_ms``: how long each side has for its first move (Fischer)."""
    if control is None:
        return None
    if "days_per_move" in control:
        each = int(control["days_per_move"]) * DAY_MS
        base: Clock = {"days_per_move": int(control["days_per_move"])}
    else:
        each = int(control["initial_ms"])
        base = {"initial_ms": each, "increment_ms": int(control.get("increment_ms", 0))}
    return {
        **base,
        "remaining_ms": [each, each],
        "running": None,
        "turn": None,
        "started_ms": None,
        "first_move_by": None,
        "moved": [False, False],
        "lag_bank_ms": [LAG_BANK_MAX_MS, LAG_BANK_MAX_MS],
        "first_move_ms": first_move_limit_ms,
    }


def control_of(clock: Clock | None) -> dict[str, int] | None:
    """Just the time control (what a rematch or the archive keeps)."""
    if clock is None:
        return None
    if "days_per_move" in clock:
        return {"days_per_move": int(clock["days_per_move"])}
    return {"initial_ms": int(clock["initial_ms"]), "increment_ms": int(clock["increment_ms"])}


def is_correspondence(clock: Clock) -> bool:
    return "days_per_move" in clock


def first_move_ms(clock: Clock) -> int:
    """How long a seat has for its first move before the game is aborted."""
    if is_correspondence(clock):
        return int(clock["days_per_move"]) * DAY_MS
    return int(clock.get("first_move_ms", FIRST_MOVE_MS))


def grace_ms(clock: Clock, seat: int) -> int:
    """The most lag credit ``seat``'s next move could get."""
    return max(0, min(LAG_CREDIT_MAX_MS, int(clock["lag_bank_ms"][seat])))


def _stop_running(clock: Clock, now_ms: int) -> None:
    """Charge the running seat for the time since its turn started and stop it (in place
    on a copy)."""
    running = clock["running"]
    if running is not None and clock["started_ms"] is not None:
        spent = max(0, now_ms - int(clock["started_ms"]))
        clock["remaining_ms"][running] = max(0, int(clock["remaining_ms"][running]) - spent)
    clock["running"] = None


def _start_turn(clock: Clock, seat: int, now_ms: int) -> None:
    clock["turn"] = seat
    clock["started_ms"] = now_ms
    if clock["moved"][seat]:
        clock["running"] = seat
        clock["first_move_by"] = None
    else:
        clock["running"] = None
        clock["first_move_by"] = now_ms + first_move_ms(clock)


def settle(
    clock: Clock | None,
    to_move: int,
    status: str,
    now_ms: int,
) -> Clock | None:
    """The clock made consistent with the room after any change: stopped when the game
    is over, the side to move's turn started when it changed (a game that just started,
    a takeback), left alone otherwise."""
    if clock is None or status == "waiting":
        return clock
    out = copy.deepcopy(clock)
    if status == "over":
        _stop_running(out, now_ms)
        out["turn"] = None
        out["started_ms"] = None
        out["first_move_by"] = None
        return out
    if out["turn"] == to_move and out["started_ms"] is not None:
        return clock
    _stop_running(out, now_ms)
    _start_turn(out, to_move, now_ms)
    return out


@dataclass(frozen=True, slots=True)
class Charge:
    """What one move costs its seat."""

    clock: Clock  # after the move (the next turn not started yet: see :func:`settle`)
    used_ms: int  # time taken off (before the increment)
    credit_ms: int  # lag credit given
    late: Due | None  # the move came too late: the seat lost on time, or the game aborts


def charge(clock: Clock, seat: int, now_ms: int, lag_ms: int = 0) -> Charge:
    """Charge ``seat`` for the move it makes at ``now_ms`` (its connection's lag estimate
    ``lag_ms``); ``late`` says the move is refused because the time ran out."""
    out = copy.deepcopy(clock)
    started = int(out["started_ms"] if out["started_ms"] is not None else now_ms)
    elapsed = max(0, now_ms - started)
    bank = int(out["lag_bank_ms"][seat])
    credit = max(0, min(int(lag_ms), LAG_CREDIT_MAX_MS, bank, elapsed))
    used = elapsed - credit
    if not out["moved"][seat]:
        limit = out["first_move_by"]
        if limit is not None and now_ms - credit > int(limit):
            return Charge(clock, used, credit, "abort")
        out["moved"][seat] = True
        used = 0
    else:
        remaining = int(out["remaining_ms"][seat])
        if used > remaining:
            return Charge(clock, used, credit, "flag")
        if is_correspondence(out):
            out["remaining_ms"][seat] = int(out["days_per_move"]) * DAY_MS
        else:
            out["remaining_ms"][seat] = remaining - used + int(out["increment_ms"])
    out["lag_bank_ms"][seat] = min(LAG_BANK_MAX_MS, bank - credit + LAG_BANK_GAIN_MS)
    out["last_credit_ms"] = credit
    out["running"] = None
    out["turn"] = None
    out["started_ms"] = None
    out["first_move_by"] = None
    return Charge(out, used, credit, None)


def deadline(clock: Clock | None, status: str) -> int | None:
    """When the next automatic action (flag fall, first-move abort) is due, if any."""
    if clock is None or status != "playing" or clock["started_ms"] is None:
        return None
    turn = clock["turn"]
    if turn is None:
        return None
    grace = grace_ms(clock, turn)
    if clock["running"] is not None:
        return int(clock["started_ms"]) + int(clock["remaining_ms"][turn]) + grace
    if clock["first_move_by"] is not None:
        return int(clock["first_move_by"]) + grace
    return None


def due(clock: Clock | None, status: str, now_ms: int) -> Due | None:
    """What is due at ``now_ms``: the running seat's flag, a first-move abort, or nothing."""
    when = deadline(clock, status)
    if clock is None or when is None or now_ms < when:
        return None
    return "flag" if clock["running"] is not None else "abort"


def view(clock: Clock | None, now_ms: int) -> dict[str, Any] | None:
    """The ``clock`` field of a ``state``: the time control, each seat's time left at
    ``at`` (= ``now_ms``), the running seat and the first-move deadline."""
    if clock is None:
        return None
    remaining = [int(x) for x in clock["remaining_ms"]]
    running = clock["running"]
    if running is not None and clock["started_ms"] is not None:
        spent = max(0, now_ms - int(clock["started_ms"]))
        remaining[running] = max(0, remaining[running] - spent)
    out: dict[str, Any] = dict(control_of(clock) or {})
    out.update(
        {
            "remaining_ms": remaining,
            "running": running,
            "at": now_ms,
            "first_move_by": clock["first_move_by"],
        }
    )
    return out


def flag_result(
    players: tuple[str, str] | list[str], loser: int, winner_can_win: bool
) -> dict[str, Any]:
    """The result of ``loser``'s flag falling (as :func:`kibitz.server.domain.room.result_of`)."""
    name, other = players[loser], players[1 - loser]
    if winner_can_win:
        return {"winner": 1 - loser, "reason": f"{name} ran out of time", "termination": "time"}
    return {
        "winner": None,
        "reason": f"draw: {name} ran out of time and {other} cannot win",
        "termination": "time",
    }


def first_move_abort_result(players: tuple[str, str] | list[str], late: int) -> dict[str, Any]:
    """The result of a game aborted because ``late`` did not make its first move in time."""
    return {
        "winner": None,
        "reason": f"aborted: {players[late]} did not move in time",
        "termination": "abort",
    }


def ai_think_ms(clock: Clock | None, seat: int, level_ms: int | None) -> int | None:
    """How long an AI seat may think on this turn: from its time left and increment,
    capped by its level's budget (``level_ms``; None: no cap). None when untimed."""
    if clock is None:
        return level_ms
    cap = level_ms if level_ms is not None else AI_FIRST_MOVE_MS
    if not clock["moved"][seat]:
        return max(1, min(cap, AI_FIRST_MOVE_MS))
    if is_correspondence(clock):
        return cap
    remaining = int(clock["remaining_ms"][seat])
    reserve = min(remaining // 5, AI_RESERVE_MS + remaining // 20)
    usable = max(0, remaining - reserve)
    increment = int(clock["increment_ms"])
    think = usable // AI_MOVES_TO_GO + (increment * 3) // 4
    think = min(think, usable // 4 + increment // 2)
    return max(1, min(cap, think))


def turn_started(clock: Clock | None) -> int | None:
    return None if clock is None else clock["started_ms"]
