"""kibitz's rooms and challenges in the JSON shapes of lichess's Bot and Board APIs (pure).

Every function here reads a room's public ``state`` snapshot (docs/protocol.md,
``state``) or the :class:`~kibitz.server.domain.room.Room` record, and writes what a
lichess client expects: variants, colours, statuses, players, clocks and the lines of a
game stream (``gameFull``, ``gameState``, ``chatLine``, ``opponentGone``). Nothing here
does I/O or keeps state; a field kibitz cannot fill is left out, never made up.

The mapping, in short: seat 0 is ``"white"``, seat 1 ``"black"``, in every game; chess is
lichess's ``"standard"`` variant (its game's ``GamePolicy.lichess_variant``) and every
other game is a variant named by its kibitz id; moves are the room's wire notation (chess:
UCI, castling ``e1g1``, promotion ``e7e8q``, exactly what lichess sends and expects).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kibitz.server.domain.room import Room
from kibitz.server.domain.speeds import speed_of
from kibitz.shared.games import find_game
from kibitz.shared.games.registry import GAME_MODULES

#: What lichess shows for "no clock": the largest 32-bit int, in ms.
UNTIMED_MS = 2147483647
COLOURS = ("white", "black")

#: lichess's status ids, by name (lichess's ``Status``).
STATUS_IDS: dict[str, int] = {
    "created": 10,
    "started": 20,
    "aborted": 25,
    "mate": 30,
    "resign": 31,
    "stalemate": 32,
    "timeout": 33,
    "draw": 34,
    "outoftime": 35,
    "noStart": 37,
    "unknownFinish": 38,
    "variantEnd": 60,
}

#: How a kibitz ``result.termination`` ends a game of a lichess variant (chess)...
_CHESS_ENDS: dict[str, str] = {
    "checkmate": "mate",
    "stalemate": "stalemate",
    "repetition": "draw",
    "rule": "draw",
    "move-limit": "draw",
}
#: ...and how it ends any game (a game's own ending not listed: ``variantEnd``).
_COMMON_ENDS: dict[str, str] = {
    "resignation": "resign",
    "time": "outoftime",
    "agreement": "draw",
    "claim": "timeout",
    "abandon": "timeout",
}
#: Endings by a game's own rules in the games lichess does not have.
_RULE_ENDS = frozenset(
    {"line", "board-full", "last-match", "score", "no-moves", "repetition", "rule", "move-limit"}
)
#: The name and short name lichess gives each of its variant keys that we serve.
_LICHESS_NAMES: dict[str, tuple[str, str]] = {"standard": ("Standard", "Std")}


class UnknownVariant(ValueError):
    """A lichess variant key that names no game of ours."""


# -- games and variants -----------------------------------------------------------------


def variant_key(game: str) -> str:
    """The lichess variant key of ``game``: its policy's ``lichess_variant``, else the
    game's own id."""
    return find_game(game).policy.lichess_variant or game


def variant_json(game: str) -> dict[str, str]:
    """``{"key", "name", "short"}`` of ``game``: lichess's own for a lichess variant,
    else the game's id, its catalogue title and its id capitalised."""
    key = variant_key(game)
    name, short = _LICHESS_NAMES.get(key, (find_game(game).title, game.capitalize()))
    return {"key": key, "name": name, "short": short}


def game_of_variant(key: str) -> str:
    """The game a lichess variant key names: a lichess variant we serve (``standard``),
    or any game's own id (``chess`` too); UnknownVariant for anything else."""
    for game in GAME_MODULES:
        if key in (game, find_game(game).policy.lichess_variant):
            return str(game)
    known = ", ".join(sorted({variant_key(game) for game in GAME_MODULES}))
    raise UnknownVariant(f"Unknown variant {key!r}; this server plays: {known}")


def colour(seat: int) -> str:
    """Seat 0 is ``"white"`` (the first player), seat 1 ``"black"``, in every game."""
    return COLOURS[seat]


def seat_of_colour(name: str) -> int:
    """The seat of a lichess colour (``"white"`` or ``"black"``); ValueError otherwise."""
    if name not in COLOURS:
        raise ValueError(f"no colour {name!r}: white or black")
    return COLOURS.index(name)


