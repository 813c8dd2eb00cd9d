"""Page cursors: the one text format of every ``next`` a paged list hands out.

A cursor names the last entry of a page by its time in ms and its id (the games list and
the archive: a game's end and id; ``GET /api/rooms``: a room's last change and id). This
module decides how that pair is written and read back:

- written as URL-safe base64 of ``MS:ID``: padded (:meth:`Cursor.encode`, the games list
  and the archive) or without its padding (:meth:`Cursor.encode_unpadded`, the rooms
  list). Clients hold cursors of both kinds, so each stays byte for byte as it is;
- read back (:func:`decode_cursor`) with or without its padding, by one rule: at most
  ``MAX_CURSOR`` characters of the URL-safe alphabet and up to two ``=``; MS 1 to
  ``MAX_CURSOR_DIGITS`` ASCII digits (a millisecond time, so no 40-digit number reaches
  a database); ID matching the caller's pattern: a room id (``ROOM_ID``, the default:
  what the HTTP API accepts) or, for the archive's own pages, any id its table holds
  (``ARCHIVE_ID``). Anything else is None: not a cursor of ours.

Pure: no I/O, so the HTTP layer and the archive both use it.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import NamedTuple

MAX_CURSOR = 200  # longest cursor, in characters
MAX_CURSOR_DIGITS = 16  # the time in a cursor, ms: well inside a 64-bit database integer
#: The ids a cursor of the HTTP API may name: room ids (4 to 32 of ``A-Z a-z 0-9 - _``).
ROOM_ID = re.compile(r"[A-Za-z0-9_-]{4,32}")
#: The ids the archive's own cursors may name: any 1 to 32 characters (its id column).
ARCHIVE_ID = re.compile(r".{1,32}", re.DOTALL)
_DIGITS = re.compile(r"[0-9]+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")


class Cursor(NamedTuple):
    """What a page's ``next`` cursor names: the time (ms) and id of the last entry."""

    ms: int
    id: str

    def encode(self) -> str:
        """The cursor's text: URL-safe base64 of ``MS:ID``, padded."""
        return base64.urlsafe_b64encode(f"{self.ms}:{self.id}".encode()).decode()

    def encode_unpadded(self) -> str:
        """The cursor's text without the base64 padding (``GET /api/rooms``' cursors)."""
        return self.encode().rstrip("=")


def decode_cursor(text: str, ids: re.Pattern[str] = ROOM_ID) -> Cursor | None:
    """The (ms, id) a cursor's text names, its id matching ``ids``; None if it is not a
    cursor of ours."""
    if len(text) > MAX_CURSOR or not _BASE64URL.fullmatch(text):
        return None
    try:
        bare = text.rstrip("=")
        plain = base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))
        ms, colon, entry_id = plain.decode().partition(":")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    if (
        not colon
        or len(ms) > MAX_CURSOR_DIGITS
        or not _DIGITS.fullmatch(ms)
        or not ids.fullmatch(entry_id)
    ):
        return None
    return Cursor(int(ms), entry_id)
