"""A Python client for the kibitz WebSocket protocol, used by bots, tests and the bench.

It speaks the messages of :mod:`kibitz.shared.protocol` over the ``websockets`` library,
JSON or msgpack, and keeps the latest ``state`` of each room it follows.

A client opened with ``heal=True`` also survives the loss of its server: WebSocket pings
find a dead or frozen socket within ``ping_interval + ping_timeout`` seconds; it then
reconnects (trying each of its URLs in turn, with backoff) and resumes every room it
follows, with its token and the last version it saw. Requests that get a transient error
(``server/unavailable``, ``room/busy``, ``server/busy``) are retried with backoff.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import websockets

from kibitz.shared.protocol.codec import Codec

# Errors after which the same request may simply be sent again: nothing was changed.
TRANSIENT_ERRORS = frozenset({"server/unavailable", "room/busy", "server/busy"})

# Requests that do no harm when they arrive twice, so they are resent when the connection
# is replaced before their reply came. A move or resign with a ``version`` is refused
# (room/stale) if the first copy landed; ``create`` and ``join`` are not resent.
IDEMPOTENT_TYPES = frozenset({"ping", "watch", "resume", "leave"})

# Player actions: they succeed with the room's broadcast ``state``, so ``request`` follows
# each with a ping and returns ``{"type": "ack"}`` once the server has handled it (an
# ``error`` with its ``rid`` raises instead). ``chat`` likewise: its line is broadcast.
ACTION_TYPES = ("draw", "takeback", "rematch", "abort", "claim", "chat")

# Keepalive of a healing client: a frozen server or a dead network path is found within
# PING_INTERVAL_S + PING_TIMEOUT_S. Clients that do not heal keep websockets' own default
# (PLAIN_PING_S for both), so a slow server does not cost them their socket.
PING_INTERVAL_S = 5.0
PING_TIMEOUT_S = 5.0
PLAIN_PING_S = 20.0
CONNECT_TIMEOUT_S = 5.0


class ServerError(Exception):
    """An ``error`` message from the server."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @property
    def transient(self) -> bool:
        return self.code in TRANSIENT_ERRORS


@dataclass(frozen=True)
class Backoff:
    """Bounded exponential backoff with jitter: ``attempts`` delays from ``first_s``,
    doubling up to ``max_s``, each drawn from the upper half of its step."""

    attempts: int = 8
    first_s: float = 0.25
    max_s: float = 5.0

    def delays(self) -> Iterator[float]:
        for n in range(self.attempts):
            step = min(self.max_s, self.first_s * 2**n)
            yield step / 2 + random.random() * step / 2


DEFAULT_BACKOFF = Backoff()


def ws_url(base: str, codec: Codec = "json") -> str:
    """``http://host:port`` (or a ws:// URL) -> the WebSocket endpoint."""
    url = base.rstrip("/")
    if url.startswith("http"):
        url = "ws" + url[4:]
    if not url.endswith("/ws"):
        url += "/ws"
    return url + ("?codec=msgpack" if codec == "msgpack" else "")


def new_player_key() -> str:
    """A fresh secret player key (32 random bytes, base64url); keep it to stay the same
    player. The public id it gives is ``kibitz.shared.protocol.player_id(key)``."""
    return secrets.token_urlsafe(32)


def newer_than(version: int) -> Callable[[dict[str, Any]], bool]:
    """A ``wait_state`` predicate: a state past ``version``."""
    return lambda state: int(state["version"]) > version


def is_idempotent(message: dict[str, Any]) -> bool:
    """Whether ``message`` may be sent again when its first copy's fate is unknown."""
    if message["type"] in ("move", "resign"):
        return message["type"] == "resign" or "version" in message
    return message["type"] in IDEMPOTENT_TYPES


