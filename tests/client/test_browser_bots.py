"""Bots in the web client, in headless Chromium against a real server (real Redis, real
HTTP, the lichess-compatible API of docs/bot-api.md driven by berserk, unmodified).

A bot account with an open event stream shows in the lobby's "Bots online" with its BOT
badge; a signed-in person challenges it from the lobby with the create form's choices; the
bot, run by this test through berserk, accepts the challenge from its event stream and
plays a move; the page enters the game on its own, with the BOT badge on the bot's seat and
the bot's move on the board. A declined challenge says why, in French words on a French
page, a guest is told to log in first, and Cancel withdraws a challenge. The bot's profile
and the bots' leaderboard mark it too.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import berserk
import pytest
import requests
from playwright.sync_api import Page, expect

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.client.steps import NewPage, in_french, open_lobby, screenshot, state_of
from tests.conftest import ServerProcess, start_server
from tests.server.botapi.conftest import (
    WAIT_S,
    ApiAccount,
    Stream,
    client_for,
    new_account,
    upgrade,
)

pytestmark = pytest.mark.browser

PASSWORD = "a long enough password"


@pytest.fixture(scope="module")
def server(own_redis: EmbeddedRedis) -> Iterator[ServerProcess]:
    """One node on the module's own Redis (no other module's bots are online there)."""
    node = start_server(own_redis.url)
    yield node
    node.stop()


@pytest.fixture(scope="module")
def bot(server: ServerProcess) -> Iterator[tuple[ApiAccount, berserk.Client, Stream]]:
    """A bot account, its berserk client and its open event stream (which makes it online)."""
    account = upgrade(server.http_url, new_account(server.http_url))
    client = client_for(account.token, server)
    events = Stream.open(client, lambda: iter(map(dict, client.bots.stream_incoming_events())))
    wait_online(server.http_url, account.username.lower())
    yield account, client, events
    events.close()


def wait_online(base: str, bot_id: str) -> None:
    """Until `GET /api/bot/online` lists the bot (the lobby reads it only every 30 s)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        answer = requests.get(f"{base}/api/bot/online", timeout=WAIT_S)
        lines = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
        if any(line.get("id") == bot_id for line in lines):
            return
        time.sleep(0.1)
    raise AssertionError(f"{bot_id} never listed online")


def sign_up(page: Page, base: str) -> str:
    """A fresh account signed up in the page's browser context (its cookie); the username."""
    username = "p" + uuid.uuid4().hex[:10]
    answer = page.request.post(
        f"{base}/api/auth/signup",
        data={"username": username, "password": PASSWORD},
        headers={"Origin": base},
    )
    assert answer.status == 201, answer.text()
    return username


def choose(page: Page, game: str, seat: str, time_control: str) -> None:
    """The create form's game, seat and time control (casual: the rated box stays off)."""
    page.click(f"[data-testid=game-{game}]")
    page.select_option("[data-testid=seat-choice]", seat)
    page.select_option("[data-testid=time-control]", time_control)


def challenge_line(events: Stream, challenger: str) -> dict[str, Any]:
    """The next `challenge` event line from `challenger`."""
    return events.wait_for(
        lambda line: (
            line.get("type") == "challenge"
            and line["challenge"]["challenger"]["id"] == challenger.lower()
        )
    )


