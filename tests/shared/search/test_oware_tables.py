"""Oware endgame tables: indexing, agreement with brute force over the game's own rules,
play under the real rules (repetition included), the command, and the searcher's use."""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kibitz.server.cli import main
from kibitz.shared.games.oware import GAME, SEEDS, OwareState
from kibitz.shared.search import Searcher, SearchLimits, SearchOptions, choose_move
from kibitz.shared.search.oware_tables import (
    OwareTable,
    build,
    compositions,
    expected_outcome,
    loaded_table,
    normalized,
    table_path,
)
from kibitz.shared.search.scores import DECISIVE

Key = tuple[tuple[int, ...], tuple[int, int], int]


@cache
def small_table(seeds: int) -> OwareTable:
    return build(seeds)


def fresh(state: OwareState) -> OwareState:
    return state._replace(root=None, line=(), history=())


def position(pits: list[int], stores: tuple[int, int], mover: int) -> OwareState:
    text = (
        ",".join(map(str, pits[:6]))
        + "/"
        + ",".join(map(str, pits[6:]))
        + f"/{stores[0]},{stores[1]}/"
        + "SN"[mover]
    )
    return GAME.parse_position(text)


def brute_force(root: OwareState) -> tuple[dict[Key, OwareState], dict[Key, int], dict[Key, int]]:
    """Win/draw/loss bounds (+1/0/-1 for the mover) of every state reachable from ``root``,
    from the game's own ``legal_moves``, ``apply`` and ``outcome`` (with its 25-seed and
    24-24 ends): the game graph, then rounds of ``lo = max -hi(child)``, ``hi = max
    -lo(child)`` from the widest results an endless game could still have (the mover ends
    with between none and all of the seeds left on the board)."""
    states: dict[Key, OwareState] = {}
    kids: dict[Key, list[Key]] = {}
    final: dict[Key, int] = {}
    stack = [fresh(root)]
    while stack:
        state = stack.pop()
        key = (state.pits, state.stores, state.to_move)
        if key in states:
            continue
        states[key] = state
        outcome = GAME.outcome(state)
        if outcome is not None:
            final[key] = 0 if outcome.winner is None else 1 if outcome.winner == key[2] else -1
            continue
        children = [fresh(GAME.apply(state, move)) for move in GAME.legal_moves(state)]
        kids[key] = [(c.pits, c.stores, c.to_move) for c in children]
        stack.extend(children)

    def result(key: Key, gets: int) -> int:
        pits, stores, mover = key
        mine = stores[mover] + gets
        theirs = stores[1 - mover] + sum(pits) - gets
        return (mine > theirs) - (mine < theirs)

    lo = {k: final.get(k, result(k, 0)) for k in states}
    hi = {k: final.get(k, result(k, sum(k[0]))) for k in states}
    for _ in range(4 * len(states) + 2):  # each round moves a bound, at most 2 per state
        new_lo = {k: max(-hi[c] for c in cs) for k, cs in kids.items()}
        new_hi = {k: max(-lo[c] for c in cs) for k, cs in kids.items()}
        if all(new_lo[k] == lo[k] and new_hi[k] == hi[k] for k in kids):
            break
        lo.update(new_lo)
        hi.update(new_hi)
    return states, lo, hi


def test_index_is_the_rank_of_every_board() -> None:
    table = small_table(5)
    seen = 0
    for n in range(6):
        for i, board in enumerate(compositions(n)):
            assert table.index(board, n) == table.offsets[n] + i
            seen += 1
    assert seen == table.positions == 6188


def test_terminal_and_capture_values() -> None:
    table = small_table(4)
    # The mover has no seed: the opponent keeps the 3 on their side.
    assert table.bounds((0,) * 6 + (1, 2, 0, 0, 0, 0), 3) == (0, 0)
    # The mover cannot feed an empty opponent: they keep their own seeds.
    assert table.bounds((1, 0, 0, 0, 0, 0) + (0,) * 6, 1) == (1, 1)
    # F into a (1 -> 2) would take every opposing seed: a grand slam captures nothing, and
    # North, unable to feed, keeps its 2 seeds.
    assert table.bounds((0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0), 2) == (0, 0)
    # With one more seed in f, F captures 2; North must feed with f; South, unable to feed
    # back, keeps that seed: 3 in all.
    assert table.bounds((0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1), 3) == (3, 3)


@pytest.mark.parametrize("seed", range(3))
def test_table_agrees_with_brute_force(seed: int) -> None:
    """On every state reachable from random roots (4-5 seeds on the board, stores chosen
    around the table's value so all three results occur), the table decides exactly the
    states brute force decides, with the same result."""
    table = small_table(5)
    rng = random.Random(seed)
    decided = checked = 0
    for seeds in (4, 5):
        pits = [0] * 12
        for _ in range(seeds):
            pits[rng.randrange(12)] += 1
        mover = rng.randrange(2)
        lo, hi = table.bounds(normalized(tuple(pits), mover), seeds)
        mine = min(24, max(24 - seeds, 24 - lo + rng.choice((-1, 0, 0, 1))))
        theirs = 48 - seeds - mine
        stores = (mine, theirs) if mover == 0 else (theirs, mine)
        states, blo, bhi = brute_force(position(pits, stores, mover))
        for key, state in states.items():
            seeds = SEEDS - sum(state.stores)
            tlo, thi = table.bounds(normalized(state.pits, state.to_move), seeds)
            ours = expected_outcome(state.stores[state.to_move], tlo, thi)
            theirs = blo[key] if blo[key] == bhi[key] else None
            assert ours == theirs, (GAME.format_position(state), (tlo, thi), blo[key], bhi[key])
            checked += 1
            decided += ours is not None
    assert checked > 20 and decided > 0


