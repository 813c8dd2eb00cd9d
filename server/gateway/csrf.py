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
``Authorization: Bearer`` API token (``kbz_`` and 32 characters: anything else under that
scheme is checked like a browser's request) is not a browser's ambient credential: it
passes here, and acts for its token alone (server/http/identity.py; the cookie it may
also carry is ignored, server/http/auth.py). The WebSocket handshake reads the cookie by
the same rule (:func:`cookie_trusted`, server/gateway/admission.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler

from kibitz.server.accounts.credentials import bearer, token_shaped
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
    token = bearer(headers)
    if token is not None and token_shaped(token):
        return None
    origin = sent_origin(headers)
    if origin is None:
        if has_session_cookie(headers):
            return "a signed-in request must say its origin (Origin or Referer)"
        return None
    if own_page(origin, own, allowed):
        return None
    return "requests from other sites are not allowed"


def own_page(origin: str, own: frozenset[str], allowed: frozenset[str]) -> bool:
    """Whether a page of ``origin`` may use the visitor's cookie: one of the site's own
    origins, or one ``--allow-origin`` names (``*`` names none)."""
    return origin in own or (origin in allowed and origin != "*")


def cookie_trusted(
    headers: Mapping[str, str], own: frozenset[str], allowed: frozenset[str]
) -> bool:
    """Whether a WebSocket handshake may act for its session cookie: its page is our own
    (:func:`own_page`), or it names no page at all (browsers always send ``Origin`` on a
    WebSocket handshake: a client without one is no browser, and no page borrows its
    cookie). A page another site serves, admitted by ``--allow-origin '*'``, plays as a
    guest."""
    origin = sent_origin(headers)
    return origin is None or own_page(origin, own, allowed)


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
