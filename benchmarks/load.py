"""``kibitz bench load``: many concurrent human-vs-human games through real WebSockets.

Each game is two Python clients playing random legal moves. We measure the time from
sending a move to the opponent receiving the new state (the latency a player feels),
and the sustained rate of moves. Loops are bounded in games and in time, and the
target must be a loopback address unless ``--allow-remote`` is given.

By default a client moves as soon as it is its turn, so the games are as busy as the
machine allows. ``--think-ms MS`` makes each player pause before each move, a random
0.5 to 1.5 times MS, as a person does: the latency of games played at a pace. The
summary's ``moves_in_flight`` says how many moves were under way at once on average
(the sum of the round trips over the run's length): a run whose games spend most of
their time connecting and setting up has few moves at once, whatever ``--concurrency``.

With ``--spectators N`` it plays one game instead, watched by N spectators (spread over
the ``--url`` nodes given), and times each move's fan-out: from the mover's send until
the last spectator has the new state. The spectators are raw sockets in
``--spectator-procs P`` child processes (``spectators.py``; spectator i in process
i mod P), so that reading a thousand frames per move loads those processes rather than
the bench's own: each child tells the bench when its last spectator got each version,
and the fan-out ends at the latest of them. On the private server it also reports the
server's memory per idle connection (its RSS growth while the spectators connect) and
the CPU per move while the moves fan out, the server's and the bench clients' (the
bench's process plus its spectators' processes).

With ``--nodes N`` the private server is a local cluster: N ``kibitz serve`` nodes on
loopback sharing one private Redis, and the clients are spread over them (game i's two
players on node i mod N). The server CPU per move is then the sum over the nodes, and the
Redis's own CPU per move is reported beside it. ``--cpu-limit CORES`` caps each of those
nodes at that share of the CPU (``cpu_limit.py``), so a small machine can show how
throughput grows with nodes when the nodes, not the machine, are the limit.

With ``--redis-cluster N`` the nodes share a private Redis Cluster of N primaries instead
(``shared/bus/embedded_cluster.py``; no replicas unless ``--redis-replicas 1``), reached by
its ``redis+cluster://`` URL in ``KIBITZ_REDIS_URL``; ``--redis-cluster 1`` is a cluster of
one primary, the same code path as 2 or 3, so that they compare. ``--redis-cpu-limit CORES``
caps each redis-server (the one private Redis, or each node of the cluster) in a control
group of its own, so that Redis rather than the machine is the limit; the summary then has
each primary's CPU per move, its busy share of a core (``redis_cores``; ``redis_idle_cores``
before the games, with the nodes idle) and the share of its quota's periods it used up and
had to wait (``redis_throttled``: near 1 when Redis is the limit), the groups of rooms each
primary serves and the primary of the control slot, and the nodes' busy shares
(``node_cores``; ``node_idle_cores`` before the games), which show which side was
saturated.

With ``--ai LEVEL`` each game is one client against the AI at that level (the client on a
random seat, so the AI moves first in half the games), and the private nodes get
``--ai-workers N`` ``kibitz worker`` processes that the bench starts beside them. ``moves``
then counts both sides' moves (the client's and the AI's, ``human_moves`` and
``ai_moves``); ``latency_ms``/``move_rtt_ms`` time the client's move until its own client
has the new state (the commit's round trip), and ``ai_reply_ms`` until it has the AI's
reply (the relay, the fair queue, the search, the result and its commit). On a cluster the
AI's queueing and results run on the control slot (``{c}``), whose primary also serves
its share of the groups: ``redis_control_slot_cpu_ms_per_ai_move`` is that primary's CPU
per AI move less its groups' share (its groups times the other primaries' CPU per group),
the control slot's own cost of an AI move and of the client move that goes with it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from kibitz.benchmarks.cpu_limit import (
    CpuLimitError,
    CpuLimits,
    cpu_seconds,
    find_controller,
    quota_us,
)
from kibitz.benchmarks.spectators import MAX_PROCS, Spectators
from kibitz.client.connection import KibitzClient, ServerError, newer_than

if TYPE_CHECKING:
    from kibitz.benchmarks.faults import WorkerPool
    from kibitz.shared.bus.embedded_cluster import EmbeddedCluster


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "load", help="concurrent games over WebSockets: latency, moves/s (N nodes, a Redis Cluster)"
    )
    parser.add_argument(
        "--url",
        action="append",
        help="a running server; repeat to spread clients over nodes (default: start one "
        "on a private Redis)",
    )
    parser.add_argument("--game", default="tictactoe")
    parser.add_argument("--games", type=int, default=200, help="games to play in all")
    parser.add_argument("--concurrency", type=int, default=50, help="games at once")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="stop after this long")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="each player pauses before each move, 0.5 to 1.5 times this (default: none)",
    )
    parser.add_argument(
        "--spectators",
        type=int,
        default=0,
        help=f"play one game watched by this many spectators (at most {MAX_SPECTATORS}) "
        "and time the fan-out",
    )
    parser.add_argument(
        "--spectator-procs",
        type=int,
        default=2,
        metavar="P",
        help=f"with --spectators: run the spectators in this many child processes (1-"
        f"{MAX_PROCS}; spectator i in process i mod P), so that reading their frames does "
        "not make the bench, rather than the server, the bottleneck",
    )
    parser.add_argument("--codec", choices=("json", "msgpack"), default="json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --url")
    parser.add_argument(
        "--nodes",
        type=int,
        default=1,
        help=f"private cluster: this many nodes (1-{MAX_NODES}) on loopback sharing one "
        "private Redis, the clients spread over them. Placement: nothing is pinned unless "
        "--pin; the nodes, Redis and this bench's clients (one process) share the machine's "
        "cores as the OS schedules them, so on 2 cores a 2-node run has two nodes, Redis and "
        "the load generator on two cores (the figures are per machine, not per node)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="pin node i to CPU i mod the CPUs available (sched_setaffinity); Redis and the "
        "bench stay unpinned",
    )
    parser.add_argument(
        "--cpu-limit",
        type=float,
        default=None,
        metavar="CORES",
        help="cap each node of the private cluster at this many cores (a control group "
        "each, like a container's CPU limit; needs root), so on a small machine the nodes "
        "rather than the machine are the bottleneck: compare --nodes 1 and --nodes 2 at "
        "the same limit with the load doubled",
    )
    parser.add_argument(
        "--redis-cluster",
        type=int,
        default=None,
        metavar="N",
        help=f"the private store is a Redis Cluster of N primaries (1-{MAX_PRIMARIES}; Redis "
        "7, Debian's redis-server) instead of one private Redis; the nodes reach it by its "
        "redis+cluster:// URL. 1 is a cluster of one primary, the same code path as 2 or 3",
    )
    parser.add_argument(
        "--redis-replicas",
        type=int,
        choices=(0, 1),
        default=0,
        help="with --redis-cluster: replicas per primary (default 0: a replica costs its "
        "primary CPU for replication and takes a share of the machine)",
    )
    parser.add_argument(
        "--redis-groups",
        type=int,
        default=None,
        metavar="G",
        help="with --redis-cluster: the slot groups of the key layout (the URL's ?groups=G; "
        "default the product's, 64). Rooms spread over the primaries by group: 64 groups "
        "fall 23/21/20 on 3 primaries, 48 fall 16/16/16 (the summary's "
        "redis_groups_per_primary)",
    )
    parser.add_argument(
        "--redis-cpu-limit",
        type=float,
        default=None,
        metavar="CORES",
        help="cap each redis-server of the private store (the one Redis, or every node of "
        "the --redis-cluster) at this many cores, a control group each (needs root; a share "
        "under 0.1 gets a longer period than 10 ms, see benchmarks/cpu_limit.py), so that "
        "Redis, not the machine, is the limit",
    )
    parser.add_argument(
        "--ai",
        type=int,
        default=None,
        metavar="LEVEL",
        help=f"each game is one client against the AI at this level (1-{MAX_AI_LEVEL}) "
        "instead of two clients; moves/s and moves count both sides' moves, ai_moves the "
        "AI's, the latency is the client's move until its own client has it (ai_reply_ms: "
        "until it has the AI's reply)",
    )
    parser.add_argument(
        "--ai-workers",
        type=int,
        default=None,
        metavar="N",
        help=f"with --ai on the private server: start this many `kibitz worker` processes "
        f"on its store (1-{MAX_AI_WORKERS}; default {DEFAULT_AI_WORKERS}); their CPU per AI "
        "move is reported",
    )
    parser.set_defaults(func=run)


MAX_SPECTATORS = 10_000
MAX_NODES = 8
MAX_PRIMARIES = 6
#: cluster-node-timeout of the bench's cluster: long, so that a primary slowed by its CPU
#: cap is never taken for failed (the tests' 1 s is for failover drills).
BENCH_NODE_TIMEOUT_MS = 15_000
#: How long Redis's CPU is read with the nodes started and idle, before the games.
IDLE_SECONDS = 2.0
MAX_THINK_MS = 60_000.0  # a minute's pause at most: the run stays bounded in time
MAX_AI_LEVEL = 8
MAX_AI_WORKERS = 16
#: Level 1 searches are tiny: on a 2-core machine 6 workers did about 10% more AI moves/s
#: than 2 (123 and 110 in one 30 s run each), the machine rather than the workers the limit.
DEFAULT_AI_WORKERS = 2


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p99 and max of ``values`` in ms, rounded (zeros when there are none)."""
    ordered = sorted(values)

    def pct(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2) if ordered else 0.0

    return {"p50": pct(0.50), "p99": pct(0.99), "max": round(ordered[-1], 2) if ordered else 0.0}


