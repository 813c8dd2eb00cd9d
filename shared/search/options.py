"""Switches for every search technique, so experiments can turn each one off."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

TECHNIQUES = (
    "tt",
    "ordering",
    "killers",
    "history",
    "aspiration",
    "pvs",
    "quiescence",
    "null_move",
    "extensions",
    "lmr",
    "futility",
    "endgame",
    "board",
)


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """Which techniques the searcher uses; all on by default."""

    tt: bool = True
    ordering: bool = True
    killers: bool = True
    history: bool = True
    aspiration: bool = True
    pvs: bool = True
    quiescence: bool = True
    null_move: bool = True
    extensions: bool = True
    #: Late move reductions (quiet moves late in the order searched a ply shallower first).
    lmr: bool = True
    #: Futility pruning near the horizon, where the evaluation gives margins: a node whose
    #: static value beats beta by the margin returns it (reverse futility), and one whose
    #: static value plus the margin cannot reach alpha skips its quiet moves.
    futility: bool = True
    #: Exact endgames (``endgame.py``): the Othello solver at few empties, the Oware
    #: endgame table when one is in the data directory (unbounded depth only).
    endgame: bool = True
    #: Search on the game's faster search form where it has one (``forms.py``: chess runs
    #: on ``chess_board``); off searches the referee's own states.
    board: bool = True
    #: log2 of the number of transposition-table slots.
    tt_size_log2: int = 18
    #: Search every root move with a full window, so each gets an exact score (used by the
    #: randomised low levels; slower).
    all_root_scores: bool = False
    #: Longest capture sequence quiescence follows past the horizon.
    quiescence_depth: int = 12

    def without(self, *techniques: str) -> SearchOptions:
        """A copy with the named techniques switched off."""
        unknown = set(techniques) - set(TECHNIQUES)
        if unknown:
            raise ValueError(
                f"unknown technique {sorted(unknown)[0]!r}; known: {', '.join(TECHNIQUES)}"
            )
        return replace(self, **{name: False for name in techniques})

    @classmethod
    def parse(cls, text: str) -> SearchOptions:
        """Options from ``'tt=off,quiescence=on,tt_size_log2=16'`` (empty: defaults)."""
        values: dict[str, object] = {}
        known = {f.name: f for f in fields(cls)}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or name not in known:
                raise ValueError(
                    f"bad search option {item!r}: expected NAME=on|off with NAME one of "
                    f"{', '.join(known)}"
                )
            value = value.strip().lower()
            if known[name].type in ("bool", bool):
                if value not in ("on", "off", "true", "false", "1", "0"):
                    raise ValueError(f"bad value in {item!r}: expected on or off")
                values[name] = value in ("on", "true", "1")
            else:
                if not value.isdigit():
                    raise ValueError(f"bad value in {item!r}: expected an integer")
                values[name] = int(value)
        return cls(**values)  # type: ignore[arg-type]
