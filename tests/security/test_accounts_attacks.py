"""Attacks on accounts, as a hostile user would make them against a real ``kibitz serve``
(real Redis, SQLite): each must keep failing.

- Session fixation: a session id planted in the victim's browser before they log in is
  never the session they get (a new one each log-in, the planted one ended).
- Brute force: guessing one account's password is throttled (429, even the right
  password waits), from one address or from many, one guess after another or all at
  once (each attempt is counted before its password is checked), at log-in and at the
  change of password (its current password is a guess like any other).
- SQL-injection-shaped usernames are refused at sign-up and are merely wrong at log-in;
  the accounts table is unharmed.
- Look-alike names: another case, Cyrillic or fullwidth letters, invisible characters
  cannot make a second "alice".
- Timing: a log-in for a name that does not exist costs as much as a wrong password
  (argon2 against a dummy hash), so the time does not list the accounts.
- Forged credentials: made-up session ids and tokens act for nobody.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Iterator

import pytest

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server
from tests.server.accounts.web import PASSWORD, Web, fresh_address, fresh_name

pytestmark = pytest.mark.asyncio

#: The shipped per-username limit (NodeConfig.login_failures_per_account).
ACCOUNT_FAILURES = 5


@pytest.fixture(scope="module")
def node(own_redis: EmbeddedRedis) -> Iterator[ServerProcess]:
    server = start_server(own_redis.url)
    yield server
    server.stop()


async def test_a_planted_session_id_is_not_kept_at_log_in(node: ServerProcess) -> None:
    victim_name, attacker_name = fresh_name(), fresh_name()
    await Web(node.http_url).signup(victim_name)
    attacker = Web(node.http_url)
    await attacker.signup(attacker_name)
    planted = attacker.cookie  # the attacker's own live session, set in the victim's browser
    victim = Web(node.http_url, cookie=planted)
    assert (await victim.login(victim_name)).status == 200
    assert victim.cookie and victim.cookie != planted
    # The planted id acts for nobody now: not the victim, not even the attacker.
    assert (await attacker.get("/api/auth/me")).body == {"account": None}
    me = await victim.get("/api/auth/me")
    assert me.body["account"]["username"] == victim_name
    # A made-up id of the right shape is no session either, before or after.
    forged = "A" * 43
    browser = Web(node.http_url, cookie=forged)
    assert (await browser.get("/api/auth/me")).body == {"account": None}
    await browser.login(victim_name)
    assert browser.cookie != forged
    assert (await Web(node.http_url, cookie=forged).get("/api/auth/me")).body["account"] is None


async def test_guessing_a_password_is_throttled(node: ServerProcess) -> None:
    name = fresh_name()
    await Web(node.http_url).signup(name)
    statuses = []
    for i in range(ACCOUNT_FAILURES + 5):  # each guess from another address
        guess = PASSWORD if i == ACCOUNT_FAILURES + 2 else f"guess {i:04d}"
        statuses.append((await Web(node.http_url).login(name, guess)).status)
    assert statuses[:ACCOUNT_FAILURES] == [401] * ACCOUNT_FAILURES
    assert statuses[ACCOUNT_FAILURES:] == [429] * 5  # the right guess among them too


async def test_simultaneous_guesses_are_throttled_too(node: ServerProcess) -> None:
    name = fresh_name()
    await Web(node.http_url).signup(name)
    guesses = [Web(node.http_url).login(name, f"guess {i:04d}") for i in range(40)]
    statuses = [reply.status for reply in await asyncio.gather(*guesses)]
    assert set(statuses) <= {401, 429}, statuses
    assert statuses.count(401) <= ACCOUNT_FAILURES, statuses
    assert (await Web(node.http_url).login(name)).status == 429  # even the right one waits


async def test_a_success_gives_its_attempt_back(node: ServerProcess) -> None:
    name = fresh_name()
    await Web(node.http_url).signup(name)
    for _ in range(ACCOUNT_FAILURES - 1):
        assert (await Web(node.http_url).login(name, "wrong guess")).status == 401
    assert (await Web(node.http_url).login(name)).status == 200
    assert (await Web(node.http_url).login(name, "wrong guess")).status == 401
    assert (await Web(node.http_url).login(name, "wrong guess")).status == 429


async def test_guessing_the_current_password_is_throttled(node: ServerProcess) -> None:
    web = Web(node.http_url)
    name = fresh_name()
    await web.signup(name)
    statuses = []
    for i in range(ACCOUNT_FAILURES + 1):
        body = {"password": f"guess {i:04d}", "new_password": "a new password"}
        statuses.append((await web.post("/api/auth/password", body)).status)
    assert statuses == [401] * ACCOUNT_FAILURES + [429], statuses
    # The same count as log-ins: the right password waits as well, here and there.
    right = {"password": PASSWORD, "new_password": "a new password"}
    assert (await web.post("/api/auth/password", right)).code == "auth/throttled"
    assert (await Web(node.http_url).login(name)).status == 429


async def test_injection_shaped_usernames(node: ServerProcess) -> None:
    victim = fresh_name()
    await Web(node.http_url).signup(victim)
    shapes = [
        "' OR '1'='1", f"{victim}'--", "x'; DROP TABLE accounts; --", '" OR ""="',
        f"{victim}%", "%", "_" * 5, "a\x00b", "admin'/*",
    ]  # fmt: skip
    for shape in shapes:
        web = Web(node.http_url)
        signup = await web.signup(shape)
        assert (signup.status, signup.code) == (400, "auth/username"), shape
        login = await web.login(shape, PASSWORD)
        assert (login.status, login.code) == (401, "auth/failed"), shape
        assert (await web.get(f"/api/players/{shape}")).status in (400, 404)
    # The table is whole: the victim still logs in, nobody else did.
    assert (await Web(node.http_url).login(victim)).status == 200


async def test_look_alike_names_cannot_be_taken(node: ServerProcess) -> None:
    name = "al" + uuid.uuid4().hex[:6]
    assert (await Web(node.http_url).signup(name)).status == 201
    taken = await Web(node.http_url).signup(name.upper())
    assert (taken.status, taken.code) == (409, "auth/taken")
    for fake in (
        "а" + name[1:],  # Cyrillic a
        "".join(chr(ord(c) + 0xFEE0) for c in name),  # fullwidth
        name + "\u200b",  # zero-width space
        name[:2] + "\u0301" + name[2:],  # a combining accent
        " " + name,
        name + "\n",
    ):
        refused = await Web(node.http_url).signup(fake)
        assert (refused.status, refused.code) == (400, "auth/username"), repr(fake)


async def test_an_unknown_name_takes_as_long_as_a_wrong_password(node: ServerProcess) -> None:
    names = [fresh_name() for _ in range(7)]
    for name in names:
        await Web(node.http_url).signup(name)

    async def timed(name: str) -> float:
        start = time.perf_counter()
        reply = await Web(node.http_url, fresh_address()).login(name, "wrong password!")
        assert reply.status == 401
        return time.perf_counter() - start

    wrong, unknown = [], []
    for name in names:  # interleaved, so load changes hit both alike
        wrong.append(await timed(name))
        unknown.append(await timed(fresh_name()))
    # Without the dummy hash an unknown name answers in a few ms, a wrong password after
    # an argon2 verification (tens of ms): the medians would differ by ten times or more.
    assert statistics.median(unknown) > 0.5 * statistics.median(wrong), (unknown, wrong)


async def test_forged_credentials_act_for_nobody(node: ServerProcess) -> None:
    web = Web(node.http_url)
    for cookie in ("x" * 43, "' OR 1=1 --", "A" * 5000):
        assert (await web.get("/api/auth/me", cookie=cookie)).body == {"account": None}
    for token in ("kbz_" + "A" * 32, "kbz_' OR '1'='1", "A" * 3000):
        reply = await web.get("/api/auth/me", headers={"Authorization": f"Bearer {token}"})
        assert (reply.status, reply.code) == (401, "auth/token")
    bad_key = await web.post("/api/auth/claim", {"player_key": "' OR 1=1 --"})
    assert (bad_key.status, bad_key.code) == (401, "auth/required")
