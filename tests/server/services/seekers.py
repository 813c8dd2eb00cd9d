"""Helpers of the seeks and pool tests: a small cluster of real nodes on a Redis and a
SQLite file of the module's own, accounts signed up over HTTP (the session cookie opens
the WebSocket as that account), and ratings, blocks and abandonments written straight
into the database as the other parts would have written them."""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp

from kibitz.client.connection import KibitzClient
from tests.conftest import ServerProcess

#: Test nodes let one address sign up as many accounts as the tests need.
ENV = {"KIBITZ_SIGNUPS_PER_ADDRESS": "100000"}
_NAMES = itertools.count(1)


def unique(stem: str) -> str:
    """A username no other test of the run has (2-20 characters)."""
    return f"{stem[:8]}{int(time.time()) % 100_000}x{next(_NAMES)}"


async def post(base: str, path: str, cookie: str, body: dict[str, Any] | None = None) -> int:
    """POST ``body`` to ``path`` as the session ``cookie``; the status."""
    headers = {"Origin": base, "Cookie": f"kibitz_session={cookie}"}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}{path}", json=body or {}, headers=headers) as resp:
            return resp.status


async def open_as(node: ServerProcess, cookie: str | None = None) -> KibitzClient:
    """A client on ``node`` acting for the session ``cookie`` (None: a guest)."""
    headers = {"Cookie": f"kibitz_session={cookie}"} if cookie else {}
    return await KibitzClient.open(node.http_url, additional_headers=headers)


def account_id(database: Path, username: str) -> int:
    with sqlite3.connect(database) as db:
        row = db.execute(
            "SELECT id FROM accounts WHERE username_key = ?", (username.lower(),)
        ).fetchone()
    assert row is not None, username
    return int(row[0])


def set_rating(database: Path, username: str, game: str, speed: str, rating: float) -> None:
    """Give ``username`` a settled rating (RD 60: not provisional) in ``game`` at ``speed``."""
    now = int(time.time() * 1000)
    with sqlite3.connect(database, timeout=10) as db:
        db.execute(
            "INSERT OR REPLACE INTO ratings (account_id, game, speed, rating, rd, volatility,"
            " games, wins, draws, losses, period_ms) VALUES (?, ?, ?, ?, 60, 0.06, 30, 10, 10,"
            " 10, ?)",
            (account_id(database, username), game, speed, rating, now),
        )


def abandon(database: Path, username: str, times: int) -> None:
    """Record ``times`` abandoned rated games of ``username``, just now."""
    now = int(time.time() * 1000)
    who = account_id(database, username)
    with sqlite3.connect(database, timeout=10) as db:
        for i in range(times):
            db.execute(
                "INSERT INTO abandonments (account_id, game_id, kind, at_ms) VALUES (?, ?, ?, ?)",
                (who, f"gone{who}x{i}", "timeout", now - i),
            )


async def seat_of(client: KibitzClient, timeout: float = 10.0) -> dict[str, Any]:
    """The next ``seat`` message (a pairing, or an accepted seek of ours)."""
    seat = await client.next_message(lambda m: m["type"] == "seat", timeout)
    client.tokens[seat["room"]] = (seat["seat"], seat["token"])
    return seat


async def no_seat(client: KibitzClient, seconds: float) -> None:
    """No ``seat`` comes for ``seconds`` (a ping's reply then proves the socket alive)."""
    try:
        seat = await client.next_message(lambda m: m["type"] == "seat", seconds)
    except TimeoutError:
        return
    raise AssertionError(f"paired when it should not be: {seat}")
