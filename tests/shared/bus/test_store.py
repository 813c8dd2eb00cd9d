"""The room store of the Redis boundary, driven directly (no server): a refused commit
writes nothing, every key a script touches is one it was handed (but the documented
exceptions), a room's keys share one cluster slot, the commit's KEYS and ARGV are named
alike in Python and in its Lua file, and a missing script file fails the import.

Real Redis (a private one per module, ``own_redis``: nothing else writes to it); MONITOR
shows what the scripts run.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from kibitz.shared.bus import fair_queue as fairness
from kibitz.shared.bus import keys
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.bus.scripts import source
from kibitz.shared.bus.store import (
    GLOBAL_COMMIT_KEYS,
    AiGames,
    AiGamesLimit,
    ClusterCommitKeys,
    CommitArgs,
    CommitKeys,
    QueueFull,
    RoomCommit,
    RoomStore,
    StaleVersion,
)
from kibitz.shared.protocol.jobs import Budget, Job

SHARED = Path(__file__).resolve().parents[3] / "shared"
SCRIPTS = SHARED / "bus" / "scripts"
MONITOR_LINES = 5_000  # lines one MONITOR read takes at most
MONITOR_S = 5.0  # and seconds


@pytest.fixture
async def store(own_redis: EmbeddedRedis) -> AsyncIterator[RoomStore]:
    client = aioredis.from_url(own_redis.url, decode_responses=True)
    bus = RoomStore(client, node="n-" + uuid.uuid4().hex[:6])
    await bus.ensure_groups()
    await bus.heartbeat()
    yield bus
    await client.aclose()


def _room_id() -> str:
    return "t" + uuid.uuid4().hex[:10]


def _plan(
    room_id: str,
    expected: int,
    version: int,
    status: str = "playing",
    job: Job | None = None,
    ai_games: AiGames | None = None,
) -> RoomCommit:
    snapshot = {
        "type": "state",
        "room": room_id,
        "version": version,
        "seats": [{"name": "x"}, {"name": "o"}],
    }
    return RoomCommit(
        room_id=room_id,
        expected_version=expected,
        version=version,
        record={"id": room_id, "version": version, "status": status},
        event={"kind": "move", "seat": version % 2},
        updated_ms=int(time.time() * 1000),
        status=status,
        archive=True,
        snapshot=snapshot,
        seat_flags="hh",
        deadline_ms=None,
        job=job,
        ai_games=ai_games,
    )


def _job(room_id: str, version: int, owner: str = "10.9.9.9") -> Job:
    return Job(
        job_id=f"{room_id}:{version}",
        room=room_id,
        version=version,
        game="tictactoe",
        position="",
        moves=[],
        level=1,
        budget=Budget(depth=1, time_ms=100),
        owner=owner,
    )


async def _keyspace(url: str) -> dict[bytes, Any]:
    """Every key's serialized value and whether it has a TTL: what "nothing changed" means."""
    raw = aioredis.from_url(url)
    state: dict[bytes, Any] = {}
    async for key in raw.scan_iter(b"*", count=1000):
        state[key] = (await raw.dump(key), await raw.pttl(key) > 0)
    await raw.aclose()
    return state


# -- a refused commit writes nothing ------------------------------------------------------


async def test_a_commit_at_a_stale_version_changes_nothing(
    store: RoomStore, own_redis: EmbeddedRedis
) -> None:
    url, room_id = own_redis.url, _room_id()
    await store.commit_plan(_plan(room_id, -1, 0, status="waiting"))
    await store.commit_plan(_plan(room_id, 0, 1))
    pubsub = store.redis.pubsub()
    await pubsub.subscribe(keys.room_channel(room_id))
    await pubsub.get_message(timeout=1.0)  # the subscribe confirmation
    before = await _keyspace(url)
    for expected in (0, 5, -1):  # behind, ahead, "must not exist"
        with pytest.raises(StaleVersion) as stale:
            await store.commit_plan(_plan(room_id, expected, expected + 1, job=_job(room_id, 9)))
        assert stale.value.current == 1
    assert await _keyspace(url) == before
    assert await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.3) is None
    await pubsub.aclose()
    assert await store.version(room_id) == 1


