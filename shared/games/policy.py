"""What the server decides per game, stated by the game: its :class:`GamePolicy`.

Rules say what a move does; policy says how the rest of kibitz treats the game: whether a
draw can be offered at all and how far ahead an AI may think it is and still accept one
(``server/domain/room.py``; ``draws`` in ``GET /api/games``), the unit and
thresholds its analysis is judged in and how long each analysed position is searched
(``server/services/analysis.py``), the standard notation it exports besides JSON
(``server/domain/export.py``), which engine protocol can play it (``workers/engines.py``), and
how its bot levels 1..8 search (``shared/search/levels.py``; retuned by ``kibitz
calibrate``), which speeds its ratings have (``server/domain/speeds.py``), and which
lichess variant it is in the Bot and Board API (``server/botapi/formats.py``).

Each game module sets ``policy = GamePolicy(...)`` on its :class:`Game` class, naming
only what differs from the defaults; a game that sets nothing gets
:data:`DEFAULT_POLICY`. Nothing outside ``shared/games`` keeps a table keyed by a
game's name (``tests/shared/games/test_policy.py`` checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: The engine protocols a worker can hand a game's jobs to (``kibitz worker --engine``).
EngineProtocol = Literal["uci"]


@dataclass(frozen=True, slots=True)
class AnalysisScale:
    """How a game's evaluations are shown and judged.

    ``unit``: what a display unit is (centipawns, discs...); ``per_unit``: display units
    per evaluation unit (the searcher reports "pawns"); ``inaccuracy``/``mistake``/
    ``blunder``: thresholds of a move's loss, in display units; ``cap``: scores are clamped
    to +-cap (proven results too); ``k``: the slope of the winning-chance curve per
    display unit."""

    unit: str
    per_unit: float
    inaccuracy: float
    mistake: float
    blunder: float
    cap: float
    k: float


@dataclass(frozen=True, slots=True)
class Notation:
    """A standard text format of a whole game: its ``?format=`` name and media type."""

    name: str
    media_type: str


#: The analysis scale of a game that states none.
DEFAULT_SCALE = AnalysisScale("points", 1.0, 0.5, 1, 2, 5, 1.0)
#: Search depth per bot level (index 0 = level 1) of a game that states none; level 8
#: searches on the clock, so None.
DEFAULT_LEVEL_DEPTHS: tuple[int | None, ...] = (1, 1, 2, 3, 4, 5, 6, None)
#: The depths of small games, whose whole tree level 8 solves: level 2 searches 2 plies
#: (at 1, like level 1, the self-play ladder found them equal: tic-tac-toe 10.5 / 20).
SMALL_LEVEL_DEPTHS: tuple[int | None, ...] = (1, 2, 2, 3, 3, 4, 6, None)
#: Softmax temperature per bot level, in evaluation units (0 = always the best move).
DEFAULT_LEVEL_TEMPERATURES: tuple[float, ...] = (3.0, 1.5, 0.8, 0.4, 0.2, 0.08, 0.0, 0.0)


@dataclass(frozen=True, slots=True)
class GamePolicy:
    """One game's policy (see the module docstring); every field has a default.

    ``draw_offers``: whether a player may offer a draw (False in a game whose rules have
    no drawn ending, such as misère Nim: the offer is refused with ``offer/not_allowed``);
    ``draw_margin``: how far ahead an AI may think it is (its own last score, in the
    game's evaluation unit: pawns, men, discs, seeds...) and still accept a draw offer;
    ``ai_draw_min_plies``: how many plies must have been played before an AI accepts a
    draw at all (a level opening is no reason to split the point: without it a person
    could draw any bot, and take rating points from a strong one, on move two);
    ``analysis_scale``: see :class:`AnalysisScale`; ``analysis_time_ms``: search time per
    analysed position; ``notation``: the export format besides JSON, if any;
    ``engine_protocol``: the protocol of outside engines that can play the game, if any;
    ``level_depths``/``level_temperatures``: the search depth and softmax temperature of
    each bot level 1..8 (eight entries each); ``level8_time_ms``: level 8's search time;
    ``chess_speeds``: rated at the chess sites' speeds (bullet, blitz, rapid, classical,
    correspondence) rather than "timed" and "correspondence" (server/domain/speeds.py);
    ``lichess_variant``: the key of the lichess variant the game is (``"standard"`` for
    chess), which the Bot and Board API names it by (server/botapi/formats.py; None: a
    game lichess does not have, named by its own id there).
    """

    draw_offers: bool = True
    draw_margin: float = 0.5
    ai_draw_min_plies: int = 40
    analysis_scale: AnalysisScale = DEFAULT_SCALE
    analysis_time_ms: int = 200
    notation: Notation | None = None
    engine_protocol: EngineProtocol | None = None
    level_depths: tuple[int | None, ...] = DEFAULT_LEVEL_DEPTHS
    level8_time_ms: int = 2000
    level_temperatures: tuple[float, ...] = DEFAULT_LEVEL_TEMPERATURES
    chess_speeds: bool = False
    lichess_variant: str | None = None


#: The policy of a game that states none.
DEFAULT_POLICY = GamePolicy()
