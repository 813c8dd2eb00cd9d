"""The room state machine as plain functions: no Redis, no sockets."""

from __future__ import annotations

import pytest

from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import RoomError
from kibitz.shared.protocol.jobs import Budget


def new_game(opponent: str = "human", seat: int = 0):
    room, event, seat = rooms.create_room(
        "room1", "tictactoe", {}, opponent, seat, "ann", "tok-a", now_ms=1
    )
    return room, event, seat


def test_create_and_join_start_the_game() -> None:
    room, event, seat = new_game()
    assert (room.status, room.version, event.kind, seat) == ("waiting", 0, "created", 0)
    joined, event, seat = rooms.join_room(room, None, "bob", "tok-b", now_ms=2)
    assert (joined.status, joined.version, seat, event.kind) == ("playing", 1, 1, "joined")
    assert room.status == "waiting" and room.version == 0  # the input is unchanged
    with pytest.raises(RoomError) as err:
        rooms.join_room(joined, None, "cy", "tok-c", now_ms=3)
    assert err.value.code == "room/full"


def test_moves_are_validated_in_order() -> None:
    room, _, _ = new_game()
    with pytest.raises(RoomError) as err:
        rooms.play_move(room, 0, "5", None, 2)
    assert err.value.code == "room/waiting"
    room, _, _ = rooms.join_room(room, None, None, "tok-b", 2)
    assert rooms.seat_for_token(room, "tok-b") == 1
    with pytest.raises(RoomError) as err:
        rooms.seat_for_token(room, "tok-x")
    assert err.value.code == "auth/token"
    with pytest.raises(RoomError) as err:
        rooms.play_move(room, 1, "5", None, 3)
    assert err.value.code == "move/not_your_turn"
    with pytest.raises(RoomError) as err:
        rooms.play_move(room, 0, "5", 2, 3)  # a version the room has not reached
    assert err.value.code == "message/invalid" and "ahead" in err.value.message
    with pytest.raises(RoomError) as err:
        rooms.play_move(room, 0, "10", None, 3)
    assert err.value.code == "move/invalid" and "'10'" in err.value.message
    after, event, _state = rooms.play_move(room, 0, "5", 1, 3)
    assert (after.version, event.move, after.moves[-1].seat) == (2, "5", 0)
    with pytest.raises(RoomError) as err:
        rooms.play_move(after, 1, "1", 1, 4)  # made before the position changed
    assert err.value.code == "room/stale"
    with pytest.raises(RoomError) as err:
        rooms.play_move(after, 1, "5", None, 4)
    assert err.value.code == "move/illegal"


def test_game_end_and_resign() -> None:
    room, _, _ = new_game()
    room, _, _ = rooms.join_room(room, None, None, "tok-b", 2)
    for seat, move in [(0, "1"), (1, "4"), (0, "2"), (1, "5"), (0, "3")]:
        room, _, _ = rooms.play_move(room, seat, move, None, 3)
    assert room.status == "over" and room.result == {
        "winner": 0,
        "reason": "three in a row",
        "termination": "line",
    }
    with pytest.raises(RoomError) as err:
        rooms.resign(room, 1, 4)
    assert err.value.code == "game/over"
    other, _, _ = new_game()
    other, _, _ = rooms.join_room(other, None, None, "tok-b", 2)
    resigned, event = rooms.resign(other, 0, 3)
    assert (
        resigned.result
        == {
            "winner": 1,
            "reason": "X resigned",
            "termination": "resignation",
        }
        and event.kind == "resign"
    )
    waiting, _, _ = new_game()
    with pytest.raises(RoomError) as err:
        rooms.resign(waiting, 0, 3)  # nobody to lose to: that is an abort
    assert err.value.code == "room/waiting" and "abort" in err.value.message
    aborted, event = rooms.abort(waiting, 0, 3)
    assert aborted.result == {
        "winner": None,
        "reason": "aborted",
        "termination": "abort",
    }
    assert event.kind == "abort"


def test_ai_job_only_when_the_ai_is_to_move() -> None:
    room, _, _ = new_game("ai:5", seat=1)
    assert room.status == "playing"
    state = rooms.replay(room)
    job = rooms.ai_job(room, state, Budget(depth=3))
    assert job is not None and (job.job_id, job.level, job.moves) == ("room1:0", 5, [])
    room, _, _ = new_game("ai:5", seat=0)
    assert rooms.ai_job(room, rooms.replay(room), Budget(depth=3)) is None


def test_snapshot_hides_tokens_and_round_trips() -> None:
    room, _, _ = new_game()
    snap = rooms.snapshot(room, rooms.replay(room))
    assert "tok-a" not in str(snap) and rooms.hash_token("tok-a") not in str(snap)
    assert rooms.Room.from_json_dict(room.to_json_dict()) == room


def test_shared_is_sans_io(repo_root) -> None:
    """The core of shared/ (rules, search, protocol) does no I/O; shared/bus/, the Redis
    boundary, is the one part of shared/ that does (and is checked by its own contracts)."""
    banned = ("asyncio", "aiohttp", "redis", "websockets", "socket")
    bus = repo_root / "shared" / "bus"
    core = [p for p in (repo_root / "shared").rglob("*.py") if bus not in p.parents]
    assert len(core) > 20  # the scan sees the core
    for path in core:
        for line in path.read_text().splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("import", "from"):
                top = words[1].split(".")[0]
                assert top not in banned, f"{path} imports {top}"


def test_a_guest_room_is_stored_without_account_fields_and_rated_seats_keep_theirs() -> None:
    """The stored room (encoded at every commit) carries a seat's account fields only where
    the seat has them; both kinds read back equal."""
    guest, _, _ = rooms.create_room("g1", "tictactoe", {}, "ai:3", 0, "ann", "tok", 1)
    stored = guest.to_json_dict()
    assert all(
        set(seat) & {"account", "account_id", "rating", "bot"} == set() for seat in stored["seats"]
    )
    assert rooms.Room.from_json_dict(stored) == guest
    holder = rooms.SeatAccount(7, "ann", "p" * 32, rating=1612, provisional=True)
    rated, _, _ = rooms.create_room(
        "g2", "tictactoe", {}, "ai:3", 0, None, "tok", 1, rated=True, holder=holder, ai_rating=900
    )
    stored = rated.to_json_dict()
    assert [seat.get("rating") for seat in stored["seats"]] == [1612, 900]
    assert stored["seats"][0]["account_id"] == 7 and stored["seats"][1]["bot"] is True
    assert rooms.Room.from_json_dict(stored) == rated
