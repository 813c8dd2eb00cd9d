"""Per-game policy lives on the game: its values, and no game-name tables outside it.

The frozen tables below are the values the server held in its own dictionaries (the draw
margin in ``server/domain/room.py``, the analysis scales and times in
``server/services/analysis.py``,
the export notations in ``server/domain/export.py``, the UCI games in ``workers/engines.py``)
before they moved onto each game's :class:`~kibitz.shared.games.policy.GamePolicy`.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path
from typing import Any

import pytest

from kibitz.shared.games import GAME_MODULES, Game, available_games, find_game
from kibitz.shared.games.policy import DEFAULT_POLICY, AnalysisScale, GamePolicy, Notation
from kibitz.shared.games.registry import policy_for
from kibitz.shared.search.levels import budget_for_level, temperature_for_level
from kibitz.workers.engines import parse_engine_specs, uci_games

ROOT = Path(__file__).resolve().parents[3]

#: draw margin, analysis (unit, per_unit, inaccuracy, mistake, blunder, cap, k), analysis
#: time (ms), export notation and its media type, engine protocol.
FROZEN: dict[str, tuple[Any, ...]] = {
    "chess": (
        0.5,
        ("centipawns", 100.0, 50, 100, 300, 1000, 0.004),
        400,
        ("pgn", "application/x-chess-pgn"),
        "uci",
    ),
    "draughts": (
        0.5,
        ("men", 1.0, 0.3, 0.7, 1.5, 6, 0.9),
        300,
        ("pdn", "application/x-draughts-pdn"),
        None,
    ),
    "othello": (2.0, ("discs", 1.0, 3, 6, 12, 64, 0.12), 300, None, None),
    "oware": (1.0, ("seeds", 1.0, 1, 2, 4, 24, 0.35), 300, None, None),
    "kono": (0.5, ("points", 1.0, 0.5, 1, 2, 5, 1.0), 200, None, None),
    "tictactoe": (0.0, ("points", 1.0, 0.5, 1, 2, 5, 1.0), 200, None, None),
    "matches": (0.0, ("points", 1.0, 0.5, 1, 2, 5, 1.0), 200, None, None),
}
#: What a game that states nothing gets (the server's defaults for an unlisted game).
FROZEN_DEFAULT = (0.5, ("points", 1.0, 0.5, 1, 2, 5, 1.0), 200, None, None)


#: Bot levels 1..8 (``shared/search/levels.py`` before they moved): depth per level,
#: level 8's time (ms), softmax temperature per level.
SMALL_DEPTHS = (1, 2, 2, 3, 3, 4, 6, None)
USUAL_TEMPERATURES = (3.0, 1.5, 0.8, 0.4, 0.2, 0.08, 0.0, 0.0)
FROZEN_LEVELS: dict[str, tuple[Any, ...]] = {
    "tictactoe": (SMALL_DEPTHS, 2000, USUAL_TEMPERATURES),
    "matches": (SMALL_DEPTHS, 2000, USUAL_TEMPERATURES),
    "kono": (SMALL_DEPTHS, 2000, USUAL_TEMPERATURES),
    "oware": ((1, 2, 3, 4, 5, 6, 8, None), 1500, USUAL_TEMPERATURES),
    "othello": ((1, 2, 2, 3, 4, 5, 6, None), 2000, (3.0, 1.5, 0.5, 0.4, 0.2, 0.08, 0.0, 0.0)),
    "draughts": ((1, 1, 2, 3, 4, 5, 6, None), 2000, USUAL_TEMPERATURES),
    "chess": ((1, 2, 2, 2, 3, 4, 5, None), 2500, (0.7, 0.7, 0.45, 0.3, 0.2, 0.08, 0.0, 0.0)),
}
FROZEN_DEFAULT_LEVELS = ((1, 1, 2, 3, 4, 5, 6, None), 2000, USUAL_TEMPERATURES)
#: Every level's time cap (ms) below level 8, the same in every game.
LEVEL_TIMES = (500, 600, 700, 1000, 1000, 1200, 1500)


def _flat(policy: GamePolicy) -> tuple[Any, ...]:
    scale = policy.analysis_scale
    notation = policy.notation
    return (
        policy.draw_margin,
        (
            scale.unit,
            scale.per_unit,
            scale.inaccuracy,
            scale.mistake,
            scale.blunder,
            scale.cap,
            scale.k,
        ),
        policy.analysis_time_ms,
        None if notation is None else (notation.name, notation.media_type),
        policy.engine_protocol,
    )


def _typed(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """Values with their Python types, so 1000 and 1000.0 differ (JSON writes them so)."""
    if isinstance(values, tuple):
        return tuple(_typed(value) for value in values)
    return (type(values).__name__, values)


def test_every_registered_game_is_in_the_frozen_table() -> None:
    assert sorted(FROZEN) == sorted(GAME_MODULES)


@pytest.mark.parametrize("name", sorted(FROZEN))
def test_policy_has_the_values_the_server_used(name: str) -> None:
    policy = find_game(name).policy
    assert _typed(_flat(policy)) == _typed(FROZEN[name])
    assert policy_for(name) is policy


def _levels(policy: GamePolicy) -> tuple[Any, ...]:
    return (policy.level_depths, policy.level8_time_ms, policy.level_temperatures)


@pytest.mark.parametrize("name", sorted(FROZEN_LEVELS))
def test_bot_levels_are_on_the_game(name: str) -> None:
    assert _typed(_levels(find_game(name).policy)) == _typed(FROZEN_LEVELS[name])


@pytest.mark.parametrize("name", [*sorted(FROZEN_LEVELS), "no-such-game"])
def test_the_searcher_levels_are_as_before(name: str) -> None:
    depths, level8_ms, temperatures = FROZEN_LEVELS.get(name, FROZEN_DEFAULT_LEVELS)
    budgets = [budget_for_level(name, level) for level in range(1, 9)]
    assert tuple(budget.depth for budget in budgets) == depths
    assert tuple(budget.time_ms for budget in budgets) == (*LEVEL_TIMES, level8_ms)
    assert tuple(temperature_for_level(level, name) for level in range(1, 9)) == temperatures
    assert tuple(temperature_for_level(level) for level in range(1, 9)) == USUAL_TEMPERATURES


def test_a_game_that_states_nothing_has_the_default_policy() -> None:
    class Bare(Game[int, int]):
        name = "bare"

    assert Bare().policy is DEFAULT_POLICY
    assert _typed(_flat(DEFAULT_POLICY)) == _typed(FROZEN_DEFAULT)
    assert _typed(_levels(DEFAULT_POLICY)) == _typed(FROZEN_DEFAULT_LEVELS)
    assert policy_for("no-such-game") is DEFAULT_POLICY


def test_policy_is_frozen() -> None:
    policy = find_game("chess").policy
    with pytest.raises(AttributeError):
        policy.draw_margin = 9.0  # type: ignore[misc]
    assert isinstance(policy.analysis_scale, AnalysisScale)
    assert isinstance(policy.notation, Notation)


# -- no game-name tables outside the games -----------------------------------------------------

#: Folders whose code must not decide anything by a game's name.
SCANNED = ("server", "workers", "client", "shared/search")
#: Left out, each for a reason:
NOT_SCANNED = frozenset(
    {
        # the CLI's peer adapters: one per peer library, not per game of ours
        "server/cli/arena.py",
        "server/cli/calibrate.py",
        "server/cli/tables.py",
        # search code registered per game: an evaluation module, a search form, an exact
        # solver (Othello endgames, Oware tables) and calibration's measured strengths
        # are the searcher's, and a game module cannot point up at them
        "shared/search/evaluation/__init__.py",
        "shared/search/forms.py",
        "shared/search/endgame.py",
        "shared/search/strength.py",
    }
)
#: (file, name) pairs where a game's name in quotes is not policy (an example, a default
#: argument of a command). Empty today: keep it short.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def _game_name_literals(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string literal in ``path`` that is exactly a game's name."""
    found = []
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):  # an f-string's pieces, say
            continue
        if isinstance(value, str) and value in names:
            found.append((token.start[0], value))
    return found


def test_no_game_name_is_a_table_key_or_condition_outside_the_games() -> None:
    names = {game.name for game in available_games()}
    offenders = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in NOT_SCANNED:
                continue
            for line, name in _game_name_literals(path, names):
                if (relative, name) not in ALLOWED:
                    offenders.append(f"{relative}:{line}: {name!r}")
    assert not offenders, (
        "per-game facts belong on the game's policy (shared/games/policy.py), not in a "
        "table keyed by its name:\n" + "\n".join(offenders)
    )


def test_the_scan_sees_a_game_name_literal(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('MARGIN = {"oware": 1.0}\nif game == \'chess\':\n    pass\n"""chess"""\n')
    found = _game_name_literals(sample, {"oware", "chess"})
    assert found == [(1, "oware"), (2, "chess"), (4, "chess")]


def test_engine_support_follows_the_policy() -> None:
    assert uci_games() == ["chess"]
    assert parse_engine_specs(["chess=/usr/games/stockfish"]) == {"chess": "/usr/games/stockfish"}
    for spec in ("oware=/bin/engine", "nosuchgame=/bin/engine"):
        with pytest.raises(ValueError, match=f"--engine '{spec}': UCI engines play chess only"):
            parse_engine_specs([spec])
