"""The steps the browser tests share: open the lobby, fill its form and create a game, have a
second page join it, wait for the board, read ``window.kibitz.state``, resign, save a
screenshot, run Python clients beside the page.

Each step is what a person does in the page (clicks, choices, a link followed) and waits
until the page shows it is done; the tests make their own checks. Pages come from the
``new_page`` fixture (tests/client/conftest.py): one browser context each, so each page is
a different visitor with its own localStorage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from playwright.sync_api import Locator, Page, expect

NewPage = Callable[[], Page]
T = TypeVar("T")

BOARD = "[data-testid=board]"
PLAYABLE_CELL = "[data-testid^=cell-]:not([disabled])"
LOBBY_READY = "[data-testid=game-tictactoe]"  # the game cards are drawn: the lobby is up
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results" / "screenshots"
# Set before the page loads: the page's language is French (i18n.js reads it).
FRENCH = "try { localStorage.setItem('kibitz:lang', 'fr'); } catch (e) {}"


# -- the lobby and its create form -----------------------------------------------------------------


def open_lobby(page: Page, base: str) -> None:
    page.goto(base + "/")
    wait_for_lobby(page)


def wait_for_lobby(page: Page) -> None:
    """After a reload or a navigation: wait until the lobby's game cards are drawn."""
    page.wait_for_selector(LOBBY_READY)


def fill_create_form(
    page: Page,
    game: str,
    opponent: str,
    seat: str = "0",
    *,
    time_control: str | None = None,
    name: str | None = None,
    position: str | None = None,
) -> None:
    """On the lobby: choose the game, the opponent ("human", "ai:1"...), the seat, and when
    given the time control ("3+2", "d1"), the player's name and a start position."""
    page.click(f"[data-testid=game-{game}]")
    page.select_option("[data-testid=opponent]", opponent)
    page.select_option("[data-testid=seat-choice]", seat)
    if time_control is not None:
        page.select_option("[data-testid=time-control]", time_control)
    if name:
        page.fill("[data-testid=name]", name)
    if position:
        page.click("summary")
        page.fill("[data-testid=start-position]", position)


def start_game(page: Page, game: str, until: str = "data-version") -> None:
    """Click "Create game" and wait for the game's board (`until`: the attribute the board
    must have first, "data-version" for any snapshot, "data-turn=you" for our turn)."""
    page.click("[data-testid=create]")
    page.wait_for_selector(f"{BOARD}[data-game={game}][{until}]")


def create_game(
    page: Page,
    base: str,
    game: str,
    opponent: str,
    seat: str = "0",
    name: str | None = None,
    *,
    time_control: str | None = None,
    position: str | None = None,
) -> None:
    """Open the lobby, fill its form and create the game; returns once its board is drawn."""
    open_lobby(page, base)
    fill_create_form(
        page, game, opponent, seat, time_control=time_control, name=name, position=position
    )
    start_game(page, game)


# -- a second player -------------------------------------------------------------------------------


def open_invite(page: Page, link: str, name: str | None = None) -> None:
    """Follow an invite link (``?room=ID``) and type the name to join with, if any."""
    page.goto(link)
    if name:
        page.fill("[data-testid=join-name]", name)


def join_seat(page: Page, link: str, name: str | None = None) -> None:
    """Follow an invite link and take the free seat; returns once the join banner is gone."""
    open_invite(page, link, name)
    page.click("[data-testid=join-seat]")
    expect(page.locator("[data-testid=join-banner]")).to_be_hidden()


def game_for_two(
    host: Page,
    guest: Page,
    base: str,
    game: str,
    *,
    time_control: str | None = None,
    names: tuple[str | None, str | None] = (None, None),
    position: str | None = None,
) -> str:
    """`host` creates a game against a person (the first seat) and `guest` joins it through
    the host's invite link; the room id."""
    create_game(
        host, base, game, "human", "0", names[0], time_control=time_control, position=position
    )
    join_seat(guest, host.input_value("[data-testid=invite-link]"), names[1])
    return room_of(host)


# -- the page's state ------------------------------------------------------------------------------


def state_of(page: Page) -> dict[str, Any]:
    """The snapshot on screen (``window.kibitz.state``)."""
    state: dict[str, Any] = page.evaluate("window.kibitz.state")
    return state


def room_of(page: Page) -> str:
    """The id of the room on screen."""
    return str(page.evaluate("window.kibitz.state.room"))


def version(page: Page) -> int:
    return int(page.get_attribute(BOARD, "data-version") or "-1")


def wait_version_above(page: Page, seen: int) -> None:
    page.wait_for_function(
        "v => Number(document.querySelector('[data-testid=board]').dataset.version) > v", arg=seen
    )


def wait_my_turn_or_over(page: Page) -> bool:
    """True when it is this page's turn, False when the game is over."""
    page.wait_for_function(
        """() => !document.querySelector('[data-testid=result]').hidden
                 || document.querySelector('[data-testid=board]').dataset.turn === 'you'"""
    )
    return page.is_hidden("[data-testid=result]")


def marks(page: Page) -> list[str]:
    cells = page.query_selector_all("[data-testid^=cell-]")
    return [cell.get_attribute("data-mark") or "" for cell in cells]


def resign(page: Page) -> None:
    """End an AI game: the server allows only a few unfinished AI games per address."""
    page.click("[data-testid=resign]")
    page.click("[data-testid=choice-yes]")
    expect(page.locator("[data-testid=result]")).to_contain_text("You lose")


def open_lobby_until(page: Page, base: str, item: Locator, tries: int = 20) -> None:
    """Open the lobby again until `item` shows ("My games" is read when the lobby opens,
    and lists a game once it is archived)."""
    for _ in range(tries):
        page.goto(base + "/")
        try:
            expect(item).to_be_visible(timeout=1500)
            break
        except AssertionError:
            continue


# -- hand-made boards ------------------------------------------------------------------------------


def chess_rows(fen: str) -> list[list[str]]:
    rows = []
    for rank in fen.split()[0].split("/"):
        row: list[str] = []
        for char in rank:
            row.extend([""] * int(char) if char.isdigit() else [char])
        rows.append(row)
    return rows


def draughts_rows(pieces: dict[int, str]) -> list[list[str]]:
    rows = [[""] * 10 for _ in range(10)]
    for square, piece in pieces.items():
        r = (square - 1) // 5
        c = (square - 1) % 5 * 2 + (1 if r % 2 == 0 else 0)
        rows[r][c] = piece
    return rows


# -- beside the page -------------------------------------------------------------------------------


def in_french(page: Page) -> Page:
    """The page opens in French from its next load on; the page."""
    page.add_init_script(FRENCH)
    return page


def screenshot(target: Page | Locator, name: str, **options: Any) -> Path:
    """Save a screenshot as test-results/screenshots/<name>.png (at the repository's root)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    target.screenshot(path=str(path), **options)
    return path


def run_client(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run client code beside the page (Playwright's sync API holds this thread's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result(timeout=60)
