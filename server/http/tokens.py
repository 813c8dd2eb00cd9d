"""Personal API tokens over HTTP (``/api/tokens``; docs/accounts.md, Tokens).

Only a signed-in session manages tokens (an API token cannot list, make or revoke
tokens); the secret is in the answer to ``POST`` once and never again. Scopes and their
rules: server/accounts/tokens.py.
"""

from __future__ import annotations

from aiohttp import web

from kibitz.server.accounts.credentials import parse_scopes
from kibitz.server.accounts.tokens import check_description
from kibitz.server.appkeys import ACCOUNTS_KEY
from kibitz.server.http.auth import guarded, json_body
from kibitz.server.http.identity import http_error, require_session

MAX_TOKEN_ID = 2**31 - 1


def register(app: web.Application) -> None:
    app.router.add_get("/api/tokens", guarded(list_tokens))
    app.router.add_post("/api/tokens", guarded(create_token))
    app.router.add_delete("/api/tokens/{id}", guarded(revoke_token))


async def list_tokens(request: web.Request) -> web.Response:
    account = await require_session(request)
    listed = await request.app[ACCOUNTS_KEY].tokens.listing(account.id)
    return web.json_response({"tokens": listed})


async def create_token(request: web.Request) -> web.Response:
    account = await require_session(request)
    body = await json_body(request)
    try:
        scopes = parse_scopes(body.get("scopes"))
    except ValueError as exc:
        raise http_error(400, "request/invalid", str(exc)) from None
    description = check_description(body.get("description"))
    secret, listed = await request.app[ACCOUNTS_KEY].tokens.create(account, description, scopes)
    return web.json_response({"token": secret, **listed}, status=201)


async def revoke_token(request: web.Request) -> web.Response:
    account = await require_session(request)
    text = request.match_info["id"]
    token_id = int(text) if text.isascii() and text.isdigit() and len(text) <= 10 else 0
    if not 0 < token_id <= MAX_TOKEN_ID:
        raise http_error(404, "token/unknown", "no such token")
    if not await request.app[ACCOUNTS_KEY].tokens.revoke(account.id, token_id):
        raise http_error(404, "token/unknown", "no such token")
    return web.json_response({"revoked": token_id})
