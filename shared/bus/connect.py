"""How a process connects to Redis: :func:`command_client` (a node's) and
:func:`blocking_client` (a worker's), on a single Redis or a Redis Cluster.

On a single Redis (``redis://``, ``rediss://``, ``unix://``) a node's one-shot commands
share one pipelined connection (the :class:`~kibitz.shared.bus.link.RedisLink`); blocking
reads and transactions use a bounded pool; every command has a timeout; and which failures
are retried (a broken connection, on a fresh one) and which are not (a timeout: the
command may have run).

On a Redis Cluster (``redis+cluster://[user:password@]host:port,host:port[/?groups=N]``,
or ``rediss+cluster://`` for TLS) the client is a :class:`ClusterRedis`: redis-py's
asyncio client in type (every part of the bus takes an ``aioredis.Redis``), whose commands,
scripts and pipelines run through one ``redis.asyncio.cluster.RedisCluster``, which sends
each to the primary that serves its key's slot and follows the cluster when slots move or
a replica is promoted. Its pool is bounded per cluster node (``pool_size`` connections to
each), and a command that finds them all busy waits for one (up to ``wait_s``) as on a
single Redis. The same rules of retry hold: a broken connection is retried (on the cluster
as the client then sees it), a timeout is not.

Both choose the key layout of the process (``keys.configure``): 0 groups on a single
Redis, ``?groups=N`` (default ``keys.DEFAULT_GROUPS``) on a cluster. Every process of one
deployment must use the same N: it decides where each room's keys live.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar
from urllib.parse import parse_qs, quote, unquote

import redis
import redis.asyncio as aioredis
import redis.cluster as sync_cluster
from redis._parsers import AsyncCommandsParser
from redis.asyncio import BlockingConnectionPool
from redis.asyncio import cluster as async_cluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.commands.core import AsyncScript, Script
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    CrossSlotTransactionError,
    InvalidPipelineStack,
    MaxConnectionsError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)

from kibitz.shared.bus import keys
from kibitz.shared.bus.link import POOLED, Address, LinkedRedis, RedisLink, pack

log = logging.getLogger(__name__)

#: The clients the bus runs on, named here so that code outside the bus, which hands
#: them over, never imports redis-py: a node's (asyncio) and a worker's (blocking).
AsyncClient: TypeAlias = aioredis.Redis
BlockingClient: TypeAlias = redis.Redis

REDIS_TIMEOUT_S = 5.0  # a command's timeout
REDIS_POOL_SIZE = 128  # Redis connections per node for commands (the listener has its own)
REDIS_POOL_WAIT_S = 20.0  # longest wait for a free pooled connection

#: A worker's connection: its reads block for less than this; past it Redis itself hangs.
BLOCKING_SOCKET_TIMEOUT_S = 10.0
BLOCKING_CONNECT_TIMEOUT_S = 5.0
BLOCKING_POOL_SIZE = 8  # a worker's connections per cluster node (it runs two threads)

CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")
#: While commands fail on a cluster node (a connection refused or broken, a timeout: a
#: primary killed or frozen, its replica about to take over) the slot map is read again
#: in the background at most this often, so that the commands go to the promoted replica
#: within about this long of its promotion.
REFRESH_EVERY_S = 0.5
#: How often a command that found every pooled connection of a cluster node busy looks
#: again (it gives up after ``wait_s``).
POOL_POLL_S = (0.002, 0.05)


# --- the URL of a Redis Cluster ----------------------------------------------------------
def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster (``redis+cluster://`` or ``rediss+cluster://``)."""
    return url.startswith(CLUSTER_SCHEMES)


