"""Attacks on the listening socket and what it tells strangers, against a real ``kibitz serve``.

- Connection floods: idle TCP sockets from one address past its cap are closed as they are
  accepted, before any handshake; a trusted proxy (which carries many clients) is not
  capped that way; other addresses are still served meanwhile.
- Slow heads: a request head sent a byte at a time is cut off after the head timeout, on
  the first request of a connection and on every later request of a kept-alive one.
- Oversized heads: a header line over 8 KB is answered 431 (400 on a kept-alive
  connection's later request) with no traceback in the server's log.
- DNS rebinding: a page of another host name (``Host: evil``, ``Origin: http://evil``) may
  not open a WebSocket; only the configured public origin, or with none the node's own
  loopback address and port, may.
- Information: ``/healthz``, ``/api/status`` and the WebSocket ``welcome`` name neither the
  machine's host name nor a process id.
- Slow readers: a client that stops reading is closed with a 1013 close frame that follows
  whole frames, not by a TCP stream cut in the middle of a frame.
- Secrets: a Redis URL given in the environment is on no command line, the node's or its
  local workers'.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import socket
import struct
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from websockets.frames import Frame, Opcode

from kibitz.client.connection import KibitzClient
from kibitz.server.cli.serve import spawn_server
from kibitz.server.gateway.limits import listening_origins, parse_origin
from kibitz.server.services.chat import KEPT, RATE_LINES
from kibitz.shared.protocol.client_in import MAX_CHAT
from tests.conftest import UNLIMITED, ServerProcess, start_server

HEAD_TIMEOUT_S = 3.0
SLOW_CLIENT_S = 2.0


def address(server: ServerProcess) -> tuple[str, int]:
    url = urlsplit(server.http_url)
    assert url.hostname is not None and url.port is not None
    return url.hostname, url.port


@contextlib.contextmanager
def served(
    redis_url: str, env: dict[str, str], args: tuple[str, ...] = ()
) -> Iterator[ServerProcess]:
    # The suite's servers have no socket cap (tests/conftest.py, UNLIMITED): these test
    # the product's default, derived from --max-connections-per-address, unless they say.
    env = {"KIBITZ_MAX_SOCKETS_PER_ADDRESS": "", **env}
    server = start_server(redis_url, extra_env=env, args=args)
    try:
        yield server
    finally:
        server.stop()


def connect(server: ServerProcess, source: str = "127.0.0.1", rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(address(server))
    return sock


def is_closed(sock: socket.socket) -> bool:
    """Whether the server has closed this (idle) socket: EOF or reset, without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def http_get(server: ServerProcess, path: str, source: str = "127.0.0.1") -> tuple[int, bytes]:
    """One request on a fresh connection: (status, body)."""
    with connect(server, source) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = read_all(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def read_all(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """Everything until the server closes (bounded in time)."""
    sock.settimeout(timeout)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One response with a Content-Length on a kept-alive connection: (status, body)."""
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(4096)
    return int(head.split()[1]), body


def upgrade(host: str, origin: str | None) -> bytes:
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /ws HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
    ]  # fmt: skip
    if origin is not None:
        lines.append(f"Origin: {origin}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def handshake_status(server: ServerProcess, host: str, origin: str | None) -> int:
    with connect(server) as sock:
        sock.sendall(upgrade(host, origin))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split()[1])


# -- connection floods ------------------------------------------------------------------------


def test_idle_sockets_past_the_cap_are_closed_as_they_are_accepted(redis_server) -> None:
    """400 idle sockets from one address: with --max-connections-per-address 200 the node
    keeps at most 264 (the default cap, 200 + 64) and closes the rest at once; another
    address is served meanwhile, and the places come back once the sockets close."""
    env = {"KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "200"}
    with served(redis_server.url, env) as server:
        socks = [connect(server) for _ in range(400)]
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                closed = sum(is_closed(s) for s in socks)
                if closed >= 400 - 264:
                    break
                time.sleep(0.2)
            assert 400 - 264 <= closed <= 400 - 200, closed
            assert http_get(server, "/healthz", source="127.0.0.2")[0] == 200
        finally:
            for sock in socks:
                sock.close()
        deadline = time.monotonic() + 10
        while True:  # its places are given back as they close
            with contextlib.suppress(OSError, IndexError, ValueError):
                if http_get(server, "/healthz")[0] == 200:
                    break
            assert time.monotonic() < deadline, "the address never got its places back"
            time.sleep(0.2)


def test_a_trusted_proxy_is_not_capped_at_accept(redis_server) -> None:
    """A balancer carries many clients from one address: it is not capped per socket."""
    env = {"KIBITZ_MAX_SOCKETS_PER_ADDRESS": "20"}
    args = ("--trusted-proxy", "127.0.0.3")
    with served(redis_server.url, env, args) as server:
        proxied = [connect(server, "127.0.0.3") for _ in range(40)]
        direct = [connect(server, "127.0.0.4") for _ in range(40)]
        try:
            time.sleep(1.5)
            assert sum(is_closed(s) for s in proxied) == 0
            assert sum(is_closed(s) for s in direct) == 20
        finally:
            for sock in proxied + direct:
                sock.close()


# -- slow and oversized heads -----------------------------------------------------------------


@pytest.fixture(scope="module")
def strict_server(redis_server) -> Iterator[ServerProcess]:
    """A node with a short head timeout and slow-client bound, so that tests stay short."""
    env = {"KIBITZ_HEAD_TIMEOUT": str(HEAD_TIMEOUT_S), "KIBITZ_SLOW_CLIENT_S": str(SLOW_CLIENT_S)}
    with served(redis_server.url, env) as server:
        yield server


def trickle_until_closed(sock: socket.socket, text: bytes, every_s: float, limit_s: float) -> float:
    """Send ``text`` a byte at a time; the seconds until the server closed the socket (or
    ``limit_s`` if it never did)."""
    started = time.monotonic()
    sock.settimeout(every_s)
    for byte in text:
        try:
            sock.send(bytes([byte]))
            if sock.recv(1) == b"":
                return time.monotonic() - started
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        if time.monotonic() - started > limit_s:
            break
    return limit_s


SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"


def test_a_slow_first_head_is_cut_off(strict_server) -> None:
    with connect(strict_server) as sock:
        took = trickle_until_closed(sock, SLOW_HEAD, 1.0, HEAD_TIMEOUT_S + 6)
    assert took <= HEAD_TIMEOUT_S + 2, took


def test_a_slow_head_on_a_kept_alive_connection_is_cut_off(strict_server) -> None:
    """After one request, the next head sent a byte a second is cut off too."""
    with connect(strict_server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_response(sock)[0] == 200
        took = trickle_until_closed(sock, SLOW_HEAD, 1.0, HEAD_TIMEOUT_S + 6)
    assert took <= HEAD_TIMEOUT_S + 2, took


def test_an_oversized_header_is_431_without_a_traceback(strict_server) -> None:
    before = len(strict_server.log)
    line = b"X-Big: " + b"b" * 9 * 1024
    for _ in range(5):
        with connect(strict_server) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + line + b"\r\n\r\n")
            data = read_all(sock)
        assert data.startswith(b"HTTP/1.1 431"), data[:100]
    # On a kept-alive connection (aiohttp parses the later heads): refused, no traceback.
    with connect(strict_server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_response(sock)[0] == 200
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + line + b"\r\n\r\n")
        data = read_all(sock)
        assert re.match(rb"HTTP/1\.[01] 4(00|31)", data), data[:100]
    assert http_get(strict_server, "/healthz")[0] == 200
    time.sleep(0.5)
    logged = strict_server.log[before:]
    assert not any("Traceback" in entry for entry in logged), "".join(logged)
    assert len(logged) <= 6, "".join(logged)  # at most one short line per bad request
    assert all(len(entry) < 300 for entry in logged), "".join(logged)


# -- DNS rebinding ----------------------------------------------------------------------------


def test_a_rebound_host_name_cannot_open_a_websocket(strict_server) -> None:
    """``Host: evil`` with ``Origin: http://evil`` (a DNS-rebinding page) is refused; the
    node's own loopback origin is accepted; a client without Origin is not affected."""
    host, port = address(strict_server)
    for evil in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}"):
        assert handshake_status(strict_server, evil, f"http://{evil}") == 403, evil
    assert handshake_status(strict_server, f"{host}:{port}", f"http://{host}:{port}") == 101
    assert handshake_status(strict_server, f"localhost:{port}", f"http://localhost:{port}") == 101
    assert handshake_status(strict_server, f"{host}:{port + 1}", f"http://{host}:{port + 1}") == 403
    assert handshake_status(strict_server, "anything", None) == 101


def test_the_public_origin_is_the_one_accepted(redis_server) -> None:
    args = ("--public-origin", "https://games.example")
    with served(redis_server.url, {}, args) as server:
        host, port = address(server)
        assert handshake_status(server, "games.example", "https://games.example") == 101
        assert handshake_status(server, "evil.example", "http://evil.example") == 403
        # With a public origin configured, the loopback address is no longer the site.
        assert handshake_status(server, f"{host}:{port}", f"http://{host}:{port}") == 403


# -- information ------------------------------------------------------------------------------


async def test_no_host_name_or_process_id_in_unauthenticated_answers(redis_server) -> None:
    with served(redis_server.url, {}, ("--workers", "1")) as server:
        hostname = socket.gethostname()
        pid = str(server.process.pid)
        texts = {}
        deadline = time.monotonic() + 15
        while True:  # until the worker has beaten (its name would be in the status)
            texts["/api/status"] = http_get(server, "/api/status")[1].decode()
            if json.loads(texts["/api/status"])["workers"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert json.loads(texts["/api/status"])["workers"]
        texts["/healthz"] = http_get(server, "/healthz")[1].decode()
        async with await KibitzClient.open(server.http_url) as client:
            texts["welcome"] = json.dumps(client.welcome)
        for where, text in texts.items():
            assert hostname not in text, (where, text)
            assert not re.search(rf"\b{pid}\b", text), (where, text)
        node = json.loads(texts["/healthz"])["node"]
        assert json.loads(texts["welcome"])["node"] == node  # one opaque id per node
        assert node in json.loads(texts["/api/status"])["nodes"]


# -- slow readers -----------------------------------------------------------------------------


def read_frames(data: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """Whole unmasked frames in ``data``, and the incomplete rest."""
    frames, at = [], 0
    while len(data) - at >= 2:
        opcode, size, head = data[at] & 0x0F, data[at + 1] & 0x7F, 2
        if size == 126:
            if len(data) - at < 4:
                break
            (size,) = struct.unpack("!H", data[at + 2 : at + 4])
            head = 4
        elif size == 127:
            if len(data) - at < 10:
                break
            (size,) = struct.unpack("!Q", data[at + 2 : at + 10])
            head = 10
        if len(data) - at < head + size:
            break
        frames.append((opcode, data[at + head : at + head + size]))
        at += head + size
    return frames, data[at:]


async def test_a_client_that_stops_reading_gets_a_1013_close_frame(strict_server) -> None:
    """A client sends many requests with big answers and reads nothing. Once the node gives
    up on it (after KIBITZ_SLOW_CLIENT_S), it appends a 1013 close frame after whole frames;
    a client that reads again a few seconds later gets every frame whole, then the close.

    The answers must outgrow the kernel's buffers, or the node never feels the client stop:
    a loopback socket's send buffer grows to 4 MB (``tcp_wmem``), and the client's receive
    buffer is set small. Each ``watch`` answer carries the room's whole spectator chat (its
    KEPT lines of MAX_CHAT characters, about 37 KB), and 400 of them are asked for: about
    15 MB, over three times what the kernel can hold."""
    server = strict_server
    async with await KibitzClient.open(server.http_url) as a:
        room = (await a.create("tictactoe", seat=0))["room"]

        async def talk() -> None:  # one connection says its RATE_LINES longest lines
            async with await KibitzClient.open(server.http_url) as talker:
                await talker.watch(room)
                for _ in range(RATE_LINES):
                    await talker.chat(room, "y" * MAX_CHAT)

        await asyncio.gather(*(talk() for _ in range(-(-KEPT // RATE_LINES))))
    sock = connect(server, rcvbuf=4096)
    try:
        host, port = address(server)
        sock.sendall(upgrade(f"{host}:{port}", None))
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101")
        watch = json.dumps({"type": "watch", "room": room}).encode()
        frame = Frame(Opcode.TEXT, watch).serialize(mask=True, extensions=[])
        sock.sendall(frame * 400)  # and from here on, read nothing
        before = len(server.log)
        deadline = time.monotonic() + 20
        while not any("stopped reading" in entry for entry in server.log[before:]):
            assert time.monotonic() < deadline, "the node never gave up on the client"
            await asyncio.sleep(0.2)
        await asyncio.sleep(4.0)  # longer than the 2 s the closing handshake used to get
        data = await asyncio.to_thread(read_until_close_frame, sock, 10.0)
    finally:
        sock.close()
    frames, rest = read_frames(data)
    assert rest == b"", f"the stream ended in the middle of a frame ({len(rest)} bytes left)"
    assert frames and frames[-1][0] == Opcode.CLOSE, [op for op, _ in frames[-3:]]
    assert struct.unpack("!H", frames[-1][1][:2])[0] == 1013
    assert all(op == Opcode.TEXT for op, _ in frames[:-1])


def read_until_close_frame(sock: socket.socket, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (bounded in time),
    answering its close frame as soon as that has come whole (so the server ends the
    connection then, not when its closing handshake times out)."""
    sock.settimeout(timeout)
    chunks: list[bytes] = []
    rest, answered = b"", False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        frames, rest = read_frames(rest + chunk)
        if not answered and any(opcode == Opcode.CLOSE for opcode, _ in frames):
            close = Frame(Opcode.CLOSE, struct.pack("!H", 1000))
            sock.sendall(close.serialize(mask=True, extensions=[]))
            answered = True
    return b"".join(chunks)


# -- configuration ----------------------------------------------------------------------------


def test_origins_are_parsed_strictly_and_compared_as_browsers_send_them() -> None:
    assert parse_origin("HTTPS://Games.Example:443/") == "https://games.example"
    assert parse_origin("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    bad_origins = [
        "games.example", "ftp://games.example", "https://games.example/play",
        "https://user:pw@games.example", "https://games.example?x=1", "https://",
    ]  # fmt: skip
    for bad in bad_origins:
        with pytest.raises(ValueError):
            parse_origin(bad)
    assert listening_origins("127.0.0.1", 8000) == {
        "http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000",
    }  # fmt: skip
    assert listening_origins("0.0.0.0", 80) >= {"http://localhost", "http://127.0.0.1"}
    assert listening_origins("192.0.2.7", 8000) == {"http://192.0.2.7:8000"}


def test_serve_refuses_a_bad_public_origin(redis_server) -> None:
    with pytest.raises(RuntimeError, match="not an origin"):
        start_server(redis_server.url, args=("--public-origin", "games.example"))


def test_no_redis_url_on_a_command_line(redis_server) -> None:
    """``kibitz serve`` given its Redis URL (password included) in the environment puts it
    on no command line: neither its own nor its local workers' (which ``ps`` shows to
    every user)."""
    assert ":" in urlsplit(redis_server.url).netloc.split("@")[0]  # the URL has a password
    flags = ["--host", "127.0.0.1", "--port", "0", "--workers", "2"]
    process, _, _ = spawn_server(flags, {**UNLIMITED, "KIBITZ_REDIS_URL": redis_server.url})
    try:
        deadline = time.monotonic() + 15
        while len(children(process.pid)) < 2:
            assert time.monotonic() < deadline, "the local workers did not start"
            time.sleep(0.2)
        for pid in [process.pid, *children(process.pid)]:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                words = cmdline.read().decode().split("\0")
            assert not [w for w in words if "redis://" in w or "rediss://" in w], words
    finally:
        process.terminate()
        process.wait(timeout=15)


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as listed:
        return [int(child) for child in listed.read().split()]


# -- WebSocket slots --------------------------------------------------------------------------


def bad_version_upgrade(host: str) -> bytes:
    """A WebSocket upgrade with a version the server does not speak."""
    return upgrade(host, None).replace(b"Sec-WebSocket-Version: 13", b"Sec-WebSocket-Version: 99")


def test_requests_that_are_not_websockets_use_up_no_websocket_slot(redis_server) -> None:
    """250 plain ``GET /ws`` (no Upgrade) and 30 upgrades with a bad version on kept-alive
    connections (both reach aiohttp's /ws route), and 30 bad-version upgrades on fresh
    connections (the edge's): none is a WebSocket, so none may keep one of the address's
    200 WebSocket places; a real WebSocket from the address still opens afterwards."""
    env = {"KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "200"}
    with served(redis_server.url, env) as server:
        host, port = address(server)
        for _ in range(250):
            status, _ = http_get(server, "/ws")
            assert 400 <= status < 500, status
        with connect(server) as sock:
            for _ in range(30):
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                assert read_response(sock)[0] == 200
                sock.sendall(bad_version_upgrade(f"{host}:{port}"))
                status, _ = read_response(sock)
                assert 400 <= status < 500, status
        for _ in range(30):
            with connect(server) as sock:
                sock.sendall(bad_version_upgrade(f"{host}:{port}"))
                assert int(read_all(sock, 5).split()[1]) >= 400
        assert handshake_status(server, f"{host}:{port}", None) == 101


# -- the node's descriptor budget -------------------------------------------------------------

NOFILE = 600  # the node's open-files limit in the test below (a cap of 600 - 256)


def spawn_with_nofile(redis_url: str, nofile: int) -> ServerProcess:
    """``kibitz serve`` as the suite starts it, under an open-files limit of ``nofile``."""
    import resource
    import subprocess
    import sys
    import threading

    from kibitz.server.cli.serve import LISTENING
    from tests.conftest import UNLIMITED

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    limits = {"KIBITZ_MAX_SOCKETS_PER_ADDRESS": "", "KIBITZ_MAX_CONNECTIONS_PER_ADDRESS": "200"}
    env = {**os.environ, "KIBITZ_LOG": "WARNING", **UNLIMITED, **limits}
    process = subprocess.Popen(
        [sys.executable, "-m", "kibitz.server.cli", "serve", "--host", "127.0.0.1", "--port", "0",
         "--redis", redis_url, "--workers", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, preexec_fn=limit,
    )  # fmt: skip
    assert process.stdout is not None
    log: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        log.append(line)
        match = LISTENING.search(line)
        if match:
            threading.Thread(target=log.extend, args=(process.stdout,), daemon=True).start()
            return ServerProcess(process, match.group(1), log)
    process.kill()
    process.wait()
    raise RuntimeError("kibitz serve did not start:\n" + "".join(log))


def healthz_status(server: ServerProcess, source: str) -> int | None:
    """/healthz from ``source``; None if the node did not answer (reset, or silence)."""
    try:
        with connect(server, source) as sock:
            sock.settimeout(3)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = read_all(sock, 3)
        return int(data.split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_the_node_keeps_a_reserve_of_open_files(redis_server) -> None:
    """Under ``ulimit -n 600``, three addresses open 150 idle sockets each (each under its
    own cap of 264): the node holds at most 600 - 256 client sockets, closing the rest at
    accept (the last eighth of them kept for addresses holding few), so that /healthz
    from a fourth address is still answered."""
    server = spawn_with_nofile(redis_server.url, NOFILE)
    socks: list[socket.socket] = []
    try:
        for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            socks += [connect(server, source) for _ in range(150)]
        time.sleep(1.0)
        assert healthz_status(server, "127.0.0.9") == 200
        assert sum(is_closed(s) for s in socks) >= len(socks) - (NOFILE - 256)
        assert "Traceback" not in "".join(server.log)
    finally:
        for sock in socks:
            sock.close()
        server.stop()


def test_an_ipv6_network_counts_as_one_address() -> None:
    """A host picks addresses in its /64 at will: the per-address limits (the socket cap
    at accept and the cluster-wide ones) count the /64, not each address."""
    from kibitz.server.domain.addresses import address_group
    from kibitz.server.gateway.limits import client_address

    a, b = "2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:fffe"
    assert address_group(a) == address_group(b) == "2001:db8:1:2::/64"
    assert address_group("2001:db8:1:3::1") != address_group(a)
    assert address_group("::ffff:192.0.2.7") == "192.0.2.7"
    assert address_group("192.0.2.7") == "192.0.2.7"
    assert client_address(b, {}, frozenset()) == "2001:db8:1:2::/64"
    proxied = {"X-Forwarded-For": "198.51.100.1, 2001:db8:1:2::99"}
    assert client_address("127.0.0.3", proxied, frozenset({"127.0.0.3"})) == "2001:db8:1:2::/64"
