"""The Lua scripts of the Redis boundary, read from the ``.lua`` files of this folder.

Each script is a file of its own (package data), so it reads and diffs as Lua. A script that
uses shared Lua functions names the library files before its own: ``source("fair_lib",
"dispatch")`` is the two files joined, library first. The Python wrapper that runs a script
(with named arguments and a typed result) lives beside the data it serves, in the bus module
of that data (``store.py``, ``fair_queue.py``, ...), and says there which KEYS and ARGV it passes.
"""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def _read(name: str) -> str:
    folder = resources.files(__name__)
    return folder.joinpath(f"{name}.lua").read_text("utf-8")


def source(*names: str) -> str:
    """The Lua text of the named files (``scripts/NAME.lua``), joined in order."""
    if not names:
        raise ValueError("name at least one script file")
    return "\n".join(_read(name) for name in names)
