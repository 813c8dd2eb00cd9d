"""Exports of game records, read back by other programs: python-chess for PGN, pydraughts
for PDN. The records are built by playing real games through our rules."""

from __future__ import annotations

import io
import json
import random
import re
from typing import Any

import chess
import chess.pgn
import pytest
from draughts import Board as DraughtsBoard
from draughts import Move as DraughtsMove
from draughts.PDN import PDNReader
from hypothesis import given, settings
from hypothesis import strategies as st

from kibitz.server.domain import export
from kibitz.shared.games import available_games, find_game
from kibitz.shared.protocol.client_in import check_name
from kibitz.shared.protocol.codec import ProtocolError


def played_record(
    game_name: str, seed: int, max_plies: int = 400, clocks: bool = False
) -> dict[str, Any]:
    """A record of a random game played through the rules (``clocks``: with a clock
    reading after every move, as a timed game would have)."""
    game = find_game(game_name)
    rng = random.Random(seed)
    state = game.initial(game.normalize_options({}))
    start = game.format_position(state)
    moves = []
    left = [300_000, 300_000]
    for ply in range(max_plies):
        if game.outcome(state) is not None:
            break
        move = rng.choice(game.legal_moves(state))
        seat = game.to_move(state)
        left[seat] -= rng.randrange(500, 20_000)
        moves.append(
            {
                "move": game.format_move(state, move),
                "display": game.display_move(state, move),
                "seat": seat,
                "at_ms": 1_700_000_000_000 + 1000 * ply,
                "clocks_ms": list(left) if clocks else None,
            }
        )
        state = game.apply(state, move)
    outcome = game.outcome(state)
    return {
        "id": f"test{seed}",
        "game": game_name,
        "options": {},
        "start": start,
        "players": [
            {"seat": 0, "name": "ann", "kind": "human", "level": None, "player": None},
            {"seat": 1, "name": None, "kind": "ai", "level": 3, "player": None},
        ],
        "time_control": None,
        "moves": moves,
        "result": {"winner": outcome.winner, "reason": outcome.reason} if outcome else None,
        "status": "over" if outcome else "playing",
        "started_ms": 1_700_000_000_000,
        "ended_ms": 1_700_000_900_000 if outcome else None,
        "chat": [],
    }


def read_pgn(text: str) -> chess.pgn.Game:
    game = chess.pgn.read_game(io.StringIO(text))
    assert game is not None and not game.errors, game.errors if game else text
    return game


@pytest.mark.parametrize("seed", range(6))
def test_pgn_reads_back_with_the_same_moves_and_result(seed: int) -> None:
    record = played_record("chess", seed)
    game = read_pgn(export.pgn(record))
    assert [m.uci() for m in game.mainline_moves()] == [m["move"] for m in record["moves"]]
    expected = "*" if record["result"] is None else export.PGN_RESULTS[record["result"]["winner"]]
    assert game.headers["Result"] == expected
    assert game.headers["White"] == "ann" and game.headers["Black"] == "AI level 3"
    assert all(node.clock() is None for node in game.mainline())


def pgn_unescape(token: str) -> str:
    """A tag's string token as text: ``\\"`` is a quote and ``\\\\`` a backslash. python-chess
    1.11 and pydraughts give the token as written (escapes and all)."""
    return re.sub(r'\\(["\\])', r"\1", token)


#: A tag pair as the PGN standard (8.1.1, 7) writes it, which PDN shares: a symbol, a
#: string token whose only escapes are a backslash before a quote or a backslash, and no
#: control characters.
SPEC_TAG = re.compile(r'\[([A-Za-z0-9_]+) "((?:[^"\\\x00-\x1f\x7f]|\\["\\])*)"\]')


def spec_tags(text: str) -> dict[str, str]:
    """The tags of a game as a reader of the standard reads them; every line before the
    first empty one must be one valid tag pair."""
    tags = {}
    for line in text.split("\n\n", 1)[0].split("\n"):
        match = SPEC_TAG.fullmatch(line)
        assert match, f"not a valid tag pair: {line!r}"
        tags[match.group(1)] = pgn_unescape(match.group(2))
    return tags


