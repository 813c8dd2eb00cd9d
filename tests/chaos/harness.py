"""The chaos harness: a real cluster, the faults we inject into it, and a game driver.

- :class:`Cluster`: one Redis (the product's EmbeddedRedis, persisted, on a fixed port so a
  restart on the same directory and port keeps the data), N ``kibitz serve`` nodes (each
  straight to Redis or through a :class:`~tests.chaos.proxy.TcpProxy`) and M workers, with
  the faults: Redis stopped (SIGTERM / SIGKILL) and restarted, Redis frozen (SIGSTOP /
  SIGCONT), a node or a worker killed.
- :class:`DrivenGame`: a complete game of random legal moves from both seats (two clients,
  possibly on different nodes; or one against an AI seat). A client whose connection drops,
  or that hears nothing for ``STALL_S``, reconnects (its own node first, then the others)
  and ``resume``s with its token and last version. Every received ``state`` is logged with
  its arrival time, every move sent with the version it was sent at.
- :meth:`DrivenGame.verify` checks the finished game against what Redis holds (the
  ``/record``): it finished; its event log is complete (one event per version); its moves
  replay under the rules to its result; every human move was one its own seat's client
  sent, at that version (no stranger played a seat); each client's last view equals the
  record; and every committed version reached each client within ``DELIVERY_BOUND_S`` of
  its commit, or of the end of the fault window it was committed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import redis
import websockets
import websockets.exceptions

from kibitz.client.connection import KibitzClient
from kibitz.shared.bus.embedded import EmbeddedRedis, free_port
from kibitz.shared.games import find_game
from tests.chaos.proxy import TcpProxy
from tests.conftest import ServerProcess, start_server

#: A committed version must reach every follower this soon (after its fault window ends).
DELIVERY_BOUND_S = 5.0
#: A client that hears nothing for this long reconnects and resumes (a last resort: the
#: delivery bound above is what fails the test when it was needed).
STALL_S = 20.0
#: The margin before a fault window in which a commit counts as caught by the fault.
FAULT_MARGIN_S = 1.0
WORKER_LEASE_MS = 5000
#: tests/conftest.py lifts the per-address limits for the rest of the suite; the chaos
#: nodes run with the product's defaults (an empty value means "the default").
PRODUCT_LIMITS = {
    "KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "",
    "KIBITZ_MAX_CREATES_PER_MINUTE": "",
    "KIBITZ_MAX_AI_GAMES_PER_ADDRESS": "",
}


class ChaosError(AssertionError):
    pass


# -- waiting ------------------------------------------------------------------------------------


def wait_until(
    predicate: Callable[[], Any], timeout: float, what: str = "condition", poll: float = 0.05
) -> Any:
    """Poll ``predicate`` until it is truthy (returned) or ``timeout`` s have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ChaosError(f"{what}: not reached within {timeout:.1f} s")
        time.sleep(poll)