@dataclass
class LoadStats:
    latencies_ms: list[float] = field(default_factory=list)
    games: int = 0
    moves: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    ai_moves: int = 0  # of ``moves``, the AI's (games with --ai)
    ai_reply_ms: list[float] = field(default_factory=list)

    def count_error(self, exc: BaseException) -> None:
        kind = exc.code if isinstance(exc, ServerError) else type(exc).__name__
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def summary(self, seconds: float) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))], 2) if lat else 0.0

        return {
            "games": self.games,
            "moves": self.moves,
            "errors": self.errors,
            "error_kinds": self.error_kinds,
            "seconds": round(seconds, 2),
            "moves_per_s": round(self.moves / seconds, 1) if seconds else 0.0,
            "move_rtt_ms": percentiles(self.latencies_ms),
            "moves_in_flight": round(sum(lat) / 1000 / seconds, 2) if seconds else 0.0,
            "latency_ms": {
                "p50": pct(0.50),
                "p95": pct(0.95),
                "p99": pct(0.99),
                "max": round(lat[-1], 2) if lat else 0.0,
                "mean": round(statistics.fmean(lat), 2) if lat else 0.0,
            },
        }


async def play_one(
    url: str, game: str, codec: str, rng: random.Random, stats: LoadStats, think_s: float = 0.0
) -> None:
    # A browser waits minutes for a handshake; websockets' 10 s default would count a
    # node that is slow under a herd of simultaneous connections as failing.
    a = await KibitzClient.open(url, codec=codec, open_timeout=60)  # type: ignore[arg-type]
    b = await KibitzClient.open(url, codec=codec, open_timeout=60)  # type: ignore[arg-type]
    try:
        room = (await a.create(game, seat=0))["room"]
        await b.join(room)
        players = {0: a, 1: b}
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        while state["status"] == "playing":
            mover, other = players[state["to_move"]], players[1 - state["to_move"]]
            version = state["version"]
            if think_s:
                await asyncio.sleep(think_s * (0.5 + rng.random()))
            started = time.perf_counter()
            await mover.move(room, rng.choice(state["legal_moves"]), version)
            state = await other.wait_state(room, newer_than(version))
            stats.latencies_ms.append((time.perf_counter() - started) * 1000)
            stats.moves += 1
            await mover.wait_state(room, newer_than(version))
        stats.games += 1
    finally:
        await a.close()
        await b.close()


