"""A game record in the standard text formats: PGN for chess, PDN for draughts, JSON.

Which formats a game has is the game's own fact (``GamePolicy.notation``, with its media
type); this module holds the writer of each notation (:data:`WRITERS`).

Pure functions of a record (the dict that ``GET /api/games/{id}`` answers; see
docs/protocol.md): no I/O, so they work the same on a live room and an archived game.

A rated game (``"rated": true``) is an Event ``Rated SPEED game ID`` and has the tags
``WhiteElo``/``BlackElo`` (the ratings before the game) and, once archived,
``WhiteRatingDiff``/``BlackRatingDiff`` (lichess's tags); its JSON export carries
``"rated"`` and ``"ratings"``. A casual game's exports are as they always were.

A PGN has a ``TimeControl`` tag (:func:`time_control_tag`): ``"180+2"``, ``"-"`` untimed,
``"1/259200"`` for 3 days per move.

Every tag value (PGN and PDN share the tag syntax) goes through :func:`tag_value`: a tag
value is a string token, so a backslash and a quote are escaped with a backslash, and a
character plain text on one line may not hold (control characters, line separators,
bidirectional overrides: what names are refused for, see
:func:`kibitz.shared.protocol.check_name`, kept out here too for records written before
the rule) becomes a space. A name can then neither end its tag nor start another one.
python-chess (1.11) and pydraughts give a tag's token as written, escapes included.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

import chess
import chess.pgn

from kibitz.server.domain.speeds import SpeedError, speed_of
from kibitz.shared.games.chess import GAME as CHESS
from kibitz.shared.games.draughts import GAME as DRAUGHTS
from kibitz.shared.games.registry import policy_for
from kibitz.shared.protocol.client_in import refused_character
from kibitz.shared.protocol.codec import ProtocolError

#: The format every game can be exported in, and its media type.
JSON_FORMAT = "json"
JSON_MEDIA_TYPE = "application/json"

PGN_RESULTS = {0: "1-0", 1: "0-1", None: "1/2-1/2"}
#: The tag-name prefix of each seat: seat 0 plays White in chess and draughts.
SIDES = ("White", "Black")
#: PDN scores a game out of 2: a win is 2-0, a draw 1-1.
PDN_RESULTS = {0: "2-0", 1: "0-2", None: "1-1"}
#: The longest tag value written, in characters: the PGN standard's limit on a string
#: token (a longer value, only in records older than the name rule, is cut).
MAX_TAG_VALUE = 255


class ExportError(ProtocolError):
    """A format the game has no notation for."""


def formats_for(game: str) -> list[str]:
    """The export formats of ``game``, its own notation (``GamePolicy.notation``) first."""
    notation = policy_for(game).notation
    return [notation.name, JSON_FORMAT] if notation else [JSON_FORMAT]


def export(record: dict[str, Any], fmt: str) -> tuple[str, str]:
    """The record as text in ``fmt``, with its content type; ExportError if the game has
    no such format."""
    if fmt not in formats_for(record["game"]):
        raise ExportError(
            "export/format",
            f"{record['game']} games export as {' or '.join(formats_for(record['game']))}, "
            f"not {fmt!r}",
        )
    notation = policy_for(record["game"]).notation
    if notation is None or fmt == JSON_FORMAT:
        return json.dumps(move_list(record), indent=1) + "\n", JSON_MEDIA_TYPE
    return WRITERS[fmt](record), notation.media_type


def move_list(record: dict[str, Any]) -> dict[str, Any]:
    """The game's moves (wire notation, notation for people, seat, time, clocks); a
    rated game's also ``"rated": true`` and its ``"ratings"`` changes (per seat, null
    until archived and for the AI)."""
    moves = {
        "id": record["id"],
        "game": record["game"],
        "start": record["start"],
        "moves": record["moves"],
        "result": record["result"],
    }
    if is_rated(record):
        moves["rated"] = True
        moves["ratings"] = record.get("ratings") or [None, None]
    return moves


def is_rated(record: dict[str, Any]) -> bool:
    return record.get("rated") is True


def _seat_changes(record: dict[str, Any]) -> list[Any]:
    """The record's per-seat rating changes (two entries, None where there is none)."""
    changes = record.get("ratings")
    if not isinstance(changes, list) or len(changes) != len(SIDES):
        return [None] * len(SIDES)
    return [change if isinstance(change, dict) else None for change in changes]


