"""Each ``kibitz`` command loads what it needs (server/cli/__init__.py's lazy registry).

- Building the parser, ``kibitz --help`` and ``kibitz bench --help`` import no subcommand
  module, no benchmark and none of the web, Redis or database stack.
- A CPU-bound command (search, perft, arena, games, tables) imports none of that stack
  either, and ``kibitz worker`` no web or database code.
- Every command and benchmark still answers ``--help`` with all of its flags, and the
  registry's help line of each is the one its module gives.

Each check runs a fresh interpreter (``sys.modules`` of this test process holds everything)
and reads its ``sys.modules``; none of them is timed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys

import pytest

from kibitz.server.cli import COMMANDS, build_parser
from kibitz.server.cli.bench import BENCHMARKS

#: Nothing of the server stack: web, Redis, database, the app, the benchmarks.
SERVER_STACK = (
    "aiohttp",
    "sqlalchemy",
    "alembic",
    "asyncpg",
    "aiosqlite",
    "redis",
    "websockets",
    "kibitz.server.node",
    "kibitz.benchmarks.",
)
#: What a worker must not import: web and database code (it does use Redis).
WEB_AND_DATABASE = ("aiohttp", "websockets", "sqlalchemy", "alembic", "asyncpg", "aiosqlite")
SUBCOMMAND_MODULES = tuple(f"kibitz.server.cli.{name}" for name, _ in COMMANDS)

_PROBE = """
import contextlib, io, json, sys
{code}
print(json.dumps(sorted(sys.modules)))
"""


def imported_by(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def matching(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """``modules`` that are one of ``names`` or inside one (a name ending in '.' matches
    the package's submodules only)."""
    return [m for m in modules if any(_inside(m, name) for name in names)]


def _inside(module: str, name: str) -> bool:
    if name.endswith("."):
        return module.startswith(name)
    return module == name or module.startswith(name + ".")


def run_main(*argv: str) -> str:
    """Code that runs ``kibitz ARGV`` in-process, its output and exit swallowed."""
    return (
        "from kibitz.server.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({list(argv)!r})\n"
    )


def test_building_the_parser_loads_no_subcommand() -> None:
    modules = imported_by("from kibitz.server.cli import build_parser\nbuild_parser()")
    assert matching(modules, SERVER_STACK + SUBCOMMAND_MODULES) == []


@pytest.mark.parametrize("argv", [("--help",), ("bench", "--help")])
def test_help_loads_no_server_stack(argv: tuple[str, ...]) -> None:
    modules = imported_by(run_main(*argv))
    assert matching(modules, SERVER_STACK) == []


@pytest.mark.parametrize(
    "argv",
    [
        ("search", "othello", "--depth", "2", "--json"),
        ("perft", "tictactoe", "2"),
        ("games", "--json"),
        ("arena", "tictactoe", "--a", "level:1", "--b", "level:1", "--games", "1", "--depth", "1"),
        ("tables", "info"),
        ("bench", "search", "--help"),
    ],
)
def test_a_cpu_bound_command_loads_no_server_stack(argv: tuple[str, ...]) -> None:
    modules = imported_by(run_main(*argv))
    assert matching(modules, SERVER_STACK[:-1]) == []
    others = [m for m in SUBCOMMAND_MODULES if m != f"kibitz.server.cli.{argv[0]}"]
    assert matching(modules, tuple(others)) == []


def test_a_worker_loads_no_web_or_database_code() -> None:
    code = (
        "from kibitz.server.cli import build_parser\n"
        "args = build_parser().parse_args(['worker', '--redis', 'redis://127.0.0.1:1'])\n"
        "import kibitz.workers.worker  # what each worker process runs\n"
        "assert args.func.__module__ == 'kibitz.server.cli.worker'\n"
    )
    assert matching(imported_by(code), WEB_AND_DATABASE) == []
    assert matching(imported_by("import kibitz.workers.worker"), WEB_AND_DATABASE) == []


def _full_parser(module_name: str, name: str) -> argparse.ArgumentParser:
    """The parser ``module_name.register`` builds for subcommand ``name``."""
    parser = argparse.ArgumentParser(prog="probe")
    subparsers = parser.add_subparsers()
    importlib.import_module(module_name).register(subparsers)
    return subparsers.choices[name]


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def _help(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", *argv, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    ("argv", "module"),
    [((name,), f"kibitz.server.cli.{name}") for name, _ in COMMANDS]
    + [(("bench", name), f"kibitz.benchmarks.{name}") for name, _ in BENCHMARKS],
)
def test_every_command_helps_with_all_its_flags(argv: tuple[str, ...], module: str) -> None:
    text = _help(*argv)
    assert text.startswith(f"usage: kibitz {' '.join(argv)} ")
    missing = [o for o in _options(_full_parser(module, argv[-1])) if o not in text]
    assert missing == []


@pytest.mark.parametrize(("argv", "entries"), [((), COMMANDS), (("bench",), BENCHMARKS)])
def test_help_lists_every_command_with_its_line(
    argv: tuple[str, ...], entries: tuple[tuple[str, str], ...]
) -> None:
    text = " ".join(_help(*argv).split())
    for name, line in entries:
        assert f"{name} {' '.join(line.split())}" in text


@pytest.mark.parametrize(
    ("module", "name", "line"),
    [(f"kibitz.server.cli.{name}", name, line) for name, line in COMMANDS]
    + [(f"kibitz.benchmarks.{name}", name, line) for name, line in BENCHMARKS],
)
def test_the_registry_line_is_the_module_s(module: str, name: str, line: str) -> None:
    parser = argparse.ArgumentParser(prog="probe")
    subparsers = parser.add_subparsers()
    importlib.import_module(module).register(subparsers)
    assert [(a.dest, a.help) for a in subparsers._get_subactions()] == [(name, line)]


def test_an_unknown_command_is_refused_with_the_choices() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "serch"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice: 'serch'" in done.stderr
    assert "'search'" in done.stderr


def test_a_chosen_command_runs_from_the_lazy_parser() -> None:
    args = build_parser().parse_args(["perft", "tictactoe", "1"])
    assert args.command == "perft"
    assert args.func(args) == 0
