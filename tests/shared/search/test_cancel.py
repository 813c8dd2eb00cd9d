"""A search can be cancelled from another thread, promptly and without I/O."""

from __future__ import annotations

import threading
import time

from kibitz.shared.games import find_game
from kibitz.shared.protocol.jobs import Budget
from kibitz.shared.search import CancelToken, choose_move


def test_cancel_stops_a_long_search_promptly() -> None:
    game = find_game("chess")
    state = game.initial(game.normalize_options({}))
    token = CancelToken()
    timer = threading.Timer(0.3, token.cancel)
    started = time.monotonic()
    timer.start()
    found = choose_move(game, state, level=8, budget=Budget(time_ms=30_000), cancel=token)
    took = time.monotonic() - started
    timer.join()
    assert token.cancelled
    assert took < 2.0, took  # not the 30 s budget
    assert found.move_text in game.legal_move_texts(state)  # still a legal move


def test_a_token_cancelled_before_the_search_stops_it_at_once() -> None:
    game = find_game("othello")
    state = game.initial(game.normalize_options({}))
    token = CancelToken()
    token.cancel()
    started = time.monotonic()
    found = choose_move(game, state, level=8, budget=Budget(time_ms=30_000), cancel=token)
    assert time.monotonic() - started < 1.0
    assert found.move_text in game.legal_move_texts(state)


def test_without_a_cancel_the_search_is_unchanged() -> None:
    game = find_game("tictactoe")
    state = game.initial(game.normalize_options({}))
    plain = choose_move(game, state, level=8, budget=Budget(depth=4), seed=3)
    token = CancelToken()
    hooked = choose_move(game, state, level=8, budget=Budget(depth=4), seed=3, cancel=token)
    assert (plain.move_text, plain.score, plain.nodes) == (
        hooked.move_text,
        hooked.score,
        hooked.nodes,
    )
