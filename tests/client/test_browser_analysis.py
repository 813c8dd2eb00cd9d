"""Game analysis on the game page in headless Chromium against the real server and its two
real workers: "Analyse" on a finished game, progress, the evaluation graph, the marks on
the move list and each player's accuracy; and which engine played an AI seat."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from playwright.sync_api import expect

from kibitz.client.connection import KibitzClient, new_player_key
from tests.client.test_browser import NewPage
from tests.server.http.test_games_api import FOOLS_MATE, play_chess

pytestmark = pytest.mark.browser


def _run(coroutine: Coroutine[Any, Any, str]) -> str:
    """Run client code beside the page (Playwright's sync API holds this thread's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result(timeout=60)


async def _ai_game_resigned(base: str) -> str:
    async with await KibitzClient.open(base) as client:
        room = (await client.create("tictactoe", "ai:1", seat=1))["room"]
        await client.wait_state(room, lambda s: len(s["moves"]) == 1, timeout=30)
        await client.resign(room)
        await client.wait_state(room, lambda s: s["status"] == "over")
        return str(room)


def test_analyse_a_finished_game_on_its_page(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = _run(play_chess(base, (new_player_key(), new_player_key()), FOOLS_MATE))
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
    # A click on the graph's left edge goes to the start.
    page.locator("[data-testid=replay-graph-svg]").click(position={"x": 1, "y": 10})
    expect(page.locator("[data-testid=replay-board]")).to_have_attribute("data-ply", "0")
    # Opened again, the stored analysis is shown at once.
    page.reload()
    expect(panel).to_have_attribute("data-status", "done")
    expect(page.locator("[data-testid=replay-mark-3]")).to_have_text("??")


def test_the_engine_of_an_ai_seat_on_the_game_page(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    room = _run(_ai_game_resigned(base))
    page = new_page()
    page.goto(f"{base}/?game={room}")
    expect(page.locator("[data-testid=replay-engine-0]")).to_have_text(
        "played by kibitz's searcher"
    )
    assert page.locator("[data-testid=replay-engine-1]").count() == 0
