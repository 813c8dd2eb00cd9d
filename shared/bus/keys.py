"""Every Redis key and channel name of kibitz, built in this one module.

All keys start with ``kibitz:``. Two layouts, chosen once per process by :func:`configure`
(``shared/bus/connect.py`` calls it with the URL it connects to):

- **a single Redis** (the default, ``configure(0)``): the names below as written. A room's
  keys carry the room id as a hash tag (``kibitz:room:{ID}``, ``kibitz:room:{ID}:events``).
- **a Redis Cluster** (``configure(G)``, G slot groups): a room belongs to the group
  :func:`group_of` (a CRC-32 of its id, modulo G), and its keys carry the *group's* tag
  (``kibitz:{g17}:room:ID``, ``kibitz:{g17}:room:ID:events``), beside the group's own keys
  that the commit writes in the same atomic step (:func:`live`, :func:`deadlines`,
  :func:`archive`, :func:`ai_outbox`, :func:`ai_games_key`, :func:`group_node_beats`). Every
  other key is global and carries the control tag (``kibitz:{c}:jobs``,
  ``kibitz:{c}:addr:ADDR:conns``...), so that the scripts that touch several of them run on
  one slot.

Per-group names are functions of a group number (0 to G-1; on a single Redis there is one
group, 0, and its names are the single-Redis names). Global names are module attributes,
rebound by :func:`configure`: read them as ``keys.NAME`` at the time of use, never with
``from keys import NAME``. What each key holds, its type and its bound are told beside the
code that writes it (the module named in each group below).
"""

from __future__ import annotations

import zlib

#: G for a Redis Cluster unless the URL says ``?groups=N``: with 3 to 12 primaries each
#: holds several groups, and a group (one slot) is the unit the cluster moves.
DEFAULT_GROUPS = 64
MAX_GROUPS = 1024

_groups = 0  # 0: a single Redis


def configure(groups: int) -> None:
    """Choose the layout: 0 for a single Redis, G >= 1 slot groups for a Redis Cluster."""
    global _groups
    if not 0 <= groups <= MAX_GROUPS:
        raise ValueError(f"groups must be 0 (a single Redis) to {MAX_GROUPS}, not {groups}")
    _groups = groups
    _bind_globals("kibitz:{c}:" if groups else "kibitz:")


def grouped() -> bool:
    """True on a Redis Cluster (keys in slot groups)."""
    return _groups > 0


def group_count() -> int:
    """How many groups there are (1 on a single Redis)."""
    return _groups or 1


def groups() -> range:
    """Every group number."""
    return range(group_count())


def group_of(room_id: str) -> int:
    """The group of a room (0 on a single Redis)."""
    if not _groups:
        return 0
    return zlib.crc32(room_id.encode()) % _groups


def group_tag(group: int) -> str:
    """The hash tag of a group's keys (``{g17}``)."""
    return f"{{g{group}}}"


def _group_prefix(group: int) -> str:
    return f"kibitz:{group_tag(group)}:" if _groups else "kibitz:"


PREFIX = "kibitz:"
_G = PREFIX  # where the global keys live: the control slot on a Redis Cluster

# --- one room (shared/bus/store.py, shared/bus/chat.py, shared/bus/fanout.py) ------------
ROOM_PREFIX = PREFIX + "room:"  # a room key is ROOM_PREFIX + "{" + id + "}"


def room_key(room_id: str) -> str:
    """The room's record (hash: ``version``, ``data``)."""
    if _groups:
        return f"{_group_prefix(group_of(room_id))}room:{room_id}"
    return f"{ROOM_PREFIX}{{{room_id}}}"


def events_key(room_id: str) -> str:
    """The room's event stream, one entry per version."""
    return room_key(room_id) + ":events"


def presence_key(room_id: str) -> str:
    """Who is attached to the room on which node."""
    return room_key(room_id) + ":presence"


def presence_sent_key(room_id: str) -> str:
    """Marks a spectator-count broadcast sent just now (short TTL)."""
    return room_key(room_id) + ":presence-sent"


def chat_key(room_id: str, which: str) -> str:
    """One chat channel of the room: ``which`` is ``players`` or ``spectators``."""
    return room_key(room_id) + ":chat:" + which


def rearchive_key(room_id: str) -> str:
    """Marks a finished room whose record must be archived again (late chat)."""
    return room_key(room_id) + ":rearchive"


def room_channel(room_id: str) -> str:
    """The pub/sub channel of the room's snapshots and events (the room key's name)."""
    return room_key(room_id)


