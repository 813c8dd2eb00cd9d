"""``kibitz calibrate``: the joint Elo fit, the schedule's rules, and real bounded runs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kibitz.server.cli import main
from kibitz.server.cli.calibrate import (
    Pairing,
    Tally,
    expected_score,
    fit_ratings,
    is_open,
    next_game,
    parse_levels,
    plan,
    read_results,
    tallies,
)

# -- the fit ---------------------------------------------------------------------------------


def _games(true: dict[str, float], pairs: list[tuple[str, str]], n: int, seed: int):
    """``n`` games per pair drawn from the logistic model (draws as a third outcome)."""
    rng = random.Random(seed)
    out = []
    for a, b in pairs:
        p = expected_score(true[a] - true[b])
        draw = 0.2 * min(p, 1 - p)  # some draws, keeping the expected score p
        for _ in range(n):
            x = rng.random()
            out.append((a, b, 1.0 if x < p - draw else 0.5 if x < p + draw else 0.0))
    return out


def test_fit_recovers_known_ratings_with_anchors() -> None:
    true = {"sf:1350": 1350, "sf:1600": 1600, "L1": 600, "L2": 850, "L3": 1100, "L4": 1400}
    pairs = [("L1", "L2"), ("L2", "L3"), ("L3", "L4"), ("L4", "sf:1350"), ("L4", "sf:1600"),
             ("L3", "sf:1350")]  # fmt: skip
    fitted = fit_ratings(
        _games(true, pairs, 600, seed=7), {"sf:1350": 1350.0, "sf:1600": 1600.0}, prior_weight=0
    )
    for name in ("L1", "L2", "L3", "L4"):
        rating = fitted[name]
        assert rating.elo is not None and rating.low is not None and rating.high is not None
        assert abs(rating.elo - true[name]) < 40, (name, rating)
        assert rating.low < true[name] < rating.high, (name, rating)
        assert rating.high - rating.low < 140  # 600 games per pairing pin it down
    assert fitted["sf:1350"].anchored and fitted["sf:1350"].elo == 1350
    assert fitted["L1"].games == 600 and fitted["L4"].games == 1800


def test_fit_relative_to_level_one_and_exact_expectations() -> None:
    # Points exactly at the model's expectation: the maximum is exactly the true gaps.
    results = []
    for a, b, gap in (("level:1", "level:2", -200.0), ("level:2", "level:3", -150.0)):
        p = expected_score(gap)
        results += [(a, b, p)] * 50  # fractional scores are allowed (a mean of games)
    fitted = fit_ratings(results, {"level:1": 0.0}, prior_weight=0)
    assert fitted["level:1"].elo == 0
    assert fitted["level:2"].elo == pytest.approx(200.0, abs=0.01)
    assert fitted["level:3"].elo == pytest.approx(350.0, abs=0.01)
    # Intervals widen along the ladder: level 3 is placed through level 2.
    width2 = fitted["level:2"].high - fitted["level:2"].low  # type: ignore[operator]
    width3 = fitted["level:3"].high - fitted["level:3"].low  # type: ignore[operator]
    assert width3 > width2 > 0


def test_shutout_stays_finite_and_unconnected_players_are_not_placed() -> None:
    results = [("weak", "sf:1350", 0.0)] * 6 + [("x", "y", 1.0), ("y", "x", 0.5)]
    fitted = fit_ratings(results, {"sf:1350": 1350.0})
    weak = fitted["weak"]
    assert weak.elo is not None and 700 < weak.elo < 1350 - 300
    assert fitted["x"].elo is None and fitted["y"].elo is None
    assert fitted["x"].games == 2 and fitted["x"].points == 1.5
    with pytest.raises(ValueError):
        fit_ratings([("a", "b", 2.0)], {"a": 0.0})


# -- the schedule ------------------------------------------------------------------------------


def test_plan_and_rules_close_lopsided_and_pointless_pairings() -> None:
    pairings = plan([1, 2, 3], [1350, 1500])
    keys = [p.key for p in pairings]
    assert keys[:2] == ["level:1 vs level:2", "level:2 vs level:3"]
    assert keys[2:4] == ["level:3 vs stockfish:1350", "level:3 vs stockfish:1500"]
    counts = {p.key: Tally() for p in pairings}
    # Level 3 shut out by 1350 in two games: 1500 is out of reach for it, and weaker levels
    # do not meet 1350 either; level 3 itself keeps playing 1350 up to the lopsided bound.
    counts["level:3 vs stockfish:1350"] = Tally(2, 0.0, {(0, True), (0, False)})
    by_key = {p.key: p for p in pairings}
    assert is_open(by_key["level:3 vs stockfish:1350"], counts, 10)
    assert not is_open(by_key["level:3 vs stockfish:1500"], counts, 10)
    assert not is_open(by_key["level:2 vs stockfish:1350"], counts, 10)
    assert not is_open(by_key["level:1 vs stockfish:1500"], counts, 10)
    assert is_open(by_key["level:1 vs level:2"], counts, 10)  # the ladder always plays
    counts["level:3 vs stockfish:1350"] = Tally(4, 0.5, set())
    assert not is_open(by_key["level:3 vs stockfish:1350"], counts, 10)  # lopsided: 1/8
    # Round by round: the first open pairing's first missing game.
    chosen = next_game(pairings, counts, 10)
    assert chosen == (Pairing("level:1", "level:2"), 0, True)
    for key in ("level:1 vs level:2", "level:2 vs level:3"):
        counts[key] = Tally(1, 0.0, {(0, True)})
    assert next_game(pairings, counts, 10) == (Pairing("level:1", "level:2"), 0, False)
    for key in ("level:1 vs level:2", "level:2 vs level:3"):
        counts[key] = Tally(2, 0.0, {(0, True), (0, False)})
    # Round 0 done on the ladder and every anchored pairing closed: round 1 comes next.
    assert next_game(pairings, counts, 10) == (Pairing("level:1", "level:2"), 1, True)
    counts["level:3 vs stockfish:1350"] = Tally(2, 1.0, {(0, True), (0, False)})
    assert next_game(pairings, counts, 10) == (Pairing("level:3", "stockfish:1500"), 0, True)


def test_parse_levels() -> None:
    assert parse_levels("1-3,7") == [1, 2, 3, 7]
    for bad in ("0-3", "1-9", "a", "3-1"):
        with pytest.raises(ValueError):
            parse_levels(bad)


# -- real runs -----------------------------------------------------------------------------------


def test_self_play_ladder_is_resumable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "cal.jsonl"
    args = ["calibrate", "tictactoe", "--levels", "1-3", "--games", "2", "--state", str(state)]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    records = read_results(state)
    assert len(records) == 4 and first["games"] == 4 and first["played_now"] == 4
    assert first["scale"] == "relative to level 1"
    assert first["levels"][0]["elo"] == 0 and first["levels"][0]["games"] == 2
    assert all(row["elo"] is not None for row in first["levels"])
    counts = tallies(plan([1, 2, 3], []), records)
    assert {k: t.games for k, t in counts.items()} == {
        "level:1 vs level:2": 2, "level:2 vs level:3": 2,
    }  # fmt: skip
    # A rerun with the same settings has nothing left to play; more games continue the file.
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["played_now"] == 0
    assert main([*args[:-4], "--games", "4", "--state", str(state)]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["played_now"] == 4 and len(read_results(state)) == 8
    # A killed run's partial last line is skipped, not fatal.
    with state.open("a") as handle:
        handle.write('{"a": "level:1", "b"')
    assert main([*args, "--fit-only"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["games"] == 8


def test_chess_against_stockfish_is_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "chess.jsonl"
    code = main(["calibrate", "chess", "--levels", "1", "--ratings", "1350", "--games", "2",
                 "--max-plies", "16", "--peer-ms", "20", "--state", str(state)])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    records = read_results(state)
    assert len(records) == 2 and {r["b"] for r in records} == {"stockfish:1350"}
    assert {r["a_first"] for r in records} == {True, False}
    assert all(r["plies"] <= 16 and r["peer_ms"] == 20 for r in records)
    assert summary["scale"] == "Stockfish 15.1 UCI_Elo"
    level1 = summary["levels"][0]
    assert level1["games"] == 2 and level1["elo"] is not None
    assert level1["low"] < level1["elo"] < level1["high"]
    # Runs under other settings (Stockfish's time) are not mixed into the fit.
    assert main(["calibrate", "chess", "--levels", "1", "--ratings", "1350", "--fit-only",
                 "--max-plies", "16", "--state", str(state)]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["games"] == 0


def test_bad_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["calibrate", "othello", "--levels", "3", "--state", str(tmp_path / "x")]) == 2
    assert main(["calibrate", "nogame"]) == 2
    assert main(["calibrate", "chess", "--ratings", "abc"]) == 2
    assert "kibitz calibrate:" in capsys.readouterr().err
