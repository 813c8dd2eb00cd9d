"""The attacks of issue 19 that held, kept as tests so that they keep holding.

Against a real ``kibitz serve`` on loopback, on a Redis and a SQLite archive of its own:

- seat theft: a connection without the seat's token (none, a wrong one, a guess of the
  other seat's, one from another room) sends every seat action; each is refused and the
  game is unchanged and plays on;
- tokens: a token is good in its room only; after the game it plays nothing there, and
  never in another room; forged tokens (wrong length, alphabet, type, 10 KB) are refused;
- SQL injection: classic payloads in every HTTP query and path parameter that reaches
  the archive get 400 or 404, and the archive is intact afterwards;
- path traversal on the static files: 404, never a file's content;
- hostile WebSocket frames: NaN and infinities, msgpack extension types and deep nesting,
  RFC 6455 violations (a stray continuation, an interleaved message, fragmented or
  oversized control frames, unmasked frames, reserved opcodes and bits, bad close
  frames), fragments adding up past the hard limit: each gets a typed error or a clean
  close, and meanwhile the node stays healthy and a game between two other clients is
  undisturbed;
- WebSocket pings from clients that never read the pongs: what the node keeps for them
  stays within the documented 4 MiB a client (no memory exhaustion from one address);
- requests with the connection's end right behind them: no traceback and no ERROR in
  the node's log (which any client could otherwise fill).

Already covered elsewhere (not repeated here): a wrong token for ``move``/``resign``,
binary garbage on a JSON connection, ``[1, 2]``, unknown types and missing fields, deep
JSON nesting, lone surrogates, integers past 64 bits, oversized frames (1009) and the
message-rate limit (tests/server/test_errors.py); a fragmented message and invalid UTF-8
(tests/server/gateway/test_edge.py); bad numbers and cursors in queries
(tests/security/test_injection.py); 11,000 fuzzed frames with bad tokens and other
rooms' tokens around protected games (tests/chaos/test_fuzz.py).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import socket
import sqlite3
import struct
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import msgpack
import pytest

from kibitz.client.connection import KibitzClient, ServerError, new_player_key, ws_url
from kibitz.server.archive.database import sqlite_url
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, start_server
from tests.server.gateway.test_edge import upgrade_request

pytestmark = pytest.mark.asyncio

ARCHIVE_WAIT_S = 15.0
SEAT_ACTIONS: list[dict[str, Any]] = [
    {"type": "move", "move": "1"},
    {"type": "resign"},
    {"type": "draw", "action": "offer"},
    {"type": "draw", "action": "accept"},
    {"type": "takeback", "action": "offer"},
    {"type": "rematch", "action": "offer"},
    {"type": "abort"},
    {"type": "claim", "result": "win"},
]


# -- the node and its clients ------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A node on a Redis and an archive of its own; its log must hold no traceback."""
    tmp = tmp_path_factory.mktemp("held")
    store = EmbeddedRedis(tmp / "redis", persist=False).start()
    server = start_server(store.url, database_url=sqlite_url(tmp / "games.sqlite3"))
    server.archive = tmp / "games.sqlite3"  # type: ignore[attr-defined]
    yield server
    server.stop()
    store.stop()
    log = "".join(server.log)
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]


async def get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        body = await resp.read()
        if resp.content_type == "application/json":
            return resp.status, json.loads(body)
        return resp.status, body


async def room_json(node: ServerProcess, room: str) -> dict[str, Any]:
    status, body = await get(f"{node.http_url}/api/rooms/{room}")
    assert status == 200, body
    return {k: v for k, v in body.items() if k != "seats"} | {
        "seats": [{k: v for k, v in s.items() if k != "connected"} for s in body["seats"]]
    }


async def healthy(node: ServerProcess) -> bool:
    status, _ = await get(node.http_url + "/healthz")
    return status == 200 and node.process.poll() is None