def test_names_typed_by_people_stay_inside_their_header() -> None:
    record = played_record("chess", 2, max_plies=6)
    # A record older than the name rule may hold a line break: it becomes a space.
    record["players"][0]["name"] = 'Ann "the\nrook" \\ B'
    text = export.pgn(record)
    assert '[White "Ann \\"the rook\\" \\\\ B"]' in text.splitlines()
    game = read_pgn(text)
    assert pgn_unescape(game.headers["White"]) == 'Ann "the rook" \\ B'
    assert len(list(game.mainline_moves())) == 6
    record = played_record("draughts", 2, max_plies=6)
    record["players"][1]["name"] = 'Bo "x"\n[Result "2-0"]'
    [read] = PDNReader(pdn_text=export.pdn(record)).games
    assert len(read.moves) == 6 and read.game_ending == "*"
    assert pgn_unescape(read.tags["Black"]) == 'Bo "x" [Result "2-0"]'


#: Names as the name rule lets them through (any text of 1-40 characters, none of them
#: refused; surrogates cannot come through JSON), rich in what PGN and PDN use.
NAMES = st.text(
    alphabet=st.one_of(
        st.sampled_from('"\\[]{}();%*. -'), st.characters(blacklist_categories=("Cs",))
    ),
    min_size=1,
    max_size=48,
).filter(lambda text: _accepted(text) is not None)


def _accepted(text: str) -> str | None:
    try:
        return check_name(text)
    except ProtocolError:
        return None


@settings(max_examples=60, deadline=None)
@given(white=NAMES, black=NAMES)
def test_any_accepted_name_reads_back_exactly_in_python_chess(white: str, black: str) -> None:
    white, black = str(check_name(white)), str(check_name(black))
    record = played_record("chess", 3, max_plies=8)
    record["players"][0]["name"], record["players"][1]["name"] = white, black
    record["players"][1]["kind"] = "human"
    text = export.pgn(record)
    game = read_pgn(text)
    assert pgn_unescape(game.headers["White"]) == white
    assert pgn_unescape(game.headers["Black"]) == black
    assert spec_tags(text) == {k: pgn_unescape(v) for k, v in game.headers.items()}
    assert game.headers["Result"] == "*"
    assert [m.uci() for m in game.mainline_moves()] == [m["move"] for m in record["moves"]]


@settings(max_examples=60, deadline=None)
@given(white=NAMES, black=NAMES)
def test_any_accepted_name_reads_back_exactly_in_pydraughts(white: str, black: str) -> None:
    white, black = str(check_name(white)), str(check_name(black))
    record = played_record("draughts", 3, max_plies=8)
    record["players"][0]["name"], record["players"][1]["name"] = white, black
    text = export.pdn(record)
    [read] = PDNReader(pdn_text=text).games
    assert spec_tags(text) == {k: pgn_unescape(v) for k, v in read.tags.items()}
    assert pgn_unescape(read.tags["White"]) == white
    assert pgn_unescape(read.tags["Black"]) == black
    assert read.moves == [m["move"] for m in record["moves"]] and read.game_ending == "*"


def test_tag_values_are_string_tokens() -> None:
    assert export.tag_value('a"b\\c') == 'a\\"b\\\\c'
    assert export.tag_value("a\nb\x1bc\u202ed") == "a b c d"
    assert export.tag_value("x" * 300) == "x" * export.MAX_TAG_VALUE


def test_pgn_clock_comments_read_back() -> None:
    record = played_record("chess", 7, max_plies=40, clocks=True)
    text = export.pgn(record)
    assert "[%clk 0:04:" in text
    game = read_pgn(text)
    nodes = list(game.mainline())
    assert len(nodes) == len(record["moves"])
    for node, move in zip(nodes, record["moves"], strict=True):
        # The mover's time left after the move, in whole seconds.
        assert node.clock() == move["clocks_ms"][move["seat"]] // 1000


