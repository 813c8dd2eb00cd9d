"""The map stays true: every module, symbol and test docs/architecture.md names exists.

docs/architecture.md cites code as backticked paths (`server/domain/room.py`), optionally with the
symbols they define (`server/domain/room.py::play_move`,
`server/services/rooms.py::RoomService.move`,
`tests/server/test_rooms.py::test_two_nodes_share_rooms`). This test reads every such
citation and fails when a path is gone or a named function, class or constant is not
defined in that file, so the map cannot drift from the tree. It also checks that "Who
decides what" has at least twenty behaviours, each with the code that decides it and the
test that proves it, and that every "docs/X.md, Section" reference in the repository's
documents names a section X.md has.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
TOP_FOLDERS = ("tests", "server", "workers", "shared", "client", "benchmarks", "deploy")
CITATION = re.compile(
    r"^(?P<path>(?:" + "|".join(TOP_FOLDERS) + r")/(?:[\w*-]+/)*(?:[\w*-]+\.[\w.]+)?)"
    r"(?:::(?P<symbol>[\w.]+))?$"
)
BACKTICKED = re.compile(r"`([^`\n]+)`")
BARE_TEST = re.compile(r"^test_\w+$")
SECTION_REFERENCE = re.compile(
    r"docs/(?P<doc>[\w-]+)\.md, (?:\*(?P<italic>[^*]+)\*|(?P<plain>[A-Z][^);:.|]*))"
)


def _defines(source: str, suffix: str, name: str) -> bool:
    """Whether the source defines ``name`` as a function, class or module-level name."""
    if suffix == ".py":
        pattern = rf"^\s*(?:async\s+def|def|class)\s+{name}\b|^{name}\s*[:=]"
    else:
        pattern = rf"\b(?:function|class|const|let|var)\s+{name}\b"
    return re.search(pattern, source, re.MULTILINE) is not None


def check_citation(path: str, symbol: str | None, root: Path = ROOT) -> str | None:
    """What is wrong with one citation, or None when its path and symbol exist."""
    if "*" in path:
        return None if list(root.glob(path)) else f"{path}: nothing matches"
    target = root / path
    if not target.exists():
        return f"{path}: no such file or folder"
    if symbol is None:
        return None
    if not target.is_file():
        return f"{path}::{symbol}: a symbol of a folder"
    source = target.read_text(encoding="utf-8")
    for part in symbol.split("."):
        if not _defines(source, target.suffix, part):
            return f"{path}::{symbol}: {part} is not defined there"
    return None


def citation_problems(text: str, root: Path = ROOT) -> list[str]:
    """Every broken citation in a document's text. In a table cell, a bare `test_name`
    after a cited test file names a test of that file."""
    problems: list[str] = []
    for line in text.splitlines():
        cells = line.split("|") if line.startswith("|") else [line]
        for cell in cells:
            last_file: str | None = None
            for token in BACKTICKED.findall(cell):
                match = CITATION.match(token)
                if match:
                    problem = check_citation(match["path"], match["symbol"], root)
                    if problem:
                        problems.append(problem)
                    if match["path"].endswith(".py"):
                        last_file = match["path"]
                elif BARE_TEST.match(token) and last_file and line.startswith("|"):
                    problem = check_citation(last_file, token, root)
                    if problem:
                        problems.append(problem)
    return problems


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The body rows of the first table under the section whose title starts with
    ``heading``, as lists of cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {heading}"))
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def headings(doc: Path) -> list[str]:
    return [
        line.lstrip("#").strip().replace("`", "").replace("*", "")
        for line in doc.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]


def section_reference_problems(text: str, docs: Path) -> list[str]:
    """Every "docs/X.md, Section" in the text whose X.md has no section of that name."""
    flat = " ".join(text.split())
    problems: list[str] = []
    for match in SECTION_REFERENCE.finditer(flat):
        doc = docs / f"{match['doc']}.md"
        title = (match["italic"] or match["plain"]).strip().replace("`", "")
        if not doc.exists():
            problems.append(f"docs/{match['doc']}.md: no such document")
        elif not any(h.lower().startswith(title.lower()) for h in headings(doc)):
            problems.append(f"docs/{match['doc']}.md has no section {title!r}")
    return problems


def test_every_cited_module_symbol_and_test_exists() -> None:
    assert citation_problems(ARCHITECTURE.read_text(encoding="utf-8")) == []


def test_who_decides_what_names_code_and_a_test_for_twenty_behaviours() -> None:
    rows = table_rows(ARCHITECTURE.read_text(encoding="utf-8"), "Who decides what")
    assert len(rows) >= 20
    for behaviour, decided_by, proved_by in (row[:3] for row in rows):
        assert "::" in decided_by or ".py`" in decided_by or ".js`" in decided_by, behaviour
        assert "`tests/" in proved_by and "::test_" in proved_by, behaviour


def test_every_redis_key_in_the_table_is_spelled_in_the_code() -> None:
    """Each word of each key in "Redis keys" (between colons, placeholders left out) is in
    a string of server/, workers/ or shared/ (the key schema, shared/bus/keys.py, and the
    bus modules that say what each key holds): a key renamed in the code fails here."""
    code = "\n".join(
        path.read_text(encoding="utf-8")
        for folder in ("server", "workers", "shared")
        for path in (ROOT / folder).rglob("*.py")
    )
    missing = []
    for row in table_rows(ARCHITECTURE.read_text(encoding="utf-8"), "Redis keys"):
        for key in BACKTICKED.findall(row[0]):
            words = re.split(r"\{[^}]*\}|:|\.\.\.", key.removeprefix("kibitz:"))
            missing += [f"{key}: {word}" for word in words if word and word not in code]
    assert missing == []


def test_sections_named_by_other_documents_exist() -> None:
    sources = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    problems = [
        f"{source.relative_to(ROOT)}: {problem}"
        for source in sources
        for problem in section_reference_problems(source.read_text(encoding="utf-8"), ROOT / "docs")
    ]
    assert problems == []


def test_a_made_up_citation_or_section_is_caught() -> None:
    made_up = (
        "| a move | `server/domain/room.py::play_move` "
        "| `tests/server/domain/test_room.py::test_nowhere` |\n"
        "| a flag | `server/nowhere.py` | `tests/server/test_clocks.py`, `test_gone_too` |\n"
        "| a class | `server/services/rooms.py::RoomService.no_such_method` | |\n"
    )
    assert citation_problems(made_up) == [
        "tests/server/domain/test_room.py::test_nowhere: test_nowhere is not defined there",
        "server/nowhere.py: no such file or folder",
        "tests/server/test_clocks.py::test_gone_too: test_gone_too is not defined there",
        "server/services/rooms.py::RoomService.no_such_method: no_such_method is not defined there",
    ]
    assert citation_problems("| ok | `server/domain/room.py::Room.snapshot` | |") == []
    made_up_reference = "see docs/performance.md, *No such section*."
    assert section_reference_problems(made_up_reference, ROOT / "docs") == [
        "docs/performance.md has no section 'No such section'"
    ]
