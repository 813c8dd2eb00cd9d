"""Clock arithmetic, time controls on the wire, the can_win hook, lag estimates: no I/O."""

from __future__ import annotations

import pytest

from kibitz.server.domain import clocks
from kibitz.server.domain import room as rooms
from kibitz.server.fanout.lag import LagTracker
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_in import parse_client_message, parse_clock
from kibitz.shared.protocol.codec import ProtocolError

T0 = 1_764_000_000_000


def started(control: dict[str, int], to_move: int = 0, now: int = T0) -> clocks.Clock:
    clock = clocks.settle(clocks.new_clock(control), to_move, "playing", now)
    assert clock is not None
    return clock


# -- the wire -------------------------------------------------------------------------------


def test_parse_clock_accepts_fischer_and_correspondence() -> None:
    assert parse_clock(None) is None
    assert parse_clock({"initial_ms": 60_000}) == {"initial_ms": 60_000, "increment_ms": 0}
    assert parse_clock({"initial_ms": 180_000, "increment_ms": 2_000}) == {
        "initial_ms": 180_000,
        "increment_ms": 2_000,
    }
    assert parse_clock({"days_per_move": 3}) == {"days_per_move": 3}
    msg = parse_client_message(
        {"type": "create", "game": "chess", "clock": {"initial_ms": 60_000, "increment_ms": 0}}
    )
    assert msg.clock == {"initial_ms": 60_000, "increment_ms": 0}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "value",
    [
        {"initial_ms": 999},
        {"initial_ms": 10_800_001},
        {"initial_ms": 60_000, "increment_ms": -1},
        {"initial_ms": 60_000, "increment_ms": 180_001},
        {"initial_ms": 60_000.5},
        {"initial_ms": True},
        {"increment_ms": 2_000},
        {"days_per_move": 0},
        {"days_per_move": 15},
        {"days_per_move": 2, "initial_ms": 60_000},
        {"initial_ms": 60_000, "extra": 1},
        {},
        "3+2",
        [60_000, 0],
    ],
)
def test_parse_clock_refuses_bad_controls(value: object) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message({"type": "create", "game": "chess", "clock": value})
    assert info.value.code == "clock/invalid"


# -- Fischer --------------------------------------------------------------------------------


def test_first_moves_are_untimed_then_time_is_charged_and_increment_added() -> None:
    clock = started({"initial_ms": 60_000, "increment_ms": 2_000})
    assert clock["running"] is None
    assert clock["first_move_by"] == T0 + clocks.FIRST_MOVE_MS
    # White's first move, 10 s later: not charged.
    c = clocks.charge(clock, 0, T0 + 10_000)
    assert c.late is None and c.used_ms == 0
    clock = clocks.settle(c.clock, 1, "playing", T0 + 10_000)
    assert clock is not None and clock["running"] is None and clock["turn"] == 1
    assert clock["first_move_by"] == T0 + 10_000 + clocks.FIRST_MOVE_MS
    # Black's first move: not charged either; now White's clock runs.
    c = clocks.charge(clock, 1, T0 + 12_000)
    clock = clocks.settle(c.clock, 0, "playing", T0 + 12_000)
    assert clock is not None and clock["running"] == 0 and clock["first_move_by"] is None
    assert clock["remaining_ms"] == [60_000, 60_000]
    # White thinks 5 s: 60 - 5 + 2.
    c = clocks.charge(clock, 0, T0 + 17_000)
    assert c.late is None and c.used_ms == 5_000
    assert c.clock["remaining_ms"] == [57_000, 60_000]
    view = clocks.view(clock, T0 + 15_000)
    assert view == {
        "initial_ms": 60_000,
        "increment_ms": 2_000,
        "remaining_ms": [57_000, 60_000],
        "running": 0,
        "at": T0 + 15_000,
        "first_move_by": None,
    }
    assert clock["remaining_ms"] == [60_000, 60_000]  # inputs never change


def both_moved(control: dict[str, int], now: int = T0) -> clocks.Clock:
    clock = started(control, 0, now)
    for seat in (0, 1):
        clock = clocks.settle(clocks.charge(clock, seat, now).clock, 1 - seat, "playing", now)  # type: ignore[assignment]
    assert clock["running"] == 0
    return clock


