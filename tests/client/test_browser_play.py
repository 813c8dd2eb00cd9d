"""The web client's play features in headless Chromium against the real server: clocks
that flag, a draw offer, a rematch, the two chat channels and a seek.

Every page is its own browser context (its own localStorage, so its own player), and every
action goes through the WebSocket to the real server (``live_server``: real workers, real
Redis); nothing is mocked. One thing is changed on the way: the flag test's ``create``
asks for a 15 s clock instead of the lobby's shortest, 1+0 (whose 1:00 clock a test of its
own checks), so that it waits seconds rather than a minute for the flag.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.client.test_browser import BOARD, NewPage, draughts_rows, open_lobby
from tests.conftest import start_server

pytestmark = pytest.mark.browser

# The flag test's clock: the lobby's shortest, 1+0, is shortened to this on its way to the
# server (``shorten_the_clock``), so the game flags in seconds rather than a minute. The
# flag is the server's (its sweeper), so allow for the sweep and a busy machine on top.
FLAG_CLOCK_MS = 15_000
FLAG_WITHIN_MS = FLAG_CLOCK_MS + 30_000


def create_human_game(page: Page, base: str, name: str, time_control: str = "none") -> str:
    """Alice's side: a tic-tac-toe room for two people, X for her; returns the room id."""
    open_lobby(page, base)
    page.click("[data-testid=game-tictactoe]")
    page.select_option("[data-testid=opponent]", "human")
    page.select_option("[data-testid=seat-choice]", "0")
    page.select_option("[data-testid=time-control]", time_control)
    page.fill("[data-testid=name]", name)
    page.click("[data-testid=create]")
    page.wait_for_selector(f"{BOARD}[data-game=tictactoe][data-version]")
    return str(page.evaluate("window.kibitz.state.room"))


def join(page: Page, base: str, room: str, name: str) -> None:
    page.goto(f"{base}/?room={room}")
    page.fill("[data-testid=join-name]", name)
    page.click("[data-testid=join-seat]")
    expect(page.locator("[data-testid=seat-1]")).to_contain_text(name)
    expect(page.locator("[data-testid=join-banner]")).to_be_hidden()


def watch(page: Page, base: str, room: str) -> None:
    page.goto(f"{base}/?watch={room}")
    expect(page.locator(f"{BOARD}[data-game=tictactoe][data-version]")).to_be_visible()


def play(page: Page, cell: str) -> None:
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    page.click(f"[data-testid=cell-{cell}]")
    expect(page.locator(f"[data-testid=cell-{cell}]")).not_to_have_attribute("data-mark", "")


def two_players(new_page: NewPage, base: str, time_control: str = "none") -> tuple[Page, Page, str]:
    alice, bob = new_page(), new_page()
    room = create_human_game(alice, base, "Alice", time_control)
    join(bob, base, room, "Bob")
    expect(alice.locator("[data-testid=seat-1]")).to_contain_text("Bob")
    return alice, bob, room


def clock_ms(page: Page, seat: int) -> int:
    return int(page.get_attribute(f"[data-testid=clock-{seat}]", "data-ms") or "-1")


# -- (1) a 1+0 game where X runs out of time ----------------------------------------------------


