"""Leaks and protocol gaps found from outside (issue 19, items 7, 10, 12 and 13), against a
real ``kibitz serve`` with real workers on loopback and a real Redis.

- The AI's line reaches no connection while a person plays it: not the player's, nor a
  second, token-less connection of the same address watching the same game; it is
  revealed in the record once the game is over.
- ``resume`` with a ``since`` at or past the room's version gets ``"missed": []``.
- Every event kind, every result reason and every result termination the code can produce
  is in docs/protocol.md (each termination one of ``TERMINATIONS``), and a game ended by
  the idle limit arrives as documented (event ``over``, reason ``abandoned``).
- The game record carries the chat of both channels, live and once archived, including a
  line said after the game ended.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import msgpack
import pytest
import websockets

from kibitz.client.connection import KibitzClient, new_player_key
from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.games import TERMINATIONS
from kibitz.shared.protocol.client_in import parse_client_message, player_id
from kibitz.shared.protocol.codec import ProtocolError
from tests.conftest import ServerProcess, start_server

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DOC = ROOT / "docs" / "protocol.md"
ARCHIVE_WAIT_S = 15.0


async def get_json(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200, (url, resp.status, await resp.text())
        return await resp.json()


# -- item 7: the AI's line ------------------------------------------------------------------


async def thinking_until_the_move(client: KibitzClient, room: str) -> list[dict[str, Any]]:
    """The ``thinking`` reports ``client`` gets until the AI's first move arrives."""
    reports: list[dict[str, Any]] = []
    while True:
        message = await client.next_message(
            lambda m: (
                m.get("room") == room
                and (m["type"] == "thinking" or (m["type"] == "state" and bool(m["moves"])))
            ),
            timeout=30,
        )
        if message["type"] == "state":
            return reports
        reports.append(message)


@pytest.mark.asyncio
async def test_the_ais_line_reaches_no_connection_while_a_person_plays_it(live_server) -> None:
    """The player watches their own game from a second connection without a token (same
    address): neither connection gets the AI's line (``pv``) while the game runs; the
    record shows it once the game is over."""
    url = live_server.http_url
    async with (
        await KibitzClient.open(url) as player,
        await KibitzClient.open(url) as second_tab,
    ):
        # The AI moves first, at level 8 (about two seconds of search: several reports).
        room = (await player.create("othello", "ai:8", seat=1))["room"]
        await second_tab.watch(room)
        as_player, as_spectator = await asyncio.gather(
            thinking_until_the_move(player, room), thinking_until_the_move(second_tab, room)
        )
        assert as_spectator, "the watcher got no thinking report: nothing was tested"
        assert [t["pv"] for t in as_spectator if t["pv"]] == []
        assert [t["pv"] for t in as_player if t["pv"]] == []
        # The rest of the report still comes.
        assert all(t["depth"] >= 1 and "score" in t for t in as_spectator)
        await player.resign(room)
        await player.wait_state(room, lambda s: s["status"] == "over")
    record = await get_json(f"{url}/api/games/{room}")
    ai_moves = [m for m in record["moves"] if m["seat"] == 0]
    assert ai_moves and ai_moves[0]["pv"][0] == ai_moves[0]["move"]


# -- item 10: resume ahead of the room ------------------------------------------------------


@pytest.mark.asyncio
async def test_resume_at_or_past_the_rooms_version_gets_an_empty_missed_list(
    live_server,
) -> None:
    async with (
        await KibitzClient.open(live_server.http_url) as player,
        await KibitzClient.open(live_server.http_url) as other,
    ):
        room = (await player.create("tictactoe", seat=0))["room"]
        await other.join(room)
        state = await player.wait_state(room, lambda s: s["status"] == "playing")
        version = state["version"]
        token = player.tokens[room][1]
        for since, who in ((version, player), (version + 5, player), (version + 1000, other)):
            message: dict[str, Any] = {"type": "resume", "room": room, "since": since}
            if who is player:
                message["token"] = token
            got = await who.request(message)
            assert got["version"] == version
            assert got["event"] == {"kind": "resync", "missed": []}, (since, got["event"])


