"""The game screen fits the viewport (issue 22, "a board that fits"), in headless Chromium
against the real server.

For every game, at 1280x720 (a laptop) and at 390x844 (a phone: touch, mobile, 3x pixels),
a timed game (3+2) against the computer is created from the lobby and, from the elements'
boxes as the page opened it (no scrolling by the test), the board, both clocks and the
action buttons must lie inside the viewport; on the phone the opponent's clock is above the
board and one's own below it, the page opened at its top, and the lobby's "Create game" is on
screen before any scrolling. The result banner must leave the board's box as it was, and so
must an incoming draw offer in a two-player chess game. A screenshot of each game at each
size goes to test-results/screenshots/<game>-<w>x<h>.png (at the repository's root).

One server for the whole module (the session's ``live_server``) and one browser context per
size, reused from game to game, keep the file well under two minutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.client.conftest import TIMEOUT_MS
from tests.client.steps import (
    BOARD,
    fill_create_form,
    game_for_two,
    open_lobby,
    resign,
    screenshot,
    start_game,
)

pytestmark = pytest.mark.browser

GAMES = ["chess", "draughts", "othello", "oware", "kono", "matches", "tictactoe"]
LAPTOP = (1280, 720)
PHONE = (390, 844)
SIZES = [LAPTOP, PHONE]

Box = dict[str, float]


class Visitor:
    """One browser context of a given size, its page and the page's uncaught errors."""

    def __init__(self, browser: Browser, size: tuple[int, int]) -> None:
        width, height = size
        options: dict[str, Any] = {"viewport": {"width": width, "height": height}}
        if size == PHONE:
            options.update(is_mobile=True, has_touch=True, device_scale_factor=3)
        self.size = size
        self.context: BrowserContext = browser.new_context(**options)
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page: Page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def visitors(browser: Browser) -> Iterator[dict[tuple[int, int], Visitor]]:
    made = {size: Visitor(browser, size) for size in SIZES}
    yield made
    for visitor in made.values():
        visitor.close()


def box(page: Page, selector: str) -> Box:
    found = page.locator(selector).bounding_box()
    assert found is not None, f"{selector} is not rendered"
    return {"x": found["x"], "y": found["y"], "width": found["width"], "height": found["height"]}


def assert_on_screen(page: Page, selector: str, what: str) -> Box:
    """`selector`'s box lies wholly inside the viewport, at the scroll the page is at."""
    width, height = page.viewport_size["width"], page.viewport_size["height"]  # type: ignore[index]
    found = box(page, selector)
    inside = (
        found["x"] >= -0.5
        and found["y"] >= -0.5
        and found["x"] + found["width"] <= width + 0.5
        and found["y"] + found["height"] <= height + 0.5
    )
    assert inside, f"{what} ({selector}) is not inside the {width}x{height} viewport: {found}"
    return found


def create_timed_ai_game(page: Page, base: str, game: str, phone: bool) -> None:
    open_lobby(page, base)
    if phone:
        # The lobby's form is compact: "Create game" is on screen before any scrolling.
        assert page.evaluate("window.scrollY") == 0
        assert_on_screen(page, "[data-testid=create]", "the Create game button")
    fill_create_form(page, game, "ai:1", seat="0", time_control="3+2")
    if phone:
        # As a person on a phone would: the lobby scrolled down (to its lists) first.
        page.evaluate("window.scrollTo(0, 455)")
    start_game(page, game)
    expect(page.locator("[data-testid=clock-0]")).to_be_visible()
    expect(page.locator("[data-testid=clock-1]")).to_be_visible()
    expect(page.locator("[data-testid=resign]")).to_be_visible()
    page.wait_for_timeout(150)  # fonts and the board's own layout settle


