"""The lichess-compatible Bot and Board API (docs/bot-api.md), served by every node.

Bots and board apps written for lichess's HTTP API (the ``berserk`` client, the
lichess-bot bridge) play kibitz's seven games through it. A game started here is an
ordinary room: the web client's players and spectators see it, and its clocks, offers,
claims, chat, archive and ratings are those of every room.

- errors.py: the API's error answers, who a request acts for, its rate limits;
- formats.py: kibitz's rooms and challenges in lichess's JSON shapes (pure);
- users.py, account_routes.py: accounts, users, bots online, game export;
- events.py: ``/api/stream/event``, one stream per token, and what feeds it;
- credentials.py: which open streams' credentials still hold, in one read;
- challenges.py, seek.py: challenges and board seeks, which make rooms;
- games.py: the per-game streams and actions of the Bot and Board APIs.
"""

from __future__ import annotations

from aiohttp import web

from kibitz.server.botapi import account_routes, challenges, events, games, seek


def register(app: web.Application) -> None:
    """Every route of the API (before the client files' catch-all)."""
    account_routes.register(app)
    events.register(app)
    challenges.register(app)
    seek.register(app)
    games.register(app)
