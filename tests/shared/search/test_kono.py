"""Level 8 plays Kono perfectly: checked against a retrograde solution of all positions."""

from __future__ import annotations

from itertools import permutations

from kibitz.shared.games.kono import MARKS
from kibitz.shared.games.registry import find_game
from kibitz.shared.search import choose_move

KONO = find_game("kono")
WIN, DRAW, LOSS = 1, 0, -1


def _all_positions() -> list[str]:
    boards = sorted({"".join(p) for p in permutations("bbww.")})
    return [f"{board}:{side}:0" for board in boards for side in "bw"]


def _solve() -> dict[str, int]:
    """Value for the side to move when endless play is a draw (retrograde analysis)."""
    texts = _all_positions()
    states = {t: KONO.parse_position(t) for t in texts}

    def text_of(state: object) -> str:
        cells = "".join(MARKS[c] for c in state.cells)  # type: ignore[attr-defined]
        return f"{cells}:{'bw'[state.to_move]}:0"  # type: ignore[attr-defined]

    children = {
        t: [text_of(KONO.apply(s, m)) for m in KONO.legal_moves(s)] for t, s in states.items()
    }
    value: dict[str, int] = {t: LOSS for t, kids in children.items() if not kids}
    changed = True
    while changed:
        changed = False
        for t, kids in children.items():
            if t in value or not kids:
                continue
            if any(value.get(k) == LOSS for k in kids):
                value[t] = WIN
                changed = True
            elif all(value.get(k) == WIN for k in kids):
                value[t] = LOSS
                changed = True
    return {t: value.get(t, DRAW) for t in texts}


def test_kono_level8_keeps_the_value_of_every_position() -> None:
    values = _solve()
    assert values["wbbw.:b:0"] == DRAW  # the start is a draw with best play
    decided = 0
    for text, value in values.items():
        state = KONO.parse_position(text)
        if not KONO.legal_moves(state):
            continue
        result = choose_move(KONO, state, 8)
        after = KONO.apply(state, result.move)
        cells = "".join(MARKS[c] for c in after.cells)
        child_value = values[f"{cells}:{'bw'[after.to_move]}:0"]
        assert -child_value == value, (text, result.move_text)
        if value != DRAW:
            decided += 1
            assert (result.score > 0) == (value == WIN), text
    assert decided > 0


def test_kono_level8_never_loses_whole_games_against_every_reply() -> None:
    """From the start, as either colour, every opponent line ends in a draw at worst."""
    games = 0

    def walk(state: object, ai: int, depth: int) -> None:
        nonlocal games
        moves = KONO.legal_moves(state)
        if not moves or depth > 24:
            outcome = KONO.outcome(state)
            assert outcome is None or outcome.winner in (None, ai)
            games += 1
            return
        if KONO.to_move(state) == ai:
            walk(KONO.apply(state, choose_move(KONO, state, 8).move), ai, depth + 1)
        else:
            for move in moves:
                walk(KONO.apply(state, move), ai, depth + 1)

    for ai in (0, 1):
        walk(KONO.initial(), ai, 0)
    assert games > 2
