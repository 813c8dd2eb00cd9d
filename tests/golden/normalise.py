"""What the golden transcripts may differ in from run to run, and nothing more.

A transcript is raw text: every frame and HTTP body exactly as the server sent it. Before
it is compared with its fixture, :func:`normalise` replaces, in the text itself (never by
decoding and re-encoding, so a change of key order, spacing or number format still shows):

- **ids drawn at random**, by value: room ids (``room``, ``next_room``, ``previous_room``,
  a record's ``id``), seat tokens (``token``), node ids (``node``) and seek ids (``seek``),
  wherever they occur (also inside a PGN tag or a file name), by ``ROOM1``, ``TOKEN1``,
  ``NODE1``, ... numbered in order of first appearance in that transcript. The values
  are the ones :func:`harvest` found in the frames and bodies of the run.
- **wall-clock times**: every integer of 13 digits within a day of the run (epoch ms:
  ``at``, ``at_ms``, ``gone_ms``, ``created_ms``, ``started_ms``, a clock's ``at`` and
  ``first_move_by``, ...) by ``T``. One placeholder for all of them: whether two events
  fell in the same millisecond is chance, so numbering them would not be stable.
- **clock readings** of timed games, which depend on how long each move took: the
  numbers of ``"remaining_ms":[..]``, ``"clocks_ms":[..]`` and ``"credit_ms":N`` by
  ``MS``, a PGN ``[%clk h:mm:ss]`` or PDN ``[%clock h:mm:ss]`` by ``CLK``, and a PGN or
  PDN ``[Date "..."]`` of the run's days by ``DATE``.

Player ids are not replaced: the transcripts use fixed player keys, so they are fixed.

One more thing varies, and :func:`direct_layout` undoes exactly it: a ``state`` frame
comes in one of two key orders. The node that commits a change hands the snapshot to its
own followers directly (``"seats"`` after ``"players"``, ``"spectators"`` after
``"previous_room"``), while the Redis broadcast of the same change has ``"seats"`` and
``"spectators"`` spliced in after ``"event"`` (store.py, ``presence_splice``). Which copy
reaches a follower first is a race, so a frame in the broadcast order is rewritten in
the direct order. Only that exact rearrangement is made: a frame in any other order is
left as it came, and differs from its fixture.

:data:`IGNORED_KEYS` names object keys whose ``"key":value`` pairs are cut out of the
text before comparing (JSON-aware, keeping everything around them byte for byte). A key
may be added there only for a planned change of the wire format: ``termination`` (issue
20), the code beside ``result.reason`` that the fixtures were recorded without.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterable
from typing import Any

#: Keys of ``"key":value`` pairs cut out before comparing: see the module docstring.
IGNORED_KEYS: tuple[str, ...] = ("termination",)

#: JSON keys whose string values are random ids, and the placeholder stem for each.
ID_KEYS = {
    "room": "ROOM",
    "next_room": "ROOM",
    "previous_room": "ROOM",
    "token": "TOKEN",
    "node": "NODE",
    "seek": "SEEK",
}
DAY_MS = 86_400_000
_EPOCH_MS = re.compile(r"(?<![0-9A-Za-z])(1[0-9]{12})(?![0-9])")
# Compact (frames) or indented (HTTP bodies): the numbers only are replaced.
_CLOCK_ARRAY = re.compile(r'"(?:remaining_ms|clocks_ms)":\s*\[[-0-9,\s]*\]')
_NUMBER = re.compile(r"-?[0-9]+")
_CREDIT = re.compile(r'("credit_ms":\s*)-?[0-9]+')
_CLK_COMMENT = re.compile(r"\[%(clk|clock) [0-9]+:[0-9]{2}:[0-9]{2}(\.[0-9]+)?\]")
_DATE_TAG = re.compile(r'\[Date "([0-9]{4}\.[0-9]{2}\.[0-9]{2})"\]')


def harvest(document: Any, into: dict[str, str]) -> None:
    """Record in ``into`` (value -> stem) every random id in a decoded frame or body:
    the string values of :data:`ID_KEYS`, and a game record's ``id``."""
    if isinstance(document, dict):
        for key, value in document.items():
            if isinstance(value, str) and value:
                stem = ID_KEYS.get(key)
                if key == "id" and "game" in document and "moves" in document:
                    stem = "ROOM"  # a game record: its id is its room's
                if stem is not None:
                    into.setdefault(value, stem)
            harvest(value, into)
    elif isinstance(document, list):
        for item in document:
            harvest(item, into)


def harvest_text(text: str, into: dict[str, str]) -> None:
    """:func:`harvest` of ``text`` when it is JSON (else nothing)."""
    with contextlib.suppress(ValueError):
        harvest(json.loads(text), into)


def _replace_ids(text: str, ids: dict[str, str]) -> str:
    if not ids:
        return text
    # Longest first, so an id that contains another is replaced whole.
    pattern = re.compile("|".join(re.escape(v) for v in sorted(ids, key=len, reverse=True)))
    given: dict[str, str] = {}
    counts: dict[str, int] = {}

    def placeholder(match: re.Match[str]) -> str:
        value = match.group(0)
        if value not in given:
            stem = ids[value]
            counts[stem] = counts.get(stem, 0) + 1
            given[value] = f"{stem}{counts[stem]}"
        return given[value]

    return pattern.sub(placeholder, text)


