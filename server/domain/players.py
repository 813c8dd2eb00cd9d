"""Who a connection or a request acts for: an :class:`Account`, or a guest (None).

The account is read from the database once, when the WebSocket opens or the HTTP request
arrives (server/accounts/), and carried as this plain value: the room service and the
decisions below it never read the database for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ADMIN = "admin"
MODERATOR = "moderator"
ROLES = frozenset({ADMIN, MODERATOR})


@dataclass(frozen=True, slots=True)
class Account:
    """A signed-in player as one connection or request sees them."""

    id: int
    username: str  # as typed at sign-up; unique case-insensitively
    player_id: str  # the public player id the account plays under (seats' ``player``)
    roles: frozenset[str] = field(default_factory=frozenset)
    bot: bool = False
    mark: str | None = None  # a moderator's public mark, if any
    muted_until_ms: int | None = None  # chat muted until then

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.roles

    @property
    def is_moderator(self) -> bool:
        return MODERATOR in self.roles or ADMIN in self.roles

    def muted(self, now_ms: int) -> bool:
        return self.muted_until_ms is not None and now_ms < self.muted_until_ms
