"""The golden test: the server's bytes for a fixed sequence of games do not change.

A private ``kibitz serve`` (the session's Redis, no workers, its own SQLite archive,
finished rooms dropped from Redis 2 s after archiving) plays the scenarios of
tests/golden/scenarios.py over real WebSockets: every frame each client receives (welcome,
seat, state, chat, errors, pongs, left) and every HTTP answer (live records, exports,
positions, the room's record; then the archived record and exports read from the
database, and one player's list of games) is written as it arrived. After
:func:`~tests.golden.normalise.normalise` (random ids, times and clock readings only) each
transcript must equal its fixture, tests/golden/fixtures/NAME.txt, byte for byte.

The fixtures were made from the code as it is by::

    KIBITZ_GOLDEN_UPDATE=1 python3 -m pytest tests/golden -p no:cacheprovider

Rerun that only for an intended change of the wire format, and read the fixtures' diff
before committing it. To let one planned field through without regenerating, name it in
``IGNORED_KEYS`` (tests/golden/normalise.py).
"""

from __future__ import annotations

import asyncio
import difflib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from kibitz.shared.bus.embedded import EmbeddedRedis
from kibitz.shared.protocol.client_in import player_id
from tests.conftest import ServerProcess, start_server
from tests.golden.driver import Transcript, http, wait_gone
from tests.golden.normalise import IGNORED_KEYS, drop_keys, normalise
from tests.golden.scenarios import ANN_KEY, SCENARIOS, Played

FIXTURES = Path(__file__).resolve().parent / "fixtures"
UPDATE = os.environ.get("KIBITZ_GOLDEN_UPDATE") == "1"
LISTING = "archive_listing"
NAMES = [s.__name__ for s in SCENARIOS] + [LISTING]


@pytest.fixture(scope="module")
def golden_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A node on a Redis of its own: on the session's Redis another test's node (with
    another database) could take these games' archive entries from the shared stream."""
    redis = EmbeddedRedis(tmp_path_factory.mktemp("golden-redis")).start()
    database = tmp_path_factory.mktemp("golden") / "games.sqlite3"
    try:
        server = start_server(
            redis.url,
            workers=0,
            database_url=f"sqlite:///{database}",
            args=["--finished-ttl", "2"],
        )
        yield server
        server.stop()
    finally:
        redis.stop()


async def read_archived(session: aiohttp.ClientSession, base: str, played: Played) -> None:
    if not played.finished:
        return
    for room in played.finished:
        await wait_gone(session, base, room)
    played.transcript.add("## http, archived (the room has left Redis)")
    for path in played.archived_paths:
        await http(session, base, "GET", path, played.transcript)


async def play_all(base: str) -> dict[str, str]:
    """Every scenario in order, then the archived reads; normalised transcripts by name."""
    ids: dict[str, str] = {}
    started = int(time.time() * 1000)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        played = [await scenario(base, ids, session) for scenario in SCENARIOS]
        for p in played:
            await read_archived(session, base, p)
        listing = Transcript(ids)
        await http(session, base, "GET", f"/api/games?player={player_id(ANN_KEY)}", listing)
    window = (started, int(time.time() * 1000))
    texts = {p.name: normalise(p.transcript.text(), ids, window) for p in played}
    texts[LISTING] = normalise(listing.text(), ids, window)
    return texts


@pytest.fixture(scope="module")
async def transcripts(golden_server: ServerProcess) -> dict[str, str]:
    return await asyncio.wait_for(play_all(golden_server.http_url), 300)


@pytest.mark.parametrize("name", NAMES)
def test_golden(name: str, transcripts: dict[str, str]) -> None:
    path = FIXTURES / f"{name}.txt"
    got = transcripts[name]
    if UPDATE:
        FIXTURES.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
        return
    assert path.exists(), f"{path} missing: make it with KIBITZ_GOLDEN_UPDATE=1 (see above)"
    want = drop_keys(path.read_text(encoding="utf-8"), IGNORED_KEYS)
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(),
            got.splitlines(),
            f"fixtures/{name}.txt",
            "this run",
            lineterm="",
            n=2,
        )
        pytest.fail(
            f"{name}: the server's bytes changed ({first_difference(want, got)}):\n"
            + "\n".join(diff),
            pytrace=False,
        )


def first_difference(want: str, got: str) -> str:
    """Where two transcripts first differ, with 40 characters of each around it (frames
    are long lines)."""
    pairs = zip(want.splitlines(), got.splitlines(), strict=False)
    for number, (a, b) in enumerate(pairs, start=1):
        if a != b:
            same = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
            col = next(same, min(len(a), len(b)))
            around = slice(max(0, col - 20), col + 20)
            return (
                f"first at line {number}, column {col + 1}: fixture {a[around]!r}, "
                f"this run {b[around]!r}"
            )
    return "one is a prefix of the other"
