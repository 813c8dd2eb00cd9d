"""A small chess bot of our own for kibitz's lichess-compatible Bot API (docs/bot-api.md):
Stockfish, driven through python-chess, talking to the server with the ``berserk`` client.

    python -m kibitz.client.lichess_bot --url http://127.0.0.1:8080 --token kbz_...

It upgrades nothing: the token's account must already be a bot account (``POST
/api/bot/account/upgrade``), and the token needs the ``play`` scope. The bot follows
``/api/stream/event``; it accepts the challenges it can play (chess, any clock, at most
``--max-games`` games at once) and declines the others with lichess's reason key
(``variant``, ``later``). Each game runs in a thread of its own, with an engine process of
its own, reading the game's stream: it moves when the position says it is its turn,
thinking for ``think_time`` (a budget that never flags), declines draw and takeback offers,
and greets its opponent once per game in the player chat. A game stream that ends before
the game does (its node drained) is opened again: ``gameFull`` tells the whole game.

SIGINT or SIGTERM stops it: it stops reading events, waits a moment for the games that
are thinking, closes every engine and exits 0. The games it leaves unfinished stay on the
server, with their clocks running; a bot started again picks them up (the event stream
opens with a ``gameStart`` for each).

Needs the ``bot`` extra (``pip install 'kibitz[bot]'``: berserk) and a UCI engine.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from types import FrameType
from typing import Any, NoReturn, cast

import berserk
import chess
import chess.engine
import requests
from berserk.clients.base import BaseClient
from berserk.exceptions import ApiError, ResponseError
from berserk.types.challenges import ChallengeDeclineReason

from kibitz.shared.games import available_games

LOG = logging.getLogger("kibitz.lichess_bot")

# -- the time budget -----------------------------------------------------------------------

MAX_THINK_S = 2.0  # the longest the bot thinks over one move (--max-think)
MIN_THINK_MS = 50  # the shortest: below this an engine plays nothing sensible
SAFETY_MS = 100  # kept back for the move's round trip to the server and back
MOVES_TO_GO = 30  # the remaining time is spread as if this many moves were left
INCREMENT_SHARE = 0.8  # the part of the increment spent on each move
UNTIMED_MS = 2_147_483_647  # lichess's clock value for a game with no clock

# -- bounds --------------------------------------------------------------------------------

MAX_GAMES = 4  # games played at once by default (--max-games); past it, "later"
CONNECT_TIMEOUT_S = 5.0
# Streams send a keep-alive line every 6 s: a read that waits longer means a dead server.
READ_TIMEOUT_S = 20.0
RECONNECT_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # then 30 s between tries
GAME_STREAM_TRIES = 6  # a game stream that keeps failing this many times in a row: give up
MOVE_TRIES = 3  # a move lost on the way (no answer) is sent again this many times in all
SHUTDOWN_WAIT_S = 2.0  # on SIGINT, how long the games that are thinking get to finish

# The only game Stockfish plays: lichess's variant key for chess ("standard"), and kibitz's
# name for the game that is that variant (its policy says so; also taken as input).
STANDARD = "standard"
CHESS_KEYS = frozenset(
    {STANDARD}
    | {game.name for game in available_games() if game.policy.lichess_variant == STANDARD}
)
GREETING = "Hello! I am a Stockfish bot on kibitz. Have a good game."


def think_time(
    remaining_ms: int,
    increment_ms: int,
    *,
    max_s: float = MAX_THINK_S,
    safety_ms: int = SAFETY_MS,
) -> float:
    """The seconds to think over a move, with `remaining_ms` on our clock.

    `safety_ms` of the clock are set aside for the move's round trip; of the rest the bot
    spends a 30th plus most of the increment, at most `max_s` and at most half of it, and
    never under 50 ms. Spending a 30th at a time, the clock shrinks without running out: a
    game with no increment has about (29/30)^n of its time left after n moves (3% after
    100). An untimed game (no clock: lichess's 2147483647) gets `max_s`.
    """
    if remaining_ms >= UNTIMED_MS:
        return max_s
    usable_ms = remaining_ms - safety_ms
    budget_ms = min(
        usable_ms / MOVES_TO_GO + INCREMENT_SHARE * increment_ms, max_s * 1000, usable_ms / 2
    )
    return max(budget_ms, MIN_THINK_MS) / 1000


def clock_ms(state: Mapping[str, Any], key: str, absent: int) -> int:
    """A clock field of a game state in ms (`absent` when it has none): berserk turns
    gameState's ms into timedelta, while gameFull's nested state keeps them as ints."""
    value = state.get(key)
    if value is None:
        return absent
    if isinstance(value, timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


# -- the HTTP side ---------------------------------------------------------------------------


class TimedSession(berserk.TokenSession):
    """berserk's token session with timeouts on every request: a server that stops
    answering (no keep-alive within READ_TIMEOUT_S) fails the read instead of hanging it."""

    def request(self, method: str, url: Any, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
        return super().request(method, url, *args, **kwargs)


class Offers(BaseClient):
    """The answers to offers that berserk's Bots client lacks (kibitz serves them on the
    bot door as on the board door)."""

    def decline_draw(self, game_id: str) -> None:
        self._r.post(f"/api/bot/game/{game_id}/draw/no")

    def decline_takeback(self, game_id: str) -> None:
        self._r.post(f"/api/bot/game/{game_id}/takeback/no")


class Api:
    """One authenticated connection to the server: berserk's client and our extra calls.
    Each thread makes its own (a requests session is not shared between threads)."""

    def __init__(self, url: str, token: str) -> None:
        session = TimedSession(token)
        self.client = berserk.Client(session, base_url=url)
        self.offers = Offers(session, base_url=url)


def error_text(error: Exception) -> str:
    """What went wrong in a few words: the server's ``{"error": ...}`` when it sent one."""
    if isinstance(error, ResponseError):
        cause = error.cause
        said = cause.get("error") if isinstance(cause, dict) else None
        return f"HTTP {error.status_code}: {said or error.reason}"
    return f"{type(error).__name__}: {error}"


