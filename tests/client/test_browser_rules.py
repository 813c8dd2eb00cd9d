"""The rules panel ("How to play", client/static/rules.js) in headless Chromium against the
real server: it opens from every lobby card and from the game screen of every game, shows
the rules in sections with at least one diagram that has a text alternative, the level
table with a rating for each of the 8 levels (the catalogue's ``rating``), closes with
Escape or its Close button giving the focus back, and speaks French in French.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from kibitz.shared.games import available_games
from kibitz.shared.search.strength import catalog_levels
from tests.client.steps import NewPage, create_game, in_french, open_lobby, screenshot

pytestmark = pytest.mark.browser

GAMES = [game.name for game in available_games()]
PANEL = "[data-testid=rules]"

# One sentence per game the rules must say (from the brief of issue 22), in English.
MUST_SAY = {
    "oware": ["counter-clockwise", "skipped", "2 or 3", "captures nothing", "must play a move"],
    "kono": ["cannot move", "lose", "third time", "100 moves"],
    "matches": ["takes the last match loses", "1, 2 or 3"],
    "draughts": ["compulsory", "the most pieces", "kings fly", "becomes a king"],
    "chess": ["check", "Castling", "En passant", "Promotion", "stalemate", "third time"],
    "othello": ["turned over", "must pass"],
    "tictactoe": ["three", "draw"],
}


def _shot(page: Page, name: str) -> None:
    screenshot(page, f"rules-{name}")


def expected_ratings(game: str) -> list[str]:
    """The level table's words: "about N", the catalogue's rating rounded to 10 (as the
    opponent list shows it; half up, as JavaScript's Math.round)."""
    return [
        f"about {math.floor(level['rating'] / 10 + 0.5) * 10}" for level in catalog_levels(game)
    ]


def check_panel(page: Page, game: str) -> None:
    panel = page.locator(PANEL)
    expect(panel).to_be_visible()
    expect(panel).to_have_attribute("data-game", game)
    # A modal dialog: the page behind is inert.
    assert page.evaluate("document.querySelector('#rules-dialog').matches(':modal')")
    # The sections of the rules, one of them the goal, and the levels.
    expect(panel.locator("section[data-part=goal] p")).not_to_have_count(0)
    expect(panel.locator("section[data-part=end] p")).not_to_have_count(0)
    # At least one diagram, an SVG image with a text alternative and a caption.
    figures = panel.locator("[data-testid=rules-diagram]")
    assert figures.count() >= 1, game
    for i in range(figures.count()):
        image = figures.nth(i).locator("svg[role=img]")
        expect(image).to_have_count(1)
        label = image.get_attribute("aria-label") or ""
        assert len(label) > 30 and not label.startswith("rules."), (game, label)
        expect(figures.nth(i).locator("figcaption")).not_to_be_empty()
    # Eight levels, each with its number (level 1 too).
    ratings = panel.locator("[data-testid^=rules-rating-]")
    expect(ratings).to_have_count(8)
    expect(ratings).to_have_text(expected_ratings(game))
    expect(panel.locator("section[data-part=levels]")).to_contain_text("Stockfish")


def test_rules_open_from_every_lobby_card(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    for game in GAMES:
        opener = page.locator(f"[data-testid=rules-{game}]")
        if game == "oware":
            # The keyboard way: focus the card's "How to play" and press Enter.
            opener.focus()
            page.keyboard.press("Enter")
        else:
            opener.click()
        check_panel(page, game)
        text = page.locator(PANEL).inner_text()
        for words in MUST_SAY[game]:
            assert words in text, (game, words)
        _shot(page, game)
        screenshot(page.locator(f"{PANEL} .rules-figures"), f"rules-{game}-diagrams")
        # Escape closes it and the focus goes back to the button that opened it.
        page.keyboard.press("Escape")
        expect(page.locator(PANEL)).to_be_hidden()
        assert page.evaluate(
            "g => document.activeElement && document.activeElement.dataset.rules === g", game
        ), game


def test_rules_open_from_the_game_screen_of_every_game(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    for game in GAMES:
        create_game(page, live_server.http_url, game, "ai:1")
        button = page.locator("#rules-btn")
        expect(button).to_have_attribute("data-rules", game)
        button.click()
        check_panel(page, game)
        if game == "chess":
            _shot(page, "game-chess")
        page.locator("[data-testid=rules-close]").click()
        expect(page.locator(PANEL)).to_be_hidden()
        assert page.evaluate("document.activeElement && document.activeElement.id") == "rules-btn"


def test_rules_speak_french(live_server: Any, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1200, "height": 860}, locale="fr-FR")
    errors: list[str] = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        in_french(page)
        open_lobby(page, live_server.http_url)
        page.locator("[data-testid=rules-oware]").click()
        panel = page.locator(PANEL)
        expect(panel).to_be_visible()
        expect(panel.locator("#rules-title")).to_have_text(re.compile(r"^Comment jouer\u00a0: "))
        text = panel.inner_text()
        for words in (
            "sens inverse des aiguilles",
            "graines",
            "Grand chelem",
            "niveaux de l’ordinateur",
            "environ",
        ):
            assert words in text, words
        for english in ("counter-clockwise", "seeds", "about ", "Levels", "How to play"):
            assert english not in text, english
        expect(panel.locator("[data-testid=rules-close]")).to_have_text("Fermer")
        alt = panel.locator("svg[role=img]").first.get_attribute("aria-label") or ""
        assert "rangées" in alt, alt
        _shot(page, "oware-fr")
        # On a phone the panel fits the screen (its body scrolls).
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_function(
            "() => document.querySelector('#rules-dialog').getBoundingClientRect().width <= 390"
        )
        box = panel.bounding_box()
        assert box is not None
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        assert box["y"] >= 0 and box["y"] + box["height"] <= 844, box
        _shot(page, "oware-fr-phone")
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
    finally:
        context.close()
    assert not errors, errors