def _play_out(state: OwareState, table: OwareTable, side: int, rng: random.Random) -> int:
    """Play to the end under the real rules (history, threefold repetition): ``side``
    plays the table's move, the other side random moves; the result for ``side``."""
    for _ in range(1000):
        moves = GAME.legal_moves(state)
        if not moves:
            break
        if GAME.to_move(state) == side:
            best = table.best(state)
            assert best is not None
            move = best[0]
        else:
            move = rng.choice(moves)
        state = GAME.apply(state, move)
    else:
        raise AssertionError("the game did not end")
    outcome = GAME.outcome(state)
    assert outcome is not None
    return 0 if outcome.winner is None else 1 if outcome.winner == side else -1


def test_table_moves_reach_the_promised_result_under_the_real_rules() -> None:
    table = small_table(6)
    rng = random.Random(5)
    games = 0
    for _ in range(400):
        pits = [0] * 12
        for _ in range(rng.randint(2, 6)):
            pits[rng.randrange(12)] += 1
        mover = rng.randrange(2)
        seeds = sum(pits)
        mine = rng.randint(max(0, 24 - seeds - 2), 24)
        theirs = 48 - seeds - mine
        if theirs > 24 or theirs < 0:
            continue
        stores = (mine, theirs) if mover == 0 else (theirs, mine)
        state = position(pits, stores, mover)
        if not GAME.legal_moves(state):
            continue
        best = table.best(state)
        if best is None or best[1] is None:
            continue
        promised = best[1]
        for _ in range(3):
            # The table's side gets at least the result promised to it, whether it moves
            # first or not, against any (here random) moves.
            assert _play_out(state, table, mover, rng) >= promised
            assert _play_out(state, table, 1 - mover, rng) >= -promised
        games += 1
    assert games > 50


def test_command_builds_and_describes_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tables", "build", "oware", "--seeds", "4", "--data-dir", str(tmp_path),
                 "--json"]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["positions"] == 1820 and report["exact"] + report["bounded"] == 1820
    path = table_path(tmp_path)
    assert path.exists() and report["bytes"] == path.stat().st_size
    loaded = OwareTable.load(path)
    built = small_table(4)
    assert loaded.lo == built.lo and loaded.hi == built.hi and loaded.lo_rank == built.lo_rank
    assert main(["tables", "info", "--data-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["max_seeds"] == 4
    assert main(["tables", "build", "oware", "--seeds", "99", "--data-dir", str(tmp_path)]) == 2
    assert main(["tables", "info", "--data-dir", str(tmp_path / "nothing")]) == 1


def test_solve_command_times_the_othello_solver(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables", "solve", "othello", "--empties", "8", "--positions", "2",
                 "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["positions"] == 2 and all(row["nodes"] > 0 for row in out["rows"])


def _with_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, seeds: int) -> OwareTable:
    small_table(seeds).save(table_path(tmp_path))
    monkeypatch.setenv("KIBITZ_DATA_DIR", str(tmp_path))
    table = loaded_table()
    assert table is not None and table.max_seeds == seeds
    return table


def _decided_position(table: OwareTable, rng: random.Random, seeds: int) -> Any:
    for _ in range(1000):
        pits = [0] * 12
        for _ in range(seeds):
            pits[rng.randrange(12)] += 1
        mover = rng.randrange(2)
        mine = rng.randint(24 - seeds, 24)
        theirs = 48 - seeds - mine
        if theirs > 24:
            continue
        state = position(pits, (mine, theirs) if mover == 0 else (theirs, mine), mover)
        best = table.best(state)
        if GAME.legal_moves(state) and best is not None and best[1] is not None:
            return state
    raise AssertionError("no decided position")


def test_searcher_plays_from_the_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    table = _with_table(monkeypatch, tmp_path, 6)
    rng = random.Random(9)
    for _ in range(10):
        state = _decided_position(table, rng, rng.randint(2, 6))
        best = table.best(state)
        assert best is not None and best[1] is not None
        result = choose_move(GAME, state, 8)
        assert result.exact and result.move == best[0]
        assert (result.score > 0) - (result.score < 0) == best[1]
        seeds = SEEDS - sum(state.stores)
        assert result.depth == seeds and result.nodes == 1
    # Switched off, or on a depth-bound level, the table is not used at the root.
    for options, limits in (
        (SearchOptions(endgame=False), SearchLimits(nodes=5000)),
        (SearchOptions(), SearchLimits(depth=3)),
    ):
        steps = list(Searcher(GAME, options).iterate(state, limits))
        assert steps[0].depth == 1 and steps[0].nodes > 1


def test_searcher_probes_the_table_inside_the_tree(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Above the table's seed count, captures into it end lines with proven results: the
    same node budget proves wins or losses the plain search cannot see."""
    table = _with_table(monkeypatch, tmp_path, 6)
    rng = random.Random(3)
    better = 0
    for _ in range(30):
        pits = [0] * 12
        for _ in range(9):
            pits[rng.randrange(12)] += 1
        state = position(pits, (20, 19), rng.randrange(2))
        if not GAME.legal_moves(state):
            continue
        assert not table.covers(state)
        limits = SearchLimits(nodes=3000)
        with_table = list(Searcher(GAME).iterate(state, limits))
        plain = list(Searcher(GAME, SearchOptions(endgame=False)).iterate(state, limits))
        if abs(with_table[-1].score) >= DECISIVE and abs(plain[-1].score) < DECISIVE:
            better += 1
    assert better >= 2