def room_id_of(key: str) -> str | None:
    """The room id in a room key (``kibitz:room:{ID}...``, or ``kibitz:{gN}:room:ID...``
    on a Redis Cluster), or None for another key."""
    if _groups:
        head, _, rest = key.partition("}:room:")
        if not head.startswith("kibitz:{g") or not rest:
            return None
        return rest.split(":", 1)[0]
    if not key.startswith(ROOM_PREFIX + "{"):
        return None
    end = key.find("}", len(ROOM_PREFIX) + 1)
    return key[len(ROOM_PREFIX) + 1 : end] if end > 0 else None


# --- per slot group: what the commit writes beside the room (shared/bus/store.py) --------
# On a single Redis these are the one group's (group 0) and carry the single-Redis names.
def live(group: int) -> str:
    """Sorted set: the group's unfinished rooms by last update (the lobby merges groups)."""
    return _group_prefix(group) + "rooms:live"


def deadlines(group: int) -> str:
    """Sorted set: the group's rooms -> next automatic clock action (ms)."""
    return _group_prefix(group) + "deadlines"


def archive(group: int) -> str:
    """Stream, consumer group ARCHIVERS_GROUP: the group's ended rooms to archive."""
    return _group_prefix(group) + "archive"


def ai_outbox(group: int) -> str:
    """Redis Cluster only. Stream: AI jobs the group's commits made, on their way to the
    fair queue on the control slot (the committing node relays at once; a sweeper relays
    what a dead node left)."""
    return _group_prefix(group) + "ai:outbox"


def group_node_beats(group: int) -> str:
    """Redis Cluster only. Sorted set: node -> last heartbeat (ms), a copy of NODE_BEATS
    on the group's slot, which the presence scripts are handed to tell live nodes."""
    return _group_prefix(group) + "node-beats"


# --- streams and queues (shared/bus/store.py, shared/bus/fair_queue.py) -------------------
JOBS = _G + "jobs"  # stream, group WORKERS_GROUP: AI jobs admitted to the workers
DEAD_JOBS = _G + "jobs:dead"  # stream: jobs no worker could run (poison)
RESULTS = _G + "results"  # stream, group SERVERS_GROUP: moves found by workers
WORKERS_GROUP = "workers"
SERVERS_GROUP = "servers"
ARCHIVERS_GROUP = "archivers"

# The fair queue in front of JOBS (shared/bus/fair_queue.py).
AI_READY = _G + "ai:ready"
AI_WAITING = _G + "ai:waiting"
AI_OWNERS = _G + "ai:owners"
AI_CLOCK = _G + "ai:clock"
AI_YIELD_PREFIX = _G + "ai:yield:"
AI_WORKERS_LIVE = _G + "ai:workers"  # not under "workers:" (those are heartbeats)


def ai_games_key(owner: str, group: int = 0) -> str:
    """The unfinished AI games of one owner in one group (sorted set; on a single Redis
    the one group holds them all)."""
    return f"{_group_prefix(group)}ai:games:{owner}"


# --- analysis (shared/bus/analysis.py) ----------------------------------------------------
ANALYSIS_JOBS = _G + "analysis:jobs"
ANALYSIS_FINISHED = _G + "analysis:finished"
ANALYSIS_ACTIVE = _G + "analysis:active"


def analysis_key(game_id: str) -> str:
    """One game's analysis status (hash)."""
    return f"{_G}analysis:{game_id}"


def analysis_evals_key(game_id: str) -> str:
    """One game's evaluations as workers post them."""
    return f"{_G}analysis:{game_id}:evals"


# --- nodes and workers (shared/bus/store.py, shared/bus/jobs.py) --------------------------
NODES = _G + "nodes:"  # NODES + node: a server node's heartbeat (TTL)
NODE_BEATS = _G + "node-beats"  # sorted set: node -> last heartbeat (ms)
NODE_DIED = _G + "node-died"  # channel: a node's heartbeat expired
WORKERS = _G + "workers:"  # WORKERS + name: a worker's heartbeat hash (TTL)


def node_key(node: str) -> str:
    return NODES + node


def worker_key(name: str) -> str:
    return WORKERS + name


def probe_channel(node: str, group: int | None = None) -> str:
    """The channel a node publishes to itself to prove its subscription alive. On a Redis
    Cluster a node holds one subscription per cluster node, each proven by the probe
    channel of a group that cluster node serves (``group``)."""
    if group is not None and _groups:
        return f"{_group_prefix(group)}probe:{node}"
    return f"{_G}probe:{node}"


# --- per address (shared/bus/limits.py) ---------------------------------------------------
def address_connections_key(address: str) -> str:
    return f"{_G}addr:{address}:conns"


def address_creates_key(address: str) -> str:
    return f"{_G}addr:{address}:creates"


