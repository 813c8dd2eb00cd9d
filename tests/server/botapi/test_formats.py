"""kibitz's rooms in lichess's shapes (server/botapi/formats.py), for all seven games:
rooms made and played by the pure room logic, read back as lichess clients read them."""

from __future__ import annotations

from typing import Any

import pytest

from kibitz.server.botapi import formats
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Presence, Room
from kibitz.shared.games import GAME_MODULES, find_game

GAMES = sorted(GAME_MODULES)
CHESS = next(name for name in GAMES if find_game(name).policy.lichess_variant == "standard")
TICTACTOE = next(name for name in GAMES if find_game(name).title == "Tic-tac-toe")
NOW = 1_764_117_000_000


def playing(game: str, position: str | None = None, clock: dict[str, int] | None = None) -> Room:
    """A room of ``game`` with two guests seated, playing."""
    room, _, _ = rooms.create_room(
        "abcdefghij", game, {}, "human", 0, "ann", "t0", NOW, position=position, clock=clock
    )
    room, _, _ = rooms.join_room(room, None, "bob", "t1", NOW)
    return room


def play(room: Room, *moves: str) -> Room:
    for text in moves:
        state = rooms.replay(room)
        seat = find_game(room.game).to_move(state)
        room, _, _ = rooms.play_move(room, seat, text, room.version, NOW, state)
    return room


def snapshot(room: Room, presence: Presence | None = None) -> dict[str, Any]:
    return rooms.snapshot(room, rooms.replay(room), presence or Presence((True, True)), None, NOW)


@pytest.mark.parametrize("game", GAMES)
def test_every_game_is_a_variant(game: str) -> None:
    variant = formats.variant_json(game)
    assert formats.game_of_variant(variant["key"]) == game
    assert formats.game_of_variant(game) == game  # our own name too ("chess" included)
    if game == CHESS:
        assert variant == {"key": "standard", "name": "Standard", "short": "Std"}
    else:
        assert variant["key"] == game and variant["name"] == find_game(game).title


def test_an_unknown_variant_is_a_clear_error() -> None:
    with pytest.raises(formats.UnknownVariant, match="crazyhouse.*standard"):
        formats.game_of_variant("crazyhouse")


@pytest.mark.parametrize("game", GAMES)
def test_a_game_full_then_its_states(game: str) -> None:
    room = playing(game)
    first = snapshot(room)["legal_moves"][0]
    room = play(room, first)
    reply = snapshot(room)["legal_moves"][0]
    room = play(room, reply)
    full = formats.game_full(room, snapshot(room))
    assert full["type"] == "gameFull" and full["id"] == room.id
    assert full["variant"] == formats.variant_json(game)
    assert full["initialFen"] == ("startpos" if game == CHESS else room.start)
    assert full["white"] == {"name": "ann"} and full["black"] == {"name": "bob"}
    assert full["clock"] is None and full["speed"] == "correspondence"
    state = full["state"]
    assert state["moves"] == f"{first} {reply}"
    assert state["status"] == "started" and "winner" not in state
    assert state["wtime"] == state["btime"] == formats.UNTIMED_MS
    assert not any(state[k] for k in ("wdraw", "bdraw", "wtakeback", "btakeback"))


def test_a_chess_game_from_a_position_keeps_its_fen() -> None:
    fen = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"
    room = play(playing(CHESS, position=fen), "e2e4")
    assert formats.initial_fen(room) == fen
    assert formats.current_fen(CHESS, snapshot(room)["position"]).startswith("4k3/8/8/8/4P3/")


def test_castling_and_promotion_are_lichess_uci() -> None:
    fen = "r3k3/7P/8/8/8/8/8/4K2R w Kq - 0 1"
    room = play(playing(CHESS, position=fen), "e1g1", "e8c8", "h7h8q")
    assert formats.moves_text(snapshot(room)) == "e1g1 e8c8 h7h8q"


def test_wins_by_the_rules() -> None:
    mated = play(playing(CHESS), "f2f3", "e7e5", "g2g4", "d8h4")
    assert formats.status_of(mated) == (30, "mate")
    assert formats.game_state(snapshot(mated))["winner"] == "black"
    line = play(playing(TICTACTOE), "1", "4", "2", "5", "3")
    assert formats.status_of(snapshot(line)) == (60, "variantEnd")
    assert formats.winner_of(line) == "white"


@pytest.mark.parametrize(
    ("game", "termination", "reason", "winner", "expected"),
    [
        (CHESS, "checkmate", "checkmate", 0, "mate"),
        (CHESS, "stalemate", "stalemate", None, "stalemate"),
        (CHESS, "repetition", "threefold repetition", None, "draw"),
        (CHESS, "rule", "fifty-move rule", None, "draw"),
        (CHESS, "move-limit", "2000 moves played", None, "draw"),
        ("draughts", "no-moves", "no moves", 1, "variantEnd"),
        ("othello", "score", "equal discs", None, "variantEnd"),
        ("oware", "repetition", "threefold repetition (24-24)", None, "variantEnd"),
        ("matches", "last-match", "took the last match", 1, "variantEnd"),
        ("kono", "rule", "100 plies", None, "variantEnd"),
        ("kono", "resignation", "Black resigned", 1, "resign"),
        (CHESS, "time", "White ran out of time", 1, "outoftime"),
        ("oware", "agreement", "draw agreed", None, "draw"),
        (CHESS, "claim", "Black left the game", 0, "timeout"),
        ("draughts", "abandon", "abandoned", None, "timeout"),
        (CHESS, "abort", "aborted", None, "aborted"),
        (CHESS, "abort", "aborted: White did not move in time", None, "noStart"),
        ("tictactoe", None, "an old record", None, "unknownFinish"),
    ],
)
def test_every_ending_has_a_lichess_status(
    game: str, termination: str | None, reason: str, winner: int | None, expected: str
) -> None:
    result: dict[str, Any] = {"winner": winner, "reason": reason}
    if termination is not None:
        result["termination"] = termination
    over = {"game": game, "status": "over", "result": result}
    assert formats.status_of(over) == (formats.STATUS_IDS[expected], expected)
    assert formats.winner_of(over) == (None if winner is None else ("white", "black")[winner])


