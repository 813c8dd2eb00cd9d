"""Client to server: every message a client may send, parsed at the edge into a dataclass.

:func:`parse_client_message` turns a decoded frame into one of the ``ClientMessage``
classes or raises :class:`ProtocolError` with a stable code; the text rules for names
and chat lines (:func:`check_name`, :func:`refused_character`, :func:`has_visible`),
time controls (:func:`parse_clock`) and player keys (:func:`player_id`) live here too.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

from kibitz.shared.protocol.codec import ProtocolError

MAX_TEXT = 512  # longest move, room id, token or option string accepted
MAX_POSITION = 4096  # longest position text (with its repetition history) accepted
MAX_NAME = 40  # longest display name (players, seeks, spectators in chat)

#: A player key: the secret a client keeps to be the same player across rooms.
PLAYER_KEY = re.compile(r"[A-Za-z0-9_-]{16,128}")


# -- field readers ----------------------------------------------------------------------


def _text(
    data: dict[str, Any], name: str, *, required: bool = True, max_length: int = MAX_TEXT
) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise ProtocolError("message/invalid", f"{data.get('type')!r} needs field {name!r}")
        return None
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise ProtocolError(
            "message/invalid",
            f"field {name!r} must be a non-empty string of at most {max_length} characters",
        )
    return value


#: Characters refused in names and chat lines besides the control characters (Unicode
#: category Cc) and the format characters (Cf): line and paragraph separators, and the
#: bidirectional embeddings, overrides and isolates that can make the text around them
#: read as something else (these last are Cf too: listed for the reader).
REFUSED_CHARACTERS = frozenset("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: The format characters (Cf) allowed: ZWNJ U+200C (Persian and Indic scripts need it)
#: and ZWJ U+200D (emoji sequences). Every other one is refused: invisible marks (RLM,
#: ALM, ZWSP, BOM, word joiner, soft hyphen, tag characters...) make look-alike names.
ALLOWED_FORMAT = frozenset("\u200c\u200d")
#: Letters that show as blank space (Hangul fillers, the blank Braille pattern): allowed
#: in text, but they do not make it visible (see :func:`has_visible`).
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def refused_character(text: str) -> str | None:
    """The first character of ``text`` that plain text on one line may not hold (a
    control character, a format character other than ZWJ and ZWNJ, or one of
    REFUSED_CHARACTERS), or None. The rule of chat lines and of display names."""
    for char in text:
        if char in REFUSED_CHARACTERS:
            return char
        category = unicodedata.category(char)
        if category == "Cc" or (category == "Cf" and char not in ALLOWED_FORMAT):
            return char
    return None


def has_visible(text: str) -> bool:
    """Whether ``text`` holds a character that shows: not whitespace, not a format
    character, not a blank letter (BLANK_LETTERS), not a combining mark (which shows only
    on another character). A name or chat line needs one."""
    for char in text:
        category = unicodedata.category(char)
        shows = category[0] not in "ZM" and category not in ("Cc", "Cf")
        if shows and char not in BLANK_LETTERS and not char.isspace():
            return True
    return False


def check_name(value: object, name: str = "name") -> str | None:
    """A display name (of a player or a spectator) as the server keeps it: None when
    absent; else its outer whitespace trimmed, 1 to MAX_NAME characters, plain text on
    one line (see :func:`refused_character`). Anything else: ``message/invalid``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolError("message/invalid", f"field {name!r} must be a string")
    char = refused_character(value)  # before trimming: "ann\n" is refused, not cut
    if char is not None:
        raise ProtocolError(
            "message/invalid",
            f"field {name!r} must be plain text on one line: character U+{ord(char):04X} "
            "is not allowed",
        )
    text = value.strip()
    if not text or len(text) > MAX_NAME:
        raise ProtocolError(
            "message/invalid",
            f"field {name!r} must hold 1 to {MAX_NAME} characters besides outer spaces",
        )
    if not has_visible(text):
        raise ProtocolError("message/invalid", f"field {name!r} needs a visible character")
    return text


