"""How a message becomes a frame and back, and the error every refused message raises.

Messages are dicts with a ``type`` field, carried as JSON text frames or, when the
client connects with ``?codec=msgpack``, as msgpack binary frames. This module decides
the frame size limit and how a frame is read (:func:`decode`) and written
(:func:`encode`, :func:`encode_bytes`); the direction modules (client_in, client_out,
node, jobs) decide what a message holds.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import msgpack
import orjson

from kibitz.shared import fastjson

PROTOCOL_VERSION = 1
MAX_FRAME_BYTES = 64 * 1024

Codec = Literal["json", "msgpack"]


class ProtocolError(ValueError):
    """A message that cannot be accepted, with a stable machine-readable code; ``details``:
    extra fields for the error message (client_out.Error), for the codes that have them."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


# -- codecs -----------------------------------------------------------------------------


def encode(message: dict[str, Any], codec: Codec) -> str | bytes:
    if codec == "msgpack":
        data: bytes = msgpack.packb(message, use_bin_type=True)
        return data
    return fastjson.dumps(message).decode()


def encode_bytes(message: dict[str, Any], codec: Codec) -> bytes:
    """``message`` as the payload of one WebSocket frame: msgpack, or JSON as UTF-8 (to be
    sent as a text frame). Bytes, so one encoding can be written to many sockets as is."""
    if codec == "msgpack":
        data: bytes = msgpack.packb(message, use_bin_type=True)
        return data
    return fastjson.dumps(message)


def decode(frame: str | bytes) -> dict[str, Any]:
    """A client frame as a dict: text frames are JSON, binary frames msgpack."""
    # (A character is at most 4 bytes in UTF-8: most frames need no encoding to know.)
    if isinstance(frame, bytes) or len(frame) * 4 > MAX_FRAME_BYTES:
        size = len(frame.encode() if isinstance(frame, str) else frame)
        if size > MAX_FRAME_BYTES:
            raise ProtocolError("frame/too_large", f"frame of {size} bytes > {MAX_FRAME_BYTES}")
    kind = "JSON" if isinstance(frame, str) else "msgpack"
    try:
        if isinstance(frame, str):
            data = _read_json(frame)
        else:
            data = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # msgpack's ExtraData, FormatError and StackError are ValueErrors too.
        text = str(exc)[:200]
        raise ProtocolError("frame/malformed", f"frame is not valid {kind}: {text}") from None
    if not isinstance(data, dict):
        raise ProtocolError("frame/malformed", "a message must be an object with a 'type'")
    return data


#: Past this many brackets, or with a run of this many digits, a frame is read the
#: careful way (see _read_json).
_MAX_FAST_BRACKETS = 256
_LONG_NUMBER = re.compile(r"[0-9]{19}")


def _read_json(frame: str) -> Any:
    """A JSON frame's value, which must be something we can write back in either codec:
    lone surrogates, integers past 64 bits and absurd nesting are refused (ValueError,
    OverflowError or RecursionError).

    orjson reads an ordinary message several times faster than the standard library,
    and refuses lone surrogates itself; but it reads an integer past 64 bits as a float
    and has no nesting limit. A frame that could hold either (a run of 19 digits, or
    many brackets), or that orjson refuses (NaN, say, which the standard library
    reads), is read by the standard library and checked by writing it as msgpack."""
    if _LONG_NUMBER.search(frame) is None and (
        frame.count("[") + frame.count("{") <= _MAX_FAST_BRACKETS
    ):
        try:
            return orjson.loads(frame)
        except orjson.JSONDecodeError:
            pass
    data = json.loads(frame)
    msgpack.packb(data, use_bin_type=True)
    return data
