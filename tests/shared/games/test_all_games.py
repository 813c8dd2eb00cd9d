"""Properties every registered game must have, checked on random move sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kibitz.shared.games import Game, GameError, InvalidPositionError, available_games

GAMES = available_games()
#: Characters move notations are made of, so random texts look almost like moves.
ALPHABET = "abcdefghABCDEFGH0123456789-x:@ ="


def _check_unlisted(game: Game[Any, Any], state: Any, text: str, listed: dict[str, Any]) -> None:
    """An unlisted ``text`` is refused with a typed error naming it.

    The one tolerance: a game may read notation case-insensitively, so a text equal to a
    listed one up to case and surrounding spaces may be accepted, as that very move.
    """
    same = [
        move for listed_text, move in listed.items() if listed_text.lower() == text.strip().lower()
    ]
    try:
        move = game.parse_move(state, text)
    except GameError as exc:
        assert repr(text) in str(exc) or text in str(exc)
    else:
        assert same and move == same[0], f"unlisted move text {text!r} was accepted"


@pytest.mark.parametrize("game", GAMES, ids=[g.name for g in GAMES])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_move_sequences_keep_every_invariant(game: Game[Any, Any], data: Any) -> None:
    state = game.initial()
    seen_texts: set[str] = set()
    for _ in range(data.draw(st.integers(0, 60), label="plies")):
        text = game.format_position(state)
        again = game.parse_position(text)
        assert game.format_position(again) == text
        assert game.hash_key(again) == game.hash_key(state)
        assert game.hash_key(state) == game.hash_from_scratch(state)

        moves = game.legal_moves(state)
        assert (moves == []) == (game.outcome(state) is not None)
        listed = [game.format_move(state, m) for m in moves]
        assert len(set(listed)) == len(listed), "two moves share a notation"
        for move, move_text in zip(moves, listed, strict=True):
            assert game.parse_move(state, move_text) == move
        by_text = dict(zip(listed, moves, strict=True))
        for other in sorted(seen_texts - set(listed))[:25]:
            _check_unlisted(game, state, other, by_text)
        junk = data.draw(st.text(ALPHABET, min_size=1, max_size=7), label="junk move")
        if junk.strip() not in listed:
            _check_unlisted(game, state, junk, by_text)
        seen_texts.update(listed)
        if not moves:
            break

        move = moves[data.draw(st.integers(0, len(moves) - 1), label="move")]
        key = game.hash_key(state)
        child = game.apply(state, move)
        assert game.format_position(state) == text and game.hash_key(state) == key
        assert game.to_move(child) in (0, 1)
        state = child


@pytest.mark.parametrize("game", GAMES, ids=[g.name for g in GAMES])
@settings(max_examples=25, deadline=None)
@given(text=st.text(ALPHABET + "/,.;wbWBkKqQ", max_size=30))
def test_garbage_positions_are_typed_errors(game: Game[Any, Any], text: str) -> None:
    try:
        state = game.parse_position(text)
    except InvalidPositionError as exc:
        assert repr(text) in str(exc) or text.strip() in str(exc)
    else:  # a text that happens to be a position must then round-trip
        again = game.format_position(state)
        assert game.format_position(game.parse_position(again)) == again


@pytest.mark.parametrize("game", GAMES, ids=[g.name for g in GAMES])
def test_perft_counts_agree_with_the_generic_walk(game: Game[Any, Any]) -> None:
    state = game.initial()
    for depth in range(0, 4):
        assert game.perft(state, depth) == Game.perft(game, state, depth)
