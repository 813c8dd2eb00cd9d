"""``kibitz admin account create`` and ``kibitz admin token create`` as subprocesses, on
the SQLite file of a data directory and on PostgreSQL; what they print works on a server
started on the same database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kibitz.shared.bus.embedded import EmbeddedRedis
from tests.conftest import new_postgres_database, start_server
from tests.server.accounts.web import Web


def admin(
    args: list[str], stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kibitz.server.cli", "admin", *args],
        input=stdin, capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> list[str]:
    """The flags naming the database, as ``kibitz serve`` takes them."""
    if request.param == "sqlite":
        return ["--data-dir", str(tmp_path / "data")]
    return ["--database", new_postgres_database(request.getfixturevalue("postgres"))]


def serve_flags(where: list[str]) -> dict[str, str]:
    flag, value = where
    return {"KIBITZ_DATA_DIR": value} if flag == "--data-dir" else {}


async def test_an_account_and_a_token_made_by_the_operator(
    where: list[str], own_redis: EmbeddedRedis
) -> None:
    name = "Op" + uuid.uuid4().hex[:8]
    made = admin(["account", "create", name, "--password-stdin", *where], "operator pass\n")
    assert made.returncode == 0, made.stderr
    account = json.loads(made.stdout)
    assert set(account) == {"username", "id", "player", "bot"}
    assert account["username"] == name and account["bot"] is False
    token = admin(["token", "create", name.lower(), "--scope", "play", "--scope", "read",
                   *where])  # fmt: skip
    assert token.returncode == 0, token.stderr
    minted = json.loads(token.stdout)
    assert minted["username"] == name and minted["scopes"] == ["play", "read"]
    assert minted["token"].startswith("kbz_") and isinstance(minted["id"], int)
    database = where[1] if where[0] == "--database" else None
    node = start_server(own_redis.url, extra_env=serve_flags(where), database_url=database)
    try:
        web = Web(node.http_url)
        assert (await web.login(name, "operator pass")).status == 200
        bearer = {"Authorization": f"Bearer {minted['token']}"}
        me = await Web(node.http_url).get("/api/auth/me", headers=bearer)
        assert me.body["account"]["player"] == account["player"]
    finally:
        node.stop()


def test_a_bot_account_without_a_password(where: list[str]) -> None:
    name = "bot" + uuid.uuid4().hex[:8]
    made = admin(["account", "create", name, "--bot", *where])
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["bot"] is True
    again = admin(["account", "create", name.upper(), *where])
    assert again.returncode == 1
    assert json.loads(again.stderr)["code"] == "auth/taken"


@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["account", "create", "bad name"], "", "auth/username"),
        (["account", "create", "shortpw", "--password-stdin"], "short\n", "auth/password"),
        (["token", "create", "nobody_here", "--scope", "play"], "", "auth/unknown"),
    ],
)
def test_refusals_print_one_json_error_and_exit_1(
    where: list[str], args: list[str], stdin: str, code: str
) -> None:
    done = admin([*args, *where], stdin)
    assert done.returncode == 1 and done.stdout == ""
    assert json.loads(done.stderr)["code"] == code


def test_the_admin_scope_is_for_admins_only(where: list[str]) -> None:
    name = "u" + uuid.uuid4().hex[:8]
    assert admin(["account", "create", name, *where]).returncode == 0
    done = admin(["token", "create", name, "--scope", "admin", *where])
    assert done.returncode == 1 and json.loads(done.stderr)["code"] == "auth/forbidden"


def test_bad_flags_exit_2(where: list[str]) -> None:
    assert admin(["token", "create", "x", "--scope", "root", *where]).returncode == 2
    assert admin(["token", "create", "x", *where]).returncode == 2