# --- log-in and sign-up throttles (shared/bus/throttle.py) -------------------------------
def throttle_key(what: str, subject: str) -> str:
    """One throttle counter: ``what`` (``login-account``, ``login-addr``, ``signup-addr``)
    of ``subject`` (a username key or an address)."""
    return f"{_G}throttle:{what}:{{{subject}}}"


# --- the lobby's seeks (server/services/seeks.py) -----------------------------------------
SEEKS = _G + "seeks"
SEEKS_CHANNEL = _G + "seeks:events"


# --- the rooms each player sits in (shared/bus/playing.py) --------------------------------
def player_rooms_key(player: str) -> str:
    """One player's unfinished rooms (sorted set: room id -> when seated, ms)."""
    return f"{_G}player:{player}:rooms"


# --- the quick pairing pool (shared/bus/pool.py, server/services/pool.py) ------------------
POOL = _G + "pool"  # hash: entry id -> one player waiting in a pool (JSON)
POOL_CHANNEL = _G + "pool:events"  # a pairing, to the nodes of the two players
#: sorted set: entry id -> when (ms) its connection left it while it was out being paired;
#: such an entry is not put back (kept POOL_GONE_KEEP_MS, at most POOL_GONE_MOST ids).
POOL_GONE = _G + "pool:gone"

# --- moderation (shared/bus/bans.py) -------------------------------------------------------
BANS = _G + "bans"  # hash: "account:ID" / "address:ADDR" -> the active ban (JSON)


# --- the lichess-compatible HTTP API (server/botapi/) --------------------------------------
#: channel: a line for the event streams of some accounts, or a stream to close
#: (shared/bus/account_events.py). Every node listens; each keeps the lines for the streams
#: it holds. On a Redis Cluster this is the control slot's.
ACCOUNT_EVENTS = _G + "account-events"


def challenge_key(challenge_id: str) -> str:
    """One challenge (string: its JSON record; TTL its expiry) (shared/bus/challenges.py).
    Its id is the id of the room it becomes, so it carries that room's hash tag."""
    return f"{_G}challenge:{{{challenge_id}}}"


def challenges_key(account_id: int, direction: str) -> str:
    """An account's open challenges, ``direction`` ``in`` or ``out`` (sorted set:
    challenge id -> expiry ms) (shared/bus/challenges.py)."""
    return f"{_G}challenges:{direction}:{account_id}"


def seat_keys_key(room_id: str) -> str:
    """The secret tokens of a room's account seats (hash: seat index -> token), which the
    HTTP API and the seat's own account may read (shared/bus/seat_keys.py)."""
    return room_key(room_id) + ":seatkeys"


def event_stream_key(account_id: int) -> str:
    """The newest event stream of each token of an account (hash: token id -> stream id);
    an older stream of the same token is closed (shared/bus/account_events.py)."""
    return f"{_G}event-streams:{account_id}"


#: sorted set: account id -> when a node last saw an open event stream of it (ms); an
#: entry older than ``ONLINE_MS`` (shared/bus/account_events.py) is offline, and is
#: removed by the next beat that sees it (bounded by the accounts with streams).
ONLINE = _G + "online"


#: The global names and what follows the prefix in each (rebound by :func:`configure`).
_GLOBAL_SUFFIXES = {
    "JOBS": "jobs",
    "DEAD_JOBS": "jobs:dead",
    "RESULTS": "results",
    "AI_READY": "ai:ready",
    "AI_WAITING": "ai:waiting",
    "AI_OWNERS": "ai:owners",
    "AI_CLOCK": "ai:clock",
    "AI_YIELD_PREFIX": "ai:yield:",
    "AI_WORKERS_LIVE": "ai:workers",
    "ANALYSIS_JOBS": "analysis:jobs",
    "ANALYSIS_FINISHED": "analysis:finished",
    "ANALYSIS_ACTIVE": "analysis:active",
    "NODES": "nodes:",
    "NODE_BEATS": "node-beats",
    "NODE_DIED": "node-died",
    "WORKERS": "workers:",
    "SEEKS": "seeks",
    "SEEKS_CHANNEL": "seeks:events",
    "POOL": "pool",
    "POOL_CHANNEL": "pool:events",
    "POOL_GONE": "pool:gone",
    "BANS": "bans",
    "ACCOUNT_EVENTS": "account-events",
    "ONLINE": "online",
}


def _bind_globals(prefix: str) -> None:
    """(Re)bind the global names under ``prefix`` (the control tag on a Redis Cluster)."""
    global _G
    _G = prefix
    names = globals()
    for name, suffix in _GLOBAL_SUFFIXES.items():
        names[name] = prefix + suffix
