"""International draughts rules: perft, captures, notation, draw rules, and pydraughts as an
independent oracle for the legal move sets."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kibitz.benchmarks.peers import pydraughts_peer
from kibitz.shared.games.base import (
    IllegalMoveError,
    InvalidMoveError,
    InvalidPositionError,
    Outcome,
)
from kibitz.shared.games.draughts import (
    BIT_OF_SQUARE,
    GAME,
    DraughtsMove,
    DraughtsState,
)
from kibitz.shared.games.registry import find_game

PERFT = [9, 81, 658, 4265, 27117, 167140, 1049442, 6483961]
START = (
    "W:W31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50"
    ":B1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20"
)


def _texts(fen: str) -> list[str]:
    return GAME.legal_move_texts(GAME.parse_position(fen))


def _is_king(state: DraughtsState, square: int) -> bool:
    return bool(state.kings & BIT_OF_SQUARE[square])


def _play(choices: list[int], start: DraughtsState | None = None) -> list[DraughtsState]:
    state = start or GAME.initial()
    states = [state]
    for choice in choices:
        moves = GAME.legal_moves(state)
        if not moves:
            break
        state = GAME.apply(state, moves[choice % len(moves)])
        states.append(state)
    return states


def _shuffle_kings(state: DraughtsState, plies: int) -> list[DraughtsState]:
    """Quiet king moves, chosen so no capture arises and no position occurs three times."""
    seen = {state.key: 1}
    states = [state]
    for _ in range(plies):
        for move in GAME.legal_moves(state):
            if move.captured or not _is_king(state, move.src):
                continue
            after = GAME.apply(state, move)
            if seen.get(after.key, 0) >= 2 or any(m.captured for m in GAME._all_moves(after)):
                continue
            break
        else:
            raise AssertionError(f"no quiet king move in {GAME.format_position(state)}")
        state = after
        seen[state.key] = seen.get(state.key, 0) + 1
        states.append(state)
    return states


# -- start position and perft ----------------------------------------------------------


def test_registered_and_start() -> None:
    assert find_game("draughts") is GAME
    assert GAME.players == ("White", "Black")
    start = GAME.initial()
    assert GAME.to_move(start) == 0
    assert GAME.format_position(start) == START
    assert GAME.legal_move_texts(start) == [
        "31-26", "31-27", "32-27", "32-28", "33-28", "33-29", "34-29", "34-30", "35-30",
    ]  # fmt: skip


@pytest.mark.parametrize("depth", range(1, 9))
def test_perft_from_start(depth: int) -> None:
    assert GAME.perft(GAME.initial(), depth) == PERFT[depth - 1]


def test_perft_with_kings_matches_pydraughts() -> None:
    fen = "W:WK46,31,K35,28:BK5,12,19,K24"
    ours = [GAME.perft(GAME.parse_position(fen), d) for d in (1, 2, 3)]
    theirs = [pydraughts_peer.perft(fen, d) for d in (1, 2, 3)]
    assert ours == theirs
    assert ours[2] > 100


def _perft_by_definition(state: DraughtsState, depth: int) -> int:
    """perft straight from legal_moves and apply, draw rules included."""
    if depth == 0:
        return 1
    moves = GAME.legal_moves(state)
    if depth == 1:
        return len(moves)
    return sum(_perft_by_definition(GAME.apply(state, m), depth - 1) for m in moves)


@pytest.mark.parametrize(
    "fen",
    [
        "W:WK46,31,K35,28:BK5,12,19,K24",
        "W:WK46,K47,K48:BK3:E28",  # the 16-move rule cuts the tree at ply 4
        "W:WK46,K50:BK3:E5",
        "B:WK23,K47,K48:BK5:E10",
        # Seen twice already: the third time comes at ply 4 and ends that line.
        "W:W36,K47:BK4,15:H47-42,4-10,42-47,10-4",
    ],
)
def test_fast_perft_agrees_with_the_definition(fen: str) -> None:
    state = GAME.parse_position(fen)
    counts = [GAME.perft(state, depth) for depth in range(5)]
    assert counts == [_perft_by_definition(state, depth) for depth in range(5)]


def test_repetition_ends_lines_in_perft() -> None:
    state = GAME.parse_position("W:W36,K47:BK4,15:H47-42,4-10,42-47,10-4")
    assert GAME.perft(state, 5) == 40625  # 40873 if the repetition were ignored


# -- capture rules -------------------------------------------------------------------------


def test_capture_is_compulsory_and_must_take_the_most() -> None:
    # 32x23 would take one piece; 32x21x12 takes two, so it is the only legal move.
    state = GAME.parse_position("W:W32,45:B17,27,28")
    assert GAME.legal_moves(state) == [DraughtsMove(32, 12, (17, 27), (21, 12))]
    with pytest.raises(IllegalMoveError, match="'45-40'.*capture is compulsory"):
        GAME.parse_move(state, "45-40")
    with pytest.raises(IllegalMoveError, match="'32x23'"):
        GAME.parse_move(state, "32x23")


def test_men_capture_backwards() -> None:
    assert _texts("W:W22:B27") == ["22x31"]


def test_captured_pieces_block_and_cannot_be_jumped_twice() -> None:
    # The king takes five pieces. Were captured pieces lifted at once, it could run on
    # through a vacated square and also take 39 (six pieces, ending on 25, 30 or 34).
    state = GAME.parse_position("W:W15,22,K38:B2,11,18,21,35,39,43,44")
    moves = GAME.legal_moves(state)
    assert {(m.src, m.dst) for m in moves} == {(38, 27), (38, 32), (38, 38)}
    assert all(m.captured == (11, 18, 21, 43, 44) for m in moves)
    # The king may end where it started: its own square is free during the capture.
    after = GAME.play(state, "38x38")
    assert _is_king(after, 38) and after.black == sum(BIT_OF_SQUARE[s] for s in (2, 35, 39))


def test_promotion_only_when_the_move_ends_on_the_far_row() -> None:
    # 14x3x12 passes through 3 on the crowning row but ends on 12: still a man.
    state = GAME.parse_position("W:W14:B8,9,11,19")
    assert GAME.legal_move_texts(state) == ["14x12"]
    after = GAME.play(state, "14x12")
    assert after.white == BIT_OF_SQUARE[12] and not _is_king(after, 12)
    # A step onto the far row crowns; so does a capture ending there.
    assert _is_king(GAME.play(GAME.parse_position("W:W7:B45"), "7-1"), 1)
    assert _is_king(GAME.play(GAME.parse_position("B:W41:B36"), "36x47"), 47)
    facts = GAME.move_facts(GAME.parse_position("W:W7:B45"), DraughtsMove(7, 2))
    assert facts.promotion == 1 and facts.capture == 0


def test_kings_fly_and_capture_at_a_distance() -> None:
    assert len(_texts("W:WK46:B15")) == 9  # the whole long diagonal is open
    assert _texts("W:WK46:B23") == ["46x5", "46x10", "46x14", "46x19"]
    # Two pieces in a row cannot be jumped; the king still flies up to them.
    assert _texts("W:WK46:B23,28") == ["46-32", "46-37", "46-41"]


def test_duplicate_captures_are_one_move_with_every_path_accepted() -> None:
    state = GAME.parse_position("W:WK46,31,35:B10,26,36,41,K49")
    moves = GAME.legal_moves(state)
    assert GAME.legal_move_texts(state) == ["46x5"]
    assert len(moves) == 1 and moves[0].captured == (10, 41)
    # The king takes 41, may stop on any square before 10, then takes 10 and lands on 5:
    # six routes, one move.
    for middle in (37, 32, 28, 23, 19, 14):
        assert GAME.parse_move(state, f"46x{middle}x5") == moves[0]
    with pytest.raises(IllegalMoveError, match="'46x41x5'"):
        GAME.parse_move(state, "46x41x5")


def test_ambiguous_captures_use_the_full_path() -> None:
    state = GAME.parse_position("W:WK1,K5,K24:B7,8,13,20,22,26,37")
    texts = GAME.legal_move_texts(state)
    assert texts == ["1x12x3x25", "1x18x9x25", "1x42", "1x48"]
    with pytest.raises(IllegalMoveError, match="ambiguous.*'1x25'"):
        GAME.parse_move(state, "1x25")
    first, second = GAME.parse_move(state, "1x12x3x25"), GAME.parse_move(state, "1x18x9x25")
    assert first.captured != second.captured and first.dst == second.dst == 25
    assert GAME.parse_move(state, "1x42") == GAME.parse_move(state, "1X42")


def test_move_facts_and_noisy_moves() -> None:
    state = GAME.parse_position("W:WK46:BK23,10")
    (move,) = GAME.legal_moves(state)
    facts = GAME.move_facts(state, move)
    assert facts.capture > GAME.move_facts(GAME.parse_position("W:W32:B27"), move).capture
    assert GAME.noisy_moves(state) == [move]
    assert GAME.noisy_moves(GAME.initial()) == []


def test_no_moves_loses() -> None:
    blocked = GAME.parse_position("W:W46:B37,41")
    assert GAME.legal_moves(blocked) == []
    assert GAME.outcome(blocked) == Outcome(1, "no moves")
    assert GAME.outcome(GAME.parse_position("B:W31:B")) == Outcome(0, "no moves")
    assert GAME.perft(blocked, 2) == 0


# -- draw rules ----------------------------------------------------------------------------


def test_threefold_repetition() -> None:
    state = GAME.parse_position("W:WK47,36:BK4,15")
    cycle = ["47-42", "4-10", "42-47", "10-4"]
    states = [state]
    for text in cycle * 2:
        states.append(GAME.play(states[-1], text))
    assert all(GAME.outcome(s) is None for s in states[:-1])
    assert GAME.outcome(states[-1]) == Outcome(None, "threefold repetition")
    assert GAME.legal_moves(states[-1]) == []
    # The history travels in the position text, so a stored room keeps the count.
    text = GAME.format_position(states[-2])
    assert text.endswith(":H47-42,4-10,42-47,10-4,47-42,4-10,42-47")
    reloaded = GAME.parse_position(text)
    assert reloaded == states[-2]
    assert GAME.outcome(GAME.play(reloaded, "10-4")) == Outcome(None, "threefold repetition")


def test_a_man_move_or_capture_clears_the_history() -> None:
    state = GAME.play(GAME.parse_position("W:WK47,36:BK4,15"), "47-42")
    assert state.king_moves
    assert not GAME.play(state, "15-20").king_moves


def test_twenty_five_king_moves_each() -> None:
    states = _shuffle_kings(GAME.parse_position("W:WK47,36:BK4,15"), 50)
    assert all(GAME.outcome(s) is None for s in states[:-1])
    assert GAME.outcome(states[-1]) == Outcome(None, "25-move king rule")
    for state in states[::7]:
        assert GAME.parse_position(GAME.format_position(state)) == state


def test_three_kings_against_one_sixteen_moves() -> None:
    states = _shuffle_kings(GAME.parse_position("W:WK46,K47,K48:BK3"), 32)
    assert all(GAME.outcome(s) is None for s in states[:-1])
    assert GAME.outcome(states[-1]) == Outcome(None, "16-move endgame rule")
    assert GAME.format_position(states[-1]).endswith(":E32")


def test_two_kings_against_one_five_moves() -> None:
    states = _shuffle_kings(GAME.parse_position("W:WK46,K50:BK3"), 10)
    assert all(GAME.outcome(s) is None for s in states[:-1])
    assert GAME.outcome(states[-1]) == Outcome(None, "5-move endgame rule")


def test_endgame_count_keeps_counting_through_man_moves() -> None:
    # King and two men against a king is in the 16-move class; a man step keeps the count.
    state = GAME.parse_position("W:WK46,31,35:BK3:E4")
    after = GAME.play(state, "35-30")
    assert after.endgame_plies == 5
    assert GAME.format_position(after).endswith(":E5")


def test_endgame_count_restarts_when_the_class_changes() -> None:
    # Three kings against one, ten plies in; Black takes a king: two kings against one,
    # the 5-move class, counted from zero.
    state = GAME.parse_position("B:WK23,K47,K48:BK5:E10")
    after = GAME.play(state, "5x46")
    assert after.endgame_plies == 0 and GAME.outcome(after) is None
    states = _shuffle_kings(after, 10)
    assert GAME.outcome(states[-2]) is None
    assert GAME.outcome(states[-1]) == Outcome(None, "5-move endgame rule")


def test_endgame_count_from_text() -> None:
    state = GAME.parse_position("W:WK46,K47,K48:BK3:E31")
    after = GAME.play(state, "46-41")
    assert GAME.outcome(after) == Outcome(None, "16-move endgame rule")


# -- text forms ------------------------------------------------------------------------------


def test_plain_pdn_fen_parses_in_any_list_order() -> None:
    a = GAME.parse_position("B:B1,K5:W50,31")
    b = GAME.parse_position("B:WK50,31:B1,K5".replace("K50", "50"))
    assert a == b
    assert GAME.format_position(a) == "B:W31,50:B1,K5"
    assert GAME.parse_position("W:W31-50:B1-20") == GAME.initial()
    assert GAME.format_position(GAME.parse_position("W:W 33,31:BK1-2")) == "W:W31,33:BK1,K2"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "W",
        "X:W31:B1",
        "W:W31",
        "W:W31:W32",
        "W:W51:B1",
        "W:W0:B1",
        "W:W31,31:B1",
        "W:W31:B31",
        "W:W3:B20",  # a white man on its crowning row
        "W:W31:B47",  # a black man on its crowning row
        "W:Wx:B1",
        "W:W31:B1:Q5",
        "W:WK46:BK5:H46-41",  # the history does not lead here
        "W:WK46:BK5:Habc",
        "W:WK46:BK5:H",
        "W:W31:B1:E3",  # no endgame class
        "W:W40-31:B1",
        "W:W31-:B1",
    ],
)
def test_bad_positions_are_rejected_naming_the_input(text: str) -> None:
    with pytest.raises(InvalidPositionError) as error:
        GAME.parse_position(text)
    assert repr(text) in str(error.value)


@pytest.mark.parametrize("text", ["", "32", "32-", "a-b", "32-28-23", "51-46", "0-5", "32x", "x"])
def test_unparsable_moves_are_invalid(text: str) -> None:
    with pytest.raises(InvalidMoveError) as error:
        GAME.parse_move(GAME.initial(), text)
    assert repr(text) in str(error.value)


def test_view_layout() -> None:
    view = GAME.view(GAME.parse_position("W:W31,K50:B1,K20"))
    assert view["kind"] == "draughts"
    rows = view["rows"]
    assert len(rows) == 10 and all(len(row) == 10 for row in rows)
    assert rows[0][1] == "b"  # square 1
    assert rows[3][8] == "B"  # square 20
    assert rows[6][1] == "w"  # square 31
    assert rows[9][8] == "W"  # square 50
    assert sum(cell != "" for row in rows for cell in row) == 4


# -- pydraughts as an oracle ---------------------------------------------------------------


def _our_move_set(state: DraughtsState) -> set[pydraughts_peer.MoveKey]:
    return {(m.src, m.dst, frozenset(m.captured)) for m in GAME._all_moves(state)}


def test_legal_move_sets_match_pydraughts_on_random_playouts() -> None:
    rng = random.Random(20261126)
    checked = with_captures = with_kings = 0
    while checked < 2500:
        # Half the playouts start with some men turned into kings, so kings get tested.
        state = GAME.initial()
        if checked % 2:
            crowned = 0
            for square in rng.sample(range(1, 51), 12):
                crowned |= BIT_OF_SQUARE[square]
            text = GAME.format_position(state._replace(kings=crowned & (state.white | state.black)))
            state = GAME.parse_position(text)
        for _ in range(rng.randrange(30, 120)):
            moves = GAME.legal_moves(state)
            if not moves:
                break
            state = GAME.apply(state, rng.choice(moves))
        for _ in range(12):
            ours = _our_move_set(state)
            assert ours == pydraughts_peer.legal_move_sets(GAME.format_position(state)), (
                GAME.format_position(state)
            )
            checked += 1
            with_captures += any(captured for _, _, captured in ours)
            with_kings += bool(state.kings)
            moves = GAME.legal_moves(state)
            if not moves:
                break
            state = GAME.apply(state, rng.choice(moves))
    assert with_captures > 250 and with_kings > 750


# -- properties -----------------------------------------------------------------------------

choices = st.lists(st.integers(min_value=0, max_value=99), max_size=120)


@settings(max_examples=40, deadline=None)
@given(choices)
def test_positions_round_trip_and_hashes_match(picks: list[int]) -> None:
    for state in _play(picks):
        text = GAME.format_position(state)
        assert GAME.parse_position(text) == state
        assert GAME.format_position(GAME.parse_position(text)) == text
        assert GAME.hash_key(state) == GAME.hash_from_scratch(state)


@settings(max_examples=40, deadline=None)
@given(choices, st.lists(st.integers(min_value=1, max_value=50), min_size=6, max_size=6))
def test_apply_never_mutates_and_texts_parse_back(picks: list[int], squares: list[int]) -> None:
    state = _play(picks)[-1]
    before = tuple(state)
    legal = GAME.legal_moves(state)
    texts = set()
    for move in legal:
        text = GAME.format_move(state, move)
        texts.add(text)
        assert GAME.parse_move(state, text) == move
        GAME.apply(state, move)
        assert tuple(state) == before
    a, b, c, d, e, f = squares
    for text in [f"{a}-{b}", f"{c}x{d}", f"{a}x{e}x{f}", f"{d}-{e}"]:
        if text not in texts:
            with pytest.raises(IllegalMoveError) as error:
                GAME.parse_move(state, text)
            assert repr(text) in str(error.value)


kings_positions = st.builds(
    lambda squares, king_flags, side: (squares, king_flags, side),
    st.lists(st.integers(1, 50), min_size=2, max_size=14, unique=True),
    st.lists(st.booleans(), min_size=14, max_size=14),
    st.sampled_from("WB"),
)


@settings(max_examples=60, deadline=None)
@given(kings_positions, choices)
def test_king_positions_hash_and_round_trip(
    spec: tuple[list[int], list[bool], str], picks: list[int]
) -> None:
    squares, king_flags, side = spec
    half = len(squares) // 2
    white = [
        ("K" if king_flags[i] or s <= 5 else "") + str(s) for i, s in enumerate(squares[:half])
    ]
    black = [
        ("K" if king_flags[half + i] or s >= 46 else "") + str(s)
        for i, s in enumerate(squares[half:])
    ]
    start = GAME.parse_position(f"{side}:W{','.join(white)}:B{','.join(black)}")
    for state in _play(picks[:40], start):
        assert GAME.hash_key(state) == GAME.hash_from_scratch(state)
        assert GAME.parse_position(GAME.format_position(state)) == state
