"""The one error type of accounts, sessions and tokens: a stable code, a text for people
and the HTTP status it is answered with (server/http/auth.py, server/http/tokens.py).

Codes are ``area/what`` as every API error (docs/accounts.md lists them)."""

from __future__ import annotations


class AccountError(Exception):
    """A refused account request: nothing was changed."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