# -- item 12: every event kind and result reason is documented ------------------------------


def _section(doc: str, heading: str) -> str:
    start = doc.index(heading)
    end = doc.find("\n### ", start + len(heading))
    return doc[start : end if end != -1 else len(doc)]


def _pattern(node: ast.expr) -> str | None:
    """A regex for the text an expression makes: a literal as it is, an f-string with
    ``.+?`` for each replacement field; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(
            re.escape(part.value) if isinstance(part, ast.Constant) else ".+?"
            for part in node.values
        )
    return None


def _texts(node: ast.expr) -> Iterator[str]:
    """The patterns of an expression: both branches of a conditional."""
    if isinstance(node, ast.IfExp):
        yield from _texts(node.body)
        yield from _texts(node.orelse)
    elif (pattern := _pattern(node)) is not None:
        yield pattern


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


#: Calls whose argument (by position) is a result's reason, and what the call adds to it
#: (Oware's ``_count_out`` appends the final count: "no seeds to sow (26-22)").
REASON_ARGUMENTS = {
    "Outcome": (1, ""),
    "_count_out": (1, r"\ \(.+?\)"),
    "_end": (2, ""),
    "result_of": (1, ""),
}
#: Calls whose argument (by position) is a result's termination code.
TERMINATION_ARGUMENTS = {"Outcome": 2, "_count_out": 2, "_end": 3, "result_of": 2}


def code_reasons() -> set[str]:
    """Every result reason the rules and the server can write, as patterns: the reason
    of every ``Outcome``, ``_end`` and ``_count_out`` call, of every ``{"reason": ...}``
    dict and every string a ``*_reason`` function returns."""
    found: set[str] = set()
    games = sorted((ROOT / "shared" / "games").glob("*.py"))
    for path in [*games, *sorted((ROOT / "server").rglob("*.py"))]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) in REASON_ARGUMENTS:
                index, suffix = REASON_ARGUMENTS[_call_name(node)]
                if len(node.args) > index:
                    found.update(text + suffix for text in _texts(node.args[index]))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "reason":
                        found.update(_texts(value))
            elif isinstance(node, ast.FunctionDef) and node.name.endswith("_reason"):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Return) and inner.value is not None:
                        found.update(_texts(inner.value))
    return found


def code_terminations() -> set[str]:
    """Every termination code the rules and the server can write: the code of every
    ``Outcome``, ``_end``, ``_count_out`` and ``result_of`` call and of every
    ``{"termination": ...}`` dict. A name or attribute passed on is typed (mypy checks it
    is a ``Termination``); any other expression is reported as is."""
    found: set[str] = set()
    games = sorted((ROOT / "shared" / "games").glob("*.py"))
    for path in [*games, *sorted((ROOT / "server").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            value: ast.expr | None = None
            if isinstance(node, ast.Call) and _call_name(node) in TERMINATION_ARGUMENTS:
                index = TERMINATION_ARGUMENTS[_call_name(node)]
                value = node.args[index] if len(node.args) > index else None
            elif isinstance(node, ast.Dict):
                for key, item in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "termination":
                        value = item
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(value.value)
            elif value is not None and not isinstance(value, ast.Name | ast.Attribute):
                found.add(ast.unparse(value))  # a computed code: fails the check below
    return found


def code_event_kinds() -> set[str]:
    """Every ``event.kind`` the server can send, as patterns: the kind of every
    ``Event(...)`` and of every ``{"kind": ...}`` dict that is a state's event (the value
    of an ``"event"`` key, or assigned to ``...["event"]``)."""
    found: set[str] = set()
    for path in sorted((ROOT / "server").rglob("*.py")):
        tree = ast.parse(path.read_text())
        events: list[ast.expr] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _call_name(node) == "Event" and node.args:
                found.update(_texts(node.args[0]))
            elif isinstance(node, ast.Dict):
                events += [
                    v
                    for k, v in zip(node.keys, node.values, strict=True)
                    if isinstance(k, ast.Constant) and k.value == "event"
                ]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    keyed = isinstance(target, ast.Subscript) and (
                        isinstance(target.slice, ast.Constant) and target.slice.value == "event"
                    )
                    if keyed and node.value is not None:
                        events.append(node.value)
        for event in events:
            if isinstance(event, ast.Dict):
                for k, v in zip(event.keys, event.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "kind":
                        found.update(_texts(v))
    return found


def test_the_scans_find_what_we_know_is_there() -> None:
    """The scanners below are not blind: they find kinds and reasons known to exist."""
    reasons = code_reasons()
    for known in ("abandoned", "board full", "took the last match", "checkmate", "25 seeds"):
        assert re.escape(known) in reasons, known
    assert ".+?\\ resigned" in reasons and "\\-move\\ endgame\\ rule" in "".join(reasons)
    kinds = code_event_kinds()
    for known in ("over", "resync", "presence", "created", "move", "flag"):
        assert re.escape(known) in kinds, known


def test_every_result_reason_is_documented() -> None:
    section = _section(PROTOCOL_DOC.read_text(), "### Events and results")
    quoted = re.findall(r"`([^`]+)`", section)
    missing = sorted(p for p in code_reasons() if not any(re.fullmatch(p, q) for q in quoted))
    assert not missing, f"reasons the code writes that docs/protocol.md does not list: {missing}"


def test_every_termination_is_a_code_and_documented() -> None:
    """Every termination the code writes is one of ``TERMINATIONS``, and every code is
    listed (quoted) in the Events and results section of docs/protocol.md."""
    used = code_terminations()
    assert {"checkmate", "resignation", "time", "abort", "score", "no-moves"} <= used
    assert used <= set(TERMINATIONS), sorted(used - set(TERMINATIONS))
    section = _section(PROTOCOL_DOC.read_text(), "### Events and results")
    table = section[section.index("Every `result.termination`") :]
    listed = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    assert listed <= set(TERMINATIONS), sorted(listed - set(TERMINATIONS))
    missing = sorted(set(TERMINATIONS) - listed)
    assert not missing, f"terminations docs/protocol.md does not list: {missing}"


def test_every_event_kind_is_documented() -> None:
    section = _section(PROTOCOL_DOC.read_text(), "### Events and results")
    listed = set(re.findall(r"^\| ([^|]+) \|", section, re.M))
    names = {name for cell in listed for name in re.findall(r"`([a-z_]+)`", cell)}
    missing = sorted(p for p in code_event_kinds() if not any(re.fullmatch(p, n) for n in names))
    assert not missing, f"event kinds the code sends that docs/protocol.md does not list: {missing}"


@pytest.fixture(scope="module")
def idle_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server that abandons a game after a second without a move, on a Redis of its
    own (its sweeper must not end other tests' games)."""
    redis = EmbeddedRedis(tmp_path_factory.mktemp("idle-redis"), persist=False).start()
    server = start_server(redis.url, args=["--idle-game-limit", "1"])
    yield server
    server.stop()
    redis.stop()


