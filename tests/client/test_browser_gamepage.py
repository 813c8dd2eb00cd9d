"""The game page and "My games" in headless Chromium against the real server: play a short
game to the end, open its page from the end screen, step through it with the buttons and
the arrow keys, find its export links, and find it under "My games"."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from kibitz.client.connection import KibitzClient, new_player_key, newer_than
from tests.client.test_browser import (
    PLAYABLE_CELL,
    NewPage,
    create_game,
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
    room = page.evaluate("window.kibitz.state.room")
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
    expect(page.locator("[data-testid=replay-seat-1]")).to_contain_text("AI level 1")
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
    for _ in range(20):
        page.goto(base + "/")
        try:
            expect(item).to_be_visible(timeout=1500)
            break
        except AssertionError:
            continue
    expect(item).to_be_visible()
    expect(item).to_contain_text("AI level 1")
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
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, play()).result(timeout=60)


def test_a_chess_game_page_offers_pgn(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = chess_game(base)
    page = new_page()
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-result]")).to_have_text(
        "Black (Anonymous) wins: checkmate."
    )
    expect(page.locator("[data-testid=replay-move-4]")).to_have_text("Qh4#")
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
    expect(page.locator("[data-testid=replay-title]")).to_have_text("No such game")
    expect(page.locator("[data-testid=error]")).to_be_visible()