def is_refusal(error: Exception) -> bool:
    """The server answered and refused (4xx): trying the same request again is no use."""
    return isinstance(error, ResponseError) and 400 <= error.status_code < 500


# -- one game ----------------------------------------------------------------------------------


class Game:
    """One game the bot plays: reads its stream and answers every new state.

    ``play`` returns when the game is over, when the stream fails GAME_STREAM_TRIES times in
    a row, or (at its next event) when ``stop`` is set.
    """

    def __init__(self, bot: Bot, game_id: str) -> None:
        self.bot = bot
        self.id = game_id
        self.api = Api(bot.url, bot.token)
        self.colour: chess.Color | None = None  # ours, known from gameFull
        self.start = chess.Board()
        self.moved_at: int | None = None  # the ply we last sent a move for, successfully
        self.answered_offer: tuple[str, int] | None = None  # (draw|takeback, ply) declined
        self.greeted = False
        self.over = False

    def play(self) -> None:
        engine = chess.engine.SimpleEngine.popen_uci(self.bot.engine_path)
        self.bot.engine_opened(self.id, engine)
        try:
            failures = 0
            while not (self.over or self.bot.stop.is_set()) and failures < GAME_STREAM_TRIES:
                try:
                    for event in self.api.client.bots.stream_game_state(self.id):
                        failures = 0
                        self.on_event(event, engine)
                        if self.over or self.bot.stop.is_set():
                            return
                except (ApiError, requests.RequestException) as error:
                    if is_refusal(error):
                        LOG.warning("game %s: stream refused (%s)", self.id, error_text(error))
                        return
                    LOG.info("game %s: stream lost (%s)", self.id, error_text(error))
                failures += 1
                self.bot.stop.wait(RECONNECT_DELAYS_S[min(failures, len(RECONNECT_DELAYS_S)) - 1])
            if not self.over and failures >= GAME_STREAM_TRIES:
                LOG.warning("game %s: giving up after %d failed streams", self.id, failures)
        except chess.engine.EngineError as error:
            if not self.bot.stop.is_set():  # closed on shutdown: nothing to say
                LOG.error("game %s: the engine failed (%s)", self.id, error)
        finally:
            self.bot.engine_closed(self.id)
            engine.close()

    def on_event(self, event: Mapping[str, Any], engine: chess.engine.SimpleEngine) -> None:
        kind = event.get("type")
        if kind == "gameFull":
            self.on_full(event, engine)
        elif kind == "gameState":
            self.on_state(event, engine)
        elif kind == "chatLine":
            LOG.info("game %s: %s says %r", self.id, event.get("username"), event.get("text"))
        elif kind == "opponentGone":
            LOG.info("game %s: opponent gone: %s", self.id, event.get("gone"))

    def on_full(self, full: Mapping[str, Any], engine: chess.engine.SimpleEngine) -> None:
        """The whole game (first line of every stream): our colour, the start, the state."""
        me = self.bot.account_id
        white, black = full.get("white") or {}, full.get("black") or {}
        if white.get("id") == me:
            self.colour = chess.WHITE
        elif black.get("id") == me:
            self.colour = chess.BLACK
        else:
            LOG.warning("game %s: we hold no seat in it", self.id)
            self.over = True
            return
        variant = (full.get("variant") or {}).get("key")
        if variant not in CHESS_KEYS:
            LOG.warning("game %s: %s is not chess; leaving it alone", self.id, variant)
            self.over = True
            return
        fen = full.get("initialFen", "startpos")
        self.start = chess.Board() if fen == "startpos" else chess.Board(fen)
        self.on_state(full.get("state") or {}, engine)  # a move first: the clock may run
        if not (self.greeted or self.over) and self.bot.greeting:
            self.greeted = True
            try:
                self.api.client.bots.post_message(self.id, self.bot.greeting)
            except (ApiError, requests.RequestException) as error:
                LOG.info("game %s: could not greet (%s)", self.id, error_text(error))

    def on_state(self, state: Mapping[str, Any], engine: chess.engine.SimpleEngine) -> None:
        """A new version of the game: note its end, decline offers, move if it is our turn."""
        if self.colour is None:
            return  # a state before gameFull: cannot be, but nothing to do without a colour
        status = state.get("status", "started")
        if status not in ("created", "started"):
            self.over = True
            LOG.info("game %s over: %s, winner %s", self.id, status, state.get("winner", "none"))
            return
        board = self.start.copy()
        for uci in str(state.get("moves") or "").split():
            board.push_uci(uci)
        ply = board.ply()
        them = "b" if self.colour == chess.WHITE else "w"
        for offer in ("draw", "takeback"):
            if state.get(f"{them}{offer}") and self.answered_offer != (offer, ply):
                self.answered_offer = (offer, ply)
                self.decline(offer)
        if board.turn != self.colour or board.is_game_over() or self.moved_at == ply:
            return
        ours, theirs = ("w", "b") if self.colour == chess.WHITE else ("b", "w")
        remaining = clock_ms(state, f"{ours}time", UNTIMED_MS)
        increment = clock_ms(state, f"{ours}inc", 0)
        budget = think_time(remaining, increment, max_s=self.bot.max_think_s)
        result = engine.play(board, chess.engine.Limit(time=budget))
        if result.move is None:
            return  # the engine found nothing (a finished position): the server will say
        if self.send_move(result.move.uci()):
            self.moved_at = ply
            LOG.info(
                "game %s: played %s (thought %.2f s, clock %.1f s, opponent %.1f s)",
                self.id,
                result.move.uci(),
                budget,
                remaining / 1000,
                clock_ms(state, f"{theirs}time", UNTIMED_MS) / 1000,
            )

    def send_move(self, uci: str) -> bool:
        """Send the move; True once the server took it. A refusal (say the opponent resigned
        in between) is not sent again; a move lost on the way is, MOVE_TRIES times in all."""
        for attempt in range(1, MOVE_TRIES + 1):
            try:
                self.api.client.bots.make_move(self.id, uci)
                return True
            except (ApiError, requests.RequestException) as error:
                LOG.warning("game %s: move %s failed (%s)", self.id, uci, error_text(error))
                if is_refusal(error) or attempt == MOVE_TRIES:
                    return False
        return False

    def decline(self, offer: str) -> None:
        try:
            if offer == "draw":
                self.api.offers.decline_draw(self.id)
            else:
                self.api.offers.decline_takeback(self.id)
            LOG.info("game %s: declined the %s offer", self.id, offer)
        except (ApiError, requests.RequestException) as error:
            LOG.info("game %s: could not decline the %s (%s)", self.id, offer, error_text(error))


