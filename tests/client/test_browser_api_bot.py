"""Our own Stockfish bot (client/lichess_bot.py, on berserk and python-chess) against a
person in headless Chromium, through the lichess-compatible Bot API (docs/bot-api.md).

One node on the module's own Redis; a bot account made as lichess bots are (sign up, a
``play`` token, ``POST /api/bot/account/upgrade``) and the bot program running as a
subprocess against the node. A person signs up in the browser, challenges the bot from the
lobby's "Bots online" list to a 1+0 chess game and plays random legal moves with the text
move box while the page shows the bot's replies (and its greeting in the chat); a draw
offer from the page is declined; the game ends by mate or the person resigns, and the
bot's clock never ran out. The bot declines a game it cannot play (the
page says why), its time budget keeps a bullet clock alive, and SIGINT stops it cleanly.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import requests
from playwright.sync_api import Page, expect

from kibitz.client.lichess_bot import MIN_THINK_MS, think_time
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.client.steps import (
    BOARD,
    NewPage,
    open_lobby,
    resign,
    state_of,
    wait_my_turn_or_over,
)
from tests.conftest import ServerProcess, start_server
from tests.server.botapi.conftest import new_account, upgrade

pytestmark = pytest.mark.browser

STOCKFISH = shutil.which("stockfish") or "/usr/games/stockfish"
WAIT_S = 20.0  # the longest any step waits
THINK_S = 0.2  # the bot's --max-think: a fast game, still Stockfish's own moves
PERSON_MOVES = 30  # then the person resigns, if the bot has not mated yet
PASSWORD = "a long enough password"
BOT_SEAT = 1  # the person takes White (seat 0) in the lobby's form


def unique(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(3)}"


@dataclass
class BotProcess:
    """``python -m kibitz.client.lichess_bot`` as a child process; ``lines`` is its log."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)  # its output closed

    @classmethod
    def start(cls, url: str, token: str) -> BotProcess:
        if not os.access(STOCKFISH, os.X_OK):
            pytest.fail(f"Stockfish is not installed at {STOCKFISH} (.ci/run installs Debian's)")
        process = subprocess.Popen(
            [sys.executable, "-m", "kibitz.client.lichess_bot", "--url", url,
             "--engine", STOCKFISH, "--max-think", str(THINK_S)],
            env={**os.environ, "KIBITZ_BOT_TOKEN": token},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        bot = cls(process)
        threading.Thread(target=bot._read, daemon=True).start()
        bot.wait_for(r"signed in as")
        return bot

    def _read(self) -> None:
        for line in self.process.stdout or []:
            self.lines.append(line.rstrip("\n"))
        self.ended.set()

    def matching(self, pattern: str) -> list[re.Match[str]]:
        return [found for line in list(self.lines) if (found := re.search(pattern, line))]

    def wait_for(self, pattern: str, count: int = 1) -> re.Match[str]:
        """The first of `count` log lines matching `pattern`, once there are that many
        (bounded in time; fails at once when the bot has exited without them)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            found = self.matching(pattern)
            if len(found) >= count:
                return found[0]
            if self.ended.is_set() or time.monotonic() > deadline:
                log = "\n".join(self.lines)
                raise AssertionError(f"the bot logged {len(found)} of {count} {pattern!r}:\n{log}")
            time.sleep(0.05)

    def interrupt(self) -> int:
        """SIGINT, as Ctrl-C does; the exit code (bounded in time)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            log = "\n".join(self.lines)
            raise AssertionError(f"the bot did not stop on SIGINT:\n{log}") from None


def bot_account(base: str) -> tuple[str, str]:
    """A new account made a bot as lichess bots are: sign up, a ``play`` token made with the
    session, then ``POST /api/bot/account/upgrade`` with the token; (username, token)."""
    account = upgrade(base, new_account(base))
    return account.username, account.token


def wait_online(base: str, username: str) -> None:
    """Until ``GET /api/bot/online`` lists the bot (its event stream is open): the lobby
    reads that list when it opens."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        answer = requests.get(f"{base}/api/bot/online", timeout=WAIT_S).text
        if username.lower() in [json.loads(line)["id"] for line in answer.splitlines() if line]:
            return
        time.sleep(0.1)
    raise AssertionError(f"{username} never showed in /api/bot/online")


@pytest.fixture(scope="module")
def api_server(own_redis: EmbeddedRedis) -> Iterator[ServerProcess]:
    server = start_server(own_redis.url)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stockfish_bot(api_server: ServerProcess) -> Iterator[tuple[str, BotProcess]]:
    """The bot program, running as a fresh bot account: (its username, the process)."""
    username, token = bot_account(api_server.http_url)
    bot = BotProcess.start(api_server.http_url, token)
    wait_online(api_server.http_url, username)
    yield username, bot
    bot.interrupt()


def sign_up(page: Page, base: str) -> None:
    """A person signs up from the lobby's top bar; returns once the page is theirs."""
    open_lobby(page, base)
    page.click("[data-testid=signup-open]")
    form = page.locator("[data-testid=signup-form]")
    form.locator("[data-testid=form-username]").fill(unique("ann"))
    form.locator("[data-testid=form-password]").fill(PASSWORD)
    form.locator("[data-testid=form-submit]").click()
    expect(form).to_have_count(0)
    # The socket opens again as the account: wait until it is back.
    expect(page.locator("[data-testid=connection]")).to_have_attribute("data-state", "open")


def challenge_from_lobby(page: Page, base: str, bot: str, game: str, time_control: str) -> None:
    """In the lobby: choose the game, White and the time control, then press the bot's
    Challenge button in "Bots online"."""
    open_lobby(page, base)
    page.click(f"[data-testid=game-{game}]")
    page.select_option("[data-testid=seat-choice]", "0")
    page.select_option("[data-testid=time-control]", time_control)
    button = page.locator(f"[data-testid=challenge-{bot.lower()}]")
    expect(button).to_be_enabled(timeout=WAIT_S * 1000)
    button.click()


def play_text_move(page: Page, move: str) -> None:
    """Type the move (UCI) in the text move box; returns once the page shows it played."""
    before = len(state_of(page)["moves"])
    field = page.locator("[data-testid=text-move]")
    field.fill(move)
    field.press("Enter")
    page.wait_for_function("n => window.kibitz.state.moves.length > n", arg=before)


def test_a_person_challenges_the_bot_from_the_lobby_and_it_never_flags(
    api_server: ServerProcess, stockfish_bot: tuple[str, BotProcess], new_page: NewPage
) -> None:
    bot_name, bot = stockfish_bot
    page = new_page()
    sign_up(page, api_server.http_url)
    challenge_from_lobby(page, api_server.http_url, bot_name, "chess", "1+0")
    page.wait_for_selector(f"{BOARD}[data-game=chess][data-version]", timeout=WAIT_S * 1000)
    state = state_of(page)
    room = state["room"]
    assert state["you"] == 1 - BOT_SEAT
    assert (state["clock"]["initial_ms"], state["clock"]["increment_ms"]) == (60_000, 0)
    expect(page.locator(f"[data-testid=seat-{BOT_SEAT}]")).to_contain_text(bot_name)
    bot.wait_for(rf"accepted challenge {room}")

    rng = random.Random(23)
    lowest_bot_clock = 60_000
    for turn in range(PERSON_MOVES):
        if not wait_my_turn_or_over(page):
            break  # mated
        if turn == 2:  # a draw offer from the page: the bot declines it, the page says so
            page.click("[data-testid=offer-draw]")
            notice = page.locator("[data-testid=offer-notice]")
            expect(notice).to_contain_text("declined the draw offer")
            bot.wait_for(rf"game {room}: declined the draw offer")
        state = state_of(page)
        lowest_bot_clock = min(lowest_bot_clock, state["clock"]["remaining_ms"][BOT_SEAT])
        moves = state["moves"]
        if moves:  # the bot's reply is on the page, in the move list
            assert moves[-1]["seat"] == BOT_SEAT
            reply = page.locator(f"[data-testid=move-{len(moves)}]")
            expect(reply).to_have_attribute("title", moves[-1]["move"])
        play_text_move(page, rng.choice(state["legal_moves"]))
    else:
        if wait_my_turn_or_over(page):
            resign(page)

    expect(page.locator("[data-testid=result]")).to_be_visible()
    final = state_of(page)
    result = final["result"]
    assert result["termination"] != "time", result  # nobody flagged, least of all the bot
    # Stockfish against random moves: it mates, or the person gives up.
    assert result["termination"] in ("checkmate", "resignation"), result
    assert result["winner"] == BOT_SEAT, result
    lowest_bot_clock = min(lowest_bot_clock, final["clock"]["remaining_ms"][BOT_SEAT])
    assert lowest_bot_clock > 0
    bot_moves = [move for move in final["moves"] if move["seat"] == BOT_SEAT]
    person_moves = len(final["moves"]) - len(bot_moves)
    assert len(bot_moves) in (person_moves, person_moves - 1) and len(bot_moves) >= 2
    # The bot sent each of them (each logged with its budget) and saw the game end; its
    # greeting, said once, is in the page's chat.
    bot.wait_for(rf"game {room}: played ", count=len(bot_moves))
    assert len(bot.matching(rf"game {room}: played ")) == len(bot_moves)
    bot.wait_for(rf"game {room} over: (mate|resign)")
    expect(page.locator("[data-testid=chat-line]", has_text="Stockfish bot")).to_have_count(1)


def test_the_bot_declines_a_game_it_cannot_play(
    api_server: ServerProcess, stockfish_bot: tuple[str, BotProcess], new_page: NewPage
) -> None:
    bot_name, bot = stockfish_bot
    page = new_page()
    sign_up(page, api_server.http_url)
    challenge_from_lobby(page, api_server.http_url, bot_name, "othello", "3+2")
    status = page.locator("[data-testid=bot-challenge]")
    expect(status).to_have_attribute("data-phase", "declined", timeout=WAIT_S * 1000)
    expect(status).to_contain_text("it does not play this game just now.")
    found = bot.wait_for(r"declined challenge (\w+) from (\w+): (\w+)")
    assert found.group(3) == "variant"


def test_the_time_budget_keeps_a_bullet_clock_alive() -> None:
    # 1+0, each move costing its thinking and a 50 ms round trip: 100 moves and time left.
    remaining = 60_000.0
    for _ in range(100):
        budget = think_time(int(remaining), 0)
        assert MIN_THINK_MS / 1000 <= budget <= 2.0
        remaining -= budget * 1000 + 50
    assert remaining > 0
    # The shares: a 30th of what is left after the round trip's 100 ms, 80% of the
    # increment, at most the ceiling and half the clock; 50 ms at the least; no clock: the
    # ceiling.
    assert think_time(90_100, 0) == 2.0
    assert think_time(30_100, 0) == 1.0
    assert think_time(30_100, 1_000) == 1.8
    assert think_time(60_000, 0, max_s=0.2) == 0.2
    assert think_time(1_100, 10_000) == 0.5  # the increment never spends past half the clock
    assert think_time(200, 0) == MIN_THINK_MS / 1000
    assert think_time(2_147_483_647, 0, max_s=1.5) == 1.5


def test_the_bot_stops_cleanly_on_sigint(api_server: ServerProcess) -> None:
    _, token = bot_account(api_server.http_url)
    bot = BotProcess.start(api_server.http_url, token)
    assert bot.interrupt() == 0
    bot.wait_for(r"stopped \(0 games left unfinished\)")
