"""``kibitz bench analysis``: how long the worker pool takes to analyse a finished game.

On a private Redis and a private ``kibitz serve --workers N`` (SQLite in a temporary
directory): two players play a chess game of ``--plies`` random legal moves (seeded; no
move that ends the game), one resigns, then ``POST /api/games/{id}/analysis`` and poll
``GET`` until the analysis is stored. Prints the seconds from the POST to the stored
analysis, and a last JSON line. It also probes what the analysis costs live games: the
time from creating a tic-tac-toe game against AI level 1 (which moves first) to the AI's
move, ``--probes`` times before the analysis (idle workers) and as many while it runs.
Bounded: the game has a fixed length and the wait a deadline (``--max-seconds``).
``--engine chess=/usr/games/stockfish`` has the workers analyse with that UCI engine.
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

import aiohttp
import chess

from kibitz.client.connection import KibitzClient, newer_than


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("analysis", help="a finished chess game analysed by workers")
    parser.add_argument("--plies", type=int, default=120, help="game length (default 120)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--probes", type=int, default=5, help="live AI moves timed (default 5)")
    parser.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="GAME=COMMAND",
        help="the workers analyse with this UCI engine (as `kibitz serve --engine`)",
    )
    parser.set_defaults(func=run)


def random_game(plies: int, seed: int) -> list[str]:
    """``plies`` random legal moves (UCI) from the start, none of them ending the game."""
    rng = random.Random(seed)
    for _attempt in range(1000):
        board = chess.Board()
        moves: list[str] = []
        while len(moves) < plies:
            choices = [m for m in board.legal_moves if not _ends(board, m)]
            if not choices:
                break
            move = rng.choice(choices)
            board.push(move)
            moves.append(move.uci())
        if len(moves) == plies:
            return moves
    raise RuntimeError("no game of that length found")


def _ends(board: chess.Board, move: chess.Move) -> bool:
    board.push(move)
    try:
        return board.is_game_over(claim_draw=True)
    finally:
        board.pop()


async def ai_reply_ms(url: str) -> float:
    """Milliseconds from creating a game whose AI moves first to the AI's move."""
    async with await KibitzClient.open(url) as client:
        started = time.monotonic()
        room = (await client.create("tictactoe", "ai:1", seat=1))["room"]
        await client.wait_state(room, lambda s: len(s["moves"]) >= 1, timeout=30)
        elapsed = (time.monotonic() - started) * 1000
        await client.resign(room)
        return elapsed


def _summary(samples: list[float]) -> dict[str, float] | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return {"median_ms": round(ordered[len(ordered) // 2], 1), "max_ms": round(ordered[-1], 1)}


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    moves = random_game(args.plies, args.seed)
    async with await KibitzClient.open(url) as a, await KibitzClient.open(url) as b:
        room = (await a.create("chess", seat=0))["room"]
        await b.join(room)
        for version, move in enumerate(moves, start=1):
            mover = a if version % 2 else b
            await mover.move(room, move, version)
            await mover.wait_state(room, newer_than(version))
        await a.resign(room)
        await a.wait_state(room, lambda s: s["status"] == "over")
    await ai_reply_ms(url)  # warm-up: each worker's first job loads the search modules
    await ai_reply_ms(url)
    idle = [await ai_reply_ms(url) for _ in range(args.probes)]
    during: list[float] = []
    endpoint = f"{url}/api/games/{room}/analysis"
    async with aiohttp.ClientSession() as session:
        started = time.monotonic()
        async with session.post(endpoint) as resp:
            assert resp.status == 202, await resp.text()
        body: dict[str, Any] = {}
        while time.monotonic() - started < args.max_seconds:
            async with session.get(endpoint) as resp:
                body = await resp.json()
            if body.get("status") in ("done", "failed"):
                break
            if len(during) < args.probes and time.monotonic() - started > 2 * (len(during) + 1):
                during.append(await ai_reply_ms(url))  # workers busy with the analysis
            await asyncio.sleep(0.2)
        seconds = time.monotonic() - started
    return {
        "bench": "analysis",
        "plies": args.plies,
        "positions": body.get("progress", {}).get("total"),
        "workers": args.workers,
        "status": body.get("status"),
        "seconds": round(seconds, 1),
        "engines": body.get("engines"),
        "accuracy": body.get("accuracy"),
        "live_ai_move_idle": _summary(idle),
        "live_ai_move_during_analysis": _summary(during),
    }


def run(args: argparse.Namespace) -> int:
    from kibitz.server.cli.serve import served
    from kibitz.shared.bus.embedded import EmbeddedRedis

    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedRedis(Path(tmp) / "redis", persist=False) as redis,
    ):
        with served(
            ["--port", "0", "--redis", redis.url, "--workers", str(args.workers),
             "--data-dir", tmp, "--database", f"sqlite:///{Path(tmp) / 'games.sqlite3'}",
             *[arg for spec in args.engine for arg in ("--engine", spec)]]
        ) as url:  # fmt: skip
            result = asyncio.run(measure(url, args))
    print(
        f"{result['positions']} positions analysed by {result['workers']} workers in "
        f"{result['seconds']} s ({result['status']}); a live AI move took "
        f"{result['live_ai_move_idle']} with idle workers, "
        f"{result['live_ai_move_during_analysis']} during the analysis"
    )
    print(json.dumps(result))
    return 0 if result["status"] == "done" else 1
