"""Whether the credential a socket was opened with still holds, asked at most once per
``RECHECK_S`` per socket.

A socket is identified once, at its handshake (server/gateway/admission.py); while it
stays open its session may end (log out, log out everywhere, a new password, expiry) or
its token be revoked. Before each message that acts for the account
(server/gateway/session.py) the socket asks again, answered from the last look-up when
that is younger than ``RECHECK_S``: one database read per socket per ``RECHECK_S`` at
most, and none for a guest or for moves. A failed read keeps the last answer: a database
outage never stops a signed-in player.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import Credential
from kibitz.server.accounts.service import AccountService

log = logging.getLogger(__name__)

#: How long (s) a socket trusts the last answer about its credential.
RECHECK_S = 5.0


class CredentialCheck:
    """The cached answer for one socket's credential (None: a guest's, always fine)."""

    def __init__(self, credential: Credential | None) -> None:
        self.credential = credential
        self.checked = time.monotonic()  # the handshake has just found it live
        self.holds = True

    async def live(self, service: AccountService) -> bool:
        """Whether the credential still holds (at most one look-up per ``RECHECK_S``)."""
        if self.credential is None or not self.holds:
            return self.holds
        now = time.monotonic()
        if now - self.checked < RECHECK_S:
            return True
        self.checked = now
        try:
            self.holds = await service.live(self.credential)
        except (SQLAlchemyError, OSError) as exc:
            log.warning("could not check a socket's credential: %s", type(exc).__name__)
        return self.holds