async def play_ai(
    url: str,
    game: str,
    level: int,
    codec: str,
    rng: random.Random,
    stats: LoadStats,
    think_s: float = 0.0,
) -> None:
    """One game of a client against the AI at ``level``, the client on a random seat. Its
    moves are timed until its own client has them and until the AI's reply arrives; the
    AI's moves are counted from the moves list of each state the client waits for."""
    client = await KibitzClient.open(url, codec=codec, open_timeout=60)  # type: ignore[arg-type]
    try:
        seat = rng.randrange(2)  # the AI moves first in half the games
        room = (await client.create(game, f"ai:{level}", seat=seat))["room"]

        def our_turn(state: dict[str, Any], after: int = -1) -> bool:
            """The game is over or it is our turn, at a version past ``after``."""
            if int(state["version"]) <= after:
                return False
            return state["status"] == "over" or (
                state["status"] == "playing" and int(state["to_move"]) == seat
            )

        ai_counted = 0

        def count_ai_moves(state: dict[str, Any]) -> int:
            """Count the AI's moves in ``state`` not counted yet; how many those are."""
            nonlocal ai_counted
            new = sum(1 for move in state["moves"] if move["seat"] != seat) - ai_counted
            ai_counted += new
            stats.ai_moves += new
            stats.moves += new
            return new

        state = await client.wait_state(room, our_turn)
        count_ai_moves(state)
        while state["status"] == "playing":
            version = state["version"]
            if think_s:
                await asyncio.sleep(think_s * (0.5 + rng.random()))
            started = time.perf_counter()
            await client.move(room, rng.choice(state["legal_moves"]), version)
            await client.wait_state(room, newer_than(version))
            stats.latencies_ms.append((time.perf_counter() - started) * 1000)
            stats.moves += 1
            state = await client.wait_state(room, functools.partial(our_turn, after=version))
            if count_ai_moves(state):
                stats.ai_reply_ms.append((time.perf_counter() - started) * 1000)
        stats.games += 1
    finally:
        await client.close()


