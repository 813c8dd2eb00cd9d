"""``kibitz bench archive``: games played, archived, and gone from Redis.

For each database (SQLite in a temporary directory; PostgreSQL given with ``--database``
or, if it is installed, a throwaway local one started like the tests do), on a private
Redis and a private ``kibitz serve`` with a short ``--finished-ttl``:

1. warm up (a round of games, so the node's connection pool and scripts are in place),
   wait for their rooms to expire and take Redis ``used_memory`` as the baseline;
2. play ``--games`` human-vs-human tic-tac-toe games over WebSockets, ``--concurrency``
   at a time, sampling ``used_memory`` (the peak is "during");
3. time until every game is in the database: end to end, games/s played and archived,
   and how far the archive lagged behind the last game's end;
4. time the database alone: ``Archive.save`` of as many real records, one after another
   (what one archiver can write);
5. wait for the rooms' keys to expire and report ``used_memory`` again; it must come
   back to within 5% of the baseline.

The last line is JSON. Bounded: a fixed number of games, and every wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from kibitz.client.connection import KibitzClient, newer_than
from kibitz.shared.bus.stats import ServerStats

FINISHED_TTL_S = 2.0
MEMORY_TOLERANCE = 0.05
SETTLE_TIMEOUT_S = 60.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "archive", help="finished games into the database: games/s, Redis memory after"
    )
    parser.add_argument("--games", type=int, default=300, help="games to play per database")
    parser.add_argument("--concurrency", type=int, default=20, help="games at once")
    parser.add_argument(
        "--database", metavar="URL", help="a PostgreSQL URL (default: start a local one)"
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(func=run)


async def play_game(url: str, seed: int) -> None:
    """Two players, random legal moves, to the end."""
    rng = random.Random(seed)
    async with await KibitzClient.open(url) as a, await KibitzClient.open(url) as b:
        room = (await a.create("tictactoe", seat=0))["room"]
        await b.join(room)
        players = {0: a, 1: b}
        state = await a.wait_state(room, lambda s: s["status"] != "waiting")
        while state["status"] != "over":
            await players[state["to_move"]].move(
                room, rng.choice(state["legal_moves"]), state["version"]
            )
            state = await a.wait_state(room, newer_than(int(state["version"])))


async def play(url: str, games: int, concurrency: int, first_seed: int) -> None:
    seeds = iter(range(first_seed, first_seed + games))

    async def lane() -> None:
        for seed in seeds:
            await play_game(url, seed)

    await asyncio.gather(*(lane() for _ in range(min(concurrency, games))))


async def archived(engine: Any) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(sa.text("SELECT count(*) FROM games"))).scalar_one())


async def wait_for(check: Any, what: str, timeout: float = SETTLE_TIMEOUT_S) -> float:
    """Poll ``check()`` until true; the seconds it took."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def settle(stats: ServerStats) -> int:
    """Wait until no room key is left; the memory then (the smallest of a few samples:
    the allocator's figure wobbles by a few kilobytes)."""
    await wait_for(lambda: _no_rooms(stats), "the rooms' expiry")
    samples = []
    for _ in range(5):
        await asyncio.sleep(0.2)
        samples.append(await stats.used_memory())
    return min(samples)


async def _no_rooms(stats: ServerStats) -> bool:
    return await stats.room_keys() == 0


async def measure(
    url: str, redis_url: str, database: str, args: argparse.Namespace
) -> dict[str, Any]:
    from kibitz.server.archive.database import Archive

    stats = ServerStats(redis_url)
    archive = await Archive.open(database)
    try:
        await play(url, args.concurrency, args.concurrency, 0)
        warm = args.concurrency
        await wait_for(lambda: _count_is(archive, warm), "the warm-up games' archiving")
        baseline = await settle(stats)

        peak = baseline
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, await stats.used_memory())
                await asyncio.sleep(0.1)

        sampler = asyncio.create_task(sample())
        start = time.monotonic()
        await play(url, args.games, args.concurrency, 1000)
        played_s = time.monotonic() - start
        total = warm + args.games
        lag_s = await wait_for(lambda: _count_is(archive, total), "archiving every game")
        archived_s = time.monotonic() - start
        sampling = False
        await sampler

        # The database alone: the same records again under new ids, one at a time.
        page = await archive.list(limit=100)
        records = page.records
        save_start = time.monotonic()
        for i in range(args.games):
            await archive.save({**records[i % len(records)], "id": f"bench{i:08d}"})
        save_s = time.monotonic() - save_start

        after = await settle(stats)
        return {
            "database": archive.engine.dialect.name,
            "games": args.games,
            "concurrency": args.concurrency,
            "played_games_per_s": round(args.games / played_s, 1),
            "archived_games_per_s": round(args.games / archived_s, 1),
            "archive_lag_s": round(lag_s, 3),
            "save_per_s": round(args.games / save_s, 1),
            "redis_used_memory": {
                "baseline": baseline,
                "peak_during": peak,
                "after": after,
                "after_vs_baseline_pct": round(100 * (after - baseline) / baseline, 2),
            },
            "memory_back_to_baseline": abs(after - baseline) <= MEMORY_TOLERANCE * baseline,
        }
    finally:
        await archive.close()
        await stats.aclose()


async def _count_is(archive: Any, n: int) -> bool:
    return await archived(archive.engine) >= n


def bench_database(database: str, args: argparse.Namespace) -> dict[str, Any]:
    """A private Redis and node archiving into ``database``; the figures."""
    from kibitz.server.cli.serve import served
    from kibitz.shared.bus.embedded import EmbeddedRedis

    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedRedis(Path(tmp) / "redis", persist=False) as redis,
    ):
        unlimited = ["--max-connections-per-address", "1000000", "--max-creates-per-minute",
                     "1000000", "--max-ai-games-per-address", "1000000"]  # fmt: skip
        with served(
            ["--port", "0", "--redis", redis.url, "--workers", "0", "--data-dir", tmp,
             "--database", database, "--finished-ttl", str(FINISHED_TTL_S), *unlimited]
        ) as url:  # fmt: skip
            return asyncio.run(measure(url, redis.url, database, args))


def run(args: argparse.Namespace) -> int:
    from kibitz.benchmarks.local_postgres import LocalPostgres, find_pg_bin

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(bench_database(f"sqlite:///{Path(tmp) / 'games.sqlite3'}", args))
    if args.database:
        results.append(bench_database(args.database, args))
    elif not args.no_postgres and find_pg_bin() is not None:
        with LocalPostgres() as postgres:
            results.append(bench_database(postgres.create_database("bench"), args))
    if not args.json:
        for row in results:
            memory = row["redis_used_memory"]
            print(
                f"{row['database']:10} {row['games']} games ({row['concurrency']} at once): "
                f"played {row['played_games_per_s']}/s, played and archived "
                f"{row['archived_games_per_s']}/s (archive {row['archive_lag_s']} s behind "
                f"the last game), database alone {row['save_per_s']} saves/s; Redis "
                f"used_memory {memory['baseline']} before, peak {memory['peak_during']}, "
                f"{memory['after']} after ({memory['after_vs_baseline_pct']:+}%)"
            )
    ok = all(row["memory_back_to_baseline"] for row in results)
    print(json.dumps({"bench": "archive", "results": results, "ok": ok}))
    return 0 if ok else 1