# -- statuses -------------------------------------------------------------------------------


def _status_fields(source: Room | Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any] | None]:
    """(game, status, result) of a room or of its snapshot."""
    if isinstance(source, Room):
        return source.game, source.status, source.result
    return str(source["game"]), str(source["status"]), source.get("result")


def status_name(source: Room | Mapping[str, Any]) -> str:
    """The lichess status of a room or its snapshot (see :func:`status_for`)."""
    return status_for(*_status_fields(source))[1]


def status_for(game: str, status: str, result: Mapping[str, Any] | None) -> tuple[int, str]:
    """(lichess status id, name) of a game of ``game`` in kibitz ``status`` (``waiting``,
    ``playing``, ``over``) with ``result`` (``{"winner", "reason", "termination"}``):
    ``created`` while a seat is free, ``started`` while it plays, then by how it ended
    (the table in docs/bot-api.md)."""
    if status == "waiting":
        return STATUS_IDS["created"], "created"
    if status == "playing":
        return STATUS_IDS["started"], "started"
    termination = str((result or {}).get("termination"))
    if termination == "abort":
        # A player's abort ("aborted"), or a first move not made in time ("aborted: ...").
        name = "aborted" if (result or {}).get("reason") == "aborted" else "noStart"
    elif termination in _COMMON_ENDS:
        name = _COMMON_ENDS[termination]
    elif find_game(game).policy.lichess_variant is not None:
        name = _CHESS_ENDS.get(termination, "unknownFinish")
    else:
        name = "variantEnd" if termination in _RULE_ENDS else "unknownFinish"
    return STATUS_IDS[name], name


def status_of(source: Room | Mapping[str, Any]) -> tuple[int, str]:
    """(lichess status id, name) of a room or its snapshot (gameStart's ``status``)."""
    return status_for(*_status_fields(source))


def status_json(source: Room | Mapping[str, Any]) -> dict[str, Any]:
    """``{"id", "name"}``: the status as gameStart and gameFinish show it."""
    status_id, name = status_of(source)
    return {"id": status_id, "name": name}


def winner_colour(result: Mapping[str, Any] | None) -> str | None:
    """``"white"``/``"black"`` for a result with a winner, else None."""
    winner = (result or {}).get("winner")
    return colour(int(winner)) if winner is not None else None


def winner_of(source: Room | Mapping[str, Any]) -> str | None:
    """``"white"``/``"black"`` once a game is won, else None (a draw, no game, not over)."""
    _, status, result = _status_fields(source)
    return winner_colour(result) if status == "over" else None


# -- players -------------------------------------------------------------------------------


def user_id(username: str) -> str:
    """lichess's user id: the username in lower case."""
    return username.lower()


def light_user(seat: Mapping[str, Any]) -> dict[str, Any]:
    """A seat of a snapshot (``state.seats[i]``) as lichess shows a player: an account's
    ``{"id", "name", "title"?: "BOT", "rating"?, "provisional"?}``, the AI's
    ``{"aiLevel": N}``, a guest's ``{"name"}``, and ``{}`` for a free seat."""
    if seat.get("kind") == "ai":
        return {"aiLevel": seat.get("level")}
    account = seat.get("account")
    if isinstance(account, str):
        user: dict[str, Any] = {"id": user_id(account), "name": account}
        if seat.get("bot"):
            user["title"] = "BOT"
        if seat.get("rating") is not None:
            user["rating"] = seat["rating"]
        if seat.get("provisional"):
            user["provisional"] = True
        return user
    if seat.get("taken") and seat.get("name"):
        return {"name": seat["name"]}
    return {}


# -- time controls and speeds -----------------------------------------------------------


def speed_of_clock(game: str, clock: Mapping[str, Any] | None) -> str:
    """The lichess speed of a game of ``game`` with ``clock`` (a snapshot's ``clock``, a
    time control ``{"initial_ms", "increment_ms"}`` or ``{"days_per_move"}``, or None):
    kibitz's rating speed (server/domain/speeds.py), so chess has bullet, blitz, rapid,
    classical and correspondence, and the other games ``timed`` and ``correspondence``."""
    return str(speed_of(game, clock))


