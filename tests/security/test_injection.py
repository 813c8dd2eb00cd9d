"""Injection through what people type and what URLs carry, against a real ``kibitz serve``.

- Player names: a name that would break out of a PGN/PDN tag (quotes, brackets, new
  lines) is refused or written so that python-chess and pydraughts read back exactly the
  name and the moves we wrote; names with control characters, bidirectional overrides or
  more than 40 characters are refused by every message that carries one (``create``,
  ``join``, ``seek``, ``accept``, ``chat``), and nothing changes.
- Query parameters: superscript or fullwidth digits, negative or huge numbers, cursors
  holding 40-digit numbers or garbage, empty values: 400 ``query/invalid`` on every
  endpoint that takes them, never a 500, and no traceback in the server's log.
"""

from __future__ import annotations

import base64
import io
import random
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import aiohttp
import chess.pgn
import pytest
from draughts.PDN import PDNReader

from kibitz.client.connection import KibitzClient, ServerError, newer_than
from kibitz.shared.games import find_game
from tests.conftest import ServerProcess, start_server

pytestmark = pytest.mark.asyncio

FOOLS_MATE = ["f2f3", "e7e5", "g2g4", "d8h4"]  # White (seat 0) is mated
#: The attack of issue 19: a name that closes its tag and writes a Result of its own.
PGN_BREAKOUT = 'ann"]\n[Result "1-0"]\n\n'

#: Names that must be accepted, and then read back exactly from every export.
HOSTILE_NAMES = [
    'ann"] [Result "1-0"]',
    'x" ] [White "y',
    "back\\slash\\",
    '\\"',
    '[Event "x"] {comment} ; % 1-0 *',
    'ann\\"]',
    "名前 ☃ é",
    "a" * 40,
]

#: Names refused everywhere (message/invalid), as (label, name).
BAD_NAMES = [
    ("512 characters", "a" * 512),
    ("41 characters", "b" * 41),
    ("NUL", "ann\x00"),
    ("ESC", "ann\x1b[31mred"),
    ("CR", "ann\rbob"),
    ("LF", PGN_BREAKOUT),
    ("trailing LF", "ann\n"),
    ("U+202E", "ann\u202egnp.exe"),
    ("U+2028", "ann\u2028bob"),
    ("U+2066", "\u2066ann"),
    ("DEL", "ann\x7f"),
    ("blank", "   "),
    ("not a string", 12),
    ("RLM U+200F", "ann\u200fbob"),
    ("ALM U+061C", "\u061cann"),
    ("ZWSP U+200B", "ad\u200bmin"),
    ("BOM U+FEFF", "\ufeffadmin"),
    ("tag characters", "ann\U000e0041\U000e007f"),
    ("only ZWSP", "\u200b"),
    ("only Hangul filler", "\u3164"),
    ("Hangul fillers and spaces", " \u115f\u1160 \uffa0 "),
    ("a combining mark alone", "\u0301"),
    ("only ZWJ and ZWNJ", "\u200d\u200c"),
]

#: Names with a joiner that scripts and emoji need: accepted as given.
PERSIAN = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0645"  # "I want", with a ZWNJ
JOINED_NAMES = ["\U0001f469\u200d\U0001f4bb", PERSIAN, "a\u0301"]

#: Chat lines refused (chat/invalid) and accepted.
BAD_LINES = [
    "hi\u200fthere", "\u061c", "hi\u200b", "\ufeffhi", "hi\U000e0041", "\u3164", "\u200b \u200b",
]  # fmt: skip
GOOD_LINES = ["\U0001f469\u200d\U0001f4bb", PERSIAN]


@pytest.fixture(scope="module")
def server(redis_server: Any) -> Iterator[ServerProcess]:
    process = start_server(redis_server.url)
    yield process
    process.stop()
    log = "".join(process.log)
    assert "Traceback" not in log and " ERROR " not in log, log


