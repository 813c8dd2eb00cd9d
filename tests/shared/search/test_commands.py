"""``kibitz search`` and ``kibitz arena``, the commands built on this package."""

from __future__ import annotations

import json

import pytest

from kibitz.server.cli import main
from kibitz.server.cli.arena import elo_interval, openings
from kibitz.shared.games.registry import find_game


def test_search_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "matches", "--option", "count=22", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"move", "score", "depth", "nodes", "time_ms", "nps", "pv"} <= set(out)
    assert out["move"] == "1"  # leaves 21 = 4k + 1 matches: a lost position for the opponent
    assert out["exact"] is True


def test_search_text_with_switches_off(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["search", "othello", "--depth", "3", "--off", "tt", "--off", "pvs", "--quiet"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("bestmove ")
    assert "depth 3" in out


def test_search_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "chess", "--position", "not a fen"]) == 2
    assert "chess" in capsys.readouterr().err
    assert main(["search", "othello", "--search-option", "warp=on"]) == 2


def test_arena_json_counts_every_game(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["arena", "tictactoe", "--a", "level:8", "--b", "level:1", "--games", "6",
                 "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 6
    assert out["wins"] + out["draws"] + out["losses"] == 6
    assert out["losses"] == 0  # perfect play never loses
    assert len(out["records"]) == 6


def test_arena_against_easyai_peer(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["arena", "matches", "--a", "ours", "--b", "easyai", "--games", "2", "--depth",
                 "6", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 2


def test_elo_interval() -> None:
    elo, low, high = elo_interval(10, 0, 10)
    assert elo == 0 and low < 0 < high
    elo, low, high = elo_interval(15, 5, 0)
    assert 0 < low <= elo <= high
    assert elo_interval(0, 0, 0) == (0.0, 0.0, 0.0)


def test_openings_are_seeded_and_distinct() -> None:
    chess = find_game("chess")
    first = openings(chess, 4, 7, 4)
    again = openings(chess, 4, 7, 4)
    assert [chess.format_position(s) for s in first] == [chess.format_position(s) for s in again]
    assert len({chess.hash_key(s) for s in first}) == 4


def test_arena_against_sunfish_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["arena", "chess", "--a", "level:8", "--b", "sunfish", "--games", "2",
                 "--depth", "1", "--max-plies", "12", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 2
    assert all(r["plies"] <= 12 for r in out["records"])
