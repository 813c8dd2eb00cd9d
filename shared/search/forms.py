"""Search forms: a faster game with the same rules that the searcher may run on instead.

A game's states are made for refereeing (chess keeps python-chess boards, which are
careful and general). Where that costs most of a node, a *search form* gives the searcher
another ``Game`` with the same rules, positions and keys, plus the way in and out:

- ``game``: the search game (the searcher uses its moves, states and evaluation);
- ``accepts(game)``: whether this form stands for that game object;
- ``enter(state)``: the search game's state for the referee's state (the root);
- ``move_out(move)`` / ``move_in(move)``: a search move as the referee's move, and back.

The searcher enters once per search and maps every move it reports (best move, principal
variation, root scores) back out, so callers only ever see the referee's moves, and the
root's legal moves are the referee's. Hash keys must be the referee's keys, so the game's
``repetition_keys`` apply inside the search. ``SearchOptions.board`` switches forms off.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from kibitz.shared.games.base import Game

#: Game id -> module defining ``FORM``.
FORM_MODULES = {"chess": "kibitz.shared.search.chess_board"}


class SearchForm(Protocol):
    game: Game[Any, Any]

    def accepts(self, game: Game[Any, Any]) -> bool: ...

    def enter(self, state: Any) -> Any: ...

    def move_out(self, move: Any) -> Any: ...

    def move_in(self, move: Any) -> Any: ...


def form_for(game: Game[Any, Any]) -> SearchForm | None:
    """The search form of ``game``, or None when it is searched as it is."""
    module_name = FORM_MODULES.get(game.name)
    if module_name is None:
        return None
    form: SearchForm = importlib.import_module(module_name).FORM
    return form if form.accepts(game) else None
