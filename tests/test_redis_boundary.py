"""Nothing outside the Redis boundary (``shared/bus/``) calls a Redis command.

Importing redis-py outside the boundary is refused by the ``redis-only-in-bus`` import
contract (pyproject.toml). A module could still call a command on a client it was handed,
so this test reads the source of every package but the bus and looks for calls of Redis
command methods (the method names of redis-py's asyncio client): on a receiver whose name
says Redis (``self.redis.hget``, ``store.redis.set``, ``pipe.xadd``), or, for a command name
nothing else in our code or the standard types uses (``xreadgroup``, ``zadd``, ``evalsha``,
...), on any receiver at all.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import inspect
import logging
import re
import select
import subprocess
import threading
from pathlib import Path

import redis.asyncio as aioredis
import sqlalchemy

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ("server", "workers", "client", "benchmarks", "shared")
BOUNDARY = ROOT / "shared" / "bus"
#: A receiver named like a Redis client or pipeline: any command on it counts.
REDIS_RECEIVER = re.compile(r"(?:^|[._])(?:redis|aioredis|pipe|pipeline|client_redis)$")
#: Common methods of the standard types and of the objects a node holds (an Event's set,
#: a dict's get, a logger's info, ...): such a name counts only on a Redis-named receiver.
COMMON_TYPES: tuple[object, ...] = (
    dict, list, set, str, bytes, asyncio.Event, asyncio.Queue, asyncio.Lock, asyncio.Task,
    asyncio.AbstractEventLoop, asyncio.StreamWriter, logging.Logger, threading.Event,
    subprocess.Popen, Path, hashlib.sha256(), sqlalchemy, select,
)  # fmt: skip


def redis_commands() -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(aioredis.Redis)
        if not name.startswith("_") and callable(value)
    }


def python_files(folders: tuple[str, ...] = OUTSIDE) -> list[Path]:
    return [
        path
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        if BOUNDARY not in path.parents
    ]


def our_names(paths: list[Path]) -> set[str]:
    """Every function and method name defined in our code (the bus's own API included)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
    return names


def distinctive(commands: set[str], ours: set[str]) -> set[str]:
    common = {name for kind in COMMON_TYPES for name in dir(kind)}
    plain_words = {"close", "time", "info", "ping", "wait", "reset", "json", "quit"}
    return commands - common - ours - plain_words


def redis_calls(source: str, commands: set[str], unusual: set[str]) -> list[str]:
    """``line: receiver.command`` for each Redis command call in the source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        command = node.func.attr
        if command not in commands:
            continue
        receiver = ast.unparse(node.func.value)
        if command in unusual or REDIS_RECEIVER.search(receiver):
            found.append(f"{node.lineno}: {receiver}.{command}")
    return sorted(found, key=lambda item: int(item.split(":")[0]))


def test_no_redis_command_outside_the_boundary() -> None:
    files = python_files()
    commands = redis_commands()
    unusual = distinctive(commands, our_names([*files, *BOUNDARY.rglob("*.py")]))
    problems = [
        f"{path.relative_to(ROOT)}:{call}"
        for path in files
        for call in redis_calls(path.read_text("utf-8"), commands, unusual)
    ]
    assert not problems, "Redis commands outside shared/bus/:\n" + "\n".join(problems)


def test_the_scan_sees_a_redis_call() -> None:
    """The scan can fail: each way a command reaches Redis in a snippet is reported."""
    commands = redis_commands()
    unusual = distinctive(commands, set())
    snippet = (
        "async def f(self, r, events):\n"
        "    await self.redis.hget('k', 'f')\n"  # a Redis-named receiver
        "    await self.store.redis.set('k', '1')\n"
        "    pipe.expire('k', 5)\n"
        "    await r.xreadgroup('g', 'c', {'s': '>'})\n"  # a distinctive command
        "    events.set()\n"  # an Event: not Redis
        "    {}.get('k')\n"
    )
    assert redis_calls(snippet, commands, unusual) == [
        "2: self.redis.hget",
        "3: self.store.redis.set",
        "4: pipe.expire",
        "5: r.xreadgroup",
    ]
