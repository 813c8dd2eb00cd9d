"""The lobby in headless Chromium against the real server: the game cards as a radio group
the arrow keys move, the words of the open challenges for their poster and for others,
"Post in the lobby" with the computer as the opponent, the error toast in words, every
AI level's rating, and the language switch (issue 22, slice H6).
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.client.steps import (
    NewPage,
    create_game,
    fill_create_form,
    open_lobby,
    room_of,
    screenshot,
    wait_for_lobby,
)

pytestmark = pytest.mark.browser

GAMES = ["tictactoe", "matches", "kono", "oware", "othello", "draughts", "chess"]


def shot(page: Page, name: str) -> None:
    screenshot(page, f"lobby-{name}")


def to_ten(rating: float) -> int:
    """A rating rounded to 10 as the page does (JavaScript's Math.round: halves up)."""
    return int(math.floor(rating / 10 + 0.5)) * 10


def card_order(page: Page) -> list[str]:
    script = "cards => cards.map(c => c.dataset.testid.slice('game-'.length))"
    return [str(name) for name in page.eval_on_selector_all(".game-cards [role=radio]", script)]


def expect_chosen(page: Page, game: str) -> None:
    card = page.locator(f"[data-testid=game-{game}]")
    expect(card).to_have_attribute("aria-checked", "true")
    expect(card).to_be_focused()
    expect(card).to_have_attribute("tabindex", "0")
    # One tab stop in the group: every other card is out of the tab order.
    expect(page.locator(".game-cards [role=radio][tabindex='0']")).to_have_count(1)
    expect(page.locator(".game-cards [role=radio][aria-checked=true]")).to_have_count(1)


def test_arrow_keys_move_the_game_selection(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    order = card_order(page)
    assert sorted(order) == sorted(GAMES), order
    page.click(f"[data-testid=game-{order[0]}]")
    expect_chosen(page, order[0])
    page.keyboard.press("ArrowRight")
    expect_chosen(page, order[1])
    page.keyboard.press("ArrowDown")
    expect_chosen(page, order[2])
    page.keyboard.press("ArrowLeft")
    expect_chosen(page, order[1])
    page.keyboard.press("ArrowUp")
    expect_chosen(page, order[0])
    page.keyboard.press("ArrowUp")  # wraps round to the last
    expect_chosen(page, order[-1])
    page.keyboard.press("Home")
    expect_chosen(page, order[0])
    page.keyboard.press("End")
    expect_chosen(page, order[-1])
    # The form follows the choice (its first side), and the choice is kept for the next visit.
    first_side = {"chess": "White", "draughts": "White", "oware": "South"}.get(order[-1])
    if first_side:
        seat = page.locator("[data-testid=seat-choice] option[value='0']")
        expect(seat).to_contain_text(first_side)
    page.reload()
    wait_for_lobby(page)
    expect(page.locator(f"[data-testid=game-{order[-1]}]")).to_have_attribute(
        "aria-checked", "true"
    )

    # Each card has a "How to play" button for the rules panel, reached by Tab from the group.
    for game in GAMES:
        rules = page.locator(f"button[data-rules={game}][data-testid=rules-{game}]")
        expect(rules).to_have_count(1)
        expect(rules).to_have_text("How to play")
    page.locator(f"[data-testid=game-{order[0]}]").click()
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.dataset.rules || ''")
    assert focused == order[0], focused
    # Enter on it opens the rules panel (rules.js listens for any [data-rules]).
    page.keyboard.press("Enter")
    expect(page.locator("[data-testid=rules]")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("[data-testid=rules]")).to_be_hidden()
    shot(page, "cards")


def test_seek_words_for_its_poster_and_for_others(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob = new_page(), new_page()
    open_lobby(alice, base)
    fill_create_form(alice, "chess", "human", seat="0", time_control="10+5", name="Alice")
    alice.click("[data-testid=post-seek]")
    mine = alice.locator("[data-testid^=seek-]", has=alice.locator("[data-testid^=cancel-]"))
    expect(mine).to_have_count(1)
    seek = (mine.get_attribute("data-testid") or "")[len("seek-") :]
    expect(mine).to_contain_text("You play White")
    expect(mine).not_to_contain_text("plays")

    open_lobby(bob, base)
    theirs = bob.locator(f"[data-testid=seek-{seek}]")
    expect(theirs).to_contain_text("Alice plays White")
    expect(theirs).not_to_contain_text("You")
    shot(bob, "seek-others")
    alice.click(f"[data-testid=cancel-{seek}]")
    expect(bob.locator(f"[data-testid=seek-{seek}]")).to_have_count(0)


def test_post_in_the_lobby_is_off_against_the_computer(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    page, watcher = new_page(), new_page()
    open_lobby(page, base)
    open_lobby(watcher, base)
    page.click("[data-testid=game-othello]")
    page.select_option("[data-testid=opponent]", "ai:2")
    button = page.locator("[data-testid=post-seek]")
    hint = page.locator("[data-testid=seek-hint]")
    expect(button).to_be_disabled()
    expect(hint).to_be_visible()
    expect(hint).to_contain_text("for another person")
    expect(button).to_have_attribute("aria-describedby", "seek-hint")
    # Even a click forced through (the handler itself) posts nothing.
    page.evaluate("document.getElementById('seek-btn').disabled = false")
    page.click("[data-testid=post-seek]")
    expect(button).to_be_disabled()
    page.wait_for_timeout(800)
    expect(watcher.locator("#seeks [data-testid^=accept-]")).to_have_count(0)
    expect(page.locator("#seeks [data-testid^=cancel-]")).to_have_count(0)
    shot(page, "seek-computer")
    # A person as the opponent: the button is on again and posts.
    page.select_option("[data-testid=opponent]", "human")
    expect(button).to_be_enabled()
    expect(hint).to_be_hidden()
    page.click("[data-testid=post-seek]")
    expect(watcher.locator("#seeks [data-testid^=accept-]")).to_have_count(1)
    page.locator("#seeks [data-testid^=cancel-]").click()
    expect(watcher.locator("#seeks [data-testid^=accept-]")).to_have_count(0)


def test_the_toast_shows_words_not_a_code(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    page = new_page()
    create_game(page, base, "tictactoe", "ai:1", seat="0")
    room = room_of(page)

    stranger = new_page()
    open_lobby(stranger, base)
    stranger.fill("[data-testid=join-room]", room)
    stranger.click("[data-testid=join]")
    toast = stranger.locator("[data-testid=error]")
    expect(toast).to_be_visible()
    expect(toast).to_contain_text("Both seats are taken")
    expect(toast).to_have_attribute("data-code", "room/full")
    text = toast.inner_text()
    assert "room/full" not in text and "code" not in text.lower(), text
    shot(stranger, "toast")


def test_every_level_of_every_game_has_a_rating(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    catalogue = {g["name"]: g for g in page.evaluate("fetch('/api/games').then(r => r.json())")}
    for game in GAMES:
        page.click(f"[data-testid=game-{game}]")
        options = page.locator("[data-testid=opponent] option[value^='ai:']")
        expect(options).to_have_count(8)
        texts = options.all_inner_texts()
        for level, text in enumerate(texts, start=1):
            match = re.fullmatch(rf"Computer, level {level}, about (\d+)", text.strip())
            assert match, (game, text)
            entry = next(e for e in catalogue[game]["levels"] if e["level"] == level)
            assert int(match.group(1)) == to_ten(entry["rating"]), (game, text, entry)
        assert not any(w in " ".join(texts) for w in ("easiest", "strongest")), texts
        # The scale is explained by the rules panel's levels, one click away.
        help_button = page.locator("[data-testid=levels-help]")
        expect(help_button).to_have_attribute("data-rules", game)
        expect(help_button).to_have_attribute("data-rules-section", "levels")


def test_the_language_switch_reloads_the_lobby_in_french(
    live_server: Any, new_page: NewPage
) -> None:
    base = live_server.http_url
    page = new_page()
    open_lobby(page, base)
    expect(page.locator("html")).to_have_attribute("lang", "en")
    switch = page.locator("#lang-select[data-testid=lang-select]")
    expect(switch).to_have_value("en")
    with page.expect_navigation():
        switch.select_option("fr")
    wait_for_lobby(page)
    expect(page.locator("html")).to_have_attribute("lang", "fr")
    expect(page.locator("#lang-select")).to_have_value("fr")
    assert page.evaluate("localStorage.getItem('kibitz:lang')") == "fr"
    # Spot checks: game names, sides, levels, the seat list, the pill, the lists, the title.
    expect(page.locator("[data-testid=game-tictactoe] .game-name")).to_have_text("Morpion")
    expect(page.locator("[data-testid=game-chess] .game-name")).to_have_text("Échecs")
    expect(page.locator("[data-testid=game-oware] .game-players")).to_have_text("Sud contre Nord")
    expect(page.locator("[data-testid=rules-chess]")).to_have_text("Comment jouer")
    page.click("[data-testid=game-chess]")
    expect(page.locator("[data-testid=opponent] option[value='ai:5']")).to_have_text(
        re.compile(r"^Ordinateur, niveau 5, environ \d+$")
    )
    expect(page.locator("[data-testid=opponent] option[value=human]")).to_have_text(
        "Une personne (lien d'invitation)".replace("'", "\u2019")
    )
    expect(page.locator("[data-testid=seat-choice] option[value='0']")).to_have_text(
        "Blancs (premier coup)"
    )
    expect(page.locator("[data-testid=connection]")).to_have_text("en ligne")
    expect(page.locator("#rooms, #seeks").first).to_contain_text("Aucun")
    assert page.title() == "Salon · kibitz", page.title()
    page.select_option("[data-testid=opponent]", "ai:1")
    expect(page.locator("[data-testid=seek-hint]")).to_contain_text("Un défi du salon")
    # A server error in French words, its code not shown.
    page.fill("[data-testid=join-room]", "nosuchroom42")
    page.click("[data-testid=join]")
    toast = page.locator("[data-testid=error]")
    expect(toast).to_contain_text("Aucune partie ne porte cet identifiant de salle")
    expect(toast).to_have_attribute("data-code", "room/unknown")
    assert "room/unknown" not in toast.inner_text()
    shot(page, "french")
    # And back to English with the same switch.
    with page.expect_navigation():
        page.locator("#lang-select").select_option("en")
    wait_for_lobby(page)
    expect(page.locator("[data-testid=game-tictactoe] .game-name")).to_have_text("Tic-tac-toe")


def test_the_lobby_in_the_dark_scheme_at_1366(live_server: Any, new_page: NewPage) -> None:
    """Dark scheme at 1366x768: the tic-tac-toe icon draws dark lines on its cream square
    (not the scheme's light ink, which left a blank square), and the opponent select shows
    a whole "Computer, level 3, about ..." with no ellipsis."""
    page = new_page()
    page.set_viewport_size({"width": 1366, "height": 768})
    page.emulate_media(color_scheme="dark")
    open_lobby(page, live_server.http_url)
    ink = page.evaluate("getComputedStyle(document.body).color")
    lines = page.eval_on_selector(
        "[data-testid=game-tictactoe] .game-icon", "icon => getComputedStyle(icon).backgroundImage"
    )
    assert "gradient" in lines and ink not in lines, (ink, lines)
    page.click("[data-testid=game-chess]")
    page.select_option("[data-testid=opponent]", "ai:3")
    text_width, room = page.eval_on_selector(
        "#opponent",
        """select => {
            const pen = document.createElement('canvas').getContext('2d');
            pen.font = getComputedStyle(select).font;
            return [pen.measureText(select.selectedOptions[0].text).width,
                    select.clientWidth - 36];
        }""",
    )
    assert text_width <= room, (text_width, room)
    shot(page, "dark-1366")