def _elo(record: dict[str, Any], seat: int, change: Any) -> int | None:
    """A seat's rating before the game: the archived change's, else the seat's rating
    when it was taken."""
    before = change.get("before") if change is not None else None
    if before is None:
        before = record["players"][seat].get("rating")
    return before if isinstance(before, int) and not isinstance(before, bool) else None


def rating_tags(record: dict[str, Any]) -> dict[str, str]:
    """A rated game's rating tags (PGN and PDN): ``WhiteElo``/``BlackElo`` (the ratings
    before the game) and ``WhiteRatingDiff``/``BlackRatingDiff`` (signed changes, once
    archived); nothing for a casual game or a seat without a rating."""
    if not is_rated(record):
        return {}
    out: dict[str, str] = {}
    for seat, (side, change) in enumerate(zip(SIDES, _seat_changes(record), strict=True)):
        elo = _elo(record, seat, change)
        if elo is not None:
            out[f"{side}Elo"] = str(elo)
        diff = change.get("change") if change is not None else None
        if isinstance(diff, int) and not isinstance(diff, bool):
            out[f"{side}RatingDiff"] = f"{diff:+d}"
    return out


def _event(record: dict[str, Any]) -> str:
    """The Event tag: ``Rated blitz game ID`` for a rated game (its speed:
    speeds.py); ``kibitz game ID`` for a casual one, as before."""
    if not is_rated(record):
        return f"kibitz game {record['id']}"
    try:
        speed = speed_of(record["game"], record.get("time_control"))
    except SpeedError:
        return f"Rated game {record['id']}"
    return f"Rated {speed} game {record['id']}"


def tag_value(text: str) -> str:
    """``text`` as the inside of a PGN or PDN tag's string token: characters refused in
    plain text become spaces, the value is cut to MAX_TAG_VALUE characters, and each
    backslash and quote gets a backslash before it."""
    text = "".join(" " if refused_character(char) else char for char in text[:MAX_TAG_VALUE])
    return text.replace("\\", "\\\\").replace('"', '\\"')


def tags(values: dict[str, str]) -> dict[str, str]:
    """Tag values ready to be written as they are (see :func:`tag_value`)."""
    return {name: tag_value(value) for name, value in values.items()}


def _player_name(record: dict[str, Any], seat: int) -> str:
    """The seat's name for a header."""
    info = record["players"][seat]
    if info["kind"] == "ai":
        return str(info["name"] or f"AI level {info['level']}")
    return str(info["name"] or "Anonymous")


def _date(record: dict[str, Any]) -> str:
    started = datetime.datetime.fromtimestamp(record["started_ms"] / 1000, datetime.UTC)
    return started.strftime("%Y.%m.%d")


def _result_tag(record: dict[str, Any], results: dict[int | None, str]) -> str:
    if record["status"] != "over" or record["result"] is None:
        return "*"
    return results[record["result"]["winner"]]


def _headers(record: dict[str, Any], result: str) -> dict[str, str]:
    """The Seven Tag Roster (PGN and PDN share it); White is seat 0 in chess and draughts."""
    return {
        "Event": _event(record),
        "Site": "kibitz",
        "Date": _date(record),
        "Round": "-",
        "White": _player_name(record, 0),
        "Black": _player_name(record, 1),
        "Result": result,
    }


# -- PGN -------------------------------------------------------------------------------------


