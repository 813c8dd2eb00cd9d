"""The AI levels' fixed ratings: what a rated game against a bot level counts as (pure).

An AI seat in a rated game is an opponent of ``level_rating(game, level)`` with the fixed
RD ``ANCHOR_RD`` (about a regular player's: the Glicko-2 RD of someone who plays often
settles near 60); the bot's own rating never moves, so the levels anchor the scale.

The numbers are the searcher's calibration, ``kibitz.shared.search.strength.bot_ratings``
(the one copy): chess on Stockfish 15.1's ``UCI_Elo`` scale, the other games' self-play
ladders pinned at chess's level 1 (docs/search.md, *Calibration* and *Self-play ladders*;
docs/accounts.md, *Ratings*, says how the scales relate).
"""

from __future__ import annotations

from kibitz.shared.search.levels import MAX_LEVEL, MIN_LEVEL
from kibitz.shared.search.strength import bot_ratings

#: The RD an AI seat is rated with (fixed; it never changes).
ANCHOR_RD = 60.0


class AnchorError(ValueError):
    """A game without bot ratings, or a level outside 1-8."""


def level_rating(game: str, level: int) -> int:
    """The fixed rating of the AI at ``level`` in ``game``; AnchorError when there is
    none."""
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise AnchorError(f"level must be {MIN_LEVEL}-{MAX_LEVEL}, not {level!r}")
    ratings = bot_ratings(game)
    if ratings is None:
        raise AnchorError(f"no bot ratings for the game {game!r}")
    return ratings[level - MIN_LEVEL]