def _childrencpu_seconds() -> float:
    """The CPU time of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


#: The keys of the JSON line every run ends with (issue 10), in this order.
SUMMARY_KEYS = ("connections", "games", "moves", "errors", "moves_per_s", "move_rtt_ms",
                "fanout_ms", "server_cpu_ms_per_move", "rss_bytes_per_connection")  # fmt: skip


def _rss_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` (VmRSS in /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def drive_spectators(
    urls: list[str], args: argparse.Namespace, server_pid: int | None = None
) -> dict[str, Any]:
    """One game of ``args.game`` watched by ``args.spectators`` clients spread over
    ``urls`` and over ``args.spectator_procs`` child processes: the move latency to the
    opponent, the fan-out to the last spectator and, given the server's pid, its RSS per
    idle connection."""
    stats = LoadStats()
    fanout_ms: list[float] = []
    moves_cpu: dict[str, float] = {}  # "server", "client": CPU ms per move while moving
    rng = random.Random(args.seed)
    started = time.perf_counter()
    a = await KibitzClient.open(urls[0], codec=args.codec, open_timeout=60)
    b = await KibitzClient.open(urls[-1], codec=args.codec, open_timeout=60)
    spectators: Spectators | None = None
    rss_per_connection: float | None = None
    try:
        room = (await a.create(args.game, seat=0))["room"]
        await b.join(room)
        state = await a.wait_state(room, lambda s: s["status"] == "playing")
        rss_before = _rss_bytes(server_pid) if server_pid else 0
        # The children outlive no bench: they stop by themselves after max_seconds too.
        spectators = Spectators(
            room, args.codec, urls, args.spectators, args.spectator_procs, args.max_seconds
        )
        spectators.start()
        await spectators.ready(timeout=args.max_seconds)
        if server_pid:
            await asyncio.sleep(0.5)  # let the server settle after the last watch
            rss_per_connection = (_rss_bytes(server_pid) - rss_before) / args.spectators
        players = {0: a, 1: b}
        # CPU while the moves fan out (connecting the spectators is not counted here).
        server_cpu_before = cpu_seconds(server_pid) if server_pid else None
        client_cpu_before = time.process_time()
        while state["status"] == "playing":
            mover, other = players[state["to_move"]], players[1 - state["to_move"]]
            version = state["version"]
            sent = time.perf_counter()
            await mover.move(room, rng.choice(state["legal_moves"]), version)
            state = await other.wait_state(room, newer_than(version))
            stats.latencies_ms.append((time.perf_counter() - sent) * 1000)
            await mover.wait_state(room, newer_than(version))
            last = await spectators.all_have(state["version"])
            fanout_ms.append((last - sent) * 1000)
            stats.moves += 1
        stats.games += 1
        if stats.moves:
            parent_cpu = time.process_time() - client_cpu_before
            server_cpu_after = cpu_seconds(server_pid) if server_pid else None
            children_cpu = await spectators.stop()  # their CPU from ready to here
            if children_cpu is not None:
                moves_cpu["client"] = (parent_cpu + children_cpu) * 1000 / stats.moves
            if server_cpu_before is not None and server_cpu_after is not None:
                moves_cpu["server"] = (server_cpu_after - server_cpu_before) * 1000 / stats.moves
    finally:
        await a.close()
        await b.close()
        if spectators is not None:
            await spectators.close()
    out = stats.summary(time.perf_counter() - started)
    out.update(
        game=args.game,
        concurrency=1,
        connections=2 + args.spectators,
        codec=args.codec,
        spectators=args.spectators,
        spectator_procs=spectators.procs if spectators is not None else args.spectator_procs,
        fanout_ms=percentiles(fanout_ms),
        rss_bytes_per_connection=None if rss_per_connection is None else round(rss_per_connection),
        fanout_server_cpu_ms_per_move=_rounded(moves_cpu.get("server")),
        fanout_client_cpu_ms_per_move=_rounded(moves_cpu.get("client")),
    )
    return out


async def drive(urls: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Games at once (``args.concurrency`` lanes, lane i on ``urls[i % len(urls)]``)."""
    stats = LoadStats()
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.max_seconds
    remaining = args.games
    started = time.perf_counter()

    async def lane(url: str) -> None:
        nonlocal remaining
        while remaining > 0 and time.monotonic() < deadline:
            remaining -= 1
            game_rng, think_s = random.Random(rng.random()), args.think_ms / 1000
            if args.ai is None:
                game = play_one(url, args.game, args.codec, game_rng, stats, think_s)
            else:
                game = play_ai(url, args.game, args.ai, args.codec, game_rng, stats, think_s)
            try:
                await asyncio.wait_for(game, timeout=max(1.0, deadline - time.monotonic()))
            except (TimeoutError, ConnectionError, OSError, ServerError) as exc:
                stats.count_error(exc)  # counted, and the bench goes on

    lanes = range(max(1, args.concurrency))
    await asyncio.gather(*(lane(urls[i % len(urls)]) for i in lanes))
    seconds = time.perf_counter() - started
    out = stats.summary(seconds)
    out.update(game=args.game, concurrency=args.concurrency, codec=args.codec)
    out.update(think_ms=args.think_ms)
    per_game = 2 if args.ai is None else 1  # the AI needs no connection
    out.update(connections=per_game * max(1, min(args.concurrency, args.games)))
    out.update(spectators=0, fanout_ms=None, rss_bytes_per_connection=None)
    out.update(ai_level=args.ai)
    if args.ai is not None:
        out.update(
            ai_moves=stats.ai_moves,
            human_moves=stats.moves - stats.ai_moves,
            ai_moves_per_s=round(stats.ai_moves / seconds, 1) if seconds else 0.0,
            ai_reply_ms=percentiles(stats.ai_reply_ms),
        )
    return out


