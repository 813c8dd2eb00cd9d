"""``kibitz bench load`` for games: the summary's counts, ``--think-ms`` pacing, and
games against the AI (``--ai``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "bench", "load", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_players_who_think_move_at_their_pace() -> None:
    out = _bench("--games", "4", "--concurrency", "2", "--think-ms", "40", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["errors"] == 0 and summary["games"] == 4 and summary["think_ms"] == 40
    # Two lanes, each pausing at least 20 ms before each of its moves.
    assert summary["seconds"] >= summary["moves"] / 2 * 0.020
    # Few moves under way at once: each lane spends most of its time thinking.
    assert 0 < summary["moves_in_flight"] < 1
    assert summary["move_rtt_ms"]["p50"] < 40 * 0.5  # the pause is not in the round trip


@pytest.mark.parametrize("args", [["--think-ms", "-1"], ["--think-ms", "5", "--spectators", "4"]])
def test_think_ms_out_of_place_is_a_usage_error(args: list[str]) -> None:
    out = _bench(*args, timeout=60)
    assert out.returncode == 2 and "--think-ms" in out.stderr


def test_games_against_the_ai_on_one_redis() -> None:
    out = _bench("--game", "othello", "--ai", "1", "--games", "2", "--concurrency", "2",
                 "--max-seconds", "8", "--json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["errors"] == 0 and summary["games"] == 2 and summary["redis"] == "single"
    assert 0 < summary["ai_moves"] < summary["moves"]
    assert summary["ai_moves"] + summary["human_moves"] == summary["moves"]
    assert summary["ai_workers"] == 2 and "redis_control_primary" not in summary
    assert len(summary["redis_cpu_ms_per_ai_move_per_primary"]) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--ai", "0"],
        ["--ai", "9"],
        ["--ai", "1", "--spectators", "4"],
        ["--ai-workers", "2"],
        ["--ai", "1", "--ai-workers", "0"],
        ["--ai", "1", "--ai-workers", "2", "--url", "http://127.0.0.1:9"],
    ],
)
def test_ai_flags_out_of_place_are_usage_errors(args: list[str]) -> None:
    out = _bench(*args, timeout=60)
    assert out.returncode == 2 and "--ai" in out.stderr, out.stderr
