"""Node to node: the pub/sub payloads are read into typed values or refused with
``node/invalid``, and the fast version peek agrees with the ``state`` class's key order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kibitz.shared import fastjson
from kibitz.shared.protocol import node
from kibitz.shared.protocol.client_out import ChatLines, State, Thinking
from kibitz.shared.protocol.codec import ProtocolError
from tests.shared.protocol.test_client_out import SEAT, STATE_FIELDS

SCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "bus" / "scripts"


def state(kind: str = "move", version: int = 3) -> dict[str, Any]:
    fields = {**STATE_FIELDS, "version": version}
    return State.message(**fields, seats=[SEAT, SEAT], event={"kind": kind})


def refused(parse: Any, data: str | bytes) -> str:
    with pytest.raises(ProtocolError) as err:
        parse(data)
    return err.value.code


def test_room_messages_read_as_their_types() -> None:
    message = node.parse_room_message(fastjson.dumps(state("move", 3)))
    assert message == node.RoomState("r1", 3, False, state("move", 3))
    presence = node.parse_room_message(fastjson.dumps(state("presence", 3)).decode())
    assert isinstance(presence, node.RoomState) and presence.presence
    thinking = Thinking("r1", 4, 1, 6, 0.5, ["5"], 10, 3).to_dict()
    assert node.parse_room_message(json.dumps(thinking)) == node.RoomThinking("r1", 4, thinking)
    chat = ChatLines("r1", "spectators", [{"id": 1}]).to_dict()
    assert node.parse_room_message(json.dumps(chat)) == node.RoomChat("r1", "spectators", chat)


@pytest.mark.parametrize(
    "data",
    [
        "", "{", "[1]", "3", "null", b"\xff", "[" * 100_000,
        '{"type":"state","room":"r1","version":3}',  # no event
        '{"type":"state","room":"r1","version":"3","event":{"kind":"move"}}',
        '{"type":"state","room":"r1","version":-1,"event":{"kind":"move"}}',
        '{"type":"state","room":"r1","version":true,"event":{"kind":"move"}}',
        '{"type":"state","room":"r1","version":3,"event":{"kind":1}}',
        '{"type":"state","version":3,"event":{"kind":"move"}}',  # no room
        '{"type":"state","room":"","version":3,"event":{"kind":"move"}}',
        '{"type":"thinking","room":"r1"}',
        '{"type":"chat","room":"r1","channel":"all","messages":[]}',
        '{"type":"chat","room":"r1","channel":"players","messages":"hi"}',
        '{"type":"seat","room":"r1","seat":0,"token":"t"}',  # never on a room's channel
        '{"room":"r1"}',
    ],
)  # fmt: skip
def test_a_bad_room_message_is_refused_with_a_code(data: str) -> None:
    assert refused(node.parse_room_message, data) == "node/invalid"


def test_the_version_peek_agrees_with_the_state_class() -> None:
    for version in (0, 7, 2**53):
        encoded = fastjson.dumps(state("move", version)).decode()
        assert node.state_version(encoded) == version
        assert node.parse_room_message(encoded).version == version  # type: ignore[union-attr]
    assert node.state_version(fastjson.dumps(state("presence")).decode()) is None
    thinking = Thinking("r1", 4, 1, 6, 0.5, [], 10, 3).to_dict()
    assert node.state_version(fastjson.dumps(thinking).decode()) is None


def test_node_died_and_seeks_events() -> None:
    assert node.NodeDied.parse("n-1") == node.NodeDied("n-1")
    assert node.NodeDied.parse(node.NodeDied("n-2").payload()).node == "n-2"
    for bad in ("", "x" * (node.MAX_ID + 1)):
        assert refused(node.NodeDied.parse, bad) == "node/invalid"
    accepted = node.SeekAccepted("s1", "c1", "n1", "r1", 1, "tok")
    assert node.parse_seeks_event(accepted.payload()) == accepted
    # The bytes published before the class: json.dumps of the dict, compact.
    assert accepted.payload() == (
        '{"kind":"accepted","seek":"s1","conn":"c1","node":"n1","room":"r1","seat":1,"token":"tok"}'
    )
    assert node.parse_seeks_event('{"kind":"changed"}') == node.SeeksChanged()
    for bad in (
        '{"kind":"gone"}', "[]", "{",
        accepted.payload().replace('"seat":1', '"seat":2'),
        accepted.payload().replace('"seat":1', '"seat":true'),
        accepted.payload().replace('"token":"tok"', '"token":5'),
        accepted.payload().replace(',"conn":"c1"', ""),
    ):  # fmt: skip
        assert refused(node.parse_seeks_event, bad) == "node/invalid", bad


def test_the_scripts_publish_the_changed_event_of_the_class() -> None:
    """The seek scripts write SeeksChanged's payload in Lua: the same text."""
    scripts = [path for path in SCRIPTS.glob("seek_*.lua") if "PUBLISH" in path.read_text()]
    assert scripts
    for path in scripts:
        assert "'" + node.SeeksChanged().payload() + "'" in path.read_text(), path.name
