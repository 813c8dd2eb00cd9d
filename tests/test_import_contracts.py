"""The layering holds: the import contracts of ``[tool.importlinter]`` in pyproject.toml.

- :func:`test_contracts_hold` runs ``lint-imports`` on the tree as it is (exit 0, or its
  report is printed).
- :func:`test_no_module_cycles` looks for module-level import cycles across all the
  ``kibitz.*`` packages together (the ``acyclic_siblings`` contract sees each root alone),
  allowing only the cycles that contract lists in ``ignore_imports``.
- :func:`test_each_contract_catches_a_violation` shows that every contract can fail: it
  copies the packages into a temporary ``kibitz/`` tree, adds one violating import, and
  runs ``lint-imports`` with our configuration against that copy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: package name -> its folder (pyproject.toml's package-dir).
FOLDERS = {
    "shared": "shared",
    "server": "server",
    "workers": "workers",
    "client": "client",
    "benchmarks": "benchmarks",
}
LINT = [
    sys.executable,
    "-c",
    "import sys; from importlinter.cli import lint_imports_command; "
    "sys.exit(lint_imports_command())",
]


def config() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        data: dict[str, Any] = tomllib.load(f)["tool"]["importlinter"]
    return data


def contract(contract_id: str) -> dict[str, Any]:
    return next(c for c in config()["contracts"] if c["id"] == contract_id)


def lint(cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with pyproject.toml of ``cwd``, no cache, bounded in time."""
    return subprocess.run(
        [*LINT, "--no-cache", "--no-logo"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_contracts_hold() -> None:
    result = lint(ROOT)
    assert result.returncode == 0, f"import contracts broken:\n{result.stdout}\n{result.stderr}"
    assert "0 broken" in result.stdout, result.stdout


def _cycles(
    graph: grimp.ImportGraph, modules: set[str], skip: set[tuple[str, str]]
) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    edges = {
        m: sorted(
            x
            for x in graph.find_modules_directly_imported_by(m)
            if x in modules and (m, x) not in skip
        )
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(modules):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_cycles() -> None:
    roots = config()["root_packages"]
    graph = grimp.build_graph(*roots, cache_dir=None)
    modules = {m for m in graph.modules if m.startswith("kibitz.")}
    allowed: set[tuple[str, str]] = set()
    for line in contract("no-cycles").get("ignore_imports", []):
        importer, imported = line.split("->")
        allowed.add((importer.strip(), imported.strip()))
    cycles = _cycles(graph, modules, allowed)
    assert not cycles, f"import cycles: {cycles}"


def test_cycle_finder_finds_a_cycle() -> None:
    """The finder above sees a cycle, and no more once the edge closing it is skipped (so
    an empty answer means something)."""
    graph = grimp.ImportGraph()
    for importer, imported in (("k.a", "k.b"), ("k.b", "k.c"), ("k.c", "k.a"), ("k.c", "k.d")):
        graph.add_import(importer=importer, imported=imported)
    modules = set(graph.modules)
    assert _cycles(graph, modules, set()) == [["k.a", "k.b", "k.c"]]
    assert _cycles(graph, modules, {("k.c", "k.a")}) == []


#: contract id -> (file of the copy, the violating line added to it).
VIOLATIONS = {
    "shared-imports-nothing-of-ours": ("shared/fastjson.py", "import kibitz.server.domain.room"),
    "shared-no-io": ("shared/fastjson.py", "import socket"),
    "client-not-server": ("client/bot.py", "import kibitz.server.services.room_store"),
    "workers-not-server": ("workers/engines.py", "import kibitz.server.fanout.hub"),
    "no-cycles": ("server/domain/room.py", "import kibitz.server.services.room_store"),
    "bus-below-server-and-workers": ("shared/bus/keys.py", "import kibitz.server.metrics"),
    "domain-pure": ("server/domain/clocks.py", "import asyncio"),
    "redis-only-in-bus": ("server/http/query.py", "import redis"),
    "protocol-directions-independent": (
        "shared/protocol/jobs.py",
        "import kibitz.shared.protocol.client_in",
    ),
}


@pytest.fixture(scope="module")
def pristine_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages laid out as the installed namespace (``kibitz/shared``, ...), with
    pyproject.toml beside them."""
    base = tmp_path_factory.mktemp("layout")
    for name, folder in FOLDERS.items():
        shutil.copytree(
            ROOT / folder,
            base / "kibitz" / name,
            ignore=shutil.ignore_patterns("__pycache__", "static", "*.pyc"),
        )
    shutil.copy(ROOT / "pyproject.toml", base / "pyproject.toml")
    return base


def broken_contracts(output: str) -> set[str]:
    names = {c["name"]: c["id"] for c in config()["contracts"]}
    return {names[n] for n in names if f"{n} BROKEN" in output}


@pytest.mark.parametrize("contract_id", sorted(VIOLATIONS))
def test_each_contract_catches_a_violation(
    contract_id: str, pristine_copy: Path, tmp_path: Path
) -> None:
    base = tmp_path / "tree"
    shutil.copytree(pristine_copy, base)
    path, line = VIOLATIONS[contract_id]
    target = base / "kibitz" / path
    target.write_text(target.read_text() + f"\n{line}  # a violation, for the test\n")
    # The copy comes first on the path, before the editable install's finder.
    env = {**os.environ, "PYTHONPATH": str(base)}
    result = lint(base, env)
    assert result.returncode != 0, f"{contract_id}: violation not caught\n{result.stdout}"
    # (A violation in shared also breaks the contracts of its importers.)
    assert contract_id in broken_contracts(result.stdout), result.stdout
    assert line.split()[-1].rsplit(".", 1)[-1] in result.stdout, result.stdout
