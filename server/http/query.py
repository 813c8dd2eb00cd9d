"""HTTP query parameters: the one strict parser every endpoint reads its query with.

It decides what a well-formed parameter is, so that no endpoint hands a value it has not
checked to ``int()``, a database or Redis:

- a parameter appears at most once and holds at most MAX_VALUE characters;
- a whole number is 1 to MAX_DIGITS ASCII digits (``str.isdigit`` would let ``²`` and
  ``５`` through, and ``int`` then raises), within the endpoint's bounds; above its
  ``clamp`` it is taken as the clamp (``limit=500`` lists 100);
- a cursor (the ``next`` of a page) is URL-safe base64, with or without its padding, of
  ``MS:ID``: MS 1 to MAX_CURSOR_DIGITS ASCII digits (a millisecond time, so no 40-digit
  number reaches SQLite), ID a room id (4 to 32 of ``A-Z a-z 0-9 - _``);
- a choice is one of the endpoint's words; a pattern must match whole;
- the WebSocket's ``codec`` is the one exception, read leniently (:func:`codec`): a
  handshake is never refused for it, anything but ``msgpack`` means JSON.

Anything else raises :class:`QueryError`: 400 with the API's JSON error body and the code
``query/invalid`` (:func:`refusal`), never a 500. A parameter not named by an endpoint is
ignored.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection
from typing import NamedTuple

from aiohttp import web
from multidict import MultiMapping

from kibitz.shared.protocol.client_out import Error
from kibitz.shared.protocol.codec import Codec, ProtocolError

CODE = "query/invalid"
MAX_VALUE = 256  # longest value of any parameter, in characters
MAX_DIGITS = 9  # longest whole number (limits and counts)
MAX_CURSOR = 200  # longest cursor, in characters
MAX_CURSOR_DIGITS = 16  # the time in a cursor, ms: well inside a 64-bit database integer
_DIGITS = re.compile(r"[0-9]+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_ROOM_ID = re.compile(r"[A-Za-z0-9_-]{4,32}")

Query = MultiMapping[str]


class QueryError(ProtocolError):
    """A query parameter that is not well-formed: 400 ``query/invalid``."""

    def __init__(self, message: str) -> None:
        super().__init__(CODE, message)


class Cursor(NamedTuple):
    """What a page's ``next`` cursor names: the time (ms) and id of the last entry."""

    ms: int
    id: str

    def encode(self) -> str:
        """The cursor's text: URL-safe base64 of ``MS:ID``, padded."""
        return base64.urlsafe_b64encode(f"{self.ms}:{self.id}".encode()).decode()


def refusal(error: QueryError) -> web.Response:
    """The HTTP answer to a bad query: 400 with the API's error body."""
    return web.json_response(Error(error.code, error.message).to_dict(), status=400)


def text(query: Query, name: str) -> str | None:
    """The one value of ``name`` (None when absent), at most MAX_VALUE characters."""
    values = query.getall(name, [])
    if not values:
        return None
    if len(values) > 1:
        raise QueryError(f"{name} is given {len(values)} times; give it once")
    value = values[0]
    if len(value) > MAX_VALUE:
        raise QueryError(f"{name} is too long ({len(value)} characters)")
    return value


def whole_number(query: Query, name: str, default: int, low: int, clamp: int) -> int:
    """``name`` as a whole number of at least ``low``; above ``clamp`` it is ``clamp``."""
    value = text(query, name)
    if value is None:
        return default
    if len(value) > MAX_DIGITS or not _DIGITS.fullmatch(value) or int(value) < low:
        raise QueryError(
            f"{name} must be a whole number {low} or more in ASCII digits "
            f"(at most {MAX_DIGITS}), not {value[:20]!r}"
        )
    return min(int(value), clamp)


def choice(query: Query, name: str, choices: Collection[str], what: str) -> str | None:
    """``name`` if it is one of ``choices`` (None when absent); ``what`` names them."""
    value = text(query, name)
    if value is not None and value not in choices:
        raise QueryError(f"{name} must be {what}, not {value[:40]!r}")
    return value


def matching(query: Query, name: str, pattern: re.Pattern[str], what: str) -> str | None:
    """``name`` if all of it matches ``pattern`` (None when absent); ``what`` says how."""
    value = text(query, name)
    if value is not None and not pattern.fullmatch(value):
        raise QueryError(f"{name} must be {what}")
    return value


def cursor(query: Query, *names: str) -> Cursor | None:
    """The cursor given as one of ``names`` (aliases: at most one of them may be given),
    decoded; None when none is given."""
    given = [(name, value) for name in names if (value := text(query, name)) is not None]
    if not given:
        return None
    if len(given) > 1:
        raise QueryError(f"give one of {' or '.join(names)}, not both")
    name, value = given[0]
    decoded = decode_cursor(value)
    if decoded is None:
        raise QueryError(f"{name} must be the next cursor of an earlier page")
    return decoded


def decode_cursor(value: str) -> Cursor | None:
    """The (ms, id) a cursor's text holds, or None if it is not a cursor of ours."""
    if len(value) > MAX_CURSOR or not _BASE64URL.fullmatch(value):
        return None
    try:
        bare = value.rstrip("=")
        plain = base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))
        ms, colon, room_id = plain.decode("ascii").partition(":")
    except (binascii.Error, ValueError):
        return None
    if (
        not colon
        or len(ms) > MAX_CURSOR_DIGITS
        or not _DIGITS.fullmatch(ms)
        or not _ROOM_ID.fullmatch(room_id)
    ):
        return None
    return Cursor(int(ms), room_id)


def codec(values: Collection[str]) -> Codec:
    """The codec a WebSocket URL asks for, from its ``codec`` values: msgpack when that is
    the one value given, else JSON (the default)."""
    return "msgpack" if list(values) == ["msgpack"] else "json"
