"""Which rating a game counts for (server/ratings/speeds.py) and the AI levels' fixed
ratings (server/ratings/anchors.py)."""

from __future__ import annotations

import pytest

from kibitz.server.domain.anchors import ANCHOR_RD, AnchorError, level_rating
from kibitz.server.domain.speeds import SPEEDS, SpeedError, speed_of
from kibitz.shared.games.registry import GAME_MODULES
from kibitz.shared.search.strength import LADDERS, level_strength


def fischer(initial_s: float, increment_s: float = 0) -> dict[str, int]:
    return {"initial_ms": int(initial_s * 1000), "increment_ms": int(increment_s * 1000)}


@pytest.mark.parametrize(
    ("clock", "speed"),
    [
        (fischer(60), "bullet"),  # 1+0
        (fischer(120, 1), "bullet"),  # 2+1: 160 s
        (fischer(180), "blitz"),  # 3+0: 180 s is no longer bullet
        (fischer(180, 2), "blitz"),  # 3+2: 260 s
        (fischer(300, 3), "blitz"),  # 5+3: 420 s
        (fischer(479), "blitz"),
        (fischer(480), "rapid"),
        (fischer(600), "rapid"),  # 10+0
        (fischer(900, 10), "rapid"),  # 15+10: 1300 s
        (fischer(1499), "rapid"),
        (fischer(1500), "classical"),
        (fischer(1800, 20), "classical"),  # 30+20
        ({"initial_ms": 60_000}, "bullet"),  # no increment given
        ({"days_per_move": 3}, "correspondence"),
        (None, "correspondence"),  # untimed
    ],
)
def test_chess_and_draughts_speeds(clock: dict[str, int] | None, speed: str) -> None:
    assert speed_of("chess", clock) == speed
    assert speed_of("draughts", clock) == speed


def test_other_games_are_timed_or_correspondence() -> None:
    for game in GAME_MODULES:
        if game in ("chess", "draughts"):
            assert SPEEDS[game] == ("bullet", "blitz", "rapid", "classical", "correspondence")
            continue
        assert SPEEDS[game] == ("timed", "correspondence")
        assert speed_of(game, fischer(30)) == "timed"
        assert speed_of(game, fischer(3600, 30)) == "timed"
        assert speed_of(game, {"days_per_move": 1}) == "correspondence"
        assert speed_of(game, None) == "correspondence"


def test_every_speed_given_is_listed() -> None:
    clocks = [fischer(s, i) for s in (15, 120, 400, 1000, 5000) for i in (0, 5)]
    for game in GAME_MODULES:
        for clock in [*clocks, None, {"days_per_move": 7}]:
            assert speed_of(game, clock) in SPEEDS[game]


def test_unknown_games_and_bad_clocks_are_refused() -> None:
    with pytest.raises(SpeedError):
        speed_of("go", None)
    with pytest.raises(SpeedError):
        speed_of("chess", {"increment_ms": 5})
    with pytest.raises(SpeedError):
        speed_of("chess", {"initial_ms": "soon"})


def test_anchors_rise_with_the_level() -> None:
    for game in GAME_MODULES:
        ratings = [level_rating(game, level) for level in range(1, 9)]
        assert ratings == sorted(ratings), game
        assert ratings[-1] > ratings[0], game
    chess = [level_rating("chess", level) for level in range(1, 9)]
    assert all(a < b for a, b in zip(chess, chess[1:], strict=False))  # each level measured apart


def test_anchors_come_from_the_calibration() -> None:
    """Chess levels 2-8 are the published fit (shared/search/strength.py); level 1 its 325;
    the ladders keep their level 1 at chess's level 1 and their measured gaps."""
    for level in range(2, 9):
        measured = level_strength("chess", level)
        assert measured is not None and level_rating("chess", level) == measured.elo
    assert level_rating("chess", 1) == 325
    for game, ladder in LADDERS.items():
        assert len(ladder) == 8 and ladder[0] == 0
        assert level_rating(game, 1) == 325
        assert level_rating(game, 8) - level_rating(game, 1) == ladder[-1]
    assert 0 < ANCHOR_RD < 110  # an anchor is never provisional


def test_bad_levels_and_games_are_refused() -> None:
    for level in (0, 9, -1):
        with pytest.raises(AnchorError):
            level_rating("chess", level)
    with pytest.raises(AnchorError):
        level_rating("go", 3)