class Game:
    """A human tic-tac-toe game between two connections; X (seat 0) has played 5."""

    def __init__(self, a: KibitzClient, b: KibitzClient, room: str) -> None:
        self.a, self.b, self.room = a, b, room

    @classmethod
    async def start(cls, node: ServerProcess, key: str | None = None) -> Game:
        a = await KibitzClient.open(node.http_url)
        b = await KibitzClient.open(node.http_url)
        room = (await a.create("tictactoe", seat=0, player_key=key))["room"]
        await b.join(room)
        await a.move(room, "5")
        played = cls(a, b, room)
        await played.both(lambda s: len(s["moves"]) == 1)
        return played

    async def both(self, predicate: Any) -> dict[str, Any]:
        """The newer of the two players' states once each has one that ``predicate``
        accepts (so neither acts on a state the other has seen pass)."""
        one = await self.a.wait_state(self.room, predicate)
        two = await self.b.wait_state(self.room, predicate)
        return one if one["version"] >= two["version"] else two

    def token(self, seat: int) -> str:
        return (self.a, self.b)[seat].tokens[self.room][1]

    async def play_out(self) -> dict[str, Any]:
        """Both players play on to the end: the game was not disturbed."""
        players = {0: self.a, 1: self.b}
        moves = len((await self.both(lambda s: s["status"] == "playing"))["moves"])
        state = await self.both(lambda s: len(s["moves"]) >= moves)
        while state["status"] == "playing":
            version, moves = state["version"], len(state["moves"])
            await players[state["to_move"]].move(self.room, state["legal_moves"][0], version)
            state = await self.both(lambda s, n=moves: len(s["moves"]) > n)
        assert state["status"] == "over"
        return state

    async def close(self) -> None:
        await self.a.close()
        await self.b.close()


@pytest.fixture
async def game(node: ServerProcess) -> AsyncIterator[Game]:
    played = await Game.start(node)
    yield played
    await played.close()


async def refusals(node: ServerProcess, messages: list[dict[str, Any]]) -> list[str]:
    """Each message's error code (``"accepted"`` if one was not refused), sent on fresh
    connections, ten at a time (20 errors on one connection close it)."""
    codes = []
    for start in range(0, len(messages), 10):
        async with await KibitzClient.open(node.http_url) as attacker:
            for message in messages[start : start + 10]:
                try:
                    await attacker.request(message, timeout=10)
                    codes.append("accepted")
                except ServerError as exc:
                    codes.append(exc.code)
            await attacker.request({"type": "ping"})  # every reply in before the close
    return codes


def guessed_token() -> str:
    """A token of the real form (``secrets.token_urlsafe(24)``): a guess."""
    return secrets.token_urlsafe(24)


# -- seat theft and tokens ---------------------------------------------------------------


async def test_seat_theft_changes_nothing(node: ServerProcess, game: Game) -> None:
    other = await Game.start(node)
    try:
        before = await room_json(node, game.room)
        messages = []
        for action in SEAT_ACTIONS:
            base = {**action, "room": game.room}
            messages += [
                base,  # no token at all
                {**base, "token": guessed_token()},
                {**base, "token": other.token(0)},  # a seat's token in another room
                {**base, "token": other.token(1)},
            ]
        codes = await refusals(node, messages)
        for message, code in zip(messages, codes, strict=True):
            expected = "auth/token" if "token" in message else "message/invalid"
            assert code == expected, (message, code)
        # The seated player to move tries the other seat's token by guessing.
        for action in SEAT_ACTIONS:
            with pytest.raises(ServerError) as refused:
                await game.b.request({**action, "room": game.room, "token": guessed_token()})
            assert refused.value.code == "auth/token", action
        # A third person may not sit, nor resume as a player with a guess.
        assert await refusals(node, [{"type": "join", "room": game.room}]) == ["room/full"]
        resume = {"type": "resume", "room": game.room, "token": guessed_token()}
        assert await refusals(node, [resume]) == ["auth/token"]
        # Players' chat in the seat's name needs the token too.
        chat = {"type": "chat", "room": game.room, "text": "I resign", "token": guessed_token()}
        assert (await refusals(node, [chat]))[0] in ("auth/token", "chat/invalid")
        assert await room_json(node, game.room) == before
        assert not any(line["text"] == "I resign" for line in await _players_chat(node, game))
        await game.play_out()
    finally:
        await other.close()


