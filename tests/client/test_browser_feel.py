"""The feel of the game screen in headless Chromium against the real server: premoves
(played on the turn, dropped when no longer legal, cancelled with Escape), the sounds
(a move, a capture, none when muted, the mute kept across a reload), the move animation
(and none with the animation turned off), and the move confirmation of a correspondence
game.

Every page is its own browser context (its own localStorage, so its own player and
preferences); every move goes through the WebSocket to the real server (``live_server``:
real workers, real Redis). Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import queue
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from kibitz.client.connection import KibitzClient
from tests.client.steps import (
    BOARD,
    NewPage,
    chess_rows,
    create_game,
    draughts_rows,
    game_for_two,
    join_seat,
    open_lobby,
    resign,
    screenshot,
    version,
)

pytestmark = pytest.mark.browser

# Counts, in the page, every element that gets the class "moving" (a piece sliding).
WATCH_MOVING = """() => {
  window.movingSeen = 0;
  new MutationObserver((records) => {
    for (const record of records) {
      const node = record.target;
      if (node.classList && node.classList.contains("moving")) window.movingSeen += 1;
    }
  }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ["class"]});
}"""


def chess_for_two(new_page: NewPage, base: str) -> tuple[Page, Page]:
    """Alice (White) creates a chess room for two people; Bob (Black) joins it."""
    alice, bob = new_page(), new_page()
    game_for_two(alice, bob, base, "chess")
    expect(alice.locator(BOARD)).to_have_attribute("data-status", "playing")
    return alice, bob


def move(page: Page, source: str, target: str) -> None:
    page.click(f"[data-testid=sq-{source}]")
    page.click(f"[data-testid=sq-{target}]")


def sounds(page: Page) -> list[str]:
    return list(page.evaluate("window.kibitz.sounds"))


def set_setting(page: Page, name: str, on: bool) -> None:
    """Turn a switch of the settings dialog on or off, then close the dialog."""
    page.click("[data-testid=settings]")
    dialog = page.locator("[data-testid=settings-dialog]")
    expect(dialog).to_be_visible()
    box = dialog.locator(f"[data-testid=setting-{name}]")
    box.set_checked(on)
    page.click("[data-testid=settings-close]")
    expect(dialog).to_be_hidden()


def test_premoves_sounds_and_animation_in_a_game_of_two(
    live_server: Any, new_page: NewPage
) -> None:
    alice, bob = chess_for_two(new_page, live_server.http_url)
    alice.evaluate(WATCH_MOVING)

    move(alice, "e2", "e4")
    expect(alice.locator("[data-testid=move-1]")).to_have_text("e4")
    assert "move" in sounds(alice)

    # Bob to move: Alice picks d2-d4 now; it shows as her premove, highlighted.
    expect(bob.locator("[data-testid=status]")).to_contain_text("Your move")
    move(alice, "d2", "d4")
    expect(alice.locator("[data-testid=premove]")).to_contain_text("d2d4")
    expect(alice.locator("[data-testid=sq-d2]")).to_have_class(has_class("premove"))
    expect(alice.locator("[data-testid=sq-d4]")).to_have_class(has_class("premove"))
    expect(alice.locator("[data-testid=move-3]")).to_have_count(0)
    screenshot(alice, "feel-premove")

    # Bob answers: Alice's page plays the premove at once, with the new version.
    move(bob, "e7", "e5")
    expect(alice.locator("[data-testid=move-3]")).to_have_text("d4")
    expect(bob.locator("[data-testid=move-3]")).to_have_text("d4")
    expect(alice.locator("[data-testid=premove]")).to_be_hidden()
    # Bob's move slid on Alice's board.
    assert alice.evaluate("window.movingSeen") > 0

    # A premove that the answer makes illegal is dropped, with a short notice.
    move(alice, "d4", "d5")
    expect(alice.locator("[data-testid=premove]")).to_contain_text("d4d5")
    move(bob, "e5", "d4")  # exd4 takes the pawn the premove would have pushed
    expect(alice.locator("[data-testid=move-4]")).to_have_text("exd4")
    expect(alice.locator("[data-testid=premove]")).to_have_attribute("data-state", "dropped")
    expect(alice.locator("[data-testid=status]")).to_contain_text("Your move")
    alice.wait_for_timeout(400)
    expect(alice.locator("[data-testid=move-5]")).to_have_count(0)
    assert sounds(alice)[-1] == "capture"

    # Escape takes a premove back: nothing is played when the turn comes.
    move(alice, "d1", "d4")  # Qxd4
    expect(alice.locator("[data-testid=move-5]")).to_have_text("Qxd4")
    move(alice, "g1", "f3")
    expect(alice.locator("[data-testid=premove]")).to_contain_text("g1f3")
    alice.keyboard.press("Escape")
    expect(alice.locator("[data-testid=premove]")).to_be_hidden()
    expect(alice.locator(".premove")).to_have_count(0)

    # Bob mutes the sounds in the settings; the choice is kept across a reload.
    set_setting(bob, "sound", False)
    bob.reload()
    bob.wait_for_selector(f"{BOARD}[data-game=chess][data-version]")
    expect(bob.locator("[data-testid=sound-toggle]")).to_have_attribute("data-sound", "off")
    bob.click("[data-testid=settings]")
    expect(bob.locator("[data-testid=setting-sound]")).not_to_be_checked()
    bob.click("[data-testid=settings-close]")

    # Alice turns the animation off: Bob's next move does not slide on her board.
    set_setting(alice, "animation", False)
    alice.evaluate("window.movingSeen = 0")
    before = len(sounds(alice))
    move(bob, "b8", "c6")
    expect(alice.locator("[data-testid=move-6]")).to_have_text("Nc6")
    expect(bob.locator("[data-testid=move-6]")).to_have_text("Nc6")
    alice.wait_for_timeout(400)
    assert alice.evaluate("window.movingSeen") == 0
    assert len(sounds(alice)) == before + 1 and sounds(alice)[-1] == "move"
    assert sounds(bob) == []  # muted: no sound at all
    expect(alice.locator("[data-testid=move-7]")).to_have_count(0)  # the cancelled premove


def has_class(name: str) -> re.Pattern[str]:
    """A regular expression matching a class list that holds `name`."""
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def test_correspondence_moves_wait_for_confirm(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    create_game(page, live_server.http_url, "chess", "ai:1", seat="0", time_control="d1")
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    seen = version(page)

    # The move waits on the board for Confirm; Cancel drops it, nothing is sent.
    move(page, "e2", "e4")
    expect(page.locator("[data-testid=confirm-move]")).to_be_visible()
    expect(page.locator("[data-testid=sq-e4]")).to_have_class(has_class("confirm-pending"))
    screenshot(page, "feel-confirm")
    page.wait_for_timeout(500)
    assert version(page) == seen
    expect(page.locator("[data-testid=move-1]")).to_have_count(0)
    page.click("[data-testid=cancel-move]")
    expect(page.locator("[data-testid=confirm-bar]")).to_be_hidden()
    page.wait_for_timeout(300)
    assert version(page) == seen

    # Picked again and confirmed: now it is played, and the computer answers.
    move(page, "e2", "e4")
    page.click("[data-testid=confirm-move]")
    expect(page.locator("[data-testid=move-1]")).to_have_text("e4")
    expect(page.locator("[data-testid=move-2]")).to_be_visible()
    expect(page.locator("[data-testid=confirm-bar]")).to_be_hidden()
    resign(page)


def test_confirmation_always_also_in_an_untimed_game(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    page.click("[data-testid=settings]")
    page.select_option("[data-testid=setting-confirm]", "always")
    page.click("[data-testid=settings-close]")
    create_game(page, live_server.http_url, "chess", "ai:1", seat="0")
    seen = version(page)
    move(page, "e2", "e4")
    expect(page.locator("[data-testid=confirm-move]")).to_be_visible()
    assert version(page) == seen
    page.keyboard.press("Enter")  # the focus is on Confirm
    expect(page.locator("[data-testid=move-1]")).to_have_text("e4")
    resign(page)


# -- the animation on every kind of board, from hand-made views ----------------------------

ANIMATE_SCRIPT = """
async ({game, before, after}) => {
  const board = await import(`/static/boards/${game}.js`);
  const common = await import("/static/boards/common.js");
  const root = document.createElement("div");
  root.className = "board";
  document.body.append(root);
  const draw = (view) => {
    root.replaceChildren();
    board.render(root, {
      state: {game, to_move: 0, players: ["First", "Second"], result: null},
      view, legal: [], flipped: false, you: 0, canMove: false, lastMove: null, prevView: null,
      ui: {}, play: () => {}, choose: async () => null, rerender: () => {},
    });
  };
  draw(before);
  const seen = common.captureBoard(root);
  draw(after);
  const count = common.animateChange(root, seen);
  const moving = [...root.querySelectorAll(".moving")].map(
    (node) => node.closest("[data-testid]").dataset.testid);
  const popping = root.querySelectorAll(".popping").length;
  root.remove();
  return {count, moving, popping};
}
"""


def animate(page: Page, game: str, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(
        ANIMATE_SCRIPT, {"game": game, "before": before, "after": after}
    )
    return result


def test_moves_slide_and_cells_pop_on_every_kind_of_board(
    live_server: Any, new_page: NewPage
) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)

    def chess(fen: str) -> dict[str, Any]:
        return {"kind": "grid", "rows": chess_rows(fen), "check": None, "last": None}

    # Castling: the king and the rook both slide.
    out = animate(page, "chess", chess("r3k2r/8/8/8/8/8/8/R3K2R"), chess("r3k2r/8/8/8/8/8/8/R4RK1"))
    assert sorted(out["moving"]) == ["sq-f1", "sq-g1"] and out["popping"] == 0
    # A promotion with a capture: the new queen slides from the pawn's square.
    out = animate(page, "chess", chess("3r3k/4P3/8/8/8/8/8/K7"), chess("3Q3k/8/8/8/8/8/8/K7"))
    assert out["moving"] == ["sq-d8"]
    # Draughts: the man that took slides, the man taken does not.
    out = animate(
        page,
        "draughts",
        {"kind": "draughts", "rows": draughts_rows({28: "w", 23: "b", 5: "b"})},
        {"kind": "draughts", "rows": draughts_rows({19: "w", 5: "b"})},
    )
    assert out["moving"] == ["sq-19"]
    # Kono: the stone (with its shine) slides to the centre.
    kono = {"a": "w", "b": "b", "c": "b", "d": "w", "e": ""}
    out = animate(
        page,
        "kono",
        {"kind": "kono", "points": kono},
        {"kind": "kono", "points": {**kono, "c": "", "e": "b"}},
    )
    assert out["moving"] and set(out["moving"]) == {"point-e"}
    # Othello: the new disc and the turned ones pop; nothing slides.
    start = [[""] * 8 for _ in range(8)]
    start[3][3], start[3][4], start[4][3], start[4][4] = "w", "b", "b", "w"
    played = [row[:] for row in start]
    played[2][3], played[3][3] = "b", "b"
    out = animate(
        page, "othello", {"kind": "grid", "rows": start}, {"kind": "grid", "rows": played}
    )
    assert out["moving"] == [] and out["popping"] == 2


PREMOVE_SCRIPT = """
async () => {
  const p = await import("/static/premove.js");
  const view = (rows) => ({rows});
  const chess = p.pseudoMoves("chess", view([["", "", "", "", "k", "", "", ""],
    ["P", "", "", "", "", "", "", ""], ...Array(5).fill(Array(8).fill("")),
    ["", "", "", "", "K", "", "", ""]]), 0);
  const piece = (r, c) => (r === 5 && c === 4 ? "w" : r === 1 && c === 0 ? "B" : "");
  const rows = Array.from({length: 10}, (_, r) => Array.from({length: 10}, (_, c) => piece(r, c)));
  const draughts = p.pseudoMoves("draughts", view(rows), 1);
  return {
    chessCount: chess.length,
    promotes: chess.includes("a7a8q") && !chess.includes("a7a8"),
    draughtsCount: draughts.length,
    draughtsFirst: draughts[0],
    sameText: p.matchPremove("chess", "e2e4", ["d2d4", "e2e4"]),
    byEnds: p.matchPremove("draughts", "28-19", ["28x19", "32-27"]),
    queen: p.matchPremove("chess", "a7a8", ["a7a8n", "a7a8q"]),
    none: p.matchPremove("chess", "d4d5", ["d4e5", "g1f3"]),
  };
}
"""


def test_premoves_on_offer_and_their_matching(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    out = page.evaluate(PREMOVE_SCRIPT)
    # White's pawn and king, each to any of the 63 other squares; the pawn's last rank: a queen.
    assert out["chessCount"] == 2 * 63 and out["promotes"]
    # Black's one king (B on square 6), to any of the 49 other dark squares.
    assert out["draughtsCount"] == 49 and out["draughtsFirst"] == "6-1"
    assert out["sameText"] == "e2e4" and out["byEnds"] == "28x19" and out["queen"] == "a7a8q"
    assert out["none"] is None


# -- the low-time sound and the end of the game ------------------------------------------------


async def black_on_a_short_clock(base: str, rooms: queue.Queue[str]) -> None:
    """Black (a Python client) makes a 12 s chess room, answers White's first move, then
    lets White's clock run out."""
    async with await KibitzClient.open(base) as client:
        clock = {"initial_ms": 12_000, "increment_ms": 0}
        room = str((await client.create("chess", "human", seat=1, clock=clock))["room"])
        rooms.put(room)
        state = await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        await client.move(room, "e7e5", version=state["version"])
        await client.wait_state(room, lambda s: s["status"] == "over", timeout=45)


def test_low_time_sounds_once_and_the_end_sounds(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    rooms: queue.Queue[str] = queue.Queue()
    with ThreadPoolExecutor(1) as pool:
        black = pool.submit(asyncio.run, black_on_a_short_clock(base, rooms))
        room = rooms.get(timeout=30)
        page = new_page()
        join_seat(page, f"{base}/?room={room}")
        expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
        move(page, "e2", "e4")  # the first moves are free; then White's 12 s run
        expect(page.locator("[data-testid=move-2]")).to_have_text("e5")
        page.wait_for_function("window.kibitz.sounds.includes('lowtime')", timeout=10_000)
        expect(page.locator("[data-testid=result]")).to_contain_text(
            "You lose on time", timeout=30_000
        )
        played = sounds(page)
        assert played.count("lowtime") == 1 and played[-1] == "end"
        black.result(timeout=30)
