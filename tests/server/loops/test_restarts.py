"""The restart parameters of the node's loops (server/node.py's ``RESTARTS``) keep each
loop's timing: the ones that talk to Redis are back within seconds of it, the heartbeat
well inside its TTL, the listener's probe within the listener's patience."""

from __future__ import annotations

from kibitz.server.config import NodeConfig
from kibitz.server.fanout.listener import PROBE_S, STALE_S, SUBSCRIBE_TIMEOUT_S
from kibitz.server.node import RESTARTS
from kibitz.shared.bus.store import HEARTBEAT_S, NODE_TTL_S

#: The loops of a node that talk to Redis (server/node.py, server/fanout/hub.py).
REDIS_LOOPS = {
    "fanout-listener", "fanout-probe", "results", "heartbeat", "archiver", "lobby",
    "deadlines", "analysis", "pool", "bans", "event-streams", "relay",
}  # fmt: skip


def test_every_loop_that_talks_to_redis_is_back_within_seconds_of_it() -> None:
    assert set(RESTARTS) == REDIS_LOOPS
    for name, backoff in RESTARTS.items():
        assert 0 < backoff.first_s <= backoff.cap_s <= 5.0, name


def test_the_heartbeat_beats_again_well_inside_its_ttl() -> None:
    # The last beat was at most HEARTBEAT_S before Redis went; a beat under way when it
    # is back gives up after the command timeout, then waits at most cap_s.
    worst = HEARTBEAT_S + NodeConfig().redis_timeout_s + RESTARTS["heartbeat"].cap_s
    assert RESTARTS["heartbeat"].cap_s <= 2.0
    assert worst < NODE_TTL_S


def test_the_probe_is_published_again_before_the_listener_gives_up() -> None:
    assert RESTARTS["fanout-probe"].cap_s <= PROBE_S < STALE_S
    assert RESTARTS["fanout-listener"].cap_s < STALE_S


def test_a_failed_attempt_is_never_taken_for_a_healthy_run() -> None:
    # Else every attempt on a frozen Redis would start the backoff, and the log, afresh.
    longest_attempt = SUBSCRIBE_TIMEOUT_S + STALE_S + NodeConfig().redis_timeout_s
    for name, backoff in RESTARTS.items():
        assert backoff.healthy_s > longest_attempt, name
