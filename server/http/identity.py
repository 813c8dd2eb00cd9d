"""Who an HTTP request acts for, for every endpoint: an :class:`Account`, or None (a guest).

``request_account`` reads an ``Authorization: Bearer`` API token (which must have the
scope asked for) or else the session cookie ``kibitz_session``
(server/accounts/service.py ``identify``); a banned (disabled) account's cookie counts as
none. ``require_account`` and ``require_role`` turn a missing account or role into the
API's JSON error. The answer is kept on the request, so asking twice costs one look-up.
"""

from __future__ import annotations

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import bearer
from kibitz.server.accounts.errors import AccountError
from kibitz.server.appkeys import ACCOUNTS_KEY
from kibitz.server.domain.players import ADMIN, Account
from kibitz.shared import fastjson
from kibitz.shared.protocol.client_out import Error

#: The scope that asks for the account of a token of any scope (``GET /api/auth/me``).
ANY_SCOPE = ""
#: The accounts found for a request, per scope asked.
_CACHE: web.RequestKey[dict[str, Account | None]] = web.RequestKey("kibitz_accounts")

#: The aiohttp exception of each status the API answers with (also server/botapi/errors.py).
STATUS_EXCEPTIONS: dict[int, type[web.HTTPException]] = {
    400: web.HTTPBadRequest,
    401: web.HTTPUnauthorized,
    403: web.HTTPForbidden,
    404: web.HTTPNotFound,
    409: web.HTTPConflict,
    429: web.HTTPTooManyRequests,
    503: web.HTTPServiceUnavailable,
}


def http_error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.HTTPException:
    """The API's one error body as an exception a handler raises."""
    body = fastjson.dumps(Error(code, message).to_dict()).decode()
    kind = STATUS_EXCEPTIONS.get(status, web.HTTPBadRequest)
    return kind(text=body, content_type="application/json", headers=headers)


def error_of(exc: AccountError) -> web.HTTPException:
    return http_error(exc.status, exc.code, exc.message)


async def request_account(request: web.Request, scope: str = "play") -> Account | None:
    """The account the request acts for, or None for a guest; raises the JSON 401
    ``auth/token`` for a bad Bearer token, 403 ``auth/scope`` for one without ``scope``."""
    cache: dict[str, Account | None] | None = request.get(_CACHE)
    if cache is None:
        cache = {}
        request[_CACHE] = cache
    if scope not in cache:
        try:
            cache[scope] = await request.app[ACCOUNTS_KEY].identify(request.headers, scope)
        except AccountError as exc:
            raise error_of(exc) from None
        except (SQLAlchemyError, OSError):
            raise http_error(503, "server/unavailable", "storage unavailable; try again") from None
    return cache[scope]


async def require_account(request: web.Request, scope: str = "play") -> Account:
    """The request's account; 401 ``auth/required`` for a guest."""
    account = await request_account(request, scope)
    if account is None:
        raise http_error(401, "auth/required", "sign in first")
    return account


async def require_session(request: web.Request) -> Account:
    """The account of the request's session cookie: 401 ``auth/required`` without one,
    403 ``auth/session`` for a request with an API token (a token may not manage the
    account: make tokens, change the password, end sessions)."""
    if bearer(request.headers) is not None:
        raise http_error(403, "auth/session", "this needs a signed-in session, not an API token")
    return await require_account(request)


def require_role(account: Account, role: str) -> None:
    """403 ``auth/forbidden`` unless ``account`` has ``role`` (an admin has every role)."""
    if role in account.roles or ADMIN in account.roles:
        return
    raise http_error(403, "auth/forbidden", f"this needs the {role} role")
