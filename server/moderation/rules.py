"""The rules of moderation, without I/O: what a valid report, mute, mark or ban is, how a
ban is written in the Redis mirror and read back, what a refusal says, and how long a
player who abandons rated games waits before seeking again.

Every check raises :class:`ModerationError` (a typed ``mod/...`` error and the HTTP status
that goes with it) and changes nothing; the service (server/moderation/service.py) does
the I/O once the input has passed.

**Abandonment penalties** (docs/accounts.md, Moderation): an abandonment is a rated game an
account did not make its first move in, lost on time after leaving it, had a win or a draw
claimed against it after leaving it, or aborted once a human opponent had joined. Within
``PENALTY_WINDOW_MS`` (7 days), the first ``FREE_ABANDONMENTS`` (2) cost nothing; the third
makes the player wait ``FIRST_WAIT_MS`` (5 minutes) from that abandonment before seeking or
pooling again, and each further one doubles the wait, up to ``MAX_WAIT_MS`` (24 hours).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from kibitz.server.domain.addresses import address_group

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

PENALTY_WINDOW_MS = 7 * DAY_MS
FREE_ABANDONMENTS = 2
FIRST_WAIT_MS = 5 * MINUTE_MS
MAX_WAIT_MS = DAY_MS
#: The most abandonments read for the rule (enough to reach the longest wait).
PENALTY_READ = 32

REPORT_REASONS = ("abuse", "cheating", "spam", "name", "abandoning", "other")
MAX_REPORT_TEXT = 1000
MAX_REPORT_LINE = 300
MAX_RESOLUTION = 500
MAX_BAN_REASON = 500
MAX_MUTE_MINUTES = 30 * 24 * 60  # 30 days
MAX_BAN_HOURS = 10 * 365 * 24  # 10 years; no hours: for good
MAX_AUDIT_LIMIT = 500
MAX_LISTED = 200  # the most reports, blocks or bans one answer lists
MAX_BLOCKS = 500  # the most accounts one account may block
MARK_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,31}")
ROOM_PATTERN = re.compile(r"[a-z0-9]{1,32}")

BanKind = Literal["account", "address"]
BAN_KINDS: tuple[BanKind, ...] = ("account", "address")


class ModerationError(ValueError):
    """A moderation request refused: a stable ``code``, a text for people, the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def invalid(message: str) -> ModerationError:
    return ModerationError("mod/invalid", message)


# -- abandonment penalties ---------------------------------------------------------------


def penalty_wait_ms(abandoned_at_ms: list[int], now_ms: int) -> int:
    """How long (ms, 0: none) a player who abandoned rated games at ``abandoned_at_ms``
    must still wait at ``now_ms`` before seeking again (the rule in the module doc)."""
    recent = sorted(at for at in abandoned_at_ms if now_ms - PENALTY_WINDOW_MS < at <= now_ms)
    counted = len(recent) - FREE_ABANDONMENTS
    if counted <= 0:
        return 0
    wait = min(MAX_WAIT_MS, FIRST_WAIT_MS << min(counted - 1, 20))
    return max(0, recent[-1] + wait - now_ms)