def _int(data: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError("message/invalid", f"field {name!r} must be an integer {lo}-{hi}")
    return value


def _flag(data: dict[str, Any], name: str) -> bool:
    """An optional true/false field (absent or null: false); anything else is refused."""
    value = data.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ProtocolError("message/invalid", f"field {name!r} must be true or false")
    return value


MAX_OPTIONS = 16  # most keys in a create's or seek's ``options``


def _options(data: dict[str, Any]) -> dict[str, Any]:
    """``options`` of a ``create`` or ``seek``: an object of at most MAX_OPTIONS keys
    (their names and values are the game's to check: ``options/invalid``)."""
    options = data.get("options") or {}
    if not isinstance(options, dict):
        raise ProtocolError("message/invalid", "field 'options' must be an object")
    if len(options) > MAX_OPTIONS:
        raise ProtocolError(
            "message/invalid",
            f"field 'options' has {len(options)} keys; at most {MAX_OPTIONS} are accepted",
        )
    return options


def _rid(data: dict[str, Any]) -> str | int | None:
    rid = data.get("rid")
    if rid is None or (isinstance(rid, int | str) and not isinstance(rid, bool)):
        if isinstance(rid, str) and len(rid) > MAX_TEXT:
            raise ProtocolError("message/invalid", "field 'rid' is too long")
        if isinstance(rid, int) and abs(rid) > 2**53:
            raise ProtocolError("message/invalid", "field 'rid' is too large")
        return rid
    raise ProtocolError("message/invalid", "field 'rid' must be a string or an integer")


# -- client -> server -------------------------------------------------------------------

Opponent = str  # "human" or "ai:LEVEL" with LEVEL 1-8
MAX_LEVEL = 8


@dataclass(frozen=True, slots=True)
class Create:
    """Create a room and take a seat in it."""

    game: str
    options: dict[str, Any] = field(default_factory=dict)
    opponent: Opponent = "human"
    seat: int | None = None  # 0 (moves first), 1, or None for a random seat
    name: str | None = None
    position: str | None = None  # start from this position text instead of the initial one
    player_key: str | None = None  # the client's secret player key (see player_id)
    rid: str | int | None = None
    #: The time control: None (untimed), {"initial_ms", "increment_ms"} (Fischer) or
    #: {"days_per_move"} (correspondence); see parse_clock.
    clock: dict[str, int] | None = None
    #: A rated game: needs the creator signed in, and a signed-in opponent or an AI.
    rated: bool = False


@dataclass(frozen=True, slots=True)
class Join:
    """Take a free seat in a room (the given one, or any)."""

    room: str
    seat: int | None = None
    name: str | None = None
    player_key: str | None = None  # the client's secret player key (see player_id)
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Watch:
    """Follow a room as a spectator."""

    room: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Resume:
    """Reattach to a room after a reconnection; with a token, as that seat's player."""

    room: str
    token: str | None = None
    since: int | None = None
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class PlayMove:
    """Play a move for the seat that owns ``token``."""

    room: str
    token: str
    move: str
    version: int | None = None  # if given, the move is refused unless the room is there
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Resign:
    room: str
    token: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Leave:
    """Stop receiving a room's updates (the seat, if any, is kept)."""

    room: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Ping:
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Chat:
    """A chat line in a room: with ``token``, on the players' channel as that seat; without,
    on the spectators' channel (``name`` optional)."""

    room: str
    text: str
    token: str | None = None
    name: str | None = None
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Seek:
    """An open challenge in the lobby; ``seat`` is the creator's (None: random)."""

    game: str
    options: dict[str, Any] = field(default_factory=dict)
    clock: dict[str, int] | None = None
    seat: int | None = None
    name: str | None = None
    player_key: str | None = None
    rid: str | int | None = None
    #: A rated seek: its poster and its acceptor must be signed in.
    rated: bool = False
    #: The acceptor's rating must lie in [min, max] (see parse_rating_range); None: any.
    rating_range: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class PoolJoin:
    """Wait in the quick pairing pool of (game, clock, rated) to be paired with the
    closest rating there (see server/services/pool.py)."""

    game: str
    clock: dict[str, int] | None = None
    rated: bool = False
    name: str | None = None
    player_key: str | None = None
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class PoolLeave:
    """Stop waiting in the pool."""

    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Unseek:
    seek: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class AcceptSeek:
    """Accept a seek: a room is made with its creator and the acceptor seated."""

    seek: str
    name: str | None = None
    player_key: str | None = None
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Lobby:
    """Subscribe to (or stop) the lobby's seeks and live games."""

    subscribe: bool = True
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Offer:
    """Offer, accept or decline a draw, a takeback or a rematch (the message types
    ``draw``, ``takeback`` and ``rematch``) for the seat that owns ``token``."""

    kind: Literal["draw", "takeback", "rematch"]
    room: str
    token: str
    action: Literal["offer", "accept", "decline"] = "offer"
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Abort:
    """Cancel a game that has not really started (a waiting room, or not both seats moved)."""

    room: str
    token: str
    rid: str | int | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    """End the game as a win (or a draw) because the opponent has been gone too long."""

    room: str
    token: str
    result: Literal["win", "draw"] = "win"
    rid: str | int | None = None


MAX_CHAT = 300  # longest chat line, in characters


ClientMessage = (
    Create | Join | Watch | Resume | PlayMove | Resign | Leave | Ping
    | Chat | Seek | Unseek | AcceptSeek | Lobby | Offer | Abort | Claim | PoolJoin | PoolLeave
)  # fmt: skip
CLIENT_TYPES = (
    "create", "join", "watch", "resume", "move", "resign", "leave", "ping",
    "chat", "seek", "unseek", "accept", "lobby", "draw", "takeback", "rematch", "abort",
    "claim", "pool_join", "pool_leave",
)  # fmt: skip


def player_id(player_key: str) -> str:
    """The public id of the player who holds ``player_key``: 32 hex digits.

    The key is a secret the client keeps (a browser in localStorage); the id is derived
    from it one way, so showing the id to everyone gives nobody the key.
    """
    digest = hashlib.sha256(("kibitz-player:" + player_key).encode()).digest()
    return digest[:16].hex()


def _player_key(data: dict[str, Any]) -> str | None:
    value = data.get("player_key")
    if value is None:
        return None
    if not isinstance(value, str) or not PLAYER_KEY.fullmatch(value):
        raise ProtocolError(
            "message/invalid",
            "field 'player_key' must be 16 to 128 characters of A-Z, a-z, 0-9, '-' and '_'",
        )
    return value


def parse_opponent(value: object) -> Opponent:
    if value is None or value == "human":
        return "human"
    if isinstance(value, str) and value.startswith("ai:"):
        level = value[3:]
        if level.isdigit() and 1 <= int(level) <= MAX_LEVEL:
            return f"ai:{int(level)}"
    raise ProtocolError(
        "message/invalid", f"opponent must be 'human' or 'ai:1' to 'ai:{MAX_LEVEL}', not {value!r}"
    )


#: Time controls accepted by ``create`` (and seeks): Fischer and correspondence bounds.
CLOCK_INITIAL_MS = (1_000, 10_800_000)
CLOCK_INCREMENT_MS = (0, 180_000)
CLOCK_DAYS = (1, 14)


def parse_clock(value: object) -> dict[str, int] | None:
    """A time control from the wire: None/absent (untimed), ``{"initial_ms": N,
    "increment_ms": M}`` (Fischer; N 1000..10_800_000, M 0..180_000, M defaults to 0) or
    ``{"days_per_move": D}`` (correspondence, D 1..14). Anything else: ``clock/invalid``."""
    if value is None:
        return None

    def whole(name: str, bounds: tuple[int, int]) -> int:
        number = value.get(name) if isinstance(value, dict) else None
        lo, hi = bounds
        if not isinstance(number, int) or isinstance(number, bool) or not lo <= number <= hi:
            raise ProtocolError(
                "clock/invalid", f"clock field {name!r} must be an integer {lo}-{hi}"
            )
        return number

    if not isinstance(value, dict):
        raise ProtocolError("clock/invalid", "field 'clock' must be an object or null")
    keys = set(value)
    if keys == {"days_per_move"}:
        return {"days_per_move": whole("days_per_move", CLOCK_DAYS)}
    if keys and keys <= {"initial_ms", "increment_ms"} and "initial_ms" in keys:
        increment = whole("increment_ms", CLOCK_INCREMENT_MS) if "increment_ms" in keys else 0
        return {"initial_ms": whole("initial_ms", CLOCK_INITIAL_MS), "increment_ms": increment}
    raise ProtocolError(
        "clock/invalid",
        'field \'clock\' must be {"initial_ms": N, "increment_ms": M} or {"days_per_move": D}',
    )


def parse_client_message(data: dict[str, Any]) -> ClientMessage:
    """Validate a decoded client frame into its typed message."""
    kind = data.get("type")
    rid = _rid(data)
    if kind == "create":
        options = _options(data)
        seat = data.get("seat")
        if seat == "random":
            seat = None
        seat = _int({"seat": seat}, "seat", 0, 1)
        return Create(
            game=str(_text(data, "game")),
            options=options,
            opponent=parse_opponent(data.get("opponent")),
            seat=seat,
            name=check_name(data.get("name")),
            position=_text(data, "position", required=False, max_length=MAX_POSITION),
            player_key=_player_key(data),
            rid=rid,
            clock=parse_clock(data.get("clock")),
            rated=_flag(data, "rated"),
        )
    if kind == "join":
        return Join(
            room=str(_text(data, "room")),
            seat=_int(data, "seat", 0, 1),
            name=check_name(data.get("name")),
            player_key=_player_key(data),
            rid=rid,
        )
    if kind == "watch":
        return Watch(room=str(_text(data, "room")), rid=rid)
    if kind == "resume":
        return Resume(
            room=str(_text(data, "room")),
            token=_text(data, "token", required=False),
            since=_int(data, "since", 0, 2**53),
            rid=rid,
        )
    if kind == "move":
        return PlayMove(
            room=str(_text(data, "room")),
            token=str(_text(data, "token")),
            move=str(_text(data, "move")),
            version=_int(data, "version", 0, 2**53),
            rid=rid,
        )
    if kind == "resign":
        return Resign(room=str(_text(data, "room")), token=str(_text(data, "token")), rid=rid)
    if kind == "leave":
        return Leave(room=str(_text(data, "room")), rid=rid)
    if kind == "ping":
        return Ping(rid=rid)
    if kind in ("chat", "seek", "unseek", "accept", "lobby"):
        return _parse_lobby_message(kind, data, rid)
    if kind in ("pool_join", "pool_leave"):
        return _parse_pool_message(kind, data, rid)
    if kind in ("draw", "takeback", "rematch", "abort", "claim"):
        return _parse_action(kind, data, rid)
    raise ProtocolError(
        "message/unknown_type",
        f"unknown message type {kind!r}; expected one of {', '.join(CLIENT_TYPES)}",
    )


def _parse_lobby_message(kind: str, data: dict[str, Any], rid: str | int | None) -> ClientMessage:
    """``chat``, ``seek``, ``unseek``, ``accept`` and ``lobby``."""
    if kind == "chat":
        text = data.get("text")
        if not isinstance(text, str):
            raise ProtocolError("chat/invalid", "field 'text' must be a string")
        return Chat(
            room=str(_text(data, "room")),
            text=text,  # checked by the chat module (chat/invalid)
            token=_text(data, "token", required=False),
            name=check_name(data.get("name")),
            rid=rid,
        )
    if kind == "seek":
        options = _options(data)
        seat = data.get("seat")
        return Seek(
            game=str(_text(data, "game")),
            options=options,
            clock=parse_clock(data.get("clock")),
            seat=None if seat in (None, "random") else _int(data, "seat", 0, 1),
            name=check_name(data.get("name")),
            player_key=_player_key(data),
            rid=rid,
            rated=_flag(data, "rated"),
            rating_range=parse_rating_range(data.get("rating_range")),
        )
    if kind == "unseek":
        return Unseek(seek=str(_text(data, "seek")), rid=rid)
    if kind == "accept":
        return AcceptSeek(
            seek=str(_text(data, "seek")),
            name=check_name(data.get("name")),
            player_key=_player_key(data),
            rid=rid,
        )
    subscribe = data.get("subscribe", True)
    if not isinstance(subscribe, bool):
        raise ProtocolError("message/invalid", "field 'subscribe' must be true or false")
    return Lobby(subscribe=subscribe, rid=rid)


#: The ratings a seek's ``rating_range`` may name.
RATING_BOUNDS = (0, 4000)


def parse_rating_range(value: object) -> tuple[int, int] | None:
    """A seek's ``rating_range``: None/absent (any rating) or ``[min, max]``, two integers
    in RATING_BOUNDS with min <= max. Anything else: ``message/invalid``."""
    if value is None:
        return None
    lo, hi = RATING_BOUNDS
    if (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi for v in value)
        and value[0] <= value[1]
    ):
        return int(value[0]), int(value[1])
    raise ProtocolError(
        "message/invalid",
        f"field 'rating_range' must be [min, max]: two integers {lo}-{hi}, min <= max",
    )


