"""The defence against cross-site requests, for every route: a state-changing request
(POST, PUT, PATCH, DELETE) must come from a page of our own origin.

The rule is the WebSocket's (server/gateway/limits.py): the ``Origin`` header, or when a
browser sent none the origin of ``Referer``, must be one of the site's own origins (the
configured public origins, else the node's listening address) or one ``--allow-origin``
names (not ``*``: that opens sockets to any page, never the cookie's authority).
A request with neither header is refused when it carries the session cookie (a browser
always sends one of them on a POST: a request without them is not a page's, and the cookie
is the one credential a forged request could borrow); without the cookie it acts for
nobody, so scripts and ``curl`` keep working without naming an origin. A request with an
``Authorization: Bearer`` token is not a browser's ambient credential: it passes here
(and is then identified by its token alone, server/http/identity.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler

from kibitz.server.appkeys import LIMITS_KEY, LISTENING_ORIGINS_KEY
from kibitz.server.gateway.limits import normal_origin
from kibitz.shared.protocol.client_out import Error

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SESSION_COOKIE = "kibitz_session"  # server/accounts/credentials.py COOKIE


def sent_origin(headers: Mapping[str, str]) -> str | None:
    """The origin a request says it comes from: ``Origin``, else ``Referer``'s; None when
    it sent neither ("" for one that is no origin of a page: ``null``, a bad URL)."""
    origin = headers.get("Origin")
    if origin is not None:
        return "" if origin.strip() == "null" else normal_origin(origin)
    referer = headers.get("Referer")
    if referer is None:
        return None
    try:
        parts = urlsplit(referer.strip())
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return ""
    return normal_origin(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}")


def has_session_cookie(headers: Mapping[str, str]) -> bool:
    cookies = headers.get("Cookie", "")
    return any(p.strip().startswith(SESSION_COOKIE + "=") for p in cookies.split(";"))


def cross_site(
    method: str, headers: Mapping[str, str], own: frozenset[str], allowed: frozenset[str]
) -> str | None:
    """Why a request is refused as cross-site, or None when it may go ahead."""
    if method.upper() not in UNSAFE_METHODS:
        return None
    if headers.get("Authorization", "").strip().lower().startswith("bearer "):
        return None
    origin = sent_origin(headers)
    if origin is None:
        if has_session_cookie(headers):
            return "a signed-in request must say its origin (Origin or Referer)"
        return None
    if origin in own or (origin in allowed and origin != "*"):
        return None
    return "requests from other sites are not allowed"


@web.middleware
async def csrf_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """403 ``auth/csrf`` for a cross-site state-changing request; else the handler."""
    limits = request.app[LIMITS_KEY]
    listening: set[str] = request.app[LISTENING_ORIGINS_KEY]
    own = limits.public_origins or frozenset(listening)
    why = cross_site(request.method, request.headers, own, limits.allowed_origins)
    if why is not None:
        return web.json_response(Error("auth/csrf", why).to_dict(), status=403)
    return await handler(request)
