"""The one page cursor codec (``server/domain/cursor.py``): every cursor kibitz gave out
before it reads back to the same (ms, id) and is written again as the same bytes, for
the games list (padded), the rooms list (unpadded) and the archive; anything else is
refused by one rule.

The texts below are what the three encoders of earlier versions wrote (the HTTP query's
``Cursor``, the archive's own, and ``/api/rooms``' unpadded one); clients hold them."""

from __future__ import annotations

import pytest

from kibitz.server.domain.cursor import ARCHIVE_ID, MAX_CURSOR, Cursor, decode_cursor

#: (ms, id) -> (padded text: the games list and the archive, unpadded: the rooms list).
ISSUED: dict[tuple[int, str], tuple[str, str]] = {
    (1764117000000, "k2ubu9q7cq"): (
        "MTc2NDExNzAwMDAwMDprMnVidTlxN2Nx",
        "MTc2NDExNzAwMDAwMDprMnVidTlxN2Nx",
    ),
    (5, "abcd"): ("NTphYmNk", "NTphYmNk"),
    (0, "room1234"): ("MDpyb29tMTIzNA==", "MDpyb29tMTIzNA"),
    (9999999999999999, "A-_z" * 8): (
        "OTk5OTk5OTk5OTk5OTk5OTpBLV96QS1fekEtX3pBLV96QS1fekEtX3pBLV96QS1feg==",
        "OTk5OTk5OTk5OTk5OTk5OTpBLV96QS1fekEtX3pBLV96QS1fekEtX3pBLV96QS1feg",
    ),
    (1234, "g00x"): ("MTIzNDpnMDB4", "MTIzNDpnMDB4"),
}

#: Texts the HTTP API refuses as cursors (its rule: MS of 1-16 ASCII digits, ID a room id).
REFUSED = [
    "",
    "!!!!",
    "NTpuby9zbGFzaA",  # 5:no/slash
    "NTphYmM",  # 5:abc (an id of 3 characters)
    "MTIzNDU2Nzg5MDEyMzQ1Njc6YWJjZA",  # 17 digits
    "LTU6YWJjZA",  # -5:abcd
    "NTphYmNk===",  # three padding characters
    "NTphYmNk" + "A" * (MAX_CURSOR - 7),  # too long
    "YWJjZA",  # abcd (no colon)
    "OmFiY2Q",  # :abcd (no time)
]


@pytest.mark.parametrize(("pair", "texts"), ISSUED.items())
def test_issued_cursors_encode_and_decode_the_same(
    pair: tuple[int, str], texts: tuple[str, str]
) -> None:
    padded, unpadded = texts
    cursor = Cursor(*pair)
    assert cursor.encode() == padded
    assert cursor.encode_unpadded() == unpadded
    for text in (padded, unpadded):
        assert decode_cursor(text) == cursor
        assert decode_cursor(text, ARCHIVE_ID) == cursor


def test_padding_is_optional_when_read() -> None:
    assert decode_cursor("NTphYmNk=") == decode_cursor("NTphYmNk==") == Cursor(5, "abcd")
    assert decode_cursor("MDpyb29tMTIzNA=") == Cursor(0, "room1234")


@pytest.mark.parametrize("text", REFUSED)
def test_anything_else_is_refused(text: str) -> None:
    assert decode_cursor(text) is None


def test_the_archive_reads_its_own_short_ids() -> None:
    """The archive's ids are any 1 to 32 characters (its column), not only room ids."""
    assert Cursor(1000, "g01").encode() == "MTAwMDpnMDE="
    assert decode_cursor("MTAwMDpnMDE=") is None  # not a room id: refused at the HTTP API
    assert decode_cursor("MTAwMDpnMDE=", ARCHIVE_ID) == Cursor(1000, "g01")
    assert decode_cursor("MTAwMDpnMDE", ARCHIVE_ID) == Cursor(1000, "g01")
    assert decode_cursor(Cursor(7, "x" * 33).encode(), ARCHIVE_ID) is None
    assert decode_cursor("bm90IGEgY3Vyc29yIQ==", ARCHIVE_ID) is None  # "not a cursor!"
    assert decode_cursor("not a cursor!", ARCHIVE_ID) is None
