"""The golden test's normaliser replaces what varies and nothing else (pure, no server)."""

from __future__ import annotations

from tests.golden.normalise import IGNORED_KEYS, direct_layout, drop_keys, harvest, normalise

WINDOW = (1_764_117_000_000, 1_764_117_060_000)  # a run's start and end, epoch ms

DIRECT = (
    '{"type":"state","room":"k2ubu9q7cq","version":1,"players":["X","O"],'
    '"seats":[{"seat":0,"connected":true},{"seat":1,"connected":false}],'
    '"position":"x........:o","next_room":null,"previous_room":null,"spectators":2,'
    '"claim_after_ms":120000,"event":{"kind":"move","seat":0},"you":1}'
)
BROADCAST = (
    '{"type":"state","room":"k2ubu9q7cq","version":1,"players":["X","O"],'
    '"position":"x........:o","next_room":null,"previous_room":null,'
    '"claim_after_ms":120000,"event":{"kind":"move","seat":0},'
    '"seats":[{"seat":0,"connected":true},{"seat":1,"connected":false}],"spectators":2,'
    '"you":1}'
)


def test_only_the_termination_is_ignored() -> None:
    assert IGNORED_KEYS == ("termination",)


def test_drop_keys_cuts_the_pair_and_keeps_the_rest() -> None:
    text = (
        '{"a":1,"termination":"resignation","b":{"termination":null},'
        '"c":[{"termination":{"x":[1,2]}}]}'
    )
    assert drop_keys(text, ["termination"]) == '{"a":1,"b":{},"c":[{}]}'
    assert drop_keys('{"termination":1,"a":2}', ["termination"]) == '{"a":2}'
    assert drop_keys('{"reason":"termination:"}', ["termination"]) == '{"reason":"termination:"}'
    assert drop_keys(text, []) == text


def test_drop_keys_cuts_spaced_and_indented_pairs() -> None:
    spaced = '{"winner": 0, "reason": "x", "termination": "time"}, {"termination": 1, "a": 2}'
    assert drop_keys(spaced, ["termination"]) == '{"winner": 0, "reason": "x"}, {"a": 2}'
    indented = '{\n "result": {\n  "reason": "x",\n  "termination": "time"\n }\n}'
    assert drop_keys(indented, ["termination"]) == '{\n "result": {\n  "reason": "x"\n }\n}'
    first = '{\n  "termination": null,\n  "a": 2\n}'
    assert drop_keys(first, ["termination"]) == '{\n  "a": 2\n}'
    assert drop_keys('["termination", "termination" ]', ["termination"]) == (
        '["termination", "termination" ]'
    )


def test_ids_are_numbered_by_first_appearance() -> None:
    ids: dict[str, str] = {}
    harvest({"type": "seat", "room": "r2", "token": "tok-b"}, ids)
    harvest({"type": "seat", "room": "r1", "token": "tok-a"}, ids)
    text = '{"room":"r1","token":"tok-a"} {"room":"r2"} kibitz-chess-r1.pgn {"token":"tok-b"}'
    assert normalise(text, ids, WINDOW) == (
        '{"room":"ROOM1","token":"TOKEN1"} {"room":"ROOM2"} kibitz-chess-ROOM1.pgn '
        '{"token":"TOKEN2"}'
    )


def test_times_and_clocks_become_placeholders() -> None:
    text = (
        '{"at":1764117001234,"gone_ms":null,"big":1764117001234999,"old":1000000000000,'
        '"clock":{"remaining_ms":[171350,176020],"at":1764117005000},'
        '"event":{"clocks_ms":[1,2],"credit_ms":148}}\n'
        '{\n "clocks_ms": [\n  301993,\n  302000\n ]\n}\n'
        '[Date "2025.11.26"]\n1. e4 { [%clk 0:04:59] } 1... e5 {[%clock 1:00:00]}'
    )
    assert normalise(text, {}, WINDOW) == (
        '{"at":T,"gone_ms":null,"big":1764117001234999,"old":1000000000000,'
        '"clock":{"remaining_ms":[MS,MS],"at":T},'
        '"event":{"clocks_ms":[MS,MS],"credit_ms":MS}}\n'
        '{\n "clocks_ms": [\n  MS,\n  MS\n ]\n}\n'
        '[Date "DATE"]\n1. e4 { [%clk CLK] } 1... e5 {[%clock CLK]}'
    )


def test_the_broadcast_order_is_written_in_the_direct_order() -> None:
    assert direct_layout(BROADCAST) == DIRECT
    assert direct_layout(DIRECT) == DIRECT
    spectator = BROADCAST.replace(',"you":1}', "}")
    assert direct_layout(spectator) == DIRECT.replace(',"you":1}', "}")


def test_any_other_key_order_still_differs() -> None:
    swapped = BROADCAST.replace(
        '"players":["X","O"],"position":"x........:o"',
        '"position":"x........:o","players":["X","O"]',
    )
    assert direct_layout(swapped) != DIRECT
    late = DIRECT.replace(',"spectators":2', "").replace(',"you":1}', ',"spectators":2,"you":1}')
    assert direct_layout(late) == late != DIRECT
    # Seats spliced anywhere but right after the event are left as they came.
    seats = ',"seats":[{"seat":0,"connected":true},{"seat":1,"connected":false}]'
    moved = BROADCAST.replace(seats, "").replace('"version":1', '"version":1' + seats)
    assert direct_layout(moved) == moved