def test_a_person_challenges_an_online_bot_which_accepts_and_moves(
    server: ServerProcess,
    bot: tuple[ApiAccount, berserk.Client, Stream],
    new_page: NewPage,
) -> None:
    base = server.http_url
    account, client, events = bot
    bot_id = account.username.lower()
    page = new_page()
    person = sign_up(page, base)
    open_lobby(page, base)

    # The bot is listed, marked BOT (named in words for assistive technology).
    item = page.locator(f"[data-testid=bot-{bot_id}]")
    expect(item).to_contain_text(account.username)
    expect(item.get_by_role("img", name="bot account")).to_have_text("BOT")

    # Chess, untimed, the person plays Black: the bot, White, moves first.
    choose(page, "chess", "1", "none")
    item.locator(f"[data-testid=challenge-{bot_id}]").click()
    status = page.locator("[data-testid=bot-challenge]")
    expect(status).to_contain_text(f"Waiting for {account.username}")

    challenge = challenge_line(events, person)["challenge"]
    assert challenge["variant"]["key"] == "standard"
    assert challenge["color"] == "black"
    assert challenge["rated"] is False
    assert challenge["timeControl"]["type"] == "unlimited"
    client.bots.accept_challenge(challenge["id"])
    start = events.wait_for(lambda line: line.get("type") == "gameStart")
    game_id = start["game"]["gameId"]
    assert game_id == challenge["id"]
    client.bots.make_move(game_id, "e2e4")

    # The page entered the room as its Black player, with the bot's seat marked and its move.
    page.wait_for_selector("[data-testid=board][data-game=chess][data-version]")
    page.wait_for_function("() => (window.kibitz.state.moves || []).length >= 1")
    state = state_of(page)
    assert state["room"] == game_id
    assert page.evaluate("window.kibitz.you") == 1
    assert state["seats"][1]["account"] == person and state["seats"][0]["bot"] is True
    expect(page.locator("[data-testid=seat-0] [data-testid=bot-badge]")).to_have_text("BOT")
    expect(page.locator("[data-testid=seat-1] [data-testid=bot-badge]")).to_have_count(0)
    expect(page.locator("[data-testid=moves]")).to_contain_text("e4")
    expect(page.locator("[data-testid=board]")).to_have_attribute("data-turn", "you")
    screenshot(page, "bots-game")

    # Its profile and the bots' leaderboard mark it too.
    page.goto(f"{base}/?player={account.username}")
    expect(page.locator("[data-testid=profile-name] [data-testid=bot-badge]")).to_be_visible()
    page.goto(f"{base}/?leaderboard=chess&speed=blitz&bots=1")
    expect(page.locator("[data-testid=lb-title]")).to_contain_text("Bots' leaderboard")
    expect(page.locator("[data-testid=lb-pool]")).to_have_value("bots")
    expect(page.locator("[data-testid=leaderboard]")).to_have_attribute("data-state", "done")


def test_a_declined_challenge_says_why_in_french_a_guest_logs_in_first_and_cancel(
    server: ServerProcess,
    bot: tuple[ApiAccount, berserk.Client, Stream],
    new_page: NewPage,
) -> None:
    base = server.http_url
    account, client, events = bot
    bot_id = account.username.lower()
    page = in_french(new_page())

    # A guest: told to log in, nothing sent.
    open_lobby(page, base)
    page.click(f"[data-testid=challenge-{bot_id}]")
    status = page.locator("[data-testid=bot-challenge]")
    expect(status).to_have_attribute("data-phase", "signin")
    expect(status).to_contain_text("Connectez-vous pour défier un bot")

    person = sign_up(page, base)
    open_lobby(page, base)
    badge = page.locator(f"[data-testid=bot-{bot_id}]").get_by_role("img", name="compte de bot")
    expect(badge).to_be_visible()
    choose(page, "othello", "0", "1+0")
    page.click(f"[data-testid=challenge-{bot_id}]")
    expect(status).to_contain_text(f"En attente de {account.username}")

    challenge = challenge_line(events, person)["challenge"]
    assert challenge["variant"]["key"] == "othello"
    assert challenge["timeControl"]["limit"] == 60
    client.bots.decline_challenge(challenge["id"], reason="tooFast")

    expect(status).to_have_attribute("data-phase", "declined")
    expect(status).to_contain_text(
        f"{account.username} a refusé\u00a0: cette cadence est trop rapide pour lui"
    )
    screenshot(page.locator("[data-testid=bots-panel]"), "bots-declined-fr")
    # Still in the lobby: challenged again, then canceled before the bot answers.
    expect(page.locator("[data-testid=lobby]")).to_be_visible()
    page.click(f"[data-testid=challenge-{bot_id}]")
    expect(status).to_have_attribute("data-phase", "waiting")
    again = challenge_line(events, person)["challenge"]
    page.click("[data-testid=bot-challenge-cancel]")
    canceled = events.wait_for(lambda line: line.get("type") == "challengeCanceled")
    assert canceled["challenge"]["id"] == again["id"]
    expect(status).to_contain_text(f"Le défi lancé à {account.username} a été annulé")
    expect(page.locator(f"[data-testid=challenge-{bot_id}]")).to_be_enabled()
