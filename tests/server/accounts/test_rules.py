"""The pure decisions of accounts: the cross-site rule, credentials' shapes, names."""

from __future__ import annotations

import pytest

from kibitz.server.accounts.credentials import (
    bearer,
    digest,
    new_session_id,
    new_token,
    parse_scopes,
    session_cookie,
    token_shaped,
)
from kibitz.server.accounts.names import check_username, username_key
from kibitz.server.gateway.csrf import cookie_trusted, cross_site, sent_origin

OWN = frozenset({"http://127.0.0.1:8000", "https://play.example"})
ALLOWED = frozenset({"https://friend.example", "*"})
COOKIE = {"Cookie": "theme=dark; kibitz_session=" + "a" * 43}
TOKEN = "Bearer kbz_" + "A" * 32


@pytest.mark.parametrize(
    ("method", "headers", "refused"),
    [
        ("GET", {"Origin": "https://evil.example", **COOKIE}, False),
        ("HEAD", COOKIE, False),
        ("POST", {"Origin": "https://play.example", **COOKIE}, False),
        ("POST", {"Origin": "HTTPS://PLAY.EXAMPLE:443/", **COOKIE}, False),
        ("DELETE", {"Origin": "https://friend.example", **COOKIE}, False),
        ("POST", {"Origin": "https://evil.example", **COOKIE}, True),
        ("POST", {"Origin": "https://evil.example"}, True),
        ("PUT", {"Origin": "null", **COOKIE}, True),
        ("PATCH", {"Referer": "https://play.example/#/game/x", **COOKIE}, False),
        ("POST", {"Referer": "https://evil.example/https://play.example", **COOKIE}, True),
        ("POST", {"Referer": "https://play.example@evil.example/", **COOKIE}, True),
        ("POST", {"Referer": "javascript:alert(1)", **COOKIE}, True),
        ("POST", COOKIE, True),  # neither header, with the cookie
        ("POST", {}, False),  # neither, no cookie: acts for nobody
        ("POST", {"Authorization": TOKEN, "Origin": "https://evil.example", **COOKIE}, False),
        # Only a well-formed API token passes unchecked (it alone is then read).
        ("POST", {"Authorization": "Bearer kbz_x", "Origin": "https://evil.example"}, True),
        ("POST", {"Authorization": "Bearer nonsense", **COOKIE}, True),
        ("POST", {"Authorization": "Basic a2I6eg==", "Origin": "https://evil.example"}, True),
    ],
)
def test_the_cross_site_rule(method: str, headers: dict[str, str], refused: bool) -> None:
    assert (cross_site(method, headers, OWN, ALLOWED) is not None) == refused


def test_a_wildcard_allowed_origin_does_not_open_the_cookie() -> None:
    headers = {"Origin": "https://any.example", **COOKIE}
    assert cross_site("POST", headers, OWN, frozenset({"*"})) is not None


@pytest.mark.parametrize(
    ("headers", "trusted"),
    [
        ({"Origin": "https://play.example", **COOKIE}, True),
        ({"Origin": "https://friend.example", **COOKIE}, True),
        ({"Origin": "https://any.example", **COOKIE}, False),  # only "*" lets it in
        ({"Origin": "null", **COOKIE}, False),
        (COOKIE, True),  # no Origin: no browser's page
    ],
)
def test_which_sockets_may_use_the_cookie(headers: dict[str, str], trusted: bool) -> None:
    assert cookie_trusted(headers, OWN, ALLOWED) == trusted


def test_the_origin_of_a_referer() -> None:
    assert (
        sent_origin({"Referer": "https://user:pw@Play.Example:443/x?y"}) == "https://play.example"
    )
    assert sent_origin({}) is None
    assert sent_origin({"Origin": "null"}) == ""


def test_secrets_have_their_shapes_and_are_stored_hashed() -> None:
    session, token = new_session_id(), new_token()
    assert len(session) == 43 and session_cookie({"Cookie": f"kibitz_session={session}"})
    assert token_shaped(token) and not token_shaped(token + "x")
    assert digest(token) != token and len(digest(token)) == 64
    assert session_cookie({"Cookie": "kibitz_session=short"}) is None
    assert session_cookie({"Cookie": "xkibitz_session=" + "a" * 43}) is None
    assert bearer({"Authorization": "bearer abc"}) == "abc"
    assert bearer({"Authorization": "Basic abc"}) is None
    assert bearer({}) is None


def test_scopes() -> None:
    assert parse_scopes(["read", "play", "read"]) == ("play", "read")
    for bad in ([], ["root"], "play", None, ["play"] * 4):
        with pytest.raises(ValueError):
            parse_scopes(bad)


def test_usernames() -> None:
    assert check_username("Ann-2_b") == "Ann-2_b" and username_key("Ann-2_b") == "ann-2_b"
    assert check_username("admin", allow_reserved=True) == "admin"