async def test_a_refused_ai_game_or_job_changes_nothing(
    store: RoomStore, own_redis: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = own_redis.url
    owner = "10.8." + str(uuid.uuid4().int % 250) + ".1"
    first = _room_id()
    await store.commit_plan(_plan(first, -1, 0, ai_games=AiGames(owner, "create", limit=1)))
    before = await _keyspace(url)
    with pytest.raises(AiGamesLimit) as limit:
        await store.commit_plan(_plan(_room_id(), -1, 0, ai_games=AiGames(owner, "create", 1)))
    assert (limit.value.games, limit.value.limit) == (1, 1)
    assert await _keyspace(url) == before
    # A job that does not fit in the fair queue refuses the whole change.
    monkeypatch.setattr(fairness, "MAX_WAITING", await store.redis.hlen(keys.AI_WAITING))
    with pytest.raises(QueueFull):
        await store.commit_plan(_plan(first, 0, 1, job=_job(first, 1)))
    assert await _keyspace(url) == before


@pytest.mark.parametrize(
    "change",
    [{"status": "lost"}, {"seat_flags": "h"}, {"seat_flags": "hx"}, {"expected_version": -2}],
)
async def test_a_plan_the_script_would_misread_is_refused_before_sending(
    store: RoomStore, own_redis: EmbeddedRedis, change: dict[str, Any]
) -> None:
    room_id = _room_id()
    with pytest.raises(ValueError):
        replace(_plan(room_id, -1, 0), **change)
    assert await store.version(room_id) is None


# -- keys: named, handed to the script, in the room's slot --------------------------------


def _lua_table(name: str, kind: str) -> list[str]:
    """The names a script's header gives ``KEYS[i]`` or ``ARGV[i]``, in order of i."""
    named = re.findall(rf"^--\s+{kind}\[(\d+)\]\s+(\w+)", source(name), re.MULTILINE)
    assert [int(i) for i, _ in named] == list(range(1, len(named) + 1))
    return [field for _, field in named]


def test_the_commit_names_keys_and_args_as_its_lua_file_does() -> None:
    assert _lua_table("commit", "KEYS") == list(CommitKeys._fields)
    assert _lua_table("commit", "C") == list(ClusterCommitKeys._fields)  # then presence keys
    assert _lua_table("commit", "ARGV") == list(CommitArgs._fields)
    # And the body uses no entry the header does not name.
    body = source("commit")
    for kind, count in (("KEYS", len(CommitKeys._fields)), ("ARGV", len(CommitArgs._fields))):
        used = {int(i) for i in re.findall(rf"\b{kind}\[(\d+)\]", body)}
        assert used == set(range(1, count + 1)), kind


@pytest.mark.parametrize(
    "name",
    ["presence", "attach", "publish_presence", "leave", "archived", "queue_legacy", "forget",
     "node_beat", "live_nodes", "fair_dispatch", "fair_beat", "fair_should_yield", "ai_relay",
     "ai_games_count", "address_connect", "seek_add", "seek_accept",
     "pool_join", "pool_live", "pool_take", "chat_append", "analysis_start",
     "jobs_renew_lease"],
)  # fmt: skip
def test_every_store_script_names_each_entry_it_uses(name: str) -> None:
    body = source(name)
    for kind in ("KEYS", "ARGV"):
        named = _lua_table(name, kind)
        used = {int(i) for i in re.findall(rf"\b{kind}\[(\d+)\]", body)}
        assert used <= set(range(1, len(named) + 1)), (name, kind)


def test_the_commit_keys_share_the_room_slot_but_the_global_ones(store: RoomStore) -> None:
    room_id = _room_id()
    plan = _plan(room_id, 3, 4, job=_job(room_id, 4), ai_games=AiGames("10.1.1.1", "touch"))
    commit_keys, _args = store.commit_call(plan)
    slot = key_slot(keys.room_key(room_id).encode())
    own = {name for name, key in commit_keys._asdict().items() if key_slot(key.encode()) == slot}
    assert set(CommitKeys._fields) - own == GLOBAL_COMMIT_KEYS
    assert {"room", "events", "presence", "chat_players", "chat_spectators"} <= own


class LuaMonitor:
    """The commands scripts run (MONITOR's ``lua`` lines), read from a raw connection."""

    def __init__(self, url: str) -> None:
        address = urlparse(url)
        self.sock = socket.create_connection((address.hostname, address.port), timeout=MONITOR_S)
        if address.password:
            self.sock.sendall(_command("AUTH", address.password))
            assert self._line() == "+OK"
        self.sock.sendall(_command("MONITOR"))
        assert self._line() == "+OK"

    _buffer = b""

    def _line(self) -> str:
        while b"\r\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("MONITOR connection closed")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line.decode("utf-8", "replace")

    def lua_commands(self, marker: str) -> list[list[str]]:
        """The script commands seen until the ``ECHO marker`` sent after them."""
        found: list[list[str]] = []
        deadline = time.monotonic() + MONITOR_S
        for _ in range(MONITOR_LINES):
            assert time.monotonic() < deadline, "the marker never came"
            line = self._line()
            words = [_unquote(w) for w in re.findall(r'"((?:[^"\\]|\\.)*)"', line)]
            if words[:2] == ["ECHO", marker]:
                return found
            if " lua] " in line:
                found.append(words)
        raise AssertionError("the marker never came")

    def close(self) -> None:
        self.sock.close()


def _command(*words: str) -> bytes:
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _unquote(word: str) -> str:
    """MONITOR's quoting undone (``\\"``, ``\\\\``, ``\\xNN``, ``\\n``, ...)."""
    table = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", '"': '"', "\\": "\\"}
    return re.sub(
        r"\\(x[0-9a-fA-F]{2}|.)",
        lambda m: chr(int(m[1][1:], 16)) if m[1].startswith("x") else table.get(m[1], m[1]),
        word,
    )


async def _touched(
    store: RoomStore, monitor: LuaMonitor, action: Callable[[], Awaitable[object]]
) -> set[str]:
    """The keys of every command the scripts ran during ``action`` (COMMAND GETKEYS)."""
    await action()
    marker = uuid.uuid4().hex
    await store.redis.echo(marker)
    touched: set[str] = set()
    for words in monitor.lua_commands(marker):
        if words[0].upper() in {"TIME", "PUBLISH"}:
            continue
        touched.update(await store.redis.command_getkeys(*words))
    return touched


def _exception(key: str) -> bool:
    """The documented exceptions: node heartbeats read by presence_lib.lua (any node), the
    rooms of queued jobs read by fair_lib.lua's dispatch."""
    return key.startswith(keys.NODES) or (
        key.startswith(keys.ROOM_PREFIX + "{") and key.endswith("}")
    )


async def test_every_key_a_store_script_touches_is_handed_to_it(
    store: RoomStore, own_redis: EmbeddedRedis
) -> None:
    room_id = _room_id()
    monitor = LuaMonitor(own_redis.url)
    try:
        plan = _plan(room_id, -1, 0, status="waiting")
        handed = set(store.commit_call(plan)[0])
        touched = await _touched(store, monitor, lambda: store.commit_plan(plan))
        assert touched <= handed
        # The monitor sees what the script did: the waiting room's lifetime on its chats.
        assert keys.chat_key(room_id, "players") in touched
        # A move that starts the game and queues an AI job: enqueue and dispatch run too.
        plan = _plan(room_id, 0, 1, job=_job(room_id, 1), ai_games=AiGames("10.2.2.2", "touch"))
        handed = set(store.commit_call(plan)[0])
        touched = await _touched(store, monitor, lambda: store.commit_plan(plan))
        assert {k for k in touched if k not in handed and not _exception(k)} == set()
        # The game ends (queued for archiving), then is archived and forgotten.
        plan = _plan(room_id, 1, 2, status="over", ai_games=AiGames("10.2.2.2", "end"))
        handed = set(store.commit_call(plan)[0])
        touched = await _touched(store, monitor, lambda: store.commit_plan(plan))
        assert {k for k in touched if k not in handed and not _exception(k)} == set()
        room_keys = {
            keys.room_key(room_id), keys.events_key(room_id), keys.presence_key(room_id),
            keys.chat_key(room_id, "players"), keys.chat_key(room_id, "spectators"),
        }  # fmt: skip
        for action, allowed in (
            (lambda: store.attach(room_id, 0, 1), room_keys),
            (lambda: store.presence_counts(room_id, (True, True)), room_keys),
            (lambda: store.publish_snapshot(room_id, 2, "hh", _plan(room_id, 1, 2).snapshot),
             room_keys),
            (lambda: store.publish_snapshot(room_id, 2, "hh", _plan(room_id, 1, 2).snapshot, 0),
             room_keys),
            (lambda: store.archived(room_id, "0-1", 60_000),
             room_keys | {keys.live(0), keys.archive(0)}),
            (lambda: store.queue_if_legacy(room_id), room_keys | {keys.archive(0)}),
            (lambda: store.forget(room_id, 2), room_keys | {keys.live(0)}),
            (lambda: store.heartbeat(), {keys.node_key(store.node), keys.NODE_BEATS}),
        ):  # fmt: skip
            touched = await _touched(store, monitor, action)
            assert {k for k in touched if k not in allowed and not _exception(k)} == set()
    finally:
        monitor.close()


# -- the script files ---------------------------------------------------------------------


async def test_a_node_that_leaves_is_never_announced_dead(
    store: RoomStore, own_redis: EmbeddedRedis
) -> None:
    client = aioredis.from_url(own_redis.url, decode_responses=True)
    other = RoomStore(client, node="n-" + uuid.uuid4().hex[:6])
    try:
        await other.heartbeat()
        assert await client.zscore(keys.NODE_BEATS, other.node) is not None
        await other.leave()
        assert await client.exists(keys.node_key(other.node)) == 0
        assert await client.zscore(keys.NODE_BEATS, other.node) is None
        # A node that died instead is announced by the next beat of another.
        await client.zadd(keys.NODE_BEATS, {"n-killed": 1})
        assert await store.heartbeat() == 1
    finally:
        await client.aclose()


def test_a_missing_script_name_fails_loudly() -> None:
    with pytest.raises(FileNotFoundError, match="no_such_script.lua"):
        source("no_such_script")


def test_a_missing_script_file_fails_the_import(tmp_path: Path) -> None:
    """A copy of the package with one script file gone: importing the store fails, naming
    the file (at import, not at the first commit)."""
    copy = tmp_path / "kibitz" / "shared"
    shutil.copytree(SHARED, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (copy / "bus" / "scripts" / "commit.lua").unlink()
    probe = (
        "import kibitz.shared.bus.scripts as s, sys\n"
        f"assert s.__file__.startswith({str(tmp_path)!r}), s.__file__\n"
        "import kibitz.shared.bus.store\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "FileNotFoundError" in done.stderr and "commit.lua" in done.stderr, done.stderr