def _parse_pool_message(kind: str, data: dict[str, Any], rid: str | int | None) -> ClientMessage:
    """``pool_join`` and ``pool_leave``."""
    if kind == "pool_leave":
        return PoolLeave(rid=rid)
    return PoolJoin(
        game=str(_text(data, "game")),
        clock=parse_clock(data.get("clock")),
        rated=_flag(data, "rated"),
        name=check_name(data.get("name")),
        player_key=_player_key(data),
        rid=rid,
    )


def _parse_action(kind: str, data: dict[str, Any], rid: str | int | None) -> ClientMessage:
    """``draw``, ``takeback``, ``rematch`` (an ``action``), ``abort`` and ``claim``."""
    room, token = str(_text(data, "room")), str(_text(data, "token"))
    if kind == "abort":
        return Abort(room=room, token=token, rid=rid)
    if kind == "claim":
        result = data.get("result", "win")
        if result not in ("win", "draw"):
            raise ProtocolError("message/invalid", "field 'result' must be 'win' or 'draw'")
        return Claim(room=room, token=token, result=result, rid=rid)
    action = data.get("action", "offer")
    if action not in ("offer", "accept", "decline"):
        raise ProtocolError(
            "message/invalid", "field 'action' must be 'offer', 'accept' or 'decline'"
        )
    offer_kind: Literal["draw", "takeback", "rematch"] = (
        "draw" if kind == "draw" else "takeback" if kind == "takeback" else "rematch"
    )
    return Offer(kind=offer_kind, room=room, token=token, action=action, rid=rid)
