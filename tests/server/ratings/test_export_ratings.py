"""A rated game's exports (server/domain/export.py): the Event says Rated and its speed,
PGN and PDN carry WhiteElo/BlackElo and WhiteRatingDiff/BlackRatingDiff as python-chess
and pydraughts read them, the JSON export carries the changes; a casual game's exports
are as before."""

from __future__ import annotations

import json
from typing import Any

from draughts.PDN import PDNReader

from kibitz.server.domain import export
from tests.server.domain.test_export import played_record, read_pgn, spec_tags

CHANGES = [
    {"before": 1512, "after": 1498, "change": -14, "rd": 88},
    {"before": 1467, "after": 1481, "change": 14, "rd": 91},
]


def rated(record: dict[str, Any], changes: list[Any] | None) -> dict[str, Any]:
    record["rated"] = True
    record["time_control"] = {"initial_ms": 300_000, "increment_ms": 3_000}  # 5+3: blitz
    record["players"][0].update(account="ann", rating=1512, provisional=False, bot=False)
    record["players"][1].update(account="bob", rating=1467, provisional=True, bot=False)
    record["players"][1]["kind"], record["players"][1]["level"] = "human", None
    if changes is not None:
        record["ratings"] = changes
    return record


def test_pgn_of_a_rated_game() -> None:
    record = rated(played_record("chess", 4, max_plies=10), CHANGES)
    text = export.pgn(record)
    game = read_pgn(text)
    assert game.headers["Event"] == f"Rated blitz game {record['id']}"
    assert game.headers["WhiteElo"] == "1512" and game.headers["BlackElo"] == "1467"
    assert game.headers["WhiteRatingDiff"] == "-14"
    assert game.headers["BlackRatingDiff"] == "+14"
    assert spec_tags(text)["BlackRatingDiff"] == "+14"


def test_before_archiving_only_the_starting_ratings() -> None:
    record = rated(played_record("chess", 5, max_plies=6), None)
    game = read_pgn(export.pgn(record))
    assert (game.headers["WhiteElo"], game.headers["BlackElo"]) == ("1512", "1467")
    assert "WhiteRatingDiff" not in game.headers and "BlackRatingDiff" not in game.headers


def test_an_ai_seat_has_its_anchor_and_no_diff() -> None:
    record = rated(played_record("chess", 6, max_plies=6), [CHANGES[0], None])
    record["players"][1].update(kind="ai", level=5, account=None, rating=1304, bot=True)
    game = read_pgn(export.pgn(record))
    assert game.headers["BlackElo"] == "1304" and "BlackRatingDiff" not in game.headers
    assert game.headers["WhiteRatingDiff"] == "-14"


def test_pdn_of_a_rated_draughts_game() -> None:
    record = rated(played_record("draughts", 2, max_plies=8), CHANGES)
    record["time_control"] = {"days_per_move": 3}
    text = export.pdn(record)
    [read] = PDNReader(pdn_text=text).games
    assert read.tags["Event"] == f"Rated correspondence game {record['id']}"
    assert read.tags["WhiteElo"] == "1512" and read.tags["BlackRatingDiff"] == "+14"
    assert spec_tags(text)["WhiteRatingDiff"] == "-14"


def test_json_export_carries_the_changes() -> None:
    record = rated(played_record("othello", 1, max_plies=8), CHANGES)
    text, _ = export.export(record, "json")
    data = json.loads(text)
    assert data["rated"] is True and data["ratings"] == CHANGES


def test_casual_exports_are_unchanged() -> None:
    record = played_record("chess", 7, max_plies=6)
    record["rated"] = False
    game = read_pgn(export.pgn(record))
    assert game.headers["Event"] == f"kibitz game {record['id']}"
    assert "WhiteElo" not in game.headers
    data = json.loads(export.export(record, "json")[0])
    assert set(data) == {"id", "game", "start", "moves", "result"}
