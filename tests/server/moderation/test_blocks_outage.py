"""The blocks a signed-in connection hides are read from the database, and the database may
fail: a real ``kibitz serve`` on its own SQLite file, whose ``blocks`` table is dropped
under it. Moves (and pings) never wait on that read, and a failed read keeps the blocks the
connection had: the game goes on; the moderation paths answer 503 ``server/unavailable``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kibitz.server.gateway.session import HIDDEN_REFRESH_S
from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import ServerProcess, start_server
from tests.server.moderation.test_moderation_live import Socket, create, http, signup


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outage") / "games.sqlite3"


@pytest.fixture(scope="module")
def server(own_redis: EmbeddedRedis, database: Path) -> Iterator[ServerProcess]:
    process = start_server(own_redis.url, database_url=f"sqlite:///{database}")
    yield process
    process.stop()


def drop_blocks(database: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{database}")
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE blocks"))
    finally:
        engine.dispose()


async def play(socket: Socket, room: str, token: str, move: str) -> dict[str, Any]:
    """Make ``move``; the state it led to, or the error."""
    rid = f"m{move}"
    await socket.ws.send(
        json.dumps({"type": "move", "room": room, "token": token, "move": move, "rid": rid})
    )
    return await socket.next(
        lambda m: (
            m.get("rid") == rid
            or m.get("type") == "state"
            and (m.get("last_move") or {}).get("move") == move
        )
    )


async def test_moves_go_on_when_the_blocks_cannot_be_read(
    server: ServerProcess, database: Path
) -> None:
    ann, bob = await signup(server, "ann"), await signup(server, "bob")
    ann_ws, bob_ws = await Socket.open(server, ann), await Socket.open(server, bob)
    try:
        made = await create(ann_ws, seat=0)
        assert made["type"] == "seat", made
        joined = await bob_ws.ask({"type": "join", "room": made["room"]})
        assert joined["type"] == "seat", joined
        drop_blocks(database)
        await asyncio.sleep(HIDDEN_REFRESH_S + 0.2)  # the blocks both hide are stale now
        for who, token, move in ((ann_ws, made["token"], "5"), (bob_ws, joined["token"], "1")):
            answer = await play(who, made["room"], token, move)
            assert answer.get("type") == "state" and answer["last_move"]["move"] == move, answer
            assert (await who.ask({"type": "ping"}))["type"] == "pong"
        # A chat line (which does read the blocks again) is still said: the read failed,
        # the connection keeps the blocks it had.
        line = await ann_ws.chat(made["room"], "still here", made["token"])
        assert line["type"] == "chat", line
        # Over HTTP, the table's read failing is a typed 503, not a 500.
        status, body = await http(server, "GET", "/api/blocks", ann)
        assert (status, body["code"]) == (503, "server/unavailable"), body
    finally:
        await ann_ws.close()
        await bob_ws.close()
