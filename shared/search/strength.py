"""The bot levels' measured strength: the published output of ``kibitz calibrate``.

Chess ratings are on the scale of Stockfish 15.1's ``UCI_Elo`` (the anchors of the fit), so
"level 5, about 1400" means about as strong as Stockfish set to ``UCI_Elo`` 1400; other
games' ratings, where measured, are relative (level 1 = 0) and say only how far apart the
levels are. The figures, intervals and game counts are those of docs/search.md
(*Calibration*), with the command that produced them. A level missing from a table has
not been measured, or not closely enough: levels whose 95% interval is wider than +-300 Elo
are left out, since "about 600" would mean little (docs/search.md has all the figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kibitz.shared.search.levels import MAX_LEVEL, MIN_LEVEL

#: ``scale`` of a table whose ratings are anchored to a reference (people can read them).
ABSOLUTE = "absolute"
#: ``scale`` of a table whose ratings are relative to its level 1.
RELATIVE = "relative"


@dataclass(frozen=True, slots=True)
class LevelStrength:
    """One level's fitted Elo with its 95% interval and the games behind it."""

    level: int
    elo: int
    low: int
    high: int
    games: int


@dataclass(frozen=True, slots=True)
class StrengthTable:
    game: str
    scale: str  # ABSOLUTE or RELATIVE
    reference: str  # what the numbers are measured against
    command: str  # how they were measured
    levels: tuple[LevelStrength, ...]


TABLES: dict[str, StrengthTable] = {
    "chess": StrengthTable(
        game="chess",
        scale=ABSOLUTE,
        reference="Stockfish 15.1 UCI_Elo (UCI_LimitStrength, 100 ms a move)",
        command="kibitz calibrate chess --levels 1-8 --ratings 1350,1500,1650,1800,1950,2100 "
        "--fit-only (five runs' results together; docs/search.md)",
        levels=(
            LevelStrength(2, 623, 339, 907, 68),
            LevelStrength(3, 869, 625, 1113, 74),
            LevelStrength(4, 962, 736, 1187, 52),
            LevelStrength(5, 1304, 1146, 1462, 28),
            LevelStrength(6, 1538, 1418, 1659, 40),
            LevelStrength(7, 1698, 1584, 1813, 44),
            LevelStrength(8, 1802, 1664, 1941, 28),
        ),
    ),
}


def level_strength(game: str, level: int) -> LevelStrength | None:
    """The measured strength of ``level`` in ``game``, or None when not measured."""
    table = TABLES.get(game)
    if table is None:
        return None
    return next((entry for entry in table.levels if entry.level == level), None)


def catalog_levels(game: str) -> list[dict[str, Any]]:
    """Every level of ``game`` as the game catalogue (``GET /api/games``) shows it:
    ``{"level", "elo", "elo_95", "games", "scale"}``, with ``elo``, ``elo_95`` and ``scale``
    null for a level that has not been measured."""
    table = TABLES.get(game)
    out: list[dict[str, Any]] = []
    for level in range(MIN_LEVEL, MAX_LEVEL + 1):
        entry = level_strength(game, level)
        if table is None or entry is None:
            out.append({"level": level, "elo": None, "elo_95": None, "games": 0, "scale": None})
            continue
        out.append({
            "level": level, "elo": entry.elo, "elo_95": [entry.low, entry.high],
            "games": entry.games, "scale": table.scale,
        })  # fmt: skip
    return out