async def async_wait_until(
    predicate: Callable[[], Any], timeout: float, what: str = "condition", poll: float = 0.1
) -> Any:
    """Like :func:`wait_until`; ``predicate`` may be a coroutine function."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise ChaosError(f"{what}: not reached within {timeout:.1f} s")
        await asyncio.sleep(poll)


# -- HTTP -----------------------------------------------------------------------------------------


async def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The status of GET ``url``, or None when it does not answer in time."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.get(url) as resp:
                await resp.read()
                return resp.status
    except (aiohttp.ClientError, TimeoutError, OSError):
        return None


async def get_json(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
        async with s.get(url) as resp:
            return resp.status, await resp.json(content_type=None)


class HealthProbe:
    """Polls ``/healthz`` of some nodes in the background: (time, node index, status)."""

    def __init__(self, nodes: list[Node], every: float = 0.25, timeout: float = 1.5) -> None:
        self.nodes = nodes
        self.every = every
        self.timeout = timeout
        self.samples: list[tuple[float, int, int | None]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> HealthProbe:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.gather(*(self._probe(i, n) for i, n in enumerate(self.nodes)))
            await asyncio.sleep(self.every)

    async def _probe(self, index: int, node: Node) -> None:
        started = time.time()
        status = await http_status(node.http_url + "/healthz", self.timeout)
        self.samples.append((started, index, status))

    def statuses(self, index: int, t0: float, t1: float) -> list[int | None]:
        return [s for t, i, s in self.samples if i == index and t0 <= t <= t1]


# -- the cluster ------------------------------------------------------------------------------


@dataclass
class Node:
    server: ServerProcess
    redis_url: str
    proxy: TcpProxy | None
    name: str = ""

    @property
    def http_url(self) -> str:
        return self.server.http_url

    @property
    def alive(self) -> bool:
        return self.server.process.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        return "".join(self.server.log[-lines:])


class Cluster:
    """One Redis, server nodes and workers, all real processes on loopback."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.redis = EmbeddedRedis(tmp / "redis", port=free_port(), persist=True)
        self.nodes: list[Node] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.faults: list[tuple[float, float]] = []  # wall-clock windows of injected faults
        self.frozen = False

    def start(self) -> Cluster:
        self.redis.start()
        return self

    @property
    def redis_url(self) -> str:
        return self.redis.url

    def sync_redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url, decode_responses=True, socket_timeout=5)

    def add_node(self, via_proxy: bool = False, env: dict[str, str] | None = None) -> Node:
        proxy = None
        url = self.redis_url
        if via_proxy:
            proxy = TcpProxy("127.0.0.1", self.redis.port).start()
            url = f"redis://:{self.redis.password}@127.0.0.1:{proxy.port}/0"
        server = start_server(url, workers=0, extra_env={**PRODUCT_LIMITS, **(env or {})})
        node = Node(server, url, proxy)
        with urllib.request.urlopen(server.http_url + "/healthz", timeout=10) as resp:
            node.name = json.loads(resp.read())["node"]
        self.nodes.append(node)
        return node

    def add_worker(self, name: str, lease_ms: int = WORKER_LEASE_MS) -> subprocess.Popen[bytes]:
        log = open(self.tmp / f"worker-{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            [sys.executable, "-m", "kibitz.server.cli", "worker",
             "--name", name, "--lease-ms", str(lease_ms)],
            env={**os.environ, "KIBITZ_LOG": "WARNING", "KIBITZ_REDIS_URL": self.redis_url},
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.workers[name] = proc
        return proc

    def live_urls(self, first: str | None = None) -> list[str]:
        urls = [n.http_url for n in self.nodes if n.alive]
        if first in urls:
            urls.remove(first)
            urls.insert(0, first)
        return urls

    def node_by_url(self, url: str) -> Node:
        return next(n for n in self.nodes if n.http_url == url)

    # -- faults --------------------------------------------------------------------------------
    def redis_down(self, sig: int = signal.SIGTERM) -> None:
        """Stop Redis with ``sig`` (SIGTERM flushes the AOF; SIGKILL may lose ~1 s)."""
        proc = self.redis.process
        assert proc is not None
        proc.send_signal(sig)
        proc.wait(timeout=15)
        self.redis.stop()

    def redis_up(self) -> None:
        """Start the same redis-server command again: same port, directory and password."""
        self.redis.start(timeout=30)

    def redis_freeze(self) -> None:
        assert self.redis.process is not None
        self.redis.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def redis_thaw(self) -> None:
        assert self.redis.process is not None
        self.redis.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill_node(self, node: Node, sig: int = signal.SIGKILL) -> None:
        node.server.process.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            node.server.process.wait(timeout=15)

    def kill_worker(self, name: str) -> None:
        proc = self.workers[name]
        proc.kill()
        proc.wait(timeout=10)

    def fault_window(self, start: float, end: float) -> None:
        self.faults.append((start, end))

    # -- teardown ------------------------------------------------------------------------------
    def logs(self) -> str:
        out = []
        for i, node in enumerate(self.nodes):
            out.append(f"--- node {i} {node.name} (alive={node.alive})\n{node.log_tail()}")
        for name in self.workers:
            path = self.tmp / f"worker-{name}.log"
            if path.exists():
                out.append(f"--- worker {name}\n{path.read_text()[-2000:]}")
        return "\n".join(out)

    def close(self) -> None:
        if self.frozen and self.redis.process is not None:
            with contextlib.suppress(Exception):
                self.redis_thaw()
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.workers.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for node in self.nodes:
            if node.alive:
                node.server.process.send_signal(signal.SIGCONT)
            node.server.stop()
            if node.proxy is not None:
                node.proxy.close()
        self.redis.stop()


# -- clients --------------------------------------------------------------------------------

OPEN_ERRORS = (OSError, TimeoutError, ConnectionError, websockets.exceptions.WebSocketException)


async def open_client(url: str, local_addr: str | None = None, **kwargs: Any) -> KibitzClient:
    """A KibitzClient on ``url``, from ``local_addr`` (a loopback address) if given."""
    if local_addr is not None:
        kwargs["local_addr"] = (local_addr, 0)
    return await KibitzClient.open(url, **kwargs)


