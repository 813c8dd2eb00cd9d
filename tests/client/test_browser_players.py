"""Accounts, rated play, ratings, leaderboards, profiles and civil play in headless
Chromium against a real server (real Redis, a real SQLite archive, real WebSockets).

Two visitors sign up in two browser contexts, play a rated tic-tac-toe game to the end and
see both ratings change on the end screen; the leaderboard lists them (their ratings are
seeded with a low deviation through the database first, so they are not provisional) and
a profile shows the rating graph; the loser blocks and reports the winner from the game
page and reports a chat line, and the reports and the block are read back from the
database. Also: a failed log-in says one generic sentence, "Seats to resume" lists only
unfinished games, and API tokens are made (shown once) and revoked from the account page.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.client.test_browser import NewPage, open_lobby
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.browser

PASSWORD = "correct horse battery"
GAME, SPEED = "tictactoe", "correspondence"  # an untimed game is rated "correspondence"
SEEDED_RD = 60.0  # well under the provisional mark (RD 110)
BOUNDED_WAIT_S = 20.0


@pytest.fixture
def players_server(own_redis: Any, tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    """A server archiving into a SQLite file of this test's own, which the test reads, on
    this module's own Redis (the lobby and the per-address counts see no other module's)."""
    path = tmp_path / "games.sqlite3"
    server = start_server(own_redis.url, workers=0, database_url=f"sqlite:///{path}")
    yield server, path
    server.stop()


def unique(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(3)}"


def rows(path: Path, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path, timeout=10) as db:
        return list(db.execute(query, args))


def wait_rows(path: Path, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """The rows of `query` once there are some (bounded in time)."""
    deadline = time.monotonic() + BOUNDED_WAIT_S
    while True:
        found = rows(path, query, *args)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def account_id(path: Path, username: str) -> int:
    found = rows(path, "SELECT id FROM accounts WHERE username_key = ?", username.lower())
    assert found, f"no account {username} in the database"
    return int(found[0][0])


def seed_rating(path: Path, username: str, rating: float) -> None:
    """A settled rating (low deviation) for `username` in tic-tac-toe, correspondence."""
    now = int(time.time() * 1000)
    with sqlite3.connect(path, timeout=10) as db:
        db.execute(
            "INSERT INTO ratings (account_id, game, speed, rating, rd, volatility, games, wins,"
            " draws, losses, period_ms) VALUES (?, ?, ?, ?, ?, 0.06, 30, 15, 0, 15, ?)",
            (account_id(path, username), GAME, SPEED, rating, SEEDED_RD, now),
        )


def sign_up(page: Page, base: str, username: str) -> None:
    open_lobby(page, base)
    page.click("[data-testid=signup-open]")
    form = page.locator("[data-testid=signup-form]")
    expect(form).to_be_visible()
    form.locator("[data-testid=form-username]").fill(username)
    form.locator("[data-testid=form-password]").fill(PASSWORD)
    form.locator("[data-testid=form-submit]").click()
    expect(form).to_have_count(0)
    expect(page.locator("[data-testid=account-name]")).to_contain_text(username)
    # The socket opens again as the account: wait until it is back.
    expect(page.locator("[data-testid=connection]")).to_have_attribute("data-state", "open")


def create_rated_game(page: Page, base: str) -> str:
    """A rated, untimed tic-tac-toe game against a human, from the lobby; its room id."""
    open_lobby(page, base)
    expect(page.locator("[data-testid=rated]")).to_be_enabled()
    page.click(f"[data-testid=game-{GAME}]")
    page.select_option("[data-testid=opponent]", "human")
    page.select_option("[data-testid=seat-choice]", "0")
    page.select_option("[data-testid=time-control]", "none")
    page.check("[data-testid=rated]")
    page.click("[data-testid=create]")
    page.wait_for_function(
        """() => { const e = document.querySelector('[data-testid=error]');
                   return (!e.hidden && !e.classList.contains('notice'))
                     || document.querySelector('[data-testid=board][data-version]') !== null; }"""
    )
    toast = "[data-testid=error]"
    assert page.is_hidden(f"{toast}:not(.notice)"), page.inner_text(toast)
    page.wait_for_selector(f"[data-testid=board][data-game={GAME}][data-version]")
    expect(page.locator("[data-testid=time-control-label]")).to_have_attribute("data-rated", "true")
    return str(page.evaluate("window.kibitz.state.room"))


def play(page: Page, cell: str) -> None:
    expect(page.locator("[data-testid=status]")).to_contain_text("Your move")
    page.click(f"[data-testid=cell-{cell}]")
    mark = re.compile("x|o")
    expect(page.locator(f"[data-testid=cell-{cell}]")).to_have_attribute("data-mark", mark)


def test_a_rated_game_between_two_accounts_then_leaderboard_profile_block_and_report(
    players_server: tuple[ServerProcess, Path], new_page: NewPage
) -> None:
    server, db = players_server
    base = server.http_url
    ann_name, bob_name = unique("ann"), unique("bob")
    ann, bob = new_page(), new_page()
    sign_up(ann, base, ann_name)
    sign_up(bob, base, bob_name)
    seed_rating(db, ann_name, 1600.0)
    seed_rating(db, bob_name, 1500.0)

    # A guest cannot choose a rated game: the choice is off, with a way to log in.
    guest = new_page()
    open_lobby(guest, base)
    expect(guest.locator("[data-testid=rated]")).to_be_disabled()
    expect(guest.locator("[data-testid=rated-hint]")).to_contain_text("need an account")

    room = create_rated_game(ann, base)
    expect(ann.locator("[data-testid=seat-rating-0]")).to_have_text(" 1600")
    bob.goto(f"{base}/?room={room}")
    bob.click("[data-testid=join-seat]")
    expect(bob.locator("[data-testid=seat-1]")).to_contain_text(bob_name)
    expect(bob.locator("[data-testid=seat-rating-1]")).to_have_text(" 1500")
    expect(ann.locator("[data-testid=seat-rating-1]")).to_have_text(" 1500")
    expect(bob.locator("[data-testid=seat-rating-0]")).to_have_text(" 1600")

    # Ann says something rude before the game is over; Bob will report the line.
    ann.fill("[data-testid=chat-input]", "you play like a potato")
    ann.click("[data-testid=chat-send]")
    line = bob.locator("[data-testid=chat-line]", has_text="potato")
    expect(line).to_be_visible()

    # X (Ann) takes the top row: 1, (O 4), 2, (O 5), 3.
    for player, cell in ((ann, "1"), (bob, "4"), (ann, "2"), (bob, "5"), (ann, "3")):
        play(player, cell)
    for page in (ann, bob):
        expect(page.locator("[data-testid=result]")).to_be_visible()
        changes = page.locator("[data-testid=rating-changes]")
        expect(changes).to_have_attribute("data-state", "done")
    winner = float(ann.get_attribute("[data-testid=rating-change-0]", "data-change") or "nan")
    loser = float(ann.get_attribute("[data-testid=rating-change-1]", "data-change") or "nan")
    assert winner > 0 > loser, (winner, loser)
    expect(ann.locator("[data-testid=rating-change-0]")).to_contain_text("1600 \u2192 ")
    expect(bob.locator("[data-testid=rating-change-1]")).to_contain_text("1500 \u2192 ")
    expect(bob.locator("[data-testid=rating-change-1]")).to_contain_text("\u2212")

    # Bob reports the chat line, then reports and blocks Ann from her name's menu.
    line.locator("[data-testid=report-line]").click()
    form = bob.locator("[data-testid=report-form]")
    expect(form).to_contain_text("potato")
    form.locator("[data-testid=form-submit]").click()
    expect(form).to_have_count(0)
    expect(bob.locator("[data-testid=notice]")).to_contain_text("report")

    bob.click("[data-testid=seat-name-0]")
    bob.click("[data-testid=seat-report-0]")
    form = bob.locator("[data-testid=report-form]")
    form.locator("[data-testid=form-reason]").select_option("cheating")
    form.locator("[data-testid=form-text]").fill("moved too fast")
    form.locator("[data-testid=form-submit]").click()
    expect(form).to_have_count(0)
    bob.click("[data-testid=seat-name-0]")
    bob.click("[data-testid=seat-block-0]")
    expect(bob.locator("[data-testid=notice]")).to_contain_text(f"You blocked {ann_name}")

    ann_id, bob_id = account_id(db, ann_name), account_id(db, bob_name)
    reports = rows(
        db,
        "SELECT reason, text, room, line FROM reports WHERE reporter_id = ? AND target_id = ?"
        " ORDER BY id",
        bob_id,
        ann_id,
    )
    assert reports == [
        ("abuse", "", room, "you play like a potato"),
        ("cheating", "moved too fast", room, None),
    ], reports
    assert rows(db, "SELECT 1 FROM blocks WHERE account_id = ? AND blocked_id = ?", bob_id, ann_id)

    # The leaderboard: both, Ann first, each linking to a profile.
    bob.goto(f"{base}/?leaderboard={GAME}&speed={SPEED}")
    board = bob.locator("[data-testid=leaderboard]")
    expect(board).to_have_attribute("data-state", "done")
    expect(bob.locator(f"[data-testid=lb-row-{ann_name}]")).to_be_visible()
    expect(bob.locator(f"[data-testid=lb-row-{bob_name}]")).to_be_visible()
    names = board.locator("tbody tr td:nth-child(2) a").all_inner_texts()
    assert names.index(ann_name) < names.index(bob_name), names

    # Ann's profile: the ratings table, the W/D/L, the graph (an image that loads) and
    # the game just played among the recent ones, linking to its page.
    bob.click(f"[data-testid=lb-player-{ann_name}]")
    expect(bob.locator("[data-testid=profile-name]")).to_contain_text(ann_name)
    expect(bob.locator("[data-testid=profile-since]")).to_contain_text("Member since")
    row = bob.locator(f"[data-testid=profile-rating-{GAME}-{SPEED}]")
    expect(row).to_contain_text("16")  # 16xx after a win
    expect(row.locator("td").nth(4)).to_have_text("16")  # 15 seeded wins and this one
    graph = bob.locator("[data-testid=profile-graph]")
    svg_url = re.compile(r"rating\.svg\?game=tictactoe&speed=correspondence")
    expect(graph).to_have_attribute("src", svg_url)
    bob.wait_for_function(
        "() => { const i = document.querySelector('[data-testid=profile-graph]');"
        " return i && i.complete && i.naturalWidth > 0; }"
    )
    expect(bob.locator(f"[data-testid=profile-game-{room}]")).to_be_visible()
    expect(bob.locator("[data-testid=profile-block]")).to_be_visible()


def test_a_failed_log_in_says_one_generic_sentence(
    players_server: tuple[ServerProcess, Path], new_page: NewPage
) -> None:
    server, _ = players_server
    base = server.http_url
    name = unique("cy")
    sign_up(new_page(), base, name)
    page = new_page()
    open_lobby(page, base)
    said = []
    for username, password in ((name, "not the password"), (unique("nobody"), PASSWORD)):
        page.click("[data-testid=login-open]")
        form = page.locator("[data-testid=login-form]")
        form.locator("[data-testid=form-username]").fill(username)
        form.locator("[data-testid=form-password]").fill(password)
        form.locator("[data-testid=form-submit]").click()
        error = form.locator("[data-testid=form-error]")
        expect(error).to_be_visible()
        said.append(error.inner_text())
        form.locator("[data-testid=form-cancel]").click()
        expect(form).to_have_count(0)
    # The same words whether the name exists or not, and no code shown.
    assert said == ["Wrong username or password."] * 2, said
    expect(page.locator("[data-testid=login-open]")).to_be_visible()

    page.click("[data-testid=login-open]")
    form = page.locator("[data-testid=login-form]")
    form.locator("[data-testid=form-username]").fill(name.upper())  # names are case-blind
    form.locator("[data-testid=form-password]").fill(PASSWORD)
    form.locator("[data-testid=form-submit]").click()
    expect(page.locator("[data-testid=account-name]")).to_contain_text(name)
    page.click("[data-testid=account-name]")
    page.click("[data-testid=menu-logout]")
    expect(page.locator("[data-testid=login-open]")).to_be_visible()
    assert page.evaluate("window.kibitz.account") is None


def test_seats_to_resume_lists_only_unfinished_games(
    players_server: tuple[ServerProcess, Path], new_page: NewPage
) -> None:
    server, _ = players_server
    base = server.http_url
    page, friend = new_page(), new_page()
    open_lobby(page, base)
    page.click("[data-testid=game-tictactoe]")
    page.select_option("[data-testid=opponent]", "human")
    page.select_option("[data-testid=seat-choice]", "0")
    page.click("[data-testid=create]")
    page.wait_for_selector("[data-testid=board][data-version]")
    finished = str(page.evaluate("window.kibitz.state.room"))
    friend.goto(f"{base}/?room={finished}")
    friend.click("[data-testid=join-seat]")
    for player, cell in ((page, "1"), (friend, "4"), (page, "2"), (friend, "5"), (page, "3")):
        play(player, cell)
    expect(page.locator("[data-testid=result]")).to_be_visible()

    # A second game, left waiting for an opponent.
    open_lobby(page, base)
    page.select_option("[data-testid=opponent]", "human")
    page.click("[data-testid=create]")
    page.wait_for_selector("[data-testid=board][data-version]")
    waiting = str(page.evaluate("window.kibitz.state.room"))

    open_lobby(page, base)
    expect(page.locator(f"[data-testid=mine-{waiting}]")).to_be_visible()
    expect(page.locator(f"[data-testid=mine-{finished}]")).to_have_count(0)

    # A seat stored before the page knew the game had ended is checked with the server.
    page.evaluate(
        """room => {
             const seats = JSON.parse(localStorage.getItem('kibitz:seats'));
             delete seats[room].over;
             localStorage.setItem('kibitz:seats', JSON.stringify(seats));
           }""",
        finished,
    )
    open_lobby(page, base)
    expect(page.locator(f"[data-testid=mine-{waiting}]")).to_be_visible()
    expect(page.locator(f"[data-testid=mine-{finished}]")).to_have_count(0)


def test_api_tokens_are_shown_once_and_revoked(
    players_server: tuple[ServerProcess, Path], new_page: NewPage
) -> None:
    server, db = players_server
    base = server.http_url
    page = new_page()
    name = unique("dee")
    sign_up(page, base, name)
    page.click("[data-testid=account-name]")
    page.click("[data-testid=menu-account]")
    expect(page.locator("[data-testid=tokens]")).to_have_attribute("data-state", "done")
    page.fill("[data-testid=token-description]", "my bot")
    page.check("[data-testid=token-scope-read]")
    page.click("[data-testid=token-create]")
    secret = page.locator("[data-testid=token-secret]")
    expect(secret).to_have_value(re.compile(r"^kbz_[A-Za-z0-9_-]{32}$"))
    token = secret.input_value()
    listed = page.locator("[data-testid=tokens] tbody tr")
    expect(listed).to_have_count(1)
    expect(listed.first).to_contain_text("my bot")
    expect(listed.first).to_contain_text("play, read")
    # The database keeps only the hash.
    stored = rows(db, "SELECT token_hash FROM tokens WHERE account_id = ?", account_id(db, name))
    assert len(stored) == 1 and stored[0][0] != token and len(stored[0][0]) == 64

    # Shown once: the page opened again lists the token, never its secret.
    page.reload()
    expect(page.locator("[data-testid=tokens]")).to_have_attribute("data-state", "done")
    expect(page.locator("[data-testid=token-secret]")).to_have_count(0)
    assert token not in page.content()
    page.locator("[data-testid^=revoke-]").first.click()
    expect(page.locator("[data-testid=tokens-empty]")).to_be_visible()
    revoked = wait_rows(
        db,
        "SELECT revoked_ms FROM tokens WHERE account_id = ? AND revoked_ms IS NOT NULL",
        account_id(db, name),
    )
    assert revoked


def choose_rated(page: Page, base: str, time_control: str = "none") -> None:
    open_lobby(page, base)
    page.click(f"[data-testid=game-{GAME}]")
    page.select_option("[data-testid=time-control]", time_control)
    page.check("[data-testid=rated]")


def test_quick_pairing_and_a_rated_seek_with_a_rating_range(
    players_server: tuple[ServerProcess, Path], new_page: NewPage
) -> None:
    server, db = players_server
    base = server.http_url
    eve_name, fay_name = unique("eve"), unique("fay")
    eve, fay = new_page(), new_page()
    sign_up(eve, base, eve_name)
    sign_up(fay, base, fay_name)
    seed_rating(db, eve_name, 1800.0)

    # Quick pairing: both wait in the rated pool of untimed tic-tac-toe and are seated
    # together in a rated game, each seeing the other's rating.
    for page in (eve, fay):
        choose_rated(page, base)
        page.click("[data-testid=quick-pairing]")
    for page in (eve, fay):
        page.wait_for_selector(f"[data-testid=board][data-game={GAME}][data-version]")
        expect(page.locator("[data-testid=time-control-label]")).to_have_attribute(
            "data-rated", "true"
        )
    room = eve.evaluate("window.kibitz.state.room")
    assert fay.evaluate("window.kibitz.state.room") == room
    seats = eve.evaluate("window.kibitz.state.seats.map(s => [s.account, s.rating])")
    assert sorted(seats) == sorted([[eve_name, 1800], [fay_name, 1500]]), seats
    eve.click("[data-testid=abort]")

    # A rated seek for opponents rated 1700 to 1900: Fay (1500) may not accept it, and is
    # told why in words; the list shows Eve's rating.
    choose_rated(eve, base, "d3")
    eve.select_option("[data-testid=opponent]", "human")  # a challenge is for a person
    eve.fill("[data-testid=range-min]", "1700")
    eve.fill("[data-testid=range-max]", "1900")
    eve.click("[data-testid=post-seek]")
    open_lobby(fay, base)
    seek = fay.locator("[data-testid^=seek-]", has_text=eve_name)
    expect(seek).to_contain_text("rated, 1700\u20131900")
    expect(seek.locator("[data-testid^=seek-rating-]")).to_have_text(" 1800")
    seek.locator("[data-testid^=accept-]").click()
    toast = fay.locator("[data-testid=error]")
    expect(toast).to_contain_text("Your rating is outside the range that challenge asks for")


def test_the_ai_cap_refusal_links_the_games_that_count(own_redis: Any, new_page: NewPage) -> None:
    # This module's own Redis: every test client is 127.0.0.1, so the AI games of other
    # modules' tests would count toward this address's cap.
    server = start_server(own_redis.url, extra_env={"KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "1"})
    try:
        page = new_page()
        base = server.http_url
        open_lobby(page, base)
        page.click(f"[data-testid=game-{GAME}]")
        page.select_option("[data-testid=opponent]", "ai:1")
        page.select_option("[data-testid=seat-choice]", "0")
        page.click("[data-testid=create]")
        page.wait_for_selector(f"[data-testid=board][data-game={GAME}][data-version]")
        first = page.evaluate("window.kibitz.state.room")
        open_lobby(page, base)
        page.click("[data-testid=create]")
        toast = page.locator("[data-testid=error]")
        expect(toast).to_contain_text("too many unfinished games against the computer")
        link = toast.locator(f"[data-testid=error-room-{first}]")
        expect(link).to_have_attribute("href", f"?room={first}")
        link.click()
        page.wait_for_selector(f"[data-testid=board][data-game={GAME}][data-version]")
        assert page.evaluate("window.kibitz.state.room") == first
    finally:
        server.stop()


def log_in(page: Page, base: str, username: str, password: str) -> None:
    open_lobby(page, base)
    page.click("[data-testid=login-open]")
    form = page.locator("[data-testid=login-form]")
    form.locator("[data-testid=form-username]").fill(username)
    form.locator("[data-testid=form-password]").fill(password)
    form.locator("[data-testid=form-submit]").click()
    expect(page.locator("[data-testid=account-name]")).to_contain_text(username)


def test_change_password_log_out_everywhere_and_claim_a_guest_game(
    players_server: tuple[ServerProcess, Path], new_page: NewPage
) -> None:
    server, db = players_server
    base = server.http_url
    name = unique("gil")
    home, phone = new_page(), new_page()

    # The home browser plays a game as a guest first, then signs up: the game comes along.
    open_lobby(home, base)
    home.click(f"[data-testid=game-{GAME}]")
    home.select_option("[data-testid=opponent]", "human")
    home.click("[data-testid=create]")
    home.wait_for_selector("[data-testid=board][data-version]")
    sign_up(home, base, name)
    guest_id = home.evaluate("JSON.parse(localStorage.getItem('kibitz:player')).id")
    claimed = rows(
        db,
        "SELECT 1 FROM account_players WHERE player_id = ? AND account_id = ?",
        guest_id,
        account_id(db, name),
    )
    assert claimed, "signing up did not claim this browser's player key"

    log_in(phone, base, name, PASSWORD)
    home.click("[data-testid=account-name]")
    home.click("[data-testid=menu-password]")
    form = home.locator("[data-testid=password-form]")
    form.locator("[data-testid=form-password]").fill("not my password")
    form.locator("[data-testid=form-new_password]").fill("a new long password")
    form.locator("[data-testid=form-submit]").click()
    expect(form.locator("[data-testid=form-error]")).to_be_visible()
    form.locator("[data-testid=form-password]").fill(PASSWORD)
    form.locator("[data-testid=form-submit]").click()
    expect(form).to_have_count(0)
    expect(home.locator("[data-testid=notice]")).to_contain_text("password is changed")
    # The other session ended; this one stays.
    phone.reload()
    expect(phone.locator("[data-testid=login-open]")).to_be_visible()
    home.reload()
    expect(home.locator("[data-testid=account-name]")).to_contain_text(name)

    log_in(phone, base, name, "a new long password")
    phone.click("[data-testid=account-name]")
    phone.click("[data-testid=menu-logout-all]")
    expect(phone.locator("[data-testid=login-open]")).to_be_visible()
    home.reload()
    expect(home.locator("[data-testid=login-open]")).to_be_visible()
