"""Oware (Awalé) under the Abapa rules.

Two rows of six pits, four seeds in each; South (player 0) moves first. Pits ``A``-``F``
are South's and ``a``-``f`` North's, each from its owner's left, so seeds travel
A..F then a..f (counter-clockwise). Internally pits are numbered 0-11 in that order.

Rules served: sowing skips the origin pit on laps; the last seed landing in an opponent
pit that now holds 2 or 3 captures it and the preceding opponent pits while they hold 2
or 3; a move that would capture all the opponent's seeds (grand slam) captures nothing;
a player whose opponent has no seeds must feed them, and if no move can, the game ends
and the mover takes the seeds on their side; 25 seeds win and 24-24 is a draw;
threefold repetition ends the game with each player taking the seeds on their side.
A position where the side to move has no seed at all (reachable only by typing it in)
ends the same way.

Position text: South's pits A-F, North's pits a-f, the stores (South, North), the side
to move, separated by slashes: ``4,4,4,4,4,4/4,4,4,4,4,4/0,0/S``; optionally followed by
``moves`` and the pit letters played since the last capture (for the repetition count):
``.../S moves C d``. Move text: the pit letter.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kibitz.shared.games.base import (
    Game,
    IllegalMoveError,
    InvalidMoveError,
    InvalidPositionError,
    MoveFacts,
    Options,
    Outcome,
    Player,
    Termination,
)
from kibitz.shared.games.policy import AnalysisScale, GamePolicy
from kibitz.shared.games.zobrist import zobrist_keys

PIT_NAMES = "ABCDEFabcdef"
SEEDS = 48
WIN = 25
_MAX = SEEDS + 1  # counts 0..48
_KEYS = zobrist_keys("oware", 12 * _MAX + 2 * _MAX + 1)
_STORE_KEYS = (_KEYS[12 * _MAX : 13 * _MAX], _KEYS[13 * _MAX : 14 * _MAX])
_SIDE_KEY = _KEYS[-1]
_ROWS = (range(0, 6), range(6, 12))

Move = int  # the pit sown, 0-11


class OwareState(NamedTuple):
    """A position plus the moves since the last capture (for repetition)."""

    pits: tuple[int, ...]  # 12 counts, A..F then a..f
    stores: tuple[int, int]  # seeds captured by South, North
    to_move: Player
    key: int
    root: OwareState | None
    line: tuple[Move, ...]
    history: tuple[int, ...]


def _key(pits: tuple[int, ...], stores: tuple[int, int], to_move: Player) -> int:
    key = _SIDE_KEY if to_move else 0
    for pit, count in enumerate(pits):
        key ^= _KEYS[pit * _MAX + count]
    return key ^ _STORE_KEYS[0][stores[0]] ^ _STORE_KEYS[1][stores[1]]


def sow(pits: tuple[int, ...], pit: int) -> tuple[list[int], int]:
    """The pits after sowing ``pit`` (origin skipped on laps) and where the last seed fell."""
    seeds = pits[pit]
    board = list(pits)
    board[pit] = 0
    laps, rest = divmod(seeds, 11)
    if laps:
        for i in range(12):
            if i != pit:
                board[i] += laps
    for offset in range(1, rest + 1):
        board[(pit + offset) % 12] += 1
    last = (pit + ((seeds - 1) % 11) + 1) % 12
    return board, last


def _capture(board: list[int], last: int, mover: Player) -> int:
    """Take the captured seeds out of ``board``; the number taken (0 on a grand slam)."""
    opponent = _ROWS[1 - mover]
    if last not in opponent:
        return 0
    taken: list[int] = []
    pit = last
    while pit in opponent and board[pit] in (2, 3):
        taken.append(pit)
        pit -= 1
    if not taken:
        return 0
    captured = sum(board[p] for p in taken)
    if captured == sum(board[p] for p in opponent):
        return 0  # grand slam: legal, captures nothing
    for p in taken:
        board[p] = 0
    return captured


def _feeds(pits: tuple[int, ...], pit: int, mover: Player) -> bool:
    """Whether sowing ``pit`` reaches the opponent's row."""
    return pits[pit] >= 6 - (pit - 6 * mover)


