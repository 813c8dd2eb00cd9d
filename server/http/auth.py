"""Sign-up, log-in and sessions over HTTP (``/api/auth/...``; docs/accounts.md).

What is decided here: what each endpoint counts against the throttles (shared/bus/throttle.py:
failed password checks per username and per address, password checks of any outcome per
address, sign-ups per address, with the limits of NodeConfig; a password check, at log-in
or at a change of password, is counted before argon2 runs and a right one is given back
as no failure), the session cookie (``kibitz_session``: HttpOnly, SameSite=Lax, Path=/,
Secure when the request came over TLS, directly or through a trusted proxy's
``X-Forwarded-Proto``, or when every configured public origin is https), and that every
log-in or sign-up opens a NEW session and ends the one the request carried (no session
fixation); a request with an API token acts for the token only, its cookie untouched.
The accounts themselves: server/accounts/.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import COOKIE, bearer, session_cookie
from kibitz.server.accounts.errors import AccountError
from kibitz.server.accounts.names import (
    check_password,
    check_username,
    username_key,
    valid_username,
)
from kibitz.server.appkeys import ACCOUNTS_KEY, CONFIG_KEY, LIMITS_KEY, MODERATION_KEY, THROTTLE_KEY
from kibitz.server.domain.players import Account
from kibitz.server.gateway.limits import client_address
from kibitz.server.http.identity import (
    ANY_SCOPE,
    error_of,
    http_error,
    request_account,
    require_account,
    require_session,
)
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.throttle import Counter

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HOUR_MS = 3_600_000


def register(app: web.Application) -> None:
    add = app.router
    add.add_post("/api/auth/signup", guarded(signup))
    add.add_post("/api/auth/login", guarded(login))
    add.add_post("/api/auth/logout", guarded(logout))
    add.add_post("/api/auth/logout-all", guarded(logout_all))
    add.add_post("/api/auth/password", guarded(change_password))
    add.add_post("/api/auth/claim", guarded(claim))
    add.add_get("/api/auth/me", guarded(me))


def guarded(handler: Handler) -> Handler:
    """``handler`` with refusals as the API's JSON errors, and storage failures as 503."""

    async def guard(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except AccountError as exc:
            raise error_of(exc) from None
        except (SQLAlchemyError, BusError, OSError):
            raise http_error(503, "server/unavailable", "storage unavailable; try again") from None

    return guard


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; 400 ``request/invalid`` for anything else."""
    try:
        body = json.loads(await request.read() or b"null")
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise http_error(400, "request/invalid", "the body must be a JSON object")
    return body


def address_of(request: web.Request) -> str:
    limits = request.app[LIMITS_KEY]
    return client_address(request.remote, request.headers, limits.trusted_proxies)


def own_cookie(request: web.Request) -> str | None:
    """The request's session id, unless it carries an API token: a request with both acts
    for the token only, and leaves the cookie's session alone."""
    if bearer(request.headers) is not None:
        return None
    return session_cookie(request.headers)


def secure_cookie(request: web.Request) -> bool:
    """The cookie is ``Secure`` when the request came over TLS, or when every public
    origin of the site is https (a browser then never sends it over plain HTTP)."""
    public = request.app[LIMITS_KEY].public_origins
    if public and all(origin.startswith("https://") for origin in public):
        return True
    return came_over_tls(request)


def came_over_tls(request: web.Request) -> bool:
    """The request reached us over TLS, or a trusted proxy says it reached it so."""
    if request.secure:
        return True
    if (request.remote or "") not in request.app[LIMITS_KEY].trusted_proxies:
        return False
    proto = request.headers.get("X-Forwarded-Proto", "").rsplit(",", 1)[-1].strip()
    return proto.lower() == "https"


async def start_session(
    request: web.Request, response: web.Response, account: Account
) -> web.Response:
    """A fresh session for ``account`` in the response's cookie; the request's own
    session, if any, ends (a cookie planted before log-in is never kept)."""
    sessions = request.app[ACCOUNTS_KEY].sessions
    old = own_cookie(request)
    if old is not None:
        await sessions.close(old)
    secret = await sessions.open(account.id, address_of(request))
    response.set_cookie(
        COOKIE,
        secret,
        max_age=int(request.app[CONFIG_KEY].session_ttl_s),
        path="/",
        httponly=True,
        samesite="Lax",
        secure=secure_cookie(request),
    )
    return response


def end_cookie(response: web.Response) -> web.Response:
    response.del_cookie(COOKIE, path="/")
    return response


def throttled(wait_ms: int) -> web.HTTPException:
    seconds = max(1, math.ceil(wait_ms / 1000))
    return http_error(
        429, "auth/throttled", f"too many attempts; try again in {seconds} s",
        headers={"Retry-After": str(seconds)},
    )  # fmt: skip


async def refuse_banned(request: web.Request, account_id: int | None) -> None:
    """403 ``auth/banned`` for a banned account or address (the moderation's word)."""
    moderation = request.app.get(MODERATION_KEY)
    if moderation is None:
        return
    refusal = await moderation.banned(account_id, address_of(request))
    if refusal is not None:
        raise http_error(403, "auth/banned", refusal)


async def signup(request: web.Request) -> web.Response:
    body = await json_body(request)
    check_username(body.get("username"))  # the cheap checks before the budget is spent
    check_password(body.get("password"))
    await refuse_banned(request, None)
    config = request.app[CONFIG_KEY]
    counter = Counter("signup-addr", address_of(request), config.signups_per_address_per_hour,
                      HOUR_MS)  # fmt: skip
    wait = await request.app[THROTTLE_KEY].take(counter)
    if wait:
        raise throttled(wait)
    service = request.app[ACCOUNTS_KEY]
    account = await service.signup(body["username"], body["password"], body.get("player_key"))
    response = web.json_response({"account": await service.describe(account)}, status=201)
    return await start_session(request, response, account)


def failure_counters(request: web.Request, username: object) -> list[Counter]:
    """The counters a wrong password counts on: its address's and its username's."""
    config = request.app[CONFIG_KEY]
    window = int(config.login_window_s * 1000)
    counters = [Counter("login-addr", address_of(request), config.login_failures_per_address,
                        window)]  # fmt: skip
    if isinstance(username, str) and valid_username(username):
        key = username_key(username)
        counters.append(Counter("login-account", key, config.login_failures_per_account, window))
    return counters


async def reserve_check(request: web.Request, username: object) -> list[Counter]:
    """Count one password check before it runs (429 ``auth/throttled`` past a limit): on
    the failure counters (returned: a right password gives them back) and on the
    address's budget of checks (kept: it bounds the argon2 work one address causes)."""
    config = request.app[CONFIG_KEY]
    window = int(config.login_window_s * 1000)
    failures = failure_counters(request, username)
    budget = Counter("check-addr", address_of(request), config.password_checks_per_address,
                     window)  # fmt: skip
    wait = await request.app[THROTTLE_KEY].reserve([*failures, budget])
    if wait:
        raise throttled(wait)
    return failures


async def login(request: web.Request) -> web.Response:
    body = await json_body(request)
    username, password = body.get("username"), body.get("password")
    failures = await reserve_check(request, username)
    service = request.app[ACCOUNTS_KEY]
    account = await service.login(username, password)
    if account is None:
        raise http_error(401, "auth/failed", "wrong username or password")
    await request.app[THROTTLE_KEY].give_back(failures)
    await refuse_banned(request, account.id)
    response = web.json_response({"account": await service.describe(account)})
    return await start_session(request, response, account)


async def logout(request: web.Request) -> web.Response:
    """End the request's session and clear its cookie (a request with an API token has
    no session here: nothing ends)."""
    if bearer(request.headers) is not None:
        return web.json_response({"account": None})
    secret = session_cookie(request.headers)
    if secret is not None:
        await request.app[ACCOUNTS_KEY].sessions.close(secret)
    return end_cookie(web.json_response({"account": None}))


async def logout_all(request: web.Request) -> web.Response:
    account = await require_session(request)
    ended = await request.app[ACCOUNTS_KEY].sessions.close_all(account.id)
    return end_cookie(web.json_response({"account": None, "ended": ended}))


async def change_password(request: web.Request) -> web.Response:
    """A new password; every other session of the account ends (this one stays)."""
    account = await require_session(request)
    body = await json_body(request)
    check_password(body.get("new_password"))  # the cheap check before the budget is spent
    failures = await reserve_check(request, account.username)
    service = request.app[ACCOUNTS_KEY]
    await service.change_password(account, body.get("password"), body.get("new_password"))
    await request.app[THROTTLE_KEY].give_back(failures)
    ended = await service.sessions.close_all(account.id, keep=session_cookie(request.headers))
    return web.json_response({"account": await service.describe(account), "ended": ended})


async def claim(request: web.Request) -> web.Response:
    account = await require_account(request)
    body = await json_body(request)
    claimed = await request.app[ACCOUNTS_KEY].claim(account.id, body.get("player_key"))
    return web.json_response({"claimed": claimed})


async def me(request: web.Request) -> web.Response:
    """The account the request acts for (a token of any scope tells its own)."""
    account = await request_account(request, ANY_SCOPE)
    if account is None:
        return web.json_response({"account": None})
    return web.json_response({"account": await request.app[ACCOUNTS_KEY].describe(account)})
