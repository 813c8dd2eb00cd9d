"""``kibitz bench load`` for games: the summary's counts, and ``--think-ms`` pacing."""

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
