"""``kibitz bench streams``: what open event streams (``GET /api/stream/event``) cost a node.

(Also ``python -m kibitz.benchmarks.streams [--streams N | --game-streams N] [--idle-s S]
[--max-kb K]``.)

A private Redis and one ``kibitz serve`` node on loopback, its database prepared
beforehand with enough accounts and ``play`` tokens (one stream per token: a second
stream of a token closes the first). This process opens ``--streams`` event streams
over real HTTP connections (one aiohttp session, one connection each), holds them open
and measures the node process from /proc:

- its resident memory (VmRSS) with the first 50 streams open (every stream's code paths,
  pools and buffers warm), then with all of them: the difference per stream added, in KB;
- its CPU time over ``--idle-s`` seconds with the streams open and nothing happening
  (each stream gets a keep-alive line every 6 s, and the node beats the online set),
  against the same span before they were opened: the streams' idle cost.

It checks every stream answered 200 and got its keep-alive lines (read as they come),
then prints one line per figure and, last, JSON: ``{"bench": "streams", "streams",
"rss_before_kb", "rss_after_kb", "per_stream_kb", "cpu_idle_base_pct",
"cpu_idle_streams_pct", "keepalives", "ok"}``; ``ok``: at most ``--max-kb`` per stream.

With ``--game-streams N`` it measures game streams (``GET /api/board/game/stream/{id}``)
instead, the same way: the database is given accounts with one ``play`` token each
(GAME_STREAMS_PER_ACCOUNT streams an account, under its 60 a minute), seated in pairs in
chess rooms over the WebSocket (each room made and joined with the two tokens, then the
sockets closed), and each account opens its streams on its own room: every stream is a
follower of its room's hub (server/botapi/games.py), served by aiohttp. The JSON's
``bench`` is then ``game-streams`` (``--max-kb`` defaults to 100 there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp

from kibitz.server.botapi.events import KEEPALIVE_S

#: An account makes at most this many tokens a day (server/accounts/tokens.py).
TOKENS_PER_ACCOUNT = 20
#: Handshakes under way at once, and the streams opened before measuring: as many, so
#: that whatever a burst of handshakes grows once (the database's and Redis's pools) has
#: grown before the measure.
AT_ONCE = WARM_STREAMS = 50
#: Game streams one account opens (an account opens at most 60 a minute).
GAME_STREAMS_PER_ACCOUNT = 20
EVENT_PATH = "/api/stream/event"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "streams",
        help="memory and idle CPU of 1,000 open event streams of the Bot API on one node",
    )
    parser.add_argument(
        "--streams", type=int, default=1000, help="event streams to open (more than 50)"
    )
    parser.add_argument(
        "--idle-s", type=float, default=30.0, help="how long CPU is measured (each span)"
    )
    parser.add_argument(
        "--max-kb",
        type=float,
        default=None,
        help="the bound per stream (default: 10, or 100 with --game-streams)",
    )
    parser.add_argument(
        "--game-streams", type=int, default=0,
        help="measure this many game streams (more than 50) instead of event streams",
    )  # fmt: skip
    parser.set_defaults(func=run)


def rss_kb(pid: int) -> int:
    """The process's resident memory (VmRSS), in KB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu_pct(pid: int, seconds: float) -> float:
    """The process's CPU use over ``seconds`` of waiting here, in % of one core."""
    start, began = cpu_s(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return round(100 * (cpu_s(pid) - start) / (time.monotonic() - began), 2)


async def make_tokens(database_url: str, count: int) -> list[str]:
    """``count`` ``play`` tokens of fresh accounts (TOKENS_PER_ACCOUNT each), written
    straight into the node's database before it starts."""
    from kibitz.server.accounts.service import AccountService
    from kibitz.server.archive.database import Archive

    archive = await Archive.open(database_url)
    try:
        service = AccountService(archive.engine)
        tokens: list[str] = []
        while len(tokens) < count:
            account = await service.create("s" + uuid.uuid4().hex[:12], None)
            for _ in range(min(TOKENS_PER_ACCOUNT, count - len(tokens))):
                secret, _listed = await service.tokens.create(account, "bench", ("play",))
                tokens.append(secret)
        return tokens
    finally:
        await archive.close()


async def make_players(database_url: str, count: int) -> list[str]:
    """One ``play`` token each of ``count`` fresh accounts, written straight into the
    node's database before it starts."""
    from kibitz.server.accounts.service import AccountService
    from kibitz.server.archive.database import Archive

    archive = await Archive.open(database_url)
    try:
        service = AccountService(archive.engine)
        tokens: list[str] = []
        for _ in range(count):
            account = await service.create("g" + uuid.uuid4().hex[:12], None)
            tokens.append((await service.tokens.create(account, "bench", ("play",)))[0])
        return tokens
    finally:
        await archive.close()


async def seat_pairs(url: str, tokens: list[str]) -> list[tuple[str, str]]:
    """Seat the accounts of ``tokens`` two by two in chess rooms over the WebSocket (the
    first creates, the second joins; then both sockets close): ``(token, room)`` each."""
    seated: list[tuple[str, str]] = []
    async with aiohttp.ClientSession() as session:
        for white, black in zip(tokens[::2], tokens[1::2], strict=True):
            sockets = [
                await session.ws_connect(url + "/ws", headers={"Authorization": f"Bearer {t}"})
                for t in (white, black)
            ]
            try:
                room = await _ask(sockets[0], type="create", game="chess", opponent="human", seat=0)
                await _ask(sockets[1], type="join", room=room)
            finally:
                for ws in sockets:
                    await ws.close()
            seated += [(white, room), (black, room)]
    return seated


async def _ask(ws: aiohttp.ClientWebSocketResponse, **message: Any) -> str:
    """Send ``message``; the room of its ``seat`` answer."""
    await ws.send_json({**message, "rid": 1})
    while True:
        reply = await asyncio.wait_for(ws.receive_json(), 30)
        if reply.get("type") == "error":
            raise RuntimeError(f"refused: {reply}")
        if reply.get("type") == "seat" and reply.get("rid") == 1:
            return str(reply["room"])


class Streams:
    """Event streams held open by this process, their keep-alive lines counted."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=True),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )
        self.readers: list[asyncio.Task[None]] = []
        self.keepalives = 0
        self.kept_alive = 0  # streams that got a keep-alive line
        self.ended = 0

    async def open(self, token: str, path: str = EVENT_PATH) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        response = await self.session.get(self.url + path, headers=headers)
        if response.status != 200:
            raise RuntimeError(f"stream refused: {response.status} {await response.text()}")
        self.readers.append(asyncio.create_task(self._read(response)))

    async def open_all(self, targets: list[tuple[str, str]], at_once: int = AT_ONCE) -> None:
        """A stream for each ``(token, path)``, ``at_once`` handshakes at a time."""
        for i in range(0, len(targets), at_once):
            await asyncio.gather(*(self.open(*target) for target in targets[i : i + at_once]))

    async def _read(self, response: aiohttp.ClientResponse) -> None:
        first = True
        try:
            while line := await response.content.readline():
                if line == b"\n":
                    self.keepalives += 1
                    self.kept_alive += first
                    first = False
        except (aiohttp.ClientError, RuntimeError):  # the connection went (aiohttp says so)
            pass
        finally:
            self.ended += 1
            response.close()

    async def close(self) -> None:
        for reader in self.readers:
            reader.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)
        await self.session.close()


async def measure(
    url: str, pid: int, tokens: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """Open ``args.streams`` streams (event streams, one a token; or, with
    ``args.game_streams``, game streams on the rooms of the accounts of ``tokens``):
    WARM_STREAMS first (the code paths, pools and buffers every stream uses), then the
    others, measured: the memory they add, and the CPU with and without them."""
    if args.game_streams:
        seated = await seat_pairs(url, tokens)
        targets = [
            (token, f"/api/board/game/stream/{room}")
            for token, room in seated for _ in range(GAME_STREAMS_PER_ACCOUNT)
        ][: args.streams]  # fmt: skip
    else:
        targets = [(token, EVENT_PATH) for token in tokens]
    streams = Streams(url)
    try:
        await streams.open_all(targets[:WARM_STREAMS])
        await asyncio.sleep(1.0)
        base_cpu = await idle_cpu_pct(pid, args.idle_s)
        before = rss_kb(pid)
        await streams.open_all(targets[WARM_STREAMS : args.streams])
        await asyncio.sleep(1.0)
        after = rss_kb(pid)
        streams_cpu = await idle_cpu_pct(pid, args.idle_s)
        deadline = time.monotonic() + KEEPALIVE_S + 1
        while streams.kept_alive < len(streams.readers) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # every stream has had its keep-alive line
        open_now = len(streams.readers) - streams.ended
    finally:
        await streams.close()
    per_stream = round((after - before) / (args.streams - WARM_STREAMS), 2)
    return {
        "bench": "game-streams" if args.game_streams else "streams",
        "streams": args.streams,
        "open_after_idle": open_now,
        "rss_before_kb": before,
        "rss_after_kb": after,
        "per_stream_kb": per_stream,
        "idle_s": args.idle_s,
        "cpu_idle_base_pct": base_cpu,
        "cpu_idle_streams_pct": streams_cpu,
        "keepalives": streams.keepalives,
        "kept_alive": streams.kept_alive,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "ok": per_stream <= args.max_kb and open_now == streams.kept_alive == args.streams,
    }


def run(args: argparse.Namespace) -> int:
    from kibitz.server.cli.serve import spawn_server
    from kibitz.shared.bus.embedded import EmbeddedRedis

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, max(soft, 2 * args.streams + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))  # the node inherits it
    if args.game_streams:
        args.streams = args.game_streams
        players = -(-args.streams // GAME_STREAMS_PER_ACCOUNT)
        players += players % 2  # seated two by two
    if args.max_kb is None:
        args.max_kb = 100.0 if args.game_streams else 10.0
    with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(tmp, persist=False) as redis:
        database = f"sqlite:///{Path(tmp) / 'games.sqlite3'}"
        if args.game_streams:
            tokens = asyncio.run(make_players(database, players))
        else:
            tokens = asyncio.run(make_tokens(database, args.streams))
        process, url, _output = spawn_server(
            ["--port", "0", "--redis", redis.url, "--workers", "0", "--data-dir", tmp,
             "--database", database, "--max-connections-per-address", "100000"]
        )  # fmt: skip
        stdout = process.stdout
        threading.Thread(target=lambda: [None for _ in stdout or []], daemon=True).start()
        try:
            result = asyncio.run(measure(url, process.pid, tokens, args))
        finally:
            process.terminate()
            process.wait(timeout=15)
    kind = "game" if args.game_streams else "event"
    print(
        f"{result['streams']} {kind} streams: RSS {result['rss_before_kb']} KB -> "
        f"{result['rss_after_kb']} KB, {result['per_stream_kb']} KB per stream"
    )
    print(
        f"CPU over {result['idle_s']:g} s idle: {result['cpu_idle_base_pct']}% with none, "
        f"{result['cpu_idle_streams_pct']}% with them open ({result['keepalives']} keep-alive "
        f"lines read); load average {result['load_avg']}"
    )
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def main() -> int:
    """``python -m kibitz.benchmarks.streams [--streams N | --game-streams N] [--idle-s S]``."""
    parser = argparse.ArgumentParser(prog="kibitz bench")
    register(parser.add_subparsers(dest="benchmark", required=True))
    args = parser.parse_args(["streams", *sys.argv[1:]])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
