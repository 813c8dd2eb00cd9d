"""Frames: JSON and msgpack read into messages, with their size and value limits."""

from __future__ import annotations

import json

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kibitz.shared.protocol import codec as p


def test_decode_frames() -> None:
    assert p.decode('{"type":"ping"}') == {"type": "ping"}
    assert p.decode(msgpack.packb({"type": "ping"})) == {"type": "ping"}
    for bad in ("{", "[]", "3", b"\xc1"):
        with pytest.raises(p.ProtocolError) as err:
            p.decode(bad)
        assert err.value.code == "frame/malformed"
    with pytest.raises(p.ProtocolError) as err:
        p.decode("x" * (p.MAX_FRAME_BYTES + 1))
    assert err.value.code == "frame/too_large"


def _careful_read(text: str) -> object:
    """How a text frame was read before the fast path: the standard library, then a
    check that the value can be written as msgpack."""
    data = json.loads(text)
    msgpack.packb(data, use_bin_type=True)
    return data


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)


@given(_JSON_VALUES)
def test_text_frames_read_as_the_careful_way_reads_them(value: object) -> None:
    """The fast path (orjson) reads every frame as the standard library would, and
    refuses what it refused: integers past 64 bits and absurd nesting included."""
    for text in (json.dumps({"v": value}), json.dumps({"v": value}, ensure_ascii=False)):
        try:
            expected = _careful_read(text)
        except (ValueError, OverflowError, RecursionError):
            with pytest.raises(p.ProtocolError):
                p.decode(text)
            continue
        got = p.decode(text)
        assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_text_frames_the_fast_path_would_misread_are_read_carefully() -> None:
    for text, ok in [
        ('{"v": 123456789012345678901234567890}', False),  # past 64 bits: refused
        ('{"v": -9223372036854775809}', False),
        ('{"v": 18446744073709551615}', True),  # the largest unsigned 64-bit integer
        ('{"v": NaN}', True),  # the standard library reads it (the fields then refuse it)
        (r'{"v": "\\ud800"}', True),  # an escaped backslash, not a surrogate
        (r'{"v": "\ud800"}', False),  # a lone surrogate, escaped
        ('{"v": ' + "[" * 5000 + "]" * 5000 + "}", False),
    ]:
        if ok:
            got, expected = p.decode(text)["v"], json.loads(text)["v"]
            assert got == expected or (got != got and expected != expected)  # NaN
        else:
            with pytest.raises(p.ProtocolError) as err:
                p.decode(text)
            assert err.value.code == "frame/malformed"
