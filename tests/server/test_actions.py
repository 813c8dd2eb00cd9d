"""Player actions and presence: draw and takeback offers, abort, claim, rematch, who is
there. First the pure room decisions, then the same over real WebSockets on a real Redis
(real server processes and workers)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
import redis

from kibitz.client.connection import KibitzClient, ServerError, newer_than
from kibitz.server.domain import room as rooms
from kibitz.server.domain.room import Presence, Room, RoomError
from kibitz.shared.bus import keys
from kibitz.shared.games import find_game

# -- the room decisions, without Redis or sockets ---------------------------------------------


def human_game(moves: Sequence[str] = ()) -> Room:
    """A tic-tac-toe game between two people (ann X, bob O) after ``moves``."""
    room, _, _ = rooms.create_room("room1", "tictactoe", {}, "human", 0, "ann", "tok-a", 1)
    room, _, _ = rooms.join_room(room, 1, "bob", "tok-b", 2)
    for i, move in enumerate(moves):
        room, _, _ = rooms.play_move(room, i % 2, move, None, 3)
    return room


def ai_game(level: int, human_seat: int = 0, game: str = "tictactoe") -> Room:
    room, _, _ = rooms.create_room("room2", game, {}, f"ai:{level}", human_seat, "ann", "t", 1)
    return room


def refused(code: str, call: Any, *args: Any) -> str:
    with pytest.raises(RoomError) as err:
        call(*args)
    assert err.value.code == code, err.value
    return err.value.message


def test_draw_offers_declined_accepted_and_offered_back() -> None:
    room = human_game(["5"])
    offered, event, _ = rooms.answer_offer(room, 0, "draw", "offer", 4)
    assert offered.offers == {"draw": 0} and event == rooms.Event("draw_offer", 0)
    assert offered.version == room.version + 1 and room.offers == {}  # input unchanged
    assert offered.position_version == room.position_version  # not a position change
    refused("offer/not_allowed", rooms.answer_offer, offered, 0, "draw", "offer", 5)
    refused("offer/none", rooms.answer_offer, offered, 0, "draw", "accept", 5)  # your own
    declined, event, _ = rooms.answer_offer(offered, 1, "draw", "decline", 5)
    assert declined.offers == {} and event == rooms.Event("draw_decline", 1)
    refused("offer/none", rooms.answer_offer, declined, 0, "draw", "accept", 6)
    # Declined: no new offer of it until the position changes (no offer spam).
    assert "after the next move" in refused(
        "offer/not_allowed", rooms.answer_offer, declined, 0, "draw", "offer", 6
    )
    moved, _, _ = rooms.play_move(declined, 1, "1", None, 6)
    assert rooms.answer_offer(moved, 0, "draw", "offer", 7)[0].offers == {"draw": 0}
    # Offering what the opponent offered accepts it.
    again, _, _ = rooms.answer_offer(declined, 1, "draw", "offer", 6)
    drawn, event, _ = rooms.answer_offer(again, 0, "draw", "offer", 7)
    assert (drawn.status, drawn.result, event.kind) == (
        "over",
        {"winner": None, "reason": "draw agreed", "termination": "agreement"},
        "draw",
    )
    assert drawn.offers == {}
    refused("offer/not_allowed", rooms.answer_offer, drawn, 0, "draw", "offer", 8)
    refused("offer/not_allowed", rooms.answer_offer, waiting(), 0, "draw", "offer", 8)


def waiting() -> Room:
    return rooms.create_room("room3", "tictactoe", {}, "human", 0, None, "tok", 1)[0]


def test_moves_clear_offers_and_a_pinned_move_survives_offers() -> None:
    room = human_game(["5"])  # O to move, at version 2
    pinned = room.version
    offered, _, _ = rooms.answer_offer(room, 0, "draw", "offer", 4)
    asked, _, _ = rooms.answer_offer(offered, 0, "takeback", "offer", 4)
    assert asked.offers == {"draw": 0, "takeback": 0}
    # O's move was made for the version before the offers: the position is the same.
    moved, _, _ = rooms.play_move(asked, 1, "1", pinned, 5)
    assert moved.offers == {} and moved.position_version == moved.version
    refused("room/stale", rooms.play_move, moved, 0, "2", pinned, 6)
    assert "ahead" in refused("message/invalid", rooms.play_move, moved, 0, "2", 99, 6)


def test_takeback_returns_the_turn_to_the_asker() -> None:
    room = human_game(["5", "1"])  # X to move; X's last move was 5
    refused("offer/not_allowed", rooms.answer_offer, human_game(), 0, "takeback", "offer", 4)
    asked, event, _ = rooms.answer_offer(room, 0, "takeback", "offer", 4)
    assert event.kind == "takeback_offer"
    back, event, state = rooms.answer_offer(asked, 1, "takeback", "accept", 5)
    assert back.moves == [] and event == rooms.Event("takeback", 1, undone=2)
    assert find_game("tictactoe").to_move(state) == 0
    assert back.position_version == back.version and back.status == "playing"
    # O asks right after its own move: one ply.
    asked, _, _ = rooms.answer_offer(room, 1, "takeback", "offer", 4)
    back, event, _ = rooms.answer_offer(asked, 0, "takeback", "offer", 5)  # offered back
    assert [m.move for m in back.moves] == ["5"] and event.undone == 1


def test_the_ai_answers_at_once() -> None:
    for level, accepted in ((2, True), (4, True), (5, False), (6, False)):
        room = ai_game(level)
        room, _, _ = rooms.play_move(room, 0, "5", None, 2)
        room, _, _ = rooms.play_move(room, 1, "1", None, 3)
        after, event, _ = rooms.answer_offer(room, 0, "takeback", "offer", 4)
        if accepted:
            assert after.moves == [] and event == rooms.Event("takeback", 1, undone=2)
        else:
            assert after.moves == room.moves and event == rooms.Event("takeback_decline", 1)
            refused("offer/not_allowed", rooms.answer_offer, after, 0, "takeback", "offer", 5)
        assert after.offers == {}
    # Draws: past the opening, from the AI's last score, within the game's margin.
    room = ai_game(8, game="chess")
    room, _, _ = rooms.play_move(room, 0, "e2e4", None, 2)
    _, event, _ = rooms.answer_offer(room, 0, "draw", "offer", 3)
    assert event.kind == "draw_decline"  # no score yet: it plays on
    room.ai_eval = 0.0
    _, event, _ = rooms.answer_offer(room, 0, "draw", "offer", 3)
    assert event.kind == "draw_decline"  # level, but on move one: it plays on
    opening = find_game("chess").policy.ai_draw_min_plies
    room.moves = room.moves * opening  # only the count matters to the AI's answer
    for score, kind in ((3.0, "draw_decline"), (0.4, "draw"), (-2.0, "draw")):
        room.ai_eval = score
        after, event, _ = rooms.answer_offer(room, 0, "draw", "offer", 3)
        assert event.kind == kind
        assert after.status == ("over" if kind == "draw" else "playing")
    # A rematch is always accepted.
    over, _ = rooms.resign(room, 0, 4)
    after, event, _ = rooms.answer_offer(over, 0, "rematch", "offer", 5)
    assert event.kind == "rematch" and after.next_room == rooms.rematch_id(room.id)


def test_abort_only_before_both_sides_moved() -> None:
    aborted, event = rooms.abort(waiting(), 0, 2)
    assert aborted.result == {
        "winner": None,
        "reason": "aborted",
        "termination": "abort",
    }
    assert event.kind == "abort"
    aborted, _ = rooms.abort(human_game(["5"]), 1, 4)  # only X moved
    assert aborted.status == "over"
    message = refused("abort/too_late", rooms.abort, human_game(["5", "1"]), 0, 4)
    assert "resign" in message
    refused("game/over", rooms.abort, aborted, 0, 5)


def test_claim_after_the_opponent_left() -> None:
    room = human_game(["5"])
    refused("claim/not_allowed", rooms.claim, room, 0, "win", None, 1000, 10_000)
    message = refused("claim/too_early", rooms.claim, room, 0, "win", 9_500, 1000, 10_000)
    assert "in 1 s" in message
    won, event = rooms.claim(room, 0, "win", 9_000, 1000, 10_000)
    assert won.result == {
        "winner": 0,
        "reason": "O left the game",
        "termination": "claim",
    }
    assert event.kind == "claim"
    drawn, _ = rooms.claim(room, 1, "draw", 0, 1000, 10_000)
    assert drawn.result == {
        "winner": None,
        "reason": "draw: X left the game",
        "termination": "claim",
    }
    refused("claim/not_allowed", rooms.claim, ai_game(3), 0, "win", 0, 1000, 10_000)
    refused("claim/not_allowed", rooms.claim, won, 1, "win", 0, 1000, 10_000)
    assert rooms.claim_after_ms(room) == rooms.CLAIM_AFTER_UNTIMED_MS
    assert rooms.claim_after_ms(room, 1500) == 1500
    room.clock = {"initial_ms": 60_000, "increment_ms": 0}
    assert rooms.claim_after_ms(room) == rooms.CLAIM_AFTER_TIMED_MS


def test_rematch_swaps_colours_and_keeps_everything_else() -> None:
    room = human_game(["5"])
    refused("offer/not_allowed", rooms.answer_offer, room, 0, "rematch", "offer", 4)
    over, _ = rooms.resign(room, 1, 4)
    offered, event, _ = rooms.answer_offer(over, 1, "rematch", "offer", 5)
    assert offered.offers == {"rematch": 1} and event.kind == "rematch_offer"
    agreed, event, _ = rooms.answer_offer(offered, 0, "rematch", "accept", 6)
    new_id = rooms.rematch_id(room.id)
    assert agreed.next_room == new_id == rooms.rematch_id("room1") != room.id
    assert event.to_dict() == {"kind": "rematch", "seat": 0, "room": new_id}
    refused("offer/not_allowed", rooms.answer_offer, agreed, 1, "rematch", "offer", 7)
    fresh, created = rooms.rematch_room(agreed, 8)
    assert (fresh.id, fresh.status, fresh.version, fresh.previous_room) == (
        new_id,
        "playing",
        0,
        room.id,
    )
    assert [s.name for s in fresh.seats] == ["bob", "ann"]
    assert rooms.seat_for_token(fresh, "tok-a") == 1 and rooms.seat_for_token(fresh, "tok-b") == 0
    assert fresh.start == room.start and fresh.moves == [] and created.kind == "created"
    vs_ai = ai_game(6, human_seat=0)
    vs_ai, _ = rooms.resign(vs_ai, 0, 2)
    vs_ai, _, _ = rooms.answer_offer(vs_ai, 0, "rematch", "offer", 3)
    fresh, _ = rooms.rematch_room(vs_ai, 4)
    assert (fresh.seats[0].kind, fresh.seats[0].level, fresh.seats[1].kind) == ("ai", 6, "human")
    refused("offer/not_allowed", rooms.answer_offer, rooms.abort(waiting(), 0, 2)[0], 0,
            "rematch", "offer", 3)  # fmt: skip


def test_old_records_load_and_snapshots_carry_the_new_fields() -> None:
    room = human_game(["5"])
    data = room.to_json_dict()
    for name in ("offers", "next_room", "previous_room", "ai_eval", "position_version", "declined"):
        del data[name]
    old = Room.from_json_dict(data)
    assert old.offers == {} and old.next_room is None and old.position_version == old.version
    presence = Presence((True, False), (None, 1234), 7)
    snap = rooms.snapshot(room, rooms.replay(room), presence)
    assert snap["offers"] == {"draw": None, "takeback": None, "rematch": None}
    assert (snap["next_room"], snap["previous_room"], snap["spectators"]) == (None, None, 7)
    assert [s["gone_ms"] for s in snap["seats"]] == [None, 1234]
    assert snap["claim_after_ms"] == rooms.CLAIM_AFTER_UNTIMED_MS
    assert rooms.snapshot(room, rooms.replay(room), (True, True))["spectators"] == 0


# -- over WebSockets -------------------------------------------------------------------------

TIMEOUT = 30


async def two_players(url: str, game: str = "tictactoe") -> tuple[KibitzClient, KibitzClient, str]:
    a = await KibitzClient.open(url)
    b = await KibitzClient.open(url)
    room = (await a.create(game, seat=0, name="ann"))["room"]
    await b.join(room)
    await a.wait_state(room, lambda s: s["status"] == "playing")
    return a, b, room


async def close_all(*clients: KibitzClient) -> None:
    for client in clients:
        await client.close()


def event_kind(kind: str) -> Any:
    return lambda s: s["event"].get("kind") == kind


@pytest.mark.asyncio
async def test_create_and_join_reply_with_one_state_each(live_server) -> None:
    a = await KibitzClient.open(live_server.http_url)
    b = await KibitzClient.open(live_server.http_url)
    try:
        async with asyncio.timeout(TIMEOUT):
            replies = await exchange(a, {"type": "create", "game": "tictactoe", "seat": 0})
            assert [m["type"] for m in replies] == ["seat", "state", "pong"]
            room, state = replies[0]["room"], replies[1]
            assert (state["version"], state["event"]) == (0, {"kind": "created", "seat": 0})
            assert state["you"] == 0 and state["seats"][0]["connected"] is True
            a.tokens[room] = (0, replies[0]["token"])
            replies = await exchange(b, {"type": "join", "room": room})
            assert [m["type"] for m in replies] == ["seat", "state", "pong"]
            state = replies[1]
            assert (state["version"], state["event"], state["you"]) == (
                1,
                {"kind": "joined", "seat": 1},
                1,
            )
            # The creator saw the join with the new player already connected.
            joined = await a.wait_state(room, lambda s: s["version"] == 1)
            assert [s["connected"] for s in joined["seats"]] == [True, True]
            assert joined["seats"][1]["gone_ms"] is None
            # resign in a waiting room is refused; a future version is not "stale".
            other = (await a.create("tictactoe", seat=0))["room"]
            with pytest.raises(ServerError) as err:
                await a.request({"type": "resign", "room": other, "token": a.tokens[other][1]})
            assert err.value.code == "room/waiting" and "abort" in err.value.message
            token = a.tokens[room][1]
            with pytest.raises(ServerError) as err:
                await a.request(
                    {"type": "move", "room": room, "token": token, "move": "5", "version": 9}
                )
            assert err.value.code == "message/invalid" and "ahead" in err.value.message
    finally:
        await close_all(a, b)


async def exchange(client: KibitzClient, message: dict[str, Any]) -> list[dict[str, Any]]:
    """Send ``message``, then a ping: every message that came until the pong."""
    await client.send({**message, "rid": "request"})
    await client.send({"type": "ping", "rid": "done"})
    out = []
    while not out or out[-1].get("rid") != "done":
        out.append(await client.next_message())
    return out


def drain(client: KibitzClient) -> list[dict[str, Any]]:
    out = []
    while not client.inbox.empty():
        out.append(client.inbox.get_nowait())
    return out


@pytest.mark.asyncio
async def test_draw_offer_declined_then_accepted(live_server) -> None:
    a, b, room = await two_players(live_server.http_url)
    try:
        async with asyncio.timeout(TIMEOUT):
            await a.move(room, "5", 1)
            moved = await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            await a.draw(room)
            offer = await b.wait_state(room, event_kind("draw_offer"))
            assert offer["offers"] == {"draw": 0, "takeback": None, "rematch": None}
            with pytest.raises(ServerError) as err:
                await a.draw(room, "accept")  # your own offer
            assert err.value.code == "offer/none"
            await b.draw(room, "decline")
            declined = await a.wait_state(room, event_kind("draw_decline"))
            assert declined["offers"]["draw"] is None and declined["status"] == "playing"
            # The offers changed the version, not the position: a move pinned to the
            # version before them is still good.
            await b.move(room, "1", moved["version"])
            state = await a.wait_state(room, lambda s: len(s["moves"]) == 2)
            await b.draw(room)
            await a.wait_state(room, event_kind("draw_offer"))
            await a.draw(room, "accept")
            final = await b.wait_state(room, lambda s: s["status"] == "over")
            assert final["result"] == {
                "winner": None,
                "reason": "draw agreed",
                "termination": "agreement",
            }
            assert final["event"]["kind"] == "draw" and final["version"] == state["version"] + 2
            with pytest.raises(ServerError) as err:
                await a.draw(room)
            assert err.value.code == "offer/not_allowed"
    finally:
        await close_all(a, b)


@pytest.mark.asyncio
async def test_the_ai_answers_a_draw_offer_from_its_evaluation(live_server) -> None:
    async with await KibitzClient.open(live_server.http_url) as client:
        async with asyncio.timeout(TIMEOUT):
            # Before the AI has evaluated anything it plays on.
            room = (await client.create("tictactoe", "ai:8", seat=0))["room"]
            await client.draw(room)
            declined = await client.wait_state(room, event_kind("draw_decline"))
            assert declined["event"]["seat"] == 1 and declined["status"] == "playing"
            # After its reply to the centre, perfect play is a draw (score 0): it accepts.
            await client.move(room, "5")
            await client.wait_state(room, lambda s: len(s["moves"]) == 2)
            await client.draw(room)
            drawn = await client.wait_state(room, lambda s: s["status"] == "over")
            assert drawn["event"]["kind"] == "draw" and drawn["event"]["seat"] == 1
            assert drawn["result"] == {
                "winner": None,
                "reason": "draw agreed",
                "termination": "agreement",
            }


@pytest.mark.asyncio
async def test_takeback_between_people(live_server) -> None:
    a, b, room = await two_players(live_server.http_url)
    try:
        async with asyncio.timeout(TIMEOUT):
            await a.move(room, "5")
            await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            await b.move(room, "1")
            await a.wait_state(room, lambda s: len(s["moves"]) == 2)
            await b.takeback(room)  # O takes back its reply: O's turn again
            await a.wait_state(room, event_kind("takeback_offer"))
            await a.takeback(room, "accept")
            back = await b.wait_state(room, event_kind("takeback"))
            assert [m["move"] for m in back["moves"]] == ["5"] and back["to_move"] == 1
            # X asks when it is X's turn again: its move and O's reply go.
            await b.move(room, "9")
            await a.wait_state(room, lambda s: len(s["moves"]) == 2)
            await a.takeback(room)
            await b.wait_state(room, event_kind("takeback_offer"))
            await b.takeback(room, "offer")  # offering back accepts
            back = await a.wait_state(room, event_kind("takeback"))
            assert back["moves"] == [] and back["to_move"] == 0
            with pytest.raises(ServerError) as err:
                await a.takeback(room)
            assert err.value.code == "offer/not_allowed"
    finally:
        await close_all(a, b)


@pytest.mark.asyncio
@pytest.mark.parametrize("level", [2, 6])
async def test_takeback_against_the_ai(live_server, level: int) -> None:
    async with await KibitzClient.open(live_server.http_url) as client:
        async with asyncio.timeout(TIMEOUT):
            room = (await client.create("tictactoe", f"ai:{level}", seat=0))["room"]
            await client.move(room, "5")
            replied = await client.wait_state(room, lambda s: len(s["moves"]) == 2)
            await client.takeback(room)
            answer = await client.wait_state(room, newer_than(replied["version"]))
            if level <= 4:
                assert answer["event"] == {"kind": "takeback", "seat": 1, "undone": 2}
                assert answer["moves"] == [] and answer["to_move"] == 0
            else:
                assert answer["event"] == {"kind": "takeback_decline", "seat": 1}
                assert answer["moves"] == replied["moves"] and answer["to_move"] == 0
            assert answer["offers"]["takeback"] is None
            # The game goes on: the human moves, the AI answers.
            await client.move(room, answer["legal_moves"][0])
            after = await client.wait_state(
                room, lambda s: len(s["moves"]) == len(answer["moves"]) + 2
            )
            assert after["moves"][-1]["seat"] == 1


@pytest.mark.asyncio
async def test_abort_and_abort_too_late(live_server) -> None:
    a, b, room = await two_players(live_server.http_url)
    try:
        async with asyncio.timeout(TIMEOUT):
            await a.move(room, "5")
            await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            await b.move(room, "1")
            await a.wait_state(room, lambda s: len(s["moves"]) == 2)
            with pytest.raises(ServerError) as err:
                await a.abort(room)
            assert err.value.code == "abort/too_late"
            # A fresh game where only X has moved: O aborts.
            other = (await a.create("tictactoe", seat=0))["room"]
            await b.join(other)
            await a.move(other, "5")
            await b.wait_state(other, lambda s: len(s["moves"]) == 1)
            await b.abort(other)
            aborted = await a.wait_state(other, lambda s: s["status"] == "over")
            assert aborted["result"] == {
                "winner": None,
                "reason": "aborted",
                "termination": "abort",
            }
            assert aborted["event"] == {
                "kind": "abort",
                "seat": 1,
                "result": {"winner": None, "reason": "aborted", "termination": "abort"},
            }
            # And a waiting room.
            lone = (await a.create("chess"))["room"]
            await a.abort(lone)
            assert (await a.wait_state(lone, lambda s: s["status"] == "over"))["result"][
                "reason"
            ] == "aborted"
    finally:
        await close_all(a, b)


@pytest.mark.asyncio
async def test_claim_after_a_disconnect(redis_server) -> None:
    from tests.conftest import start_server

    server = start_server(redis_server.url, extra_env={"KIBITZ_CLAIM_AFTER_MS": "1500"})
    a = b = None
    try:
        a, b, room = await two_players(server.http_url)
        async with asyncio.timeout(TIMEOUT):
            await a.move(room, "5")
            playing = await a.wait_state(room, lambda s: len(s["moves"]) == 1)
            assert playing["claim_after_ms"] == 1500
            with pytest.raises(ServerError) as err:
                await a.claim(room)
            assert err.value.code == "claim/not_allowed"  # O is connected
            left_at = time.time() * 1000
            await b.close()
            gone = await a.wait_state(room, lambda s: s["seats"][1]["gone_ms"] is not None)
            assert gone["event"]["kind"] == "presence" and not gone["seats"][1]["connected"]
            assert abs(gone["seats"][1]["gone_ms"] - left_at) < 1000
            with pytest.raises(ServerError) as err:
                await a.claim(room)
            assert err.value.code == "claim/too_early" and "claim in" in err.value.message
            await asyncio.sleep(max(0.0, (gone["seats"][1]["gone_ms"] + 1600) / 1000 - time.time()))
            await a.claim(room)
            final = await a.wait_state(room, lambda s: s["status"] == "over")
            assert final["result"] == {
                "winner": 0,
                "reason": "O left the game",
                "termination": "claim",
            }
            assert final["event"]["kind"] == "claim"
    finally:
        for c in (a, b):
            if c is not None:
                await c.close()
        server.stop()


@pytest.mark.asyncio
async def test_the_players_of_a_dead_node_are_gone_and_claimed_against(redis_server) -> None:
    """No goodbye from a killed node: the others notice it stopped beating, and tell. A
    node stopped cleanly leaves nothing to notice."""
    from tests.conftest import expire_heartbeat, node_name, start_server

    node1 = start_server(redis_server.url)
    node2 = start_server(redis_server.url, extra_env={"KIBITZ_CLAIM_AFTER_MS": "1000"})
    clients: list[KibitzClient] = []
    try:
        a = await KibitzClient.open(node1.http_url)
        b = await KibitzClient.open(node2.http_url)
        clients += [a, b]
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        await a.move(room, "5")
        await b.wait_state(room, lambda s: len(s["moves"]) == 1)
        dead = node_name(node1)
        killed_at = time.time() * 1000
        node1.process.kill()
        node1.process.wait()
        # Its heartbeat lapses (at once here, not after 15 s); node 2's next beat tells.
        expire_heartbeat(redis_server.url, dead)
        gone = await b.wait_state(room, lambda s: s["seats"][0]["gone_ms"] is not None, 40)
        assert gone["event"]["kind"] == "presence" and gone["seats"][0]["connected"] is False
        assert gone["seats"][0]["gone_ms"] >= killed_at
        await asyncio.sleep(max(0.0, (gone["seats"][0]["gone_ms"] + 1100) / 1000 - time.time()))
        await b.claim(room)
        final = await b.wait_state(room, lambda s: s["status"] == "over", TIMEOUT)
        assert final["result"] == {"winner": 1, "reason": "X left the game", "termination": "claim"}
        # A node stopped cleanly (SIGTERM, its departures recorded) takes its beat with
        # it: no other node will announce it dead and re-broadcast every room's presence.
        left = node_name(node2)
        node2.stop()
        client = redis.Redis.from_url(redis_server.url, decode_responses=True)
        try:
            assert client.exists(keys.node_key(left)) == 0
            assert client.zscore(keys.NODE_BEATS, left) is None
            assert client.zscore(keys.NODE_BEATS, dead) is None  # announced, then removed
        finally:
            client.close()
    finally:
        await close_all(*clients)
        node1.stop()
        node2.stop()


@pytest.mark.asyncio
async def test_rematch_swaps_colours_and_the_spectator_follows(live_server) -> None:
    a, b, room = await two_players(live_server.http_url)
    spectator = await KibitzClient.open(live_server.http_url)
    try:
        async with asyncio.timeout(TIMEOUT):
            await spectator.watch(room)
            with pytest.raises(ServerError) as err:
                await a.rematch(room)  # the game is on
            assert err.value.code == "offer/not_allowed"
            await a.move(room, "5")
            await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            await b.resign(room)
            await a.wait_state(room, lambda s: s["status"] == "over")
            await b.rematch(room)
            offer = await a.wait_state(room, event_kind("rematch_offer"))
            assert offer["offers"]["rematch"] == 1
            await a.rematch(room, "accept")
            moved_on = await spectator.wait_state(room, lambda s: s["next_room"] is not None)
            new = moved_on["next_room"]
            assert moved_on["event"] == {"kind": "rematch", "seat": 0, "room": new}
            # Everyone follows: the players with the tokens they hold, the spectator watches.
            state_a = await a.follow_rematch(room)
            state_b = await b.follow_rematch(room)
            watched = await spectator.follow_rematch(room)
            assert (state_a["you"], state_b["you"], watched["you"]) == (1, 0, None)
            assert watched["previous_room"] == room and watched["status"] == "playing"
            assert [s["name"] for s in watched["seats"]] == [None, "ann"]
            assert watched["version"] == 0 and watched["moves"] == []
            # b (X now) moves first; everyone sees it.
            await b.move(new, "1")
            seen = await spectator.wait_state(new, lambda s: len(s["moves"]) == 1)
            assert seen["moves"][0] == {"move": "1", "display": "1", "seat": 0}
            assert (await a.wait_state(new, lambda s: len(s["moves"]) == 1))["you"] == 1
    finally:
        await close_all(a, b, spectator)


@pytest.mark.asyncio
async def test_rematch_against_the_ai(live_server) -> None:
    async with await KibitzClient.open(live_server.http_url) as client:
        async with asyncio.timeout(TIMEOUT):
            room = (await client.create("tictactoe", "ai:3", seat=0))["room"]
            await client.move(room, "5")
            await client.wait_state(room, lambda s: len(s["moves"]) == 2)
            await client.resign(room)
            await client.wait_state(room, lambda s: s["status"] == "over")
            await client.rematch(room)  # the AI accepts at once
            over = await client.wait_state(room, lambda s: s["next_room"] is not None)
            assert over["event"]["kind"] == "rematch" and over["event"]["seat"] == 1
            state = await client.follow_rematch(room)
            assert state["you"] == 1 and state["seats"][0]["kind"] == "ai"
            assert state["seats"][0]["level"] == 3
            # The AI moves first in the new room: its job was queued with the room.
            first = await client.wait_state(state["room"], lambda s: len(s["moves"]) == 1)
            assert first["moves"][0]["seat"] == 0 and first["to_move"] == 1


@pytest.mark.asyncio
async def test_two_nodes_accepting_a_rematch_at_once_make_one_room(
    live_server, redis_server
) -> None:
    from tests.conftest import start_server

    other_node = start_server(redis_server.url)
    clients: list[KibitzClient] = []
    try:
        a, b, room = await two_players(live_server.http_url)
        b2 = await KibitzClient.open(other_node.http_url)
        clients += [a, b, b2]
        b2.tokens[room] = b.tokens[room]
        async with asyncio.timeout(TIMEOUT):
            await a.move(room, "5")
            await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            await a.resign(room)
            await b.wait_state(room, lambda s: s["status"] == "over")
            await a.rematch(room)
            await b.wait_state(room, event_kind("rematch_offer"))
            # b accepts twice at once, through two nodes: both succeed, one room.
            await asyncio.gather(b.rematch(room, "accept"), b2.rematch(room, "accept"))
            over = await a.wait_state(room, lambda s: s["next_room"] is not None)
            record = await get_json(f"{live_server.http_url}/api/rooms/{room}/record")
            kinds = [e["kind"] for e in record["events"]]
            assert kinds.count("rematch") == 1 and kinds[-1] == "rematch"
            new_record = await get_json(
                f"{live_server.http_url}/api/rooms/{over['next_room']}/record"
            )
            assert [e["kind"] for e in new_record["events"]] == ["created"]
            assert new_record["seats"][0]["name"] is None  # b's seat, now X
    finally:
        await close_all(*clients)
        other_node.stop()


async def get_json(url: str) -> dict[str, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200, await resp.text()
        data: dict[str, Any] = await resp.json()
        return data


@pytest.mark.asyncio
async def test_spectators_are_counted_without_a_broadcast_each(live_server) -> None:
    a, b, room = await two_players(live_server.http_url)
    watchers = [await KibitzClient.open(live_server.http_url) for _ in range(6)]
    try:
        async with asyncio.timeout(TIMEOUT):
            drain(a)
            for watcher in watchers:
                await watcher.watch(room)
            last = await watchers[-1].wait_state(room, lambda s: s["spectators"] == 6)
            assert last["you"] is None
            # The players hear of the six within about two seconds, in one or two
            # presence broadcasts, not six.
            counted = await a.wait_state(room, lambda s: s["spectators"] == 6, timeout=5)
            assert counted["event"]["kind"] == "presence"
            await asyncio.sleep(2.5)
            presences = [m for m in drain(a) if m["type"] == "state"]
            assert len(presences) <= 1
            # Leaving counts down; the next move carries the count.
            for watcher in watchers[:4]:
                await watcher.close()
            await a.move(room, "5")
            moved = await b.wait_state(room, lambda s: len(s["moves"]) == 1)
            assert moved["spectators"] in (2, 6)  # closes are counted as they land
            settled = await b.wait_state(room, lambda s: s["spectators"] == 2, timeout=5)
            assert settled["version"] == moved["version"]
    finally:
        await close_all(a, b, *watchers)