async def measure(
    urls: list[str], args: argparse.Namespace, pid: int | None = None
) -> dict[str, Any]:
    """The bench asked for, on ``urls`` (``pid``: the private server's process)."""
    if not args.spectators:
        return await drive(urls, args)
    try:
        return await asyncio.wait_for(drive_spectators(urls, args, pid), args.max_seconds)
    except (TimeoutError, ConnectionError, OSError, ServerError) as exc:
        stats = LoadStats()
        stats.count_error(exc)
        out = stats.summary(0.0)
        out.update(game=args.game, concurrency=1, codec=args.codec, spectators=args.spectators)
        out.update(spectator_procs=args.spectator_procs)
        out.update(connections=0, fanout_ms=None, rss_bytes_per_connection=None)
        return out


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.nodes <= MAX_NODES:
        print(f"kibitz bench load: --nodes must be 1-{MAX_NODES}", file=sys.stderr)
        return 2
    if args.url and (args.nodes != 1 or args.pin or args.cpu_limit is not None):
        print("kibitz bench load: --nodes, --pin and --cpu-limit start a private cluster; "
              "not with --url", file=sys.stderr)  # fmt: skip
        return 2
    problem = _private_store_problem(args)
    if problem:
        print(f"kibitz bench load: {problem}", file=sys.stderr)
        return 2
    for flag, cores in (("--cpu-limit", args.cpu_limit), ("--redis-cpu-limit",
                                                          args.redis_cpu_limit)):  # fmt: skip
        if cores is None:
            continue
        try:
            quota_us(cores)
            find_controller()
        except (ValueError, CpuLimitError) as exc:
            print(f"kibitz bench load: {flag}: {exc}", file=sys.stderr)
            return 2
    if not 0 <= args.spectators <= MAX_SPECTATORS:
        print(f"kibitz bench load: --spectators must be 0-{MAX_SPECTATORS}", file=sys.stderr)
        return 2
    if not 0 <= args.think_ms <= MAX_THINK_MS or (args.think_ms and args.spectators):
        print(f"kibitz bench load: --think-ms must be 0-{MAX_THINK_MS:g}, and is for games "
              "without --spectators", file=sys.stderr)  # fmt: skip
        return 2
    if not 1 <= args.spectator_procs <= MAX_PROCS:
        print(f"kibitz bench load: --spectator-procs must be 1-{MAX_PROCS}", file=sys.stderr)
        return 2
    if args.ai is not None and (not 1 <= args.ai <= MAX_AI_LEVEL or args.spectators):
        print(f"kibitz bench load: --ai must be 1-{MAX_AI_LEVEL}, and is for games without "
              "--spectators", file=sys.stderr)  # fmt: skip
        return 2
    if args.ai_workers is not None and (
        args.ai is None or args.url or not 1 <= args.ai_workers <= MAX_AI_WORKERS
    ):
        print(f"kibitz bench load: --ai-workers must be 1-{MAX_AI_WORKERS}, and is for --ai "
              "on the private server (not with --url)", file=sys.stderr)  # fmt: skip
        return 2
    load_average = round(os.getloadavg()[0], 2)  # the machine's, as the run starts
    if args.url:
        for url in args.url:
            host = urlparse(url).hostname or ""
            if not args.allow_remote and host not in ("127.0.0.1", "localhost", "::1"):
                print("kibitz bench load: --url must be a loopback address", file=sys.stderr)
                return 2
        result = asyncio.run(measure(args.url, args))
    else:
        result = _with_private_server(args)
    result.setdefault("server_cpu_ms_per_move", None)  # known only for a private server
    result["load_average"] = load_average
    if args.json:
        print(json.dumps(result))
    else:
        lat = result["latency_ms"]
        print(
            f"{result['games']} games, {result['moves']} moves in {result['seconds']} s "
            f"({result['moves_per_s']} moves/s, {result['concurrency']} games at once, "
            f"{result['errors']} errors)"
        )
        seen = "opponent sees it" if result.get("ai_level") is None else "its client has it"
        print(
            f"move -> {seen}: p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
            f"p99 {lat['p99']} ms, max {lat['max']} ms"
        )
        if result.get("ai_level") is not None:
            reply = result["ai_reply_ms"]
            print(
                f"against the AI at level {result['ai_level']}: {result['ai_moves']} of the "
                f"moves were the AI's ({result['ai_moves_per_s']}/s); move -> the AI's reply: "
                f"p50 {reply['p50']} ms, p99 {reply['p99']} ms, max {reply['max']} ms"
            )
        if result["fanout_ms"]:
            fan = result["fanout_ms"]
            print(
                f"move -> last of {result['spectators']} spectators "
                f"({result['spectator_procs']} processes) sees it: p50 {fan['p50']} ms, "
                f"p99 {fan['p99']} ms, max {fan['max']} ms"
            )
        if result["rss_bytes_per_connection"] is not None:
            print(f"server memory per idle connection: {result['rss_bytes_per_connection']} B")
        if result["server_cpu_ms_per_move"] is not None:
            print(f"server CPU per move: {result['server_cpu_ms_per_move']} ms")
        if result.get("redis_cpu_ms_per_move_per_primary"):
            print(
                f"{result['redis']} Redis, {result['redis_primaries']} primaries (CPU limit "
                f"{result['redis_cpu_limit']} cores each): CPU per move "
                f"{result['redis_cpu_ms_per_move_per_primary']} ms, busy "
                f"{result.get('redis_cores')} cores ({result.get('redis_idle_cores')} with the "
                f"nodes idle), throttled in {result.get('redis_throttled')} of the periods; "
                f"nodes busy {result.get('node_cores')} cores"
            )
        if result.get("redis_control_primary") is not None:
            print(
                f"the control slot is on primary {result['redis_control_primary']}: its own "
                f"CPU per move about {result.get('redis_control_slot_cpu_ms_per_move')} ms "
                f"(per AI move {result.get('redis_control_slot_cpu_ms_per_ai_move')} ms)"
            )
        if result.get("fanout_server_cpu_ms_per_move") is not None:
            print(
                f"while the moves fan out (spectators' connections not counted): server "
                f"{result['fanout_server_cpu_ms_per_move']} ms, bench clients "
                f"{result['fanout_client_cpu_ms_per_move']} ms of CPU per move"
            )
        # The last line is always JSON (the figures issue 10 asks for).
        print(json.dumps({key: result.get(key) for key in SUMMARY_KEYS}))
    return 0 if result["errors"] == 0 else 1


