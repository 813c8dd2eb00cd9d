"""The game page and "My games" in headless Chromium against the real server: play a short
game to the end, open its page from the end screen, step through it with the buttons and
the arrow keys, find its export links, and find it under "My games" (its length counted as
the game counts moves, the opponent's whole name shown); a game page opened before any
analysis makes no failed request and logs no error; an id with no game says so."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from kibitz.client.connection import KibitzClient, new_player_key, newer_than
from tests.client.steps import (
    PLAYABLE_CELL,
    NewPage,
    create_game,
    open_lobby_until,
    room_of,
    run_client,
    screenshot,
    version,
    wait_my_turn_or_over,
    wait_version_above,
)

pytestmark = pytest.mark.browser

REPLAY_BOARD = "[data-testid=replay-board]"


def ply(page: Page) -> int:
    return int(page.get_attribute(REPLAY_BOARD, "data-ply") or "-1")


def expect_ply(page: Page, wanted: int) -> None:
    expect(page.locator(REPLAY_BOARD)).to_have_attribute("data-ply", str(wanted))
    if wanted:
        expect(page.locator("[data-testid=replay-moves] [aria-current=step]")).to_have_attribute(
            "data-testid", f"replay-move-{wanted}"
        )
    else:
        assert page.locator("[data-testid=replay-moves] [aria-current]").count() == 0


def play_to_the_end(page: Page) -> None:
    """Take the first free cell every turn until the game is over (bounded)."""
    for _ in range(6):
        if not wait_my_turn_or_over(page):
            return
        seen = version(page)
        page.locator(PLAYABLE_CELL).first.click()
        wait_version_above(page, seen)
    raise AssertionError("a tic-tac-toe game lasted more than five of our moves")


def test_a_finished_game_on_its_page_and_in_my_games(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    page = new_page()
    create_game(page, base, "tictactoe", "ai:1", seat="0", name="Ada")
    room = room_of(page)
    play_to_the_end(page)
    moves = len(page.evaluate("window.kibitz.state.moves"))

    page.click("[data-testid=review-link]")
    expect(page.locator("[data-testid=replay]")).to_be_visible()
    assert page.url.endswith(f"?game={room}")
    expect(page.locator("[data-testid=replay-title]")).to_have_text("Tic-tac-toe")
    result = page.locator("[data-testid=replay-result]")
    expect(result).to_have_attribute("data-status", "over")
    expect(result).to_contain_text(re.compile(r"wins: three in a row\.|Draw"))
    expect(page.locator("[data-testid=replay-seat-0]")).to_contain_text("Ada")
    expect(page.locator("[data-testid=replay-seat-1]")).to_contain_text("Computer, level 1")
    # It opens at the final position, every move listed.
    expect_ply(page, moves)
    assert page.locator("[data-testid^=replay-move-]").count() == moves
    expect(page.locator("[data-testid=replay-next]")).to_be_disabled()

    page.click("[data-testid=replay-first]")
    expect_ply(page, 0)
    assert page.locator(f"{REPLAY_BOARD} [data-mark=x], {REPLAY_BOARD} [data-mark=o]").count() == 0
    expect(page.locator("[data-testid=replay-prev]")).to_be_disabled()
    page.click("[data-testid=replay-next]")
    expect_ply(page, 1)
    expect(page.locator(f"{REPLAY_BOARD} [data-mark=x]")).to_have_count(1)
    page.keyboard.press("ArrowRight")
    expect_ply(page, 2)
    expect(page.locator(f"{REPLAY_BOARD} [data-mark=o]")).to_have_count(1)
    page.keyboard.press("ArrowLeft")
    expect_ply(page, 1)
    page.keyboard.press("End")
    expect_ply(page, moves)
    page.click("[data-testid=replay-prev]")
    expect_ply(page, moves - 1)
    page.keyboard.press("Home")
    expect_ply(page, 0)
    page.click("[data-testid=replay-last]")
    expect_ply(page, moves)
    page.click("[data-testid=replay-move-2]")
    expect_ply(page, 2)
    # The AI's move shows the line it expected (kept from the player until the game
    # ended); the player's own moves have none.
    expect(page.locator("[data-testid=replay-line]")).to_contain_text(re.compile(r"expected: \d"))
    page.click("[data-testid=replay-move-1]")
    expect(page.locator("[data-testid=replay-line]")).to_be_hidden()
    # The board is for looking only.
    assert page.locator(PLAYABLE_CELL).count() == 0

    # Tic-tac-toe has no notation of its own: JSON only.
    exports = page.locator("[data-testid=replay-exports] a")
    expect(exports).to_have_count(1)
    href = page.get_attribute("[data-testid=export-json]", "href")
    with urllib.request.urlopen(base + href) as reply:
        assert len(json.load(reply)["moves"]) == moves

    # The lobby lists the game under "My games" (once archived), linking to its page.
    item = page.locator(f"[data-testid=history-{room}]")
    open_lobby_until(page, base, item)
    expect(item).to_be_visible()
    expect(item).to_contain_text("Computer, level 1")
    # Tic-tac-toe counts every mark as a move.
    expect(page.locator(f"[data-testid=history-moves-{room}]")).to_have_text(f"{moves} moves")
    item.locator(f"[data-testid=open-{room}]").click()
    expect(page.locator("[data-testid=replay]")).to_be_visible()
    expect_ply(page, moves)
    # Back to the lobby and forward again through the browser's history.
    page.go_back()
    expect(page.locator("[data-testid=lobby]")).to_be_visible()


def chess_game(base: str) -> str:
    """Fool's mate between two Python clients, with a line on each chat channel (one
    from a spectator); the room id."""

    async def play() -> str:
        a = await KibitzClient.open(base)
        b = await KibitzClient.open(base)
        watcher = await KibitzClient.open(base)
        try:
            room = await a.create("chess", seat=0, name="ann", player_key=new_player_key())
            await b.join(room["room"])
            await watcher.watch(room["room"])
            await a.chat(room["room"], "<b>good luck</b>")
            await watcher.chat(room["room"], "what a move", name="kib")
            for version_, move in enumerate(["f2f3", "e7e5", "g2g4", "d8h4"], start=1):
                mover = a if version_ % 2 else b
                await mover.move(room["room"], move, version_)
                await mover.wait_state(room["room"], newer_than(version_))
            return str(room["room"])
        finally:
            await a.close()
            await b.close()
            await watcher.close()

    # Playwright's sync API runs its own event loop in this thread: the clients get another.
    return run_client(play())


def test_a_chess_game_page_offers_pgn(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = chess_game(base)
    page = new_page()
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-result]")).to_have_text(
        "Black (Anonymous) wins: checkmate."
    )
    expect(page.locator("[data-testid=replay-move-4]")).to_have_text("Qh4#")
    # Nothing was taken in fool's mate: the material boxes (material.js) say no lead.
    expect(page.locator("[data-testid=replay-material-0]")).to_have_attribute("data-diff", "0")
    expect(page.locator("[data-testid=replay-material-1]")).to_have_attribute("data-diff", "0")
    expect(page.locator("[data-testid=replay-exports] a")).to_have_count(2)
    href = page.get_attribute("[data-testid=export-pgn]", "href")
    with urllib.request.urlopen(base + href) as reply:
        assert "Qh4# 0-1" in reply.read().decode()
    # The chat of both channels, in order, as text (the tags show as typed).
    lines = page.locator("[data-testid=replay-chat-line]")
    expect(lines).to_have_count(2)
    expect(lines.nth(0)).to_have_text("ann: <b>good luck</b>")
    expect(lines.nth(0)).to_have_attribute("data-channel", "players")
    expect(lines.nth(1)).to_have_text("kib (watching): what a move")
    expect(lines.nth(1)).to_have_attribute("data-channel", "spectators")
    assert page.locator("[data-testid=replay-chat] b").count() == 0
    page.click("[data-testid=replay-first]")
    expect(page.locator(f"{REPLAY_BOARD} [data-testid=sq-e2]")).to_be_attached()
    page.keyboard.press("ArrowRight")
    expect_ply(page, 1)


def test_an_unknown_game_page_says_so(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    page.goto(f"{live_server.http_url}/?game=nosuchgame")
    expect(page.locator("[data-testid=replay-title]")).to_have_text("No game with this id")
    expect(page.locator("[data-testid=replay-result]")).to_contain_text(
        "There is no game with the id “nosuchgame”"
    )
    # Nothing to step through: the step buttons, the board, the side panels are hidden.
    for part in ("replay-first", "replay-prev", "replay-next", "replay-last", "replay-board"):
        expect(page.locator(f"[data-testid={part}]")).to_be_hidden()
    expect(page.locator("[data-testid=replay-moves]")).to_be_hidden()
    expect(page.locator("[data-testid=replay-analysis]")).to_be_hidden()
    expect(page.locator("#replay-rules-btn")).to_be_hidden()
    # The arrow keys do nothing, and the page says it plainly rather than in a toast.
    page.keyboard.press("ArrowLeft")
    expect(page.locator("[data-testid=error]")).to_be_hidden()
    screenshot(page, "gamepage-missing")
    # Its link goes back to the lobby; a real game opened next shows everything again.
    page.click("[data-testid=replay-missing-lobby]")
    expect(page.locator("[data-testid=lobby]")).to_be_visible()
    room = chess_game(live_server.http_url)
    page.goto(f"{live_server.http_url}/?game={room}")
    expect(page.locator("[data-testid=replay-title]")).to_have_text("Chess")
    expect(page.locator("[data-testid=replay-first]")).to_be_visible()
    expect(page.locator("[data-testid=replay-moves]")).to_be_visible()


def test_an_unanalysed_game_page_makes_no_failed_request(
    live_server: Any, new_page: NewPage
) -> None:
    """Every request of the page answers below 400 and the console logs no error: a game
    never analysed is said so by a 200 ({"status": "none"}), not a 404."""
    room = chess_game(live_server.http_url)
    page = new_page()
    bad: list[str] = []
    page.on("requestfailed", lambda request: bad.append(f"failed {request.url}"))
    page.on(
        "response",
        lambda response: (
            bad.append(f"{response.status} {response.url}") if response.status >= 400 else None
        ),
    )
    page.on(
        "console",
        lambda message: bad.append(f"console {message.text}") if message.type == "error" else None,
    )
    asked: list[int] = []
    page.on(
        "response",
        lambda response: (
            asked.append(response.status)
            if response.url.endswith(f"/api/games/{room}/analysis")
            else None
        ),
    )
    page.goto(f"{live_server.http_url}/?game={room}")
    panel = page.locator("[data-testid=replay-analysis]")
    expect(panel).to_have_attribute("data-status", "none")
    assert asked == [200], asked  # it asked, and was told "none" without an error status
    expect(page.locator("[data-testid=replay-analyse]")).to_be_visible()
    expect(page.locator("#replay-rules-btn")).to_have_attribute("data-rules", "chess")
    # The step label counts chess moves (fool's mate: 2 moves, 4 plies) and names the move.
    expect(page.locator("[data-testid=replay-ply]")).to_have_text("After 2… Qh4# (4 of 4)")
    page.click("[data-testid=replay-first]")
    expect(page.locator("[data-testid=replay-ply]")).to_have_text("Start (2 moves)")
    # "How to play" opens the rules of this game (rules.js).
    page.click("#replay-rules-btn")
    expect(page.locator("#rules-dialog")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#rules-dialog")).to_be_hidden()
    page.wait_for_load_state("networkidle")
    assert not bad, bad


def test_a_live_game_page(live_server: Any, new_page: NewPage) -> None:
    """A game still being played: in progress, a link to watch it, no analysis asked for."""
    base = live_server.http_url
    room = run_client(_opened_chess(base))
    page = new_page()
    asked: list[str] = []
    page.on(
        "request",
        lambda request: asked.append(request.url) if "/analysis" in request.url else None,
    )
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-result]")).to_have_attribute("data-status", "playing")
    expect(page.locator("[data-testid=replay-result]")).to_contain_text("In progress.")
    expect(page.locator("[data-testid=replay-watch]")).to_have_attribute("href", f"?watch={room}")
    expect(page.locator("[data-testid=replay-ply]")).to_have_text("After 1. e4 (1 of 1)")
    expect(page.locator("[data-testid=replay-analysis]")).to_be_hidden()
    page.wait_for_load_state("networkidle")
    assert asked == []


async def _opened_chess(base: str) -> str:
    """A chess game with one move played, left running; the room."""
    a = await KibitzClient.open(base)
    b = await KibitzClient.open(base)
    try:
        room = (await a.create("chess", seat=0, name="ann"))["room"]
        await b.join(room)
        await a.move(room, "e2e4", 1)
        await a.wait_state(room, newer_than(1))
        return str(room)
    finally:
        await a.close()
        await b.close()


def test_my_games_counts_moves_and_shows_whole_names(live_server: Any, browser: Browser) -> None:
    """At 1280 px, "My games" says fool's mate is 2 moves (4 plies) and shows a long opponent
    name whole (its title holds it too); in French, "2 coups"."""
    base = live_server.http_url
    key = new_player_key()
    long_name = "Bartholomew Maximilian Fitzgerald-Smythe"  # 40 characters
    room = run_client(_fools_mate(base, key, long_name))
    for locale, words in (("en-US", "2 moves"), ("fr-FR", "2 coups")):
        context = browser.new_context(viewport={"width": 1280, "height": 800}, locale=locale)
        try:
            context.add_init_script(
                f"localStorage.setItem('kibitz:player', JSON.stringify({{key: {key!r}}}))"
            )
            page = context.new_page()
            item = page.locator(f"[data-testid=history-{room}]")
            open_lobby_until(page, base, item)  # the list is read when the lobby opens
            expect(item).to_be_visible()
            expect(page.locator(f"[data-testid=history-moves-{room}]")).to_have_text(words)
            opponent = page.locator(f"[data-testid=history-opponent-{room}]")
            expect(opponent).to_contain_text(long_name)
            expect(opponent).to_have_attribute("title", long_name)
            # Not cut: nothing of its line is hidden (no ellipsis, no overflow).
            cut = opponent.evaluate(
                """(node) => {
                    const line = node.parentElement;
                    const over = (e) => e.scrollWidth > e.clientWidth + 1;
                    return getComputedStyle(line).textOverflow === "ellipsis" || over(line) ||
                      over(node);
                }"""
            )
            assert not cut, "the opponent's name is cut"
            screenshot(page, f"mygames-{locale}")
        finally:
            context.close()


async def _fools_mate(base: str, key: str, opponent: str) -> str:
    """Fool's mate: the player of ``key`` (White) is mated by ``opponent``; the room."""
    a = await KibitzClient.open(base)
    b = await KibitzClient.open(base)
    try:
        room = (await a.create("chess", seat=1, name=opponent))["room"]
        await b.join(room, player_key=key)
        for version_, move in enumerate(["f2f3", "e7e5", "g2g4", "d8h4"], start=1):
            mover = b if version_ % 2 else a
            await mover.move(room, move, version_)
            await mover.wait_state(room, newer_than(version_))
        return str(room)
    finally:
        await a.close()
        await b.close()


def test_a_game_page_on_a_phone_opens_at_its_top(live_server: Any, new_page: NewPage) -> None:
    """The current move is shown inside the move list's own box: the window never scrolls
    (a 390x844 phone used to open the finished game's page far down, at the move list)."""
    base = live_server.http_url
    room = chess_game(base)
    page = new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/?game={room}")
    expect_ply(page, 4)
    assert page.evaluate("window.scrollY") == 0
    page.keyboard.press("ArrowLeft")
    expect_ply(page, 3)
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    expect_ply(page, 1)
    page.keyboard.press("End")
    expect_ply(page, 4)
    assert page.evaluate("window.scrollY") == 0
