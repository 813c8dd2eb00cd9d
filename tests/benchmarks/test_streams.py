"""``kibitz bench streams``, small: 100 event streams on a real ``kibitz serve`` (the last
50 measured), their memory and idle CPU."""

from __future__ import annotations

import json
import subprocess
import sys

#: What an open event stream may cost the node, in KB of resident memory (issue 23). Kept
#: at the node's edge, a stream costs about 5 KB (docs/performance.md).
MAX_KB_PER_STREAM = 10


def test_event_streams_cost_a_few_kb_and_no_cpu_when_idle() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kibitz.benchmarks.streams", "--streams", "100", "--idle-s", "2",
         "--max-kb", str(MAX_KB_PER_STREAM)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["open_after_idle"] == 100, done.stdout
    assert result["kept_alive"] == 100  # every stream got its keep-alive line
    assert result["per_stream_kb"] <= MAX_KB_PER_STREAM, result
    # Idle: the streams add no measurable CPU (the node's own loops are the base).
    assert result["cpu_idle_streams_pct"] - result["cpu_idle_base_pct"] < 5, result
    assert done.returncode == 0