def time_control_tag(control: Any) -> str:
    """The PGN ``TimeControl`` tag of a record's ``time_control`` (PGN standard, 9.6.1):
    ``"180+2"`` for 3 minutes plus 2 seconds a move (``"300"`` with no increment), ``"-"``
    for an untimed game, and ``"1/259200"`` (one move per period of that many seconds) for
    3 days per move, as the standard writes correspondence; ``"?"`` for one it cannot say."""
    if not control:
        return "-"
    if not isinstance(control, dict):
        return "?"
    days = control.get("days_per_move")
    if isinstance(days, int | float) and not isinstance(days, bool) and days > 0:
        return f"1/{round(days * 86400)}"
    initial = control.get("initial_ms")
    increment = control.get("increment_ms") or 0
    if not isinstance(initial, int | float) or isinstance(initial, bool) or initial < 0:
        return "?"
    if not isinstance(increment, int | float) or isinstance(increment, bool) or increment < 0:
        return "?"
    base = str(round(initial / 1000))
    return f"{base}+{round(increment / 1000)}" if increment else base


def pgn(record: dict[str, Any]) -> str:
    """The chess game as PGN, with a ``[%clk h:mm:ss]`` comment after every move that
    has clocks (the mover's time left once the move was made)."""
    state = CHESS.parse_position(record["start"])
    # A start position may carry the moves since the last irreversible one (for the
    # repetition count); the PGN starts before them, as those moves were played.
    root = state.root or state
    game = chess.pgn.Game()
    # python-chess writes a tag value as it is given: escaped here.
    for name, value in tags(_headers(record, _result_tag(record, PGN_RESULTS))).items():
        game.headers[name] = value
    if root.board.fen() != chess.STARTING_FEN:
        game.setup(root.board)
    if record["result"] is not None:
        game.headers["Termination"] = tag_value(record["result"]["reason"])
    game.headers["TimeControl"] = time_control_tag(record.get("time_control"))
    for name, value in tags(rating_tags(record)).items():
        game.headers[name] = value
    node: chess.pgn.GameNode = game
    for move in state.line:
        node = node.add_variation(move)
    for played in record["moves"]:
        node = node.add_variation(chess.Move.from_uci(played["move"]))
        clocks = played.get("clocks_ms")
        if clocks:
            node.set_clock(max(0, clocks[played["seat"]]) // 1000)  # whole seconds
    exporter = chess.pgn.StringExporter(headers=True, variations=False, comments=True)
    return game.accept(exporter) + "\n"


# -- PDN -------------------------------------------------------------------------------------


def pdn(record: dict[str, Any]) -> str:
    """The draughts game as PDN (GameType 20, international draughts), with a ``FEN``
    tag when it did not start from the usual position."""
    result = _result_tag(record, PDN_RESULTS)
    pdn_tags = _headers(record, result)
    pdn_tags["GameType"] = "20"
    # Our position text may add history fields (":H", ":E") after the three PDN ones.
    fen = ":".join(record["start"].split(":")[:3])
    black_starts = fen.startswith("B")
    if fen != _initial_draughts_fen():
        pdn_tags["FEN"] = fen
    pdn_tags.update(rating_tags(record))
    lines = [f'[{name} "{value}"]' for name, value in tags(pdn_tags).items()]
    words: list[str] = []  # a move number and its move are one word, never split by a wrap
    for index, played in enumerate(record["moves"]):
        ply = index + (1 if black_starts else 0)  # White's moves are the even plies
        if ply % 2 == 0:
            words.append(f"{ply // 2 + 1}. {played['move']}")
        elif index == 0:
            words.append(f"{ply // 2 + 1}... {played['move']}")
        else:
            words.append(played["move"])
        clocks = played.get("clocks_ms")
        if clocks:
            words.append("{[%clock " + _clock_text(clocks[played["seat"]]) + "]}")
    words.append(result)
    return "\n".join(lines) + "\n\n" + _wrap(words) + "\n"


def _initial_draughts_fen() -> str:
    start = DRAUGHTS.format_position(DRAUGHTS.initial(DRAUGHTS.normalize_options({})))
    return ":".join(start.split(":")[:3])


def _clock_text(ms: int) -> str:
    seconds = max(0, ms) // 1000
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _wrap(words: list[str], width: int = 79) -> str:
    lines: list[str] = []
    line = ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(line)
    return "\n".join(lines)


#: The writer of each notation a game's policy may name.
WRITERS: dict[str, Callable[[dict[str, Any]], str]] = {"pgn": pgn, "pdn": pdn}
