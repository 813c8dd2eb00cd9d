"""The pure rules of moderation: the abandonment penalty (exhaustively over small
histories), the inputs refused, and how a ban reads back from the mirror."""

from __future__ import annotations

import itertools

import pytest

from kibitz.server.domain.addresses import address_group
from kibitz.server.moderation import rules
from kibitz.server.moderation.rules import (
    DAY_MS,
    FIRST_WAIT_MS,
    MAX_WAIT_MS,
    MINUTE_MS,
    PENALTY_WINDOW_MS,
    ActiveBan,
    ModerationError,
    penalty_wait_ms,
)

NOW = 1_000 * DAY_MS


def expected_wait(times: list[int], now: int) -> int:
    """The documented rule, written out plainly: within 7 days, the third abandonment
    costs 5 minutes from the last one, each further one doubles it, at most 24 hours."""
    recent = [t for t in times if now - 7 * DAY_MS < t <= now]
    if len(recent) < 3:
        return 0
    wait = 5 * MINUTE_MS
    for _ in range(len(recent) - 3):
        wait = min(wait * 2, 24 * 60 * MINUTE_MS)
    return max(0, max(recent) + wait - now)


# Offsets before "now" chosen to sit on and around every boundary of the rule.
OFFSETS = [
    0,
    1,
    FIRST_WAIT_MS - 1,
    FIRST_WAIT_MS,
    FIRST_WAIT_MS + 1,
    3 * FIRST_WAIT_MS,
    DAY_MS,
    PENALTY_WINDOW_MS - 1,
    PENALTY_WINDOW_MS,
    PENALTY_WINDOW_MS + 1,
]


@pytest.mark.parametrize("count", range(0, 6))
def test_the_penalty_follows_the_rule_for_every_history_of_up_to_five(count: int) -> None:
    checked = 0
    for offsets in itertools.combinations_with_replacement(OFFSETS, count):
        times = [NOW - offset for offset in offsets]
        assert penalty_wait_ms(times, NOW) == expected_wait(times, NOW), offsets
        checked += 1
    assert checked == len(list(itertools.combinations_with_replacement(OFFSETS, count)))


def test_the_wait_escalates_then_stops_at_a_day() -> None:
    waits = [penalty_wait_ms([NOW] * n, NOW) for n in range(0, 16)]
    assert waits[:3] == [0, 0, 0]
    assert waits[3] == FIRST_WAIT_MS
    assert waits[4] == 2 * FIRST_WAIT_MS
    assert waits[5] == 4 * FIRST_WAIT_MS
    assert all(later >= earlier for earlier, later in itertools.pairwise(waits))
    assert waits[-1] == MAX_WAIT_MS == DAY_MS
    assert penalty_wait_ms([NOW] * 1000, NOW) == MAX_WAIT_MS


def test_old_and_future_abandonments_do_not_count() -> None:
    old = [NOW - PENALTY_WINDOW_MS] * 10
    assert penalty_wait_ms(old, NOW) == 0
    assert penalty_wait_ms([NOW + 1] * 10, NOW) == 0


def test_the_wait_runs_from_the_last_abandonment() -> None:
    times = [NOW - 3 * MINUTE_MS] * 3
    assert penalty_wait_ms(times, NOW) == 2 * MINUTE_MS
    assert penalty_wait_ms(times, NOW + 2 * MINUTE_MS) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda: rules.whole(True, "minutes", 0, 10),
        lambda: rules.whole(11, "minutes", 0, 10),
        lambda: rules.whole("3", "minutes", 0, 10),
        lambda: rules.text(None, "reason", 10, 1),
        lambda: rules.text("", "reason", 10, 1),
        lambda: rules.text("x" * 11, "reason", 10, 1),
        lambda: rules.text("a\x00b", "reason", 10, 1),
        lambda: rules.report_reason("because"),
        lambda: rules.room_id("../x"),
        lambda: rules.mark("Engine!"),
        lambda: rules.mark(""),
        lambda: rules.ban_kind("room"),
        lambda: rules.address("10.0.0.300"),
        lambda: rules.address("not an address"),
        lambda: rules.address("10.0.0.0/24"),  # networks: an IPv6 /64 only
        lambda: rules.address("2001:db8::/48"),
        lambda: rules.ban_hours(0),
        lambda: rules.ban_hours(rules.MAX_BAN_HOURS + 1),
    ],
)
def test_bad_inputs_are_refused_with_a_typed_error(call: object) -> None:
    with pytest.raises(ModerationError) as refused:
        call()  # type: ignore[operator]
    assert refused.value.code == "mod/invalid"
    assert refused.value.status == 400


def test_good_inputs_pass_in_their_canonical_form() -> None:
    assert rules.address("127.0.0.1") == "127.0.0.1"
    # An IPv6 ban covers its /64, as the nodes count a client; a mapped IPv4 is the IPv4.
    assert rules.address(" 2001:DB8::1 ") == "2001:db8::/64"
    assert rules.address("2001:db8::/64") == "2001:db8::/64"
    assert rules.address("2001:db8::5/64") == "2001:db8::/64"
    assert rules.address("::ffff:203.0.113.7") == "203.0.113.7"


ADDRESSES = [
    "203.0.113.7",
    "::1",
    "2001:db8::1",
    "2001:db8:1:2:3:4:5:6",
    "::ffff:203.0.113.7",
    "fe80::1",
    "0.0.0.0",
    "unknown",
    "2001:db8::/64",
]


@pytest.mark.parametrize("address", ADDRESSES)
def test_an_address_ban_names_the_group_the_gateway_counts_a_client_as(address: str) -> None:
    if address != "unknown":
        assert rules.address(address) == address_group(address)
    assert rules.mark("engine") == "engine"
    assert rules.mark(None) is None
    assert rules.text("  hi  ", "text", 10) == "hi"
    assert rules.ban_hours(None) is None


def test_a_ban_reads_back_from_its_mirror_field_and_expires() -> None:
    ban = ActiveBan(7, "account", "12", "spam", NOW + 1000)
    field = rules.ban_field("account", "12")
    back = rules.decoded(field, ban.encoded())
    assert back == ban
    assert back.active(NOW) and not back.active(NOW + 1000)
    assert "banned: spam" in back.refusal()
    assert rules.decoded(field, None) is None
    assert rules.decoded(field, "{not json") is None
    assert rules.decoded(field, '{"reason": "x"}') is None  # no id


def test_hidden_lines_are_those_of_the_hidden_accounts_in_any_case() -> None:
    hidden = frozenset({"ann"})
    assert rules.hidden_line(hidden, {"account": "Ann", "text": "hi"})
    assert not rules.hidden_line(hidden, {"account": "bob", "text": "hi"})
    assert not rules.hidden_line(hidden, {"name": "Ann", "text": "a guest's line"})
    assert not rules.hidden_line(frozenset(), {"account": "Ann"})
