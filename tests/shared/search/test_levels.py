"""Bot levels (``shared/search/levels.py``): budgets and temperatures grow stronger with the
level, and a game's own temperatures (chess and Othello, retuned by calibration) stay within the
rule."""

from __future__ import annotations

import pytest

from kibitz.shared.search.levels import budget_for_level, temperature_for_level


@pytest.mark.parametrize("game", ["chess", "othello", "draughts", "oware", "tictactoe"])
def test_levels_get_stronger_step_by_step(game: str) -> None:
    temperatures = [temperature_for_level(level, game) for level in range(1, 9)]
    assert temperatures == sorted(temperatures, reverse=True)
    assert temperatures[6] == temperatures[7] == 0.0  # levels 7 and 8 play the best move
    depths = [budget_for_level(game, level).depth for level in range(1, 8)]
    assert all(d is not None for d in depths) and depths == sorted(depths)  # type: ignore[type-var]
    assert budget_for_level(game, 8).depth is None  # level 8 searches on the clock


def test_retuned_games_have_their_own_temperatures_and_others_keep_theirs() -> None:
    chess = [temperature_for_level(level, "chess") for level in (1, 2, 5, 6)]
    assert chess == [0.7, 0.7, 0.2, 0.08]
    assert temperature_for_level(3, "othello") == 0.5  # Othello's retune
    assert temperature_for_level(3, "draughts") == temperature_for_level(3) == 0.8
    with pytest.raises(ValueError, match="level"):
        temperature_for_level(0, "chess")
