"""HTTP query parameters: the one strict parser every endpoint reads its query with.

It decides what a well-formed parameter is, so that no endpoint hands a value it has not
checked to ``int()``, a database or Redis:

- a parameter appears at most once and holds at most MAX_VALUE characters;
- a whole number is 1 to MAX_DIGITS ASCII digits (``str.isdigit`` would let ``²`` and
  ``５`` through, and ``int`` then raises), within the endpoint's bounds; above its
  ``clamp`` it is taken as the clamp (``limit=500`` lists 100);
- a cursor (the ``next`` of a page) is one as :mod:`kibitz.server.domain.cursor` reads
  it: URL-safe base64, with or without its padding, of ``MS:ID``, MS a millisecond time
  of bounded length (so no 40-digit number reaches SQLite), ID a room id;
- a choice is one of the endpoint's words; a pattern must match whole;
- the WebSocket's ``codec`` is the one exception, read leniently (:func:`codec`): a
  handshake is never refused for it, anything but ``msgpack`` means JSON.

Anything else raises :class:`QueryError`: 400 with the API's JSON error body and the code
``query/invalid`` (:func:`refusal`), never a 500. A parameter not named by an endpoint is
ignored.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from aiohttp import web
from multidict import MultiMapping

from kibitz.server.domain.cursor import Cursor, decode_cursor
from kibitz.shared.protocol.client_out import Error
from kibitz.shared.protocol.codec import Codec, ProtocolError

CODE = "query/invalid"
MAX_VALUE = 256  # longest value of any parameter, in characters
MAX_DIGITS = 9  # longest whole number (limits and counts)
_DIGITS = re.compile(r"[0-9]+")

Query = MultiMapping[str]


class QueryError(ProtocolError):
    """A query parameter that is not well-formed: 400 ``query/invalid``."""

    def __init__(self, message: str) -> None:
        super().__init__(CODE, message)


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


def codec(values: Collection[str]) -> Codec:
    """The codec a WebSocket URL asks for, from its ``codec`` values: msgpack when that is
    the one value given, else JSON (the default)."""
    return "msgpack" if list(values) == ["msgpack"] else "json"