def perf_name(speed: str) -> str:
    """lichess's perf name of a speed: capitalised (``Blitz``, ``Timed``)."""
    return speed.capitalize()


def perf_json(game: str, clock: Mapping[str, Any] | None) -> dict[str, str]:
    """``{"name"}``: the perf (rating category) of such a game, its speed capitalised."""
    return {"name": perf_name(speed_of_clock(game, clock))}


def _minutes(seconds: int) -> str:
    """A clock's limit in minutes as lichess writes it: ``3``, ``½``, ``1.5``."""
    fractions = {15: "¼", 30: "½", 45: "¾"}
    if seconds in fractions:
        return fractions[seconds]
    if seconds % 60 == 0:
        return str(seconds // 60)
    return f"{seconds / 60:.2f}".rstrip("0").rstrip(".")


def time_control_json(clock: Mapping[str, Any] | None) -> dict[str, Any]:
    """A challenge's ``timeControl``: ``{"type": "clock", "limit": s, "increment": s,
    "show": "3+2"}``, ``{"type": "correspondence", "daysPerTurn": N}`` or
    ``{"type": "unlimited"}``."""
    if clock is None:
        return {"type": "unlimited"}
    if "days_per_move" in clock:
        return {"type": "correspondence", "daysPerTurn": int(clock["days_per_move"])}
    limit = int(clock["initial_ms"]) // 1000
    increment = int(clock.get("increment_ms", 0)) // 1000
    show = f"{_minutes(limit)}+{increment}"
    return {"type": "clock", "limit": limit, "increment": increment, "show": show}


def clock_json(clock: Mapping[str, Any] | None) -> dict[str, int] | None:
    """gameFull's ``clock``: ``{"initial": ms, "increment": ms}``, or None (untimed and
    correspondence games; see :func:`days_per_turn`)."""
    if clock is None or "days_per_move" in clock:
        return None
    return {"initial": int(clock["initial_ms"]), "increment": int(clock.get("increment_ms", 0))}


def days_per_turn(clock: Mapping[str, Any] | None) -> int | None:
    """gameFull's ``daysPerTurn`` of a correspondence game, else None."""
    if clock is None or "days_per_move" not in clock:
        return None
    return int(clock["days_per_move"])


def times_ms(snapshot: Mapping[str, Any], now_ms: int | None = None) -> tuple[int, int]:
    """Each side's time left (ms) as the snapshot's clock says, the running side's less
    the time since the clock was read (``now_ms``, server clock; None: as read);
    UNTIMED_MS each in an untimed game."""
    clock = snapshot.get("clock")
    if clock is None:
        return UNTIMED_MS, UNTIMED_MS
    left = [int(x) for x in clock["remaining_ms"]]
    running = clock.get("running")
    if running is not None and now_ms is not None:
        left[running] = max(0, left[running] - max(0, now_ms - int(clock["at"])))
    return left[0], left[1]


# -- positions and moves ---------------------------------------------------------------------


def initial_fen(room: Room) -> str:
    """gameFull's ``initialFen``: ``"startpos"`` for a game of a lichess variant from its
    usual start, else the room's start position text (chess: a FEN)."""
    game = find_game(room.game)
    if game.policy.lichess_variant is not None:
        usual = game.format_position(game.initial(room.options))
        if room.start == usual:
            return "startpos"
    return current_fen(room.game, room.start)


def current_fen(game: str, position: str) -> str:
    """The position text lichess shows as ``fen`` (gameStart): the game's position text,
    except that chess's (``FEN moves e2e4 ...``, the moves since its last irreversible
    one, kept for repetitions) is the plain FEN of the position reached."""
    rules = find_game(game)
    if rules.policy.lichess_variant is None or " moves " not in position:
        return position
    state = rules.parse_position(position)
    return str(state.board.fen())


def moves_text(snapshot: Mapping[str, Any]) -> str:
    """gameState's ``moves``: every move of the room in its wire notation, space-separated."""
    return " ".join(str(move["move"]) for move in snapshot.get("moves", ()))


# -- the lines of a game stream ----------------------------------------------------------------


def game_state(snapshot: Mapping[str, Any], now_ms: int | None = None) -> dict[str, Any]:
    """A ``gameState`` line for a room's snapshot (``now_ms``: see :func:`times_ms`)."""
    wtime, btime = times_ms(snapshot, now_ms)
    clock = snapshot.get("clock") or {}
    increment = int(clock.get("increment_ms", 0))
    offers = snapshot.get("offers") or {}
    line: dict[str, Any] = {
        "type": "gameState",
        "moves": moves_text(snapshot),
        "wtime": wtime,
        "btime": btime,
        "winc": increment,
        "binc": increment,
        "status": status_name(snapshot),
    }
    winner = winner_of(snapshot)
    if winner is not None:
        line["winner"] = winner
    line.update(
        wdraw=offers.get("draw") == 0,
        bdraw=offers.get("draw") == 1,
        wtakeback=offers.get("takeback") == 0,
        btakeback=offers.get("takeback") == 1,
    )
    return line


def state_key(line: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a lichess client reads in a gameState besides the running clocks: a snapshot
    whose line has the same key as the last one sent (a presence update, a spectator
    count) changes nothing it shows, and is not sent."""
    return tuple((k, v) for k, v in sorted(line.items()) if k not in ("wtime", "btime"))


def game_full(room: Room, snapshot: Mapping[str, Any], now_ms: int | None = None) -> dict[str, Any]:
    """The ``gameFull`` line a game stream begins with: the room and its state now."""
    control = snapshot.get("clock")
    seats = snapshot["seats"]
    full: dict[str, Any] = {
        "type": "gameFull",
        "id": room.id,
        "variant": variant_json(room.game),
        "speed": speed_of_clock(room.game, control),
        "perf": perf_json(room.game, control),
        "rated": bool(snapshot.get("rated", False)),
        "createdAt": room.created_ms,
        "white": light_user(seats[0]),
        "black": light_user(seats[1]),
        "initialFen": initial_fen(room),
        "clock": clock_json(control),
    }
    days = days_per_turn(control)
    if days is not None:
        full["daysPerTurn"] = days
    full["state"] = game_state(snapshot, now_ms)
    return full


def chat_lines(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``chatLine`` lines of one of our ``chat`` messages (its channel's lines): the
    players' channel is lichess's ``player`` room, the spectators' its ``spectator``
    room; the sender is the account's username, or the seat's name for a guest."""
    room = "player" if message.get("channel") == "players" else "spectator"
    return [
        {
            "type": "chatLine",
            "room": room,
            "username": line.get("account") or line.get("name") or "",
            "text": line.get("text", ""),
        }
        for line in message.get("messages", ())
    ]


def opponent_gone(
    snapshot: Mapping[str, Any], seat: int, now_ms: int | None = None
) -> dict[str, Any] | None:
    """The ``opponentGone`` line for the player in ``seat``: ``{"gone": true,
    "claimWinInSeconds": s}`` while the opponent (a human who took the seat) is away,
    ``{"gone": false}`` while present; None if there is nothing to say (an AI opponent, a
    free seat, a game over)."""
    if snapshot.get("status") != "playing":
        return None
    other = snapshot["seats"][1 - seat]
    if other.get("kind") != "human" or not other.get("taken"):
        return None
    gone_ms = other.get("gone_ms")
    if other.get("connected") or gone_ms is None:
        return {"type": "opponentGone", "gone": False}
    line: dict[str, Any] = {"type": "opponentGone", "gone": True}
    after = snapshot.get("claim_after_ms")
    if after is not None:
        now = int(gone_ms) if now_ms is None else now_ms
        # Never more than the whole wait (the clocks of nodes differ by a few ms).
        left_ms = min(int(after), max(0, int(gone_ms) + int(after) - now))
        line["claimWinInSeconds"] = -(-left_ms // 1000)
    return line
