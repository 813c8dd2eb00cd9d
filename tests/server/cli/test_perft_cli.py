"""``kibitz perft`` and ``kibitz bench perft`` run as real commands."""

from __future__ import annotations

import json
import subprocess
import sys

KIWIPETE = "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1"


def kibitz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_perft_prints_the_count_last() -> None:
    for args, count in (
        (("tictactoe", "3"), "504"),
        (("chess", "3"), "8902"),
        (("kono", "4"), "7"),
        (("oware", "3"), "190"),
        (("chess", "2", "--position", KIWIPETE), "2039"),
        (("matches", "2", "--option", "count=2"), "1"),
        (("chess", "0"), "1"),
    ):
        done = kibitz("perft", *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == count, args


def test_perft_divide_lists_each_move_then_the_total() -> None:
    done = kibitz("perft", "chess", "2", "--divide")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "400"
    divided = dict(line.split() for line in lines[:-1])
    assert len(divided) == 20 and divided["e2e4"] == "20"
    assert sum(map(int, divided.values())) == 400


def test_perft_errors_name_the_bad_input() -> None:
    done = kibitz("perft", "go", "2")
    assert done.returncode == 2 and "'go'" in done.stderr
    done = kibitz("perft", "oware", "1", "--position", "4,4/S")
    assert done.returncode == 2 and "'4,4/S'" in done.stderr
    done = kibitz("perft", "matches", "1", "--option", "count")
    assert done.returncode == 2 and "'count'" in done.stderr
    done = kibitz("perft", "matches", "1", "--option", "heap=3")
    assert done.returncode == 2 and "'heap'" in done.stderr


def test_bench_perft_json_reports_both_sides() -> None:
    done = kibitz("bench", "perft", "--games", "kono", "--repeat", "2", "--json")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    assert result["game"] == "kono" and result["runs"] == 2
    assert result["leaves"] == 105 and result["leaves_per_s_median"] > 0
    done = kibitz("bench", "perft", "--games", "go")
    assert done.returncode == 2 and "'go'" in done.stdout