def visible_actions(page: Page) -> list[str]:
    return list(
        page.eval_on_selector_all(
            "#game .actions button",
            "buttons => buttons.filter((b) => !b.hidden && b.offsetParent !== null)"
            ".map((b) => b.dataset.testid)",
        )
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda size: f"{size[0]}x{size[1]}")
@pytest.mark.parametrize("game", GAMES)
def test_the_game_screen_fits_the_viewport(
    live_server: Any, visitors: dict[tuple[int, int], Visitor], game: str, size: tuple[int, int]
) -> None:
    visitor = visitors[size]
    page = visitor.page
    phone = size == PHONE
    create_timed_ai_game(page, live_server.http_url, game, phone)
    # A new game opens at its top, whatever the lobby's scroll was.
    assert page.evaluate("window.scrollY") == 0
    board = assert_on_screen(page, BOARD, "the board")
    clocks = [
        assert_on_screen(page, f"[data-testid=clock-{seat}]", f"clock {seat}") for seat in (0, 1)
    ]
    actions = visible_actions(page)
    assert "resign" in actions and "abort" in actions, actions
    for testid in actions:
        assert_on_screen(page, f"[data-testid={testid}]", f"the {testid} button")
    if phone:
        # Seat 0 is ours: our clock under the board, the computer's above it; the actions
        # under the board, in reach of a thumb. No hint about arrow keys on a touch screen.
        assert clocks[1]["y"] + clocks[1]["height"] <= board["y"] + 1
        assert clocks[0]["y"] >= board["y"] + board["height"] - 1
        assert box(page, "[data-testid=resign]")["y"] >= board["y"] + board["height"] - 1
        expect(page.locator("#board-help")).to_be_hidden()
    else:
        # Beside the board on a wide screen; the arrow keys hint is shown there.
        for found in clocks:
            assert found["x"] >= board["x"] + board["width"] - 1
        expect(page.locator("#board-help")).to_be_visible()
    if game in ("chess", "draughts", "othello"):
        square = box(page, f"{BOARD} .{game}-board")  # a square board stays square
        assert abs(square["width"] - square["height"]) <= 2, square
    screenshot(page, f"{game}-{size[0]}x{size[1]}")

    # The result banner appears where it moves nothing.
    resign(page)
    assert box(page, BOARD) == board
    assert page.evaluate("window.scrollY") == 0
    assert not visitor.errors, f"uncaught errors in the page: {visitor.errors}"


def test_an_incoming_draw_offer_leaves_the_board_where_it_was(
    live_server: Any, browser: Browser
) -> None:
    base = live_server.http_url
    alice, bob = Visitor(browser, LAPTOP), Visitor(browser, LAPTOP)
    try:
        a, b = alice.page, bob.page
        game_for_two(a, b, base, "chess", time_control="3+2", names=("Alice", "Bob"))
        expect(a.locator("[data-testid=seat-1]")).to_contain_text("Bob")

        a.click("[data-testid=sq-e2]")
        a.click("[data-testid=sq-e4]")
        expect(b.locator("[data-testid=move-1]")).to_have_text("e4")
        b.click("[data-testid=sq-e7]")
        b.click("[data-testid=sq-e5]")
        expect(a.locator("[data-testid=move-2]")).to_have_text("e5")
        b.wait_for_timeout(150)

        before_b, before_a = box(b, BOARD), box(a, BOARD)
        a.click("[data-testid=offer-draw]")
        expect(b.locator("[data-testid=draw-accept]")).to_be_visible()
        expect(a.locator("[data-testid=offer]")).to_be_visible()
        assert box(b, BOARD) == before_b  # the offer did not push Bob's board
        assert box(a, BOARD) == before_a  # nor Alice's, which says it waits
        assert_on_screen(b, "[data-testid=draw-accept]", "the Accept button")
        screenshot(b, "chess-offer-1280x720")

        b.click("[data-testid=draw-accept]")
        expect(b.locator("[data-testid=result]")).to_have_attribute("data-outcome", "draw")
        assert box(b, BOARD) == before_b
        assert not alice.errors and not bob.errors, alice.errors + bob.errors
    finally:
        alice.close()
        bob.close()


