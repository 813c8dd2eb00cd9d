"""Accessibility of the web client in headless Chromium against the real server.

- axe-core (through axe-playwright-python) finds no violation of impact "serious" or
  "critical" on the lobby, the rules panel, a chess game in progress, a finished game's
  page and its analysis view (WCAG 2.0/2.1 A and AA rules and best practice: contrast,
  names, roles, ...), in the light and the dark colour scheme.
- A keyboard path through every control: Tab goes round the lobby, the game screen and
  the game page reaching every control, each with a visible focus, with no trap; the
  modals (rules, settings, log in, the choice dialog) keep the focus while open and give
  it back on Escape.
- Moves by text (#text-move): SAN matched to the legal UCI moves in chess, a fool's mate
  typed by two players and announced ("Black played Qh4#. Checkmate."), and a whole game
  of Oware against the computer (level 1) played with the keyboard only: the game chosen
  and created from the lobby with Tab, the arrow keys and Enter, every move typed, a move
  that is not legal refused in words, and every move of the computer said in the #announce
  live region, to the end of the game and its result.

Real server, Redis and workers (``live_server``), real Chromium; nothing is mocked. Our
moves in Oware are chosen by kibitz's own searcher in this process (a few plies deep, so the
game ends within about 25 of our moves); that page is driven by ``page.keyboard`` only.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from kibitz.client.connection import new_player_key
from kibitz.shared.games.registry import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search.choose import choose_move
from tests.client.steps import (
    BOARD,
    NewPage,
    fill_create_form,
    game_for_two,
    open_lobby,
    run_client,
    screenshot,
    start_game,
    state_of,
)
from tests.server.http.test_games_api import FOOLS_MATE, play_chess

pytestmark = pytest.mark.browser

BLOCKING = ("serious", "critical")
WCAG_AA = {
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"],
    }
}
# A whole Oware game: our moves, each answered by the computer (bounded in count and time).
MAX_OUR_MOVES = 80
GAME_SECONDS = 240
OUR_BUDGET = Budget(depth=6, time_ms=300, nodes=None)


def _shot(page: Page, name: str) -> None:
    screenshot(page, f"a11y-{name}")


def set_scheme(page: Page, scheme: Literal["light", "dark"]) -> None:
    """The page in the light or dark colour scheme, its colour transitions over."""
    page.emulate_media(color_scheme=scheme)
    page.wait_for_timeout(400)


def assert_no_serious_violations(page: Page, where: str) -> None:
    """axe-core on the page as it is: no violation of impact serious or critical."""
    results = Axe().run(page, options=WCAG_AA)
    violations = results.response.get("violations", [])
    blocking = [v for v in violations if v.get("impact") in BLOCKING]
    if blocking:
        lines = [f"axe on {where}: {len(blocking)} serious or critical violation(s)"]
        for violation in blocking:
            head = f"- [{violation['impact']}] {violation['id']}: {violation['help']}"
            lines.append(f"{head} ({violation['helpUrl']})")
            for node in violation.get("nodes", [])[:8]:
                target = " ".join(str(t) for t in node.get("target", []))
                summary = " ".join(str(node.get("failureSummary", "")).split())
                lines.append(f"    {target}: {summary[:300]}")
        pytest.fail("\n".join(lines), pytrace=False)


# -- a keyboard path through every control ---------------------------------------------------

# The controls a keyboard must reach: shown, enabled, in the tab order, not in a closed
# <details> (its summary is the stop) and not behind an open modal.
JS_CONTROLS = """() => [...document.querySelectorAll(
    'a[href], button, input, select, textarea, summary, [tabindex]')]
  .filter(e => !e.disabled && e.tabIndex >= 0 && e.getClientRects().length
    && getComputedStyle(e).visibility !== 'hidden' && !e.closest('[inert]')
    && !(e.closest('details:not([open])') && e.tagName !== 'SUMMARY'))
  .map(e => e.dataset.testid || e.id || (e.tagName + ':' + e.textContent.trim().slice(0, 30)))"""
# The focused element's name and whether its focus is seen (a ring of 2 px or more, or a shadow).
JS_FOCUSED = """() => { const e = document.activeElement;
  if (!e || e === document.body) return null;
  const cs = getComputedStyle(e);
  const ring = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2;
  return [e.dataset.testid || e.id || (e.tagName + ':' + e.textContent.trim().slice(0, 30)),
          ring || cs.boxShadow !== 'none'] }"""


def tab_to(page: Page, selector: str, limit: int = 150) -> None:
    """Press Tab until the focus is on `selector` (fails if it is never reached)."""
    for _ in range(limit):
        if page.evaluate(
            "s => Boolean(document.activeElement && document.activeElement.matches(s))", selector
        ):
            return
        page.keyboard.press("Tab")
    pytest.fail(f"{selector} not reached with {limit} presses of Tab", pytrace=False)


def tab_round(page: Page, where: str) -> list[str]:
    """Tab all the way round the page: every control is reached, each with a focus that
    shows, and the focus comes back to where it started (no trap)."""
    controls: list[str] = page.evaluate(JS_CONTROLS)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    reached: list[str] = []
    unseen: list[str] = []
    for _ in range(len(controls) + 40):
        page.keyboard.press("Tab")
        focused = page.evaluate(JS_FOCUSED)
        if focused is None:
            continue  # the browser's own stop, between the end of the page and its start
        name, seen = focused
        if reached and name == reached[0]:
            break  # round
        reached.append(name)
        if not seen:
            unseen.append(name)
    else:
        pytest.fail(
            f"{where}: Tab never came round (a keyboard trap?): {reached[-10:]}", pytrace=False
        )
    missing = [c for c in controls if c not in reached]
    assert not missing, f"{where}: not reached with Tab: {missing}"
    assert not unseen, f"{where}: focus not visible on {unseen}"
    return reached


def modal_by_keyboard(page: Page, opener: str, dialog: str) -> None:
    """Enter on `opener` opens the modal `dialog`; Tab stays in it; Escape closes it and the
    focus is back on `opener`."""
    tab_to(page, f"[data-testid={opener}]")
    page.keyboard.press("Enter")
    box = page.locator(f"[data-testid={dialog}]")
    expect(box).to_be_visible()
    for _ in range(8):
        page.keyboard.press("Tab")
        inside = page.evaluate(
            """d => !!document.activeElement.closest(`[data-testid=${d}]`)
                    || document.activeElement === document.body""",
            dialog,
        )
        assert inside, f"Tab left the open {dialog}"
    page.keyboard.press("Escape")
    expect(box).to_be_hidden()
    expect(page.locator(f"[data-testid={opener}]")).to_be_focused()


# -- the lobby, the rules panel and the game screen ---------------------------------------------


def test_lobby_rules_and_game_screen_axe_and_keyboard(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    page.wait_for_selector("[data-testid=opponent] option[value='ai:1']", state="attached")
    _shot(page, "lobby")
    assert_no_serious_violations(page, "the lobby")
    set_scheme(page, "dark")
    _shot(page, "lobby-dark")
    assert_no_serious_violations(page, "the lobby, dark scheme")
    set_scheme(page, "light")
    tab_round(page, "the lobby")

    # The rules panel (axe on it open), the settings and a form (log in) open from the
    # keyboard, keep it while open, and give it back to their button on Escape.
    tab_to(page, "[data-testid=rules-chess]")
    page.keyboard.press("Enter")
    expect(page.locator("[data-testid=rules]")).to_be_visible()
    _shot(page, "rules")
    assert_no_serious_violations(page, "the rules panel")
    page.keyboard.press("Escape")
    for opener, dialog in (
        ("rules-chess", "rules"),
        ("settings", "settings-dialog"),
        ("login-open", "login-form"),
    ):
        modal_by_keyboard(page, opener, dialog)

    # A chess game in progress against the computer.
    fill_create_form(page, "chess", "ai:1", seat="0")
    start_game(page, "chess", until="data-turn=you")
    # Moves typed in SAN are matched to the legal UCI moves; a wrong one is refused.
    field = page.locator("[data-testid=text-move]")
    feedback = page.locator("[data-testid=text-move-feedback]")
    field.fill("Ke2")
    field.press("Enter")
    expect(feedback).to_contain_text("Ke2 is not a legal move here")
    field.fill("e4")
    field.press("Enter")
    page.wait_for_function("() => window.kibitz.state.moves.length >= 2")
    page.wait_for_selector(f"{BOARD}[data-turn=you]")
    assert page.evaluate("window.kibitz.state.moves[0].move") == "e2e4"
    reply = page.evaluate("window.kibitz.state.moves[1].display")
    expect(page.locator("[data-testid=announce]")).to_contain_text(
        f"Black played {reply}. Your move."
    )
    field.fill("board")
    field.press("Enter")
    expect(feedback).to_contain_text("White: king e1; queen d1; rooks a1, h1;")
    field.fill("Nf3")
    field.press("Enter")
    page.wait_for_function("() => window.kibitz.state.moves.length >= 4")
    page.wait_for_selector(f"{BOARD}[data-turn=you]")
    assert page.evaluate("window.kibitz.state.moves[2].move") == "g1f3"
    _shot(page, "game")
    assert_no_serious_violations(page, "a chess game in progress")
    set_scheme(page, "dark")
    assert_no_serious_violations(page, "a chess game in progress, dark scheme")
    set_scheme(page, "light")
    reached = tab_round(page, "the game screen")
    # The board is one Tab stop; the arrow keys move between its squares.
    squares = [name for name in reached if name.startswith("sq-")]
    assert len(squares) == 1, f"the board should be one Tab stop, not {squares}"
    tab_to(page, f"[data-testid={squares[0]}]")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("document.activeElement.dataset.testid") != squares[0]
    # The choice dialog (Resign?) is modal: Tab goes round its buttons; Escape gives the focus back.
    tab_to(page, "[data-testid=resign]")
    page.keyboard.press("Enter")
    expect(page.locator("[data-testid=dialog]")).to_be_visible()
    for key in ("Tab",) * 5 + ("Shift+Tab",) * 2:
        page.keyboard.press(key)
        assert page.evaluate("() => !!document.activeElement.closest('[data-testid=dialog]')"), (
            f"{key} left the choice dialog"
        )
    page.keyboard.press("Escape")
    expect(page.locator("[data-testid=dialog]")).to_be_hidden()
    expect(page.locator("[data-testid=resign]")).to_be_focused()


# -- a finished game's page and its analysis ----------------------------------------------------


def test_game_page_and_analysis_axe_and_keyboard(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = run_client(play_chess(base, (new_player_key(), new_player_key()), FOOLS_MATE))
    page = new_page()
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-board]")).to_have_attribute("data-ply", "4")
    _shot(page, "gamepage")
    assert_no_serious_violations(page, "a finished game's page")
    tab_round(page, "a finished game's page")
    # The analysis, asked for from the keyboard.
    tab_to(page, "[data-testid=replay-analyse]")
    page.keyboard.press("Enter")
    expect(page.locator("[data-testid=replay-analysis]")).to_have_attribute(
        "data-status", "done", timeout=60_000
    )
    _shot(page, "analysis")
    assert_no_serious_violations(page, "the analysis view")
    set_scheme(page, "dark")
    assert_no_serious_violations(page, "the analysis view, dark scheme")


# -- a whole game of Oware with the keyboard and the text move field only ----------------------


def choose_with_arrows(page: Page, selector: str, value: str) -> None:
    """On the focused <select>, the arrow keys until it holds `value`."""
    values: list[str] = page.eval_on_selector(selector, "s => [...s.options].map(o => o.value)")
    assert value in values, f"{value} is not an option of {selector}: {values}"
    for _ in range(len(values) * 2):
        now = page.eval_on_selector(selector, "s => s.value")
        if now == value:
            return
        page.keyboard.press("ArrowDown" if values.index(value) > values.index(now) else "ArrowUp")
    pytest.fail(f"{selector} did not reach {value} with the arrow keys", pytrace=False)


def our_move(position: str) -> str:
    game = find_game("oware")
    state = game.parse_position(position)
    return choose_move(game, state, 7, budget=OUR_BUDGET).move_text


def test_whole_oware_game_with_keyboard_and_text_moves(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    page.wait_for_selector("[data-testid=opponent] option[value='ai:1']", state="attached")
    # The game cards are a radio group: one tab stop, the arrow keys choose.
    tab_to(page, ".game-cards [role=radio][tabindex='0']")
    for _ in range(10):
        if page.locator("[data-testid=game-oware][aria-checked=true]").count():
            break
        page.keyboard.press("ArrowRight")
    expect(page.locator("[data-testid=game-oware]")).to_have_attribute("aria-checked", "true")
    expect(page.locator("[data-testid=game-oware]")).to_be_focused()
    tab_to(page, "[data-testid=opponent]")
    choose_with_arrows(page, "[data-testid=opponent]", "ai:1")
    tab_to(page, "[data-testid=seat-choice]")
    choose_with_arrows(page, "[data-testid=seat-choice]", "0")
    tab_to(page, "[data-testid=create]")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{BOARD}[data-game=oware][data-turn=you]")
    announce = page.locator("[data-testid=announce]")
    expect(announce).to_contain_text("Your move")

    field = "[data-testid=text-move]"
    tab_to(page, field)
    expect(page.locator("label[for=text-move]")).to_have_count(1)
    feedback = page.locator("[data-testid=text-move-feedback]")
    # A command: the legal moves, in words.
    page.keyboard.type("moves")
    page.keyboard.press("Enter")
    expect(feedback).to_contain_text("6 legal moves: A, B, C, D, E, F.")
    # North's pit is not South's move: refused in words, nothing sent.
    version = state_of(page)["version"]
    page.keyboard.type("a1")
    page.keyboard.press("Enter")
    expect(feedback).to_contain_text("a1 is not a legal move here")
    expect(feedback).to_have_attribute("data-refused", "true")
    assert state_of(page)["version"] == version
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")

    started = time.monotonic()
    ours = theirs = 0
    while True:
        assert time.monotonic() - started < GAME_SECONDS, "the game took too long"
        page.wait_for_function(
            """() => { const s = window.kibitz.state;
                       return s && (s.status === 'over'
                                    || (s.to_move === 0 && s.legal_moves.length > 0)); }"""
        )
        state = state_of(page)
        if state["status"] == "over":
            break
        last = state["last_move"]
        if last is not None and last["seat"] == 1:
            # The computer's move was said in the live region, with whose turn it is now.
            expect(announce).to_contain_text(f"North played {last['display']}. Your move.")
            theirs += 1
        assert ours < MAX_OUR_MOVES, "more moves than a game vs level 1 should take"
        move = our_move(state["position"])
        # Typed in lower case: the field is case-insensitive (South's pits are A-F).
        expect(page.locator(field)).to_be_focused()
        page.keyboard.type(move.lower())
        page.keyboard.press("Enter")
        page.wait_for_function("v => window.kibitz.state.version > v", arg=state["version"])
        expect(page.locator(field)).to_have_value("")
        expect(announce).to_contain_text(f"You played {move}.")
        ours += 1

    state = state_of(page)
    assert ours >= 10 and theirs >= 9, (ours, theirs)
    assert len(state["moves"]) >= ours + theirs
    assert [m["seat"] for m in state["moves"][: 2 * ours : 2]] == [0] * ours
    expect(page.locator("[data-testid=result]")).to_be_visible()
    # The end is said too: from the viewer's side, as on the result banner.
    outcome = page.get_attribute("[data-testid=result]", "data-outcome")
    words = {"win": "You win", "loss": "You lose"}.get(str(outcome), "")
    if last := state["last_move"]:
        who = "You played" if last["seat"] == 0 else "North played"
        expect(announce).to_contain_text(f"{who} {last['display']}.")
    expect(announce).to_contain_text(words)
    # After the end a move is refused in words.
    page.keyboard.type("A")
    page.keyboard.press("Enter")
    expect(feedback).to_contain_text("The game is over.")
    _shot(page, "oware-keyboard-end")


# -- chess by text: SAN matched to the legal UCI moves, checkmate announced -------------------

# A hand-made chess snapshot (no rules in the page: it reads the board and legal_moves only).
# White: Ke1, Ra1, Rh1, Nb1, Nf3, pawns e5 and g7; Black: Kh8, Qd8 and a pawn d5 just pushed
# (so exd6 e.p. is legal). Both knights reach d2.
ROWS = [
    ["", "", "", "q", "", "", "", "k"],
    ["", "", "", "", "", "", "P", ""],
    ["", "", "", "", "", "", "", ""],
    ["", "", "", "p", "P", "", "", ""],
    ["", "", "", "", "", "", "", ""],
    ["", "", "", "", "", "N", "", ""],
    ["", "", "", "", "", "", "", ""],
    ["R", "N", "", "", "K", "", "", "R"],
]
LEGAL = [
    "e1g1", "e1c1", "e1e2", "b1d2", "f3d2", "b1c3", "e5d6", "e5e6", "a1a7", "h1h7",
    "g7g8q", "g7g8r", "g7g8b", "g7g8n", "f3g5",
]  # fmt: skip
SAN_CASES = {
    "O-O": ["e1g1"],
    "0-0-0": ["e1c1"],
    "e1g1": ["e1g1"],
    "Ke2": ["e1e2"],
    "Nbd2": ["b1d2"],
    "N1d2": ["b1d2"],
    "Nfd2": ["f3d2"],
    "Nd2": ["b1d2", "f3d2"],  # ambiguous: answered with both
    "nc3": ["b1c3"],
    "Nc3+": ["b1c3"],
    "exd6": ["e5d6"],
    "e6": ["e5e6"],
    "g8=Q": ["g7g8q"],
    "g8N#": ["g7g8n"],
    "g7-g8=R": ["g7g8r"],
    "Rh7": ["h1h7"],
    "Qd1": [],
    "e4": [],
    "Ng1": [],
}


def test_san_matching_and_board_reading(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    found = page.evaluate(
        """async ([rows, legal, texts]) => {
             const { matchMove } = await import("/static/textmove.js");
             const state = { game: "chess", view: { rows }, legal_moves: legal };
             return Object.fromEntries(texts.map((t) => [t, matchMove(state, t)]));
           }""",
        [ROWS, LEGAL, list(SAN_CASES)],
    )
    assert {k: sorted(v) for k, v in found.items()} == {k: sorted(v) for k, v in SAN_CASES.items()}
    # The "board" command reads every game's position in words.
    draughts = [[""] * 10 for _ in range(10)]
    draughts[0][1] = "b"  # square 1
    draughts[9][8] = "W"  # square 50, a king
    draughts[6][3] = "w"  # square 32
    views = {
        "chess": {"rows": ROWS},
        "draughts": {"kind": "draughts", "rows": draughts},
        "tictactoe": {"kind": "grid", "rows": [["x", "", ""], ["", "o", ""], ["", "", "x"]]},
        "othello": {
            "kind": "grid",
            "rows": [[""] * 8] * 3 + [["", "", "", "w", "b", "", "", ""]] + [[""] * 8] * 4,
        },
        "kono": {"kind": "kono", "points": {"a": "w", "b": "b", "c": "b", "d": "w", "e": ""}},
        "matches": {"kind": "heap", "heap": 7, "max_take": 3},
    }
    read = page.evaluate(
        """async (views) => {
             const { boardText } = await import("/static/textmove.js");
             return Object.fromEntries(Object.entries(views).map(([game, view]) =>
               [game, boardText({ game, view, players: ["?", "?"], position: "" })]));
           }""",
        views,
    )
    assert read["chess"].startswith("White: king e1; rooks a1, h1; knights b1, f3; pawns e5, g7.")
    assert read["chess"].endswith("Black: king h8; queen d8; pawn d5.")
    assert read["draughts"] == "White: man 32; king 50. Black: man 1."
    assert read["tictactoe"] == "X: 1, 9. O: 5. Empty: 2, 3, 4, 6, 7, 8."
    assert read["othello"].startswith("Black: e4. White: d4. Empty: a1, b1,")
    assert read["kono"] == "Black: b, c. White: a, d. Empty: e."
    assert read["matches"] == "7 matches left."


def test_fools_mate_typed_and_announced(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob = new_page(), new_page()
    game_for_two(alice, bob, base, "chess")
    expect(alice.locator("[data-testid=announce]")).to_contain_text(
        "The game has started. Your move."
    )
    for page, move, ply in ((alice, "f3", 1), (bob, "e5", 2), (alice, "g4", 3), (bob, "Qh4#", 4)):
        page.wait_for_selector(f"{BOARD}[data-turn=you]")
        field = page.locator("[data-testid=text-move]")
        field.fill(move)
        field.press("Enter")
        page.wait_for_function("n => window.kibitz.state.moves.length >= n", arg=ply)
    expect(bob.locator("[data-testid=announce]")).to_contain_text("White played g4. Your move.")
    expect(alice.locator("[data-testid=announce]")).to_contain_text("Black played Qh4#. Checkmate.")
    expect(alice.locator("[data-testid=announce]")).to_contain_text("You lose")
    expect(bob.locator("[data-testid=announce]")).to_contain_text("You played Qh4#. Checkmate.")
    expect(bob.locator("[data-testid=announce]")).to_contain_text("You win")
