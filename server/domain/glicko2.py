"""Glicko-2, as Mark Glickman's "Example of the Glicko-2 system" defines it (pure).

(A rule of the domain: server/ratings/ applies it to the database.)

A rating is (rating, RD, volatility) on the Glicko scale; the update works on the
Glicko-2 scale (``mu = (rating - 1500) / 173.7178``, ``phi = RD / 173.7178``) and solves
the new volatility with the Illinois variant of regula falsi (the paper's step 5, to
``EPSILON``). kibitz rates each game as its own rating period, applied when the game is
archived; between a player's games the RD grows with the idle time (``grown``): each
``RATING_PERIOD_MS`` without a game adds one period's ``volatility ** 2`` to ``phi ** 2``
(the paper's step 6 for a player who did not compete), capped at ``MAX_RD``. With the
starting volatility 0.06 an RD of 50 is back to 350 after about a year of inactivity
(docs/accounts.md, *Ratings*). A rating is provisional while its RD is above
``PROVISIONAL_RD``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The Glicko-2 scale factor (400 / ln 10).
SCALE = 173.7178
#: The rating everyone starts from, and the centre of the Glicko-2 scale.
CENTRE = 1500.0
#: The system constant: how much the volatility may change in one period.
TAU = 0.5
#: The convergence tolerance of the volatility iteration (the paper's epsilon).
EPSILON = 0.000001
#: No RD is larger: an unknown player's.
MAX_RD = 350.0
#: A rating is provisional while its RD is above this.
PROVISIONAL_RD = 110.0
#: The length of one rating period of inactivity: 8 hours, so that the starting
#: volatility takes an RD of 50 back to 350 in 368 days (1104 periods).
RATING_PERIOD_MS = 8 * 3600 * 1000
#: The bound on the volatility iteration's steps (it converges in well under 100).
MAX_ITERATIONS = 1000


class RatingError(ValueError):
    """A rating or a result the system cannot use (not finite, RD not positive, a score
    outside 0-1)."""


@dataclass(frozen=True, slots=True)
class Rating:
    """A Glicko-2 rating on the Glicko scale: 1500-centred, RD and volatility."""

    rating: float
    rd: float
    volatility: float

    def __post_init__(self) -> None:
        values = (self.rating, self.rd, self.volatility)
        if not all(math.isfinite(value) for value in values):
            raise RatingError(f"a rating's numbers must be finite: {values!r}")
        if self.rd <= 0 or self.volatility <= 0:
            raise RatingError(f"RD and volatility must be positive: {values!r}")


#: A new player's rating.
DEFAULT = Rating(CENTRE, MAX_RD, 0.06)


def _g(phi: float) -> float:
    return 1.0 / math.sqrt(1.0 + 3.0 * phi * phi / (math.pi * math.pi))


def _expected(mu: float, mu_j: float, phi_j: float) -> float:
    return 1.0 / (1.0 + math.exp(-_g(phi_j) * (mu - mu_j)))


def _volatility(phi: float, sigma: float, delta: float, v: float, tau: float) -> float:
    """The paper's step 5: the new volatility, by the Illinois algorithm."""
    a = math.log(sigma * sigma)

    def f(x: float) -> float:
        ex = math.exp(x)
        top = ex * (delta * delta - phi * phi - v - ex)
        return top / (2.0 * (phi * phi + v + ex) ** 2) - (x - a) / (tau * tau)

    big_a = a
    if delta * delta > phi * phi + v:
        big_b = math.log(delta * delta - phi * phi - v)
    else:
        k = 1
        while f(a - k * tau) < 0 and k < MAX_ITERATIONS:
            k += 1
        big_b = a - k * tau
    f_a, f_b = f(big_a), f(big_b)
    for _ in range(MAX_ITERATIONS):
        if abs(big_b - big_a) <= EPSILON:
            break
        big_c = big_a + (big_a - big_b) * f_a / (f_b - f_a)
        f_c = f(big_c)
        if f_c * f_b <= 0:
            big_a, f_a = big_b, f_b
        else:
            f_a /= 2.0
        big_b, f_b = big_c, f_c
    return math.exp(big_a / 2.0)


def update(player: Rating, results: Sequence[tuple[Rating, float]], tau: float = TAU) -> Rating:
    """``player``'s rating after one rating period with ``results``: (opponent's rating
    at the period's start, score 1 / 0.5 / 0). No results: only the RD grows by one
    period. RatingError for a score outside 0-1."""
    for _, score in results:
        if not 0.0 <= score <= 1.0:
            raise RatingError(f"a score is 0 to 1, not {score!r}")
    mu = (player.rating - CENTRE) / SCALE
    phi = player.rd / SCALE
    sigma = player.volatility
    if not results:
        return Rating(player.rating, min(MAX_RD, math.hypot(phi, sigma) * SCALE), sigma)
    opponents = [
        ((o.rating - CENTRE) / SCALE, o.rd / SCALE, score) for o, score in results
    ]  # fmt: skip
    inverse_v = 0.0
    total = 0.0
    for mu_j, phi_j, score in opponents:
        g, e = _g(phi_j), _expected(mu, mu_j, phi_j)
        inverse_v += g * g * e * (1.0 - e)
        total += g * (score - e)
    v = 1.0 / inverse_v
    new_sigma = _volatility(phi, sigma, v * total, v, tau)
    phi_star = math.hypot(phi, new_sigma)
    new_phi = 1.0 / math.sqrt(1.0 / (phi_star * phi_star) + 1.0 / v)
    new_mu = mu + new_phi * new_phi * total
    return Rating(new_mu * SCALE + CENTRE, min(MAX_RD, new_phi * SCALE), new_sigma)


def grown(rating: Rating, elapsed_ms: float) -> Rating:
    """``rating`` after ``elapsed_ms`` without a game: ``phi ** 2`` grows by the
    volatility squared per ``RATING_PERIOD_MS`` (fractions count), RD capped at
    ``MAX_RD``. A negative time (games archived out of order) grows nothing."""
    periods = max(0.0, elapsed_ms) / RATING_PERIOD_MS
    phi = rating.rd / SCALE
    rd = math.sqrt(phi * phi + periods * rating.volatility**2) * SCALE
    return Rating(rating.rating, min(MAX_RD, max(rd, rating.rd)), rating.volatility)


def provisional(rating: Rating) -> bool:
    """Whether the rating is still provisional (its RD above ``PROVISIONAL_RD``)."""
    return rating.rd > PROVISIONAL_RD
