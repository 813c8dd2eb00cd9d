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
    ``{"level", "elo", "elo_95", "games", "scale", "rating"}``, with ``elo``, ``elo_95``
    and ``scale`` null for a level that has not been measured; ``rating`` is the level's
    fixed rating in rated play (:func:`bot_ratings`, on the kibitz rating scale: chess
    anchored to Stockfish's ``UCI_Elo``, the other games' level 1 pinned at chess's level
    1), null only for a game with no ratings."""
    table = TABLES.get(game)
    ratings = bot_ratings(game)
    out: list[dict[str, Any]] = []
    for level in range(MIN_LEVEL, MAX_LEVEL + 1):
        entry = level_strength(game, level)
        rating = None if ratings is None else ratings[level - MIN_LEVEL]
        if table is None or entry is None:
            out.append({
                "level": level, "elo": None, "elo_95": None, "games": 0, "scale": None,
                "rating": rating,
            })  # fmt: skip
            continue
        out.append({
            "level": level, "elo": entry.elo, "elo_95": [entry.low, entry.high],
            "games": entry.games, "scale": table.scale, "rating": rating,
        })  # fmt: skip
    return out


#: Chess level 1's rating on Stockfish's scale: the same fit as the table above, left out
#: of it for its wide interval (docs/search.md, *Calibration*).
CHESS_LEVEL_1 = 325
#: Where the self-play ladders' level 1 is pinned for rated play: chess's level 1, since
#: every game's level 1 is the same setting (a 1-ply search picking moves by a softmax:
#: a beginner who blunders). Only the gaps between levels are measured.
LADDER_BASE = CHESS_LEVEL_1
#: Self-play ladders, levels 1-8, relative to level 1 (docs/search.md, *Self-play
#: ladders*), refitted with the calibration's own fit (``kibitz calibrate``'s
#: ``fit_ratings``: logistic Elo, one virtual draw of weight 0.5 per pairing) and rounded
#: to 5. Draughts' step 7-8 was not measured: level 8 is taken as level 7.
LADDERS: dict[str, tuple[int, ...]] = {
    "tictactoe": (0, 365, 430, 555, 575, 590, 590, 590),
    "matches": (0, 235, 375, 520, 520, 520, 520, 520),
    "kono": (0, 35, 35, 35, 35, 35, 35, 35),
    "othello": (0, 100, 330, 675, 900, 1250, 1595, 1945),
    "oware": (0, 350, 695, 1045, 1390, 1570, 1640, 2085),
    "draughts": (0, 180, 530, 975, 1115, 1180, 1320, 1320),
}


def bot_ratings(game: str) -> tuple[int, ...] | None:
    """The fixed rating of each level 1..8 of ``game`` in rated play, or None when the
    game has none: an absolute table's fit (its level 1 at ``CHESS_LEVEL_1``), else the
    self-play ladder pinned at ``LADDER_BASE``."""
    table = TABLES.get(game)
    if table is not None and table.scale == ABSOLUTE:
        fitted = {entry.level: entry.elo for entry in table.levels}
        ratings = [fitted.get(level) for level in range(MIN_LEVEL, MAX_LEVEL + 1)]
        ratings[0] = ratings[0] if ratings[0] is not None else CHESS_LEVEL_1
        if any(rating is None for rating in ratings):
            return None
        return tuple(rating for rating in ratings if rating is not None)
    ladder = LADDERS.get(game)
    return None if ladder is None else tuple(LADDER_BASE + step for step in ladder)