async def _players_chat(node: ServerProcess, game: Game) -> list[dict[str, Any]]:
    status, record = await get(f"{node.http_url}/api/games/{game.room}")
    assert status == 200
    return [line for line in record.get("chat", []) if line.get("channel") == "players"]


async def test_a_token_is_good_in_its_room_while_the_game_lasts(node: ServerProcess) -> None:
    finished = await Game.start(node)
    fresh = await Game.start(node)
    try:
        old = finished.token(1)
        await finished.b.resign(finished.room)
        await finished.a.wait_state(finished.room, lambda s: s["status"] == "over")
        after = await room_json(node, finished.room)
        # In its own room, after the end: it plays nothing.
        for action in ({"type": "move", "move": "1"}, {"type": "resign"}):
            with pytest.raises(ServerError) as refused:
                await finished.b.request({**action, "room": finished.room, "token": old})
            assert refused.value.code == "game/over", action
        assert await room_json(node, finished.room) == after
        # In another room, never: neither during nor after its own game.
        before = await room_json(node, fresh.room)
        messages = [{**action, "room": fresh.room, "token": old} for action in SEAT_ACTIONS]
        messages.append({"type": "resume", "room": fresh.room, "token": old})
        messages.append({"type": "resume", "room": fresh.room, "token": fresh.token(0)[::-1]})
        assert set(await refusals(node, messages)) == {"auth/token"}
        assert await room_json(node, fresh.room) == before
        await fresh.play_out()
    finally:
        await finished.close()
        await fresh.close()


FORGED_TOKENS: dict[str, Any] = {
    "empty": "",
    "one character": "x",
    "one short": "A" * 31,
    "one long": "A" * 33,
    "512 characters": "A" * 512,
    "wrong alphabet": "!" * 32,
    "path": "../../../../etc/passwd",
    "redis glob": "*",
    "redis pattern": "[a-z]*?",
    "NUL bytes": "\x00" * 32,
    "control characters": "\x1b[31m" * 6,
    "non-ASCII": "ÄÖÜ☃" * 8,
    "SQL": "' OR 1=1 --",
    "JSON in a string": '{"seat": 0}',
}
FORGED_TYPES: dict[str, Any] = {
    "10 KB": "T" * 10_240,
    "513 characters": "A" * 513,
    "a number": 12345,
    "true": True,
    "null": None,
    "a list": ["A" * 32],
    "an object": {"seat": 0},
}


async def test_forged_tokens_are_refused(node: ServerProcess, game: Game) -> None:
    before = await room_json(node, game.room)
    near_miss = game.token(1)[:-1] + ("A" if game.token(1)[-1] != "A" else "B")
    tokens = {**FORGED_TOKENS, "the real one, last character changed": near_miss}
    messages, labels = [], []
    for label, token in {**tokens, **FORGED_TYPES}.items():
        for action in ({"type": "move", "move": "1"}, {"type": "resign"}):
            messages.append({**action, "room": game.room, "token": token})
            labels.append(label)
        messages.append({"type": "resume", "room": game.room, "token": token})
        labels.append(label)
    codes = await refusals(node, messages)
    for label, message, code in zip(labels, messages, codes, strict=True):
        if label == "null" and message["type"] == "resume":
            assert code == "accepted", code  # no token: a spectator (checked below)
        elif label in FORGED_TYPES:
            assert code == "message/invalid", (label, message["type"], code)
        else:
            assert code in ("auth/token", "message/invalid"), (label, message["type"], code)
    assert await room_json(node, game.room) == before
    await game.play_out()


# -- SQL injection through the HTTP API ----------------------------------------------------


