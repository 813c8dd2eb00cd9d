"""The API's error answers, who a request acts for, what it asks, and its rate limits.

lichess answers an API error with a JSON body ``{"error": "..."}`` (400 for a request it
refuses, 401 for a missing or bad token, 403 for a token without the scope, 404 for an
unknown game, challenge or user, 429 when too many requests came: the client waits a
minute, or the ``Retry-After`` seconds we add). Every handler of this package answers
its errors through :func:`api_error`, so bots written for lichess read them unchanged.

A request's fields come as a form (lichess-bot, browsers) or as a JSON object (berserk
sends ``json=``): :func:`request_fields` reads either, a JSON ``null`` being absent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import Credential
from kibitz.server.accounts.errors import AccountError
from kibitz.server.appkeys import ACCOUNTS_KEY, MODERATION_KEY, THROTTLE_KEY
from kibitz.server.domain.players import Account
from kibitz.server.http.auth import address_of
from kibitz.server.http.identity import STATUS_EXCEPTIONS
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.throttle import Counter

#: The scopes of a kibitz token, as lichess names them (``GET /api/token/test``).
LICHESS_SCOPES: dict[str, tuple[str, ...]] = {
    "play": ("bot:play", "board:play", "challenge:read", "challenge:write"),
    "read": ("preference:read", "email:read", "challenge:read"),
    "admin": ("web:mod",),
}


def api_error(
    status: int, message: str, headers: dict[str, str] | None = None
) -> web.HTTPException:
    """lichess's error answer: ``status`` with ``{"error": message}``."""
    kind = STATUS_EXCEPTIONS.get(status, web.HTTPBadRequest)
    body = json.dumps({"error": message})
    return kind(text=body, content_type="application/json", headers=headers)


def ok() -> web.Response:
    """lichess's answer to an action that was done: ``{"ok": true}``."""
    return web.json_response({"ok": True})


async def api_account(request: web.Request, scope: str = "play") -> Account:
    """The account of the request's ``Authorization: Bearer`` token (or session cookie,
    for the browser's own calls), which must have ``scope``: 401 ``No such token`` for a
    missing or bad token, 403 ``Missing scope`` for one without it, 503 while the database
    cannot be read."""
    return (await identify(request.app, request.headers, scope))[0]


async def identify(
    app: web.Application, headers: Mapping[str, str], scope: str
) -> tuple[Account, Credential]:
    """:func:`api_account` of a request's ``headers`` (a request aiohttp did not parse:
    the node's edge), with the credential that told."""
    try:
        account, credential = await app[ACCOUNTS_KEY].identify_by(headers, scope)
    except AccountError as exc:
        if exc.status == 403:
            raise api_error(403, "Missing scope") from None
        raise api_error(401, "No such token") from None
    except (SQLAlchemyError, OSError):
        raise api_error(503, "Storage unavailable; try again") from None
    if account is None or credential is None:
        raise api_error(401, "No such token")
    return account, credential


async def refuse_banned(request: web.Request, account: Account) -> None:
    """403 with the moderation's refusal when ``account`` (or the request's address) is
    banned: what the WebSocket refuses a banned player (seeks, rooms, chat), this API
    refuses too."""
    try:
        refusal = await request.app[MODERATION_KEY].banned(account.id, address_of(request))
    except (SQLAlchemyError, OSError):
        raise api_error(503, "Moderation cannot be read now; try again") from None
    if refusal is not None:
        raise api_error(403, refusal)


async def request_fields(request: web.Request) -> dict[str, Any]:
    """The request's fields: a JSON object's (``Content-Type: application/json``; values
    as they are typed, ``null`` left out), else a form's (text values only); 400 for a
    body that is neither, or larger than the node takes."""
    try:
        if request.content_type == "application/json":
            body = await request.json() if request.can_read_body else {}
            if not isinstance(body, dict):
                raise api_error(400, "The body must be a JSON object")
            return {str(k): v for k, v in body.items() if v is not None}
        form = await request.post()
    except web.HTTPRequestEntityTooLarge:
        raise api_error(400, "The body is too large") from None
    except ValueError:
        raise api_error(400, "The body is not valid JSON, nor a form") from None
    return {k: v for k, v in form.items() if isinstance(v, str)}


def require_bot(account: Account) -> None:
    """The Bot API is for bot accounts only (``POST /api/bot/account/upgrade``)."""
    if not account.bot:
        raise api_error(400, "This endpoint can only be used with a Bot account.")


def require_board(account: Account) -> None:
    """The Board API is for the accounts of people, not bots."""
    if account.bot:
        raise api_error(400, "This endpoint cannot be used with a Bot account.")


async def limit(
    request: web.Request, account: Account, what: str, count: int, window_s: int
) -> None:
    """Count one request of ``what`` for ``account``: past ``count`` in ``window_s``
    seconds, 429 with ``Retry-After`` (the rest of the window), and nothing done."""
    await take(request.app, account.id, what, count, window_s)


async def take(app: web.Application, account_id: int, what: str, count: int, window_s: int) -> None:
    """:func:`limit` for an account's id, with the app (the node's edge has no request)."""
    counter = Counter(f"api:{what}", str(account_id), count, window_s * 1000)
    try:
        wait_ms = await app[THROTTLE_KEY].take(counter)
    except (BusError, OSError):
        raise api_error(503, "Server unavailable; try again") from None
    if wait_ms:
        wait = max(1, -(-wait_ms // 1000))
        raise api_error(429, "Too many requests. Try again later.", {"Retry-After": str(wait)})
