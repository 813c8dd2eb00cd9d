"""Server to client: each message class writes the dict the server has always sent, key
order included (the order is part of the JSON bytes every client receives)."""

from __future__ import annotations

from typing import Any

import pytest

from kibitz.shared import fastjson
from kibitz.shared.protocol import client_out as out
from kibitz.shared.protocol.codec import MAX_FRAME_BYTES, PROTOCOL_VERSION, encode_bytes

SEAT: dict[str, Any] = {
    "seat": 0, "kind": "human", "level": None, "name": "ann", "player": None, "taken": True,
    "engine": None, "connected": True, "gone_ms": None,
}  # fmt: skip
SEAT_VIEW = out.SeatView(0, "human", None, "ann", None, True, None, True, None)
STATE_FIELDS: dict[str, Any] = {
    "room": "r1", "version": 3, "game": "tictactoe", "options": {}, "status": "playing",
    "players": ["X", "O"], "position": "x........", "to_move": 1, "legal_moves": ["2", "3"],
    "moves": [{"move": "1", "display": "1", "seat": 0}],
    "last_move": {"move": "1", "display": "1", "seat": 0}, "result": None,
    "view": {"cells": "x........"}, "clock": None,
    "offers": {"draw": None, "takeback": None, "rematch": None}, "next_room": None,
    "previous_room": None, "spectators": 2, "claim_after_ms": 60000,
}  # fmt: skip
#: The ``state`` message as room.snapshot wrote it as a dict literal, in its order.
STATE: dict[str, Any] = {
    "type": "state", "room": "r1", "version": 3, "game": "tictactoe", "options": {},
    "status": "playing", "players": ["X", "O"], "seats": [SEAT, SEAT],
    "position": "x........", "to_move": 1, "legal_moves": ["2", "3"],
    "moves": [{"move": "1", "display": "1", "seat": 0}],
    "last_move": {"move": "1", "display": "1", "seat": 0}, "result": None,
    "view": {"cells": "x........"}, "clock": None,
    "offers": {"draw": None, "takeback": None, "rematch": None}, "next_room": None,
    "previous_room": None, "spectators": 2, "claim_after_ms": 60000,
}  # fmt: skip
LOBBY_SEEK = {"id": "s1", "game": "chess", "seat": "random"}
LOBBY_GAME = {"room": "r1", "game": "chess", "version": 2}
CHAT_LINE = {"id": 1, "at": 5, "from": "ann", "text": "hi"}