def _raw_moves(pits: tuple[int, ...], mover: Player) -> list[Move]:
    """Legal sowings, before any end-of-game rule."""
    own = _ROWS[mover]
    moves = [p for p in own if pits[p]]
    if any(pits[p] for p in _ROWS[1 - mover]):
        return moves
    return [p for p in moves if _feeds(pits, p, mover)]


class Oware(Game[OwareState, Move]):
    name = "oware"
    title = "Oware (Abapa)"
    players = ("South", "North")
    policy = GamePolicy(
        draw_margin=1.0,
        analysis_scale=AnalysisScale("seeds", 1.0, 1, 2, 4, 24, 0.35),
        analysis_time_ms=300,
        level_depths=(1, 2, 3, 4, 5, 6, 8, None),
        level8_time_ms=1500,
    )

    def initial(self, options: Options | None = None) -> OwareState:
        self.normalize_options(options)
        pits = (4,) * 12
        return OwareState(pits, (0, 0), 0, _key(pits, (0, 0), 0), None, (), ())

    def parse_position(self, text: str) -> OwareState:
        base, sep, moves = text.strip().partition(" moves")
        parts = base.strip().split("/")
        bad = InvalidPositionError(
            f"bad oware position {text!r}: expected South pits A-F / North pits a-f /"
            " stores South,North / S or N, e.g. '4,4,4,4,4,4/4,4,4,4,4,4/0,0/S'"
        )
        if len(parts) != 4 or parts[3] not in ("S", "N"):
            raise bad
        fields = [p.split(",") for p in parts[:3]]
        if [len(f) for f in fields] != [6, 6, 2] or not all(x.isdigit() for f in fields for x in f):
            raise bad
        pits = tuple(int(x) for x in fields[0] + fields[1])
        stores = (int(fields[2][0]), int(fields[2][1]))
        if sum(pits) + sum(stores) != SEEDS:
            raise InvalidPositionError(
                f"impossible oware position {text!r}: the seeds must add up to {SEEDS}"
            )
        to_move = 0 if parts[3] == "S" else 1
        state = OwareState(pits, stores, to_move, _key(pits, stores, to_move), None, (), ())
        if sep:
            state = self.play_line(state, text, moves)
        return state

    def format_position(self, state: OwareState) -> str:
        root = state.root or state
        p = root.pits
        text = (
            ",".join(map(str, p[:6]))
            + "/"
            + ",".join(map(str, p[6:]))
            + f"/{root.stores[0]},{root.stores[1]}/"
            + "SN"[root.to_move]
        )
        if state.line:
            text += " moves " + " ".join(PIT_NAMES[m] for m in state.line)
        return text

    def to_move(self, state: OwareState) -> Player:
        return state.to_move

    def _decided(self, state: OwareState) -> bool:
        s0, s1 = state.stores
        return s0 >= WIN or s1 >= WIN or (s0 == s1 == SEEDS // 2)

    def legal_moves(self, state: OwareState) -> list[Move]:
        if self._decided(state) or state.history.count(state.key) >= 2:
            return []
        return _raw_moves(state.pits, state.to_move)

    def apply(self, state: OwareState, move: Move) -> OwareState:
        mover = state.to_move
        board, last = sow(state.pits, move)
        captured = _capture(board, last, mover)
        key = state.key ^ _SIDE_KEY
        old = state.pits
        for pit in range(12):
            if board[pit] != old[pit]:
                key ^= _KEYS[pit * _MAX + old[pit]] ^ _KEYS[pit * _MAX + board[pit]]
        pits = tuple(board)
        if captured:
            before = state.stores[mover]
            key ^= _STORE_KEYS[mover][before] ^ _STORE_KEYS[mover][before + captured]
            stores = (
                (state.stores[0] + captured, state.stores[1])
                if mover == 0
                else (state.stores[0], state.stores[1] + captured)
            )
            return OwareState(pits, stores, 1 - mover, key, None, (), ())
        return OwareState(
            pits,
            state.stores,
            1 - mover,
            key,
            state.root or state,
            state.line + (move,),
            state.history + (state.key,),
        )

    def outcome(self, state: OwareState) -> Outcome | None:
        s0, s1 = state.stores
        if s0 >= WIN:
            return Outcome(0, "25 seeds", "score")
        if s1 >= WIN:
            return Outcome(1, "25 seeds", "score")
        if s0 == s1 == SEEDS // 2:
            return Outcome(None, "24-24", "score")
        if not _raw_moves(state.pits, state.to_move):
            own = sum(state.pits[p] for p in _ROWS[state.to_move])
            reason = "no move can feed" if own else "no seeds to sow"
            return self._count_out(state, reason, "no-moves")
        if state.history.count(state.key) >= 2:
            return self._count_out(state, "threefold repetition", "repetition")
        return None

    def final_scores(self, state: OwareState) -> tuple[int, int]:
        """Each player's store plus the seeds left on their side."""
        pits = state.pits
        return state.stores[0] + sum(pits[:6]), state.stores[1] + sum(pits[6:])

    def _count_out(self, state: OwareState, reason: str, termination: Termination) -> Outcome:
        south, north = self.final_scores(state)
        winner = None if south == north else (0 if south > north else 1)
        return Outcome(winner, f"{reason} ({south}-{north})", termination)

    def parse_move(self, state: OwareState, text: str) -> Move:
        t = text.strip()
        if len(t) != 1 or t not in PIT_NAMES:
            raise InvalidMoveError(
                f"bad oware move {text!r}: expected a pit letter, A-F for South, a-f for North"
            )
        move = PIT_NAMES.index(t)
        if move not in self.legal_moves(state):
            raise IllegalMoveError(
                f"illegal move {text!r} in {self.format_position(state)}: not your pit, empty,"
                " does not feed an empty opponent, or game over"
            )
        return move

    def format_move(self, state: OwareState, move: Move) -> str:
        return PIT_NAMES[move]

    def hash_key(self, state: OwareState) -> int:
        return state.key

    def hash_from_scratch(self, state: OwareState) -> int:
        return _key(state.pits, state.stores, state.to_move)

    def view(self, state: OwareState) -> dict[str, Any]:
        return {
            "kind": "oware",
            "south": list(state.pits[:6]),
            "north": list(state.pits[6:]),
            "stores": list(state.stores),
        }

    def perft(self, state: OwareState, depth: int) -> int:
        """Depth-first count on bare pit tuples, the last ply counted in bulk."""
        if depth <= 0:
            return 1
        if not self.legal_moves(state):
            return 0
        path = list(state.history)
        return _perft(state.pits, state.stores, state.to_move, state.key, path, depth)

    def move_facts(self, state: OwareState, move: Move) -> MoveFacts:
        board, last = sow(state.pits, move)
        return MoveFacts(capture=_capture(board, last, state.to_move))

    def noisy_moves(self, state: OwareState) -> list[Move]:
        return [m for m in self.legal_moves(state) if self.move_facts(state, m).capture]


def _perft(
    pits: tuple[int, ...],
    stores: tuple[int, int],
    mover: Player,
    key: int,
    path: list[int],
    depth: int,
) -> int:
    """Perft below a position that is not finished; ``path`` holds the earlier keys."""
    moves = _raw_moves(pits, mover)
    if depth == 1:
        return len(moves)
    total = 0
    path.append(key)
    for move in moves:
        board, last = sow(pits, move)
        captured = _capture(board, last, mover)
        child_key = key ^ _SIDE_KEY
        for pit in range(12):
            if board[pit] != pits[pit]:
                child_key ^= _KEYS[pit * _MAX + pits[pit]] ^ _KEYS[pit * _MAX + board[pit]]
        if captured:
            s = stores[mover] + captured
            if s >= WIN or (s == SEEDS // 2 and stores[1 - mover] == SEEDS // 2):
                continue
            child_key ^= _STORE_KEYS[mover][stores[mover]] ^ _STORE_KEYS[mover][s]
            child_stores = (s, stores[1]) if mover == 0 else (stores[0], s)
            # A capture starts a new repetition run.
            total += _perft(tuple(board), child_stores, 1 - mover, child_key, [], depth - 1)
        else:
            if path.count(child_key) >= 2:
                continue
            total += _perft(tuple(board), stores, 1 - mover, child_key, path, depth - 1)
    path.pop()
    return total


GAME = Oware()
