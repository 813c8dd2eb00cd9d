"""The key layout: on a Redis Cluster, what a script touches together shares a slot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.crc import key_slot

from kibitz.shared.bus import keys

ROOMS = [f"room{i}" for i in range(200)]


@pytest.fixture
def grouped() -> Iterator[None]:
    keys.configure(keys.DEFAULT_GROUPS)
    yield
    keys.configure(0)


def slot(name: str) -> int:
    return int(key_slot(name.encode()))


def test_a_single_redis_keeps_its_names() -> None:
    assert keys.room_key("abc") == "kibitz:room:{abc}"
    assert keys.events_key("abc") == "kibitz:room:{abc}:events"
    assert keys.JOBS == "kibitz:jobs"
    assert keys.live(0) == "kibitz:rooms:live"
    assert keys.archive(0) == "kibitz:archive"
    assert keys.deadlines(0) == "kibitz:deadlines"
    assert keys.ai_games_key("owner") == "kibitz:ai:games:owner"
    assert list(keys.groups()) == [0] and keys.group_of("abc") == 0
    assert not keys.grouped()


def test_a_room_and_what_its_commit_writes_share_one_slot(grouped: None) -> None:
    for room in ROOMS:
        group = keys.group_of(room)
        names = [
            keys.room_key(room),
            keys.events_key(room),
            keys.presence_key(room),
            keys.presence_sent_key(room),
            keys.chat_key(room, "players"),
            keys.chat_key(room, "spectators"),
            keys.rearchive_key(room),
            keys.seat_keys_key(room),
            keys.room_channel(room),
            keys.live(group),
            keys.deadlines(group),
            keys.archive(group),
            keys.ai_outbox(group),
            keys.ai_games_key("someone", group),
            keys.group_node_beats(group),
        ]
        assert len({slot(name) for name in names}) == 1, room
        assert keys.room_id_of(keys.events_key(room)) == room


def test_global_keys_share_the_control_slot(grouped: None) -> None:
    names = [getattr(keys, name) for name in keys._GLOBAL_SUFFIXES]
    names += [
        keys.node_key("n1"),
        keys.worker_key("w1"),
        keys.address_connections_key("10.0.0.1"),
        keys.address_creates_key("10.0.0.1"),
        keys.analysis_key("g1"),
        keys.analysis_evals_key("g1"),
        keys.player_rooms_key("p1"),
        keys.challenge_key("c1"),
        keys.challenges_key(7, "in"),
        keys.event_stream_key(7),
        keys.probe_channel("n1"),
    ]
    assert all(name.startswith("kibitz:{c}:") for name in names)
    assert len({slot(name) for name in names}) == 1


def test_groups_spread_over_the_slots(grouped: None) -> None:
    used = {keys.group_of(room) for room in ROOMS}
    assert len(used) > keys.DEFAULT_GROUPS * 0.9  # 200 rooms reach nearly every group
    slots = {slot(keys.live(group)) for group in keys.groups()}
    assert len(slots) == keys.DEFAULT_GROUPS  # one slot each: the cluster can move each
    # A group's probe channel is on the group's slot: it proves the primary holding it.
    assert slot(keys.probe_channel("n1", 5)) == slot(keys.live(5))


def test_configure_back_to_one_redis_restores_every_name() -> None:
    before = {name: getattr(keys, name) for name in keys._GLOBAL_SUFFIXES}
    keys.configure(8)
    assert keys.JOBS == "kibitz:{c}:jobs" and keys.group_count() == 8
    keys.configure(0)
    assert {name: getattr(keys, name) for name in keys._GLOBAL_SUFFIXES} == before
    with pytest.raises(ValueError):
        keys.configure(-1)
    with pytest.raises(ValueError):
        keys.configure(keys.MAX_GROUPS + 1)
