"""Attacks on moderation, from outside, against a real ``kibitz serve`` (real Redis, a real
SQLite file): a player reaching for the moderators' powers, an admin's token without the
admin scope, hostile names and bodies, a report flood, a spoofed forwarding header to dodge
an address ban, and a cross-site request. Every attack must keep failing, and change
nothing."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
import websockets

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server

PASSWORD = "correct horse battery"
_NAMES = itertools.count(1)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('moddb') / 'games.sqlite3'}"


@pytest.fixture(scope="module")
def server(own_redis: EmbeddedRedis, database: str) -> Iterator[ServerProcess]:
    process = start_server(own_redis.url, database_url=database)
    yield process
    process.stop()


async def call(
    server: ServerProcess,
    method: str,
    path: str,
    cookie: str | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any, str | None]:
    sent = {"Origin": server.http_url, **(headers or {})}
    if cookie is not None:
        sent["Cookie"] = f"kibitz_session={cookie}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client:
        kwargs: dict[str, Any] = {"data": raw} if raw is not None else {"json": body}
        async with client.request(method, server.http_url + path, headers=sent, **kwargs) as r:
            text = await r.text()
            cookie_out = r.cookies.get("kibitz_session")
            try:
                data = json.loads(text) if text else None
            except ValueError:
                data = text
            return r.status, data, None if cookie_out is None else cookie_out.value


async def signup(server: ServerProcess, prefix: str) -> tuple[str, str]:
    name = f"{prefix}{next(_NAMES)}y{os.getpid() % 1000}"
    status, body, cookie = await call(
        server, "POST", "/api/auth/signup", body={"username": name, "password": PASSWORD}
    )
    assert status == 201 and cookie is not None, body
    return name, cookie


def admin(database: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kibitz.server.cli", "admin", *args, "--database", database]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


async def audit_count(database: str) -> int:
    done = admin(database, "audit", "--limit", "500")
    assert done.returncode == 0, done.stderr
    return len(done.stdout.splitlines())


async def test_a_player_cannot_mute_mark_ban_or_read_reports(
    server: ServerProcess, database: str
) -> None:
    _, cookie = await signup(server, "mallory")
    victim, _ = await signup(server, "victim")
    before = await audit_count(database)
    attempts = [
        ("POST", f"/api/mod/players/{victim}/mute", {"minutes": 60}),
        ("POST", f"/api/mod/players/{victim}/mark", {"mark": "engine"}),
        ("POST", "/api/mod/bans", {"kind": "account", "target": victim, "reason": "x"}),
        ("GET", "/api/mod/reports", None),
        ("GET", "/api/mod/audit", None),
    ]
    for method, path, body in attempts:
        status, answer, _ = await call(server, method, path, cookie, body)
        assert (status, answer["code"]) == (403, "auth/forbidden"), path
    # A forged cookie is nobody.
    status, answer, _ = await call(server, "GET", "/api/mod/reports", "forged" * 8)
    assert (status, answer["code"]) == (401, "auth/required")
    assert await audit_count(database) == before


async def test_an_admins_token_without_the_admin_scope_cannot_moderate(
    server: ServerProcess, database: str
) -> None:
    name, cookie = await signup(server, "boss")
    target, _ = await signup(server, "target")
    assert admin(database, "grant", name, "admin").returncode == 0
    status, made, _ = await call(
        server, "POST", "/api/tokens", cookie, {"description": "bot", "scopes": ["play"]}
    )
    assert status == 201, made
    bearer = {"Authorization": f"Bearer {made['token']}"}
    status, answer, _ = await call(
        server, "POST", f"/api/mod/players/{target}/mute", body={"minutes": 5}, headers=bearer
    )
    assert (status, answer["code"]) == (403, "auth/scope")


@pytest.mark.parametrize(
    "name",
    ["x' OR '1'='1", "a" * 200, "..%2F..%2Fetc", "%00", "<script>"],
)
async def test_hostile_names_in_paths_change_nothing(server: ServerProcess, name: str) -> None:
    _, cookie = await signup(server, "probe")
    status, answer, _ = await call(server, "POST", f"/api/players/{name}/block", cookie)
    assert status in (400, 404), answer
    assert answer["code"] in ("mod/invalid", "mod/not_found")
    status, answer, _ = await call(server, "GET", "/api/blocks", cookie)
    assert answer == {"blocks": []}


async def test_bad_bodies_are_refused_with_a_typed_error(server: ServerProcess) -> None:
    _, cookie = await signup(server, "sloppy")
    target, _ = await signup(server, "tgt")
    for raw in (b"not json", b"[1, 2]", b'"text"', b"\xff\xfe"):
        status, answer, _ = await call(
            server,
            "POST",
            "/api/reports",
            cookie,
            raw=raw,
            headers={"Content-Type": "application/json"},
        )
        assert (status, answer["code"]) == (400, "request/invalid"), raw
    huge = {"username": target, "reason": "abuse", "text": "x" * 70_000}
    status, _, _ = await call(server, "POST", "/api/reports", cookie, huge)
    assert status == 413  # past the node's body limit: never read
    long = {"username": target, "reason": "abuse", "text": "x" * 1001}
    status, answer, _ = await call(server, "POST", "/api/reports", cookie, long)
    assert (status, answer["code"]) == (400, "mod/invalid")


async def test_a_report_flood_is_cut_off(server: ServerProcess) -> None:
    _, cookie = await signup(server, "flood")
    target, _ = await signup(server, "pest")
    statuses = []
    for _ in range(25):
        status, answer, _ = await call(
            server, "POST", "/api/reports", cookie, {"username": target, "reason": "spam"}
        )
        statuses.append((status, answer.get("code")))
    assert statuses[:20] == [(201, None)] * 20
    assert set(statuses[20:]) == {(429, "mod/throttled")}


async def test_a_spoofed_forwarding_header_does_not_dodge_an_address_ban(
    server: ServerProcess, database: str
) -> None:
    """The server trusts no proxy: X-Forwarded-For is ignored, so a banned client cannot
    claim another address (and cannot get another address banned in its place)."""
    done = admin(database, "ban", "address", "127.0.0.1", "--hours", "1", "--reason", "test")
    assert done.returncode == 0, done.stderr
    ban_id = json.loads(done.stdout)["ban"]["id"]
    try:
        refused: list[int] = []
        for _ in range(40):  # the node reads the table within a second
            try:
                async with websockets.connect(
                    server.ws_url, additional_headers={"X-Forwarded-For": "198.51.100.9"}
                ):
                    pass
            except websockets.InvalidStatus as exc:
                refused.append(exc.response.status_code)
                assert json.loads(exc.response.body)["code"] == "auth/banned"
                break
            await asyncio.sleep(0.1)
        assert refused == [403]
    finally:
        assert admin(database, "unban", str(ban_id)).returncode == 0
        await lifted(server)


async def lifted(server: ServerProcess) -> None:
    """Wait (at most 5 s) until the node has seen a ban of loopback lifted."""
    for _ in range(50):
        try:
            async with websockets.connect(server.ws_url):
                return
        except websockets.InvalidStatus:
            await asyncio.sleep(0.1)
    raise AssertionError("the lifted ban still refuses loopback after 5 s")


async def test_a_cross_site_ban_request_is_refused(server: ServerProcess, database: str) -> None:
    name, cookie = await signup(server, "admin")
    assert admin(database, "grant", name, "admin").returncode == 0
    before = await audit_count(database)
    status, answer, _ = await call(
        server,
        "POST",
        "/api/mod/bans",
        cookie,
        {"kind": "address", "target": "198.51.100.1", "reason": "csrf"},
        headers={"Origin": "https://evil.example"},
    )
    assert (status, answer["code"]) == (403, "auth/csrf")
    assert await audit_count(database) == before


BAD_IDS = ["0", "-1", "1.5", "x", "²", "١٢", "１", "2147483648", "9" * 30, "1e3"]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_ids_in_paths_are_a_typed_400(
    server: ServerProcess, database: str, bad: str
) -> None:
    """Path ids are ASCII digits up to 2^31-1: anything else is 400 ``mod/invalid``
    (never a 500 from a number the database cannot hold), and changes nothing."""
    name, cookie = await signup(server, "idadmin")
    assert admin(database, "grant", name, "admin").returncode == 0
    before = await audit_count(database)
    for method, path, body in (
        ("DELETE", f"/api/mod/bans/{bad}", None),
        ("POST", f"/api/mod/reports/{bad}/close", {"resolution": "x"}),
        ("GET", f"/api/mod/audit?limit={bad}", None),
    ):
        status, answer, _ = await call(server, method, path, cookie, body)
        assert status == 400 and answer["code"] == "mod/invalid", (path, status, answer)
    assert await audit_count(database) == before
