"""``kibitz bot`` against a real server: the promised outcomes and its JSON line."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from kibitz.shared.protocol.client_in import player_id


def bot(url: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "bot", url, *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr
    return json.loads(lines[-1])


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_bot_never_beats_the_strongest_tictactoe_ai(live_server, seed: int) -> None:
    report = bot(live_server.http_url, "--game", "tictactoe", "--opponent", "ai:8",
                 "--seed", str(seed))  # fmt: skip
    assert set(report) == {"room", "game", "seat", "outcome", "reason", "moves", "game_id"}
    assert report["game_id"] == report["room"]
    assert report["game"] == "tictactoe" and report["outcome"] in ("loss", "draw")
    assert 5 <= report["moves"] <= 9


def test_bot_loses_matches_when_the_ai_moves_first(live_server) -> None:
    report = bot(live_server.http_url, "--game", "matches", "--opponent", "ai:8", "--seat", "1")
    assert (report["seat"], report["outcome"], report["reason"]) == (
        1, "loss", "took the last match"
    )  # fmt: skip


def test_bot_plays_under_its_player_key(live_server) -> None:
    key = "bot-key-" + "x" * 24
    report = bot(live_server.http_url, "--game", "tictactoe", "--opponent", "ai:1",
                 "--player-key", key)  # fmt: skip
    with urllib.request.urlopen(f"{live_server.http_url}/api/games/{report['game_id']}") as r:
        record = json.load(r)
    assert record["players"][report["seat"]]["player"] == player_id(key)
    assert record["status"] == "over" and len(record["moves"]) == report["moves"]


def test_bot_refuses_a_bad_player_key(live_server) -> None:
    report = bot(live_server.http_url, "--game", "tictactoe", "--player-key", "short")
    assert report["error"] == "usage"


def test_bot_reports_errors_as_json(live_server) -> None:
    report = bot(live_server.http_url, "--game", "go")
    assert report["error"] == "game/unknown" and "'go'" in report["message"]
    report = bot(live_server.http_url, "--game", "tictactoe", "--join", "nosuchroom")
    assert report["error"] == "room/unknown"
