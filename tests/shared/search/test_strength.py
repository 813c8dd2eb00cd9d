"""The published strength table (``shared/search/strength.py``) and its catalogue form."""

from __future__ import annotations

from kibitz.shared.games import available_games
from kibitz.shared.search.levels import MAX_LEVEL, MIN_LEVEL
from kibitz.shared.search.strength import (
    ABSOLUTE,
    RELATIVE,
    TABLES,
    bot_ratings,
    catalog_levels,
    level_strength,
)


def test_tables_are_consistent() -> None:
    games = {game.name for game in available_games()}
    assert "chess" in TABLES and TABLES["chess"].scale == ABSOLUTE
    for name, table in TABLES.items():
        assert name == table.game and name in games
        assert table.scale in (ABSOLUTE, RELATIVE)
        assert table.command.startswith(f"kibitz calibrate {name}")
        levels = [entry.level for entry in table.levels]
        assert levels == sorted(set(levels)) and MIN_LEVEL <= levels[0] <= levels[-1] <= MAX_LEVEL
        for entry in table.levels:
            assert entry.low <= entry.elo <= entry.high and entry.games > 0
        if table.scale == RELATIVE:
            assert table.levels[0].level == 1 and table.levels[0].elo == 0
        # Stronger levels are rated higher.
        elos = [entry.elo for entry in table.levels]
        assert elos == sorted(elos), (name, elos)


def test_catalog_levels_cover_every_level() -> None:
    chess = catalog_levels("chess")
    assert [entry["level"] for entry in chess] == list(range(MIN_LEVEL, MAX_LEVEL + 1))
    measured = [entry for entry in chess if entry["elo"] is not None]
    assert measured and all(entry["scale"] == ABSOLUTE for entry in measured)
    for entry in measured:
        found = level_strength("chess", entry["level"])
        assert found is not None
        assert entry["elo_95"] == [found.low, found.high] and entry["games"] == found.games
    unmeasured = catalog_levels("no-such-game")
    assert all(e["elo"] is None and e["scale"] is None and e["games"] == 0 for e in unmeasured)
    assert level_strength("no-such-game", 1) is None


def test_catalog_levels_carry_the_rated_play_rating_of_every_game() -> None:
    """Each level of every game carries ``rating``, its fixed rating in rated play (the
    numbers the web client shows as "about 1300"): chess on Stockfish's scale, level 1
    included; every other game's level 1 pinned at chess's level 1."""
    chess_one = catalog_levels("chess")[0]["rating"]
    for game in available_games():
        levels = catalog_levels(game.name)
        ratings = [entry["rating"] for entry in levels]
        assert ratings == list(bot_ratings(game.name) or ()), game.name
        assert all(isinstance(r, int) for r in ratings) and len(ratings) == MAX_LEVEL
        assert ratings == sorted(ratings), (game.name, ratings)
        assert ratings[0] == chess_one
    chess = catalog_levels("chess")
    for entry in chess:
        if entry["elo"] is not None:
            assert entry["rating"] == entry["elo"]
    assert all(e["rating"] is None for e in catalog_levels("no-such-game"))
