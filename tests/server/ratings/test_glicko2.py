"""Our Glicko-2 (server/ratings/glicko2.py) against Glickman's worked example and
against an independent implementation, the ``glicko2`` package from PyPI."""

from __future__ import annotations

import math
import random

import glicko2 as pypi_glicko2
import pytest

from kibitz.server.domain.glicko2 import (
    DEFAULT,
    MAX_RD,
    RATING_PERIOD_MS,
    SCALE,
    Rating,
    RatingError,
    grown,
    provisional,
    update,
)

PERIODS = 1000
DAY_MS = 24 * 3600 * 1000


def test_glickmans_worked_example() -> None:
    """ "Example of the Glicko-2 system": a 1500 / 200 / 0.06 player beats a 1400 / 30,
    loses to a 1550 / 100 and to a 1700 / 300 (tau 0.5): mu' = -0.2069, phi' = 0.8722,
    sigma' = 0.05999, that is 1464.06 / 151.52 / 0.05999."""
    player = Rating(1500, 200, 0.06)
    results = [(Rating(1400, 30, 0.06), 1.0), (Rating(1550, 100, 0.06), 0.0)]
    results.append((Rating(1700, 300, 0.06), 0.0))
    after = update(player, results, tau=0.5)
    assert round((after.rating - 1500) / SCALE, 4) == -0.2069
    assert round(after.rd / SCALE, 4) == 0.8722
    assert abs(after.volatility - 0.05999) < 0.00001  # the paper shows 5 decimals, cut
    assert abs(after.rating - 1464.06) < 0.01
    assert abs(after.rd - 151.52) < 0.01


class CorrectedPlayer(pypi_glicko2.Player):  # type: ignore[misc]
    """The package's player with its one slip mended: its volatility function ``_f``
    uses the rating (mu) where the paper's step 5 has the RD (phi)."""

    def _f(self, x: float, delta: float, v: float, a: float) -> float:
        ex = math.exp(x)
        phi2 = (self.rd / SCALE) ** 2
        top = ex * (delta**2 - phi2 - v - ex)
        return float(top / (2 * (phi2 + v + ex) ** 2) - (x - a) / self._tau**2)


def random_period(rng: random.Random) -> tuple[Rating, list[tuple[Rating, float]]]:
    player = Rating(rng.uniform(800, 2500), rng.uniform(30, 330), rng.uniform(0.04, 0.09))
    results = [
        (Rating(rng.uniform(800, 2500), rng.uniform(30, 350), 0.06), rng.choice((0, 0.5, 1)))
        for _ in range(rng.randint(1, 8))
    ]
    return player, results


def theirs(cls: type[pypi_glicko2.Player], player: Rating, results: list[tuple[Rating, float]]):
    other = cls(player.rating, player.rd, player.volatility)
    other.update_player(
        [o.rating for o, _ in results], [o.rd for o, _ in results], [s for _, s in results]
    )
    return other


def test_agrees_with_the_pypi_package_on_a_thousand_random_periods() -> None:
    """Seeded periods of 1-8 games each: the package (its volatility slip mended) gives
    the same numbers to 1e-9; as published, within 0.1 rating point, 0.05 RD and 0.001
    volatility (only its volatility step differs)."""
    rng = random.Random(2021)
    worst_published = [0.0, 0.0, 0.0]
    for _ in range(PERIODS):
        player, results = random_period(rng)
        ours = update(player, results)
        mended = theirs(CorrectedPlayer, player, results)
        assert ours.rating == pytest.approx(mended.rating, abs=1e-9)
        assert ours.rd == pytest.approx(mended.rd, abs=1e-9)
        assert ours.volatility == pytest.approx(mended.vol, abs=1e-9)
        published = theirs(pypi_glicko2.Player, player, results)
        pairs = [(ours.rating, published.rating), (ours.rd, published.rd)]
        pairs.append((ours.volatility, published.vol))
        for index, (a, b) in enumerate(pairs):
            worst_published[index] = max(worst_published[index], abs(a - b))
    assert worst_published[0] < 0.1 and worst_published[1] < 0.05
    assert worst_published[2] < 0.001


def test_no_games_grows_the_rd_only() -> None:
    player = Rating(1700, 80, 0.06)
    after = update(player, [])
    assert after.rating == 1700 and after.volatility == 0.06
    assert after.rd == pytest.approx(math.hypot(80 / SCALE, 0.06) * SCALE)
    assert update(DEFAULT, []).rd == MAX_RD


def test_rd_grows_with_inactivity_back_to_350_in_about_a_year() -> None:
    settled = Rating(1800, 50, 0.06)
    assert grown(settled, 0) == settled
    assert grown(settled, -DAY_MS) == settled  # archived out of order: no growth
    month = grown(settled, 30 * DAY_MS).rd
    half_year = grown(settled, 182 * DAY_MS).rd
    assert 50 < month < half_year < MAX_RD
    assert grown(settled, 340 * DAY_MS).rd < MAX_RD <= grown(settled, 370 * DAY_MS).rd + 1e-9
    assert grown(settled, 3650 * DAY_MS).rd == MAX_RD  # capped
    one = grown(settled, RATING_PERIOD_MS)
    assert one.rd == pytest.approx(math.hypot(50 / SCALE, 0.06) * SCALE)
    assert one.rating == 1800 and one.volatility == 0.06


def test_provisional_while_rd_above_110() -> None:
    assert provisional(DEFAULT)
    assert provisional(Rating(1500, 110.01, 0.06))
    assert not provisional(Rating(1500, 110, 0.06))


def test_bad_input_is_refused() -> None:
    with pytest.raises(RatingError):
        Rating(1500, 0, 0.06)
    with pytest.raises(RatingError):
        Rating(float("nan"), 100, 0.06)
    with pytest.raises(RatingError):
        update(DEFAULT, [(DEFAULT, 2.0)])


def test_a_win_raises_a_loss_lowers_a_draw_between_equals_keeps() -> None:
    a, b = Rating(1500, 100, 0.06), Rating(1500, 100, 0.06)
    assert update(a, [(b, 1.0)]).rating > 1500 > update(a, [(b, 0.0)]).rating
    assert update(a, [(b, 0.5)]).rating == pytest.approx(1500)
    assert update(DEFAULT, [(b, 1.0)]).rd < MAX_RD