def _metric(url: str, name: str) -> float:
    """A gauge or counter from a node's ``/metrics`` (0 when absent)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return 0.0


def _private_store_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the private store's flags, if anything."""
    if args.url and (
        args.redis_cluster is not None or args.redis_replicas or args.redis_cpu_limit is not None
    ):
        return ("--redis-cluster, --redis-replicas, --redis-groups and --redis-cpu-limit start "
                "a private store; not with --url")  # fmt: skip
    if args.redis_cluster is not None and not 1 <= args.redis_cluster <= MAX_PRIMARIES:
        return f"--redis-cluster must be 1-{MAX_PRIMARIES}"
    if args.redis_replicas and args.redis_cluster is None:
        return "--redis-replicas is for a --redis-cluster"
    if args.redis_groups is not None:
        from kibitz.shared.bus import keys

        if args.redis_cluster is None or not 1 <= args.redis_groups <= keys.MAX_GROUPS:
            return f"--redis-groups is 1-{keys.MAX_GROUPS}, for a --redis-cluster"
    return None


@dataclass
class PrivateStore:
    """The private Redis the bench's nodes share: one redis-server or a Redis Cluster."""

    kind: str  # "single" or "cluster"
    url: str
    primary_pids: list[int]
    replica_pids: list[int] = field(default_factory=list)
    #: On a cluster: how many of the key layout's slot groups each primary serves, and
    #: which primary (an index into primary_pids) serves the control slot.
    groups_per_primary: list[int] | None = None
    control_primary: int | None = None

    def node_args(self) -> tuple[list[str], dict[str, str]]:
        """The arguments and environment that put a ``kibitz serve`` node on the store:
        ``--redis URL`` for one Redis (as always), ``KIBITZ_REDIS_URL`` for a cluster."""
        if self.kind == "single":
            return ["--redis", self.url], {}
        return [], {"KIBITZ_REDIS_URL": self.url}


def bench_cluster(
    data_dir: Path,
    primaries: int,
    replicas: int = 0,
    place_pid: Any = None,
    node_timeout_ms: int = BENCH_NODE_TIMEOUT_MS,
) -> EmbeddedCluster:
    """An :class:`EmbeddedCluster` of ``primaries`` primaries with ``replicas`` replicas
    each (not started): exactly ``primaries * (1 + replicas)`` redis-servers."""
    from kibitz.shared.bus.embedded_cluster import EmbeddedCluster

    return EmbeddedCluster(
        data_dir,
        primaries=primaries,
        replicas_per_primary=replicas,
        node_timeout_ms=node_timeout_ms,
        persist=False,
        place_pid=place_pid,
    )


@contextlib.contextmanager
def private_store(
    data_dir: Path,
    primaries: int | None = None,
    replicas: int = 0,
    limits: CpuLimits | None = None,
    groups: int | None = None,
) -> Iterator[PrivateStore]:
    """The bench's private store for the ``with`` block: one Redis (``primaries`` None,
    the baseline) or a Redis Cluster of ``primaries`` primaries (its URL naming ``groups``
    slot groups if given), every redis-server in a control group of its own from
    ``limits`` when given; stopped at the end."""
    if primaries is None:
        from kibitz.shared.bus.embedded import EmbeddedRedis

        with EmbeddedRedis(data_dir, persist=False) as redis:
            assert redis.process is not None
            if limits is not None:
                limits.limit(redis.process.pid)
            yield PrivateStore("single", redis.url, [redis.process.pid])
        return
    from kibitz.shared.bus import keys

    cluster = bench_cluster(
        data_dir / "redis-cluster", primaries, replicas, limits.limit if limits else None
    )
    with cluster:
        nodes = cluster.primaries()
        owners = [
            nodes.index(cluster.node_for_key(keys.group_tag(g)))
            for g in range(groups or keys.DEFAULT_GROUPS)
        ]
        control = nodes.index(cluster.node_for_key("{c}"))
        yield PrivateStore(
            "cluster",
            cluster.url + (f"/?groups={groups}" if groups else ""),
            [node.pid for node in nodes if node.pid is not None],
            [node.pid for node in cluster.replicas() if node.pid is not None],
            groups_per_primary=[owners.count(i) for i in range(len(nodes))],
            control_primary=control,
        )


def _throttled(limits: CpuLimits | None, pids: list[int]) -> list[tuple[int, int]] | None:
    """Each capped process's (periods, throttled periods) so far; None if any is unknown."""
    if limits is None:
        return None
    readings = [limits.throttled(pid) for pid in pids]
    known = [reading for reading in readings if reading is not None]
    return known if len(known) == len(pids) else None


