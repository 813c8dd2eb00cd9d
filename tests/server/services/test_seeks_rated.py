"""Rated seeks, rating ranges, ratings in the lobby, blocks and abandonment penalties, end
to end: two real nodes on a Redis and a SQLite archive of this module's own, accounts
signed up over HTTP, ratings and abandonments written into the database as the ratings
and moderation parts write them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kibitz.client.connection import KibitzClient, ServerError
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.protocol.client_in import parse_client_message
from kibitz.shared.protocol.codec import ProtocolError
from tests.conftest import ServerProcess, start_server
from tests.server.accounts.web import signup
from tests.server.services.seekers import (
    ENV,
    abandon,
    open_as,
    post,
    set_rating,
    unique,
)

BLITZ = {"initial_ms": 180_000, "increment_ms": 2000}  # chess: 3+2 is blitz


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("seeks-rated") / "games.sqlite3"


@pytest.fixture(scope="module")
def cluster(own_redis: EmbeddedRedis, database: Path) -> Iterator[list[ServerProcess]]:
    url = f"sqlite:///{database}"
    nodes = [start_server(own_redis.url, database_url=url, extra_env=ENV) for _ in range(2)]
    yield nodes
    for node in nodes:
        node.stop()


async def listed(node: ServerProcess, seek_id: str) -> dict[str, Any] | None:
    async with aiohttp.ClientSession() as http, http.get(node.http_url + "/api/seeks") as r:
        assert r.status == 200
        seeks = (await r.json())["seeks"]
    return next((s for s in seeks if s["id"] == seek_id), None)


async def refusal(client: KibitzClient, message: dict[str, Any]) -> dict[str, Any]:
    """The ``error`` the server answers ``message`` with (all its fields)."""
    rid = f"r{id(message)}"
    await client.send({**message, "rid": rid})
    return await client.next_message(lambda m: m.get("rid") == rid, timeout=10)


async def player(node: ServerProcess, stem: str) -> tuple[str, str]:
    name = unique(stem)
    return name, await signup(node.http_url, name)


# -- the wire --------------------------------------------------------------------------------


def test_a_seek_reads_rated_and_its_rating_range() -> None:
    seek = parse_client_message(
        {"type": "seek", "game": "chess", "rated": True, "rating_range": [1400, 1700]}
    )
    assert seek.rated and seek.rating_range == (1400, 1700)  # type: ignore[union-attr]
    plain = parse_client_message({"type": "seek", "game": "chess"})
    assert not plain.rated and plain.rating_range is None  # type: ignore[union-attr]
    for bad in (
        {"rating_range": [1700, 1400]},
        {"rating_range": [1400]},
        {"rating_range": [1, 2, 3]},
        {"rating_range": "1400-1700"},
        {"rating_range": [-1, 100]},
        {"rating_range": [0, 4001]},
        {"rating_range": [True, 100]},
        {"rating_range": [1400.5, 1700]},
        {"rated": "yes"},
        {"rated": 1},
    ):
        with pytest.raises(ProtocolError) as refused:
            parse_client_message({"type": "seek", "game": "chess", **bad})
        assert refused.value.code == "message/invalid", bad


# -- end to end ------------------------------------------------------------------------------


async def test_a_rated_seek_needs_its_poster_and_acceptor_signed_in(cluster) -> None:
    ann, ann_cookie = await player(cluster[0], "ann")
    guest = await open_as(cluster[0])
    try:
        with pytest.raises(ServerError) as refused:
            await guest.seek("chess", clock=BLITZ, rated=True)
        assert refused.value.code == "auth/required"
    finally:
        await guest.close()
    poster = await open_as(cluster[0], ann_cookie)
    bob, bob_cookie = await player(cluster[1], "bob")
    try:
        seek = await poster.seek("chess", clock=BLITZ, rated=True, seat=0)
        assert seek["rated"] is True and seek["account"] == ann
        shown = await listed(cluster[1], seek["id"])
        assert shown is not None and shown["rated"] is True and shown["account"] == ann
        assert "account_id" not in shown and "address" not in shown
        async with await open_as(cluster[1]) as other_guest:
            with pytest.raises(ServerError) as refused:
                await other_guest.accept_seek(seek["id"])
            assert refused.value.code == "auth/required"
        assert await listed(cluster[0], seek["id"]) is not None  # a refused accept: it stays
        async with await open_as(cluster[1], bob_cookie) as acceptor:
            seat = await acceptor.accept_seek(seek["id"])
            mine = await poster.wait_seek_accepted(seek["id"])
            assert mine["room"] == seat["room"] and mine["seat"] == 0
            state = await acceptor.wait_state(seat["room"], lambda s: True)
            assert state["rated"] is True
            assert [s["account"] for s in state["seats"]] == [ann, bob]
            assert [s["provisional"] for s in state["seats"]] == [True, True]
            assert [s["rating"] for s in state["seats"]] == [1500, 1500]
    finally:
        await poster.close()


async def test_the_lobby_lists_seekers_ratings(cluster, database) -> None:
    ann, cookie = await player(cluster[0], "rated")
    set_rating(database, ann, "chess", "blitz", 1733.4)
    async with await open_as(cluster[0], cookie) as poster:
        seek = await poster.seek("chess", clock=BLITZ, rating_range=[1500, 1900])
        assert (seek["account"], seek["rating"], seek["provisional"]) == (ann, 1733, False)
        assert seek["rating_range"] == [1500, 1900] and "rated" not in seek
        shown = await listed(cluster[1], seek["id"])
        assert shown == seek
        async with await open_as(cluster[1]) as watcher:
            lobby = await watcher.lobby()
            [entry] = [s for s in lobby["seeks"] if s["id"] == seek["id"]]
            assert entry["rating"] == 1733 and entry["account"] == ann
        # Another speed of the same game is another rating (a fresh, provisional one).
        rapid = await poster.seek("chess", clock={"initial_ms": 900_000, "increment_ms": 10_000})
        assert rapid["rating"] == 1500 and rapid["provisional"] is True
    async with await open_as(cluster[0]) as guest:
        plain = await guest.seek("chess", clock=BLITZ)
        assert not {"account", "rating", "provisional", "rated", "rating_range"} & set(plain)


async def test_an_acceptor_outside_the_range_is_refused(cluster, database) -> None:
    ann, ann_cookie = await player(cluster[0], "range")
    low, low_cookie = await player(cluster[1], "low")
    fit, fit_cookie = await player(cluster[1], "fit")
    set_rating(database, low, "chess", "blitz", 1450)
    set_rating(database, fit, "chess", "blitz", 1690)
    async with await open_as(cluster[0], ann_cookie) as poster:
        # A casual seek of a signed-in player: the range holds all the same.
        seek = await poster.seek("chess", clock=BLITZ, rating_range=[1600, 1800])
        async with await open_as(cluster[1]) as guest:
            with pytest.raises(ServerError) as refused:
                await guest.accept_seek(seek["id"])
            assert refused.value.code == "auth/required"
        async with await open_as(cluster[1], low_cookie) as too_low:
            error = await refusal(too_low, {"type": "accept", "seek": seek["id"]})
            assert error["code"] == "seek/out_of_range"
            assert "1600-1800" in error["message"] and "1450" in error["message"]
        assert await listed(cluster[1], seek["id"]) is not None  # still open
        async with await open_as(cluster[1], fit_cookie) as fitting:
            seat = await fitting.accept_seek(seek["id"])
            state = await fitting.wait_state(seat["room"], lambda s: True)
            assert "rated" not in state  # casual
            assert sorted(s["rating"] for s in state["seats"]) == [1500, 1690]


async def test_no_seek_is_accepted_between_blocked_accounts(cluster) -> None:
    ann, ann_cookie = await player(cluster[0], "blocker")
    bob, bob_cookie = await player(cluster[1], "blocked")
    assert await post(cluster[0].http_url, f"/api/players/{bob}/block", ann_cookie) == 200
    async with await open_as(cluster[0], ann_cookie) as poster:
        seek = await poster.seek("tictactoe")
        async with await open_as(cluster[1], bob_cookie) as acceptor:
            with pytest.raises(ServerError) as refused:
                await acceptor.accept_seek(seek["id"])
            assert refused.value.code == "seek/blocked"
        assert await listed(cluster[0], seek["id"]) is not None
    # Blocked the other way round: the blocker may not accept the blocked one's seek.
    async with await open_as(cluster[1], bob_cookie) as poster:
        seek = await poster.seek("tictactoe")
        async with await open_as(cluster[0], ann_cookie) as acceptor:
            with pytest.raises(ServerError) as refused:
                await acceptor.accept_seek(seek["id"])
            assert refused.value.code == "seek/blocked"


async def test_an_abandoner_waits_before_seeking_again(cluster, database) -> None:
    dan, dan_cookie = await player(cluster[0], "quitter")
    abandon(database, dan, 3)  # two are free; the third costs a wait
    async with await open_as(cluster[0]) as guest:
        seek = await guest.seek("tictactoe")
        async with await open_as(cluster[0], dan_cookie) as quitter:
            for message in (
                {"type": "seek", "game": "tictactoe"},
                {"type": "pool_join", "game": "tictactoe"},
                {"type": "accept", "seek": seek["id"]},
            ):
                error = await refusal(quitter, message)
                assert error["code"] == "seek/penalty", (message, error)
                assert 0 < error["wait_ms"] <= 5 * 60 * 1000
        assert await listed(cluster[0], seek["id"]) is not None


async def test_a_seeker_cannot_claim_an_account_or_a_rating(cluster) -> None:
    """Attacks from outside: fields naming an account or a rating are not believed; only
    the socket's session says who it is."""
    forged = {"account": "admin", "account_id": 1, "rating": 3999, "provisional": False}
    async with await open_as(cluster[0]) as guest:
        reply = await guest.request({"type": "seek", "game": "chess", **forged})
        seek = reply["seek"]
        assert not {"account", "account_id", "rating", "provisional"} & set(seek)
        shown = await listed(cluster[1], seek["id"])
        assert shown is not None and "account" not in shown
        joined = await guest.request({"type": "pool_join", "game": "kono", **forged})
        assert joined["rating"] == 1500
        with pytest.raises(ServerError) as refused:
            await guest.request({"type": "pool_join", "game": "kono", "rated": True, **forged})
        assert refused.value.code == "pool/already"
        await guest.pool_leave()
        with pytest.raises(ServerError) as refused:
            await guest.request({"type": "pool_join", "game": "kono", "rated": True, **forged})
        assert refused.value.code == "auth/required"