def test_waiting_and_playing() -> None:
    assert formats.status_for(CHESS, "waiting", None) == (10, "created")
    assert formats.status_for(CHESS, "playing", None) == (20, "started")


def test_clocks_and_time_controls() -> None:
    blitz = {"initial_ms": 180_000, "increment_ms": 2000}
    assert formats.time_control_json(blitz) == {
        "type": "clock",
        "limit": 180,
        "increment": 2,
        "show": "3+2",
    }
    assert formats.time_control_json({"initial_ms": 30_000})["show"] == "½+0"
    assert formats.time_control_json({"initial_ms": 90_000})["show"] == "1.5+0"
    assert formats.time_control_json({"days_per_move": 3}) == {
        "type": "correspondence",
        "daysPerTurn": 3,
    }
    assert formats.time_control_json(None) == {"type": "unlimited"}
    assert formats.speed_of_clock(CHESS, blitz) == "blitz"
    assert formats.speed_of_clock("othello", blitz) == "timed"
    assert formats.perf_json(CHESS, blitz) == {"name": "Blitz"}
    room = play(playing(CHESS, clock=blitz), "e2e4", "e7e5")
    snap = snapshot(room)
    full = formats.game_full(room, snap)
    assert full["clock"] == {"initial": 180_000, "increment": 2000}
    assert full["speed"] == "blitz"
    snap["clock"].update(remaining_ms=[170_000, 175_000], running=0, at=NOW)
    assert formats.times_ms(snap, NOW + 4000) == (166_000, 175_000)
    state = formats.game_state(snap, NOW)
    assert (state["wtime"], state["btime"], state["winc"], state["binc"]) == (
        170_000,
        175_000,
        2000,
        2000,
    )
    days = play(playing("draughts", clock={"days_per_move": 2}), "31-26")
    assert formats.game_full(days, snapshot(days))["daysPerTurn"] == 2


def test_offers_show_by_colour() -> None:
    snap = snapshot(play(playing(CHESS), "e2e4"))
    snap["offers"] = {"draw": 1, "takeback": 0, "rematch": None}
    state = formats.game_state(snap)
    assert (state["wdraw"], state["bdraw"], state["wtakeback"], state["btakeback"]) == (
        False,
        True,
        True,
        False,
    )


def test_players_as_lichess_shows_them() -> None:
    account = {"kind": "human", "taken": True, "name": "Ann", "account": "Ann", "bot": False}
    assert formats.light_user({**account, "rating": 1623}) == {
        "id": "ann",
        "name": "Ann",
        "rating": 1623,
    }
    bot = {**account, "account": "Deep", "bot": True, "rating": 1500, "provisional": True}
    assert formats.light_user(bot) == {
        "id": "deep",
        "name": "Deep",
        "title": "BOT",
        "rating": 1500,
        "provisional": True,
    }
    assert formats.light_user({"kind": "ai", "level": 5, "taken": True}) == {"aiLevel": 5}
    assert formats.light_user({"kind": "human", "taken": True, "name": "guest"}) == {
        "name": "guest"
    }
    assert formats.light_user({"kind": "human", "taken": False, "name": None}) == {}


def test_the_opponent_gone_and_back() -> None:
    room = play(playing(CHESS), "e2e4")
    gone = snapshot(room, Presence((True, False), (None, NOW - 10_000)))
    assert formats.opponent_gone(gone, 0, NOW) == {
        "type": "opponentGone",
        "gone": True,
        "claimWinInSeconds": 110,  # untimed: 120 s after going
    }
    assert formats.opponent_gone(snapshot(room), 0, NOW) == {"type": "opponentGone", "gone": False}
    over = rooms.resign(room, 1, NOW)[0]
    assert formats.opponent_gone(snapshot(over), 0, NOW) is None


def test_chat_lines() -> None:
    message = {
        "type": "chat",
        "room": "abcdefghij",
        "channel": "players",
        "messages": [
            {"id": 1, "seat": 0, "name": "White", "account": "Ann", "text": "hi", "at": NOW},
            {"id": 2, "seat": 1, "name": "bob", "text": "hello", "at": NOW},
        ],
    }
    assert formats.chat_lines(message) == [
        {"type": "chatLine", "room": "player", "username": "Ann", "text": "hi"},
        {"type": "chatLine", "room": "player", "username": "bob", "text": "hello"},
    ]
    spectators = {**message, "channel": "spectators"}
    assert formats.chat_lines(spectators)[0]["room"] == "spectator"
