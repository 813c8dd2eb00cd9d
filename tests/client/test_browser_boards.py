"""Pieces of our own drawing, board themes and captured material, in headless Chromium.

The chess and draughts pieces are SVG (no Unicode chess glyph left in the board's text)
named in words by each square's accessible name, in English and French; a theme switch
changes the squares' computed colours, and every theme keeps its highlights at 3:1 and
its coordinates at 4.5:1 against the squares (WCAG 2.1 AA); a chosen theme survives a
reload (prefs "boardTheme"); captures in a real chess and a real draughts game between
two pages show the captured pieces and "+N" beside the seat that is ahead.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.client.steps import (
    BOARD,
    NewPage,
    chess_rows,
    draughts_rows,
    game_for_two,
    in_french,
    open_lobby,
    screenshot,
    version,
    wait_for_lobby,
    wait_version_above,
)

pytestmark = pytest.mark.browser

CHESS_GLYPHS = [chr(c) for c in range(0x2654, 0x2660)]


def shot(page: Page, name: str) -> None:
    screenshot(page, f"boards-{name}")


# A renderer alone on the page, from a hand-made view, left in place for measuring.
RENDER_SCRIPT = """
async ({game, view, legal, selected, lastMove}) => {
  const board = await import(`/static/boards/${game}.js`);
  document.querySelector("#h3-probe")?.remove();
  const root = document.createElement("div");
  root.className = "board";
  root.id = "h3-probe";
  root.style.width = "480px";
  document.body.prepend(root);
  const ctx = {
    state: {to_move: 0, players: ["A", "B"], status: "playing"},
    view, legal, flipped: false, you: 0, canMove: true, lastMove, ui: {selected},
    play: () => {}, choose: async () => null, rerender: () => {},
  };
  board.render(root, ctx);
  return root.textContent;
}
"""

# Contrast ratios (WCAG 2.1) between computed colours of the probe's parts, per theme.
CONTRAST_SCRIPT = """
async (themes) => {
  const {applyTheme} = await import("/static/themes.js");
  const rgb = (text) => {
    const m = /rgba?\\(([\\d.]+),\\s*([\\d.]+),\\s*([\\d.]+)(?:,\\s*([\\d.]+))?/.exec(text || "");
    if (!m) return null;
    if (m[4] !== undefined && Number(m[4]) < 1) return null;  // only solid colours count
    return [m[1], m[2], m[3]].map(Number);
  };
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const q = (id) => document.querySelector(`#h3-probe [data-testid="${id}"]`);
  const bg = (node, pseudo) => rgb(getComputedStyle(node, pseudo).backgroundColor);
  const ring = (node) => rgb(getComputedStyle(node).boxShadow);
  const borderOf = (node, pseudo) => rgb(getComputedStyle(node, pseudo).borderTopColor);
  const colour = (node) => rgb(getComputedStyle(node).color);
  const outline = (node) => rgb(getComputedStyle(node).outlineColor);
  const out = {};
  for (const theme of themes) {
    out[theme] = {applied: applyTheme(theme), root: document.documentElement.dataset.boardTheme};
    const game = document.querySelector("#h3-probe .chess-board") ? "chess" : "draughts";
    const r = out[theme];
    if (game === "chess") {
      const light = q("sq-a2"), dark = q("sq-b2");      // plain squares
      const lastLight = q("sq-f3"), lastDark = q("sq-g1");  // the last move's squares
      const target = q("sq-e6"), capture = q("sq-d5");   // a move target, a capture
      const selected = q("sq-e5");
      r.light = bg(light); r.dark = bg(dark);
      r.lastLight = bg(lastLight); r.lastDark = bg(lastDark);
      r.pairs = {
        "dot/light square": ratio(bg(target, "::after"), bg(target)),
        "dot/dark square": ratio(bg(q("sq-d6"), "::after"), bg(q("sq-d6"))),
        "capture ring/square": ratio(borderOf(capture, "::after"), bg(capture)),
        "last ring/last light": ratio(ring(lastLight), r.lastLight),
        "last ring/last dark": ratio(ring(lastDark), r.lastDark),
        "selected ring/selected": ratio(ring(selected), bg(selected)),
        "rank on light": ratio(colour(q("sq-a8").querySelector(".rank-label")), bg(q("sq-a8"))),
        "rank on dark": ratio(colour(q("sq-a1").querySelector(".rank-label")), bg(q("sq-a1"))),
        "file on light": ratio(colour(q("sq-h1").querySelector(".file-label")), bg(q("sq-h1"))),
        "file on dark": ratio(colour(q("sq-a1").querySelector(".file-label")), bg(q("sq-a1"))),
      };
    } else {
      const dark = q("sq-50"), target = q("sq-28"), last = q("sq-19");
      r.dark = bg(dark);
      r.pairs = {
        "dot/dark square": ratio(bg(target, "::after"), bg(target)),
        "last ring/square": ratio(ring(last), bg(last)),
        "number/dark square": ratio(colour(dark.querySelector(".num")), bg(dark)),
        "movable ring/square": ratio(outline(q("sq-32").querySelector("svg")), bg(q("sq-32"))),
      };
    }
  }
  return out;
}
"""

THEMES = ["green", "wood", "blue"]


def test_pieces_are_our_own_svg_and_squares_say_them_in_words(
    live_server: Any, new_page: NewPage
) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    start = chess_rows("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    view = {"kind": "grid", "rows": start, "check": None, "last": None}
    text = page.evaluate(
        RENDER_SCRIPT,
        {"game": "chess", "view": view, "legal": [], "selected": None, "lastMove": None},
    )
    assert not [g for g in CHESS_GLYPHS if g in text]
    probe = page.locator("#h3-probe")
    assert probe.locator("svg.piece").count() == 32
    assert probe.locator("svg.piece[aria-hidden=true]").count() == 32
    # Six different drawings per colour, each of our own paths.
    shapes = page.evaluate(
        """() => [...document.querySelectorAll('#h3-probe svg.piece')]
                  .map((s) => s.dataset.shape + (s.classList.contains('white') ? 'W' : 'B'))"""
    )
    assert sorted(set(shapes)) == sorted({k + c for k in "kqrbnp" for c in "WB"})
    expect(probe.locator("[data-testid=sq-e1]")).to_have_attribute("aria-label", "e1, white king")
    expect(probe.locator("[data-testid=sq-d8]")).to_have_attribute("aria-label", "d8, black queen")
    expect(probe.locator("[data-testid=sq-e4]")).to_have_attribute("aria-label", "e4, empty")
    # Draughts: men and kings are SVG too, no glyph in the text.
    rows = draughts_rows({28: "w", 22: "b", 3: "W", 47: "B"})
    text = page.evaluate(
        RENDER_SCRIPT,
        {
            "game": "draughts",
            "view": {"kind": "draughts", "rows": rows},
            "legal": [],
            "selected": None,
            "lastMove": None,
        },
    )
    assert "\u265b" not in text and "\u00d7" not in text
    assert probe.locator("svg.man").count() == 4
    assert probe.locator("svg.man.king .crown").count() == 2
    expect(probe.locator("[data-testid=sq-3]")).to_have_attribute(
        "aria-label", "square 3, white king"
    )

    # The same squares in French.
    fr = in_french(new_page())
    open_lobby(fr, live_server.http_url)
    fr.evaluate(
        RENDER_SCRIPT,
        {"game": "chess", "view": view, "legal": [], "selected": None, "lastMove": None},
    )
    probe = fr.locator("#h3-probe")
    expect(probe.locator("[data-testid=sq-e1]")).to_have_attribute("aria-label", "e1, roi blanc")
    expect(probe.locator("[data-testid=sq-d8]")).to_have_attribute("aria-label", "d8, dame noire")
    expect(probe.locator("[data-testid=sq-e4]")).to_have_attribute("aria-label", "e4, vide")
    expect(probe.locator(".chess-board")).to_have_attribute("aria-label", "Échiquier")


def test_themes_change_the_squares_and_keep_highlights_readable(
    live_server: Any, new_page: NewPage
) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    # The page applies the default theme at start.
    assert page.evaluate("document.documentElement.dataset.boardTheme") == "green"
    # A hand-made chess position with every highlight: the last move g1-f3 (a dark and a
    # light square), a white pawn on e5 selected, quiet targets on e6 (light) and d6
    # (dark), a capture on d5.
    rows = chess_rows("rnbqkbnr/ppp2ppp/8/3pP3/8/5N2/PPPP1PPP/RNBQKB1R w KQkq - 0 3")
    view = {"kind": "grid", "rows": rows, "check": None, "last": ["g1", "f3"]}
    legal = ["e5e6", "e5d6", "e5d5"]
    page.evaluate(
        RENDER_SCRIPT,
        {"game": "chess", "view": view, "legal": legal, "selected": "e5", "lastMove": "g1f3"},
    )
    out = page.evaluate(CONTRAST_SCRIPT, THEMES)
    screenshot(page.locator("#h3-probe"), "boards-chess-theme-blue")
    for theme in THEMES:
        assert out[theme]["applied"] == theme and out[theme]["root"] == theme
        for pair, ratio in out[theme]["pairs"].items():
            need = 4.5 if pair.startswith(("rank", "file")) else 3.0
            assert ratio >= need, (theme, pair, ratio)
    squares = {theme: (tuple(out[theme]["light"]), tuple(out[theme]["dark"])) for theme in THEMES}
    assert len(set(squares.values())) == len(THEMES), squares

    # Draughts: the dark squares, targets, the last move and the square numbers.
    rows = draughts_rows({32: "w", 33: "w", 19: "b", 47: "B"})
    page.evaluate(
        RENDER_SCRIPT,
        {
            "game": "draughts",
            "view": {"kind": "draughts", "rows": rows},
            "legal": ["32-28", "32-27", "33-28", "33-29"],
            "selected": "32",
            "lastMove": "14-19",
        },
    )
    out = page.evaluate(CONTRAST_SCRIPT, THEMES)
    for theme in THEMES:
        for pair, ratio in out[theme]["pairs"].items():
            need = 4.5 if pair.startswith("number") else 3.0
            assert ratio >= need, (theme, pair, ratio)
    assert len({tuple(out[theme]["dark"]) for theme in THEMES}) == len(THEMES)

    # The choice is a preference: kept across a reload.
    page.evaluate(
        "localStorage.setItem('kibitz:prefs', JSON.stringify({...JSON.parse("
        "localStorage.getItem('kibitz:prefs') || '{}'), boardTheme: 'wood'}))"
    )
    page.reload()
    wait_for_lobby(page)
    assert page.evaluate("document.documentElement.dataset.boardTheme") == "wood"


def material(page: Page, seat: int) -> dict[str, str | None]:
    root = page.locator(f"[data-testid=material-{seat}]")
    return {
        "captured": root.get_attribute("data-captured"),
        "diff": root.get_attribute("data-diff"),
        "text": root.inner_text().strip(),
    }


def two_players(page: Page, guest: Page, base: str, game: str, position: str = "") -> None:
    """`page` creates a game against a human (first seat), `guest` joins by the invite link."""
    game_for_two(page, guest, base, game, position=position)
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")


def play(page: Page, other: Page, squares: list[str]) -> None:
    """Click the squares on `page`; wait until `other` has seen the move."""
    seen = version(other)
    for square in squares:
        page.click(f"[data-testid=sq-{square}]")
    wait_version_above(other, seen)
    wait_version_above(page, seen)


def test_captured_pieces_and_material_after_captures(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    # Chess from a position with a capture at once: exd5, then Qxd5.
    white, black = new_page(), new_page()
    two_players(
        white, black, base, "chess", "rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2"
    )
    for page in (white, black):
        assert material(page, 0) == {"captured": "", "diff": "0", "text": ""}
    play(white, black, ["e4", "d5"])
    for page in (white, black):
        expect(
            page.locator("[data-testid=material-0] .material-group svg.piece.black")
        ).to_have_count(1)
        assert material(page, 0) == {"captured": "p", "diff": "1", "text": "+1"}
        assert material(page, 1)["diff"] == "0" and material(page, 1)["text"] == ""
    assert not [g for g in CHESS_GLYPHS if g in white.inner_text(BOARD)]
    expect(white.locator("[data-testid=material-0]")).to_have_attribute(
        "aria-label", "captured: 1 pawn; 1 point ahead"
    )
    shot(white, "chess-material")
    play(black, white, ["d8", "d5"])
    for page in (white, black):
        assert material(page, 1) == {"captured": "p", "diff": "0", "text": ""}
        assert material(page, 0)["diff"] == "0"

    # The settings dialog's theme choice recolours the live board at once, and is kept.
    square = white.locator("[data-testid=sq-a1]")
    before = square.evaluate("(n) => getComputedStyle(n).backgroundColor")
    white.click("[data-testid=settings]")
    white.select_option("[data-testid=setting-theme]", "blue")
    expect(square).not_to_have_css("background-color", before)
    assert white.evaluate("document.documentElement.dataset.boardTheme") == "blue"
    assert white.evaluate("JSON.parse(localStorage.getItem('kibitz:prefs')).boardTheme") == "blue"
    white.keyboard.press("Escape")

    # Draughts from the start: 32-28 19-23 28x19, White a man up; 14x23 levels it.
    white, black = new_page(), new_page()
    two_players(white, black, base, "draughts")
    play(white, black, ["32", "28"])
    play(black, white, ["19", "23"])
    play(white, black, ["28", "19"])
    for page in (white, black):
        assert material(page, 0)["captured"] == "1" and material(page, 0)["diff"] == "1"
        expect(page.locator("[data-testid=material-0] svg.man.black")).to_have_count(1)
        expect(page.locator("[data-testid=material-diff-0]")).to_have_text("+1")
    shot(white, "draughts-material")
    play(black, white, ["14", "23"])
    for page in (white, black):
        assert material(page, 1)["captured"] == "1"
        assert material(page, 0)["diff"] == "0" and material(page, 1)["diff"] == "0"
        expect(page.locator("[data-testid=material-diff-0]")).to_have_count(0)


def test_material_counts_what_is_missing_never_less(live_server: Any, new_page: NewPage) -> None:
    """Promotions: a side with two queens and seven pawns has lost one pawn, no queen."""
    page = new_page()
    open_lobby(page, live_server.http_url)
    out = page.evaluate(
        """async (rows) => {
          const {renderMaterial} = await import('/static/material.js');
          const roots = {0: document.createElement('div'), 1: document.createElement('div')};
          renderMaterial({game: 'chess', view: {rows}}, false, roots);
          const a = [0, 1].map((s) => ({captured: roots[s].dataset.captured,
                                        diff: roots[s].dataset.diff, text: roots[s].textContent}));
          renderMaterial({game: 'othello', view: {rows}}, false, roots);
          a.push(roots[0].childElementCount + roots[1].childElementCount);
          return a;
        }""",
        chess_rows("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPP1/RNBQKBQR w KQkq - 0 1"),
    )
    # White: a pawn became a second queen in place of a knight that was taken.
    # On the board White has 44 points (7 + 3 + 6 + 10 + 18), Black 39: White is 5 ahead.
    assert out[0] == {"captured": "", "diff": "5", "text": "+5"}
    assert out[1] == {"captured": "pn", "diff": "0", "text": ""}
    assert out[2] == 0
