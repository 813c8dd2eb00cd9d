"""The one interface every game implements.

A game is a set of pure functions over immutable states: a state and a move go in, a
new state (or a typed error) comes out. The server, the searcher, the CLI and the tests
depend only on this interface; a game module never performs I/O.

Players are numbered 0 and 1; player 0 is the side that moves first from the standard
initial position (X in tic-tac-toe, Black in Othello and Kono, White in chess and
draughts, South in Oware). ``Game.players`` names them for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar, get_args

from kibitz.shared.games.policy import DEFAULT_POLICY, GamePolicy

State = TypeVar("State")
Move = TypeVar("Move")

Player = int  # 0 or 1
OptionValue = int | str | bool
Options = Mapping[str, OptionValue]


class GameError(ValueError):
    """Base of every rules error. The message always names the offending input."""

    code = "game/error"


class InvalidMoveError(GameError):
    """The move text cannot be parsed in this game's notation."""

    code = "move/invalid"


class IllegalMoveError(GameError):
    """The move is well formed but not legal in this position."""

    code = "move/illegal"


class InvalidPositionError(GameError):
    """The position text cannot be parsed or describes an impossible position."""

    code = "position/invalid"


class InvalidOptionError(GameError):
    """An unknown game option, or a value out of range."""

    code = "options/invalid"


class GameOverError(GameError):
    """A move was attempted in a finished game."""

    code = "game/over"


#: Why a game ended, as a closed set of codes (``result.termination`` on the wire; the
#: free-text ``reason`` says the same for people). docs/protocol.md lists which reasons go
#: with which code. By the rules of the game:
#:
#: - ``checkmate``: chess, the side to move is mated (it loses).
#: - ``stalemate``: chess, the side to move has no legal move and is not in check (a draw).
#: - ``line``: tic-tac-toe, three in a row.
#: - ``board-full``: tic-tac-toe, no empty cell left (a draw).
#: - ``last-match``: matches, the last match was taken (whoever took it loses).
#: - ``score``: the game was decided by counting: Othello's discs, Oware's 25 seeds or 24-24.
#: - ``no-moves``: the side to move cannot move, which ends the game: draughts and Kono (it
#:   loses), Oware (counted out).
#: - ``repetition``: a position repeated (threefold, fivefold; Oware is then counted out).
#: - ``rule``: a draw by a counting rule of the game: chess's fifty- and seventy-five-move
#:   rules and insufficient material, draughts' 25-, 16- and 5-move rules, Kono's 100 plies.
#: - ``move-limit``: the room's move limit was reached (a draw).
#:
#: By the players, the clock or the server:
#:
#: - ``resignation``: a player resigned.
#: - ``time``: a flag fell (a loss on time, or a draw when the other side cannot win).
#: - ``agreement``: a draw agreed.
#: - ``claim``: a player claimed the game (a win or a draw) against an opponent gone.
#: - ``abort``: no game: ``abort`` by a player, or a first move not made in time.
#: - ``abandon``: the server ended an untimed game nobody plays on any more.
Termination = Literal[
    "checkmate",
    "stalemate",
    "line",
    "board-full",
    "last-match",
    "score",
    "no-moves",
    "repetition",
    "rule",
    "move-limit",
    "resignation",
    "time",
    "agreement",
    "claim",
    "abort",
    "abandon",
]