def test_flag_deadline_and_late_move() -> None:
    clock = both_moved({"initial_ms": 3_000, "increment_ms": 0})
    grace = clocks.grace_ms(clock, 0)
    assert grace == clocks.LAG_CREDIT_MAX_MS
    assert clocks.deadline(clock, "playing") == T0 + 3_000 + grace
    assert clocks.due(clock, "playing", T0 + 3_000 + grace - 1) is None
    assert clocks.due(clock, "playing", T0 + 3_000 + grace) == "flag"
    assert clocks.deadline(clock, "over") is None
    # A move 1 ms within the time is played; 1 ms past it (no lag) loses on time.
    assert clocks.charge(clock, 0, T0 + 3_000).late is None
    assert clocks.charge(clock, 0, T0 + 3_001).late == "flag"
    # With lag, a move that arrives late but was made in time is credited.
    ok = clocks.charge(clock, 0, T0 + 3_200, lag_ms=250)
    assert ok.late is None and ok.credit_ms == 250 and ok.clock["remaining_ms"][0] == 50


def test_first_move_deadline_aborts() -> None:
    clock = started({"initial_ms": 60_000, "increment_ms": 0})
    when = clocks.deadline(clock, "playing")
    assert when == T0 + clocks.FIRST_MOVE_MS + clocks.grace_ms(clock, 0)
    assert clocks.due(clock, "playing", when) == "abort"
    assert clocks.charge(clock, 0, T0 + clocks.FIRST_MOVE_MS + 1).late == "abort"
    assert clocks.charge(clock, 0, T0 + clocks.FIRST_MOVE_MS).late is None
    short = clocks.settle(clocks.new_clock({"initial_ms": 1_000}, 2_000), 0, "playing", T0)
    assert short is not None and short["first_move_by"] == T0 + 2_000


def test_lag_credit_is_bounded_by_cap_bank_and_move_time() -> None:
    clock = both_moved({"initial_ms": 600_000, "increment_ms": 0})
    now = T0
    bank = clocks.LAG_BANK_MAX_MS
    for _ in range(20):
        c = clocks.charge(clock, 0, now + 2_000, lag_ms=5_000)  # a huge claimed lag
        assert c.credit_ms <= clocks.LAG_CREDIT_MAX_MS and c.credit_ms <= bank
        bank = bank - c.credit_ms + clocks.LAG_BANK_GAIN_MS
        bank = min(bank, clocks.LAG_BANK_MAX_MS)
        assert c.clock["lag_bank_ms"][0] == bank
        now += 2_000
        clock = clocks.settle(c.clock, 1, "playing", now)  # type: ignore[assignment]
        c = clocks.charge(clock, 1, now)
        clock = clocks.settle(c.clock, 0, "playing", now)  # type: ignore[assignment]
    # Sustained, the credit is the bank's refill per move.
    assert bank == clocks.LAG_BANK_GAIN_MS
    # Never more than the move took.
    assert clocks.charge(clock, 0, now + 30, lag_ms=400).credit_ms == 30


def test_correspondence_resets_per_move() -> None:
    day = clocks.DAY_MS
    clock = both_moved({"days_per_move": 2})
    assert clocks.deadline(clock, "playing") == T0 + 2 * day + clocks.grace_ms(clock, 0)
    c = clocks.charge(clock, 0, T0 + day)
    assert c.clock["remaining_ms"][0] == 2 * day
    assert clocks.charge(clock, 0, T0 + 2 * day + 1).late == "flag"
    fresh = started({"days_per_move": 2})
    assert fresh["first_move_by"] == T0 + 2 * day


def test_settle_stops_the_clock_at_the_end_and_switches_on_a_takeback() -> None:
    clock = both_moved({"initial_ms": 60_000, "increment_ms": 0})
    over = clocks.settle(clock, 0, "over", T0 + 4_000)
    assert over is not None and over["running"] is None and over["remaining_ms"][0] == 56_000
    assert clocks.deadline(over, "over") is None
    # A takeback makes it Black's turn: White is charged so far, Black's clock starts.
    back = clocks.settle(clock, 1, "playing", T0 + 1_000)
    assert back is not None and back["running"] == 1 and back["remaining_ms"][0] == 59_000
    assert back["started_ms"] == T0 + 1_000