@pytest.mark.asyncio
async def test_an_idle_game_ends_as_the_doc_says(idle_server) -> None:
    async with (
        await KibitzClient.open(idle_server.http_url) as a,
        await KibitzClient.open(idle_server.http_url) as b,
    ):
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        await a.move(room, "5", state["version"])
        await b.wait_state(room, lambda s: len(s["moves"]) == 1)
        over = await a.wait_state(room, lambda s: s["status"] == "over", timeout=15)
    kind, reason = over["event"]["kind"], over["result"]["reason"]
    assert (kind, reason) == ("over", "abandoned")
    section = _section(PROTOCOL_DOC.read_text(), "### Events and results")
    assert re.search(rf"^\| `{kind}` \|", section, re.M), kind
    assert f"`{reason}`" in section


# -- the limits found undocumented -------------------------------------------------------------


def test_the_limits_are_documented_and_named_in_the_errors() -> None:
    """``rid``, names and ``options`` have limits; the doc says them, and a refusal says
    the real limit (101 options were refused as "must be an object")."""
    limits = _section(PROTOCOL_DOC.read_text(), "### Limits")
    assert re.search(r"^\| `rid` \| a string of at most 512 characters", limits, re.M)
    assert re.search(r"^\| `name` .* \| 1 to 40 characters", limits, re.M)
    assert re.search(r"^\| `options` .* \| an object of at most 16 keys", limits, re.M)
    assert "a msgpack connection also accepts JSON" in PROTOCOL_DOC.read_text()
    options = {f"k{i}": 1 for i in range(101)}
    with pytest.raises(ProtocolError) as refused:
        parse_client_message({"type": "create", "game": "tictactoe", "options": options})
    assert refused.value.code == "message/invalid"
    assert "at most 16" in str(refused.value) and "101 keys" in str(refused.value)
    with pytest.raises(ProtocolError) as refused:
        parse_client_message({"type": "ping", "rid": "r" * 513})
    assert refused.value.code == "message/invalid"


