"""Words of the game screen that say something true (issue 22): no "Offer a draw" in a game
that has no draw (matches), and against the computer the chat does not say "with your
opponent". Real server, real workers, headless Chromium; English, the tests' language.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.client.steps import NewPage, create_game, resign, room_of, screenshot

pytestmark = pytest.mark.browser


def test_no_draw_offer_in_matches_and_the_computer_does_not_chat(
    live_server: Any, new_page: NewPage
) -> None:
    page = new_page()
    create_game(page, live_server.http_url, "matches", "ai:1", seat="0")
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    expect(page.locator("[data-testid=resign]")).to_be_visible()
    expect(page.locator("[data-testid=offer-draw]")).to_be_hidden()
    # The players' channel against the computer: nobody to chat with, and it says so.
    channel = page.locator("[data-testid=chat-channel]")
    expect(channel).to_have_text("the computer does not chat")
    expect(channel).not_to_contain_text("opponent")
    expect(page.locator("[data-testid=chat] li").first).to_contain_text(
        "the computer does not chat"
    )
    expect(page.locator("#chat-panel")).to_have_attribute("data-computer", "true")
    page.click("[data-testid=take-1]")
    expect(page.locator("[data-testid=move-2]")).to_be_visible()  # the computer answered
    expect(page.locator("[data-testid=offer-draw]")).to_be_hidden()
    resign(page)

    # A game with draws keeps the button.
    create_game(page, live_server.http_url, "tictactoe", "ai:1", seat="0")
    expect(page.locator("[data-testid=offer-draw]")).to_be_visible()
    expect(page.locator("[data-testid=offer-draw]")).to_have_text("Offer a draw")
    resign(page)


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


def test_matches_on_a_small_phone_and_takebacks_said(live_server: Any, new_page: NewPage) -> None:
    """At 360x640 the three Take buttons sit on one line inside the screen and the board keeps
    its height as matches are taken and taken back; an agreed takeback says so ("Move taken
    back."), a declined one's notice goes at the next move; the game page's replay shows
    the heap without buttons."""
    base = live_server.http_url
    page = new_page()
    page.set_viewport_size({"width": 360, "height": 640})
    create_game(page, base, "matches", "ai:1", seat="0")
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    page.locator("[data-testid=take-3]").scroll_into_view_if_needed()
    boxes = [_box(page, f"[data-testid=take-{n}]") for n in (1, 2, 3)]
    for box in boxes:
        assert box["x"] >= 0 and box["x"] + box["width"] <= 360, boxes
        assert box["y"] >= 0 and box["y"] + box["height"] <= 640, boxes
    assert len({round(box["y"]) for box in boxes}) == 1, boxes  # one line, not stacked
    screenshot(page, "matches-360x640")
    height = _box(page, "[data-testid=board]")["height"]
    page.click("[data-testid=take-1]")
    expect(page.locator("[data-testid=move-2]")).to_be_visible()  # the computer answered
    page.click("[data-testid=takeback]")  # level 1 accepts at once
    expect(page.locator("[data-testid=offer-notice]")).to_have_text("Move taken back.")
    expect(page.locator("[data-testid=move-1]")).to_have_count(0)
    assert _box(page, "[data-testid=board]")["height"] == height
    room = room_of(page)
    resign(page)
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-board] [data-testid=heap]")).to_be_visible()
    expect(page.locator("[data-testid=replay-board] [data-testid^=take-]")).to_have_count(0)
    # Matches is solved: every evaluation is a forced win, so no "Scores in points".
    page.click("[data-testid=replay-analyse]")
    expect(page.locator("[data-testid=replay-analysis]")).to_have_attribute(
        "data-status", "done", timeout=60_000
    )
    status = page.locator("[data-testid=replay-analysis-status]")
    expect(status).to_contain_text("Every position is solved")
    expect(status).not_to_contain_text("points")

    # Level 5 declines a takeback; the notice goes with the next move (not seconds later).
    create_game(page, base, "matches", "ai:5", seat="0")
    page.click("[data-testid=take-1]")
    expect(page.locator("[data-testid=move-2]")).to_be_visible()
    page.click("[data-testid=takeback]")
    notice = page.locator("[data-testid=offer-notice]")
    expect(notice).to_contain_text("declined the takeback")
    page.click("[data-testid=take-1]")
    expect(page.locator("[data-testid=move-3]")).to_be_visible()
    expect(notice).to_have_count(0, timeout=2_000)
    resign(page)


def test_the_chat_heading_and_its_channel_are_apart(live_server: Any, new_page: NewPage) -> None:
    """The chat's heading says "Chat" alone (upper case by style); the channel ("the computer
    does not chat") is a line of its own under it, in ordinary case."""
    page = new_page()
    create_game(page, live_server.http_url, "tictactoe", "ai:1", seat="0")
    channel = page.locator("[data-testid=chat-channel]")
    expect(channel).to_have_text("the computer does not chat")
    expect(page.locator("#chat-title")).to_have_text("Chat")
    assert page.locator("#chat-title [data-testid=chat-channel]").count() == 0
    assert channel.evaluate("node => getComputedStyle(node).textTransform") == "none"
    heading, line = _box(page, "#chat-title"), _box(page, "[data-testid=chat-channel]")
    assert line["y"] >= heading["y"] + heading["height"] - 1  # under the heading
    resign(page)