@pytest.mark.parametrize(
    ("control", "tag"),
    [
        ({"initial_ms": 180_000, "increment_ms": 2_000}, "180+2"),
        ({"initial_ms": 600_000, "increment_ms": 0}, "600"),
        ({"initial_ms": 15_000, "increment_ms": 1_000}, "15+1"),
        (None, "-"),
        ({"days_per_move": 3}, "1/259200"),
        ({"days_per_move": 1}, "1/86400"),
    ],
)
def test_pgn_time_control_tag_reads_back(control: dict[str, int] | None, tag: str) -> None:
    """PGN standard 9.6.1: "seconds+increment", "-" untimed, "moves/seconds" a period
    (correspondence: one move per so many days, in seconds); python-chess reads it back."""
    record = played_record("chess", 3, max_plies=12, clocks=control is not None)
    record["time_control"] = control
    game = read_pgn(export.pgn(record))
    assert game.headers["TimeControl"] == tag
    assert len(list(game.mainline_moves())) == len(record["moves"])
    # Each field of the tag is as the standard's grammar has it.
    assert re.fullmatch(r"-|\?|\d+/\d+|\d+(\+\d+)?", game.headers["TimeControl"])
    # python-chess's own parser of the tag agrees on the numbers.
    parsed = game.time_control()
    if control is None:
        assert parsed.type == chess.pgn.TimeControlType.UNLIMITED and not parsed.parts
    elif "days_per_move" in control:
        assert (parsed.parts[0].moves, parsed.parts[0].time) == (
            1,
            control["days_per_move"] * 86400,
        )
    else:
        assert parsed.parts[0].time == control["initial_ms"] // 1000
        assert parsed.parts[0].increment == control["increment_ms"] // 1000


def test_pgn_from_a_given_position_with_its_history() -> None:
    chess_game = find_game("chess")
    fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"
    start = chess_game.parse_position(f"{fen} moves f3g1 c6b8")
    record = played_record("chess", 1, max_plies=0)
    record["start"] = chess_game.format_position(start)
    record["moves"] = [{"move": "g1f3", "display": "Nf3", "seat": 0, "at_ms": 0, "clocks_ms": None}]
    game = read_pgn(export.pgn(record))
    assert game.headers["FEN"] == fen
    assert [m.uci() for m in game.mainline_moves()] == ["f3g1", "c6b8", "g1f3"]


def replay_pdn(text: str) -> tuple[list[str], str]:
    """The moves of a PDN game as pydraughts reads them (each one played on its own board,
    so an illegal move fails here), and the result."""
    [game] = PDNReader(pdn_text=text).games
    assert game.variant == "standard"
    board = DraughtsBoard(variant="standard", fen=game.tags.get("FEN", "startpos"))
    for move in game.moves:
        board.push(DraughtsMove(board, pdn_move=move))
    return game.moves, game.game_ending


@pytest.mark.parametrize("seed", range(4))
def test_pdn_reads_back_in_pydraughts(seed: int) -> None:
    record = played_record("draughts", seed, max_plies=120)
    moves, ending = replay_pdn(export.pdn(record))
    assert moves == [m["move"] for m in record["moves"]]
    expected = "*" if record["result"] is None else export.PDN_RESULTS[record["result"]["winner"]]
    assert ending == expected


def test_pdn_with_clocks_reads_back() -> None:
    record = played_record("draughts", 5, max_plies=30, clocks=True)
    text = export.pdn(record)
    assert "{[%clock 0:04:" in text
    moves, _ = replay_pdn(text)
    assert moves == [m["move"] for m in record["moves"]]


def test_pdn_of_a_finished_draughts_game() -> None:
    seed = next(s for s in range(200) if played_record("draughts", s, 3000)["result"])
    record = played_record("draughts", seed, 3000)
    text = export.pdn(record)
    assert '[GameType "20"]' in text and "[FEN" not in text
    moves, ending = replay_pdn(text)
    assert moves == [m["move"] for m in record["moves"]]
    assert ending == export.PDN_RESULTS[record["result"]["winner"]]


def test_formats_per_game_and_refusals() -> None:
    assert export.formats_for("chess") == ["pgn", "json"]
    assert export.formats_for("draughts") == ["pdn", "json"]
    assert export.formats_for("othello") == ["json"]
    record = played_record("tictactoe", 3)
    text, content_type = export.export(record, "json")
    assert content_type == "application/json"
    assert json.loads(text)["moves"] == record["moves"]
    for fmt in ("pgn", "pdn", "sgf"):
        with pytest.raises(export.ExportError) as caught:
            export.export(record, fmt)
        assert caught.value.code == "export/format"


def test_every_notation_a_game_names_has_a_writer_and_its_media_type() -> None:
    named = {g.policy.notation for g in available_games() if g.policy.notation is not None}
    assert {notation.name for notation in named} <= set(export.WRITERS)
    for game, fmt, media_type in (
        ("chess", "pgn", "application/x-chess-pgn"),
        ("draughts", "pdn", "application/x-draughts-pdn"),
    ):
        text, content_type = export.export(played_record(game, 1), fmt)
        assert content_type == media_type and text == export.WRITERS[fmt](played_record(game, 1))
