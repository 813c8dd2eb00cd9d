"""The secrets a client shows (pure): session ids, API tokens and where a request carries
them.

A session id is ``secrets.token_urlsafe(32)`` (43 characters) in the cookie
``kibitz_session``; an API token is ``kbz_`` and 32 URL-safe characters, sent as
``Authorization: Bearer TOKEN``. Only their SHA-256 (hex) is stored. A value of the wrong
shape is no credential at all (never looked up). A :class:`Credential` names the one a
socket was opened with, so that it can ask later whether it still holds.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from typing import Literal, NamedTuple

COOKIE = "kibitz_session"
TOKEN_PREFIX = "kbz_"
SESSION_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
TOKEN_SHAPE = re.compile(r"kbz_[A-Za-z0-9_-]{32}")
SCOPES = ("play", "read", "admin")


class Credential(NamedTuple):
    """What a request or socket was identified by: a session (``key``: its id's SHA-256)
    or an API token (``key``: its row id, in decimal). Never the secret itself."""

    kind: Literal["session", "token"]
    key: str


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


def digest(secret: str) -> str:
    """How a secret is stored and looked up: its SHA-256 in hex."""
    return hashlib.sha256(secret.encode()).hexdigest()


_REPEATED = "\x00"  # a header sent more than once (no header value holds NUL)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's one value; ``_REPEATED`` when it was sent more than once (the WebSocket
    handshake's headers refuse to choose: no credential is read from a repeated header)."""
    try:
        return headers.get(name)
    except LookupError:
        return _REPEATED


def session_cookie(headers: Mapping[str, str]) -> str | None:
    """The session id of the ``Cookie`` header, if it has one of the right shape."""
    cookies = _header(headers, "Cookie") or ""
    for part in ("" if cookies == _REPEATED else cookies).split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            value = value.strip().strip('"')
            return value if SESSION_SHAPE.fullmatch(value) else None
    return None


def bearer(headers: Mapping[str, str]) -> str | None:
    """The ``Authorization: Bearer`` credential as sent ("" for a malformed header naming
    the Bearer scheme), or None when there is none."""
    value = _header(headers, "Authorization")
    if value is None:
        return None
    if value == _REPEATED:
        return ""
    scheme, _, credential = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credential.strip()


def token_shaped(text: str) -> bool:
    return TOKEN_SHAPE.fullmatch(text) is not None


def parse_scopes(values: object) -> tuple[str, ...]:
    """A list of scope names as stored (sorted, once each); ValueError if not one."""
    if not isinstance(values, list) or not values or len(values) > len(SCOPES):
        raise ValueError(f"scopes: a non-empty list of {', '.join(SCOPES)}")
    if any(v not in SCOPES for v in values):
        raise ValueError(f"scopes: each one of {', '.join(SCOPES)}")
    return tuple(sorted(set(values)))