def test_ai_think_time_is_managed() -> None:
    clock = both_moved({"initial_ms": 60_000, "increment_ms": 0})
    think = clocks.ai_think_ms(clock, 0, 2_500)
    assert think is not None and 1_000 < think <= 2_000
    assert clocks.ai_think_ms(clock, 0, 500) == 500  # the level's cap
    # Spending the allotment move after move, plus 30 ms a move for the trip through the
    # queue, lasts a long game (120 moves of one side at 1+0).
    remaining = 60_000
    for _ in range(120):
        clock["remaining_ms"][0] = remaining
        think = clocks.ai_think_ms(clock, 0, 2_500)
        assert think is not None
        remaining -= think + 30
        assert remaining > 0
    assert clocks.ai_think_ms(None, 0, 2_000) == 2_000


# -- rooms and games ------------------------------------------------------------------------


def test_can_win_and_insufficient_material_draw() -> None:
    chess = find_game("chess")
    lone = chess.parse_position("8/8/8/4k3/8/8/8/4K2Q w - - 0 1")
    assert chess.can_win(lone, 0) and not chess.can_win(lone, 1)
    assert find_game("othello").can_win(find_game("othello").initial(), 1)
    assert clocks.flag_result(("White", "Black"), 0, False) == {
        "winner": None,
        "reason": "draw: White ran out of time and Black cannot win",
        "termination": "time",
    }
    assert clocks.flag_result(("White", "Black"), 1, True) == {
        "winner": 0,
        "reason": "Black ran out of time",
        "termination": "time",
    }


def test_room_move_flag_and_expire() -> None:
    room, _event, _seat = rooms.create_room(
        "abcdefgh", "tictactoe", {}, "human", 0, "a", "t0", T0, clock={"initial_ms": 1_000}
    )
    room, _event, _seat = rooms.join_room(room, None, "b", "t1", T0)
    assert room.status == "playing" and room.clock is not None
    room.clock = clocks.settle(room.clock, 0, room.status, T0)
    room, _e, _s = rooms.play_move(room, 0, "1", None, T0, clock_ms=T0 + 100)
    room, _e, _s = rooms.play_move(room, 1, "5", None, T0, clock_ms=T0 + 200)
    assert room.clock is not None and room.clock["running"] == 0
    snap = rooms.snapshot(room, rooms.replay(room), clock_ms=T0 + 700)
    assert snap["clock"]["remaining_ms"] == [500, 1_000] and snap["clock"]["running"] == 0
    with pytest.raises(rooms.RoomError):
        rooms.expire(room, T0 + 1_100, T0)
    grace = clocks.grace_ms(room.clock, 0)
    ended, event = rooms.expire(room, T0 + 1_200 + grace, T0)
    assert event.kind == "flag" and event.seat == 0
    assert ended.result == {"winner": 1, "reason": "X ran out of time", "termination": "time"}
    assert ended.clock is not None and ended.clock["remaining_ms"][0] == 0
    # A move that comes too late ends the game the same way.
    late, event, _ = rooms.play_move(room, 0, "2", None, T0, clock_ms=T0 + 1_300)
    assert event.kind == "flag" and late.status == "over" and len(late.moves) == 2


def test_lag_tracker_median_and_forged_pongs() -> None:
    lag = LagTracker()
    assert lag.estimate_ms == 0
    for i, rtt in enumerate([40, 60, 50, 900, 55]):
        payload = lag.ping_payload(now=100.0 + i)
        assert lag.on_pong(payload, now=100.0 + i + rtt / 1000) == pytest.approx(rtt)
    assert lag.estimate_ms == 55
    assert lag.on_pong(payload, now=200.0) is None  # answered already
    assert lag.on_pong(b"\x00" * 8) is None  # never sent
    assert lag.on_pong(b"junk") is None
