"""The Bot and Board API driven end to end by ``berserk`` (the lichess client from PyPI,
unmodified, pointed at a node's base URL), as issue 23 asks: a bot account and a
board-API account challenge each other and play whole games of chess, Othello and
draughts; declines, aborts, draw offers, chat and resumed streams (on the same node, and
on another node after the first one drains) behave as lichess's documentation says.

Each test makes its own accounts; the bot talks to the first node and the person to the
second, so every line crosses nodes through Redis. berserk's streams are blocking
iterators, read in threads (conftest.py's :class:`Stream`): every wait is bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import berserk
import pytest
import requests
from berserk.exceptions import ResponseError

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.games import Game, find_game
from tests.conftest import ServerProcess, start_server
from tests.server.botapi.conftest import (
    WAIT_S,
    ApiAccount,
    Stream,
    StreamEnded,
    client_for,
)

#: Scholar's mate: white mates on the seventh ply (in UCI, then in SAN as the export has it).
SCHOLARS_MATE = ["e2e4", "e7e5", "f1c4", "b8c6", "d1h5", "g8f6", "h5f7"]
SCHOLARS_MATE_SAN = ["e4", "e5", "Bc4", "Nc6", "Qh5", "Nf6", "Qxf7#"]


@dataclass
class Side:
    """One player of a test: an account, berserk on one node, its event stream, and the
    stream of the game it plays (once opened)."""

    account: ApiAccount
    node: ServerProcess
    bot: bool
    client: berserk.Client = field(init=False)
    events: Stream = field(init=False)
    game: Stream | None = None

    def __post_init__(self) -> None:
        self.client = client_for(self.account.token, self.node)
        self.events = Stream.open(self.client, self.client.bots.stream_incoming_events)

    @property
    def id(self) -> str:
        """lichess's user id: the username in lower case."""
        return self.account.username.lower()

    def door(self) -> Any:
        """berserk's client of this side's API: ``bots`` for a bot, ``board`` else."""
        return self.client.bots if self.bot else self.client.board

    def open_game(self, game_id: str, node: ServerProcess | None = None) -> dict[str, Any]:
        """Open the game's stream (on ``node``, else this side's); its ``gameFull``."""
        client = self.client if node is None else client_for(self.account.token, node)
        door = client.bots if self.bot else client.board
        self.game = Stream.open(client, lambda: door.stream_game_state(game_id))
        full = self.game.next()
        assert full["type"] == "gameFull", full
        return full

    def move(self, game_id: str, move: str) -> None:
        self.door().make_move(game_id, move)

    def close(self) -> None:
        for stream in (self.events, self.game):
            if stream is not None:
                stream.close()


