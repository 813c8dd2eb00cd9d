"""Matches (misère Nim on one heap): take 1-3, whoever takes the last match loses.

Variant ``double``: at least 10 matches; the first move takes exactly 1, then each take
is from 1 to twice the previous take.

Position text: ``standard:<heap>:<side>`` or ``double:<heap>:<side>:<previous take>``,
with side 1 or 2 (the first or second player). Move text: the number taken.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kibitz.shared.games.base import (
    Game,
    IllegalMoveError,
    InvalidMoveError,
    InvalidOptionError,
    InvalidPositionError,
    Options,
    OptionSpec,
    Outcome,
    Player,
)
from kibitz.shared.games.policy import SMALL_LEVEL_DEPTHS, GamePolicy
from kibitz.shared.games.zobrist import zobrist_keys

_K = zobrist_keys("matches", 4)


class MatchesState(NamedTuple):
    heap: int
    to_move: Player
    variant: str  # "standard" or "double"
    last_take: int  # previous take (double variant; 0 before the first move)


def _max_take(state: MatchesState) -> int:
    if state.variant == "double":
        return 1 if state.last_take == 0 else 2 * state.last_take
    return 3


class Matches(Game[MatchesState, int]):
    name = "matches"
    title = "Matches (misère Nim)"
    players = ("First", "Second")
    small = True
    #: No ending of misère Nim is drawn (someone takes the last match), so no draw can be
    #: offered; the margin would have an AI accept one only when not ahead at all.
    policy = GamePolicy(draw_offers=False, draw_margin=0.0, level_depths=SMALL_LEVEL_DEPTHS)
    option_specs = (
        OptionSpec("count", 20, "matches on the table at the start", minimum=1, maximum=1000),
        OptionSpec("variant", "standard", "standard (take 1-3) or double", ("standard", "double")),
    )

    def initial(self, options: Options | None = None) -> MatchesState:
        opts = self.normalize_options(options)
        count, variant = int(opts["count"]), str(opts["variant"])
        if variant == "double" and count < 10:
            raise InvalidOptionError("the double variant needs at least 10 matches")
        return MatchesState(count, 0, variant, 0)

    def parse_position(self, text: str) -> MatchesState:
        parts = text.strip().split(":")
        bad = InvalidPositionError(
            f"bad matches position {text!r}: expected standard:HEAP:SIDE or double:HEAP:SIDE:LAST"
        )
        if not parts or parts[0] not in ("standard", "double"):
            raise bad
        want = 3 if parts[0] == "standard" else 4
        if len(parts) != want or not all(p.isdigit() for p in parts[1:]):
            raise bad
        heap, side = int(parts[1]), int(parts[2])
        last = int(parts[3]) if want == 4 else 0
        if side not in (1, 2) or heap > 100_000:
            raise bad
        return MatchesState(heap, side - 1, parts[0], last)

    def format_position(self, state: MatchesState) -> str:
        text = f"{state.variant}:{state.heap}:{state.to_move + 1}"
        return text + (f":{state.last_take}" if state.variant == "double" else "")

    def to_move(self, state: MatchesState) -> Player:
        return state.to_move

    def legal_moves(self, state: MatchesState) -> list[int]:
        return list(range(1, min(_max_take(state), state.heap) + 1))

    def apply(self, state: MatchesState, move: int) -> MatchesState:
        # Only the double variant's rule depends on the previous take.
        last = move if state.variant == "double" else 0
        return MatchesState(state.heap - move, 1 - state.to_move, state.variant, last)

    def outcome(self, state: MatchesState) -> Outcome | None:
        if state.heap == 0:
            # The previous player took the last match, so the player to move wins.
            return Outcome(state.to_move, "took the last match", "last-match")
        return None

    def parse_move(self, state: MatchesState, text: str) -> int:
        t = text.strip()
        # One spelling per move ("3", not "03"), as for every game's notation.
        if not t.isdigit() or len(t) > 6 or t != str(int(t)):
            raise InvalidMoveError(f"bad matches move {text!r}: expected a number of matches")
        move = int(t)
        if move not in self.legal_moves(state):
            raise IllegalMoveError(
                f"illegal move {text!r} in {self.format_position(state)}: "
                f"take 1 to {min(_max_take(state), state.heap)}"
            )
        return move

    def format_move(self, state: MatchesState, move: int) -> str:
        return str(move)

    def hash_key(self, state: MatchesState) -> int:
        # Small state: the key is a mix of its fields, recomputed in O(1).
        key = (state.heap * 0x9E3779B97F4A7C15 + state.last_take * 0xC2B2AE3D27D4EB4F) & (2**64 - 1)
        key ^= _K[0] if state.to_move else 0
        return key ^ (_K[1] if state.variant == "double" else 0)

    def view(self, state: MatchesState) -> dict[str, Any]:
        return {
            "kind": "heap",
            "heap": state.heap,
            "max_take": min(_max_take(state), state.heap),
            "variant": state.variant,
            "last_take": state.last_take,
        }


GAME = Matches()