_rids = itertools.count(1)


def new_rid() -> str:
    return f"chaos-{next(_rids)}"


class GameTimeout(ChaosError):
    pass


CLOSED: dict[str, Any] = {"type": "closed"}
Match = Callable[[dict[str, Any]], bool]


def newer_state(room: str, version: int) -> Match:
    """A ``state`` of ``room`` past ``version``."""
    return lambda m: m["type"] == "state" and m["room"] == room and int(m["version"]) > version


def error_for(rid: str) -> Match:
    """The ``error`` reply to the request ``rid``."""
    return lambda m: m["type"] == "error" and m.get("rid") == rid


def either(first: Match, second: Match) -> Match:
    return lambda m: first(m) or second(m)


def version_at_least(version: int) -> Match:
    return lambda s: int(s["version"]) >= version


def version_past(version: int) -> Match:
    return lambda s: int(s["version"]) > version


@dataclass
class Player:
    """One seat's client in a driven game.

    A pump task reads every message of the current client (through the client's public
    ``next_message``), stamps its arrival, keeps the newest arrival as this player's view
    and queues it for the player's own waits; so the player needs nothing of the client
    but ``open``, ``send``, ``next_message`` and ``close``.
    """

    game: DrivenGame
    seat: int
    token: str
    client: KibitzClient
    home: str
    local_addr: str | None = None
    seen: list[tuple[float, int, list[str]]] = field(default_factory=list)
    sent: set[tuple[int, str]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    reconnects: int = 0
    stalls: int = 0
    floor: int = 0  # the next state this player acts on must be at least this version
    state: dict[str, Any] | None = None
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    pump: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.attach(self.client)

    @property
    def room(self) -> str:
        return self.game.room

    def attach(self, client: KibitzClient, initial: list[dict[str, Any]] | None = None) -> None:
        if self.pump is not None:
            self.pump.cancel()
        self.client = client
        client.tokens[self.room] = (self.seat, self.token)
        self.queue = asyncio.Queue()
        for message in initial or ():
            self._arrived(time.time(), message)
        self.pump = asyncio.create_task(self._pump(client, self.queue))

    def _arrived(self, at: float, message: dict[str, Any]) -> None:
        if message.get("type") == "error":
            self.notes.append(f"{at:.1f} error {message.get('code')} rid={message.get('rid')}")
        if message.get("type") == "state" and message.get("room") == self.room:
            self.state = message
            self.seen.append((at, int(message["version"]), [m["move"] for m in message["moves"]]))

    async def _pump(self, client: KibitzClient, queue: asyncio.Queue[dict[str, Any]]) -> None:
        try:
            while True:
                message = await client.next_message(None, timeout=3600)
                self._arrived(time.time(), message)
                queue.put_nowait(message)
        except (ConnectionError, TimeoutError, websockets.ConnectionClosed):
            queue.put_nowait(CLOSED)

    def last_version(self) -> int | None:
        return max((v for _t, v, _m in self.seen), default=None)

    def current(self) -> dict[str, Any] | None:
        return self.state

    async def next(self, match: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """The next queued message ``match`` accepts; ConnectionError when the socket closed."""
        async with asyncio.timeout(timeout):
            while True:
                message = await self.queue.get()
                if message is CLOSED:
                    self.queue.put_nowait(message)
                    raise ConnectionError("connection closed")
                if match(message):
                    return message

    async def wait_state(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        """This player's view once ``predicate`` holds for it (now or on a later arrival)."""
        async with asyncio.timeout(timeout):
            while True:
                if self.state is not None and predicate(self.state):
                    return self.state
                await self.next(lambda m: m.get("type") == "state", timeout)

    async def send(self, message: dict[str, Any]) -> None:
        await self.client.send(message)

    async def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.close(), 2)

    # -- playing -------------------------------------------------------------------------------
    async def run(self, deadline: float) -> dict[str, Any]:
        """Play random legal moves for this seat until the game is over."""
        while True:
            state = await self._await_turn(deadline)
            if state["status"] == "over":
                return state
            await asyncio.sleep(self.game.think())
            version = int(state["version"])
            move = self.game.rng.choice(state["legal_moves"])
            rid = new_rid()
            self.sent.add((version, move))
            self.notes.append(f"{time.time():.1f} sent {move} at v{version} rid={rid}")
            message = {"type": "move", "room": self.room, "token": self.token, "move": move,
                       "version": version, "rid": rid}  # fmt: skip
            try:
                await self.send(message)
            except (websockets.ConnectionClosed, ConnectionError, OSError):
                await self.reconnect("send failed", deadline)
                continue
            reply = await self._next(
                either(newer_state(self.room, version), error_for(rid)),
                deadline,
            )
            if reply is None or reply["type"] == "state":
                continue
            code = reply["code"]
            if code in ("server/unavailable", "room/busy", "server/busy", "rate/limited"):
                await asyncio.sleep(0.3)
            elif code in ("room/stale", "move/not_your_turn", "move/illegal", "game/over"):
                self.floor = version + 1  # our view is behind: act on a newer state only
            else:
                raise ChaosError(f"room {self.room} seat {self.seat}: move refused: {reply}")

    async def _await_turn(self, deadline: float) -> dict[str, Any]:
        while True:
            state = self.state
            if state is not None and int(state["version"]) >= self.floor:
                if state["status"] == "over":
                    return state
                if state["status"] == "playing" and state["to_move"] == self.seat:
                    return state
            await self._next(lambda m: m["type"] == "state" and m["room"] == self.room, deadline)

    async def _next(
        self, match: Callable[[dict[str, Any]], bool], deadline: float
    ) -> dict[str, Any] | None:
        """The next matching message; None if the client had to reconnect meanwhile."""
        stall_at = min(deadline, time.monotonic() + STALL_S)
        while True:
            remaining = stall_at - time.monotonic()
            if remaining <= 0:
                if time.monotonic() >= deadline:
                    raise GameTimeout(self._where("did not finish in time"))
                self.stalls += 1
                self.notes.append(f"{time.time():.1f} heard nothing for {STALL_S} s")
                await self.reconnect("stalled", deadline)
                return None
            try:
                return await self.next(match, remaining)
            except TimeoutError:
                continue
            except ConnectionError:
                await self.reconnect("connection closed", deadline)
                return None

    def _where(self, what: str) -> str:
        state = self.state or {}
        return (
            f"room {self.room} ({self.game.game}) seat {self.seat}: {what}; last state "
            f"v{state.get('version')} status={state.get('status')} to_move={state.get('to_move')}"
            f"; reconnects={self.reconnects} notes={self.notes[-5:]}"
        )

    async def reconnect(self, why: str, deadline: float) -> None:
        """A new connection (home node first, then the others) and ``resume``."""
        self.reconnects += 1
        self.notes.append(f"{time.time():.1f} reconnect: {why}")
        await self.close()
        for attempt in itertools.count():
            if time.monotonic() >= deadline:
                raise GameTimeout(self._where(f"could not reconnect ({why})"))
            urls = self.game.cluster.live_urls(first=self.home)
            if not urls:
                raise ChaosError("no live node to reconnect to")
            url = urls[attempt % len(urls)]
            try:
                client = await open_client(url, self.local_addr)
            except OPEN_ERRORS as exc:
                self.notes.append(f"open {url}: {type(exc).__name__}")
                await asyncio.sleep(0.3)
                continue
            received = await self._resume(client)
            if received is not None:
                self.attach(client, received)
                self.floor = 0
                return
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 2)
            await asyncio.sleep(0.3)

    async def _resume(self, client: KibitzClient) -> list[dict[str, Any]] | None:
        """Send ``resume`` on a fresh client; the messages up to its ``resync`` state, or
        None if it was refused or the socket died."""
        rid = new_rid()
        message: dict[str, Any] = {"type": "resume", "room": self.room, "token": self.token,
                                   "rid": rid}  # fmt: skip
        since = self.last_version()
        if since is not None:
            message["since"] = since
        client.tokens[self.room] = (self.seat, self.token)
        received: list[dict[str, Any]] = []

        def answer(m: dict[str, Any]) -> bool:
            received.append(m)
            resynced = m["type"] == "state" and m["room"] == self.room
            return (resynced and m["event"]["kind"] == "resync") or (
                m["type"] == "error" and m.get("rid") == rid
            )

        try:
            await client.send(message)
            reply = await client.next_message(answer, timeout=10)
        except (TimeoutError, ConnectionError, websockets.ConnectionClosed, OSError):
            return None
        if reply["type"] == "error":
            self.notes.append(f"resume refused: {reply['code']}")
            return None
        if reply["you"] != self.seat:
            raise ChaosError(self._where(f"resumed with its token as {reply['you']!r}"))
        return received


class DrivenGame:
    """A game between our own clients (or one client and an AI seat)."""

    def __init__(
        self,
        cluster: Cluster,
        room: str,
        game: str,
        rng: random.Random,
        think: tuple[float, float],
    ) -> None:
        self.cluster = cluster
        self.room = room
        self.game = game
        self.rng = rng
        self.think_range = think
        self.players: list[Player] = []
        self.problems: list[str] = []
        self.record: dict[str, Any] | None = None

    def think(self) -> float:
        return self.rng.uniform(*self.think_range)

    @classmethod
    async def start(
        cls,
        cluster: Cluster,
        game: str,
        creator: Node,
        joiner: Node | None = None,
        opponent: str = "human",
        seat: int = 0,
        addrs: tuple[str | None, str | None] = (None, None),
        seed: int = 0,
        think: tuple[float, float] = (0.05, 0.15),
        position: str | None = None,
    ) -> DrivenGame:
        """Create the room on ``creator`` (and join it on ``joiner`` for a human game)."""
        a = await open_client(creator.http_url, addrs[0])
        message: dict[str, Any] = {"type": "create", "game": game, "opponent": opponent,
                                   "seat": seat}  # fmt: skip
        if position is not None:
            message["position"] = position
        reply = await a.request(message)
        driven = cls(cluster, reply["room"], game, random.Random(seed), think)
        first = Player(driven, reply["seat"], reply["token"], a, creator.http_url, addrs[0])
        driven.players.append(first)
        await first.wait_state(lambda s: True)
        if opponent == "human":
            assert joiner is not None
            b = await open_client(joiner.http_url, addrs[1])
            joined = await b.request({"type": "join", "room": driven.room})
            second = Player(driven, joined["seat"], joined["token"], b, joiner.http_url, addrs[1])
            driven.players.append(second)
            await second.wait_state(lambda s: s["status"] == "playing")
        return driven

    async def play(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        results = await asyncio.gather(
            *(p.run(deadline) for p in self.players), return_exceptions=True
        )
        for player, result in zip(self.players, results, strict=True):
            if isinstance(result, BaseException):
                self.problems.append(f"room {self.room} seat {player.seat}: {result}")

    def summary(self) -> str:
        moves = len(self.record["moves"]) if self.record else None
        return f"room {self.room} ({self.game}): {moves} moves; " + "; ".join(
            f"seat {p.seat}: {p.reconnects} reconnects, {p.stalls} stalls"
            + (f" {p.notes[-8:]}" if p.stalls else "")
            for p in self.players
        )

    def in_progress(self) -> bool:
        state = self.players[0].current()
        return state is not None and state["status"] != "over"

    async def close(self) -> None:
        for p in self.players:
            await p.close()

    async def fetch_record(self, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for url in self.cluster.live_urls():
                try:
                    status, body = await get_json(f"{url}/api/rooms/{self.room}/record", 3.0)
                except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
                    continue
                if status == 200:
                    return dict(body)
            if time.monotonic() > deadline:
                raise ChaosError(f"room {self.room}: no node served its record")
            await asyncio.sleep(0.5)

    async def verify(self, allow_resign: bool = False) -> list[str]:
        """Everything the chaos scenarios assert about one finished game (see module doc)."""
        problems = list(self.problems)
        try:
            record = await self.fetch_record()
        except ChaosError as exc:
            return [*problems, str(exc)]
        self.record = record
        where = f"room {self.room} ({self.game})"
        moves = record["moves"]
        if record["status"] != "over" or record["result"] is None:
            problems.append(f"{where}: not finished in Redis: status {record['status']}")
        versions = [e["version"] for e in record["events"]]
        last = versions[-1] if versions else -1
        if versions != list(range(last + 1)):
            problems.append(f"{where}: event log has gaps or repeats: {versions}")
        move_events = [e for e in record["events"] if e["kind"] == "move"]
        if [e["move"] for e in move_events] != moves:
            problems.append(f"{where}: move events {move_events} differ from moves {moves}")
        problems += self._check_rules(record, allow_resign)
        # No stranger played a seat: each human move is one its seat's client sent then.
        by_seat = {p.seat: p for p in self.players}
        for event in move_events:
            player = by_seat.get(event["seat"])
            if player is not None and (event["version"] - 1, event["move"]) not in player.sent:
                problems.append(
                    f"{where}: move {event['move']} at v{event['version']} for seat "
                    f"{event['seat']} was not sent by that seat's client"
                )
        human_seats = sorted(i for i, s in enumerate(record["seats"]) if s["kind"] == "human")
        if human_seats != sorted(by_seat):
            problems.append(f"{where}: human seats {human_seats}, ours {sorted(by_seat)}")
        # Each client converged to what Redis holds.
        for player in self.players:
            if not player.seen:
                problems.append(f"{where} seat {player.seat}: never received a state")
                continue
            _t, version, seen_moves = player.seen[-1]
            if version != last or seen_moves != moves:
                problems.append(
                    f"{where} seat {player.seat}: last view v{version} with {len(seen_moves)} "
                    f"moves, Redis holds v{last} with {len(moves)} moves"
                )
            problems += self._check_delivery(record, player)
        return problems

    def _check_rules(self, record: dict[str, Any], allow_resign: bool) -> list[str]:
        game = find_game(record["game"])
        try:
            state = game.parse_position(record["start"])
            for move in record["moves"]:
                state = game.play(state, move)
        except Exception as exc:
            return [f"room {self.room}: its moves do not replay: {exc}"]
        outcome = game.outcome(state)
        result = record["result"]
        if result is not None and "resign" in str(result.get("reason", "")):
            if not allow_resign:
                return [f"room {self.room}: ended by resignation: {result}"]
            return []
        if outcome is None or result is None:
            return [f"room {self.room}: rules say {outcome}, record says {result}"]
        if outcome.winner != result["winner"] or outcome.reason != result["reason"]:
            return [f"room {self.room}: rules say {outcome}, record says {result}"]
        return []

    def _check_delivery(self, record: dict[str, Any], player: Player) -> list[str]:
        """Every version committed after the player arrived reached it within the bound."""
        moves = record["moves"]
        first_seen = player.seen[0][1]
        out = []
        for event in record["events"]:
            version = event["version"]
            if version <= first_seen:
                continue
            committed = event["at"] / 1000.0
            start = committed
            for t0, t1 in self.cluster.faults:
                if t0 - FAULT_MARGIN_S <= committed <= t1:
                    start = max(start, t1)
            arrived = next(
                (
                    t
                    for t, v, seen_moves in player.seen
                    if v >= version and seen_moves == moves[: len(seen_moves)]
                ),
                None,
            )
            if arrived is None:
                out.append(
                    f"room {self.room} seat {player.seat}: v{version} (committed "
                    f"{committed:.1f}) never reached the client"
                )
            elif arrived - start > DELIVERY_BOUND_S:
                out.append(
                    f"room {self.room} seat {player.seat}: v{version} reached the client "
                    f"{arrived - start:.1f} s after it was committed (or its fault ended); "
                    f"bound {DELIVERY_BOUND_S} s"
                )
        return out


async def play_all(
    games: list[DrivenGame],
    timeout: float,
    fault: Callable[[], Awaitable[None]] | None = None,
    fault_after: float = 2.0,
) -> list[str]:
    """Play ``games`` to the end, running ``fault`` ``fault_after`` s in; the problems."""
    tasks = [asyncio.create_task(g.play(timeout)) for g in games]
    problems: list[str] = []
    try:
        if fault is not None:
            await asyncio.sleep(fault_after)
            finished = [g.room for g in games if not g.in_progress()]
            if finished:
                problems.append(f"games over before the fault (test too short): {finished}")
            await fault()
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    for g in games:
        problems += await g.verify()
        await g.close()
        print(g.summary())
    return problems


async def mixed_games(cluster: Cluster, a: Node, b: Node, seed: int) -> list[DrivenGame]:
    """Four Othello games (about 60 plies each): human pairs across and on one node, and
    two against low-level AIs."""
    return [
        await DrivenGame.start(cluster, "othello", a, b, seed=seed + 1),
        await DrivenGame.start(cluster, "othello", b, a, seed=seed + 2),
        await DrivenGame.start(cluster, "othello", a, opponent="ai:1", seed=seed + 3),
        await DrivenGame.start(cluster, "othello", b, opponent="ai:2", seed=seed + 4, seat=1),
    ]


async def healthy_again(node: Node, timeout: float = DELIVERY_BOUND_S) -> bool:
    try:
        await async_wait_until(
            lambda: _is_200(node), timeout, f"{node.name} /healthz 200", poll=0.2
        )
    except ChaosError:
        return False
    return True


async def _is_200(node: Node) -> bool:
    return await http_status(node.http_url + "/healthz", 1.5) == 200


def report(problems: list[str], cluster: Cluster | None = None) -> str:
    text = "\n".join(problems)
    if cluster is not None:
        text += "\n\n" + cluster.logs()
    return text