SQL_PAYLOADS = [
    "' OR 1=1 --",
    "' OR '1'='1",
    '" OR ""="',
    "') OR ('1'='1",
    "'; DROP TABLE games; --",
    "1; DROP TABLE games",
    "x' UNION SELECT record, ended_ms, id FROM games --",
    "' UNION SELECT sql, 1, name FROM sqlite_master --",
    "%' OR '%'='",
    "*",
    "' AND 1=(SELECT COUNT(*) FROM games) --",
    "\\'; DELETE FROM games WHERE '1'='1",
]


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _archive_snapshot(path: Path) -> tuple[list[str], list[tuple[Any, ...]]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = sorted(row[0] for row in db.execute("SELECT name FROM sqlite_master"))
        rows = db.execute("SELECT id, game, player0, player1, ended_ms FROM games ORDER BY id")
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return tables, rows.fetchall()


async def _archived(node: ServerProcess, player: str, want: int) -> dict[str, Any]:
    deadline = time.monotonic() + ARCHIVE_WAIT_S
    while True:
        status, page = await get(f"{node.http_url}/api/games?player={player}")
        if status == 200 and len(page["games"]) >= want or time.monotonic() > deadline:
            assert status == 200 and len(page["games"]) == want, page
            return dict(page)
        await asyncio.sleep(0.2)


async def test_sql_injection_in_the_games_api_changes_nothing(node: ServerProcess) -> None:
    key = new_player_key()
    played = await Game.start(node, key)
    try:
        await played.play_out()
    finally:
        await played.close()
    player = player_id(key)
    page = await _archived(node, player, 1)
    archive: Path = node.archive  # type: ignore[attr-defined]
    snapshot = _archive_snapshot(archive)
    status, record = await get(f"{node.http_url}/api/games/{played.room}")
    assert status == 200
    requests: list[tuple[str, tuple[int, ...]]] = []
    for payload in SQL_PAYLOADS:
        value = quote(payload, safe="")
        for name in ("player", "game", "before", "limit"):
            requests.append((f"/api/games?{name}={value}", (400,)))
        requests.append((f"/api/games?player={player}&before={_cursor('1:' + payload)}", (400,)))
        requests.append((f"/api/games?before={quote(_cursor('1764116998000:' + payload))}", (400,)))
        for tail in ("", "/export?format=json", "/positions", "/analysis"):
            requests.append((f"/api/games/{value}{tail}", (404,)))
            requests.append((f"/api/games/{played.room}{value}{tail}", (404,)))
        requests.append((f"/api/rooms/{value}", (404,)))
        requests.append((f"/api/rooms/{value}/record", (404,)))
    for path, statuses in requests:
        status, body = await get(node.http_url + path)
        assert status in statuses, (path, status, body)
        assert isinstance(body, dict) and body.get("type") == "error", (path, body)
    async with aiohttp.ClientSession() as session:
        for payload in SQL_PAYLOADS[:4]:
            url = f"{node.http_url}/api/games/{quote(payload, safe='')}/analysis"
            async with session.post(url) as resp:
                assert resp.status == 404, (payload, resp.status)
    # Redis keys of the room are not rooms (a key name that a path could point at).
    for suffix in (":events", ":presence", ":chat", ":*"):
        status, _ = await get(f"{node.http_url}/api/rooms/{played.room}{quote(suffix)}")
        assert status == 404, suffix
    assert _archive_snapshot(archive) == snapshot
    assert await get(f"{node.http_url}/api/games?player={player}") == (200, page)
    assert await get(f"{node.http_url}/api/games/{played.room}") == (200, record)


# -- path traversal on the static files ---------------------------------------------------


TRAVERSALS = [
    "/static/../../../../etc/passwd",
    "/static/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/static/%252e%252e/%252e%252e/etc/passwd",
    "/static/..\\..\\..\\..\\etc\\passwd",
    "/static/..%5c..%5c..%5c..%5cetc%5cpasswd",
    "/static/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
    "/static/....//....//etc/passwd",
    "/static/.%2e/.%2e/.%2e/.%2e/etc/passwd",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/etc/passwd%00.js",
    "/static/app.js%00",
    "/../../../../etc/passwd",
    "/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/..%252f..%252fetc%252fpasswd",
    "//etc/passwd",
    "/etc/passwd",
    "/proc/self/environ",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/proc/self/environ",
    "http://127.0.0.1/static/../../../../etc/passwd",
    # The client package's own source, one directory above the static files.
    "/static/../connection.py",
    "/static/..%2fconnection.py",
    "/static/./../connection.py",
    "/%2e%2e/connection.py",
    "/%2e%2e%2fconnection.py",
    "/..%2fconnection.py",
]
#: What must never come back: /etc/passwd's first line, the environment, Python source.
LEAKS = (b"root:x:0:0", b"root:*:0:0", b"PATH=", b"KIBITZ_", b"import ", b"def ")


def raw_get(node: ServerProcess, target: str) -> tuple[int, bytes]:
    """GET ``target`` as written (no client normalises it); (status, body)."""
    url = urlsplit(node.http_url)
    with socket.create_connection((url.hostname or "", url.port or 0), timeout=10) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def test_path_traversal_on_the_static_files(node: ServerProcess) -> None:
    status, body = await asyncio.to_thread(raw_get, node, "/static/app.js")
    assert status == 200 and body  # the control: a real file is served
    for target in TRAVERSALS:
        status, body = await asyncio.to_thread(raw_get, node, target)
        assert status == 404, (target, status, body[:200])
        assert not any(leak in body for leak in LEAKS), (target, body[:200])
    for directory in ("/static/", "/static"):  # no listing
        status, body = await asyncio.to_thread(raw_get, node, directory)
        assert status in (403, 404) and b"app.js" not in body, (directory, status)


# -- hostile WebSocket frames ------------------------------------------------------------


async def test_nan_infinity_msgpack_oddities_get_typed_errors(
    node: ServerProcess, game: Game
) -> None:
    before = await room_json(node, game.room)
    token = game.token(1)
    texts = [
        '{"type": "ping", "rid": NaN}',
        '{"type": "ping", "rid": Infinity}',
        '{"type": "ping", "rid": -Infinity}',
        f'{{"type": "move", "room": "{game.room}", "token": "{token}", "move": "1", '
        '"version": NaN}',
        f'{{"type": "resume", "room": "{game.room}", "since": Infinity}}',
        '{"type": "create", "game": "tictactoe", "seat": NaN}',
        '{"type": "create", "game": "tictactoe", "options": {"size": Infinity}}',
        '{"type": "ping", "rid": 1e400}',
        '{"type": "ping", "rid": 1.5}',
        '{"type": NaN}',
    ]
    await _expect_typed_errors(node, "json", texts)
    packed = [
        msgpack.packb({"type": "ping", "rid": float("nan")}),
        msgpack.packb({"type": "ping", "rid": float("inf")}),
        msgpack.packb({"type": "ping", "rid": msgpack.ExtType(42, b"x")}),
        msgpack.packb(msgpack.ExtType(1, b"\x00" * 16)),
        msgpack.packb({"type": b"ping"}),  # bytes where text is wanted
        msgpack.packb({b"type": "ping"}),  # a bytes key
        msgpack.packb({"type": "move", "room": game.room, "token": token, "move": b"1"}),
        msgpack.packb({"type": "ping", "rid": 2**64 - 1}),
        msgpack.packb({"type": "ping", "rid": -(2**63)}),
        b"\x91" * 60_000 + b"\xc0",  # lists nested 60,000 deep (under the frame limit)
        b"\xdf\xff\xff\xff\xff",  # a map claiming 4 billion entries
        b"\xdb\xff\xff\xff\xff",  # a string claiming 4 GB
    ]
    await _expect_typed_errors(node, "msgpack", packed)
    assert await room_json(node, game.room) == before
    assert await healthy(node)
    await game.play_out()


TYPED = ("frame/malformed", "message/invalid", "message/unknown_type", "options/invalid")


async def _expect_typed_errors(node: ServerProcess, codec: str, frames: list[Any]) -> None:
    """Each frame, on a connection of ``codec``, gets an error reply other than
    ``server/internal``, and the connection still answers a ping after it."""
    for start in range(0, len(frames), 10):
        url = ws_url(node.http_url, codec)  # type: ignore[arg-type]
        async with await KibitzClient.open(url, codec) as attacker:  # type: ignore[arg-type]
            for frame in frames[start : start + 10]:
                await attacker.send_raw(frame)
                reply = await attacker.next_message(lambda m: m["type"] == "error", timeout=10)
                assert reply["code"] in TYPED, (frame, reply)
                assert (await attacker.request({"type": "ping"}, timeout=10))["type"] == "pong"


def _raw_frame(
    opcode: int, payload: bytes, fin: bool = True, masked: bool = True, rsv: int = 0
) -> bytes:
    """A client frame written by hand, so that it may break RFC 6455."""
    head = bytes([(0x80 if fin else 0) | rsv << 4 | opcode])
    size = len(payload)
    mask_bit = 0x80 if masked else 0
    if size < 126:
        head += bytes([mask_bit | size])
    elif size < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack("!H", size)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", size)
    if not masked:
        return head + payload
    key = secrets.token_bytes(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


PING = json.dumps({"type": "ping"}).encode()
#: (label, bytes sent after the handshake, the close codes allowed).
VIOLATIONS: list[tuple[str, bytes, tuple[int, ...]]] = [
    ("continuation with no message", _raw_frame(0x0, PING), (1002,)),
    ("a new message inside a fragmented one",
     _raw_frame(0x1, PING[:4], fin=False) + _raw_frame(0x1, PING), (1002,)),
    ("fragmented ping", _raw_frame(0x9, b"a", fin=False), (1002,)),
    ("ping over 125 bytes", _raw_frame(0x9, b"a" * 126), (1002,)),
    ("unmasked frame", _raw_frame(0x1, PING, masked=False), (1002,)),
    ("reserved data opcode", _raw_frame(0x3, PING), (1002,)),
    ("reserved control opcode", _raw_frame(0xB, b""), (1002,)),
    ("RSV1 with no extension", _raw_frame(0x1, PING, rsv=4), (1002,)),
    ("RSV3", _raw_frame(0x1, PING, rsv=1), (1002,)),
    ("close code 999", _raw_frame(0x8, struct.pack("!H", 999)), (1002,)),
    ("close code 1005 on the wire", _raw_frame(0x8, struct.pack("!H", 1005)), (1002,)),
    ("close with one byte", _raw_frame(0x8, b"\x03"), (1002,)),
    ("close reason not UTF-8", _raw_frame(0x8, struct.pack("!H", 1000) + b"\xff"), (1002, 1007)),
    ("length of 2**62", b"\x81\xff" + struct.pack("!Q", 1 << 62) + b"\x00" * 4, (1009,)),
    ("fragments past 1 MiB",
     _raw_frame(0x1, b"[" + b" " * 60_000, fin=False)
     + b"".join(_raw_frame(0x0, b" " * 60_000, fin=False) for _ in range(20)), (1009,)),
]  # fmt: skip


def _violation(node: ServerProcess, data: bytes) -> int | None:
    """Send ``data`` after a handshake; the close code the server answers with (None:
    no close frame before the connection ended)."""
    url = urlsplit(node.http_url)
    with socket.create_connection((url.hostname or "", url.port or 0), timeout=10) as sock:
        sock.sendall(upgrade_request())
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        assert received.startswith(b"HTTP/1.1 101"), received[:100]
        with_welcome = received.partition(b"\r\n\r\n")[2]
        # The server may close while we are still sending (the oversized cases).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        return _close_code(sock, with_welcome)


def _close_code(sock: socket.socket, data: bytes) -> int | None:
    """Read frames until a close frame or the end; its code."""
    while True:
        while len(data) >= 2:
            size, start = data[1] & 0x7F, 2
            if size == 126:
                size, start = struct.unpack("!H", data[2:4])[0], 4
            elif size == 127:
                size, start = struct.unpack("!Q", data[2:10])[0], 10
            if len(data) < start + size:
                break
            opcode, payload, data = data[0] & 0x0F, data[start : start + size], data[start + size :]
            if opcode == 0x8:
                return int(struct.unpack("!H", payload[:2])[0]) if len(payload) >= 2 else 1005
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return None
        if not chunk:
            return None
        data += chunk


async def test_rfc_6455_violations_get_a_clean_close(node: ServerProcess, game: Game) -> None:
    before = await room_json(node, game.room)
    for label, data, codes in VIOLATIONS:
        code = await asyncio.to_thread(_violation, node, data)
        assert code in codes, (label, code)
    assert await room_json(node, game.room) == before
    assert await healthy(node)
    await game.play_out()


def _ping_flood(node: ServerProcess, seconds: float) -> int:
    """WebSocket pings as fast as the socket takes them, never reading; bytes sent."""
    url = urlsplit(node.http_url)
    flood = _raw_frame(0x9, b"p" * 125) * 1000
    sent = 0
    with socket.create_connection((url.hostname or "", url.port or 0), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(upgrade_request())
        sock.settimeout(1.0)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                sock.sendall(flood)
            except (TimeoutError, BrokenPipeError, ConnectionResetError):
                break  # the server stopped reading us, or closed the connection
            sent += len(flood)
    return sent


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


FLOODERS = 4
FLOOD_S = 5.0
#: What the node may hold for each: the documented limit of what waits for a client that
#: stopped reading (4 MiB, docs/protocol.md, closing code 1013), with room to spare.
FLOOD_BOUND_KB = FLOODERS * 4 * 1024 + 24 * 1024


async def test_a_ping_flood_from_clients_that_do_not_read(node: ServerProcess, game: Game) -> None:
    """WebSocket pings, each answered with a pong the flooder never reads: what the node
    keeps for them is bounded, and the game goes on meanwhile."""
    before = await room_json(node, game.room)
    baseline = peak = _rss_kb(node.process.pid)
    floods = asyncio.gather(
        *(asyncio.to_thread(_ping_flood, node, FLOOD_S) for _ in range(FLOODERS))
    )
    started = time.monotonic()
    await game.b.move(game.room, "1", before["version"])
    await game.a.wait_state(game.room, lambda s: s["version"] > before["version"], timeout=5)
    moved_s = time.monotonic() - started
    while not floods.done():
        peak = max(peak, _rss_kb(node.process.pid))
        await asyncio.sleep(0.05)
    sent = await floods
    assert moved_s < 2.0, moved_s
    assert min(sent) > 0
    assert await healthy(node)
    assert peak - baseline < FLOOD_BOUND_KB, (
        f"the node grew by {(peak - baseline) // 1024} MB for {FLOODERS} ping floods "
        f"({sum(sent) // 2**20} MB of pings sent)"
    )
    await game.play_out()


def _say_and_hang_up(node: ServerProcess, data: bytes) -> None:
    """A handshake; once answered, ``data`` and the end of the connection at once."""
    url = urlsplit(node.http_url)
    with socket.create_connection((url.hostname or "", url.port or 0), timeout=10) as sock:
        sock.sendall(upgrade_request())
        received = b""
        while b"welcome" not in received:
            received += sock.recv(65536)
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2.0)
        try:
            while sock.recv(65536):
                pass
        except (TimeoutError, ConnectionResetError):
            pass


async def test_messages_from_a_client_that_hangs_up_at_once_log_no_error(
    node: ServerProcess,
) -> None:
    """Requests with a close frame (or the connection's end) right behind them: the
    requests may be dropped, but nothing fails in the node (no traceback, no ERROR: any
    client could otherwise fill the log)."""
    logged = len(node.log)
    ping, close = _raw_frame(0x1, PING), _raw_frame(0x8, struct.pack("!H", 1000))
    for data in (ping * 3 + close, ping * 3, ping + b"\x81"):  # the last frame cut short
        for _ in range(10):
            await asyncio.to_thread(_say_and_hang_up, node, data)
    # A failed task is logged when it is collected: some traffic makes the node collect.
    for _ in range(50):
        assert await healthy(node)
    await asyncio.sleep(1.0)  # the node's log is read by a thread
    log = "".join(node.log[logged:])
    assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