def _cpu_used(pids: list[int]) -> list[float | None]:
    return [cpu_seconds(pid) for pid in pids]


def _spent(before: list[float | None], after: list[float | None]) -> list[float] | None:
    """CPU seconds each process used between two readings (None if one is unknown)."""
    spent = [b - a for a, b in zip(before, after, strict=True) if a is not None and b is not None]
    return spent if len(spent) == len(before) else None


def control_slot_seconds(
    primaries_s: list[float], groups_per_primary: list[int] | None, control: int
) -> float | None:
    """The control slot's own share of the CPU seconds of its primary, which also serves
    some of the groups: that primary's seconds less its groups' share, estimated as its
    groups times the other primaries' seconds per group (the rooms, many, spread evenly
    over the groups). None with one primary, where nothing tells the two apart."""
    if groups_per_primary is None:
        return None
    others = [i for i in range(len(primaries_s)) if i != control]
    other_groups = sum(groups_per_primary[i] for i in others)
    if not other_groups:
        return None
    per_group = sum(primaries_s[i] for i in others) / other_groups
    return max(0.0, primaries_s[control] - groups_per_primary[control] * per_group)


def _per(seconds: float | None, count: int) -> float | None:
    """``seconds`` in ms per one of ``count``, rounded (None if unknown)."""
    return None if seconds is None else round(seconds * 1000 / count, 3)


def store_fields(
    store: PrivateStore,
    args: argparse.Namespace,
    primaries_s: list[float] | None,
    replicas_s: list[float] | None,
    moves: int,
    seconds: float,
    ai_moves: int = 0,
) -> dict[str, Any]:
    """The summary's fields about the private store: its kind and shape, and the CPU its
    primaries (and replicas) used, per move (and per AI move, given ``ai_moves``) and as a
    share of a core over ``seconds``; on a cluster, the control primary's apart."""
    out: dict[str, Any] = {
        "redis": store.kind,
        "redis_primaries": len(store.primary_pids),
        # Counted from the cluster as started (not the option asked for): replicas per
        # primary, and every replica node.
        "redis_replicas": len(store.replica_pids) // max(1, len(store.primary_pids)),
        "redis_replica_nodes": len(store.replica_pids),
        "redis_cpu_limit": args.redis_cpu_limit,
    }
    if store.kind == "cluster":
        out["redis_groups_per_primary"] = store.groups_per_primary
        out["redis_control_primary"] = store.control_primary
    if primaries_s is not None and moves:
        everything = sum(primaries_s) + sum(replicas_s or [])
        out["redis_cpu_ms_per_move"] = round(everything * 1000 / moves, 3)
        out["redis_cpu_ms_per_move_per_primary"] = [round(s * 1000 / moves, 3) for s in primaries_s]
    if primaries_s is not None and store.control_primary is not None and moves:
        slot_s = control_slot_seconds(primaries_s, store.groups_per_primary, store.control_primary)
        out["redis_control_cpu_ms_per_move"] = round(
            primaries_s[store.control_primary] * 1000 / moves, 3
        )
        out["redis_control_slot_cpu_ms_per_move"] = _per(slot_s, moves)
        if ai_moves:
            out["redis_control_slot_cpu_ms_per_ai_move"] = _per(slot_s, ai_moves)
    if primaries_s is not None and ai_moves:
        out["redis_cpu_ms_per_ai_move_per_primary"] = [_per(s, ai_moves) for s in primaries_s]
    if primaries_s is not None and seconds > 0:
        out["redis_cores"] = [round(s / seconds, 3) for s in primaries_s]
        if replicas_s:
            out["redis_replica_cores"] = [round(s / seconds, 3) for s in replicas_s]
    return out