class KibitzClient:
    """One logical connection. Use ``async with await KibitzClient.open(url) as c``.

    With ``heal=True`` the socket under it may be replaced (see :meth:`reconnect`); the
    inbox, the states and the tokens carry over. The inbox then also gets a
    ``{"type": "reconnected", "node": ...}`` message after each reconnection.
    """

    def __init__(
        self,
        urls: Sequence[str],
        codec: Codec = "json",
        *,
        heal: bool = False,
        backoff: Backoff = DEFAULT_BACKOFF,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        socket_options: dict[str, Any] | None = None,
    ) -> None:
        if not urls:
            raise ValueError("at least one server URL is needed")
        self.urls = list(urls)
        self.codec = codec
        self.heal = heal
        self.backoff = backoff
        self.connect_timeout = connect_timeout
        self.socket_options = socket_options or {}
        self.ws: Any = None
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.states: dict[str, dict[str, Any]] = {}  # room -> the newest state received
        self.tokens: dict[str, tuple[int, str]] = {}  # room -> (seat, token)
        #: (room, "players" or "spectators") -> the chat lines received, oldest first
        self.chats: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.following: set[str] = set()  # rooms to resume after a reconnection
        self.welcome: dict[str, Any] | None = None
        self.reconnects = 0
        self.retries = 0  # requests sent again after a transient error
        self._url_index = 0
        self._generation = 0  # one per socket; stale "closed" marks are ignored
        self._rids = itertools.count(1)
        self._reader: asyncio.Task[None] | None = None
        self._reconnecting = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        url: str | Sequence[str],
        codec: Codec = "json",
        *,
        heal: bool = False,
        ping_interval: float | None = None,
        ping_timeout: float | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        **kwargs: Any,
    ) -> KibitzClient:
        """Connect to ``url`` (or the first of several that answers, when healing)."""
        default_ping, default_timeout = (
            (PING_INTERVAL_S, PING_TIMEOUT_S) if heal else (PLAIN_PING_S, PLAIN_PING_S)
        )
        options = {
            "max_size": 2**22,
            "ping_interval": default_ping if ping_interval is None else ping_interval,
            "ping_timeout": default_timeout if ping_timeout is None else ping_timeout,
            "close_timeout": 2.0,
            **kwargs,
        }
        urls = [url] if isinstance(url, str) else list(url)
        client = cls(
            urls,
            codec,
            heal=heal,
            backoff=backoff,
            connect_timeout=connect_timeout,
            socket_options=options,
        )
        await client._connect()
        return client

    async def close(self) -> None:
        self.heal = False  # a socket closed on purpose is not reopened
        if self.ws is not None:
            await self.ws.close()
        if self._reader:
            self._reader.cancel()

    async def __aenter__(self) -> KibitzClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # -- sockets ------------------------------------------------------------------------------
    async def _connect(self) -> None:
        """Open a socket and read its ``welcome``. A healing client tries its URLs in turn,
        waiting between tries, until one answers or its backoff runs out."""
        delays = self.backoff.delays() if self.heal else iter(())
        while True:
            url = self.urls[self._url_index % len(self.urls)]
            try:
                address = ws_url(url, self.codec)
                options = {"open_timeout": self.connect_timeout, **self.socket_options}
                ws = await websockets.connect(address, **options)
                try:
                    async with asyncio.timeout(self.connect_timeout):
                        welcome = self._decode(await ws.recv())
                except (TimeoutError, websockets.ConnectionClosed):
                    await ws.close()
                    # An OSError, so it is handled like a refused connection just below.
                    raise ConnectionError(f"no welcome from {url}") from None
            except (OSError, TimeoutError, websockets.InvalidHandshake):
                # Refused, timed out (a frozen node), or 503 (a node without its Redis).
                self._url_index += 1
                delay = next(delays, None)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                continue
            self.ws = ws
            self.welcome = welcome
            self._generation += 1
            self._reader = asyncio.create_task(self._read())
            return

    async def reconnect(self) -> None:
        """Replace the socket: open a new one (any of the URLs, with backoff) and resume
        every followed room, as its player when we hold its token, from the last version
        seen (the server's reply, a ``resync`` state, lists the missed events)."""
        generation = self._generation
        async with self._reconnecting:
            if self._generation != generation:
                return  # another waiter reconnected while we waited for the lock
            old = self.ws
            if self._reader:
                self._reader.cancel()
            if old is not None:
                old.transport.abort()  # no goodbye: the other end may be frozen
            await self._connect()
            self.reconnects += 1
            try:
                for room in sorted(self.following):
                    await self._send_frame(self._resume_message(room))
            except websockets.ConnectionClosed:
                pass  # the new socket died already: its "closed" mark brings another round
            self._deliver({"type": "reconnected", "node": (self.welcome or {}).get("node")})

    async def resync(self, room: str) -> None:
        """Ask again for ``room``'s state from the last version seen (repairs missed
        updates; harmless when nothing was missed)."""
        self.following.add(room)
        await self.send(self._resume_message(room))

    def _resume_message(self, room: str) -> dict[str, Any]:
        """``resume`` with our token for the room (if we hold one) and the last version seen."""
        message: dict[str, Any] = {"type": "resume", "room": room}
        if room in self.tokens:
            message["token"] = self.tokens[room][1]
        if room in self.states:
            message["since"] = int(self.states[room]["version"])
        return message

    def _decode(self, frame: str | bytes) -> dict[str, Any]:
        if isinstance(frame, bytes):
            message: dict[str, Any] = msgpack.unpackb(frame, raw=False)
        else:
            message = json.loads(frame)
        return message

    # -- raw I/O ----------------------------------------------------------------------------
    async def send(self, message: dict[str, Any]) -> None:
        """Send one message. A healing client whose socket is gone reconnects first (a
        frame refused by a closed socket never left, so sending it again is safe)."""
        try:
            await self._send_frame(message)
        except websockets.ConnectionClosed:
            if not self.heal:
                raise
            await self.reconnect()
            await self._send_frame(message)

    async def _send_frame(self, message: dict[str, Any]) -> None:
        if self.codec == "msgpack":
            await self.ws.send(msgpack.packb(message, use_bin_type=True))
        else:
            await self.ws.send(json.dumps(message))

    async def send_raw(self, frame: str | bytes) -> None:
        await self.ws.send(frame)

    async def _read(self) -> None:
        """Read the current socket into the inbox until it closes (one task per socket)."""
        generation = self._generation
        try:
            async for frame in self.ws:
                message = self._decode(frame)
                if message.get("type") == "state":
                    self._remember(message)
                elif message.get("type") == "chat":
                    self._remember_chat(message)
                elif message.get("type") == "seat" and "seek" in message:
                    # Our seek was accepted (perhaps on another node): we play there now.
                    self.tokens[message["room"]] = (message["seat"], message["token"])
                    self.following.add(message["room"])
                self._deliver(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            self._deliver({"type": "closed", "generation": generation})

    def _deliver(self, message: dict[str, Any]) -> None:
        self.inbox.put_nowait(message)

    def _remember_chat(self, message: dict[str, Any]) -> None:
        """Keep a room channel's lines: a replay replaces them, a live line is added
        (unless a replay already brought it)."""
        key = (message["room"], message["channel"])
        if message.get("replay"):
            self.chats[key] = list(message["messages"])
            return
        lines = self.chats.setdefault(key, [])
        last = lines[-1]["id"] if lines else 0
        lines += [line for line in message["messages"] if line["id"] > last]

    def _remember(self, state: dict[str, Any]) -> None:
        """Keep the newest state of its room; a late older version is not kept."""
        current = self.states.get(state["room"])
        if current is None or int(state["version"]) >= int(current["version"]):
            self.states[state["room"]] = state

    async def next_message(
        self, match: Callable[[dict[str, Any]], bool] | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        """The next incoming message that ``match`` accepts (others are dropped).

        When the socket closes, a healing client reconnects and keeps waiting; any other
        raises ``ConnectionError``.
        """
        async with asyncio.timeout(timeout):
            while True:
                message = await self.inbox.get()
                if message["type"] == "closed":
                    if message.get("generation", self._generation) != self._generation:
                        continue  # the end of a socket already replaced
                    if self.heal:
                        try:
                            await self.reconnect()
                        except BaseException:
                            self.inbox.put_nowait(message)  # so the next wait tries again
                            raise
                        continue
                    self.inbox.put_nowait(message)
                    raise ConnectionError("connection closed by the server")
                if match is None or match(message):
                    return message

    async def request(self, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        """Send with a fresh ``rid`` and return the reply carrying it (errors raise).

        ``watch`` and ``resume`` are answered by a ``state`` without ``rid``: for them the
        reply is the room's newest state once the server has handled the request.

        A healing client retries transient errors with backoff, and sends an idempotent
        request again when the socket was replaced before its reply came.
        """
        delays = self.backoff.delays() if self.heal else iter(())
        while True:
            reply = await self._exchange(message, timeout)
            if reply["type"] == "reconnected":
                # The reply, if any, went down with the old socket.
                if not is_idempotent(message):
                    raise ConnectionError(
                        f"connection lost before the reply to {message['type']!r}"
                    )
                continue
            if reply["type"] != "error":
                return reply
            error = ServerError(reply["code"], reply["message"])
            delay = next(delays, None) if error.transient else None
            if delay is None:
                raise error
            self.retries += 1
            await asyncio.sleep(delay)

    async def _exchange(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``message`` once; its reply, or a ``reconnected`` note if the socket was
        replaced first."""
        rid = done = next(self._rids)
        await self.send({**message, "rid": rid})
        if message["type"] in ("watch", "resume", *ACTION_TYPES):
            # The server handles one connection's messages in order: the pong to this ping
            # comes after the state (or the error) that answers the request.
            done = next(self._rids)
            await self.send({"type": "ping", "rid": done})
        generation = self._generation  # the socket that carried it (send may reconnect)

        def answers(m: dict[str, Any]) -> bool:
            replaced = m["type"] == "reconnected" and self._generation != generation
            return m.get("rid") in (rid, done) or replaced

        reply = await self.next_message(answers, timeout)
        if reply.get("rid") == done != rid:
            if message["type"] in ACTION_TYPES:
                return {"type": "ack", "room": message["room"]}
            return self.states[message["room"]]
        return reply

    # -- protocol -----------------------------------------------------------------------------
    async def create(
        self,
        game: str,
        opponent: str = "human",
        seat: int | str | None = None,
        options: dict[str, Any] | None = None,
        name: str | None = None,
        player_key: str | None = None,
        clock: dict[str, int] | None = None,
        position: str | None = None,
        rated: bool = False,
    ) -> dict[str, Any]:
        """Create a room and take a seat; ``player_key`` (see :func:`new_player_key`)
        makes the seat's public ``player`` id that key's; ``clock``: the time control,
        ``{"initial_ms": N, "increment_ms": M}`` or ``{"days_per_move": D}`` (None:
        untimed); ``position``: start from this position text; ``rated``: a rated game
        (the socket must be signed in; docs/protocol.md, Rated rooms)."""
        message: dict[str, Any] = {"type": "create", "game": game, "opponent": opponent}
        if rated:
            message["rated"] = True
        if clock is not None:
            message["clock"] = clock
        if position is not None:
            message["position"] = position
        if seat is not None:
            message["seat"] = seat
        if options:
            message["options"] = options
        if name:
            message["name"] = name
        if player_key:
            message["player_key"] = player_key
        reply = await self.request(message)
        self.tokens[reply["room"]] = (reply["seat"], reply["token"])
        self.following.add(reply["room"])
        return reply

    async def join(
        self, room: str, seat: int | None = None, player_key: str | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"type": "join", "room": room}
        if seat is not None:
            message["seat"] = seat
        if player_key:
            message["player_key"] = player_key
        reply = await self.request(message)
        self.tokens[reply["room"]] = (reply["seat"], reply["token"])
        self.following.add(reply["room"])
        return reply

    async def watch(self, room: str) -> dict[str, Any]:
        """Follow ``room`` as a spectator; its current state."""
        self.following.add(room)
        return await self.request({"type": "watch", "room": room})

    async def resume(self, room: str, token: str | None = None, since: int | None = None) -> None:
        message: dict[str, Any] = {"type": "resume", "room": room}
        if token:
            message["token"] = token
        if since is not None:
            message["since"] = since
        self.following.add(room)
        await self.send(message)

    async def leave(self, room: str) -> None:
        self.following.discard(room)
        await self.send({"type": "leave", "room": room})

    async def move(self, room: str, move: str, version: int | None = None) -> None:
        """Send a move; errors arrive as ``error`` messages (see ``request`` to await one)."""
        _seat, token = self.tokens[room]
        message: dict[str, Any] = {"type": "move", "room": room, "token": token, "move": move}
        if version is not None:
            message["version"] = version
        await self.send(message)

    async def resign(self, room: str) -> None:
        _seat, token = self.tokens[room]
        await self.send({"type": "resign", "room": room, "token": token})

    # Player actions. Each waits until the server has handled it and raises ServerError
    # if refused (offer/none, offer/not_allowed, abort/too_late, claim/too_early...); what
    # it changed arrives as the room's next ``state`` (see ``wait_state``).

    async def _act(self, room: str, kind: str, **fields: str) -> None:
        _seat, token = self.tokens[room]
        await self.request({"type": kind, "room": room, "token": token, **fields})

    async def draw(self, room: str, action: str = "offer") -> None:
        """Offer a draw, or ``accept``/``decline`` the opponent's offer (offering when the
        opponent has offered accepts). An AI answers at once."""
        await self._act(room, "draw", action=action)

    async def takeback(self, room: str, action: str = "offer") -> None:
        """Ask to take back your last move (and the reply to it), or ``accept``/``decline``
        the opponent's request. An AI accepts at levels 1-4."""
        await self._act(room, "takeback", action=action)

    async def rematch(self, room: str, action: str = "offer") -> None:
        """Offer a rematch of a finished game, or ``accept``/``decline`` one. Once agreed
        the state's ``next_room`` names the new room: see :meth:`follow_rematch`."""
        await self._act(room, "rematch", action=action)

    async def abort(self, room: str) -> None:
        """Cancel a game that has not started, or in which not both sides have moved."""
        await self._act(room, "abort")

    async def claim(self, room: str, result: str = "win") -> None:
        """Claim the win (or a ``draw``) when the opponent has been gone long enough (the
        state's ``seats[].gone_ms`` and ``claim_after_ms``)."""
        await self._act(room, "claim", result=result)

    # Chat, seeks and the lobby.

    async def chat(self, room: str, text: str, name: str | None = None) -> None:
        """Say ``text`` in ``room``: on the players' channel if we hold a seat there, else
        on the spectators' (as ``name``). Waits until the server has handled it (errors
        such as ``chat/invalid`` or ``chat/rate`` raise); the line itself comes back as a
        ``chat`` message to the channel's followers."""
        message: dict[str, Any] = {"type": "chat", "room": room, "text": text}
        if room in self.tokens:
            message["token"] = self.tokens[room][1]
        elif name:
            message["name"] = name
        await self.request(message)

    async def seek(
        self,
        game: str,
        options: dict[str, Any] | None = None,
        clock: dict[str, int] | None = None,
        seat: int | str = "random",
        name: str | None = None,
        player_key: str | None = None,
        rated: bool = False,
        rating_range: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        """Open a seek in the lobby (``seat``: ours, 0, 1 or "random"); the seek as listed.
        When someone accepts it we get a ``seat`` message with ``"seek": id`` and then the
        room's ``state`` (see :meth:`wait_seek_accepted`). ``rated`` and ``rating_range``
        ([min, max]: the acceptor's rating) need a signed-in socket."""
        message: dict[str, Any] = {"type": "seek", "game": game, "seat": seat}
        if options:
            message["options"] = options
        if clock is not None:
            message["clock"] = clock
        if name:
            message["name"] = name
        if player_key:
            message["player_key"] = player_key
        if rated:
            message["rated"] = True
        if rating_range is not None:
            message["rating_range"] = list(rating_range)
        reply = await self.request(message)
        seek: dict[str, Any] = reply["seek"]
        return seek

    async def pool_join(
        self,
        game: str,
        clock: dict[str, int] | None = None,
        rated: bool = False,
        name: str | None = None,
        player_key: str | None = None,
    ) -> dict[str, Any]:
        """Wait in the quick pairing pool of (game, clock, rated); the ``pool_joined``
        reply. Once paired we get a ``seat`` message (see :meth:`wait_paired`)."""
        message: dict[str, Any] = {"type": "pool_join", "game": game, "rated": rated}
        if clock is not None:
            message["clock"] = clock
        if name:
            message["name"] = name
        if player_key:
            message["player_key"] = player_key
        return await self.request(message)

    async def pool_leave(self) -> None:
        """Stop waiting in the pool."""
        await self.request({"type": "pool_leave"})

    async def wait_paired(self, timeout: float = 30.0) -> dict[str, Any]:
        """The ``seat`` message of a pairing (the room's ``state`` follows); we hold the
        seat's token from then on."""
        seat = await self.next_message(
            lambda m: m["type"] == "seat" and "rid" not in m and "seek" not in m, timeout
        )
        self.tokens[seat["room"]] = (seat["seat"], seat["token"])
        self.following.add(seat["room"])
        return seat

    async def unseek(self, seek: str) -> None:
        """Withdraw one of our seeks."""
        await self.request({"type": "unseek", "seek": seek})

    async def accept_seek(
        self, seek: str, name: str | None = None, player_key: str | None = None
    ) -> dict[str, Any]:
        """Accept someone's seek: we are seated in the new room; the ``seat`` reply."""
        message: dict[str, Any] = {"type": "accept", "seek": seek}
        if name:
            message["name"] = name
        if player_key:
            message["player_key"] = player_key
        reply = await self.request(message)
        self.tokens[reply["room"]] = (reply["seat"], reply["token"])
        self.following.add(reply["room"])
        return reply

    async def wait_seek_accepted(self, seek: str, timeout: float = 30.0) -> dict[str, Any]:
        """The ``seat`` message that says our seek ``seek`` was accepted."""
        return await self.next_message(
            lambda m: m["type"] == "seat" and m.get("seek") == seek, timeout
        )

    async def lobby(self, subscribe: bool = True) -> dict[str, Any]:
        """Subscribe to the lobby (its ``seeks`` and live ``games`` now, then pushed as they
        change), or stop with ``subscribe=False``."""
        return await self.request({"type": "lobby", "subscribe": subscribe})

    async def follow_rematch(self, room: str) -> dict[str, Any]:
        """Follow the rematch of ``room`` (its state's ``next_room``): as a player, with
        the same token (the seats are swapped), else as a spectator. Its current state."""
        new = self.states[room]["next_room"]
        if not new:
            raise ValueError(f"room {room} has no rematch yet")
        if room in self.tokens:
            seat, token = self.tokens[room]
            self.tokens[new] = (1 - seat, token)
            self.following.add(new)
            return await self.request({"type": "resume", "room": new, "token": token})
        return await self.watch(new)

    async def wait_state(
        self,
        room: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """The room's newest state if it satisfies ``predicate``, else the first newer one
        that does. Older states still queued in the inbox are skipped, so a wait never
        returns a state older than one already seen. An ``error`` message raises."""
        current = self.states.get(room)
        if current is not None and predicate(current):
            return current

        def match(m: dict[str, Any]) -> bool:
            if m["type"] == "error":
                raise ServerError(m["code"], m["message"])
            # Only the newest state received counts: anything queued before it is stale.
            return m["type"] == "state" and m is self.states.get(room) and predicate(m)

        return await self.next_message(match, timeout)
