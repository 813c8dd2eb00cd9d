"""The import graphs have no cycle: the browser client's ES modules and kibitz's Python.

The browser client (client/static, plain ES modules) is layered:

- ``app.js`` is the entry: the only module that may import a screen;
- the screens (``lobby.js``, ``game.js``, ``gamepage.js``) import no other screen: one
  screen leads to another through ``router.js``;
- a panel (a part of one screen: ``seeks.js``, ``mygames.js``, ``actions.js``, ``chat.js``,
  ``choice.js``, ``feel.js``) is imported only by its screen and the entry;
- only ``store.js`` assigns to the shared state (no ``app.x = ...`` / ``store.x = ...``).

Python: no cycle among the modules of kibitz (shared/, server/, workers/, client/,
benchmarks/, named as pyproject.toml's package-dir maps them), counting the imports run
when a module is loaded (not those inside functions or under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "client" / "static"

ENTRY = "app.js"
SCREENS = frozenset({"lobby.js", "game.js", "gamepage.js", "players.js", "accountpage.js"})
PANELS: Mapping[str, str] = {  # panel -> the screen it is a part of
    "seeks.js": "lobby.js",
    "mygames.js": "lobby.js",
    "bots.js": "lobby.js",
    "actions.js": "game.js",
    "chat.js": "game.js",
    "choice.js": "game.js",
    "feel.js": "game.js",
}
STORE = "store.js"

# The folders of pyproject.toml's package-dir: package name -> folder.
PACKAGE_DIRS: Mapping[str, str] = {
    "kibitz.shared": "shared",
    "kibitz.server": "server",
    "kibitz.workers": "workers",
    "kibitz.client": "client",
    "kibitz.benchmarks": "benchmarks",
}

Graph = dict[str, set[str]]

# -- the browser client's modules -------------------------------------------------------------

_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"^\s*//.*$", re.M)
# `import x from "./a.js"`, `import {a,\n b} from "./a.js"`, `export {a} from "./a.js"`,
# `export * from "./a.js"` (static ones start a line), and `import "./a.js"`.
_STATIC = re.compile(r"^(?:import|export)\b[^;]*?\bfrom\s*([\"'])(?P<path>[^\"']+)\1", re.M | re.S)
_BARE = re.compile(r"^import\s*([\"'])(?P<path>[^\"']+)\1", re.M)
# `import("./a.js")` or `import(`./boards/${game}.js`)` (a template: every file it can name).
_DYNAMIC = re.compile(r"\bimport\(\s*([\"'`])(?P<path>[^\"'`]+)\1\s*\)")
_STATE_WRITE = re.compile(r"\b(?:app|store)\.[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*\s*=(?!=)")


def js_modules() -> list[str]:
    """Every .js file under client/static, as a path relative to it ("boards/chess.js")."""
    return sorted(path.relative_to(STATIC).as_posix() for path in STATIC.rglob("*.js"))


def _strip_comments(text: str) -> str:
    """The code without its comments, lines kept where they were."""
    blank = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _LINE_COMMENT.sub("", blank)


def _code(name: str) -> str:
    return _strip_comments((STATIC / name).read_text(encoding="utf-8"))


def _specs(code: str) -> list[str]:
    """The module specifiers of every import and export ... from in `code`."""
    return [m.group("path") for regex in (_STATIC, _BARE, _DYNAMIC) for m in regex.finditer(code)]


def _resolve(importer: str, spec: str, known: Iterable[str]) -> list[str]:
    """The modules `spec` (relative, or a template with ${...}) names from `importer`."""
    if spec.startswith("/static/"):
        target = spec[len("/static/") :]
    elif spec.startswith("."):
        parts: list[str] = []
        for part in (PurePosixPath(importer).parent / spec).parts:
            if part == "..":
                parts.pop()
            elif part != ".":
                parts.append(part)
        target = "/".join(parts)
    else:
        return []  # not one of ours
    if "${" not in target:
        return [target]
    pattern = re.compile(
        "^" + ".*?".join(re.escape(p) for p in re.split(r"\$\{[^}]*\}", target)) + "$"
    )
    return [
        name
        for name in known
        if pattern.match(name) and "/" not in name[len(target.split("${")[0]) :]
    ]


def js_imports(name: str, known: Iterable[str]) -> set[str]:
    """The modules of client/static that `name` imports, statically or dynamically."""
    known = list(known)
    return {target for spec in _specs(_code(name)) for target in _resolve(name, spec, known)}


def js_graph() -> Graph:
    names = js_modules()
    return {name: js_imports(name, names) for name in names}


# -- cycles -----------------------------------------------------------------------------------


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with a cycle, each as a path a -> ... -> a."""
    cycles: list[list[str]] = []
    for component in _components(graph):
        first = min(component)
        if len(component) == 1 and first not in graph.get(first, set()):
            continue
        cycles.append(_cycle_through(first, graph, component))
    return sorted(cycles)


def _components(graph: Mapping[str, set[str]]) -> Iterator[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, set()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, set())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                yield component