@pytest.fixture
def players(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> Iterator[tuple[Side, Side]]:
    """A fresh bot (berserk on node 0) and a fresh person (node 1), both listening to
    their event streams."""
    bot = Side(make_account(bot=True), api_nodes[0], bot=True)
    person = Side(make_account(), api_nodes[1], bot=False)
    yield bot, person
    bot.close()
    person.close()


def is_type(kind: str, game_id: str) -> Callable[[dict[str, Any]], bool]:
    """Whether an event line is of ``kind`` and about the game or challenge ``game_id``."""

    def wanted(line: dict[str, Any]) -> bool:
        about = line.get("game") or line.get("challenge") or {}
        return line.get("type") == kind and game_id in (about.get("id"), about.get("gameId"))

    return wanted


def challenge(challenger: Side, challenged: Side, **options: Any) -> str:
    """``challenger`` challenges ``challenged``, who sees it on its event stream and
    accepts; both event streams then start the game. The game's id."""
    made = challenger.client.challenges.create(challenged.account.username, **options)
    game_id = made["id"]
    seen = challenged.events.wait_for(is_type("challenge", game_id))["challenge"]
    assert seen["challenger"]["id"] == challenger.id
    assert seen["destUser"]["id"] == challenged.id
    assert seen["rated"] is options["rated"]
    challenged.client.challenges.accept(game_id)
    starts = [side.events.wait_for(is_type("gameStart", game_id))["game"]
              for side in (challenger, challenged)]  # fmt: skip
    assert [start["opponent"]["id"] for start in starts] == [challenged.id, challenger.id]
    assert {start["color"] for start in starts} == {"white", "black"}
    for start in starts:
        assert start["isMyTurn"] is (start["color"] == "white") and not start["hasMoved"]
        assert start["fullId"] == game_id + start["color"][0]
        assert start["rated"] is options["rated"] and start["status"]["name"] == "started"
    return game_id


def colours(full: dict[str, Any], a: Side, b: Side) -> dict[str, Side]:
    """The sides by colour, as the ``gameFull`` says."""
    by_id = {a.id: a, b.id: b}
    return {colour: by_id[full[colour]["id"]] for colour in ("white", "black")}


def moves_of(line: dict[str, Any]) -> list[str]:
    state = line["state"] if line["type"] == "gameFull" else line
    return str(state["moves"]).split()


def played(game_id: str, sides: dict[str, Side], move: str, count: int) -> dict[str, Any]:
    """The side to move plays ``move`` as the ``count``-th move; both game streams show
    it. White's stream's ``gameState`` then."""
    seat = "white" if count % 2 == 1 else "black"
    return play_as(game_id, sides, seat, move, count)


def play_as(
    game_id: str, sides: dict[str, Side], seat: str, move: str, count: int
) -> dict[str, Any]:
    """``sides[seat]`` plays ``move``; both streams reach ``count`` moves with it last.
    White's stream's ``gameState`` then."""
    sides[seat].move(game_id, move)
    states = []
    for side in sides.values():
        assert side.game is not None
        state = side.game.wait_for(
            lambda line: line["type"] == "gameState" and len(moves_of(line)) >= count
        )
        assert moves_of(state)[count - 1] == move, state
        states.append(state)
    return states[0]


def play_out(
    game: Game[Any, Any], game_id: str, sides: dict[str, Side], moves: list[str]
) -> dict[str, Any]:
    """Play the game from the position after ``moves`` to its end: each side knows the
    position by replaying the moves its stream lists with kibitz's rules, and plays the
    first legal move there. The last ``gameState`` (both streams agree)."""
    state = replay(game, moves)
    while game.outcome(state) is None:
        text = game.legal_move_texts(state)[0]
        seat = ("white", "black")[game.to_move(state)]
        moves = moves_of(play_as(game_id, sides, seat, text, len(moves) + 1))
        state = replay(game, moves)
    return finished(sides)


def finished(sides: dict[str, Side]) -> dict[str, Any]:
    """Both game streams carry the game's end in a ``gameState`` (the same), then end;
    that state."""
    ends = []
    for side in sides.values():
        assert side.game is not None
        over = [x for x in side.game.lines if x["type"] == "gameState" and x["status"] != "started"]
        if not over:
            over.append(side.game.wait_for(lambda x: x.get("status", "started") != "started"))
        assert side.game.ended(), f"the game stream stayed open after {side.game.lines[-1]}"
        ends.append(over[-1])
    white, black = ({k: end.get(k) for k in ("moves", "status", "winner")} for end in ends)
    assert white == black, ends
    return ends[0]


def finish_lines(game_id: str, *sides: Side) -> list[dict[str, Any]]:
    """Each side's ``gameFinish`` for the game."""
    return [side.events.wait_for(is_type("gameFinish", game_id))["game"] for side in sides]


def eventually(check: Callable[[], Any], what: str) -> Any:
    """``check()``'s first truthy answer within ``WAIT_S`` (polled)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        answer = check()
        if answer:
            return answer
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {WAIT_S} s")


# -- whole games ------------------------------------------------------------------------


def test_a_bot_and_a_board_player_play_a_rated_chess_game_to_mate(
    players: tuple[Side, Side],
) -> None:
    bot, person = players
    assert bot.client.account.get()["title"] == "BOT"
    game_id = challenge(person, bot, rated=True, clock_limit=180, clock_increment=2, color="white")
    full = bot.open_game(game_id)
    assert full["variant"]["key"] == "standard" and full["speed"] == "blitz"
    assert full["rated"] is True and full["initialFen"] == "startpos"
    assert full["clock"] == {"initial": 180_000, "increment": 2_000}
    assert full["white"]["id"] == person.id and "title" not in full["white"]
    assert (full["black"]["id"], full["black"]["title"]) == (bot.id, "BOT")
    seen_by_person = person.open_game(game_id)
    assert (seen_by_person["white"], seen_by_person["black"]) == (full["white"], full["black"])
    sides = colours(full, bot, person)

    for count, move in enumerate(SCHOLARS_MATE, start=1):
        played(game_id, sides, move, count)
    end = finished(sides)
    assert (end["status"], end["winner"]) == ("mate", "white")

    for line in finish_lines(game_id, person, bot):
        assert line["status"]["name"] == "mate" and line["winner"] == "white"
        assert line["rated"] is True

    def blitz(side: Side) -> dict[str, Any] | None:
        perf = side.client.users.get_public_data(side.account.username)["perfs"]
        return perf.get("blitz") if perf.get("blitz", {}).get("games") else None

    won = eventually(lambda: blitz(person), "the winner's blitz rating")
    lost = eventually(lambda: blitz(bot), "the loser's blitz rating")
    assert won["rating"] > lost["rating"], (won, lost)

    exported = eventually(lambda: export(person.client, game_id), "the archived game")
    assert exported["id"] == game_id and exported["rated"] is True
    assert exported["status"] == "mate" and exported["winner"] == "white"
    assert exported["moves"].split() == SCHOLARS_MATE_SAN
    assert exported["players"]["white"]["user"]["id"] == person.id
    assert exported["players"]["black"]["ratingDiff"] < 0


def export(client: berserk.Client, game_id: str) -> dict[str, Any] | None:
    """``/game/export/{id}`` as JSON; None until the game is archived."""
    try:
        exported = client.games.export(game_id, as_pgn=False)
    except ResponseError as exc:
        if exc.status_code == 404:
            return None
        raise
    assert isinstance(exported, dict), exported
    return exported


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("othello", {"rated": False, "clock_limit": 600, "clock_increment": 5}),
        ("draughts", {"rated": True, "clock_limit": 300, "clock_increment": 3}),
    ],
)
def test_a_bot_plays_a_whole_game_of(
    players: tuple[Side, Side], name: str, options: dict[str, Any]
) -> None:
    bot, person = players
    game = find_game(name)
    game_id = challenge(bot, person, variant=name, color="black", **options)
    full = bot.open_game(game_id)
    person.open_game(game_id)
    assert full["variant"]["key"] == name and full["rated"] is options["rated"]
    assert full["initialFen"] == game.format_position(game.initial())
    sides = colours(full, bot, person)
    assert sides["black"] is bot

    end = play_out(game, game_id, sides, moves_of(full))
    assert end["status"] == "variantEnd"
    outcome = game.outcome(replay(game, moves_of(end)))
    assert outcome is not None and outcome.winner is not None
    assert end["winner"] == ("white", "black")[outcome.winner]
    for line in finish_lines(game_id, bot, person):
        assert line["status"]["name"] == "variantEnd" and line["variant"]["key"] == name


def replay(game: Game[Any, Any], moves: list[str]) -> Any:
    state = game.initial()
    for text in moves:
        state = game.play(state, text)
    return state


# -- declines, aborts, draws, chat ------------------------------------------------------


def test_a_declined_challenge_tells_the_challenger_why(players: tuple[Side, Side]) -> None:
    bot, person = players
    made = person.client.challenges.create(
        bot.account.username, rated=False, clock_limit=60, clock_increment=0
    )
    seen = bot.events.wait_for(is_type("challenge", made["id"]))["challenge"]
    assert seen["status"] == "created" and seen["speed"] == "bullet"
    bot.client.bots.decline_challenge(made["id"], reason="tooFast")
    declined = person.events.wait_for(is_type("challengeDeclined", made["id"]))["challenge"]
    assert declined["status"] == "declined"
    assert declined["declineReasonKey"].lower() == "toofast"
    assert declined["declineReason"]
    with pytest.raises(ResponseError) as refused:  # it is no longer open
        bot.client.challenges.accept(made["id"])
    assert refused.value.status_code == 400 and "declined" in str(refused.value)


def test_a_cancelled_challenge_leaves_the_challenged_stream(
    players: tuple[Side, Side],
) -> None:
    bot, person = players
    # berserk's type of ``variant`` lists lichess's variants; kibitz's games go through it.
    draughts: Any = "draughts"
    made = bot.client.challenges.create(
        person.account.username, rated=False, variant=draughts, days=2
    )
    seen = person.events.wait_for(is_type("challenge", made["id"]))["challenge"]
    assert seen["variant"]["key"] == "draughts" and seen["speed"] == "correspondence"
    assert seen["timeControl"] == {"type": "correspondence", "daysPerTurn": 2}
    assert seen["challenger"]["title"] == "BOT"
    bot.client.challenges.cancel(made["id"])
    gone = person.events.wait_for(is_type("challengeCanceled", made["id"]))["challenge"]
    assert gone["status"] == "canceled"
    assert made["id"] not in [c["id"] for c in person.client.challenges.get_mine()["in"]]


def test_aborting_before_any_move_finishes_the_game_as_aborted(
    players: tuple[Side, Side],
) -> None:
    bot, person = players
    game_id = challenge(person, bot, rated=False, clock_limit=300, clock_increment=0)
    bot.open_game(game_id)
    person.open_game(game_id)
    person.client.board.abort_game(game_id)
    for side in (bot, person):
        assert side.game is not None
        end = side.game.wait_for(lambda line: line.get("status") == "aborted")
        assert end["type"] == "gameState" and "winner" not in end
        assert side.game.ended()
    for line in finish_lines(game_id, bot, person):
        assert line["status"]["name"] == "aborted"


def test_a_draw_offered_on_the_board_and_accepted_by_the_bot(
    players: tuple[Side, Side],
) -> None:
    bot, person = players
    game_id = challenge(bot, person, rated=False, clock_limit=300, clock_increment=0)
    sides = colours(bot.open_game(game_id), bot, person)
    person.open_game(game_id)
    for count, move in enumerate(["e2e4", "e7e5"], start=1):
        played(game_id, sides, move, count)
    person.client.board.offer_draw(game_id)
    offer = "wdraw" if sides["white"] is person else "bdraw"
    assert bot.game is not None
    offered = bot.game.wait_for(lambda line: bool(line.get(offer)))
    assert offered["status"] == "started"
    # berserk has no bot call for it: the bot POSTs lichess's path with berserk's session.
    bot.client._r.post(f"/api/bot/game/{game_id}/draw/yes")
    end = bot.game.wait_for(lambda line: line.get("status") == "draw")
    assert "winner" not in end and bot.game.ended()
    for line in finish_lines(game_id, bot, person):
        assert line["status"]["name"] == "draw" and "winner" not in line


def test_chat_reaches_the_other_player_and_the_spectators(
    players: tuple[Side, Side],
) -> None:
    """kibitz's difference: a player's game stream carries the players' room only (our
    rule for every player: the spectators' lines could be hints); the spectators' room
    is public, in the game record."""
    bot, person = players
    game_id = challenge(person, bot, rated=False, clock_limit=300, clock_increment=0,
                        color="white")  # fmt: skip
    bot.open_game(game_id)
    person.open_game(game_id)
    assert bot.game is not None and person.game is not None
    person.client.board.post_message(game_id, "hello watchers", spectator=True)
    bot.client.bots.post_message(game_id, "good luck")
    person.client.board.post_message(game_id, "thanks")

    def chat(username: str) -> Callable[[dict[str, Any]], bool]:
        return lambda line: line["type"] == "chatLine" and line["username"] == username

    heard = person.game.wait_for(chat(bot.account.username))
    assert (heard["room"], heard["text"]) == ("player", "good luck")
    heard = bot.game.wait_for(chat(person.account.username))
    assert (heard["room"], heard["text"]) == ("player", "thanks")  # not "hello watchers"
    history = person.client.board.get_game_chat(game_id)
    assert [(x["user"], x["text"]) for x in history] == [
        (bot.account.username, "good luck"), (person.account.username, "thanks")
    ]  # fmt: skip
    record = requests.get(f"{person.node.http_url}/api/games/{game_id}", timeout=WAIT_S)
    said = [(x["channel"], x["text"]) for x in record.json()["chat"]]
    assert ("spectators", "hello watchers") in said, said
    person.client.board.resign_game(game_id)
    assert bot.game.wait_for(lambda line: line.get("status") == "resign")["winner"] == "black"


# -- resumed streams --------------------------------------------------------------------


def test_a_closed_game_stream_reopens_with_every_move_and_carries_on(
    players: tuple[Side, Side],
) -> None:
    bot, person = players
    game_id = challenge(person, bot, rated=False, clock_limit=300, clock_increment=0,
                        color="white")  # fmt: skip
    sides = colours(bot.open_game(game_id), bot, person)
    person.open_game(game_id)
    for count, move in enumerate(SCHOLARS_MATE[:3], start=1):
        played(game_id, sides, move, count)
    assert person.game is not None
    person.game.close()
    again = person.open_game(game_id)  # on the same node
    assert moves_of(again) == SCHOLARS_MATE[:3] and again["state"]["status"] == "started"
    for count, move in enumerate(SCHOLARS_MATE[3:], start=4):
        played(game_id, sides, move, count)
    assert finished(sides)["status"] == "mate"


def test_a_game_stream_survives_its_node_draining(
    players: tuple[Side, Side], own_redis: EmbeddedRedis, api_nodes: list[ServerProcess]
) -> None:
    bot, person = players
    game_id = challenge(person, bot, rated=False, clock_limit=300, clock_increment=0,
                        color="white")  # fmt: skip
    person.open_game(game_id)
    third = start_server(own_redis.url)
    try:
        sides = colours(bot.open_game(game_id, node=third), bot, person)
        for count, move in enumerate(SCHOLARS_MATE[:4], start=1):
            played(game_id, sides, move, count)
        third.process.terminate()  # SIGTERM: the node drains, closing every stream
        assert bot.game is not None
        with pytest.raises(StreamEnded):
            bot.game.wait_for(lambda line: False)
        assert third.process.wait(timeout=WAIT_S) == 0
    finally:
        third.stop()
    again = bot.open_game(game_id, node=api_nodes[1])
    assert moves_of(again) == SCHOLARS_MATE[:4]
    for count, move in enumerate(SCHOLARS_MATE[4:], start=5):
        played(game_id, sides, move, count)
    assert finished(sides)["status"] == "mate"


# -- seeks, and one event stream per token ----------------------------------------------


def test_a_board_seek_taken_by_a_web_player_is_played_through_the_api(
    api_nodes: list[ServerProcess], make_account: Callable[..., ApiAccount]
) -> None:
    """``board.seek`` blocks while its seek lives in the lobby; a signed-in web player
    takes it over the WebSocket (kibitz pairs no two seeks by itself), the seek's request
    ends and the seeker plays the new game through the Board API."""
    seeker = Side(make_account(), api_nodes[0], bot=False)
    taker = make_account()
    # The seek's call runs in a Stream's thread, which hangs it up however the test ends.
    seek = Stream.open(seeker.client, seek_call(seeker.client, 5, 3))
    try:
        listed = eventually(lambda: seeks_of(api_nodes[1], seeker), "the seek in the lobby")
        assert listed[0]["clock"] == {"initial_ms": 300_000, "increment_ms": 3_000}
        seat = asyncio.run(take_seek(api_nodes[1], taker, listed[0]["id"]))
        assert seek.ended(), "the seek's request stayed open after it was taken"
        start = seeker.events.wait_for(is_type("gameStart", seat["room"]))["game"]
        assert start["opponent"]["id"] == taker.username.lower()
        assert (start["color"], start["speed"]) == ("white", "blitz")
        sides = {"white": seeker}
        seeker.open_game(start["gameId"])
        played(start["gameId"], sides, "e2e4", 1)
        seeker.client.board.resign_game(start["gameId"])
        finish = seeker.events.wait_for(is_type("gameFinish", start["gameId"]))["game"]
        assert (finish["status"]["name"], finish["winner"]) == ("resign", "black")
    finally:
        seek.close()
        seeker.close()


def seek_call(client: berserk.Client, minutes: int, increment_s: int) -> Callable[[], Any]:
    """berserk's ``board.seek`` as a stream of one line, ``{"seconds": how long it lived}``."""
    return lambda: iter([{"seconds": client.board.seek(minutes, increment_s, color="white")}])


def seeks_of(node: ServerProcess, side: Side) -> list[dict[str, Any]]:
    """The lobby's open seeks of ``side``'s account (``GET /api/seeks``)."""
    body = requests.get(f"{node.http_url}/api/seeks", timeout=WAIT_S).json()
    return [seek for seek in body["seeks"] if seek.get("account") == side.account.username]


async def take_seek(node: ServerProcess, account: ApiAccount, seek_id: str) -> dict[str, Any]:
    """A web player signed in with ``account``'s token accepts the seek; its ``seat``."""
    bearer = {"Authorization": f"Bearer {account.token}"}
    async with await KibitzClient.open(node.http_url, additional_headers=bearer) as web:
        return await asyncio.wait_for(web.accept_seek(seek_id), WAIT_S)


def test_a_second_event_stream_of_a_token_closes_the_first(
    players: tuple[Side, Side],
) -> None:
    bot, _ = players
    again = Stream.open(bot.client, bot.client.bots.stream_incoming_events)
    try:
        assert bot.events.ended(), "the older stream stayed open"
    finally:
        again.close()