@dataclass(frozen=True)
class ClusterURL:
    """What a ``redis+cluster://`` URL says: some of the cluster's nodes (any will do: the
    client asks one for the rest), the credentials, TLS, and the number of slot groups."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None = None
    password: str | None = None
    tls: bool = False
    groups: int = keys.DEFAULT_GROUPS

    @classmethod
    def parse(cls, url: str) -> ClusterURL:
        """``redis+cluster://[user:password@]host:port,host:port[/][?groups=N]``
        (``ValueError`` for anything else)."""
        if not is_cluster_url(url):
            raise ValueError(f"not a Redis Cluster URL (redis+cluster://...): {url!r}")
        tls = url.startswith("rediss+")
        rest = url.split("://", 1)[1]
        rest, _, query = rest.partition("?")
        rest, _, path = rest.partition("/")
        if path:
            raise ValueError("a Redis Cluster has one database: no /DB in its URL")
        userinfo, at, hosts = rest.rpartition("@")
        username = password = None
        if at:
            user, colon, secret = userinfo.partition(":")
            username = unquote(user) or None
            password = unquote(secret) if colon else None
        nodes = tuple(_host_port(item) for item in hosts.split(",") if item.strip())
        if not nodes:
            raise ValueError(f"a Redis Cluster URL names at least one host:port: {url!r}")
        groups = keys.DEFAULT_GROUPS
        for name, values in parse_qs(query, keep_blank_values=True, strict_parsing=False).items():
            if name != "groups":
                raise ValueError(f"unknown option {name!r} in a Redis Cluster URL (groups=N)")
            try:
                groups = int(values[-1])
            except ValueError:
                raise ValueError(f"groups must be a number, not {values[-1]!r}") from None
            if not 1 <= groups <= keys.MAX_GROUPS:
                raise ValueError(f"groups must be 1 to {keys.MAX_GROUPS}, not {groups}")
        return cls(nodes, username, password, tls, groups)

    def address(self, host: str, port: int) -> Address:
        """Where to reach one node of this cluster (for a connection of one's own)."""
        return Address(
            host=host, port=int(port), username=self.username, password=self.password,
            tls=self.tls,
        )  # fmt: skip


def _host_port(item: str) -> tuple[str, int]:
    item = item.strip()
    if item.startswith("["):  # [IPv6]:port
        host, _, port = item[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = item.rpartition(":")
        if not host:
            host, port = port, ""
    try:
        return host or "127.0.0.1", int(port or 6379)
    except ValueError:
        raise ValueError(f"not a host:port: {item!r}") from None


def cluster_url(nodes: Iterable[str], groups: int | None = None) -> str:
    """The ``redis+cluster://`` URL of the nodes given as ``host:port``, ``redis://`` or
    ``rediss://`` URLs (their credentials, TLS and ``?groups=N`` carry over; the first
    that has credentials gives them), or ``redis+cluster://`` URLs (their nodes joined):
    what ``--redis-cluster`` makes of its arguments."""
    hosts: list[str] = []
    userinfo = ""
    tls = False
    found_groups: int | None = None
    for item in nodes:
        for part in item.split() if " " in item else [item]:
            if is_cluster_url(part):
                parsed = ClusterURL.parse(part)
                pairs = list(parsed.nodes)
                user, secret, part_tls = parsed.username, parsed.password, parsed.tls
                if "groups=" in part:
                    found_groups = parsed.groups
            elif "://" in part:
                address = Address.from_url(part)
                if address.path:
                    raise ValueError("a Redis Cluster is reached over TCP, not a Unix socket")
                pairs = [(address.host, address.port)]
                user, secret, part_tls = address.username, address.password, address.tls
            else:
                pairs = [_host_port(part)]
                user = secret = None
                part_tls = False
            tls = tls or part_tls
            if not userinfo and secret is not None:
                userinfo = f"{quote(user or '', safe='')}:{quote(secret, safe='')}@"
            hosts += [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in pairs]
    if not hosts:
        raise ValueError("a Redis Cluster needs at least one host:port")
    scheme = CLUSTER_SCHEMES[1] if tls else CLUSTER_SCHEMES[0]
    groups = groups if groups is not None else found_groups
    query = f"?groups={groups}" if groups is not None else ""
    return f"{scheme}{userinfo}{','.join(dict.fromkeys(hosts))}{query}"


def configure_keys(url: str) -> ClusterURL | None:
    """Choose the process's key layout for ``url`` (see the module doc); its parsed
    cluster URL, or None for a single Redis."""
    if is_cluster_url(url):
        parsed = ClusterURL.parse(url)
        keys.configure(parsed.groups)
        return parsed
    keys.configure(0)
    return None


# --- a node's client ---------------------------------------------------------------------
def command_client(
    redis_url: str,
    pool_size: int = REDIS_POOL_SIZE,
    timeout_s: float = REDIS_TIMEOUT_S,
    wait_s: float = REDIS_POOL_WAIT_S,
) -> LinkedRedis | ClusterRedis:
    """The node's Redis client for commands (it also sets the key layout: ``keys.configure``).

    On a single Redis its one-shot commands (a move's commit, presence, chat, limits)
    share one pipelined connection. Blocking reads and transactions use a pool of at most
    ``pool_size`` connections that waits for a free one (up to ``wait_s``) instead of
    failing or growing without limit. On a Redis Cluster, a :class:`ClusterRedis` with at
    most ``pool_size`` connections to each cluster node, waiting the same way.

    Commands time out (``timeout_s``), so a hung Redis gives errors, not hung handlers. A
    command whose connection broke (a Redis restart leaves stale connections) is retried
    on a fresh one; a command that timed out is not, since it may have run: every write
    is versioned or counted, and running it twice could count twice.
    """
    parsed = configure_keys(redis_url)
    if parsed is not None:
        return ClusterRedis(parsed, pool_size, timeout_s, wait_s)
    pool = BlockingConnectionPool.from_url(
        redis_url,
        max_connections=pool_size,
        timeout=wait_s,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(
            ExponentialBackoff(cap=0.5, base=0.05), 2, supported_errors=(aioredis.ConnectionError,)
        ),
    )
    link = RedisLink(Address.from_url(redis_url), timeout_s, wait_s=wait_s)
    return LinkedRedis(pool, link)


async def ping(client: AsyncClient) -> None:
    """Check that Redis answers (raises the bus's errors if it does not)."""
    await client.ping()


@contextlib.contextmanager
def bus_errors() -> Iterator[None]:
    """redis-py's cluster errors that are not ``RedisError``s as the bus's errors
    (errors.py), which every caller handles: a cluster it cannot reach, or no primary
    serving a slot (a failover under way), as a lost connection; a command it cannot send
    (keys in several slots: Redis would answer CROSSSLOT) as an error reply."""
    try:
        yield
    except RedisClusterException as exc:
        raise _bus_error(exc) from exc
    except RuntimeError as exc:
        if not closed_transport(exc):
            raise
        raise redis.ConnectionError(f"Redis Cluster: {exc}") from exc


def closed_transport(exc: BaseException) -> bool:
    """Whether ``exc`` is uvloop's refusal to write to a connection already closed (a
    pooled connection to a node that was killed, picked before redis-py noticed): a lost
    connection, not a bug."""
    return isinstance(exc, RuntimeError) and "unable to perform operation on" in str(exc)


#: What redis-py's cluster client says of a command it cannot send as it is (the
#: caller's mistake, as Redis's CROSSSLOT is); anything else it raises is about reaching
#: the cluster (no node answers, a slot with no primary).
_REFUSED = ("same key slot", "No way to dispatch", "Invalid args", "not supported")


def _bus_error(exc: RedisClusterException) -> redis.RedisError:
    refused = isinstance(exc, (CrossSlotTransactionError, InvalidPipelineStack)) or (
        not isinstance(exc, SlotNotCoveredError) and any(m in str(exc) for m in _REFUSED)
    )
    if refused:
        return ResponseError(f"Redis Cluster: {exc}")
    return redis.ConnectionError(f"Redis Cluster: {exc}")


#: The commands whose keys redis-py would ask a node for (``COMMAND GETKEYS``: they are
#: "movablekeys"), which the bus sends often, and whose keys are read here instead.
STREAM_READS = ("XREADGROUP", "XREAD")
_CROSS_SLOT = "all keys must map to the same key slot"  # redis-py's words (see _REFUSED)


def stream_read_keys(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """The stream names of an ``XREADGROUP``/``XREAD`` (``args[0]`` the command): the
    first half of the arguments after ``STREAMS``; None for any other command, or one
    too malformed to tell (redis-py then asks a node, which refuses it).

    redis-py's cluster clients ask a node ``COMMAND GETKEYS`` for every command whose
    keys move (one serial round trip, even inside a pipeline: a pipelined read of 64
    streams took 128 of them, all on one primary); these two are read here."""
    if not args:
        return None
    name = args[0].decode() if isinstance(args[0], bytes) else args[0]
    if not isinstance(name, str) or name.upper() not in STREAM_READS:
        return None
    # XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...
    # (the group and consumer are names: one may be "streams"; COUNT and BLOCK take numbers)
    start = 4 if name.upper() == "XREADGROUP" else 1
    for at in range(start, len(args)):
        word = args[at]
        word = word.decode(errors="replace") if isinstance(word, bytes) else word
        if isinstance(word, str) and word.upper() == "STREAMS":
            rest = args[at + 1 :]
            if not rest or len(rest) % 2:
                return None
            return tuple(rest[: len(rest) // 2])
    return None


class _AsyncCluster(async_cluster.RedisCluster):
    """redis-py's cluster client retrying what a broken connection or a failover fails,
    never a timeout (the command may have run), and taking the keys of the stream reads
    from their arguments, not from a node (:func:`stream_read_keys`)."""

    ERRORS_ALLOW_RETRY = (aioredis.ConnectionError, ClusterDownError, SlotNotCoveredError)  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands_parser = _CommandsParser()

    # redis-py calls it with the whole command (``_determine_slot(*args)``), for a
    # command, for each command of a pipeline (twice: its policy, then its node) and for
    # the links (ClusterRedis._link_for).
    async def _determine_slot(self, command: str, *args: Any) -> int:
        names = stream_read_keys((command, *args))
        if names is None:
            return await super()._determine_slot(command, *args)
        slots = {self.keyslot(name) for name in names}
        if len(slots) != 1:
            raise RedisClusterException(f"{command} - {_CROSS_SLOT}")
        return slots.pop()


class _CommandsParser(AsyncCommandsParser):
    """redis-py's table of commands (``COMMAND``), read once: redis-py reads it again at
    every refresh of the slot map, from the first primary it knows, and a refresh fails
    (every command waiting on it fails) while that primary is frozen or gone."""

    async def initialize(self, node: Any = None) -> None:
        if node is not None:
            self.node = node
        if not self.commands:
            await super().initialize()


class _LocalStreamKeys:
    """The blocking cluster client's and its pipelines' key lookup (which
    ``determine_slot`` and a pipeline's routing both call), local for the stream reads."""

    def _get_command_keys(self, *args: Any) -> Any:
        names = stream_read_keys(args)
        if names is None:
            return super()._get_command_keys(*args)  # type: ignore[misc]
        return list(names)


class _SyncPipeline(_LocalStreamKeys, sync_cluster.ClusterPipeline):
    """redis-py's blocking cluster pipeline, with :class:`_LocalStreamKeys`."""


class _SyncCluster(_LocalStreamKeys, sync_cluster.RedisCluster):
    """The same, blocking."""

    ERRORS_ALLOW_RETRY = (redis.ConnectionError, ClusterDownError, SlotNotCoveredError)  # type: ignore[assignment]

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)  # type: ignore[no-untyped-call]
        # redis-py builds a ClusterPipeline (a RedisCluster of its own, which looks keys
        # up itself): the same object, with the local key lookup (no state of its own).
        pipe.__class__ = _SyncPipeline
        return pipe


class _NoConnection(aioredis.Connection):
    """The connection class of a :class:`ClusterRedis`'s own (unused) pool: every command
    goes to the cluster, so one made here is a bug, not a connection to localhost."""

    async def connect(self) -> None:
        raise RedisClusterException("a ClusterRedis has no connection of its own")


class _NoSyncConnection(redis.Connection):
    def connect(self) -> None:
        raise RedisClusterException("a BlockingClusterRedis has no connection of its own")


def _cluster_options(
    parsed: ClusterURL,
    timeout_s: float,
    connect_s: float,
    pool_size: int,
    retry: type[Retry] | type[redis.retry.Retry],
) -> dict[str, Any]:
    """A cluster client's options, asyncio's or the blocking one's (``retry``: its
    ``Retry`` class): at most ``pool_size`` connections a node, a command retried three
    times with a short backoff, and ``parsed``'s credentials and TLS."""
    return {
        "max_connections": pool_size,
        "retry": retry(ExponentialBackoff(cap=0.5, base=0.05), 3),
        "username": parsed.username,
        "password": parsed.password,
        "ssl": parsed.tls,
        "decode_responses": True,
        "socket_timeout": timeout_s,
        "socket_connect_timeout": connect_s,
        # While a shard has no primary (a failover under way) the others are served: the
        # client keeps the slot map it gets, and only that shard's keys fail meanwhile.
        "require_full_coverage": False,
    }


class ClusterRedis(aioredis.Redis):
    """redis-py's asyncio client over a Redis Cluster (see the module doc).

    Its command methods and reply shapes are redis-py's ``Redis``'s (the bus's code is the
    same on both), and every command, script and pipeline goes through :attr:`redis_cluster`,
    a ``redis.asyncio.cluster.RedisCluster``. A command's keys must share a slot (Redis
    refuses CROSSSLOT); a pipeline with ``transaction=True`` too.

    For a connection of one's own (the hub's sharded subscriptions): :meth:`primaries`
    (where each primary is), :meth:`slot_owner` (the primary serving a key or channel),
    and :meth:`refresh_slots` after the cluster changed (a ``MOVED``, a failover).
    """

    redis_cluster: async_cluster.RedisCluster

    def __init__(
        self,
        url: ClusterURL,
        pool_size: int = REDIS_POOL_SIZE,
        timeout_s: float = REDIS_TIMEOUT_S,
        wait_s: float = REDIS_POOL_WAIT_S,
    ) -> None:
        # (No protocol given, as on the single path: redis-py 8 speaks RESP3 and gives
        # the replies their usual shapes, and so do the links, with these callbacks.)
        pool = aioredis.ConnectionPool(connection_class=_NoConnection, decode_responses=True)
        super().__init__(connection_pool=pool)
        self.url = url
        self.timeout_s = timeout_s
        self.wait_s = wait_s
        self.redis_cluster = _AsyncCluster(
            startup_nodes=[async_cluster.ClusterNode(host, port) for host, port in url.nodes],
            **_cluster_options(url, timeout_s, timeout_s, pool_size, Retry),
        )
        #: One pipelined connection per primary (by redis-py's node name), for the
        #: one-shot commands: as on a single Redis (link.py), most of a command's cost is
        #: around it, and a node sends thousands a second.
        self._links: dict[str, RedisLink] = {}
        self._refreshing: asyncio.Task[None] | None = None
        self._refreshed = 0.0

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return await self._execute(*args, **options)
        except RedisClusterException as exc:
            raise _bus_error(exc) from exc

    async def _execute(self, *args: Any, **options: Any) -> Any:
        name = args[0]
        if not isinstance(name, str) or NEVER_DECODE in options:
            return await self._pooled(*args, **options)
        words = (*name.split(), *args[1:]) if " " in name else args  # "SCRIPT LOAD"
        link = await self._link_for(words) if words[0].upper() not in POOLED else None
        if link is None:
            return await self._pooled(*args, **options)
        try:
            reply = await link.call(words)
        except (MovedError, AskError, TryAgainError, ClusterDownError):
            # The slot moved (or is moving, or the cluster is failing over): redis-py's
            # client follows the cluster, and updates the slot map the links are chosen by.
            return await self._pooled(*args, **options)
        except ResponseError:
            if EMPTY_RESPONSE in options:
                return options[EMPTY_RESPONSE]
            raise
        except aioredis.ConnectionError:
            # The node may be gone (a failover): read the slot map again (in the
            # background, while this goes on), and send the command through redis-py's
            # client, which asks the cluster where the slot is now and retries it there
            # (a connection error is retried, as on a single Redis).
            self._refresh_soon(link)
            await self._drop_link(link)
            return await self._pooled(*args, **options)
        except aioredis.TimeoutError:
            # Not retried (it may have run), but the node may hang for good (frozen, cut
            # off) while a replica takes its slots over: read the slot map again, in the
            # background, so that the next commands go where the slots are then.
            self._refresh_soon(link)
            raise
        options.pop(EMPTY_RESPONSE, None)
        options.pop("keys", None)
        callback = self.response_callbacks.get(name)
        if callback is None:
            return reply
        result = callback(reply, **options)
        return await result if inspect.isawaitable(result) else result

    async def _link_for(self, args: Sequence[Any]) -> RedisLink | None:
        """The link to the primary serving the command's keys, None for a command that
        redis-py must route (no key, several nodes, a slot not served now)."""
        cluster = self.redis_cluster
        if cluster._initialize:  # not yet, or again after a failure: ask the cluster
            await cluster.initialize()
        name = args[0].upper()
        try:
            if name in ("EVALSHA", "EVAL"):  # a script (most commands): its first key's slot
                if int(args[2]) < 1:
                    return None
                key = args[3]
                slot = key_slot(key if isinstance(key, bytes) else str(key).encode())
            elif cluster.command_flags.get(name) is not None:
                return None  # keyless, or sent to every primary (SCRIPT LOAD, PING...)
            else:
                slot = await cluster._determine_slot(*args)
            node = cluster.nodes_manager.get_node_from_slot(slot)
        except (RedisClusterException, ResponseError, ValueError, IndexError):
            return None
        link = self._links.get(node.name)
        if link is None:
            address = self.url.address(node.host, int(node.port))
            link = _ClusterLink(address, self.timeout_s, wait_s=self.wait_s)
            self._links[node.name] = link
        return link

    async def _drop_link(self, link: RedisLink) -> None:
        for name, held in list(self._links.items()):
            if held is link:
                del self._links[name]
        await link.aclose()

    async def _pooled(self, *args: Any, **options: Any) -> Any:
        """The command through redis-py's cluster client and its bounded pools."""
        started: float | None = None
        polls = 0
        while True:
            try:
                return await self.redis_cluster.execute_command(*args, **options)
            except MaxConnectionsError:  # every connection to that node busy: wait for one
                now = time.monotonic()
                started = now if started is None else started
                if now - started >= self.wait_s:
                    raise
                await asyncio.sleep(POOL_POLL_S[0] if polls < 10 else POOL_POLL_S[1])
                polls += 1
            except (aioredis.ConnectionError, aioredis.TimeoutError, ClusterDownError):
                # (a ConnectionError, as MaxConnectionsError is: that one first.) redis-py
                # tried the cluster as it knew it: read the slot map again soon (also for
                # the links, and if no other command comes to make it do so).
                self._refresh_soon()
                raise
            except RuntimeError as exc:
                if not closed_transport(exc):
                    raise
                self._refresh_soon()
                raise aioredis.ConnectionError(f"Redis Cluster: {exc}") from exc

    # redis-py's asyncio client returns an AsyncScript too; its stubs say Script.
    def register_script(self, script: str | bytes | memoryview) -> AsyncScript:  # type: ignore[override]
        return ClusterScript(self, script)

    # A cluster pipeline, not a Pipeline: the same methods (queued commands, execute).
    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        """A pipeline over the cluster: without a transaction its commands may touch any
        slots (sent to each node in one go); with one, every key must share a slot."""
        pipe = self.redis_cluster.pipeline(transaction=transaction)
        execute = pipe.execute

        async def execute_with_bus_errors(raise_on_error: bool = True) -> list[Any]:
            with bus_errors():
                return await execute(raise_on_error)

        pipe.execute = execute_with_bus_errors  # type: ignore[method-assign,assignment]
        return pipe

    def pubsub(self, **kwargs: Any) -> Any:
        raise RedisClusterException(
            "no pub/sub through ClusterRedis: the hub subscribes per primary (fanout)"
        )

    async def initialize(self) -> ClusterRedis:
        with bus_errors():
            await self.redis_cluster.initialize()
        return self

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.aclose()
        await self.redis_cluster.aclose()
        await super().aclose(close_connection_pool)

    # --- the cluster's shape, for connections of one's own --------------------------------
    async def primaries(self) -> list[Address]:
        """Every primary of the cluster, as the client knows it now."""
        await self.initialize()
        return sorted(
            {self.url.address(n.host, int(n.port)) for n in self.redis_cluster.get_primaries()},
            key=lambda a: (a.host, a.port),
        )

    async def slot_owner(self, key: str) -> Address:
        """The primary that serves ``key``'s slot (a room channel is its room key), as the
        client knows it now (:meth:`refresh_slots` to ask the cluster again); the bus's
        connection error while no primary serves it."""
        await self.initialize()
        with bus_errors():
            node = self.redis_cluster.nodes_manager.get_node_from_slot(key_slot(key.encode()))
        return self.url.address(node.host, int(node.port))

    async def slot_owners(self) -> dict[int, Address]:
        """Slot -> its primary, every slot the cluster serves."""
        await self.initialize()
        out: dict[int, Address] = {}
        for slot, nodes in self.redis_cluster.nodes_manager.slots_cache.items():
            if nodes:
                out[slot] = self.url.address(nodes[0].host, int(nodes[0].port))
        return out

    async def refresh_slots(self, failing: str | None = None) -> None:
        """Ask the cluster again which primary serves which slot (after a slot moved or a
        failover). Commands go on meanwhile, on the slot map they had: redis-py's own way
        (``_initialize``) would hold every command until the new map is in, which takes a
        timeout or more while the node asked first is frozen. ``failing``: the name
        (``host:port``) of a node that just failed, asked last."""
        await self.initialize()  # (the first use: the client reads the map once anyway)
        with bus_errors():
            # Asks the known nodes in turn, in a random order but ``failing`` last (one
            # that fails is passed over), then swaps the map in at once; the old one
            # stays if none answered.
            await self.redis_cluster.nodes_manager.initialize(last_failed_node_name=failing)

    def _refresh_soon(self, failed: RedisLink | None = None) -> None:
        """:meth:`refresh_slots` in the background, at most once per ``REFRESH_EVERY_S``
        (``failed``: the link whose node just failed, asked last)."""
        now = time.monotonic()
        if self._refreshing is not None or now - self._refreshed < REFRESH_EVERY_S:
            return
        self._refreshed = now
        failing = None
        if failed is not None:
            failing = next((name for name, held in self._links.items() if held is failed), None)

        async def refresh() -> None:
            try:
                await self.refresh_slots(failing)
            except Exception as exc:  # noqa: BLE001 - the next command tries again
                log.info("could not read the Redis Cluster's slots again: %s", exc)
            finally:
                self._refreshing = None

        self._refreshing = asyncio.get_running_loop().create_task(refresh())


class _ClusterLink(RedisLink):
    """A link to one cluster node that does not try a broken connection again itself:
    on a cluster the node may be gone for good (killed; its replica takes over), and
    :class:`ClusterRedis` retries the command where the cluster then says its slot is
    (through redis-py's client), not at the same address after a backoff."""

    async def call(self, args: Sequence[Any]) -> Any:
        return await (await self._ready()).send(pack(args))


class ClusterScript(AsyncScript):
    """A Lua script on a Redis Cluster: ``EVALSHA`` to the primary of its first key's slot
    (every key must share it), and on ``NOSCRIPT`` (a primary that has not seen it, or a
    replica just promoted) ``EVAL``, which also caches it there."""

    def __init__(self, client: ClusterRedis, script: str | bytes | memoryview) -> None:
        super().__init__(client, script)
        self.client = client

    async def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Iterable[Any] | None = None,
        client: Any = None,
    ) -> Any:
        keys = keys or ()
        command = (len(keys), *keys, *(args or ()))
        target = client if client is not None else self.client
        if client is not None and not isinstance(client, ClusterRedis):
            # A cluster pipeline: queued, so a NOSCRIPT would only show at execute: EVAL.
            return client.execute_command("EVAL", self.script, *command)
        try:
            return await target.execute_command("EVALSHA", self.sha, *command)
        except NoScriptError:
            return await target.execute_command("EVAL", self.script, *command)


# --- a worker's client -------------------------------------------------------------------
def blocking_client(
    redis_url: str,
    timeout_s: float = BLOCKING_SOCKET_TIMEOUT_S,
    connect_s: float = BLOCKING_CONNECT_TIMEOUT_S,
    pool_size: int = BLOCKING_POOL_SIZE,
) -> BlockingClient:
    """A blocking client (a worker's, a tool's), on a single Redis or a Redis Cluster
    (:class:`BlockingClusterRedis`); it sets the key layout (``keys.configure``) as
    :func:`command_client` does."""
    parsed = configure_keys(redis_url)
    if parsed is not None:
        return BlockingClusterRedis(parsed, timeout_s, connect_s, pool_size)
    return redis.Redis.from_url(
        redis_url,
        decode_responses=True,
        socket_timeout=timeout_s,
        socket_connect_timeout=connect_s,
    )


class BlockingClusterRedis(redis.Redis):
    """redis-py's blocking client over a ``redis.cluster.RedisCluster`` (as
    :class:`ClusterRedis` is for asyncio).

    redis-py's blocking cluster client asks the cluster for its slots as it is made; this
    one makes it at its first command, so that a worker started while the cluster is
    unreachable gets the bus's connection error there and retries, as on a single Redis.
    """

    def __init__(
        self,
        url: ClusterURL,
        timeout_s: float = BLOCKING_SOCKET_TIMEOUT_S,
        connect_s: float = BLOCKING_CONNECT_TIMEOUT_S,
        pool_size: int = BLOCKING_POOL_SIZE,
    ) -> None:
        pool = redis.ConnectionPool(connection_class=_NoSyncConnection, decode_responses=True)
        super().__init__(connection_pool=pool)
        self.url = url
        self._options = _cluster_options(url, timeout_s, connect_s, pool_size, redis.retry.Retry)
        self._cluster: sync_cluster.RedisCluster | None = None

    @property
    def redis_cluster(self) -> sync_cluster.RedisCluster:
        """The underlying ``redis.cluster.RedisCluster`` (made at the first use)."""
        if self._cluster is None:
            try:
                self._cluster = _SyncCluster(
                    startup_nodes=[_sync_node(host, port) for host, port in self.url.nodes],
                    **self._options,
                )
            except RedisClusterException as exc:
                raise redis.ConnectionError(f"Redis Cluster: {exc}") from exc
        return self._cluster

    def execute_command(self, *args: Any, **options: Any) -> Any:
        with bus_errors():
            return self.redis_cluster.execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def register_script(self, script: str | bytes | memoryview) -> Script:
        return BlockingClusterScript(self, script)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = self.redis_cluster.pipeline(transaction=transaction)  # type: ignore[no-untyped-call]
        execute = pipe.execute

        def execute_with_bus_errors(raise_on_error: bool = True) -> list[Any]:
            with bus_errors():
                result: list[Any] = execute(raise_on_error)
                return result

        pipe.execute = execute_with_bus_errors
        return pipe

    def pubsub(self, **kwargs: Any) -> Any:
        raise RedisClusterException("no pub/sub through BlockingClusterRedis")

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
        super().close()


def _sync_node(host: str, port: int) -> sync_cluster.ClusterNode:
    return sync_cluster.ClusterNode(host, port)  # type: ignore[no-untyped-call]


class BlockingClusterScript(Script):
    """:class:`ClusterScript`, blocking."""

    def __init__(self, client: BlockingClusterRedis, script: str | bytes | memoryview) -> None:
        super().__init__(client, script)
        self.client = client

    def __call__(
        self,
        keys: Sequence[Any] | None = None,
        args: Iterable[Any] | None = None,
        client: Any = None,
    ) -> Any:
        keys = keys or ()
        command = (len(keys), *keys, *(args or ()))
        if client is not None and not isinstance(client, BlockingClusterRedis):
            return client.execute_command("EVAL", self.script, *command)
        target = client if client is not None else self.client
        try:
            return target.execute_command("EVALSHA", self.sha, *command)
        except NoScriptError:
            return target.execute_command("EVAL", self.script, *command)


# --- every slot group at once, whichever fail ---------------------------------------------
T = TypeVar("T")


async def each_group(
    client: AsyncClient,
    call: Callable[[int], Awaitable[T]],
    what: str,
    groups: Iterable[int] | None = None,
) -> list[tuple[int, T]]:
    """``call(group)`` for every slot group at once, or for those of ``groups`` (a Redis
    Cluster's readers and writers of the per-group keys, on ``client``); ``(group,
    reply)`` of those that answered (none if ``groups`` is empty).

    A group whose call failed with one of the bus's errors (its primary killed, frozen
    or failing over: refused, timed out, ``CLUSTERDOWN``), or had not answered within the
    client's command timeout, is left out (its call cancelled), so that one primary down
    neither stops nor holds up every group; one WARNING per call says how many. (A frozen
    primary's calls take several timeouts: the link tries to reconnect, then redis-py.)
    If every group failed, the bus's connection error. Any other exception is raised.

    Not one redis-py pipeline: a cluster pipeline whose node cannot be reached (refused,
    timed out) raises as a whole, whatever ``raise_on_error`` (it is retried, closing the
    client's connections to every node each time). Here each command goes on its own, and
    ClusterRedis sends those of a primary down its one pipelined link in one write, so it
    is as many round trips (one per primary, in parallel)."""
    chosen = list(keys.groups() if groups is None else groups)
    if not chosen:
        return []
    within_s = client.timeout_s if isinstance(client, ClusterRedis) else REDIS_TIMEOUT_S
    tasks = [asyncio.ensure_future(call(group)) for group in chosen]
    try:
        await asyncio.wait(tasks, timeout=within_s)
    finally:
        for task in tasks:
            task.cancel()  # (a no-op for those done)
    answered: list[tuple[int, T]] = []
    failed: list[BaseException] = []
    for group, task in zip(chosen, tasks, strict=True):
        if not task.done() or task.cancelled():
            failed.append(redis.TimeoutError(f"no answer within {within_s} s"))
            continue
        error = task.exception()
        if error is None:
            answered.append((group, task.result()))
        elif isinstance(error, (redis.RedisError, RedisClusterException)):
            failed.append(error)
        else:
            raise error
    if failed:
        if not answered:
            raise redis.ConnectionError(
                f"{what}: every slot group failed ({len(failed)}): {failed[0]}"
            ) from failed[0]
        log.warning(
            "%s: %d of %d slot groups failed, the others answered (%s: %s)",
            what, len(failed), len(chosen), type(failed[0]).__name__, failed[0],
        )  # fmt: skip
    return answered


# --- the cluster's shape -----------------------------------------------------------------
def is_cluster(client: object) -> bool:
    """Whether ``client`` talks to a Redis Cluster."""
    return isinstance(client, (ClusterRedis, BlockingClusterRedis))


async def cluster_nodes(client: AsyncClient) -> list[Address]:
    """The primaries of the cluster ``client`` talks to (on a single Redis, its address)."""
    if isinstance(client, ClusterRedis):
        return await client.primaries()
    if isinstance(client, LinkedRedis):
        return [client.link.address]
    raise TypeError(f"not a client of command_client's: {type(client).__name__}")


async def slot_owner(client: AsyncClient, key: str) -> Address:
    """The primary serving ``key`` (a room channel's, a probe channel's): on a single
    Redis, the one Redis."""
    if isinstance(client, ClusterRedis):
        return await client.slot_owner(key)
    if isinstance(client, LinkedRedis):
        return client.link.address
    raise TypeError(f"not a client of command_client's: {type(client).__name__}")
