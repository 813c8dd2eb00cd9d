"""Moderation on a real cluster: two ``kibitz serve`` processes on one Redis and one
PostgreSQL database, real accounts signed up over HTTP, real WebSockets.

A ban made on one node refuses the account on the other within a second (create, join,
seek, chat and log-in), an address ban refuses the handshake, blocks hide chat both ways
(live and in the replay) and refuse a seek, a player calling the moderators' paths is
refused, mutes refuse chat with the time left, every action leaves an audit row, the
``kibitz admin`` commands work as subprocesses (and a ban made there reaches the running
nodes), and aborting a rated game records an abandonment."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import sqlalchemy as sa
import websockets
from sqlalchemy.ext.asyncio import create_async_engine

from kibitz.benchmarks.local_postgres import LocalPostgres
from kibitz.server.archive import tables as t
from kibitz.server.archive.database import async_url
from kibitz.server.gateway.session import HIDDEN_REFRESH_S
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, new_postgres_database, start_server

PASSWORD = "correct horse battery"
#: The servers believe loopback's X-Forwarded-For, so a test can come from any address.
PROXY_ENV = {"KIBITZ_TRUSTED_PROXIES": "127.0.0.1"}
_NAMES = itertools.count(1)
_RIDS = itertools.count(1)


@dataclass
class Cluster:
    a: ServerProcess
    b: ServerProcess
    database: str


@pytest.fixture(scope="module")
def cluster(own_redis: EmbeddedRedis, postgres: LocalPostgres) -> Iterator[Cluster]:
    database = new_postgres_database(postgres)
    a = start_server(own_redis.url, database_url=database, extra_env=PROXY_ENV)
    try:
        b = start_server(own_redis.url, database_url=database, extra_env=PROXY_ENV)
    except BaseException:
        a.stop()
        raise
    yield Cluster(a, b, database)
    a.stop()
    b.stop()


def fresh(prefix: str) -> str:
    return f"{prefix}{next(_NAMES)}x{os.getpid() % 1000}"


@dataclass
class Person:
    """A signed-in account: its name and its session cookie."""

    name: str
    cookie: str


async def http(
    server: ServerProcess,
    method: str,
    path: str,
    who: Person | None = None,
    body: Any = None,
) -> tuple[int, Any]:
    headers = {"Origin": server.http_url}
    if who is not None:
        headers["Cookie"] = f"kibitz_session={who.cookie}"
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(timeout=timeout) as client:
        async with client.request(
            method, server.http_url + path, json=body, headers=headers
        ) as response:
            text = await response.text()
            cookie = response.cookies.get("kibitz_session")
            data = json.loads(text) if text else None
            if isinstance(data, dict) and cookie is not None:
                data["_cookie"] = cookie.value
            return response.status, data


async def signup(server: ServerProcess, prefix: str) -> Person:
    name = fresh(prefix)
    status, body = await http(
        server, "POST", "/api/auth/signup", body={"username": name, "password": PASSWORD}
    )
    assert status == 201, body
    return Person(name, body["_cookie"])


def admin(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``kibitz admin ARGS --database URL`` as a subprocess."""
    command = [sys.executable, "-m", "kibitz.server.cli", "admin", *args]
    return subprocess.run(
        [*command, "--database", cluster.database],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def granted(cluster: Cluster, name: str, role: str) -> None:
    done = admin(cluster, "grant", name, role)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["roles"] == [role]


class Socket:
    """A raw WebSocket client: requests answered by ``rid``, everything else kept."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.seen: list[dict[str, Any]] = []

    @classmethod
    async def open(
        cls, server: ServerProcess, who: Person | None = None, address: str | None = None
    ) -> Socket:
        headers = {}
        if who is not None:
            headers["Cookie"] = f"kibitz_session={who.cookie}"
        if address is not None:
            headers["X-Forwarded-For"] = address
        ws = await websockets.connect(
            server.ws_url,
            origin=server.http_url,
            additional_headers=headers,  # type: ignore[arg-type]
        )
        socket = cls(ws)
        await socket.next(lambda m: m.get("type") == "welcome")
        return socket

    async def next(self, match: Any, timeout: float = 5.0) -> dict[str, Any]:
        for message in self.seen:
            if match(message):
                self.seen.remove(message)
                return message
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"nothing matched within {timeout} s: {self.seen[-5:]}")
            try:
                message = json.loads(await asyncio.wait_for(self.ws.recv(), left))
            except TimeoutError:
                raise AssertionError(f"nothing matched in {timeout} s: {self.seen[-5:]}") from None
            if match(message):
                return message
            self.seen.append(message)
            del self.seen[:-200]

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        rid = f"r{next(_RIDS)}"
        await self.ws.send(json.dumps({**message, "rid": rid}))
        return await self.next(lambda m: m.get("rid") == rid)

    async def chat(self, room: str, text: str, token: str | None = None) -> dict[str, Any]:
        """Say ``text``; the line as broadcast back, or the error."""
        rid = f"r{next(_RIDS)}"
        said = {"type": "chat", "room": room, "text": text, "rid": rid}
        if token is not None:
            said["token"] = token
        await self.ws.send(json.dumps(said))
        return await self.next(lambda m: m.get("rid") == rid or said_line(m, text))

    async def watch(self, room: str) -> dict[str, Any]:
        """Follow ``room`` as a spectator; its state."""
        await self.ws.send(json.dumps({"type": "watch", "room": room}))
        return await self.next(lambda m: m.get("type") == "state" and m.get("room") == room)

    def heard(self, text: str) -> bool:
        return any(said_line(m, text) for m in self.seen)

    async def close(self) -> None:
        await self.ws.close()


def said_line(message: dict[str, Any], text: str) -> bool:
    return message.get("type") == "chat" and any(
        line.get("text") == text for line in message.get("messages", [])
    )


@pytest.fixture
async def sockets() -> AsyncIterator[list[Socket]]:
    opened: list[Socket] = []
    yield opened
    for socket in opened:
        await socket.close()


async def create(socket: Socket, **extra: Any) -> dict[str, Any]:
    return await socket.ask({"type": "create", "game": "tictactoe", **extra})


# -- bans ----------------------------------------------------------------------------------


async def test_a_ban_on_one_node_refuses_the_account_on_the_other_within_a_second(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    root, bob, ann = [await signup(cluster.a, p) for p in ("root", "bob", "ann")]
    granted(cluster, root.name, "admin")
    bob_ws = await Socket.open(cluster.b, bob)
    ann_ws = await Socket.open(cluster.b, ann)
    sockets += [bob_ws, ann_ws]
    made = await create(bob_ws)
    assert made["type"] == "seat", made
    room, token = made["room"], made["token"]
    other = await create(ann_ws)
    assert other["type"] == "seat", other
    assert (await bob_ws.chat(room, "before the ban", token))["type"] == "chat"

    status, body = await http(
        cluster.a,
        "POST",
        "/api/mod/bans",
        root,
        {"kind": "account", "target": bob.name, "reason": "flooding"},
    )
    banned_at = time.monotonic()
    assert status == 201, body
    refusals = {
        "create": await create(bob_ws),
        "join": await bob_ws.ask({"type": "join", "room": other["room"]}),
        "seek": await bob_ws.ask({"type": "seek", "game": "tictactoe"}),
        "chat": await bob_ws.chat(room, "after the ban", token),
    }
    elapsed = time.monotonic() - banned_at
    for kind, answer in refusals.items():
        assert (answer.get("type"), answer.get("code")) == ("error", "auth/banned"), kind
        assert "flooding" in answer["message"]
    assert elapsed < 1.0
    status, body = await http(
        cluster.b, "POST", "/api/auth/login", body={"username": bob.name, "password": PASSWORD}
    )
    assert (status, body["code"]) == (403, "auth/banned")
    # The ban lifted: bob may log in again.
    status, listed = await http(cluster.a, "GET", "/api/mod/bans", root)
    [ban_id] = [b["id"] for b in listed["bans"] if b["target"] == bob.name]
    status, _ = await http(cluster.a, "DELETE", f"/api/mod/bans/{ban_id}", root)
    assert status == 200
    status, body = await http(
        cluster.b, "POST", "/api/auth/login", body={"username": bob.name, "password": PASSWORD}
    )
    assert status == 200, body


async def test_an_address_ban_refuses_the_handshake_on_every_node(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    root = await signup(cluster.a, "root")
    granted(cluster, root.name, "admin")
    sockets.append(await Socket.open(cluster.b, address="203.0.113.7"))
    status, body = await http(
        cluster.a,
        "POST",
        "/api/mod/bans",
        root,
        {"kind": "address", "target": "203.0.113.7", "reason": "a bot flood", "hours": 1},
    )
    assert status == 201, body
    for server in (cluster.a, cluster.b):
        with pytest.raises(websockets.InvalidStatus) as refused:
            await Socket.open(server, address="203.0.113.7")
        response = refused.value.response
        assert response.status_code == 403
        assert json.loads(response.body)["code"] == "auth/banned"
    sockets.append(await Socket.open(cluster.b, address="203.0.113.8"))  # a neighbour: fine
    status, _ = await http(cluster.a, "DELETE", f"/api/mod/bans/{body['ban']['id']}", root)
    assert status == 200
    sockets.append(await Socket.open(cluster.b, address="203.0.113.7"))


# -- blocks, mutes -------------------------------------------------------------------------


async def test_a_block_hides_chat_both_ways_and_refuses_a_seek(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    ann, bob, cy, dan = [await signup(cluster.a, p) for p in ("ann", "bob", "cy", "dan")]
    status, body = await http(cluster.a, "POST", f"/api/players/{bob.name.upper()}/block", ann)
    assert (status, body) == (200, {"blocked": bob.name})
    status, body = await http(cluster.b, "GET", "/api/blocks", ann)
    assert [b["username"] for b in body["blocks"]] == [bob.name]
    assert (await http(cluster.a, "POST", "/api/players/nobody-here/block", ann))[0] == 404
    assert (await http(cluster.a, "POST", f"/api/players/{bob.name}/block"))[0] == 401

    host = await Socket.open(cluster.a, dan)
    sockets.append(host)
    room = (await create(host))["room"]
    # Three spectators, on both nodes: ann and bob (blocked) and cy (neither).
    watchers = {
        "ann": await Socket.open(cluster.a, ann),
        "bob": await Socket.open(cluster.b, bob),
        "cy": await Socket.open(cluster.b, cy),
    }
    sockets += watchers.values()
    for socket in watchers.values():
        await socket.watch(room)
    line = await watchers["bob"].chat(room, "from bob")
    assert line["messages"][0]["account"] == bob.name
    await watchers["ann"].chat(room, "from ann")
    await watchers["cy"].next(lambda m: said_line(m, "from bob"))
    await watchers["cy"].next(lambda m: said_line(m, "from ann"))
    # Each hears its own marker after the lines above (one connection's frames keep order).
    await watchers["bob"].chat(room, "marker from bob")
    await watchers["ann"].chat(room, "marker from ann")
    await watchers["cy"].next(lambda m: said_line(m, "marker from bob"))
    await watchers["cy"].next(lambda m: said_line(m, "marker from ann"))
    assert not watchers["ann"].heard("from bob") and not watchers["ann"].heard("marker from bob")
    assert not watchers["bob"].heard("from ann") and not watchers["bob"].heard("marker from ann")
    # The replay on following again hides them too.
    again = await Socket.open(cluster.b, ann)
    sockets.append(again)
    await again.watch(room)
    replay = await again.next(lambda m: m.get("type") == "chat" and m.get("replay"))
    texts = [line["text"] for line in replay["messages"]]
    assert "from ann" in texts and "from bob" not in texts and "marker from bob" not in texts
    # No seek accepted between them, either way.
    posted = await watchers["bob"].ask({"type": "seek", "game": "tictactoe"})
    assert posted.get("type") != "error", posted
    seek_id = posted["seek"]["id"]
    accepted = await watchers["ann"].ask({"type": "accept", "seek": seek_id})
    assert (accepted.get("type"), accepted.get("code")) == ("error", "seek/blocked"), accepted
    # Blocks made or lifted while both watch count within seconds: following the room
    # again (or a chat line, once the connection's blocks are HIDDEN_REFRESH_S old) reloads
    # them; a move or a ping never does.
    status, _ = await http(cluster.a, "DELETE", f"/api/players/{bob.name}/block", ann)
    assert status == 200
    await refreshed(watchers.values(), room)
    await watchers["bob"].chat(room, "free from bob")
    await watchers["ann"].chat(room, "free from ann")
    await watchers["ann"].next(lambda m: said_line(m, "free from bob"))
    await watchers["bob"].next(lambda m: said_line(m, "free from ann"))
    status, _ = await http(cluster.b, "POST", f"/api/players/{ann.name}/block", bob)
    assert status == 200
    await refreshed(watchers.values(), room)
    await watchers["bob"].chat(room, "late from bob")
    await watchers["ann"].chat(room, "late from ann")
    await watchers["cy"].next(lambda m: said_line(m, "late from bob"))
    await watchers["cy"].next(lambda m: said_line(m, "late from ann"))
    assert not watchers["ann"].heard("late from bob")
    assert not watchers["bob"].heard("late from ann")


async def refreshed(sockets: Iterable[Socket], room: str) -> None:
    """Wait until the sockets' blocks are old enough to be read again, and have each
    follow ``room`` again (which reads them)."""
    await asyncio.sleep(HIDDEN_REFRESH_S)
    for socket in sockets:
        await socket.watch(room)


async def test_a_mute_refuses_chat_with_the_time_left(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    judge, bob = await signup(cluster.a, "judge"), await signup(cluster.a, "bob")
    granted(cluster, judge.name, "moderator")
    bob_ws = await Socket.open(cluster.b, bob)
    sockets.append(bob_ws)
    made = await create(bob_ws)
    status, body = await http(
        cluster.a, "POST", f"/api/mod/players/{bob.name}/mute", judge, {"minutes": 15}
    )
    assert status == 200 and body["muted_until_ms"] > time.time() * 1000, body
    answer = await bob_ws.chat(made["room"], "can I talk?", made["token"])
    assert (answer["type"], answer["code"]) == ("error", "chat/muted")
    assert "min" in answer["message"]
    for bad in ({"minutes": -5}, {"minutes": "lots"}, {}, []):
        status, body = await http(
            cluster.a, "POST", f"/api/mod/players/{bob.name}/mute", judge, bad
        )
        assert status == 400 and body["code"] in ("mod/invalid", "request/invalid"), body
    await http(cluster.a, "POST", f"/api/mod/players/{bob.name}/mute", judge, {"minutes": 0})
    assert (await bob_ws.chat(made["room"], "thanks", made["token"]))["type"] == "chat"


# -- roles, reports and the audit log ------------------------------------------------------

MOD_PATHS = [
    ("GET", "/api/mod/reports", None),
    ("POST", "/api/mod/reports/1/close", {"resolution": "x"}),
    ("POST", "/api/mod/players/someone/mute", {"minutes": 5}),
    ("POST", "/api/mod/players/someone/mark", {"mark": "engine"}),
]
ADMIN_PATHS = [
    ("GET", "/api/mod/bans", None),
    ("POST", "/api/mod/bans", {"kind": "address", "target": "198.51.100.1", "reason": "x"}),
    ("DELETE", "/api/mod/bans/1", None),
    ("GET", "/api/mod/audit", None),
]


async def test_players_are_refused_the_moderators_paths_and_moderators_the_admins(
    cluster: Cluster,
) -> None:
    player, judge = await signup(cluster.a, "pl"), await signup(cluster.a, "judge")
    granted(cluster, judge.name, "moderator")
    for method, path, body in MOD_PATHS + ADMIN_PATHS:
        status, answer = await http(cluster.b, method, path, player, body)
        assert (status, answer["code"]) == (403, "auth/forbidden"), path
        status, answer = await http(cluster.b, method, path, None, body)
        assert (status, answer["code"]) == (401, "auth/required"), path
    for method, path, body in ADMIN_PATHS:
        status, answer = await http(cluster.b, method, path, judge, body)
        assert (status, answer["code"]) == (403, "auth/forbidden"), path
    # A cross-site POST is refused before anything else (the CSRF middleware).
    async with aiohttp.ClientSession() as client:
        async with client.post(
            cluster.b.http_url + "/api/mod/bans",
            json={"kind": "address", "target": "198.51.100.1", "reason": "x"},
            headers={"Origin": "https://evil.example", "Cookie": f"kibitz_session={judge.cookie}"},
        ) as response:
            assert response.status == 403


async def test_reports_reach_the_moderators_and_every_action_is_audited(cluster: Cluster) -> None:
    ann, bob = await signup(cluster.a, "ann"), await signup(cluster.a, "bob")
    judge, root = await signup(cluster.a, "judge"), await signup(cluster.a, "root")
    granted(cluster, judge.name, "moderator")
    granted(cluster, root.name, "admin")
    report = {"username": bob.name, "reason": "abuse", "text": "rude", "line": "you fool"}
    status, body = await http(cluster.b, "POST", "/api/reports", ann, report)
    assert status == 201, body
    report_id = body["report"]
    for bad in ({**report, "reason": "dislike"}, {**report, "username": ann.name}, "text"):
        status, answer = await http(cluster.b, "POST", "/api/reports", ann, bad)
        assert status == 400, answer
    assert (await http(cluster.b, "POST", "/api/reports", None, report))[0] == 401
    status, body = await http(cluster.a, "GET", "/api/mod/reports", judge)
    mine = [r for r in body["reports"] if r["id"] == report_id]
    assert mine and mine[0]["reporter"] == ann.name and mine[0]["line"] == "you fool"
    status, _ = await http(
        cluster.a, "POST", f"/api/mod/reports/{report_id}/close", judge, {"resolution": "warned"}
    )
    assert status == 200
    status, body = await http(
        cluster.a, "POST", f"/api/mod/reports/{report_id}/close", judge, {"resolution": "again"}
    )
    assert (status, body["code"]) == (409, "mod/closed")
    status, body = await http(
        cluster.a, "POST", f"/api/mod/players/{bob.name}/mark", judge, {"mark": "engine"}
    )
    assert (status, body["mark"]) == (200, "engine")
    status, body = await http(cluster.a, "GET", "/api/mod/audit?limit=20", root)
    assert status == 200
    rows = [(r["actor"], r["action"], r["target"]) for r in body["audit"]]
    assert (judge.name, "mark", bob.name) in rows
    assert (judge.name, "report.close", str(report_id)) in rows
    assert (None, "grant", root.name) in rows  # the CLI's: actor null
    assert (await http(cluster.a, "GET", "/api/mod/audit?limit=abc", root))[0] == 400


# -- kibitz admin --------------------------------------------------------------------------


async def test_the_admin_commands_work_and_a_cli_ban_reaches_the_running_nodes(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    ann, bob = await signup(cluster.a, "ann"), await signup(cluster.a, "bob")
    await http(cluster.a, "POST", "/api/reports", ann, {"username": bob.name, "reason": "spam"})
    done = admin(cluster, "reports")
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    [report] = [r for r in listed if r["username"] == bob.name]
    done = admin(cluster, "report", "close", str(report["id"]), "--resolution", "looked at it")
    assert (done.returncode, json.loads(done.stdout)) == (0, {"closed": report["id"]})
    closed = [json.loads(x) for x in admin(cluster, "reports", "--all").stdout.splitlines()]
    assert any(r["id"] == report["id"] and r["resolution"] == "looked at it" for r in closed)
    done = admin(cluster, "mute", bob.name, "--minutes", "5")
    assert done.returncode == 0 and json.loads(done.stdout)["muted_until_ms"] > 0
    done = admin(cluster, "mute", "no-such-player", "--minutes", "5")
    assert done.returncode == 1 and json.loads(done.stderr)["code"] == "mod/not_found"
    assert admin(cluster, "revoke", bob.name, "moderator").returncode == 0
    assert admin(cluster, "mark", bob.name, "boost").returncode == 0

    bob_ws = await Socket.open(cluster.b, bob)
    sockets.append(bob_ws)
    assert (await create(bob_ws))["type"] == "seat"
    done = admin(cluster, "ban", "account", bob.name, "--hours", "2", "--reason", "by the CLI")
    assert done.returncode == 0, done.stderr
    ban = json.loads(done.stdout)["ban"]
    answer: dict[str, Any] = {}
    deadline = time.monotonic() + 2.5  # the nodes compare the table every second
    while time.monotonic() < deadline:
        answer = await create(bob_ws)
        if answer.get("type") == "error":
            break
        await asyncio.sleep(0.1)
    assert (answer.get("type"), answer.get("code")) == ("error", "auth/banned"), answer
    assert admin(cluster, "unban", str(ban["id"])).returncode == 0
    assert admin(cluster, "bans").stdout.strip() == "" or all(
        json.loads(x)["id"] != ban["id"] for x in admin(cluster, "bans").stdout.splitlines()
    )
    done = admin(cluster, "audit", "--limit", "50")
    actions = [json.loads(line)["action"] for line in done.stdout.splitlines()]
    for action in ("report.close", "mute", "revoke", "mark", "ban", "unban"):
        assert action in actions
    done = admin(cluster, "ban", "address", "not-an-ip", "--reason", "x")
    assert done.returncode == 1 and json.loads(done.stderr)["code"] == "mod/invalid"


# -- abandonment ---------------------------------------------------------------------------


async def test_aborting_a_rated_game_after_the_opponent_joined_records_an_abandonment(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    ann, bob = await signup(cluster.a, "ann"), await signup(cluster.a, "bob")
    ann_ws, bob_ws = await Socket.open(cluster.a, ann), await Socket.open(cluster.b, bob)
    sockets += [ann_ws, bob_ws]
    made = await create(ann_ws, rated=True, seat=0)
    assert made["type"] == "seat", made
    joined = await bob_ws.ask({"type": "join", "room": made["room"]})
    assert joined["type"] == "seat", joined
    await ann_ws.ws.send(
        json.dumps({"type": "abort", "room": made["room"], "token": made["token"]})
    )
    aborted = await ann_ws.next(
        lambda m: m.get("type") == "error" or m.get("type") == "state" and m["status"] == "over"
    )
    assert aborted["type"] == "state" and aborted["result"]["termination"] == "abort", aborted
    assert await abandonments_of(cluster.database, made["room"]) == [("abort", ann.name)]


async def abandonments_of(database: str, game_id: str) -> list[tuple[str, str]]:
    """The (kind, username) abandonments of ``game_id``, once there are any (up to 15 s)."""
    engine = create_async_engine(async_url(database))
    query = (
        sa.select(t.abandonments.c.kind, t.accounts.c.username)
        .join(t.accounts, t.accounts.c.id == t.abandonments.c.account_id)
        .where(t.abandonments.c.game_id == game_id)
    )
    try:
        for _ in range(150):
            async with engine.connect() as conn:
                rows = (await conn.execute(query)).all()
            if rows:
                return [(row.kind, row.username) for row in rows]
            await asyncio.sleep(0.1)
        return []
    finally:
        await engine.dispose()


async def test_a_rated_game_lost_on_time_after_leaving_records_an_abandonment(
    cluster: Cluster, own_redis: EmbeddedRedis, sockets: list[Socket]
) -> None:
    quick = start_server(
        own_redis.url,
        database_url=cluster.database,
        extra_env={**PROXY_ENV, "KIBITZ_FIRST_MOVE_TIMEOUT": "1"},
    )
    try:
        ann, bob = await signup(quick, "ann"), await signup(quick, "bob")
        ann_ws, bob_ws = await Socket.open(quick, ann), await Socket.open(quick, bob)
        sockets.append(bob_ws)
        clock = {"initial_ms": 60_000, "increment_ms": 0}
        made = await create(ann_ws, rated=True, seat=0, clock=clock)
        assert made["type"] == "seat", made
        joined = await bob_ws.ask({"type": "join", "room": made["room"]})
        assert joined["type"] == "seat", joined
        await ann_ws.close()  # ann leaves, her first move due within a second
        ended = await bob_ws.next(
            lambda m: m.get("type") == "state" and m.get("status") == "over", timeout=15
        )
        assert ended["result"]["termination"] == "abort", ended["result"]
        assert await abandonments_of(cluster.database, made["room"]) == [("timeout", ann.name)]
    finally:
        quick.stop()


# -- bans and penalties wherever a game is made --------------------------------------------


async def ban(cluster: Cluster, root: Person, kind: str, target: str) -> dict[str, Any]:
    status, body = await http(
        cluster.a, "POST", "/api/mod/bans", root, {"kind": kind, "target": target, "reason": "r"}
    )
    assert status == 201, body
    made: dict[str, Any] = body["ban"]
    return made


async def test_a_seek_posted_before_its_poster_was_banned_cannot_be_accepted(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    root, ann, bob = [await signup(cluster.a, p) for p in ("root", "ann", "bob")]
    granted(cluster, root.name, "admin")
    ann_ws, bob_ws = await Socket.open(cluster.a, ann), await Socket.open(cluster.b, bob)
    sockets += [ann_ws, bob_ws]
    posted = await ann_ws.ask({"type": "seek", "game": "tictactoe"})
    assert posted["type"] == "seek", posted
    await ban(cluster, root, "account", ann.name)
    accepted = await bob_ws.ask({"type": "accept", "seek": posted["seek"]["id"]})
    assert (accepted.get("type"), accepted.get("code")) == ("error", "auth/banned"), accepted
    again = await bob_ws.ask({"type": "accept", "seek": posted["seek"]["id"]})
    assert again.get("code") == "seek/unknown", again  # the banned player's seek is gone


async def test_a_rematch_with_a_player_banned_since_is_refused(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    root, ann, bob = [await signup(cluster.a, p) for p in ("root", "ann", "bob")]
    granted(cluster, root.name, "admin")
    ann_ws, bob_ws = await Socket.open(cluster.a, ann), await Socket.open(cluster.b, bob)
    sockets += [ann_ws, bob_ws]
    made = await create(ann_ws, seat=0)
    joined = await bob_ws.ask({"type": "join", "room": made["room"]})
    assert joined["type"] == "seat", joined
    room = made["room"]
    resign = {"type": "resign", "room": room, "token": made["token"]}
    resigned = await change(ann_ws, resign, "resign")
    assert resigned["type"] == "state", resigned
    offer = {"type": "rematch", "room": room, "token": joined["token"]}
    offered = await change(bob_ws, offer, "rematch_offer")
    assert offered["type"] == "state" and offered["event"]["kind"] == "rematch_offer", offered
    await ban(cluster, root, "account", bob.name)
    agreed = await change(ann_ws, {**offer, "token": made["token"], "action": "accept"}, "rematch")
    assert (agreed.get("type"), agreed.get("code")) == ("error", "auth/banned"), agreed
    refused = await change(bob_ws, {**offer, "action": "accept"}, "rematch")  # his own
    assert (refused.get("type"), refused.get("code")) == ("error", "auth/banned"), refused
    status, listed = await http(cluster.a, "GET", f"/api/rooms/{room}", root)
    assert (status, listed["next_room"]) == (200, None), listed


async def change(socket: Socket, message: dict[str, Any], kind: str) -> dict[str, Any]:
    """Send a change to a room; the error answering it, or the room's state with the event
    ``kind`` it led to."""
    rid = f"c{next(_RIDS)}"
    await socket.ws.send(json.dumps({**message, "rid": rid}))
    room = message["room"]
    return await socket.next(
        lambda m: (
            m.get("rid") == rid
            or m.get("type") == "state"
            and m.get("room") == room
            and m.get("event", {}).get("kind") == kind
        )
    )


async def abandoned(database: str, username: str, times: int) -> None:
    """Record ``times`` fresh abandonments for ``username`` (past the free ones)."""
    engine = create_async_engine(async_url(database))
    try:
        async with engine.begin() as conn:
            account_id = await conn.scalar(
                sa.select(t.accounts.c.id).where(t.accounts.c.username == username)
            )
            now = int(time.time() * 1000)
            for n in range(times):
                await conn.execute(
                    t.abandonments.insert().values(
                        account_id=account_id, game_id=f"gone{n}", kind="timeout", at_ms=now - n
                    )
                )
    finally:
        await engine.dispose()


async def test_a_penalised_player_may_not_create_or_join_a_rated_game(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    ann, bob = await signup(cluster.a, "ann"), await signup(cluster.a, "bob")
    ann_ws, bob_ws = await Socket.open(cluster.a, ann), await Socket.open(cluster.b, bob)
    sockets += [ann_ws, bob_ws]
    made = await create(bob_ws, rated=True, seat=0)
    assert made["type"] == "seat", made
    await abandoned(cluster.database, ann.name, 3)
    refused = await create(ann_ws, rated=True)
    assert (refused.get("type"), refused.get("code")) == ("error", "seek/penalty"), refused
    assert refused["wait_ms"] > 0
    joined = await ann_ws.ask({"type": "join", "room": made["room"]})
    assert (joined.get("type"), joined.get("code")) == ("error", "seek/penalty"), joined
    assert (await create(ann_ws))["type"] == "seat"  # casual games: no penalty


async def test_a_pool_entry_made_before_its_player_was_banned_is_never_paired(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    root, ann, bob = [await signup(cluster.a, p) for p in ("root", "ann", "bob")]
    granted(cluster, root.name, "admin")
    ann_ws, bob_ws = await Socket.open(cluster.a, ann), await Socket.open(cluster.b, bob)
    sockets += [ann_ws, bob_ws]
    pool = {"type": "pool_join", "game": "othello", "clock": {"initial_ms": 61_000}}
    joined = await ann_ws.ask(pool)
    assert joined["type"] == "pool_joined", joined
    await ban(cluster, root, "account", ann.name)
    assert (await bob_ws.ask(pool))["type"] == "pool_joined"
    await asyncio.sleep(3.0)  # both nodes pair about once a second
    seated = [m for s in (ann_ws, bob_ws) for m in s.seen if m.get("type") == "seat"]
    assert seated == []
    left = await bob_ws.ask({"type": "pool_leave"})  # bob still waits: he may leave
    assert left["type"] == "pool_left", left


# -- addresses and expiry ------------------------------------------------------------------


async def test_an_ipv6_ban_refuses_its_64_and_a_mapped_ban_its_ipv4_behind_a_proxy(
    cluster: Cluster, sockets: list[Socket]
) -> None:
    root = await signup(cluster.a, "root")
    granted(cluster, root.name, "admin")
    six = await ban(cluster, root, "address", "2001:db8:77::1")
    assert six["target"] == "2001:db8:77::/64"
    mapped = await ban(cluster, root, "address", "::ffff:198.51.100.77")
    assert mapped["target"] == "198.51.100.77"
    for server in (cluster.a, cluster.b):
        for seen_as in ("2001:db8:77::5", "2001:db8:77:0:ffff::9", "198.51.100.77"):
            with pytest.raises(websockets.InvalidStatus) as refused:
                await Socket.open(server, address=seen_as)
            assert refused.value.response.status_code == 403, seen_as
    sockets.append(await Socket.open(cluster.b, address="2001:db8:78::5"))  # another /64
    for made in (six, mapped):
        assert (await http(cluster.a, "DELETE", f"/api/mod/bans/{made['id']}", root))[0] == 200
    sockets.append(await Socket.open(cluster.b, address="2001:db8:77::5"))


async def test_an_expired_account_ban_lets_the_account_back_in_within_seconds(
    cluster: Cluster,
) -> None:
    root, bob = await signup(cluster.a, "root"), await signup(cluster.a, "bob")
    granted(cluster, root.name, "admin")
    status, made = await http(cluster.a, "POST", "/api/tokens", bob, {"scopes": ["play"]})
    assert status == 201, made
    bearer = {"Authorization": f"Bearer {made['token']}"}
    status, body = await http(
        cluster.a,
        "POST",
        "/api/mod/bans",
        root,
        {"kind": "account", "target": bob.name, "reason": "an hour off", "hours": 1},
    )
    assert status == 201, body
    assert (await me(cluster.b, bearer)) is None  # a banned account's token counts as none
    engine = create_async_engine(async_url(cluster.database))
    try:
        async with engine.begin() as conn:
            await conn.execute(
                t.bans.update()
                .where(t.bans.c.id == body["ban"]["id"])
                .values(expires_ms=int(time.time() * 1000) - 1000)
            )
    finally:
        await engine.dispose()
    who = None
    deadline = time.monotonic() + 3.0  # the nodes' bans loop runs every second
    while who is None and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        who = await me(cluster.a, bearer)
    assert who == bob.name  # the old token works again
    login = {"username": bob.name, "password": PASSWORD}  # (not polled: log-ins are throttled)
    status, body = await http(cluster.b, "POST", "/api/auth/login", body=login)
    assert status == 200, body


async def me(server: ServerProcess, headers: dict[str, str]) -> str | None:
    """The username ``GET /api/auth/me`` answers for ``headers`` (None: a guest)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client:
        async with client.get(server.http_url + "/api/auth/me", headers=headers) as response:
            body = await response.json()
    account = body.get("account")
    return None if account is None else str(account["username"])


async def test_a_first_move_missed_while_connected_and_a_claim_record_abandonments(
    cluster: Cluster, own_redis: EmbeddedRedis, sockets: list[Socket]
) -> None:
    quick = start_server(
        own_redis.url,
        database_url=cluster.database,
        extra_env={**PROXY_ENV, "KIBITZ_FIRST_MOVE_TIMEOUT": "1", "KIBITZ_CLAIM_AFTER_MS": "300"},
    )
    try:
        ann, bob = await signup(quick, "ann"), await signup(quick, "bob")
        ann_ws, bob_ws = await Socket.open(quick, ann), await Socket.open(quick, bob)
        sockets += [ann_ws, bob_ws]
        # Ann stays connected and never makes her first move: charged all the same.
        clock = {"initial_ms": 60_000, "increment_ms": 0}
        made = await create(ann_ws, rated=True, seat=0, clock=clock)
        joined = await bob_ws.ask({"type": "join", "room": made["room"]})
        assert joined["type"] == "seat", joined
        ended = await bob_ws.next(
            lambda m: m.get("type") == "state" and m.get("status") == "over", timeout=15
        )
        assert ended["result"]["termination"] == "abort", ended["result"]
        assert await abandonments_of(cluster.database, made["room"]) == [("timeout", ann.name)]
        # Bob leaves a rated game under way; Ann claims the win: Bob is charged.
        made = await create(ann_ws, rated=True, seat=0)
        joined = await bob_ws.ask({"type": "join", "room": made["room"]})
        assert joined["type"] == "seat", joined
        room = made["room"]
        moved = await change(
            ann_ws, {"type": "move", "room": room, "token": made["token"], "move": "5"}, "move"
        )
        assert moved["type"] == "state", moved
        moved = await change(
            bob_ws, {"type": "move", "room": room, "token": joined["token"], "move": "1"}, "move"
        )
        assert moved["type"] == "state", moved
        await bob_ws.close()
        claim = {"type": "claim", "room": room, "token": made["token"], "result": "win"}
        claimed: dict[str, Any] = {}
        for _ in range(50):  # Bob is seen gone, then 300 ms pass
            claimed = await change(ann_ws, claim, "claim")
            if claimed["type"] == "state":
                break
            await asyncio.sleep(0.1)
        assert claimed["type"] == "state" and claimed["result"]["termination"] == "claim", claimed
        assert await abandonments_of(cluster.database, room) == [("timeout", bob.name)]
    finally:
        quick.stop()
