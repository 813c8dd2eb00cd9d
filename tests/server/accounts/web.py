"""A small HTTP client for the accounts tests: JSON bodies, the session cookie kept by
hand (it is HttpOnly and bound to no domain we could name), requests from a chosen
loopback address (every 127.0.0.N is this machine: each test counts as its own client
for the per-address throttles), and ``Origin`` set to the server's URL unless told."""

from __future__ import annotations

import itertools
import json
import uuid
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

import aiohttp

_addresses = itertools.count(2)
PASSWORD = "a long enough password"


def fresh_address() -> str:
    """A loopback address no other client of this test run used."""
    n = next(_addresses)
    return f"127.0.{n // 250}.{n % 250 + 2}"


def fresh_name() -> str:
    return "p" + uuid.uuid4().hex[:12]


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]
    cookies: dict[str, Any] = field(default_factory=dict)

    @property
    def code(self) -> str | None:
        return self.body.get("code") if isinstance(self.body, dict) else None


@dataclass
class Web:
    """One browser-like client of ``url``, from ``address``."""

    url: str
    address: str = field(default_factory=fresh_address)
    cookie: str | None = None

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        origin: str | None = "",
        headers: dict[str, str] | None = None,
        cookie: str | None = "",
    ) -> Reply:
        """``origin``: "" the server's URL, None no Origin; ``cookie``: "" the kept one."""
        sent = dict(headers or {})
        if origin is not None:
            sent["Origin"] = origin or self.url
        jar = self.cookie if cookie == "" else cookie
        if jar:
            sent["Cookie"] = f"kibitz_session={jar}"
        connector = aiohttp.TCPConnector(local_addr=(self.address, 0), force_close=True)
        async with aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar()
        ) as session:
            data = None if body is None else json.dumps(body)
            sent.setdefault("Content-Type", "application/json")
            async with session.request(
                method, self.url + path, data=data, headers=sent,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:  # fmt: skip
                text = await resp.text()
                parsed = SimpleCookie()
                for value in resp.headers.getall("Set-Cookie", []):
                    parsed.load(value)
                reply = Reply(resp.status, _json(text), dict(resp.headers), dict(parsed))
        morsel = reply.cookies.get("kibitz_session")
        if morsel is not None:
            self.cookie = morsel.value or None
        return reply

    async def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return await self.call("POST", path, {} if body is None else body, **kwargs)

    async def get(self, path: str, **kwargs: Any) -> Reply:
        return await self.call("GET", path, None, origin=None, **kwargs)

    async def signup(self, name: str | None = None, **extra: Any) -> Reply:
        body = {"username": name or fresh_name(), "password": PASSWORD, **extra}
        return await self.post("/api/auth/signup", body)

    async def login(self, name: str, password: str = PASSWORD) -> Reply:
        return await self.post("/api/auth/login", {"username": name, "password": password})


async def signup(base: str, username: str) -> str:
    """Sign ``username`` up on the node at ``base`` (password ``PASSWORD``); the session
    cookie's value."""
    async with aiohttp.ClientSession() as http:
        body = {"username": username, "password": PASSWORD}
        async with http.post(
            f"{base}/api/auth/signup", json=body, headers={"Origin": base}
        ) as resp:
            assert resp.status == 201, await resp.text()
            cookie = resp.cookies.get("kibitz_session")
            assert cookie is not None and cookie.value
            return cookie.value


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