def shorten_the_clock(page: Page, initial_ms: int) -> None:
    """Let the ``create`` messages ``page`` sends ask for ``initial_ms`` on the clock instead
    of the time control chosen in the lobby; every other frame passes through unchanged."""

    def route(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()

        def to_server(message: str | bytes) -> None:
            if isinstance(message, str):
                data = json.loads(message)
                if data.get("type") == "create" and data.get("clock"):
                    data["clock"]["initial_ms"] = initial_ms
                    message = json.dumps(data)
            server.send(message)

        ws.on_message(to_server)

    page.route_web_socket(re.compile(r"/ws$"), route)


def test_the_lobby_one_minute_control_gives_a_one_minute_clock(
    live_server: Any, new_page: NewPage
) -> None:
    """The lobby's 1+0 (which the flag test below shortens) is a 1:00 clock, shown as such
    on both players' pages, with the first-move notice."""
    alice, bob, _ = two_players(new_page, live_server.http_url, "1+0")
    for page in (alice, bob):
        expect(page.locator("[data-testid=clock-0]")).to_have_text("1:00")
        expect(page.locator("[data-testid=clock-1]")).to_have_text("1:00")
        expect(page.locator("[data-testid=time-control-label]")).to_contain_text("1+0")
    # Before the first move, X is told how long it has before the game is aborted.
    expect(alice.locator("[data-testid=first-move]")).to_contain_text("Make your first move within")


def test_flag_on_time_shows_on_both_pages_and_a_spectator(
    live_server: Any, new_page: NewPage
) -> None:
    """A game of the lobby's 1+0 whose clock is shortened to FLAG_CLOCK_MS on the way to the
    server: X lets it run out; both players and a spectator see it flag."""
    base = live_server.http_url
    alice, bob = new_page(), new_page()
    shorten_the_clock(alice, FLAG_CLOCK_MS)
    room = create_human_game(alice, base, "Alice", "1+0")
    join(bob, base, room, "Bob")
    expect(alice.locator("[data-testid=seat-1]")).to_contain_text("Bob")
    carol = new_page()
    watch(carol, base, room)
    for page in (alice, bob, carol):
        expect(page.locator("[data-testid=clock-0]")).to_have_text("0:15")
        expect(page.locator("[data-testid=clock-1]")).to_have_text("0:15")
        expect(page.locator("[data-testid=time-control-label]")).to_contain_text("15s+0")
    expect(carol.locator("[data-testid=watching-label]")).to_be_visible()
    expect(alice.locator("[data-testid=watching-label]")).to_be_hidden()

    play(alice, "1")
    play(bob, "5")
    # The pages know the server's time from the pongs (same machine: hardly any offset).
    for page in (alice, bob, carol):
        page.wait_for_function("window.kibitz.clockOffset.samples > 0")
        assert abs(page.evaluate("window.kibitz.clockOffset.ms")) < 1000
    # Both have moved: X's clock runs, on every page, and nobody sends anything more.
    for page in (alice, bob, carol):
        expect(page.locator("[data-testid=clock-0]")).to_have_attribute("data-running", "true")
        expect(page.locator("[data-testid=clock-1]")).to_have_attribute("data-running", "false")
    started = time.monotonic()
    first = clock_ms(carol, 0)
    carol.wait_for_timeout(1500)
    assert clock_ms(carol, 0) < first - 1000  # it ticks locally between states

    # Under ten seconds the clock turns to its low-time look, with words for screen readers.
    low = bob.locator("[data-testid=clock-0][data-low=true]")
    expect(low).to_be_visible(timeout=FLAG_WITHIN_MS)
    expect(low).to_have_attribute("aria-label", re.compile("low time"))
    # X's own page says it once in a live region, for screen readers.
    expect(alice.locator("[data-testid=clock-alert]")).to_contain_text("Low time")
    expect(bob.locator("[data-testid=clock-alert]")).to_have_text("")

    expect(alice.locator("[data-testid=result]")).to_contain_text(
        "You lose on time", timeout=FLAG_WITHIN_MS
    )
    # The server's flag, not a page's guess: not before the clock ran out.
    assert time.monotonic() - started > FLAG_CLOCK_MS / 1000 - 5
    expect(alice.locator("[data-testid=result]")).to_have_attribute("data-outcome", "loss")
    expect(bob.locator("[data-testid=result]")).to_contain_text("You win on time")
    expect(carol.locator("[data-testid=result]")).to_contain_text("O (Bob) wins on time")
    for page in (alice, bob, carol):
        expect(page.locator("[data-testid=clock-0]")).to_have_text("0:00.0")
        expect(page.locator("[data-testid=status]")).to_have_text("Game over.")
        # "Game over." is said once, not again in the result line.
        expect(page.locator("[data-testid=result]")).not_to_contain_text("Game over")
    expect(alice.locator("[data-testid=resign]")).to_be_hidden()


# -- (2) a draw offer: declined once, then accepted ----------------------------------------------


def test_draw_offer_declined_then_accepted(live_server: Any, new_page: NewPage) -> None:
    alice, bob, _ = two_players(new_page, live_server.http_url)
    play(alice, "1")
    play(bob, "5")

    alice.click("[data-testid=offer-draw]")
    expect(alice.locator("[data-testid=offer-draw]")).to_be_disabled()
    expect(alice.locator("[data-testid=offer]")).to_contain_text("You offered a draw")
    expect(bob.locator("[data-testid=offer]")).to_contain_text("X (Alice) offers a draw")
    bob.click("[data-testid=draw-decline]")
    expect(alice.locator("[data-testid=offer-notice]")).to_contain_text("declined the draw offer")
    expect(bob.locator("[data-testid=offer-draw]")).to_be_enabled()
    expect(bob.locator("[data-testid=draw-accept]")).to_have_count(0)

    # A move later, Bob offers and Alice accepts in her page.
    play(alice, "9")
    bob.click("[data-testid=offer-draw]")
    expect(alice.locator("[data-testid=offer]")).to_contain_text("O (Bob) offers a draw")
    alice.click("[data-testid=draw-accept]")
    for page in (alice, bob):
        result = page.locator("[data-testid=result]")
        expect(result).to_contain_text("Draw agreed")
        expect(result).to_have_attribute("data-outcome", "draw")
        expect(page.locator("[data-testid=offer]")).to_be_hidden()


def test_draw_offer_to_the_ai_is_answered_at_once(live_server: Any, new_page: NewPage) -> None:
    from tests.client.test_browser import create_game

    page = new_page()
    create_game(page, live_server.http_url, "tictactoe", "ai:1", seat="0")
    play(page, "5")
    expect(page.locator("[data-testid=move-2]")).to_be_visible()
    page.click("[data-testid=offer-draw]")
    # The AI accepts or declines from its evaluation, in the same step.
    answer = page.locator("[data-testid=offer-notice], [data-testid=result]")
    expect(answer.first).to_contain_text(re.compile("declined the draw offer|Draw agreed"))
    if page.locator("[data-testid=result]").is_hidden():
        page.click("[data-testid=resign]")
        page.click("[data-testid=choice-yes]")
        expect(page.locator("[data-testid=result]")).to_contain_text("You lose: you resigned")


# -- (2b) a takeback, an abort, a claim ------------------------------------------------------


def test_takeback_then_abort(live_server: Any, new_page: NewPage) -> None:
    alice, bob, _ = two_players(new_page, live_server.http_url)
    expect(alice.locator("[data-testid=takeback]")).to_be_hidden()  # nothing to take back
    play(alice, "1")
    alice.click("[data-testid=takeback]")
    expect(bob.locator("[data-testid=offer]")).to_contain_text("X (Alice) asks to take back")
    bob.click("[data-testid=takeback-accept]")
    for page in (alice, bob):
        expect(page.locator("[data-testid=cell-1]")).to_have_attribute("data-mark", "")
        expect(page.locator("[data-testid=move-1]")).to_have_count(0)
    # Not both sides have moved: the game may still be aborted, after a confirmation.
    expect(bob.locator("[data-testid=abort]")).to_be_visible()
    bob.click("[data-testid=abort]")
    bob.click("[data-testid=abort-yes]")
    for page in (alice, bob):
        expect(page.locator("[data-testid=result]")).to_have_text(re.compile("^Game aborted\\."))
        expect(page.locator("[data-testid=result]")).to_have_attribute("data-outcome", "aborted")
        expect(page.locator("[data-testid=abort]")).to_be_hidden()


def test_claim_the_win_when_the_opponent_has_gone(
    redis_server: EmbeddedRedis, new_page: NewPage
) -> None:
    # A node of its own, where a claim is allowed 4 s after a disconnect.
    node = start_server(redis_server.url, extra_env={"KIBITZ_CLAIM_AFTER_MS": "4000"})
    try:
        alice, bob, _ = two_players(new_page, node.http_url)
        play(alice, "1")
        play(bob, "5")
        bob.context.close()  # Bob's browser goes away
        claim = alice.locator("[data-testid=claim]")
        expect(claim).to_contain_text("O (Bob) has left the game")
        expect(claim).to_contain_text("you may claim the win")
        expect(alice.locator("[data-testid=claim-win]")).to_be_visible(timeout=20_000)
        expect(alice.locator("[data-testid=claim-draw]")).to_be_visible()
        alice.click("[data-testid=claim-win]")
        result = alice.locator("[data-testid=result]")
        expect(result).to_contain_text("You win: O left the game")
        expect(claim).to_be_hidden()
    finally:
        node.stop()


# -- (3) a rematch: both players land in the new room with the colours swapped ------------------


def test_rematch_swaps_colours_and_spectators_follow(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob, room = two_players(new_page, base)
    carol = new_page()
    watch(carol, base, room)
    for cell, page in [("1", alice), ("4", bob), ("2", alice), ("5", bob), ("3", alice)]:
        play(page, cell)
    # Carol is counted as a watcher on every page; she sees a "watching" label, they do not.
    for page in (alice, bob, carol):
        expect(page.locator("[data-testid=watchers]")).to_have_attribute("data-count", "1")
    expect(carol.locator("[data-testid=watching-label]")).to_be_visible()
    expect(alice.locator("[data-testid=watching-label]")).to_be_hidden()
    expect(alice.locator("[data-testid=result]")).to_contain_text("You win: three in a row")
    expect(bob.locator("[data-testid=result]")).to_contain_text("You lose: three in a row")
    # The winning line is highlighted on every page.
    for page in (alice, bob, carol):
        expect(page.locator("[data-testid^=cell-][data-win=true]")).to_have_count(3)
        for cell in "123":
            expect(page.locator(f"[data-testid=cell-{cell}]")).to_have_attribute("data-win", "true")

    alice.click("[data-testid=rematch]")
    expect(bob.locator("[data-testid=offer]")).to_contain_text("X (Alice) offers a rematch")
    expect(carol.locator("[data-testid=offer]")).to_contain_text("offers a rematch")
    bob.click("[data-testid=rematch-accept]")

    for page in (alice, bob, carol):
        page.wait_for_function(
            "old => window.kibitz.state && window.kibitz.state.room !== old",
            arg=room,
            timeout=15_000,
        )
    new_room = alice.evaluate("window.kibitz.state.room")
    assert bob.evaluate("window.kibitz.state.room") == new_room
    assert carol.evaluate("window.kibitz.state.room") == new_room
    assert alice.url.endswith(f"/?room={new_room}") and bob.url.endswith(f"/?room={new_room}")
    assert carol.url.endswith(f"/?watch={new_room}")
    # Colours swapped: Bob is X now and moves first; Alice plays O.
    expect(bob.locator("[data-testid=seat-0]")).to_contain_text("Bob")
    expect(bob.locator("[data-testid=seat-0]")).to_contain_text("you")
    expect(alice.locator("[data-testid=seat-1]")).to_contain_text("Alice")
    expect(alice.locator("[data-testid=seat-1]")).to_contain_text("you")
    assert alice.evaluate("window.kibitz.you") == 1 and bob.evaluate("window.kibitz.you") == 0
    expect(carol.locator("[data-testid=watching-label]")).to_be_visible()
    # The new game is played with the tokens the players already held.
    play(bob, "5")
    for page in (alice, carol):
        expect(page.locator("[data-testid=cell-5]")).to_have_attribute("data-mark", "x")
    play(alice, "1")
    # A reload finds the seat in the new room too (the token was stored for it).
    alice.reload()
    expect(alice.locator("[data-testid=seat-1]")).to_contain_text("you")
    expect(alice.locator("[data-testid=cell-1]")).to_have_attribute("data-mark", "o")


# -- (4) chat: the players' channel and the spectators' ----------------------------------------


def chat(page: Page, text: str) -> None:
    page.fill("[data-testid=chat-input]", text)
    page.click("[data-testid=chat-send]")


def chat_lines(page: Page) -> list[str]:
    lines: list[str] = page.locator("[data-testid=chat] [data-testid=chat-line]").all_inner_texts()
    return lines


def test_chat_players_and_spectators_apart_and_as_text(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob, room = two_players(new_page, base)
    carol, dave = new_page(), new_page()
    watch(carol, base, room)
    watch(dave, base, room)
    assert alice.get_attribute("[data-testid=chat-input]", "maxlength") == "300"

    chat(alice, "<b>x</b>")
    for page in (alice, bob):
        line = page.locator("[data-testid=chat-line]").last
        expect(line).to_contain_text("<b>x</b>")  # shown as the text typed
        expect(line).to_contain_text("Alice")
        assert page.locator("[data-testid=chat] b").count() == 0  # never parsed as HTML
    chat(bob, "good luck")
    expect(alice.locator("[data-testid=chat-line]").last).to_contain_text("good luck")

    chat(carol, "<i>hi</i> from the stands")
    expect(dave.locator("[data-testid=chat-line]").last).to_contain_text(
        "<i>hi</i> from the stands"
    )
    assert dave.locator("[data-testid=chat] i").count() == 0
    expect(carol.locator("[data-testid=chat-channel]")).to_contain_text("spectators")
    expect(alice.locator("[data-testid=chat-channel]")).to_contain_text("opponent")
    # The channels stay apart: spectators do not see the players' lines, nor the reverse.
    time.sleep(1)
    assert not any("<b>x</b>" in line for line in chat_lines(carol) + chat_lines(dave))
    assert not any("stands" in line for line in chat_lines(alice) + chat_lines(bob))

    # A reload gets the channel's lines back from the server.
    bob.reload()
    expect(bob.locator("[data-testid=chat-line]").first).to_contain_text("<b>x</b>")

    # Too many lines too fast: the page says so in words, with the code as detail.
    for i in range(7):
        chat(dave, f"spam {i}")
    error = dave.locator("[data-testid=chat-error]")
    expect(error).to_be_visible()
    expect(error).to_contain_text("too fast")
    expect(error).to_have_attribute("data-code", "chat/rate")


# -- (5) a seek posted in the lobby and accepted by someone else --------------------------------


def test_seek_posted_and_accepted(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob = new_page(), new_page()
    open_lobby(alice, base)
    alice.click("[data-testid=game-tictactoe]")
    alice.select_option("[data-testid=opponent]", "human")  # a challenge is for a person
    alice.select_option("[data-testid=seat-choice]", "1")
    alice.select_option("[data-testid=time-control]", "3+2")
    alice.fill("[data-testid=name]", "Alice")
    alice.click("[data-testid=post-seek]")
    mine = alice.locator("[data-testid^=seek-]", has=alice.locator("[data-testid^=cancel-]"))
    expect(mine).to_have_count(1)
    seek = (mine.get_attribute("data-testid") or "")[len("seek-") :]

    open_lobby(bob, base)
    offered = bob.locator(f"[data-testid=seek-{seek}]")
    expect(offered).to_contain_text("Alice")
    expect(offered).to_contain_text("3+2")
    bob.fill("[data-testid=name]", "Bob")
    bob.click(f"[data-testid=accept-{seek}]")

    # Both are seated at once: Bob as X (Alice asked for O), on a 3+2 clock.
    for page in (alice, bob):
        expect(page.locator(f"{BOARD}[data-game=tictactoe][data-status=playing]")).to_be_visible()
        expect(page.locator("[data-testid=clock-0]")).to_have_text("3:00")
    room = alice.evaluate("window.kibitz.state.room")
    assert bob.evaluate("window.kibitz.state.room") == room
    assert alice.evaluate("window.kibitz.you") == 1 and bob.evaluate("window.kibitz.you") == 0
    play(bob, "5")
    expect(alice.locator("[data-testid=cell-5]")).to_have_attribute("data-mark", "x")
    # The lobby lists the game to watch, with its time control.
    carol = new_page()
    open_lobby(carol, base)
    expect(carol.locator(f"[data-testid=room-{room}]")).to_contain_text("3+2")
    # The seek is gone from the lobby.
    open_lobby(bob, base)
    expect(bob.locator(f"[data-testid=seek-{seek}]")).to_have_count(0)


# -- (6) the end of a game in words and on the boards, from hand-made states --------------------

WORDS_SCRIPT = """
async (cases) => {
  const { describeResult } = await import("/static/result.js");
  return cases.map(([state, sides, you, names]) =>
    describeResult(state, sides, you, names || sides));
}
"""

WB = ["White", "Black"]


def test_result_words_from_each_side(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    on_time = {"game": "chess", "result": {"winner": 1, "reason": "White ran out of time"}}
    resigned = {"game": "chess", "result": {"winner": 0, "reason": "Black resigned"}}
    othello_rows = [["b"] * 8 for _ in range(5)] + [["w"] * 8 for _ in range(3)]
    cases: list[list[Any]] = [
        [on_time, WB, 0],
        [on_time, WB, 1],
        [on_time, WB, None, ["White (ann)", "Black (bob)"]],
        [resigned, WB, 0],
        [resigned, WB, 1],
        [{"game": "chess", "result": {"winner": None, "reason": "draw agreed"}}, WB, 0],
        [{"game": "chess", "result": {"winner": None, "reason": "aborted"}}, WB, 1],
        [{"game": "chess", "result": {"winner": 1, "reason": "White left the game"}}, WB, 1],
        [
            {
                "game": "chess",
                "result": {
                    "winner": None,
                    "reason": "draw: White ran out of time and Black cannot win",
                },
            },
            WB,
            0,
        ],
        [
            {"game": "matches", "result": {"winner": 1, "reason": "took the last match"}},
            ["First", "Second"],
            0,
        ],
        [
            {"game": "matches", "result": {"winner": 1, "reason": "took the last match"}},
            ["First", "Second"],
            1,
        ],
        [
            {
                "game": "othello",
                "result": {"winner": 0, "reason": "more discs"},
                "view": {"rows": othello_rows},
            },
            ["Black", "White"],
            1,
        ],
        [
            {
                "game": "oware",
                "result": {"winner": 0, "reason": "no move can feed (26-22)"},
                "view": {"south": [0, 0, 0, 0, 0, 6], "north": [0] * 6, "stores": [20, 22]},
            },
            ["South", "North"],
            0,
        ],
    ]
    texts = [out["text"] for out in page.evaluate(WORDS_SCRIPT, cases)]
    assert texts == [
        "You lose on time.",
        "You win on time.",
        "Black (bob) wins on time.",
        "You win: Black resigned.",
        "You lose: you resigned.",
        "Draw agreed.",
        "Game aborted.",
        "You win: White left the game.",
        "Draw: you ran out of time and Black cannot win.",
        "You lose: you took the last match.",
        "You win: First took the last match.",
        "You lose: more discs (Black 40, White 24 discs).",
        "You win: no move can feed (South 26, North 22 seeds).",
    ]


BOARD_SCRIPT = """
async ({game, view, prevView, lastMove, state, legal}) => {
  const board = await import(`/static/boards/${game}.js`);
  const root = document.createElement("div");
  root.className = "board";
  document.body.append(root);
  board.render(root, {
    state: {to_move: 0, players: ["A", "B"], status: "over", legal_moves: [], ...state},
    view, prevView, legal: legal || [], flipped: false, you: 0, canMove: true, lastMove, ui: {},
    play: () => {}, choose: async () => null, rerender: () => {},
  });
  const marked = (attr) =>
    [...root.querySelectorAll(`[data-${attr}=true]`)].map((e) => e.dataset.testid);
  const text = (id) => {
    const n = root.querySelector(`[data-testid=${id}]`);
    return n ? n.textContent : null;
  };
  const out = {win: marked("win"), captured: marked("captured"), store0: text("store-0"),
               store1: text("store-1"), facts: root.textContent};
  root.remove();
  return out;
}
"""


def render_board(page: Page, **args: Any) -> dict[str, Any]:
    out: dict[str, Any] = page.evaluate(
        BOARD_SCRIPT, {"prevView": None, "lastMove": None, "state": {}, **args}
    )
    return out


def test_boards_show_how_the_game_ended(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    # Tic-tac-toe: the winning line.
    rows = [["x", "o", ""], ["o", "x", ""], ["", "", "x"]]
    out = render_board(page, game="tictactoe", view={"kind": "grid", "rows": rows}, lastMove="9")
    assert out["win"] == ["cell-1", "cell-5", "cell-9"]
    # Draughts: the men a capture took, from the board before it...
    before = draughts_rows({37: "w", 32: "b", 22: "b", 10: "b"})
    after = draughts_rows({17: "w", 10: "b"})
    out = render_board(
        page, game="draughts", view={"kind": "draughts", "rows": after},
        prevView={"kind": "draughts", "rows": before}, lastMove="37x17",
    )  # fmt: skip
    assert sorted(out["captured"]) == ["sq-22", "sq-32"]
    # ... or, with no board before it, the men jumped over in the path.
    out = render_board(
        page, game="draughts", view={"kind": "draughts", "rows": after}, lastMove="37x28x17"
    )
    assert sorted(out["captured"]) == ["sq-22", "sq-32"]
    # Oware counted out: the stores show the seeds left on each side too, as the result does.
    view: dict[str, Any] = {
        "kind": "oware",
        "south": [0, 0, 0, 0, 0, 6],
        "north": [0] * 6,
        "stores": [20, 22],
    }
    over = {"result": {"winner": 0, "reason": "no move can feed (26-22)"}}
    out = render_board(page, game="oware", view=view, state=over)
    assert out["store0"].startswith("26") and out["store1"].startswith("22")
    # Matches: an empty heap offers no "take 1-0".
    view = {"kind": "heap", "heap": 0, "max_take": 0, "variant": "standard", "last_take": 0}
    out = render_board(page, game="matches", view=view)
    assert "take 1" not in out["facts"] and "0 matches left" in out["facts"]


def test_arrow_keys_move_the_focus_on_the_board(live_server: Any, new_page: NewPage) -> None:
    from tests.client.test_browser import create_game

    page = new_page()
    create_game(page, live_server.http_url, "tictactoe", "ai:1", seat="0")
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    page.focus("[data-testid=cell-5]")
    moves = {
        "ArrowRight": "cell-6",
        "ArrowDown": "cell-9",
        "ArrowLeft": "cell-8",
        "ArrowUp": "cell-5",
    }
    for key, cell in moves.items():
        page.keyboard.press(key)
        assert page.evaluate("document.activeElement.dataset.testid") == cell
    page.keyboard.press("Enter")  # plays the focused cell
    expect(page.locator("[data-testid=cell-5]")).to_have_attribute("data-mark", "x")
    page.click("[data-testid=resign]")
    page.click("[data-testid=choice-yes]")
    expect(page.locator("[data-testid=result]")).to_contain_text("You lose: you resigned")
