"""``kibitz bench workers`` runs real worker processes on a private Redis and reports."""

from __future__ import annotations

import json
import subprocess
import sys


def test_bench_workers_reports_jobs_per_second() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "bench", "workers",
         "--jobs", "6", "--workers", "1,2", "--depth", "3", "--json", "--max-seconds", "60"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["jobs"] == 6 and result["depth"] == 3
    assert set(result["jobs_per_s"]) == {"1", "2"}
    assert all(rate > 0 for rate in result["jobs_per_s"].values())
    assert result["speedup"]["1"] == 1.0
