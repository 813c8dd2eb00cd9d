"""What a username and a password may be (pure).

A username is 2-20 characters of ASCII letters, digits, ``_`` and ``-``, starting with a
letter or a digit; it is unique without regard to case (its key is the name in lower
case) and shown as typed. Only ASCII: look-alike letters of other scripts (Cyrillic "а"
for Latin "a") cannot make a second "alice". A few names that would pass for the site
itself are reserved for sign-up (an operator may still create them, ``kibitz admin``).
A password is 8-1024 characters, any characters.
"""

from __future__ import annotations

import re

from kibitz.server.accounts.errors import AccountError

USERNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,19}")
USERNAME_RULE = (
    "a username is 2-20 characters of A-Z a-z 0-9 _ -, starting with a letter or a digit"
)
RESERVED = frozenset(
    {"admin", "administrator", "moderator", "mod", "kibitz", "system", "root", "guest",
     "anonymous", "ai", "bot", "support", "staff", "null", "none", "me"}
)  # fmt: skip
MIN_PASSWORD = 8
MAX_PASSWORD = 1024


def username_key(name: str) -> str:
    """The name as uniqueness sees it: lower case (ASCII only, so no locale games)."""
    return name.lower()


def valid_username(text: object) -> bool:
    return isinstance(text, str) and USERNAME.fullmatch(text) is not None


def check_username(text: object, allow_reserved: bool = False) -> str:
    """``text`` as a new account's name, or AccountError ``auth/username``."""
    if not isinstance(text, str) or USERNAME.fullmatch(text) is None:
        raise AccountError("auth/username", USERNAME_RULE)
    if not allow_reserved and username_key(text) in RESERVED:
        raise AccountError("auth/username", f"the username {text!r} is reserved")
    return text


def check_password(text: object) -> str:
    """``text`` as a new password, or AccountError ``auth/password``."""
    if not isinstance(text, str) or not MIN_PASSWORD <= len(text) <= MAX_PASSWORD:
        raise AccountError(
            "auth/password", f"a password is {MIN_PASSWORD}-{MAX_PASSWORD} characters"
        )
    return text
