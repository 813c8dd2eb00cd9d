"""The challenge store (shared/bus/challenges.py) on a real Redis: open challenges on
both accounts' lists, exactly one decision per challenge, expiry and the list bounds."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from kibitz.shared.bus import challenges as store
from kibitz.shared.bus import keys
from kibitz.shared.bus.challenges import ChallengeExists, ChallengeLimit, Challenges
from kibitz.shared.bus.link import LinkedRedis

pytestmark = pytest.mark.asyncio


def now() -> int:
    return int(time.time() * 1000)


def record(challenge_id: str, challenger: int = 1, dest: int = 2) -> dict[str, Any]:
    return {
        "id": challenge_id,
        "challenger": {"account_id": challenger, "account": f"a{challenger}"},
        "dest": {"account_id": dest, "account": f"a{dest}"},
        "game": "chess",
        "created_ms": now(),
    }


async def test_a_challenge_is_open_on_both_lists(client: LinkedRedis) -> None:
    challenges = Challenges(client)
    await challenges.create(record("c1"), now())
    await challenges.create(record("c2", 3, 2), now())
    assert [r["id"] for r in await challenges.incoming(2)] == ["c1", "c2"]
    assert [r["id"] for r in await challenges.outgoing(1)] == ["c1"]
    assert await challenges.incoming(1) == [] and await challenges.outgoing(2) == []
    got = await challenges.get("c1")
    assert got is not None and got["status"] == "created"
    ttl = await client.pttl(keys.challenge_key("c1"))
    assert store.OPEN_TTL_MS - 5_000 < ttl <= store.OPEN_TTL_MS
    with pytest.raises(ChallengeExists):
        await challenges.create(record("c1", 5, 6), now())
    assert await challenges.incoming(6) == []


async def test_exactly_one_decision_wins(client: LinkedRedis) -> None:
    challenges = Challenges(client)
    await challenges.create(record("c1"), now())
    won = await asyncio.gather(*(challenges.accept("c1", {"n": i}) for i in range(8)))
    winners = [w for w in won if w is not None]
    assert len(winners) == 1 and winners[0]["status"] == "accepted"
    assert await challenges.cancel("c1") is None  # no longer open
    assert await challenges.decline("c1", "later") is None
    stored = await challenges.get("c1")
    assert stored == winners[0]
    assert await challenges.incoming(2) == [] and await challenges.outgoing(1) == []
    assert await client.pttl(keys.challenge_key("c1")) <= store.DECIDED_TTL_MS
    # Accept after cancel fails; a decline keeps its reason.
    await challenges.create(record("c2"), now())
    canceled = await challenges.cancel("c2")
    assert canceled is not None and canceled["status"] == "canceled"
    assert await challenges.accept("c2") is None
    await challenges.create(record("c3"), now())
    declined = await challenges.decline("c3", "tooFast")
    assert declined is not None and declined["decline_reason"] == "tooFast"
    assert await challenges.accept("missing") is None
    with pytest.raises(ValueError):
        await challenges.decide("c3", "created")


async def test_expired_challenges_leave_the_lists(client: LinkedRedis) -> None:
    challenges = Challenges(client)
    await challenges.create(record("short"), now(), ttl_ms=150)
    await challenges.create(record("long"), now())
    await asyncio.sleep(0.3)
    assert await challenges.get("short") is None
    assert [r["id"] for r in await challenges.incoming(2)] == ["long"]
    assert await client.zrange(keys.challenges_key(2, "in"), 0, -1) == ["long"]
    # A refreshed one lives on; a decided one is not refreshed.
    await challenges.create(record("kept"), now(), ttl_ms=300)
    assert await challenges.refresh("kept", now(), ttl_ms=5_000)
    await asyncio.sleep(0.4)
    assert [r["id"] for r in await challenges.outgoing(1)] == ["long", "kept"]
    await challenges.cancel("kept")
    assert not await challenges.refresh("kept", now())


async def test_the_lists_are_bounded(client: LinkedRedis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "MAX_OUT", 3)
    monkeypatch.setattr(store, "MAX_IN", 4)
    challenges = Challenges(client)
    for i in range(3):
        await challenges.create(record(f"o{i}", 1, 10 + i), now())
    with pytest.raises(ChallengeLimit) as full:
        await challenges.create(record("o3", 1, 20), now())
    assert full.value.direction == "out"
    assert await challenges.get("o3") is None and await challenges.incoming(20) == []
    for i in range(4):
        await challenges.create(record(f"i{i}", 30 + i, 2), now())
    with pytest.raises(ChallengeLimit) as full:
        await challenges.create(record("i4", 40, 2), now())
    assert full.value.direction == "in"
    assert await challenges.get("i4") is None and await challenges.outgoing(40) == []
    # A decided challenge frees its place.
    await challenges.cancel("o0")
    await challenges.create(record("o4", 1, 20), now())
    assert len(await challenges.outgoing(1)) == 3
