"""The web client heals: a frozen server is noticed by its pings, and the page reconnects,
resumes the game and shows what the opponent played meanwhile.

The page's own server is a process of its own (frozen with SIGSTOP); the opponent plays
through the shared ``live_server``, another node on the same Redis.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.client.test_browser import BOARD, NewPage, create_game
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.browser

# Ping every 4 s, 6 s for an answer, checked every second: dead within 11 s.
NOTICE_WITHIN_MS = 15_000
# A connection attempt to the frozen node is given up after 8 s, then backoff (up to 10 s).
RECONNECT_WITHIN_MS = 30_000


@pytest.fixture
def own_node(redis_server: EmbeddedRedis) -> Iterator[ServerProcess]:
    node = start_server(redis_server.url)
    try:
        yield node
    finally:
        node.process.send_signal(signal.SIGCONT)  # a frozen process cannot stop
        node.stop()


def test_page_notices_a_frozen_server_and_resumes_the_game(
    own_node: ServerProcess, live_server: Any, new_page: NewPage
) -> None:
    alice, bob = new_page(), new_page()
    create_game(alice, own_node.http_url, "tictactoe", "human", seat="0", name="Alice")
    room = alice.evaluate("window.kibitz.state.room")
    bob.goto(f"{live_server.http_url}/?room={room}")
    bob.click("[data-testid=join-seat]")
    expect(alice.locator("[data-testid=seat-1]")).to_have_attribute("data-connected", "true")
    alice.click("[data-testid=cell-5]")
    expect(bob.locator("[data-testid=move-1]")).to_have_text("5")

    pill = alice.locator("[data-testid=connection]")
    expect(pill).to_have_attribute("data-state", "open")
    own_node.process.send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    expect(pill).to_have_attribute("data-state", "reconnecting", timeout=NOTICE_WITHIN_MS)
    assert time.monotonic() - frozen_at < NOTICE_WITHIN_MS / 1000
    expect(alice.locator("[data-testid=offline]")).to_be_visible()

    # The opponent plays while Alice's node is frozen; she cannot have seen it yet.
    bob.click("[data-testid=cell-1]")
    expect(bob.locator("[data-testid=move-2]")).to_have_text("1")
    assert alice.locator("[data-testid=move-2]").count() == 0

    own_node.process.send_signal(signal.SIGCONT)
    expect(pill).to_have_attribute("data-state", "open", timeout=RECONNECT_WITHIN_MS)
    expect(alice.locator("[data-testid=offline]")).to_be_hidden()
    # Resumed with "since": the move made meanwhile is on her board, and she plays on.
    expect(alice.locator("[data-testid=move-2]")).to_have_text("1")
    expect(alice.locator("[data-testid=cell-1]")).to_have_attribute("data-mark", "o")
    expect(alice.locator(f"{BOARD}")).to_have_attribute("data-turn", "you")
    for player, cell in [(alice, "3"), (bob, "2"), (alice, "7")]:
        expect(player.locator("[data-testid=status]")).to_contain_text("Your move")
        player.click(f"[data-testid=cell-{cell}]")
    expect(alice.locator("[data-testid=result]")).to_contain_text("You win")
    expect(bob.locator("[data-testid=result]")).to_contain_text("You lose")
    expect(alice.locator("[data-testid=move-5]")).to_have_text("7")


def test_a_move_waits_out_a_redis_restart(tmp_path: Path, new_page: NewPage) -> None:
    """server/unavailable while Redis restarts: the page sends the move again (it names
    its version, so it is safe) and it lands, with no error shown."""
    store = EmbeddedRedis(tmp_path / "redis").start()
    node = start_server(store.url)
    restart: threading.Timer | None = None
    try:
        alice, bob = new_page(), new_page()
        create_game(alice, node.http_url, "tictactoe", "human", seat="0")
        bob.goto(alice.input_value("[data-testid=invite-link]"))
        bob.click("[data-testid=join-seat]")
        expect(alice.locator("[data-testid=status]")).to_contain_text("Your move")
        store.stop()
        restart = threading.Timer(1.0, store.start)
        restart.start()
        alice.click("[data-testid=cell-5]")
        restart.join()
        for page in (alice, bob):
            expect(page.locator("[data-testid=move-1]")).to_have_text("5")
        expect(alice.locator("#error")).to_be_hidden()
    finally:
        if restart is not None:
            restart.join()
        node.stop()
        store.stop()


def test_page_resyncs_when_shown_again(live_server: Any, new_page: NewPage) -> None:
    """A tab shown again asks for its room from the last version seen (updates may have
    been lost while it slept), and pings to check its socket."""
    page = new_page()
    sent: list[str] = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(str(frame))))
    create_game(page, live_server.http_url, "tictactoe", "human", seat="0")
    room = page.evaluate("window.kibitz.state.room")
    version = page.evaluate("window.kibitz.state.version")
    sent.clear()
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    expected = f'"type":"resume","room":"{room}"'
    deadline = time.monotonic() + 10
    while not any(expected in frame and f'"since":{version}' in frame for frame in sent):
        assert time.monotonic() < deadline, sent
        page.wait_for_timeout(100)
    assert any('"type":"ping"' in frame for frame in sent)