@pytest.mark.asyncio
async def test_a_msgpack_connection_accepts_json_text_frames(live_server) -> None:
    async with websockets.connect(live_server.ws_url + "?codec=msgpack") as ws:
        assert msgpack.unpackb(await ws.recv())["type"] == "welcome"
        await ws.send(json.dumps({"type": "ping", "rid": "text-frame"}))
        pong = await asyncio.wait_for(ws.recv(), 10)
        assert isinstance(pong, bytes)  # answered in the URL's codec
        assert msgpack.unpackb(pong)["rid"] == "text-frame"


# -- item 13: the chat in the game record ---------------------------------------------------


def said(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [(line["channel"], line["text"]) for line in record["chat"]]


async def archived_record(url: str, player: str, game_id: str, want: int) -> dict[str, Any]:
    """The game's record as the database has it (the list reads only the database), once
    it has at least ``want`` chat lines."""
    deadline = time.monotonic() + ARCHIVE_WAIT_S
    while True:
        page = await get_json(f"{url}/api/games?player={player}&limit=5")
        found = [g for g in page["games"] if g["id"] == game_id]
        if found and len(found[0]["chat"]) >= want:
            return found[0]
        assert time.monotonic() < deadline, f"not archived with {want} lines: {found}"
        await asyncio.sleep(0.2)


@pytest.mark.asyncio
async def test_the_record_keeps_both_chat_channels_live_and_archived(live_server) -> None:
    url = live_server.http_url
    key = new_player_key()
    async with (
        await KibitzClient.open(url) as a,
        await KibitzClient.open(url) as b,
        await KibitzClient.open(url) as watcher,
    ):
        room = (await a.create("tictactoe", seat=0, name="ann", player_key=key))["room"]
        await b.join(room)
        await watcher.watch(room)
        await a.chat(room, "good luck <b>!</b>")
        await watcher.chat(room, "what a move", name="kib")
        # The line comes back to its channel; it may arrive before the reply to the chat
        # (which then passes it by), so look where the client keeps every line it heard.
        deadline = time.monotonic() + 10
        while not watcher.chats.get((room, "spectators")):
            assert time.monotonic() < deadline, "the spectators' line never came back"
            await asyncio.sleep(0.05)
        live = await get_json(f"{url}/api/games/{room}")
        assert said(live) == [("players", "good luck <b>!</b>"), ("spectators", "what a move")]
        assert live["chat"][0]["seat"] == 0 and live["chat"][0]["name"] == "ann"
        assert live["chat"][1]["seat"] is None and live["chat"][1]["name"] == "kib"

        await a.resign(room)
        await a.wait_state(room, lambda s: s["status"] == "over")
        archived = await archived_record(url, player_id(key), room, 2)
        assert said(archived) == said(live)
        # A line said once the game is in the database reaches it too.
        await b.chat(room, "gg")
        archived = await archived_record(url, player_id(key), room, 3)
        assert said(archived)[-1] == ("players", "gg")
        assert said(await get_json(f"{url}/api/games/{room}")) == said(archived)