def _replace_times(text: str, window_ms: tuple[int, int]) -> str:
    low, high = window_ms

    def placeholder(match: re.Match[str]) -> str:
        value = int(match.group(1))
        return "T" if low - DAY_MS <= value <= high + DAY_MS else match.group(0)

    return _EPOCH_MS.sub(placeholder, text)


def _run_dates(window_ms: tuple[int, int]) -> set[str]:
    return {time.strftime("%Y.%m.%d", time.gmtime(ms / 1000)) for ms in window_ms} | {
        time.strftime("%Y.%m.%d", time.localtime(ms / 1000)) for ms in window_ms
    }


def _replace_clocks(text: str, window_ms: tuple[int, int]) -> str:
    text = _CLOCK_ARRAY.sub(lambda m: _NUMBER.sub("MS", m.group(0)), text)
    text = _CREDIT.sub(lambda m: m.group(1) + "MS", text)
    text = _CLK_COMMENT.sub(lambda m: f"[%{m.group(1)} CLK]", text)
    dates = _run_dates(window_ms)
    return _DATE_TAG.sub(lambda m: '[Date "DATE"]' if m.group(1) in dates else m.group(0), text)


def _value_end(text: str, start: int) -> int:
    """Where the JSON value that begins at ``start`` ends."""
    return json.JSONDecoder().raw_decode(text, start)[1]


def direct_layout(frame: str) -> str:
    """A ``state`` frame in the broadcast key order (``...,"event":{..},"seats":[..],
    "spectators":N}`` or ``...,"spectators":N,"you":S}``) rewritten in the direct order
    (see the module docstring); any other text is returned as it is."""
    seats_at = frame.find(',"seats":[')
    event_at = frame.find(',"event":{')
    if not frame.startswith('{"type":"state",') or seats_at < 0 or not 0 <= event_at < seats_at:
        return frame
    seats_end = _value_end(frame, seats_at + len(',"seats":'))
    tail = re.compile(r',"spectators":([0-9]+)(,"you":(?:null|[0-9]+))?\}').fullmatch(
        frame, seats_end
    )
    if tail is None or _value_end(frame, event_at + len(',"event":')) != seats_at:
        return frame
    seats = frame[seats_at:seats_end]
    spectators = f',"spectators":{tail.group(1)}'
    head = frame[:seats_at]
    players_at = head.find(',"players":[')
    previous_at = head.find(',"previous_room":')
    if players_at < 0 or previous_at < 0:
        return frame
    players_end = _value_end(head, players_at + len(',"players":'))
    previous_end = _value_end(head, previous_at + len(',"previous_room":'))
    return (
        head[:players_end]
        + seats
        + head[players_end:previous_end]
        + spectators
        + head[previous_end:]
        + (tail.group(2) or "")
        + "}"
    )


def _direct_layouts(text: str) -> str:
    return "\n".join(
        "< " + direct_layout(line[2:]) if line.startswith('< {"type":"state",') else line
        for line in text.split("\n")
    )


def drop_keys(text: str, keys: Iterable[str]) -> str:
    """``text`` without the ``"key":value`` pairs of ``keys`` in its JSON objects (compact
    JSON as the server writes frames, or ``", "``-separated and indented as in HTTP
    bodies); the rest is left byte for byte."""
    for key in keys:
        needle = json.dumps(key)
        start = 0
        while (at := text.find(needle, start)) >= 0:
            cut = _pair_span(text, at, at + len(needle))
            if cut is None:
                start = at + len(needle)
                continue
            text = text[: cut[0]] + text[cut[1] :]
            start = cut[0]
    return text


def _pair_span(text: str, at: int, after_key: int) -> tuple[int, int] | None:
    """The span to cut for the key string at ``at``..``after_key``: from the comma before
    it to the end of its value, or (first in its object) from the key to the start of the
    next key; None if this is not a key of an object."""
    colon = _skip_space(text, after_key)
    if text[colon : colon + 1] != ":":
        return None
    before = len(text[:at].rstrip())
    opener = text[before - 1 : before]
    if opener not in (",", "{"):
        return None
    _, end = json.JSONDecoder().raw_decode(text, _skip_space(text, colon + 1))
    if opener == ",":
        return before - 1, end
    if text[end : end + 1] == ",":
        return at, _skip_space(text, end + 1)
    return at, end


def _skip_space(text: str, index: int) -> int:
    while text[index : index + 1] in (" ", "\n"):
        index += 1
    return index


def normalise(text: str, ids: dict[str, str], window_ms: tuple[int, int]) -> str:
    """``text`` with the run's random ids, times and clock readings replaced (see the
    module docstring) and :data:`IGNORED_KEYS` cut out. ``window_ms``: the run's start
    and end, epoch ms."""
    text = drop_keys(text, IGNORED_KEYS)
    text = _direct_layouts(text)
    text = _replace_ids(text, ids)
    text = _replace_clocks(text, window_ms)
    return _replace_times(text, window_ms)
