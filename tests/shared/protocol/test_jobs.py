"""Jobs and results: the stream entries between the server and the workers."""

from __future__ import annotations

import json

import pytest

from kibitz.shared.protocol import jobs as p
from kibitz.shared.protocol.codec import ProtocolError


def test_job_and_result_round_trip() -> None:
    job = p.Job("r:1", "r", 1, "tictactoe", ".........:x", ["5"], 8, p.Budget(time_ms=100), 1)
    assert p.Job.from_fields(job.to_fields()) == job
    result = p.JobResult("r:1", "r", 1, "1", 0.5, 3, 100, 2, "w")
    assert p.JobResult.from_fields(result.to_fields()) == result
    with pytest.raises(ProtocolError):
        p.Job.from_fields({"job": json.dumps({"job_id": 1})})
    with pytest.raises(ProtocolError):
        p.JobResult.from_fields({"nothing": "here"})
