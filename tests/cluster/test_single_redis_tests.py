"""Tests of rooms written for a single Redis, run again on the Redis Cluster.

The functions are tests/server/test_rooms.py's own, collected here a second time: in this
folder ``live_server`` is a node with two workers on the session's Redis Cluster (and
``redis_server`` the cluster itself: tests/cluster/conftest.py), so each runs unchanged on
both. A bounded choice (CI time; test_games.py covers rooms on two nodes and clocks on the
cluster): a spectator sees every version once and in order, a resume replays the missed
versions, AI moves come from the workers (and /api/status counts them).
"""

from __future__ import annotations

import pytest

from tests.server.test_rooms import (
    test_ai_game_moves_come_from_workers,
    test_resume_replays_missed_versions,
    test_spectator_receives_every_move_in_order,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(60)]

__all__ = [
    "test_ai_game_moves_come_from_workers",
    "test_resume_replays_missed_versions",
    "test_spectator_receives_every_move_in_order",
]
