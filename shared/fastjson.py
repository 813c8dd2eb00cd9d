"""JSON in and out with orjson, for the hot paths (room records, snapshots, frames).

The output parses to the same values as ``json.dumps(value, separators=(",", ":"))``:
compact, keys in insertion order, dict keys that are not strings written as strings.
Two spellings differ and no JSON parser minds: text outside ASCII is written as UTF-8
rather than ``\\uXXXX`` escapes, and a float that is not finite (NaN, infinities) is
``null`` (the standard library writes ``NaN``, which is not JSON and which browsers
refuse). Anything orjson cannot write (an integer past 64 bits, an unknown type) is
written by the standard library instead, so nothing that worked before fails now.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8 encoded."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError included
        return json.dumps(value, separators=(",", ":")).encode()


def loads(data: str | bytes) -> Any:
    """Parse JSON that this server (or the standard library) wrote."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # NaN, or integers past 64 bits: the old spellings
