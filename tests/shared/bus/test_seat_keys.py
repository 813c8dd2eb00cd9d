"""Seat keys (shared/bus/seat_keys.py) on a real Redis: kept per room and seat, bounded
to the two seats, expiring."""

from __future__ import annotations

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.link import LinkedRedis
from kibitz.shared.bus.seat_keys import SEAT_KEYS_TTL_S, SeatKeys

pytestmark = pytest.mark.asyncio


async def test_seat_keys_are_kept_per_seat(client: LinkedRedis) -> None:
    seat_keys = SeatKeys(client)
    assert await seat_keys.get("room1", 0) is None
    await seat_keys.put("room1", {0: "tok-a"})
    await seat_keys.put("room1", {1: "tok-b"})
    assert await seat_keys.get("room1", 0) == "tok-a"
    assert await seat_keys.get("room1", 1) == "tok-b"
    assert await seat_keys.all("room1") == {0: "tok-a", 1: "tok-b"}
    assert await seat_keys.all("room2") == {}
    ttl = await client.ttl(keys.seat_keys_key("room1"))
    assert SEAT_KEYS_TTL_S - 5 < ttl <= SEAT_KEYS_TTL_S
    with pytest.raises(ValueError):
        await seat_keys.put("room1", {2: "tok-c"})
    assert await seat_keys.all("room1") == {0: "tok-a", 1: "tok-b"}
    await seat_keys.put("room3", {0: "x"}, ttl_s=60)
    assert await client.ttl(keys.seat_keys_key("room3")) <= 60