async def http_get(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        if resp.content_type == "application/json":
            return resp.status, await resp.json()
        return resp.status, await resp.text()


def pgn_unescape(token: str) -> str:
    """A PGN string token's text: ``\\"`` is a quote and ``\\\\`` a backslash."""
    return re.sub(r"\\([\\\"])", r"\1", token)


def _reader_unescapes(read: Any) -> bool:
    """Whether a tag reader undoes the PGN string escapes itself (python-chess 1.11 and
    pydraughts give the token as written; a later python-chess may not)."""
    return bool(read('[White "a\\"b"]\n[Black "c"]\n\n1-0\n') == 'a"b')


def _chess_white(text: str) -> str:
    game = chess.pgn.read_game(io.StringIO(text))
    assert game is not None
    return str(game.headers["White"])


def _draughts_white(text: str) -> str:
    return str(PDNReader(pdn_text=text).games[0].tags["White"])


#: A tag pair as the PGN standard (8.1.1, 7) writes it: a symbol, a string token whose
#: only escapes are a backslash before a quote or a backslash, and no control characters.
SPEC_TAG = re.compile(r'\[([A-Za-z0-9_]+) "((?:[^"\\\x00-\x1f\x7f]|\\["\\])*)"\]')


def spec_tags(text: str) -> dict[str, str]:
    """The tag pairs of a game's header as a reader of the standard reads them; every
    line of the header must be one valid tag pair."""
    header = text.split("\n\n", 1)[0].split("\n")
    tags = {}
    for line in header:
        match = SPEC_TAG.fullmatch(line)
        assert match, f"not a valid tag pair: {line!r}"
        tags[match.group(1)] = pgn_unescape(match.group(2))
    return tags


def read_chess(text: str) -> tuple[dict[str, str], list[str]]:
    """The tags and moves of a PGN game as python-chess reads them (escapes undone)."""
    game = chess.pgn.read_game(io.StringIO(text))
    assert game is not None and not game.errors, (game.errors if game else None, text)
    undo = (lambda v: v) if _reader_unescapes(_chess_white) else pgn_unescape
    tags = {name: undo(value) for name, value in game.headers.items()}
    return tags, [m.uci() for m in game.mainline_moves()]


def read_draughts(text: str) -> tuple[dict[str, str], list[str], str]:
    """The tags, moves and result of a PDN game as pydraughts reads them."""
    [game] = PDNReader(pdn_text=text).games
    undo = (lambda v: v) if _reader_unescapes(_draughts_white) else pgn_unescape
    return {k: undo(v) for k, v in game.tags.items()}, list(game.moves), game.game_ending


async def refused(client: KibitzClient, message: dict[str, Any]) -> str:
    """The error code ``message`` is refused with (fails if it is accepted)."""
    with pytest.raises(ServerError) as caught:
        await client.request(message, timeout=10)
    return str(caught.value.code)


# -- names in PGN and PDN ----------------------------------------------------------------


async def play_chess_as(base: str, white: str, black: str) -> str:
    """A chess room where ``white`` (seat 0, created) is mated by ``black`` (joined)."""
    async with await KibitzClient.open(base) as a, await KibitzClient.open(base) as b:
        room = (await a.create("chess", seat=0, name=white))["room"]
        reply = await b.request({"type": "join", "room": room, "name": black})
        b.tokens[room] = (reply["seat"], reply["token"])
        for version, move in enumerate(FOOLS_MATE, start=1):
            mover = a if version % 2 else b
            await mover.move(room, move, version)
            state = await mover.wait_state(room, newer_than(version))
        assert state["status"] == "over"
        return room


async def test_the_pgn_breakout_name_is_refused(server: ServerProcess) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        message = {"type": "create", "game": "chess", "seat": 0, "name": PGN_BREAKOUT}
        assert await refused(a, message) == "message/invalid"


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_hostile_names_read_back_exactly_from_pgn(server: ServerProcess, name: str) -> None:
    room = await play_chess_as(server.http_url, name, name[::-1])
    status, record = await http_get(f"{server.http_url}/api/rooms/{room}/record")
    assert status == 200
    status, exported = await http_get(f"{server.http_url}/api/games/{room}/export?format=pgn")
    assert status == 200
    for text in (record["pgn"], exported):
        tags, moves = read_chess(text)
        assert tags == spec_tags(text)
        assert (tags["White"], tags["Black"]) == (name, name[::-1]), text
        assert tags["Result"] == "0-1" and moves == FOOLS_MATE, text


async def play_draughts_as(base: str, white: str, black: str, plies: int) -> tuple[str, list[str]]:
    """A draughts room between ``white`` and ``black``: ``plies`` random legal moves, then
    White resigns. The room and its moves."""
    game = find_game("draughts")
    state = game.initial(game.normalize_options({}))
    rng = random.Random(19)
    played: list[str] = []
    async with await KibitzClient.open(base) as a, await KibitzClient.open(base) as b:
        room = (await a.create("draughts", seat=0, name=white))["room"]
        reply = await b.request({"type": "join", "room": room, "name": black})
        b.tokens[room] = (reply["seat"], reply["token"])
        for version in range(1, plies + 1):
            move = game.format_move(state, rng.choice(game.legal_moves(state)))
            mover = a if version % 2 else b
            await mover.move(room, move, version)
            await mover.wait_state(room, newer_than(version))
            state = game.play(state, move)
            played.append(move)
        await a.resign(room)
        await a.wait_state(room, lambda s: s["status"] == "over")
    return room, played


@pytest.mark.parametrize("name", HOSTILE_NAMES[:5])
async def test_hostile_names_read_back_exactly_from_pdn(server: ServerProcess, name: str) -> None:
    room, played = await play_draughts_as(server.http_url, name, name[::-1], plies=6)
    status, text = await http_get(f"{server.http_url}/api/games/{room}/export?format=pdn")
    assert status == 200
    tags, moves, ending = read_draughts(text)
    assert tags == spec_tags(text)
    assert (tags["White"], tags["Black"]) == (name, name[::-1]), text
    assert moves == played and ending == "0-2", text


# -- one name rule everywhere ------------------------------------------------------------


@pytest.mark.parametrize(("label", "name"), BAD_NAMES, ids=[label for label, _ in BAD_NAMES])
async def test_bad_names_are_refused_everywhere(
    server: ServerProcess, label: str, name: Any
) -> None:
    base = server.http_url
    async with (
        await KibitzClient.open(base) as a,
        await KibitzClient.open(base) as b,
        await KibitzClient.open(base) as c,
    ):
        create = {"type": "create", "game": "tictactoe", "seat": 0, "name": name}
        assert await refused(a, create) == "message/invalid"
        room = (await a.create("tictactoe", seat=0, name="ann"))["room"]
        join = {"type": "join", "room": room, "name": name}
        assert await refused(b, join) == "message/invalid"
        _, listed = await http_get(f"{base}/api/rooms/{room}")
        assert listed["status"] == "waiting" and not listed["seats"][1]["taken"]
        seek = {"type": "seek", "game": "tictactoe", "name": name}
        assert await refused(a, seek) == "message/invalid"
        open_seek = await a.seek("tictactoe", name="ann")
        accept = {"type": "accept", "seek": open_seek["id"], "name": name}
        assert await refused(b, accept) == "message/invalid"
        _, seeks = await http_get(f"{base}/api/seeks")
        assert open_seek["id"] in {s["id"] for s in seeks["seeks"]}
        await c.watch(room)
        chat = {"type": "chat", "room": room, "text": "hello", "name": name}
        assert await refused(c, chat) == "message/invalid"
        await a.unseek(open_seek["id"])


async def test_names_lose_their_outer_spaces(server: ServerProcess) -> None:
    async with await KibitzClient.open(server.http_url) as a:
        room = (await a.create("tictactoe", seat=0, name="  ann b  "))["room"]
        _, state = await http_get(f"{server.http_url}/api/rooms/{room}")
        assert state["seats"][0]["name"] == "ann b"


# -- query parameters ----------------------------------------------------------------------


def cursor_of(text: str, padded: bool = True) -> str:
    encoded = base64.urlsafe_b64encode(text.encode()).decode()
    return quote(encoded if padded else encoded.rstrip("="))


BAD_NUMBERS = {
    "superscript": quote("²"),
    "superscript 10": quote("¹⁰"),
    "fullwidth": quote("５"),
    "arabic-indic": quote("٣"),
    "negative": "-1",
    "plus": "%2B5",
    "zero": "0",
    "huge": "1" + "0" * 40,
    "spaces": "%205",
    "float": "2.5",
    "empty": "",
    "bad percent": "%ZZ",
    "not utf-8": "%FF",
    "NUL": "5%00",
}
BAD_CURSORS = {
    "40 digits": cursor_of("1" * 40 + ":abcd1234"),
    "40 digits unpadded": cursor_of("9" * 40 + ":abcd1234", padded=False),
    "negative": cursor_of("-5:abcd1234"),
    "superscript": cursor_of("²:abcd1234"),
    "no id": cursor_of("1764116998000:"),
    "bad id": cursor_of("1764116998000:../../etc"),
    "garbage base64": "%25%25%25",
    "not base64": "!!!!",
    "not utf-8": quote(base64.urlsafe_b64encode(b"\xff\xfe:abcd").decode()),
    "too long": "A" * 400,
    "empty": "",
}


def bad_queries() -> list[tuple[str, str]]:
    """(endpoint and query, label) for every bad value of every parameter."""
    cases = []
    for label, value in BAD_NUMBERS.items():
        cases.append((f"/api/games?limit={value}", f"games limit {label}"))
        cases.append((f"/api/rooms?limit={value}", f"rooms limit {label}"))
    for label, value in BAD_CURSORS.items():
        cases.append((f"/api/games?before={value}", f"games before {label}"))
        cases.append((f"/api/rooms?before={value}", f"rooms before {label}"))
        cases.append((f"/api/rooms?cursor={value}", f"rooms cursor {label}"))
    for label, value in {"empty": "", "not hex": "x" * 32, "fullwidth": quote("０" * 32)}.items():
        cases.append((f"/api/games?player={value}", f"games player {label}"))
    for label, value in {"empty": "", "unknown": "go", "control": "%1Bchess"}.items():
        cases.append((f"/api/games?game={value}", f"games game {label}"))
    cases.append(("/api/games?limit=5&limit=6", "games limit repeated"))
    cases.append(("/api/rooms?before=x&cursor=y", "rooms before and cursor"))
    return cases


@pytest.mark.parametrize(("path", "label"), bad_queries(), ids=[c[1] for c in bad_queries()])
async def test_bad_query_parameters_are_refused(
    server: ServerProcess, path: str, label: str
) -> None:
    logged = len(server.log)
    status, body = await http_get(server.http_url + path)
    assert status == 400, (label, status, body)
    assert body["type"] == "error" and body["code"] == "query/invalid", (label, body)
    log = "".join(server.log[logged:])
    assert "Traceback" not in log and " ERROR " not in log, log[-2000:]


async def test_good_query_parameters_still_work(server: ServerProcess) -> None:
    for path in ("/api/games?limit=5", "/api/rooms?limit=100000", "/api/games?limit=000007"):
        status, body = await http_get(server.http_url + path)
        assert status == 200, (path, body)
    status, body = await http_get(server.http_url + "/api/rooms?limit=1")
    if body["next"] is not None:
        status, _ = await http_get(f"{server.http_url}/api/rooms?limit=1&before={body['next']}")
        assert status == 200
    status, body = await http_get(server.http_url + "/api/games/nosuchgame/export?format=%C2%B2")
    assert status == 404


async def test_joiners_pass_and_invisible_characters_do_not(server: ServerProcess) -> None:
    """ZWJ (emoji sequences) and ZWNJ (Persian, Indic scripts) pass in names and chat
    lines; other format characters and lines of nothing visible are refused."""
    async with await KibitzClient.open(server.http_url) as a:
        for name in JOINED_NAMES:
            created = await a.create("tictactoe", seat=0, name=name)
            room, token = created["room"], created["token"]
            _, listed = await http_get(f"{server.http_url}/api/rooms/{room}")
            assert listed["seats"][0]["name"] == name, listed
        for text in BAD_LINES:
            chat = {"type": "chat", "room": room, "token": token, "text": text}
            assert await refused(a, chat) == "chat/invalid", repr(text)
        for text in GOOD_LINES:
            await a.chat(room, text)
