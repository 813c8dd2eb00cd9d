"""Words of the game screen that say something true (issue 22): no "Offer a draw" in a game
that has no draw (matches), and against the computer the chat does not say "with your
opponent". Real server, real workers, headless Chromium; English, the tests' language.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.client.test_browser import NewPage, create_game, resign

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
