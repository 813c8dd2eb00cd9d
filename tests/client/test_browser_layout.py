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
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.client.conftest import TIMEOUT_MS

pytestmark = pytest.mark.browser

GAMES = ["chess", "draughts", "othello", "oware", "kono", "matches", "tictactoe"]
LAPTOP = (1280, 720)
PHONE = (390, 844)
SIZES = [LAPTOP, PHONE]
BOARD = "[data-testid=board]"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results" / "screenshots"

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
    page.goto(base + "/")
    page.wait_for_selector("[data-testid=game-tictactoe]")
    if phone:
        # The lobby's form is compact: "Create game" is on screen before any scrolling.
        assert page.evaluate("window.scrollY") == 0
        assert_on_screen(page, "[data-testid=create]", "the Create game button")
    page.click(f"[data-testid=game-{game}]")
    page.select_option("[data-testid=opponent]", "ai:1")
    page.select_option("[data-testid=seat-choice]", "0")
    page.select_option("[data-testid=time-control]", "3+2")
    if phone:
        # As a person on a phone would: the lobby scrolled down (to its lists) first.
        page.evaluate("window.scrollTo(0, 455)")
    page.click("[data-testid=create]")
    page.wait_for_selector(f"{BOARD}[data-game={game}][data-version]")
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


def resign(page: Page) -> None:
    page.click("[data-testid=resign]")
    page.click("[data-testid=choice-yes]")
    expect(page.locator("[data-testid=result]")).to_contain_text("You lose")


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
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{game}-{size[0]}x{size[1]}.png"))

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
        a.goto(base + "/")
        a.wait_for_selector("[data-testid=game-tictactoe]")
        a.click("[data-testid=game-chess]")
        a.select_option("[data-testid=opponent]", "human")
        a.select_option("[data-testid=seat-choice]", "0")
        a.select_option("[data-testid=time-control]", "3+2")
        a.fill("[data-testid=name]", "Alice")
        a.click("[data-testid=create]")
        a.wait_for_selector(f"{BOARD}[data-game=chess][data-version]")
        room = a.evaluate("window.kibitz.state.room")

        b.goto(f"{base}/?room={room}")
        b.fill("[data-testid=join-name]", "Bob")
        b.click("[data-testid=join-seat]")
        expect(b.locator("[data-testid=join-banner]")).to_be_hidden()
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
        b.screenshot(path=str(SCREENSHOTS / "chess-offer-1280x720.png"))

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