def test_my_games_shows_whole_names_at_1280(
    live_server: Any, visitors: dict[tuple[int, int], Visitor]
) -> None:
    """A finished game against the computer (a long opponent name) is listed under "My
    games" at 1280 px wide: no line of the list ends in an ellipsis."""
    page = visitors[LAPTOP].page
    create_timed_ai_game(page, live_server.http_url, "tictactoe", phone=False)
    resign(page)
    page.goto(live_server.http_url + "/")
    page.wait_for_selector("[data-testid^=history-]", timeout=TIMEOUT_MS)
    cut = page.eval_on_selector_all(
        "#history .room-info > *",
        """spans => spans
            .filter((s) => getComputedStyle(s).textOverflow === 'ellipsis'
                           || s.scrollWidth > s.clientWidth + 1)
            .map((s) => s.textContent)""",
    )
    assert cut == []


# -- after the UX review: phones (small, upright, sideways) and the text move box -------------


class Phone(Visitor):
    """A touch phone of any size, in English or French."""

    def __init__(self, browser: Browser, size: tuple[int, int], french: bool = False) -> None:
        from tests.client.steps import in_french

        width, height = size
        self.size = size
        self.context = browser.new_context(
            viewport={"width": width, "height": height},
            is_mobile=True,
            has_touch=True,
            device_scale_factor=2,
        )
        self.context.set_default_timeout(TIMEOUT_MS)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        if french:
            in_french(self.page)


def end_ai_game(page: Page) -> None:
    """Resign, in any language (the result banner shows)."""
    page.click("[data-testid=resign]")
    page.click("[data-testid=choice-yes]")
    expect(page.locator("[data-testid=result]")).to_be_visible()


def assert_board_clocks_and_actions_on_screen(page: Page) -> list[str]:
    assert_on_screen(page, BOARD, "the board")
    for seat in (0, 1):
        assert_on_screen(page, f"[data-testid=clock-{seat}]", f"clock {seat}")
    actions = visible_actions(page)
    assert "resign" in actions, actions
    for testid in actions:
        assert_on_screen(page, f"[data-testid={testid}]", f"the {testid} button")
    return actions


def test_on_a_phone_an_offer_and_the_result_show_under_the_board(
    live_server: Any, browser: Browser
) -> None:
    """At 390x844 the notices come right under the board and one's clock, before the
    actions: an incoming draw offer's Accept and the result banner are on screen without
    scrolling, and neither moves the board."""
    base = live_server.http_url
    alice, bob = Visitor(browser, PHONE), Visitor(browser, PHONE)
    try:
        a, b = alice.page, bob.page
        game_for_two(a, b, base, "chess", time_control="3+2", names=("Alice", "Bob"))
        a.click("[data-testid=sq-e2]")
        a.click("[data-testid=sq-e4]")
        expect(b.locator("[data-testid=move-1]")).to_have_text("e4")
        b.click("[data-testid=sq-e7]")
        b.click("[data-testid=sq-e5]")
        expect(a.locator("[data-testid=move-2]")).to_have_text("e5")
        b.wait_for_timeout(150)
        before = box(b, BOARD)
        a.click("[data-testid=offer-draw]")
        expect(b.locator("[data-testid=draw-accept]")).to_be_visible()
        assert b.evaluate("window.scrollY") == 0
        accept = assert_on_screen(b, "[data-testid=draw-accept]", "the Accept button")
        assert accept["y"] < box(b, "[data-testid=resign]")["y"]  # before the actions
        assert box(b, BOARD) == before
        screenshot(b, "chess-offer-390x844")
        b.click("[data-testid=draw-accept]")
        expect(b.locator("[data-testid=result]")).to_have_attribute("data-outcome", "draw")
        assert_on_screen(b, "[data-testid=result]", "the result banner")
        assert box(b, BOARD) == before
        assert not alice.errors and not bob.errors, alice.errors + bob.errors
    finally:
        alice.close()
        bob.close()


