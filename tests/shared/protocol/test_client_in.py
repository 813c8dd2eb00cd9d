"""Client to server: parsing at the edge into typed messages, the name and text rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kibitz.shared.protocol import client_in as p
from kibitz.shared.protocol.codec import ProtocolError


def parse(data: dict) -> p.ClientMessage:
    return p.parse_client_message(data)


def code_of(data: dict) -> str:
    with pytest.raises(ProtocolError) as err:
        parse(data)
    return err.value.code


def test_parses_each_client_message() -> None:
    assert parse({"type": "create", "game": "chess", "opponent": "ai:3", "seat": 1}) == p.Create(
        game="chess", opponent="ai:3", seat=1
    )
    assert parse({"type": "create", "game": "chess", "seat": "random"}).seat is None
    assert parse({"type": "join", "room": "abcd", "rid": 4}) == p.Join(room="abcd", rid=4)
    assert parse({"type": "move", "room": "abcd", "token": "t", "move": "e2e4", "version": 3}) == (
        p.PlayMove(room="abcd", token="t", move="e2e4", version=3)
    )
    assert parse({"type": "resume", "room": "abcd", "since": 0}) == p.Resume(room="abcd", since=0)
    assert parse({"type": "ping"}) == p.Ping()


def test_rejects_bad_messages_with_codes() -> None:
    assert code_of({"type": "fly"}) == "message/unknown_type"
    assert code_of({"game": "chess"}) == "message/unknown_type"
    assert code_of({"type": "move", "room": "abcd", "token": "t"}) == "message/invalid"
    assert code_of({"type": "move", "room": "abcd", "token": "t", "move": 5}) == "message/invalid"
    assert code_of({"type": "create", "game": "chess", "opponent": "ai:9"}) == "message/invalid"
    assert code_of({"type": "create", "game": "chess", "seat": 2}) == "message/invalid"
    assert code_of({"type": "join", "room": "x" * 600}) == "message/invalid"
    assert code_of({"type": "ping", "rid": [1]}) == "message/invalid"
    assert code_of({"type": "move", "room": "a", "token": "t", "move": "1", "version": True}) == (
        "message/invalid"
    )


@given(st.dictionaries(st.text(max_size=8), st.none() | st.integers() | st.text(max_size=20)))
def test_any_object_parses_or_fails_with_a_code(data: dict) -> None:
    try:
        parse(data)
    except ProtocolError as exc:
        assert exc.code.startswith("message/")


#: Every message that carries a display name, as (message without the name).
NAMED_MESSAGES = [
    {"type": "create", "game": "chess"},
    {"type": "join", "room": "abcd"},
    {"type": "seek", "game": "chess"},
    {"type": "accept", "seek": "abcd"},
    {"type": "chat", "room": "abcd", "text": "hi"},
]


@pytest.mark.parametrize("message", NAMED_MESSAGES, ids=[m["type"] for m in NAMED_MESSAGES])
def test_one_name_rule_for_every_message(message: dict) -> None:
    assert parse({**message, "name": "  ann b  "}).name == "ann b"  # type: ignore[union-attr]
    assert parse({**message, "name": '名 "x" \\ [y]'}).name == '名 "x" \\ [y]'  # type: ignore[union-attr]
    assert parse({**message, "name": "a" * p.MAX_NAME}).name == "a" * p.MAX_NAME  # type: ignore[union-attr]
    assert parse(message).name is None  # type: ignore[union-attr]
    for bad in (
        "a" * (p.MAX_NAME + 1), "a" * 512, "", "   ", 5, ["ann"],
        "ann\x00", "ann\x1b[31m", "ann\rbob", "ann\nbob", "a\tb", "ann\x7f", "ann\x85",
        "ann\u202egnp", "\u202aann", "ann\u2028", "\u2066ann\u2069",
        "ann\u200fbob", "\u061cann", "ad\u200bmin", "\ufeffann", "ann\U000e0041",
        "\u200b", "\u3164", "\u115f\u1160", " \uffa0 ", "\u0301", "\u200d\u200c",
    ):  # fmt: skip
        assert code_of({**message, "name": bad}) == "message/invalid", repr(bad)


def test_names_and_chat_lines_refuse_the_same_characters() -> None:
    from kibitz.server.services.chat import check_text

    extra = [0x00AD, 0x061C, 0x115F, 0x3164, 0xFEFF, 0xFFA0, *range(0xE0000, 0xE0080)]
    for code in [*range(0x00, 0xA0), *range(0x2000, 0x2070), *extra]:
        char = chr(code)
        refused_in_chat = True
        try:
            check_text(f"a{char}b")
            refused_in_chat = False
        except ProtocolError:
            pass
        assert refused_in_chat == (p.refused_character(f"a{char}b") is not None), hex(code)


def test_joiners_are_allowed_and_blank_names_are_not() -> None:
    """ZWJ and ZWNJ pass (emoji sequences, Persian and Indic scripts); a name of nothing
    visible is refused, one with a visible character besides is kept as given."""
    from kibitz.server.services.chat import check_text

    for good in ("\U0001f469\u200d\U0001f4bb", "\u0645\u06cc\u200c\u062e", "a\u0301", "ann\u3164"):
        assert p.check_name(good) == good
        assert check_text(good) == good
    for blank in ("\u200d", "\u3164 \u3164", "\u0301", "\u2800"):
        with pytest.raises(ProtocolError):
            p.check_name(blank)
        with pytest.raises(ProtocolError):
            check_text(blank)