def wait_text(wait_ms: int) -> str:
    """A wait in words: "4 min 10 s", "2 h 5 min"."""
    seconds = -(-wait_ms // 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {seconds} s"
    return f"{seconds} s"


# -- inputs ------------------------------------------------------------------------------


def whole(value: Any, name: str, low: int, high: int) -> int:
    """``value`` as an int in [low, high], else ``mod/invalid``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(f"{name} must be a whole number from {low} to {high}")
    return value


def text(value: Any, name: str, longest: int, shortest: int = 0) -> str:
    """``value`` as a string of ``shortest`` to ``longest`` characters (stripped)."""
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string")
    stripped: str = value.strip()
    if not shortest <= len(stripped) <= longest:
        raise invalid(f"{name} must have {shortest} to {longest} characters")
    if any(ord(c) < 32 and c not in "\n\t" or ord(c) == 127 for c in stripped):
        raise invalid(f"{name} must not hold control characters")
    return stripped


def report_reason(value: Any) -> str:
    for reason in REPORT_REASONS:
        if value == reason:
            return reason
    raise invalid(f"reason must be one of {', '.join(REPORT_REASONS)}")


def room_id(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not ROOM_PATTERN.fullmatch(value):
        raise invalid("room must be a room id (1-32 lower-case letters and digits)")
    return value


def mark(value: Any) -> str | None:
    """A public mark ("engine", "boost", ...): 1-32 of a-z, 0-9 and "-", a letter first;
    None removes it."""
    if value is None:
        return None
    if not isinstance(value, str) or not MARK_PATTERN.fullmatch(value):
        raise invalid("mark must be null or 1-32 of a-z, 0-9 and '-', starting with a letter")
    return value


def ban_kind(value: Any) -> BanKind:
    for kind in BAN_KINDS:
        if value == kind:
            return kind
    raise invalid("kind must be 'account' or 'address'")


def address(value: Any) -> str:
    """An address ban's target as the nodes count a client (:func:`address_group`): an
    IPv4 address; an IPv6 address as its /64 (also given as the /64 network itself); an
    IPv4-mapped IPv6 address as its IPv4 address."""
    if not isinstance(value, str) or len(value) > 64:
        raise invalid("an address ban's target must be an IP address")
    text = value.strip()
    try:
        if "/" not in text:
            return address_group(str(ipaddress.ip_address(text)))
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise invalid(f"{value!r} is not an IP address") from None
    if network.version != 6 or network.prefixlen != 64:
        raise invalid("a network an address ban may name is an IPv6 /64")
    return str(network)


def ban_target(kind: str, target: str) -> str:
    """The target a stored ban is mirrored (and matched) as: an address ban's as its group
    (rows written before bans were stored so), an account's id as is."""
    return address_group(target) if kind == "address" else target


def ban_hours(value: Any) -> int | None:
    return None if value is None else whole(value, "hours", 1, MAX_BAN_HOURS)


# -- bans in the mirror ------------------------------------------------------------------


def ban_field(kind: str, target: str) -> str:
    """The mirror's field of a ban: ``account:ID`` or ``address:ADDR``."""
    return f"{kind}:{target}"


@dataclass(frozen=True, slots=True)
class ActiveBan:
    """A ban as the nodes see it."""

    id: int
    kind: str
    target: str
    reason: str
    expires_ms: int | None

    def active(self, now_ms: int) -> bool:
        return self.expires_ms is None or now_ms < self.expires_ms

    def encoded(self) -> str:
        return json.dumps(
            {"id": self.id, "reason": self.reason, "expires_ms": self.expires_ms},
            separators=(",", ":"),
        )

    def refusal(self) -> str:
        """What a refused player is told."""
        who = "this account" if self.kind == "account" else "your address"
        until = "" if self.expires_ms is None else " (until it expires)"
        return f"{who} is banned: {self.reason or 'no reason given'}{until}"


def decoded(field: str, value: str | None) -> ActiveBan | None:
    """The ban a mirror field holds, or None (absent or unreadable)."""
    if value is None:
        return None
    kind, _, target = field.partition(":")
    try:
        data = json.loads(value)
        expires = data.get("expires_ms")
        return ActiveBan(
            int(data["id"]),
            kind,
            target,
            str(data.get("reason") or ""),
            None if expires is None else int(expires),
        )
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def mute_text(until_ms: int, now_ms: int) -> str:
    return f"you are muted for {wait_text(until_ms - now_ms)} more"


def hidden_line(hidden: frozenset[str], line: dict[str, Any]) -> bool:
    """Whether a chat ``line`` is from an account in ``hidden`` (lower-case usernames)."""
    account = line.get("account")
    return bool(hidden) and isinstance(account, str) and account.lower() in hidden


def penalty_refusal(wait_ms: int) -> str:
    """What a player waiting out an abandonment penalty is told (``seek/penalty``)."""
    return f"you abandoned several rated games recently: you can seek again in {wait_text(wait_ms)}"