def test_a_small_phone_in_french_fits_the_game_screen(live_server: Any, browser: Browser) -> None:
    """At 360x640 in French the top bar is one line and the board, both clocks and the
    actions are on screen without scrolling."""
    phone = Phone(browser, (360, 640), french=True)
    try:
        page = phone.page
        for game in ("chess", "matches"):
            create_timed_ai_game(page, live_server.http_url, game, phone=False)
            expect(page.locator("[data-testid=resign]")).to_have_text("Abandonner")
            assert page.evaluate("window.scrollY") == 0
            topbar = box(page, ".topbar")
            assert topbar["height"] <= 50, topbar  # one line
            for testid in ("home", "lang-select", "settings", "leaderboard-link", "login-open"):
                assert_on_screen(page, f"[data-testid={testid}]", testid)
            expect(page.locator("[data-testid=leaderboard-link]")).to_have_accessible_name(
                "Classements"
            )
            assert_board_clocks_and_actions_on_screen(page)
            # The computer's whole name ("Ordinateur, niveau 1, environ ...") and the whole
            # game title: they wrap rather than end in an ellipsis.
            cut = page.eval_on_selector_all(
                "#seat-1 .seat-name, #game-title",
                """nodes => nodes
                    .filter((n) => n.scrollWidth > n.clientWidth + 1
                                   || n.scrollHeight > n.clientHeight + 1)
                    .map((n) => n.textContent)""",
            )
            assert cut == [], cut
            screenshot(page, f"{game}-360x640-fr")
            end_ai_game(page)
        assert not phone.errors, phone.errors
    finally:
        phone.close()


def test_a_phone_held_sideways_shows_board_clocks_actions_and_settings(
    live_server: Any, browser: Browser
) -> None:
    """At 844x390 (landscape) the board sits beside a compact column: board, both clocks
    and the actions on screen; the settings dialog's Close button is reachable."""
    phone = Phone(browser, (844, 390))
    try:
        page = phone.page
        create_timed_ai_game(page, live_server.http_url, "chess", phone=False)
        assert page.evaluate("window.scrollY") == 0
        board = box(page, BOARD)
        assert board["height"] >= 300, board
        assert_board_clocks_and_actions_on_screen(page)
        for seat in (0, 1):
            assert box(page, f"[data-testid=clock-{seat}]")["x"] >= board["x"] + board["width"]
        screenshot(page, "chess-844x390")
        page.click("[data-testid=settings]")
        assert_on_screen(page, "[data-testid=settings-close]", "the settings' Close button")
        page.click("[data-testid=settings-close]")
        expect(page.locator("[data-testid=settings-dialog]")).to_be_hidden()
        end_ai_game(page)
        assert not phone.errors, phone.errors
    finally:
        phone.close()


def test_the_text_move_box_is_on_screen_at_1280(
    live_server: Any, visitors: dict[tuple[int, int], Visitor]
) -> None:
    """At 1280x720 the text move box and its feedback are on screen (beside the board, above
    the actions); oware's board is wider than the old 760 px cap, with no gap under it."""
    page = visitors[LAPTOP].page
    for game in ("chess", "oware"):
        create_timed_ai_game(page, live_server.http_url, game, phone=False)
        page.fill("[data-testid=text-move]", "zz9")
        page.press("[data-testid=text-move]", "Enter")
        expect(page.locator("[data-testid=text-move-feedback]")).not_to_be_empty()
        assert_on_screen(page, "[data-testid=text-move]", "the text move field")
        assert_on_screen(page, "[data-testid=text-move-feedback]", "the text move feedback")
        assert_board_clocks_and_actions_on_screen(page)
        if game == "oware":
            assert box(page, BOARD)["width"] > 760
        resign(page)