def _cycle_through(start: str, graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside `component` (breadth first)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph.get(node, set()) & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a cycle but no path returns to it")


def cycle_text(cycles: list[list[str]], graph: Mapping[str, set[str]]) -> str:
    """Each cycle as a path, with every module of its strongly connected component."""
    members = {min(c): sorted(c) for c in _components(graph)}
    return "; ".join(
        f"{' -> '.join(cycle)} (all in one cycle: {', '.join(members[cycle[0]])})"
        for cycle in cycles
    )


# -- Python modules ---------------------------------------------------------------------------


def python_modules() -> dict[str, Path]:
    """Every module of kibitz by its dotted name ("kibitz.server.app"), packages included."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            relative = path.relative_to(base).with_suffix("")
            parts = [part for part in relative.parts if part != "__init__"]
            modules[".".join([package, *parts])] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports run when the module loads: not in functions nor under TYPE_CHECKING."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _load_time_imports(node.orelse)
        else:
            yield from _load_time_imports(_nested_statements(node))


def _nested_statements(node: ast.stmt) -> list[ast.stmt]:
    """The statements inside a compound one (class, if, try, with, for, while, match)."""
    found: list[ast.stmt] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt):
            found.append(child)
        elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
            found.extend(child.body)
    return found


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def python_imports(module: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The kibitz modules `module` imports when it loads."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in _load_time_imports(tree.body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = _package_of(module, path).split(".")
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {name for name in found if name in known and name != module}


def python_graph() -> Graph:
    modules = python_modules()
    return {name: python_imports(name, path, modules) for name, path in modules.items()}


# -- the checks -------------------------------------------------------------------------------


def test_the_python_parser_counts_load_time_imports_only(tmp_path: Path) -> None:
    """Module-level, class-level and try imports count; in functions or TYPE_CHECKING not."""
    init = tmp_path / "__init__.py"
    init.write_text("")
    code = (
        "from typing import TYPE_CHECKING\n"
        "from . import a\n"
        "from kibitz.x.b import thing\n"
        "try:\n    import kibitz.x.c\nexcept ImportError:\n    from kibitz.x import d\n"
        "if TYPE_CHECKING:\n    from kibitz.x import e\n"
        "class K:\n    from kibitz.x import f\n"
        "def later() -> None:\n    from kibitz.x import g\n"
    )
    (tmp_path / "m.py").write_text(code)
    known = {f"kibitz.x.{name}": tmp_path / f"{name}.py" for name in "abcdefgm"} | {
        "kibitz.x": init
    }
    found = python_imports("kibitz.x.m", tmp_path / "m.py", known)
    assert found == {"kibitz.x.a", "kibitz.x.b", "kibitz.x.c", "kibitz.x.d", "kibitz.x.f"}


def test_the_js_parser_reads_every_form_of_import() -> None:
    """The checks below can only fail if the imports are read: a fixed sample proves it."""
    names = ["a.js", "b.js", "c.js", "d.js", "boards/x.js", "boards/y.js"]
    code = (
        'import { a,\n  b } from "./b.js";\n'
        "export * from './a.js';\n"
        '// import { c } from "./c.js";\n'
        '/* export { d } from "./d.js"; */\n'
        "const board = await import(`./boards/${game}.js`);\n"
    )
    specs = _specs(_strip_comments(code))
    assert sorted(t for s in specs for t in _resolve("a.js", s, names)) == [
        "a.js",
        "b.js",
        "boards/x.js",
        "boards/y.js",
    ]
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_the_browser_modules_import_no_cycle() -> None:
    graph = js_graph()
    cycles = find_cycles(graph)
    assert not cycles, f"import cycles in client/static: {cycle_text(cycles, graph)}"


def test_only_the_entry_imports_a_screen_and_a_panel_only_its_screen() -> None:
    graph = js_graph()
    assert SCREENS | set(PANELS) | {ENTRY} <= set(graph), (
        "a module named here is gone: update the lists"
    )
    wrong = []
    for importer, targets in sorted(graph.items()):
        for target in sorted(targets):
            if target in SCREENS and importer != ENTRY:
                wrong.append(f"{importer} imports the screen {target} (go through router.js)")
            elif target in PANELS and importer not in (ENTRY, PANELS[target]):
                wrong.append(f"{importer} imports {target}, a panel of {PANELS[target]}")
    assert not wrong, "; ".join(wrong)


def test_only_the_store_changes_the_shared_state() -> None:
    writes = [
        f"{name}:{_code(name)[: m.start()].count(chr(10)) + 1}: {m.group(0)}"
        for name in js_modules()
        if name != STORE
        for m in _STATE_WRITE.finditer(_code(name))
    ]
    assert not writes, f"{len(writes)} writes to the shared state outside {STORE}: " + "; ".join(
        writes
    )


def test_the_python_modules_import_no_cycle() -> None:
    graph = python_graph()
    assert len(graph) > 50, "the modules were not found"
    cycles = find_cycles(graph)
    assert not cycles, f"import cycles in kibitz: {cycle_text(cycles, graph)}"
