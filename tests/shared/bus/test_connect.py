"""Choosing the client and the key layout from a URL (shared/bus/connect.py), with no
Redis: a ``redis+cluster://`` URL parsed, built from ``--redis-cluster``'s nodes, refused
when malformed; the layout each URL sets (``keys.configure``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kibitz.shared.bus import keys
from kibitz.shared.bus.connect import (
    ClusterRedis,
    ClusterURL,
    blocking_client,
    bus_errors,
    cluster_url,
    command_client,
    configure_keys,
    is_cluster_url,
)
from kibitz.shared.bus.errors import BusConnectionError
from kibitz.shared.bus.link import Address, LinkedRedis
from kibitz.workers.worker import without_password


@pytest.fixture(autouse=True)
def single_layout() -> Iterator[None]:
    """Every test leaves the process on the single-Redis layout, as the others expect."""
    yield
    keys.configure(0)


def test_only_the_cluster_schemes_name_a_cluster() -> None:
    assert is_cluster_url("redis+cluster://h:1")
    assert is_cluster_url("rediss+cluster://h:1")
    for url in ("redis://h:1", "rediss://h:1/0", "unix:///run/redis.sock", "http://h"):
        assert not is_cluster_url(url)


def test_a_cluster_url_names_nodes_credentials_and_groups() -> None:
    parsed = ClusterURL.parse("redis+cluster://:s%40cret@a.example:7000,b.example:7001/?groups=16")
    assert parsed.nodes == (("a.example", 7000), ("b.example", 7001))
    assert (parsed.username, parsed.password, parsed.tls) == (None, "s@cret", False)
    assert parsed.groups == 16
    user = ClusterURL.parse("rediss+cluster://kibitz:pw@[::1]:7000,10.0.0.2")
    assert user.nodes == (("::1", 7000), ("10.0.0.2", 6379))
    assert (user.username, user.password, user.tls) == ("kibitz", "pw", True)
    assert user.groups == keys.DEFAULT_GROUPS
    assert user.address("10.0.0.2", 6379) == Address(
        host="10.0.0.2", port=6379, username="kibitz", password="pw", tls=True
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://h:1", "not a Redis Cluster URL"),
        ("redis+cluster://", "at least one host:port"),
        ("redis+cluster://h:1/2", "one database"),
        ("redis+cluster://h:1?group=3", "unknown option"),
        ("redis+cluster://h:1?groups=0", "groups must be 1 to"),
        (f"redis+cluster://h:1?groups={keys.MAX_GROUPS + 1}", "groups must be 1 to"),
        ("redis+cluster://h:1?groups=many", "groups must be a number"),
        ("redis+cluster://h:port", "not a host:port"),
    ],
)
def test_a_malformed_cluster_url_is_refused(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ClusterURL.parse(url)


def test_redis_cluster_nodes_make_the_same_url() -> None:
    assert cluster_url(["10.0.0.1:7000", "10.0.0.2:7000"]) == (
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7000"
    )
    # Credentials and TLS come from the first URL that has them; a node named twice once.
    assert cluster_url(["redis://:p%2Fw@a:7000", "b:7001", "a:7000"]) == (
        "redis+cluster://:p%2Fw@a:7000,b:7001"
    )
    assert (
        cluster_url(["rediss://u:pw@a:7000"], groups=8) == "rediss+cluster://u:pw@a:7000?groups=8"
    )
    # A whole cluster URL given to --redis-cluster keeps its groups; one string may hold
    # several nodes separated by spaces (an environment variable's list).
    assert cluster_url(["redis+cluster://:pw@a:1,b:2?groups=32", "c:3"]) == (
        "redis+cluster://:pw@a:1,b:2,c:3?groups=32"
    )
    assert cluster_url(["a:1 b:2"]) == "redis+cluster://a:1,b:2"
    parsed = ClusterURL.parse(cluster_url(["redis://:p%2Fw@a:7000"]))
    assert parsed.password == "p/w"
    with pytest.raises(ValueError):
        cluster_url([])
    with pytest.raises(ValueError, match="Unix socket"):
        cluster_url(["unix:///run/redis.sock"])


async def test_the_url_chooses_the_client_and_the_key_layout() -> None:
    cluster = command_client("redis+cluster://:pw@127.0.0.1:1?groups=8", pool_size=3)
    try:
        assert isinstance(cluster, ClusterRedis)
        assert keys.grouped() and keys.group_count() == 8
        assert keys.JOBS == "kibitz:{c}:jobs"
        assert cluster.url.password == "pw"
    finally:
        await cluster.aclose()
    single = command_client("redis://127.0.0.1:1/0")
    try:
        assert isinstance(single, LinkedRedis)
        assert not keys.grouped() and keys.JOBS == "kibitz:jobs"
        assert keys.archive(0) == "kibitz:archive" and keys.live(0) == "kibitz:rooms:live"
    finally:
        await single.aclose()
    assert configure_keys("redis+cluster://h:1") is not None
    assert keys.group_count() == keys.DEFAULT_GROUPS
    assert configure_keys("unix:///run/redis.sock") is None
    assert not keys.grouped()


def test_logs_show_a_cluster_url_without_its_password() -> None:
    shown = without_password("redis+cluster://:hunter2@a:7000,b:7001?groups=16")
    assert shown == "redis+cluster://a:7000,b:7001?groups=16"
    assert "hunter2" not in without_password("redis+cluster://:hunter2@a:7000/bad")
    assert without_password("redis://:hunter2@a:6379/0") == "redis://a:6379/0"


async def test_an_unreachable_cluster_is_a_lost_connection_not_a_crash() -> None:
    """redis-py's cluster errors are not RedisErrors; the bus's callers catch only those."""
    client = command_client("redis+cluster://127.0.0.1:1", timeout_s=0.5)
    try:
        with pytest.raises(BusConnectionError, match="cannot be connected"):
            await client.ping()
        with pytest.raises(BusConnectionError):
            await client.get("kibitz:{c}:x")
    finally:
        await client.aclose()
    blocking = blocking_client("redis+cluster://127.0.0.1:1", 0.5, 0.5)  # made lazily: no error
    try:
        with pytest.raises(BusConnectionError):
            blocking.get("kibitz:{c}:x")
    finally:
        blocking.close()


def test_a_write_to_a_closed_transport_is_a_lost_connection() -> None:
    """uvloop refuses a write to a pooled connection whose node was killed with a
    RuntimeError: the bus's callers see a lost connection (and retry), not a bug."""
    uvloop_says = "unable to perform operation on <TCPTransport closed=True>; the handler is closed"
    with pytest.raises(BusConnectionError, match="the handler is closed"), bus_errors():
        raise RuntimeError(uvloop_says)
    with pytest.raises(RuntimeError, match="something else"), bus_errors():
        raise RuntimeError("something else")