# -- the bot -------------------------------------------------------------------------------------


class Bot:
    """The event loop: challenges in, games out to their threads."""

    def __init__(
        self,
        url: str,
        token: str,
        engine_path: str,
        *,
        max_games: int = MAX_GAMES,
        max_think_s: float = MAX_THINK_S,
        greeting: str = GREETING,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.engine_path = engine_path
        self.max_games = max_games
        self.max_think_s = max_think_s
        self.greeting = greeting
        self.api = Api(self.url, token)
        self.account_id = ""
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}  # game id -> its thread, while it runs
        self._engines: dict[str, chess.engine.SimpleEngine] = {}

    def sign_in(self) -> None:
        """Who the token acts for; refuses an account that is not a bot (we upgrade none)."""
        account = cast(Mapping[str, Any], self.api.client.account.get())
        if account.get("title") != "BOT":
            raise SystemExit(
                f"{account.get('username')} is not a bot account: upgrade it first with"
                " POST /api/bot/account/upgrade (this program upgrades nothing)"
            )
        self.account_id = str(account["id"])
        LOG.info("signed in as %s", account.get("username"))

    def run(self) -> None:
        """Follow the event stream until ``stop`` is set, opening it again when it drops."""
        failures = 0
        while not self.stop.is_set():
            try:
                for event in self.events():
                    failures = 0
                    self.on_event(event)
                LOG.info("the event stream ended; opening it again")
            except (ApiError, requests.RequestException) as error:
                if isinstance(error, ResponseError) and error.status_code in (401, 403):
                    raise SystemExit(f"the server refused the token: {error_text(error)}") from None
                LOG.warning("the event stream failed (%s)", error_text(error))
            failures += 1
            self.stop.wait(RECONNECT_DELAYS_S[min(failures, len(RECONNECT_DELAYS_S)) - 1])

    def events(self) -> Iterator[Mapping[str, Any]]:
        for event in self.api.client.bots.stream_incoming_events():
            yield cast(Mapping[str, Any], event)

    def on_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "challenge":
            self.on_challenge(event.get("challenge") or {})
        elif kind == "gameStart":
            game = event.get("game") or {}
            game_id = game.get("gameId") or game.get("id")
            if game_id:
                self.start_game(str(game_id))
        elif kind == "gameFinish":
            game = event.get("game") or {}
            LOG.info("game %s finished", game.get("gameId") or game.get("id"))
        elif kind in ("challengeCanceled", "challengeDeclined"):
            challenge = event.get("challenge") or {}
            LOG.info("challenge %s: %s", challenge.get("id"), kind)

    def on_challenge(self, challenge: Mapping[str, Any]) -> None:
        """Accept the challenge, or decline it with lichess's reason key."""
        challenger = (challenge.get("challenger") or {}).get("id")
        if challenge.get("direction") == "out" or challenger == self.account_id:
            return  # one of ours
        challenge_id = str(challenge.get("id"))
        reason = self.decline_reason(challenge)
        try:
            if reason:
                self.api.client.bots.decline_challenge(challenge_id, reason=reason)
                LOG.info("declined challenge %s from %s: %s", challenge_id, challenger, reason)
            else:
                self.api.client.bots.accept_challenge(challenge_id)
                LOG.info("accepted challenge %s from %s", challenge_id, challenger)
        except (ApiError, requests.RequestException) as error:
            LOG.info("challenge %s: %s", challenge_id, error_text(error))

    def decline_reason(self, challenge: Mapping[str, Any]) -> ChallengeDeclineReason | None:
        """None to accept: a chess challenge, any clock, while we play under max_games."""
        if (challenge.get("variant") or {}).get("key") not in CHESS_KEYS:
            return "variant"
        if self.playing() >= self.max_games:
            return "later"
        return None

    def playing(self) -> int:
        with self._lock:
            return sum(thread.is_alive() for thread in self._threads.values())

    def start_game(self, game_id: str) -> None:
        """A thread for the game, unless one plays it already."""
        with self._lock:
            running = self._threads.get(game_id)
            if running is not None and running.is_alive():
                return
            thread = threading.Thread(
                target=self._play, args=(game_id,), name=f"game-{game_id}", daemon=True
            )
            self._threads[game_id] = thread
        thread.start()

    def _play(self, game_id: str) -> None:
        LOG.info("game %s: playing", game_id)
        try:
            Game(self, game_id).play()
        except Exception:  # a thread's last word: log it, the other games carry on
            LOG.exception("game %s: stopped by an error", game_id)
        finally:
            with self._lock:
                self._threads.pop(game_id, None)

    def engine_opened(self, game_id: str, engine: chess.engine.SimpleEngine) -> None:
        with self._lock:
            self._engines[game_id] = engine

    def engine_closed(self, game_id: str) -> None:
        with self._lock:
            self._engines.pop(game_id, None)

    def shut_down(self) -> None:
        """Stop: the games get SHUTDOWN_WAIT_S to finish a move, then every engine closes.
        Game threads still waiting on their streams are daemons: they end with the process."""
        self.stop.set()
        deadline = time.monotonic() + SHUTDOWN_WAIT_S
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            engines = list(self._engines.values())
        for engine in engines:
            engine.close()
        LOG.info("stopped (%d games left unfinished)", sum(t.is_alive() for t in threads))


