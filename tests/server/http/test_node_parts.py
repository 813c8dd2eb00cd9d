"""The bus's chat log, live-rooms reader and analysis queue are parts of the node, built
once by the composition root (server/node.py) and read from the app by the HTTP handlers
(the chat log also handed to the archiver), never built per request."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import web

from kibitz.server.appkeys import ANALYSIS_KEY, CHAT_KEY, CHAT_LOG_KEY, LIVE_ROOMS_KEY
from kibitz.server.node import create_app
from kibitz.server.services.analysis import AnalysisQueue
from kibitz.shared.bus.chat import ChatLog
from kibitz.shared.bus.lobby import LiveRooms

SERVER = Path(__file__).resolve().parents[3] / "server"
BUILT_ONCE = re.compile(r"\b(ChatLog|LiveRooms|AnalysisQueue)\(")


def test_only_the_composition_root_builds_them() -> None:
    builders = sorted(
        f"{path.relative_to(SERVER)}:{number}"
        for path in SERVER.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if BUILT_ONCE.search(line)
    )
    assert builders and all(place.startswith("node.py:") for place in builders), builders


async def test_the_node_holds_one_of_each(redis_server) -> None:
    app = create_app(redis_server.url)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()  # runs the node's start-up
    try:
        assert isinstance(app[CHAT_LOG_KEY], ChatLog)
        assert app[CHAT_KEY].log is app[CHAT_LOG_KEY]
        assert isinstance(app[LIVE_ROOMS_KEY], LiveRooms)
        assert isinstance(app[ANALYSIS_KEY], AnalysisQueue)
    finally:
        await runner.cleanup()