def _with_private_server(args: argparse.Namespace) -> dict[str, Any]:
    """The bench on a private cluster: ``args.nodes`` nodes on one private store (one
    Redis, or a Redis Cluster of ``args.redis_cluster`` primaries)."""
    from kibitz.server.cli.serve import spawn_server

    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        limits = None if args.cpu_limit is None else stack.enter_context(CpuLimits(args.cpu_limit))
        redis_limits = (
            None
            if args.redis_cpu_limit is None
            else stack.enter_context(CpuLimits(args.redis_cpu_limit))
        )
        store = stack.enter_context(
            private_store(
                Path(tmp), args.redis_cluster, args.redis_replicas, redis_limits, args.redis_groups
            )
        )
        store_args, store_env = store.node_args()
        # All the bench's clients share one loopback address: lift the per-address limits.
        unlimited = ["--max-connections-per-address", "1000000", "--max-creates-per-minute",
                     "1000000", "--max-ai-games-per-address", "1000000"]  # fmt: skip
        procs: list[subprocess.Popen[str]] = []
        workers: WorkerPool | None = None
        try:
            urls = []
            cpus = sorted(os.sched_getaffinity(0))
            for i in range(args.nodes):
                proc, url, _ = spawn_server(
                    ["--host", "127.0.0.1", "--port", "0", *store_args,
                     "--workers", "0", "--data-dir", tmp, *unlimited],
                    env=store_env,
                )  # fmt: skip
                procs.append(proc)
                urls.append(url)
                threading.Thread(
                    target=lambda p=proc: [None for _ in p.stdout or []], daemon=True
                ).start()
                if args.pin:
                    os.sched_setaffinity(proc.pid, {cpus[i % len(cpus)]})
                if limits is not None:
                    limits.limit(proc.pid)
            pids = [proc.pid for proc in procs]
            if args.ai is not None:
                # Beside the nodes rather than under them (kibitz serve --workers), so that
                # their CPU is read apart from the nodes'; counted in before the games.
                from kibitz.benchmarks.faults import WorkerPool

                workers = WorkerPool(store.url, args.ai_workers or DEFAULT_AI_WORKERS)
                workers.wait_ready()
            worker_pids = [proc.pid for proc in workers.procs.values()] if workers else []
            # Redis's CPU with the nodes idle (their heartbeats, sweeps and probes): the
            # part of the figures below that is not the moves'.
            # Read when the store is the subject (a cluster, or Redis capped).
            idle_spent = nodes_idle_spent = None
            idle_window = IDLE_SECONDS
            if args.redis_cluster is not None or args.redis_cpu_limit is not None:
                idle_before, idle_started = _cpu_used(store.primary_pids), time.perf_counter()
                nodes_idle_before = _cpu_used(pids)
                time.sleep(IDLE_SECONDS)
                idle_spent = _spent(idle_before, _cpu_used(store.primary_pids))
                nodes_idle_spent = _spent(nodes_idle_before, _cpu_used(pids))
                idle_window = time.perf_counter() - idle_started
            cpu_before = _cpu_used(pids)
            workers_before = _cpu_used(worker_pids)
            throttled_before = _throttled(redis_limits, store.primary_pids)
            redis_before = _cpu_used(store.primary_pids)
            replicas_before = _cpu_used(store.replica_pids)
            window_started = time.perf_counter()
            # Memory per connection is measured on a single node only.
            client_before = time.process_time() + _childrencpu_seconds()
            result = asyncio.run(measure(urls, args, pids[0] if len(pids) == 1 else None))
            # This bench's clients: its own process and its spectators' (ended and waited
            # for by now; the nodes and Redis are not waited for until later).
            client_cpu = time.process_time() + _childrencpu_seconds() - client_before
            time.sleep(0.5)  # the server finishes with the closed connections: that counts
            cpu_after = _cpu_used(pids)
            workers_spent = _spent(workers_before, _cpu_used(worker_pids))
            redis_spent = _spent(redis_before, _cpu_used(store.primary_pids))
            throttled_after = _throttled(redis_limits, store.primary_pids)
            replicas_spent = _spent(replicas_before, _cpu_used(store.replica_pids))
            window = time.perf_counter() - window_started
            result["nodes"] = args.nodes
            result["cpu_limit"] = args.cpu_limit
            # Room updates the nodes' listeners decoded, per move: about 1 when each room's
            # players share a node (a node hears only the rooms it serves), N if every node
            # heard every room.
            try:
                heard = sum(_metric(url, "kibitz_fanout_room_messages") for url in urls)
            except OSError:  # a node that no longer answers: the figure is unknown
                heard = None
            if heard is not None and result["moves"]:
                result["room_messages_per_move"] = round(heard / result["moves"], 2)
            spent = _spent(cpu_before, cpu_after)
            if spent is not None and result["moves"]:
                result["server_cpu_ms_per_move"] = round(sum(spent) * 1000 / result["moves"], 3)
                result["server_cpu_s"] = round(sum(spent), 2)
            if spent is not None and window > 0:
                result["node_cores"] = [round(s / window, 3) for s in spent]
            if result["moves"]:
                result["client_cpu_ms_per_move"] = round(client_cpu * 1000 / result["moves"], 3)
            ai_moves = result.get("ai_moves", 0)
            if workers is not None:
                result["ai_workers"] = len(worker_pids)
                if workers_spent is not None and ai_moves:
                    per_ai_move = sum(workers_spent) * 1000 / ai_moves
                    result["worker_cpu_ms_per_ai_move"] = round(per_ai_move, 3)
                if workers_spent is not None and window > 0:
                    result["worker_cores"] = [round(s / window, 3) for s in workers_spent]
            result.update(
                store_fields(
                    store, args, redis_spent, replicas_spent, result["moves"], window, ai_moves
                )
            )
            if idle_spent is not None:
                result["redis_idle_cores"] = [round(s / idle_window, 3) for s in idle_spent]
            if nodes_idle_spent is not None:
                result["node_idle_cores"] = [round(s / idle_window, 3) for s in nodes_idle_spent]
            if throttled_before is not None and throttled_after is not None:
                # The share of the quota's periods in which each primary used all its quota
                # and had to wait: near 1 when Redis is the limit.
                result["redis_throttled"] = [
                    round((t1 - t0) / (p1 - p0), 3) if p1 > p0 else 0.0
                    for (p0, t0), (p1, t1) in zip(throttled_before, throttled_after, strict=True)
                ]
            return result
        finally:
            if workers is not None:
                workers.stop()
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:  # still closing sockets: the bench is done
                    proc.kill()
                    proc.wait()