#: (message object, the literal the server sent before the classes), by name.
CASES: dict[str, tuple[Any, dict[str, Any]]] = {
    "welcome": (
        out.Welcome("n1"),
        {
            "type": "welcome", "protocol": PROTOCOL_VERSION, "node": "n1",
            "max_frame": MAX_FRAME_BYTES,
        },
    ),
    "error": (
        out.Error("room/unknown", "no room"),
        {"type": "error", "code": "room/unknown", "message": "no room"},
    ),
    "error+rid": (
        out.Error("room/unknown", "no room", 7),
        {"type": "error", "code": "room/unknown", "message": "no room", "rid": 7},
    ),
    "left": (out.Left("r1"), {"type": "left", "room": "r1"}),
    "left+rid": (out.Left("r1", "a"), {"type": "left", "room": "r1", "rid": "a"}),
    "seat": (out.Seat("r1", 1, "tok"), {"type": "seat", "room": "r1", "seat": 1, "token": "tok"}),
    "seat+rid": (
        out.Seat("r1", 0, "tok", 3),
        {"type": "seat", "room": "r1", "seat": 0, "token": "tok", "rid": 3},
    ),
    "seat+seek": (  # the creator of an accepted seek: {**seat_message(...), "seek": id}
        out.Seat("r1", 0, "tok", seek="s1"),
        {"type": "seat", "room": "r1", "seat": 0, "token": "tok", "seek": "s1"},
    ),
    "thinking": (
        out.Thinking("r1", 4, 1, 6, 0.25, ["e2e4", "e7e5"], 1234, 56),
        {
            "type": "thinking", "room": "r1", "version": 4, "seat": 1, "depth": 6,
            "score": 0.25, "pv": ["e2e4", "e7e5"], "nodes": 1234, "time_ms": 56,
        },
    ),
    "pong": (out.Pong(), {"type": "pong", "rid": None}),
    "pong+at": (out.Pong(9, 1700), {"type": "pong", "rid": 9, "at": 1700}),
    "state": (out.State(**STATE_FIELDS, seats=[SEAT_VIEW, SEAT_VIEW]), STATE),
    "state+event": (
        out.State(**STATE_FIELDS, seats=[SEAT_VIEW, SEAT_VIEW], event={"kind": "resync"}),
        {**STATE, "event": {"kind": "resync"}},
    ),
    "chat": (
        out.ChatLines("r1", "players", [CHAT_LINE]),
        {"type": "chat", "room": "r1", "channel": "players", "messages": [CHAT_LINE]},
    ),
    "chat+replay": (  # a chat message with "replay": True
        out.ChatLines("r1", "spectators", [CHAT_LINE], replay=True),
        {
            "type": "chat", "room": "r1", "channel": "spectators", "messages": [CHAT_LINE],
            "replay": True,
        },
    ),
    "lobby": (
        out.LobbyList([LOBBY_SEEK], [LOBBY_GAME]),
        {"type": "lobby", "seeks": [LOBBY_SEEK], "games": [LOBBY_GAME]},
    ),
    "lobby+rid": (
        out.LobbyList([], [], 2),
        {"type": "lobby", "seeks": [], "games": [], "rid": 2},
    ),
    "lobby-left": (out.LobbyLeft(), {"type": "lobby", "subscribed": False}),
    "lobby-left+rid": (out.LobbyLeft("x"), {"type": "lobby", "subscribed": False, "rid": "x"}),
    "seek": (out.SeekPosted(LOBBY_SEEK), {"type": "seek", "seek": LOBBY_SEEK}),
    "seek+rid": (out.SeekPosted(LOBBY_SEEK, 1), {"type": "seek", "seek": LOBBY_SEEK, "rid": 1}),
    "unseek": (out.SeekWithdrawn("s1"), {"type": "unseek", "seek": "s1"}),
    "unseek+rid": (out.SeekWithdrawn("s1", 5), {"type": "unseek", "seek": "s1", "rid": 5}),
    "pool_joined": (
        out.PoolJoined("chess", {"initial_ms": 60000, "increment_ms": 0}, True, 1612, 3, 4),
        {"type": "pool_joined", "game": "chess", "clock": {"initial_ms": 60000,
         "increment_ms": 0}, "rated": True, "rating": 1612, "waiting": 3, "rid": 4},
    ),
    "pool_left": (out.PoolLeft(7), {"type": "pool_left", "rid": 7}),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_each_message_writes_the_bytes_sent_before(name: str) -> None:
    message, literal = CASES[name]
    written = message.to_dict()
    assert list(written.items()) == list(literal.items())  # the keys in the same order
    for codec in ("json", "msgpack"):
        assert encode_bytes(written, codec) == encode_bytes(literal, codec)


def test_every_message_class_is_covered() -> None:
    covered = {type(message) for message, _ in CASES.values()}
    assert covered == set(out.ServerMessage.__args__)  # type: ignore[attr-defined]


def test_the_fast_state_encoder_writes_what_the_object_writes() -> None:
    fast = out.State.message(**STATE_FIELDS, seats=[SEAT_VIEW.to_dict(), SEAT.copy()])
    assert fastjson.dumps(fast) == fastjson.dumps(STATE)
    assert out.SeatView.message(**SEAT) == SEAT_VIEW.to_dict()


def test_the_snapshot_is_built_by_the_state_class() -> None:
    """room.snapshot writes its dict through State.message: same keys, same order."""
    from kibitz.server.domain import room as rooms

    room, _, _ = rooms.create_room("r1", "tictactoe", {}, "human", 0, "ann", "tok", now_ms=1)
    snap = rooms.snapshot(room, rooms.replay(room))
    assert list(snap) == list(STATE)
    assert [list(seat) for seat in snap["seats"]] == [list(SEAT), list(SEAT)]
