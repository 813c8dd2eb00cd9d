"""Game analysis on the game page in headless Chromium against the real server and its two
real workers: "Analyse" on a finished game, progress, the evaluation graph, the marks on
the move list, the evaluation after every move and the best move where another was
played (chess in SAN, Oware in its own notation), the current position's evaluation
under the board, and each player's accuracy; and which engine played an AI seat."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from kibitz.client.connection import KibitzClient, new_player_key
from tests.client.steps import NewPage, run_client, screenshot
from tests.server.http.test_games_api import FOOLS_MATE, play_chess

pytestmark = pytest.mark.browser

SAN = r"([KQRBN]?[a-h]?[1-8]?x?[a-h][1-8](=[QRBN])?|O-O(-O)?)[+#]?"


async def _ai_game_resigned(base: str) -> str:
    async with await KibitzClient.open(base) as client:
        room = (await client.create("tictactoe", "ai:1", seat=1))["room"]
        await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        await client.resign(room)
        await client.wait_state(room, lambda s: s["status"] == "over")
        return str(room)


def test_analyse_a_finished_game_on_its_page(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = run_client(play_chess(base, (new_player_key(), new_player_key()), FOOLS_MATE))
    page = new_page()
    page.goto(f"{base}/?game={room}")
    panel = page.locator("[data-testid=replay-analysis]")
    expect(panel).to_have_attribute("data-status", "none")
    expect(page.locator("[data-testid=replay-analysis-status]")).to_contain_text("Not analysed")
    page.click("[data-testid=replay-analyse]")
    expect(panel).to_have_attribute("data-status", "done", timeout=60_000)
    expect(page.locator("[data-testid=replay-analyse]")).to_be_hidden()
    expect(page.locator("[data-testid=replay-graph-svg]")).to_have_attribute("data-points", "5")
    # 2. g4?? is marked on the move list and as a dot on the graph.
    expect(page.locator("[data-testid=replay-mark-3]")).to_have_text("??")
    assert page.locator(".eval-dot.mark-blunder").count() >= 1
    expect(page.locator("[data-testid=replay-accuracy-0]")).to_contain_text(
        re.compile(r"White: [\d.]+% accuracy \(\d+ inaccurac(y|ies), \d+ mistakes?, 1 blunder\)")
    )
    expect(page.locator("[data-testid=replay-accuracy-1]")).to_contain_text("Black:")
    # Every move shows the evaluation after it, in pawns from White's side; a mate to come
    # as #-N (Black mates in N moves), the mated position as 0-1.
    for ply in (1, 2):
        expect(page.locator(f"[data-testid=replay-eval-{ply}]")).to_have_text(
            re.compile(r"^([+-]\d+\.\d\d|0\.00|#-?\d+)$")
        )
    expect(page.locator("[data-testid=replay-eval-3]")).to_have_text("#-1")
    expect(page.locator("[data-testid=replay-eval-4]")).to_have_text("0-1")
    # 2. g4?? was not the best move found: the best one is shown, in SAN (not UCI); 2... Qh4#
    # was the best, so none is shown under it.
    best = page.locator("[data-testid=replay-best-3]")
    expect(best).to_have_text(
        re.compile(r"^best [KQRBN]?[a-h]?[1-8]?x?[a-h][1-8](=[QRBN])?[+#]?$|^best O-O")
    )
    expect(best).not_to_have_text("best g4")
    expect(page.locator("[data-testid=replay-best-4]")).to_have_count(0)
    # Stepping through: the position's evaluation and its best move under the board.
    page.click("[data-testid=replay-move-3]")
    expect(page.locator("[data-testid=replay-board]")).to_have_attribute("data-ply", "3")
    expect(page.locator("[data-testid=replay-now-eval]")).to_have_text("Evaluation #-1")
    expect(page.locator("[data-testid=replay-now-best]")).to_have_text("Best move here: Qh4#")
    expect(page.locator("[data-testid=replay-now-missed]")).to_contain_text("Instead of 2. g4, ")
    page.keyboard.press("ArrowRight")
    expect(page.locator("[data-testid=replay-now-eval]")).to_have_text("Evaluation 0-1")
    expect(page.locator("[data-testid=replay-eval]")).to_have_text("Evaluation 0-1")
    expect(page.locator("[data-testid=replay-now-best]")).to_have_count(0)
    expect(page.locator("[data-testid=replay-now-missed]")).to_have_count(0)
    # A click on the blunder's dot on the graph goes to that move.
    page.locator(".eval-dot.mark-blunder").first.click()
    expect(page.locator("[data-testid=replay-board]")).to_have_attribute("data-ply", "3")
    # A click on the graph's left edge goes to the start.
    page.locator("[data-testid=replay-graph-svg]").click(position={"x": 1, "y": 10})
    expect(page.locator("[data-testid=replay-board]")).to_have_attribute("data-ply", "0")
    screenshot(page, "analysis-chess", full_page=True)
    # Opened again, the stored analysis is shown at once.
    page.reload()
    expect(panel).to_have_attribute("data-status", "done")
    expect(page.locator("[data-testid=replay-mark-3]")).to_have_text("??")
    # In French: the same evaluations in French words and number format.
    page.evaluate("localStorage.setItem('kibitz:lang', 'fr')")
    page.reload()
    expect(panel).to_have_attribute("data-status", "done")
    expect(page.locator("[data-testid=replay-analysis-status]")).to_contain_text(
        "Scores en pions\u00a0; au-dessus de zéro, avantage au premier joueur (Blancs)"
    )
    expect(page.locator("[data-testid=replay-accuracy-0]")).to_contain_text(
        re.compile(
            r"Blancs\u00a0: précision [\d,]+\u00a0% \(\d+ imprécisions?, \d+ erreurs?, 1 gaffe\)"
        )
    )
    best = page.locator("[data-testid=replay-best-3]")
    expect(best).to_have_text(re.compile(rf"^meilleur\u00a0: {SAN}$"))
    expect(page.locator("[data-testid=replay-ply]")).to_have_text("Après 2\u2026 Qh4# (4 sur 4)")
    expect(page.locator("[data-testid=replay-now-eval]")).to_have_text("Évaluation 0-1")
    page.click("[data-testid=replay-first]")
    expect(page.locator("[data-testid=replay-ply]")).to_have_text("Début (2 coups)")
    screenshot(page, "analysis-chess-fr", full_page=True)


async def _oware_game(base: str, seed: int, plies: int) -> str:
    """Two Python clients play Oware with random moves for ``plies`` plies, then South
    resigns; the room."""
    rng = random.Random(seed)
    clients = [await KibitzClient.open(base), await KibitzClient.open(base)]
    try:
        room = str((await clients[0].create("oware", seat=0))["room"])
        await clients[1].join(room)
        played = 0
        for version in range(1, plies + 1):
            state = await clients[0].wait_state(room, lambda s, v=version: s["version"] >= v)
            if state["status"] == "over":
                break
            move = rng.choice(state["legal_moves"])
            await clients[state["to_move"]].move(room, move, state["version"])
            played += 1
        await clients[0].wait_state(room, lambda s: s["version"] > played or s["status"] == "over")
        await clients[0].resign(room)
        await clients[0].wait_state(room, lambda s: s["status"] == "over")
        return room
    finally:
        for client in clients:
            await client.close()


def test_evaluations_and_best_moves_of_an_oware_game(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = run_client(_oware_game(base, 7, 10))
    page = new_page()
    page.goto(f"{base}/?game={room}")
    panel = page.locator("[data-testid=replay-analysis]")
    expect(panel).to_have_attribute("data-status", "none")
    page.click("[data-testid=replay-analyse]")
    expect(panel).to_have_attribute("data-status", "done", timeout=60_000)
    expect(page.locator("[data-testid=replay-analysis-status]")).to_contain_text("Scores in seeds")
    moves = page.locator("[data-testid^=replay-move-]").count()
    assert moves == 10
    # Seeds from South's side, a whole or a tenth ("+2", "-1.5", "0"), or a forced end.
    for ply in range(1, moves + 1):
        expect(page.locator(f"[data-testid=replay-eval-{ply}]")).to_have_text(
            re.compile(r"^([+-]\d+(\.\d)?|0|#-?\d+|[01]-[01])$")
        )
    # Random moves are not all the best ones: those that were not show the best, written as
    # the game writes its moves (the record's notation), never empty.
    record = page.evaluate(f"fetch('/api/games/{room}').then((r) => r.json())")
    analysis = page.evaluate(f"fetch('/api/games/{room}/analysis').then((r) => r.json())")
    by_ply = {p["ply"]: p for p in analysis["positions"]}
    missed = [
        ply
        for ply in range(1, moves + 1)
        if by_ply[ply - 1].get("best") not in (None, record["moves"][ply - 1]["move"])
    ]
    assert missed, "ten random Oware moves were all the best ones"
    for ply in missed:
        expect(page.locator(f"[data-testid=replay-best-{ply}]")).to_have_text(
            f"best {by_ply[ply - 1]['best_display']}"
        )
    assert page.locator("[data-testid^=replay-best-]").count() == len(missed)
    # Stepping to a move shows that position's evaluation under the board.
    page.click(f"[data-testid=replay-move-{missed[0]}]")
    expect(page.locator("[data-testid=replay-now-eval]")).to_have_text(
        "Evaluation " + page.locator(f"[data-testid=replay-eval-{missed[0]}]").inner_text()
    )
    expect(page.locator("[data-testid=replay-now-missed]")).to_be_visible()
    screenshot(page, "analysis-oware", full_page=True)


def test_the_engine_of_an_ai_seat_on_the_game_page(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = run_client(_ai_game_resigned(base))
    page = new_page()
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-engine-0]")).to_have_text(
        "played by kibitz's searcher"
    )
    assert page.locator("[data-testid=replay-engine-1]").count() == 0


async def _ai_chess_resigned(base: str) -> str:
    """The computer (White, level 1) makes its first move, then Black resigns: the record's
    first move carries the line the AI expected."""
    async with await KibitzClient.open(base) as client:
        room = (await client.create("chess", "ai:1", seat=1))["room"]
        await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        await client.resign(room)
        await client.wait_state(room, lambda s: s["status"] == "over")
        return str(room)


def test_lines_and_units_in_the_games_words(live_server: Any, new_page: NewPage) -> None:
    """The AI's expected line in SAN like the moves (not "c6d4"), and a French evaluation's
    unit agreeing with its number ("+0,30 pion", singular below 2)."""
    base = live_server.http_url
    room = run_client(_ai_chess_resigned(base))
    page = new_page()
    page.goto(f"{base}/?game={room}")
    page.click("[data-testid=replay-move-1]")
    line = page.locator("[data-testid=replay-line]")
    expect(line).to_have_text(re.compile(rf"^White expected: {SAN}( {SAN})*$"))
    expect(line).not_to_have_text(re.compile(r"[a-h][1-8][a-h][1-8]"))
    page.click("[data-testid=replay-analyse]")
    panel = page.locator("[data-testid=replay-analysis]")
    expect(panel).to_have_attribute("data-status", "done", timeout=60_000)
    page.evaluate("localStorage.setItem('kibitz:lang', 'fr')")
    page.reload()
    expect(panel).to_have_attribute("data-status", "done")
    page.click("[data-testid=replay-move-1]")
    expect(page.locator("[data-testid=replay-line]")).to_have_text(
        re.compile(rf"^Suite prévue \(Blancs\)\u00a0: {SAN}( {SAN})*$")
    )
    value = page.locator("[data-testid=replay-now-eval]")
    expect(value).to_have_text(re.compile(r"^Évaluation "))
    score = float(value.inner_text().split()[-1].replace(",", ".").replace("\u2212", "-"))
    unit = "pion" if abs(score) < 2 else "pions"
    expect(value).to_have_attribute("title", re.compile(rf"^Évaluation \S+ {unit}, du point"))