# -- the command line ----------------------------------------------------------------------------


def find_engine(name: str) -> str:
    """The engine's executable: a path, or a name on PATH (or in /usr/games, Debian's)."""
    for path in (name, shutil.which(name), os.path.join("/usr/games", name)):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise SystemExit(f"no engine {name!r}: give --engine the path of a UCI engine")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m kibitz.client.lichess_bot",
        description="A Stockfish bot for kibitz's lichess-compatible Bot API.",
    )
    parser.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--token",
        default=os.environ.get("KIBITZ_BOT_TOKEN"),
        help="a play token of a bot account (default: $KIBITZ_BOT_TOKEN)",
    )
    parser.add_argument("--engine", default="stockfish", help="a UCI engine (default stockfish)")
    parser.add_argument(
        "--games",
        default=STANDARD,
        help="the games to accept, comma-separated: Stockfish plays chess only ('standard',"
        " lichess's name, or 'chess'; the default)",
    )
    parser.add_argument("--max-games", type=int, default=MAX_GAMES, help="games at once")
    parser.add_argument(
        "--max-think", type=float, default=MAX_THINK_S, help="most seconds spent on one move"
    )
    parser.add_argument("--greeting", default=GREETING, help="said once per game ('' for none)")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("--token (or $KIBITZ_BOT_TOKEN) is required")
    games = {name.strip().lower() for name in args.games.split(",") if name.strip()}
    if not games or not games <= CHESS_KEYS:
        parser.error(f"--games {args.games!r}: Stockfish plays chess only ('standard' or 'chess')")
    if not 1 <= args.max_games <= 16:
        parser.error("--max-games must be 1 to 16")
    if not MIN_THINK_MS / 1000 <= args.max_think <= 60:
        parser.error("--max-think must be 0.05 to 60 seconds")
    return args


def raise_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    bot = Bot(
        args.url,
        args.token,
        find_engine(args.engine),
        max_games=args.max_games,
        max_think_s=args.max_think,
        greeting=args.greeting,
    )
    # SIGTERM stops it as SIGINT does; SIGINT set too, as a shell may start us ignoring it.
    signal.signal(signal.SIGINT, raise_interrupt)
    signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        try:
            bot.sign_in()
        except (ApiError, requests.RequestException) as error:
            raise SystemExit(f"cannot sign in at {args.url}: {error_text(error)}") from None
        bot.run()
    except KeyboardInterrupt:
        LOG.info("interrupted: stopping")
    finally:
        bot.shut_down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
