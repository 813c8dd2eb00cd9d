"""End-to-end tests of the web client in headless Chromium against the real server.

The server (``live_server``, from tests/conftest.py) runs with real workers on a real
Redis; every click here goes through the WebSocket and comes back as a state snapshot.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from kibitz.shared.search.strength import bot_ratings, level_strength
from tests.client.steps import (
    BOARD,
    PLAYABLE_CELL,
    NewPage,
    chess_rows,
    create_game,
    draughts_rows,
    marks,
    open_lobby,
    resign,
    version,
    wait_my_turn_or_over,
    wait_version_above,
)

pytestmark = pytest.mark.browser

# -- (1) a whole game against the strongest AI -------------------------------------------------


def test_play_tictactoe_against_ai_to_the_end(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    create_game(page, live_server.http_url, "tictactoe", "ai:8", seat="0", name="Ada")
    expect(page.locator("[data-testid=seat-0]")).to_contain_text("Ada")
    expect(page.locator("[data-testid=seat-1]")).to_contain_text("AI")
    clicks = 0
    while wait_my_turn_or_over(page):
        expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
        seen = version(page)
        playable = page.locator(PLAYABLE_CELL)
        # Only empty cells are offered: the server's legal moves drive the board.
        free = [i + 1 for i, mark in enumerate(marks(page)) if not mark]
        offered = [int(n) for n in playable.evaluate_all("els => els.map(e => e.dataset.cell)")]
        assert offered == free
        playable.first.click()
        clicks += 1
        wait_version_above(page, seen)
        assert clicks <= 5
    result = page.locator("[data-testid=result]")
    expect(result).to_be_visible()
    # Perfect play never loses at tic-tac-toe, and our first-free-cell play is not perfect.
    expect(result).to_contain_text(re.compile(r"Draw|You lose"))
    assert len(page.query_selector_all("[data-testid^=move-]")) == sum(1 for m in marks(page) if m)
    expect(page.locator("[data-testid=resign]")).to_be_hidden()
    expect(page.locator("[data-testid=status]")).to_have_text("Game over.")


# -- (2) two players and a spectator, each in their own browser context -----------------------


def test_two_players_and_a_spectator(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob, carol = new_page(), new_page(), new_page()
    create_game(alice, base, "tictactoe", "human", seat="0", name="Alice")
    expect(alice.locator("[data-testid=status]")).to_contain_text("Waiting for an opponent")
    invite = alice.input_value("[data-testid=invite-link]")
    watch = alice.input_value("[data-testid=watch-link]")
    room = alice.evaluate("window.kibitz.state.room")
    assert invite.endswith(f"/?room={room}") and watch.endswith(f"/?watch={room}")

    bob.goto(invite)
    expect(bob.locator("[data-testid=join-banner]")).to_contain_text("Alice")
    bob.fill("[data-testid=join-name]", "Bob")
    bob.click("[data-testid=join-seat]")
    expect(bob.locator("[data-testid=seat-1]")).to_contain_text("Bob")
    expect(bob.locator("[data-testid=join-banner]")).to_be_hidden()

    carol.goto(watch)
    expect(carol.locator("[data-testid=status]")).to_contain_text("to move")
    expect(carol.locator("[data-testid=resign]")).to_be_hidden()
    assert carol.locator(PLAYABLE_CELL).count() == 0  # spectators cannot move

    expect(alice.locator("[data-testid=seat-1]")).to_contain_text("Bob")
    expect(carol.locator("[data-testid=seat-0]")).to_contain_text("Alice")

    # X takes the top row: 1, (O 4), 2, (O 5), 3.
    script = [(alice, "1"), (bob, "4"), (alice, "2"), (bob, "5"), (alice, "3")]
    for ply, (player, cell) in enumerate(script, start=1):
        other = bob if player is alice else alice
        expect(player.locator("[data-testid=status]")).to_contain_text("Your move")
        assert other.locator(PLAYABLE_CELL).count() == 0  # not their turn
        player.click(f"[data-testid=cell-{cell}]")
        mark = "x" if player is alice else "o"
        for viewer in (alice, bob, carol):
            expect(viewer.locator(f"[data-testid=cell-{cell}]")).to_have_attribute(
                "data-mark", mark
            )
            expect(viewer.locator(f"[data-testid=move-{ply}]")).to_have_text(cell)

    # Every snapshot since the first move shows both players as connected.
    for viewer in (alice, bob, carol):
        for seat in ("seat-0", "seat-1"):
            expect(viewer.locator(f"[data-testid={seat}]")).to_have_attribute(
                "data-connected", "true"
            )
    expect(alice.locator("[data-testid=result]")).to_contain_text("You win")
    expect(bob.locator("[data-testid=result]")).to_contain_text("You lose")
    expect(carol.locator("[data-testid=result]")).to_contain_text("X (Alice) wins")
    expect(carol.locator("[data-testid=result]")).to_contain_text("three in a row")
    for viewer in (alice, bob, carol):
        assert viewer.locator(PLAYABLE_CELL).count() == 0


# -- (3) errors are shown ---------------------------------------------------------------------


def test_unknown_room_and_full_room_errors_are_shown(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    page = new_page()
    open_lobby(page, base)
    page.fill("[data-testid=join-room]", "nosuchroom42")
    page.click("[data-testid=join]")
    error = page.locator("#error")
    expect(error).to_be_visible()
    expect(error).to_have_attribute("role", "alert")
    expect(error).to_have_attribute("data-code", "room/unknown")
    expect(error).to_contain_text("No game with that room id")
    expect(page.locator("[data-testid=lobby]")).to_be_visible()

    # A room with both seats taken refuses a third player, who may still watch it.
    create_game(page, base, "tictactoe", "ai:1", seat="0")
    room = page.evaluate("window.kibitz.state.room")
    stranger = new_page()
    open_lobby(stranger, base)
    expect(stranger.locator(f"[data-testid=room-{room}]")).to_contain_text("Tic-tac-toe")
    stranger.fill("[data-testid=join-room]", f"{base}/?room={room}")
    stranger.click("[data-testid=join]")
    expect(stranger.locator("#error")).to_have_attribute("data-code", "room/full")
    expect(stranger.locator("#error")).to_contain_text("Both seats are taken")
    stranger.click("[data-testid=watch]")
    expect(stranger.locator(f"{BOARD}[data-game=tictactoe]")).to_be_visible()
    expect(stranger.locator("[data-testid=room-id]")).to_contain_text(room)


def test_game_options_are_sent_and_checked(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    page.click("[data-testid=game-matches]")
    page.select_option("[data-testid=opponent]", "ai:1")
    page.select_option("[data-testid=seat-choice]", "0")
    page.select_option("[data-testid=option-variant]", "double")
    page.fill("[data-testid=option-count]", "5")  # the double variant needs 10 or more
    page.click("[data-testid=create]")
    expect(page.locator("#error")).to_have_attribute("data-code", "options/invalid")
    expect(page.locator("#error")).to_contain_text("Invalid game option")
    expect(page.locator("[data-testid=lobby]")).to_be_visible()

    page.fill("[data-testid=option-count]", "13")
    page.click("[data-testid=create]")
    expect(page.locator("[data-testid=heap-count]")).to_have_text("13")
    # The first move of the double variant takes exactly one match.
    expect(page.locator("[data-testid^=take-]:not([disabled])")).to_have_count(1)
    page.click("[data-testid=take-1]")
    expect(page.locator("[data-testid=move-1]")).to_have_text("1")


def test_chess_levels_show_their_measured_strength(live_server: Any, new_page: NewPage) -> None:
    """The create form and the AI seat say how strong a level is: its rating, to 10."""
    measured = level_strength("chess", 5)
    assert measured is not None, "the chess table (shared/search/strength.py) has level 5"
    about = f"about {round(measured.elo / 10) * 10}"
    page = new_page()
    open_lobby(page, live_server.http_url)
    page.click("[data-testid=game-chess]")
    option = page.locator("[data-testid=opponent] option[value='ai:5']")
    expect(option).to_have_text(f"Computer, level 5, {about}")
    othello = bot_ratings("othello")
    assert othello is not None
    page.click("[data-testid=game-othello]")  # a self-play ladder: a rating too
    expect(page.locator("[data-testid=opponent] option[value='ai:5']")).to_have_text(
        f"Computer, level 5, about {int(othello[4] / 10 + 0.5) * 10}"
    )
    create_game(page, live_server.http_url, "chess", "ai:5", seat="0")
    expect(page.locator("[data-testid=seat-1]")).to_contain_text(f"Computer, level 5, {about}")


# -- reconnection and reload keep the seat ----------------------------------------------------


def test_reconnect_and_reload_resume_the_seat(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    create_game(page, live_server.http_url, "matches", "ai:1", seat="0")
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    pill = page.locator("[data-testid=connection]")
    page.evaluate("window.kibitz.dropConnection()")
    expect(pill).to_have_attribute("data-state", "reconnecting")
    expect(pill).to_have_attribute("data-state", "open")
    seen = version(page)
    page.click("[data-testid=take-1]")
    wait_version_above(page, seen)
    expect(page.locator("[data-testid=move-1]")).to_have_text("1")

    page.reload()
    page.wait_for_selector(f"{BOARD}[data-game=matches][data-version]")
    expect(page.locator("[data-testid=seat-0]")).to_contain_text("you")
    expect(page.locator("[data-testid=move-1]")).to_have_text("1")
    wait_my_turn_or_over(page)
    page.click("[data-testid=take-1]")
    expect(page.locator("[data-testid=move-3]")).to_have_text("1")


# -- every board: one move by clicking, then a screenshot -------------------------------------

FIRST_MOVES: dict[str, tuple[list[str], str]] = {
    # game: (what to click or drag, the move as the move list shows it)
    "tictactoe": (["cell-5"], "5"),
    "matches": (["take-3"], "3"),
    "othello": (["cell-d3"], "d3"),
    "draughts": (["sq-32", "sq-28"], "32-28"),
    "chess": (["drag:sq-e2:sq-e4"], "e4"),
    "kono": (["point-b", "point-e"], "b-e"),
    "oware": (["pit-C"], "C"),
}

BOARD_PARTS: dict[str, tuple[str, int]] = {
    # game: (selector of the board's parts, how many there are)
    "tictactoe": ("[data-testid^=cell-]", 9),
    "matches": (".match", 20),
    "othello": ("[data-testid^=cell-]", 64),
    "draughts": ("[data-testid^=sq-]", 50),
    "chess": ("[data-testid^=sq-]", 64),
    "kono": ("[data-testid^=point-]", 5),
    "oware": ("[data-testid^=pit-]", 12),
}


@pytest.fixture(scope="module")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("boards")


@pytest.mark.parametrize("game", list(FIRST_MOVES))
def test_every_board_plays_a_move_and_renders(
    live_server: Any, new_page: NewPage, screenshot_dir: Path, game: str
) -> None:
    page = new_page()
    create_game(page, live_server.http_url, game, "ai:1", seat="0")
    selector, count = BOARD_PARTS[game]
    assert page.locator(f"{BOARD} {selector}").count() == count
    clicks, shown = FIRST_MOVES[game]
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    for action in clicks:
        if action.startswith("drag:"):  # drag and drop instead of two clicks
            _, source, target = action.split(":")
            page.locator(f"[data-testid={source}]").drag_to(page.locator(f"[data-testid={target}]"))
        else:
            page.click(f"[data-testid={action}]")
    expect(page.locator("[data-testid=move-1]")).to_have_text(shown)
    # The AI answers; its move is listed and the turn comes back (or the game ends).
    expect(page.locator("[data-testid=move-2]")).to_be_visible()
    still_playing = wait_my_turn_or_over(page)
    page.screenshot(path=str(screenshot_dir / f"{game}.png"))
    if still_playing:
        resign(page)


# -- renderers alone: choices and orientation, from hand-made views -------------------------

RENDER_SCRIPT = """
async ({game, view, legal, clicks, flipped}) => {
  const board = await import(`/static/boards/${game}.js`);
  const root = document.createElement("div");
  root.className = "board";
  document.body.append(root);
  const played = [];
  const asked = [];
  const ctx = {
    state: {to_move: flipped ? 1 : 0, players: ["First", "Second"]},
    view, legal, flipped, you: flipped ? 1 : 0, canMove: true, lastMove: null, ui: {},
    play: (move) => played.push(move),
    choose: async ({options}) => {
      asked.push(options.map((o) => o.value));
      return options[0].value;
    },
    rerender: () => {
      root.replaceChildren();
      board.render(root, ctx);
    },
  };
  board.render(root, ctx);
  for (const testid of clicks) {
    const target = root.querySelector(`[data-testid="${testid}"]`);
    target.dispatchEvent(new MouseEvent("click", {bubbles: true}));
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  const order = [...root.querySelectorAll("[data-testid]")].map((e) => e.dataset.testid);
  root.remove();
  return {played, asked, order};
}
"""


def render_and_click(
    page: Page, game: str, view: dict[str, Any], legal: list[str], clicks: list[str],
    flipped: bool = False,
) -> dict[str, Any]:  # fmt: skip
    result: dict[str, Any] = page.evaluate(
        RENDER_SCRIPT,
        {"game": game, "view": view, "legal": legal, "clicks": clicks, "flipped": flipped},
    )
    return result


def test_renderers_ask_when_a_click_is_ambiguous(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)

    promotion = [f"a7a8{p}" for p in "nbrq"] + ["g2g3"]
    view: dict[str, Any] = {
        "kind": "grid",
        "rows": chess_rows("8/P6k/8/8/8/8/6K1/8"),
        "check": None,
        "last": None,
    }
    out = render_and_click(page, "chess", view, promotion, ["sq-a7", "sq-a8"])
    assert out["asked"] == [["a7a8q", "a7a8r", "a7a8b", "a7a8n"]]  # queen first
    assert out["played"] == ["a7a8q"]
    assert out["order"][0] == "sq-a8"
    flipped = render_and_click(page, "chess", view, [], [], flipped=True)
    assert flipped["order"][0] == "sq-h1" and flipped["order"][-1] == "sq-a8"

    # Two capture paths with the same ends: the player picks one.
    view = {
        "kind": "draughts",
        "rows": draughts_rows({28: "w", 22: "b", 12: "b", 13: "b"}),
    }
    legal = ["28x17x8", "28x19x8"]
    out = render_and_click(page, "draughts", view, legal, ["sq-28", "sq-8"])
    assert out["asked"] == [legal] and out["played"] == ["28x17x8"]
    out = render_and_click(page, "draughts", view, ["28-23"], ["sq-28", "sq-23"])
    assert out["asked"] == [] and out["played"] == ["28-23"]
    flipped = render_and_click(page, "draughts", view, [], [], flipped=True)
    assert flipped["order"][0] == "sq-50" and flipped["order"][-1] == "sq-1"

    # Kono: one piece can reach the empty point, so a click on that point plays.
    view = {"kind": "kono", "points": {"a": "w", "b": "b", "c": "b", "d": "w", "e": ""}}
    assert render_and_click(page, "kono", view, ["c-e"], ["point-e"])["played"] == ["c-e"]
    out = render_and_click(page, "kono", view, ["b-e", "c-e"], ["point-c", "point-e"])
    assert out["played"] == ["c-e"]

    # Oware: North's pits run right to left along the top; North's player sees it turned.
    view = {"kind": "oware", "south": [4] * 6, "north": [4] * 6, "stores": [0, 0]}
    plain = render_and_click(page, "oware", view, [], [])["order"]
    pits = [t for t in plain if t.startswith("pit-")]
    assert pits == [f"pit-{p}" for p in "fedcbaABCDEF"]
    turned = render_and_click(page, "oware", view, [], [], flipped=True)["order"]
    assert [t for t in turned if t.startswith("pit-")] == [f"pit-{p}" for p in "FEDCBAabcdef"]


def test_start_from_a_position_and_pass(live_server: Any, new_page: NewPage) -> None:
    """Othello from a position where White (the human, seat 1) can only pass."""
    page = new_page()
    open_lobby(page, live_server.http_url)
    page.click("[data-testid=game-othello]")
    page.select_option("[data-testid=opponent]", "human")
    page.select_option("[data-testid=seat-choice]", "1")
    page.click("summary")
    page.fill("[data-testid=start-position]", "bw" + "." * 62 + " w")
    page.click("[data-testid=create]")
    page.wait_for_selector(f"{BOARD}[data-game=othello][data-version]")
    guest = new_page()
    guest.goto(page.input_value("[data-testid=invite-link]"))
    guest.click("[data-testid=join-seat]")
    expect(page.locator("[data-testid=pass]")).to_be_visible()
    seen = version(page)
    page.click("[data-testid=pass]")
    wait_version_above(guest, seen)
    expect(guest.locator("[data-testid=moves]")).to_contain_text("pass")