#: Every :data:`Termination` code, in the order above.
TERMINATIONS: tuple[Termination, ...] = get_args(Termination)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a finished game ended: ``winner`` is a player number, or None for a draw;
    ``reason`` says why for people, ``termination`` (one of :data:`TERMINATIONS`) for
    programs. Every game sets ``termination``; it is None only in an Outcome built from a
    result stored before terminations existed. Equality compares ``winner`` and ``reason``
    only: each reason has one code, so an Outcome without its code is the same ending."""

    winner: Player | None
    reason: str
    termination: Termination | None = field(default=None, compare=False)

    def for_player(self, player: Player) -> str:
        """'win', 'loss' or 'draw' from ``player``'s point of view."""
        if self.winner is None:
            return "draw"
        return "win" if self.winner == player else "loss"


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One game option, as shown by ``kibitz games`` and the lobby."""

    name: str
    default: OptionValue
    help: str
    choices: tuple[OptionValue, ...] = ()
    minimum: int | None = None
    maximum: int | None = None

    def coerce(self, value: object) -> OptionValue:
        """Validate ``value`` against this spec, converting numeric strings."""
        shown = repr(value)[:40]
        if isinstance(self.default, bool):
            if isinstance(value, bool):
                return value
            if value in ("true", "false"):
                return value == "true"
            raise InvalidOptionError(f"option {self.name!r} takes true or false, not {shown}")
        if isinstance(self.default, int):
            if isinstance(value, str) and _is_small_integer(value):
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidOptionError(f"option {self.name!r} takes an integer, not {shown}")
            if self.minimum is not None and value < self.minimum:
                raise InvalidOptionError(f"option {self.name!r} must be >= {self.minimum}")
            if self.maximum is not None and value > self.maximum:
                raise InvalidOptionError(f"option {self.name!r} must be <= {self.maximum}")
            return value
        if not isinstance(value, str):
            raise InvalidOptionError(f"option {self.name!r} takes a string, not {shown}")
        if self.choices and value not in self.choices:
            raise InvalidOptionError(
                f"option {self.name!r} must be one of {', '.join(map(str, self.choices))}"
            )
        return value

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"default": self.default, "help": self.help}
        if self.choices:
            info["choices"] = list(self.choices)
        if self.minimum is not None:
            info["min"] = self.minimum
        if self.maximum is not None:
            info["max"] = self.maximum
        return info


def _is_small_integer(text: str) -> bool:
    """ASCII digits with an optional minus sign, short enough to be an option value."""
    digits = text[1:] if text.startswith("-") else text
    return 0 < len(digits) <= 9 and digits.isascii() and digits.isdigit()


@dataclass(frozen=True, slots=True)
class MoveFacts:
    """What move ordering needs to know about a move, without knowing the game.

    ``capture`` is the value of what the move takes (0 for none), ``attacker`` the value
    of the piece that moves (for MVV-LVA), ``promotion`` a rank where higher is better
    (0 for none; chess ranks queen 4 > rook 3 > knight 2 > bishop 1), ``check`` whether
    it gives check.
    """

    capture: int = 0
    attacker: int = 0
    promotion: int = 0
    check: bool = False


class Game(Generic[State, Move]):
    """Rules of one game. Subclasses are stateless singletons registered by name.

    Required: everything that raises NotImplementedError. Optional hooks for the
    searcher (``move_facts``, ``noisy_moves``, ``null_move``, ``in_check``) have safe
    defaults that switch the corresponding technique off.
    """

    name: str = ""
    title: str = ""
    players: tuple[str, str] = ("First", "Second")
    option_specs: tuple[OptionSpec, ...] = ()
    #: Whether the searcher may solve the whole game exactly (tiny game trees).
    small: bool = False
    #: How the rest of kibitz treats the game (draw margin, analysis, export, engines, bot
    #: levels): what differs from the defaults; see :mod:`kibitz.shared.games.policy`.
    policy: GamePolicy = DEFAULT_POLICY

    # -- options and positions -------------------------------------------------------
    def normalize_options(self, options: Options | None = None) -> dict[str, OptionValue]:
        """Defaults filled in, unknown names and bad values rejected."""
        given = dict(options or {})
        specs = {spec.name: spec for spec in self.option_specs}
        unknown = sorted(set(given) - set(specs))
        if unknown:
            raise InvalidOptionError(f"{self.name} has no option {repr(unknown[0])[:40]}")
        return {
            name: spec.coerce(given[name]) if name in given else spec.default
            for name, spec in specs.items()
        }

    def initial(self, options: Options | None = None) -> State:
        raise NotImplementedError

    def parse_position(self, text: str) -> State:
        """The state written by ``format_position``; raises InvalidPositionError."""
        raise NotImplementedError

    def format_position(self, state: State) -> str:
        raise NotImplementedError

    # -- moves -------------------------------------------------------------------------
    def to_move(self, state: State) -> Player:
        raise NotImplementedError

    def legal_moves(self, state: State) -> list[Move]:
        """Every legal move; empty exactly when the game is over."""
        raise NotImplementedError

    def apply(self, state: State, move: Move) -> State:
        """The state after ``move``, which must come from ``legal_moves(state)``."""
        raise NotImplementedError

    def outcome(self, state: State) -> Outcome | None:
        """None while the game goes on."""
        raise NotImplementedError

    def parse_move(self, state: State, text: str) -> Move:
        """A legal move from its text; raises InvalidMoveError or IllegalMoveError."""
        raise NotImplementedError

    def format_move(self, state: State, move: Move) -> str:
        """The move's notation in ``state`` (the state before the move)."""
        raise NotImplementedError

    def hash_key(self, state: State) -> int:
        """A 64-bit Zobrist-style key, maintained incrementally by ``apply``."""
        raise NotImplementedError

    def hash_from_scratch(self, state: State) -> int:
        """The same key recomputed from the whole state (for tests)."""
        return self.hash_key(state)

    def view(self, state: State) -> dict[str, Any]:
        """A JSON-ready picture of the board for clients; see docs/protocol.md."""
        raise NotImplementedError

    #: The standard text format of a whole game, if the game has one ("pgn" for chess).
    record_format: str | None = None

    def export_record(
        self, start: State, moves: list[str], result: Outcome | None, headers: dict[str, str]
    ) -> str:
        """The game from ``start`` through ``moves`` in ``record_format``."""
        raise NotImplementedError(f"{self.name} has no record format")

    def display_move(self, state: State, move: Move) -> str:
        """The move as people read it (SAN in chess); the wire notation by default."""
        return self.format_move(state, move)

    # -- helpers built on the above --------------------------------------------------
    def play(self, state: State, text: str) -> State:
        """Parse and apply one move text, with the typed errors of ``parse_move``."""
        if self.outcome(state) is not None:
            raise GameOverError(f"the game is over; {text!r} cannot be played")
        return self.apply(state, self.parse_move(state, text))

    def play_line(self, state: State, position_text: str, moves: str) -> State:
        """Apply the moves a position text lists after ``moves`` (its repetition history).

        Errors are InvalidPositionError naming the whole position text.
        """
        if not moves.strip():
            raise InvalidPositionError(
                f"bad {self.name} position {position_text!r}: no moves after 'moves'"
            )
        for text in moves.split():
            try:
                state = self.play(state, text)
            except GameError as exc:
                raise InvalidPositionError(
                    f"bad {self.name} position {position_text!r}: {exc}"
                ) from None
        return state

    def legal_move_texts(self, state: State) -> list[str]:
        return [self.format_move(state, m) for m in self.legal_moves(state)]

    def perft(self, state: State, depth: int) -> int:
        """Number of move sequences of length ``depth``; games may override for speed."""
        if depth == 0:
            return 1
        moves = self.legal_moves(state)
        if depth == 1:
            return len(moves)
        return sum(self.perft(self.apply(state, m), depth - 1) for m in moves)

    # -- optional hooks for the searcher ---------------------------------------------
    def move_facts(self, state: State, move: Move) -> MoveFacts:
        return _QUIET

    def noisy_moves(self, state: State) -> list[Move]:
        """Moves quiescence search should still try (captures); none by default."""
        return []

    def null_move(self, state: State) -> State | None:
        """The state with the turn passed, where that is meaningful; None otherwise."""
        return None

    def in_check(self, state: State) -> bool:
        return False

    def repetition_keys(self, state: State) -> tuple[int, ...]:
        """Keys (``hash_key``) of the earlier positions of the game that still count for
        repetition (since the last irreversible move); the searcher treats a return to
        any of them like a repetition on its own path. None by default."""
        return ()

    # -- optional hooks for the server ------------------------------------------------
    def can_win(self, state: State, player: Player) -> bool:
        """Whether ``player`` could still win from ``state`` by any series of legal moves
        (a flag against the other side is a draw when it cannot); True by default."""
        return True


_QUIET = MoveFacts()


@dataclass(frozen=True, slots=True)
class GameInfo:
    """What ``kibitz games`` and the lobby show about a game."""

    name: str
    title: str
    players: tuple[str, str]
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
