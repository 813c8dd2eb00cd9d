"""Every Redis key and channel name of kibitz, built in this one module.

All keys start with ``kibitz:``. A room's keys carry the room id as a hash tag
(``kibitz:room:{ID}``, ``kibitz:room:{ID}:events``, ...), so that on a Redis Cluster they
share one slot and a script may touch them together. What each key holds, its type and its
bound are told beside the code that writes it (the module named in each group below).
"""

from __future__ import annotations

PREFIX = "kibitz:"

# --- one room (shared/bus/store.py, shared/bus/chat.py, shared/bus/fanout.py) ------------
ROOM_PREFIX = PREFIX + "room:"  # a room key is ROOM_PREFIX + "{" + id + "}"


def room_key(room_id: str) -> str:
    """The room's record (hash: ``version``, ``data``)."""
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
    """The room id in a room key (``kibitz:room:{ID}...``), or None for another key."""
    if not key.startswith(ROOM_PREFIX + "{"):
        return None
    end = key.find("}", len(ROOM_PREFIX) + 1)
    return key[len(ROOM_PREFIX) + 1 : end] if end > 0 else None


# --- streams and queues (shared/bus/store.py, shared/bus/fair_queue.py) -------------------
JOBS = PREFIX + "jobs"  # stream, group WORKERS_GROUP: AI jobs admitted to the workers
DEAD_JOBS = PREFIX + "jobs:dead"  # stream: jobs no worker could run (poison)
RESULTS = PREFIX + "results"  # stream, group SERVERS_GROUP: moves found by workers
ARCHIVE = PREFIX + "archive"  # stream, group ARCHIVERS_GROUP: ended rooms to archive
WORKERS_GROUP = "workers"
SERVERS_GROUP = "servers"
ARCHIVERS_GROUP = "archivers"
LIVE = PREFIX + "rooms:live"  # sorted set: unfinished rooms by last update (the lobby)
DEADLINES = PREFIX + "deadlines"  # sorted set: room -> next automatic clock action (ms)

# The fair queue in front of JOBS (shared/bus/fair_queue.py).
AI_READY = PREFIX + "ai:ready"
AI_WAITING = PREFIX + "ai:waiting"
AI_OWNERS = PREFIX + "ai:owners"
AI_CLOCK = PREFIX + "ai:clock"
AI_YIELD_PREFIX = PREFIX + "ai:yield:"
AI_WORKERS_LIVE = PREFIX + "ai:workers"  # not under "workers:" (those are heartbeats)


def ai_games_key(owner: str) -> str:
    """The unfinished AI games of one owner (sorted set)."""
    return f"{PREFIX}ai:games:{owner}"


# --- analysis (shared/bus/analysis.py) ----------------------------------------------------
ANALYSIS_JOBS = PREFIX + "analysis:jobs"
ANALYSIS_FINISHED = PREFIX + "analysis:finished"
ANALYSIS_ACTIVE = PREFIX + "analysis:active"


def analysis_key(game_id: str) -> str:
    """One game's analysis status (hash)."""
    return f"{PREFIX}analysis:{game_id}"


def analysis_evals_key(game_id: str) -> str:
    """One game's evaluations as workers post them."""
    return f"{PREFIX}analysis:{game_id}:evals"


# --- nodes and workers (shared/bus/store.py, shared/bus/jobs.py) --------------------------
NODES = PREFIX + "nodes:"  # NODES + node: a server node's heartbeat (TTL)
NODE_BEATS = PREFIX + "node-beats"  # sorted set: node -> last heartbeat (ms)
NODE_DIED = PREFIX + "node-died"  # channel: a node's heartbeat expired
WORKERS = PREFIX + "workers:"  # WORKERS + name: a worker's heartbeat hash (TTL)


def node_key(node: str) -> str:
    return NODES + node


def worker_key(name: str) -> str:
    return WORKERS + name


def probe_channel(node: str) -> str:
    """The channel a node publishes to itself to prove its subscription alive."""
    return f"{PREFIX}probe:{node}"


# --- per address (shared/bus/limits.py) ---------------------------------------------------
def address_connections_key(address: str) -> str:
    return f"{PREFIX}addr:{address}:conns"


def address_creates_key(address: str) -> str:
    return f"{PREFIX}addr:{address}:creates"


# --- log-in and sign-up throttles (shared/bus/throttle.py) -------------------------------
def throttle_key(what: str, subject: str) -> str:
    """One throttle counter: ``what`` (``login-account``, ``login-addr``, ``signup-addr``)
    of ``subject`` (a username key or an address)."""
    return f"{PREFIX}throttle:{what}:{{{subject}}}"


# --- the lobby's seeks (server/services/seeks.py) -----------------------------------------
SEEKS = PREFIX + "seeks"
SEEKS_CHANNEL = PREFIX + "seeks:events"


# --- the rooms each player sits in (shared/bus/playing.py) --------------------------------
def player_rooms_key(player: str) -> str:
    """One player's unfinished rooms (sorted set: room id -> when seated, ms)."""
    return f"{PREFIX}player:{player}:rooms"


# --- the quick pairing pool (shared/bus/pool.py, server/services/pool.py) ------------------
POOL = PREFIX + "pool"  # hash: entry id -> one player waiting in a pool (JSON)
POOL_CHANNEL = PREFIX + "pool:events"  # a pairing, to the nodes of the two players
#: sorted set: entry id -> when (ms) its connection left it while it was out being paired;
#: such an entry is not put back (kept POOL_GONE_KEEP_MS, at most POOL_GONE_MOST ids).
POOL_GONE = PREFIX + "pool:gone"

# --- moderation (shared/bus/bans.py) -------------------------------------------------------
BANS = PREFIX + "bans"  # hash: "account:ID" / "address:ADDR" -> the active ban (JSON)


# --- the lichess-compatible HTTP API (server/botapi/) --------------------------------------
#: channel: a line for the event streams of some accounts, or a stream to close
#: (shared/bus/account_events.py). Every node listens; each keeps the lines for the streams
#: it holds. On a Redis Cluster this is the control slot's.
ACCOUNT_EVENTS = PREFIX + "account-events"


def challenge_key(challenge_id: str) -> str:
    """One challenge (string: its JSON record; TTL its expiry) (shared/bus/challenges.py).
    Its id is the id of the room it becomes, so it carries that room's hash tag."""
    return f"{PREFIX}challenge:{{{challenge_id}}}"


def challenges_key(account_id: int, direction: str) -> str:
    """An account's open challenges, ``direction`` ``in`` or ``out`` (sorted set:
    challenge id -> expiry ms) (shared/bus/challenges.py)."""
    return f"{PREFIX}challenges:{direction}:{account_id}"


def seat_keys_key(room_id: str) -> str:
    """The secret tokens of a room's account seats (hash: seat index -> token), which the
    HTTP API and the seat's own account may read (shared/bus/seat_keys.py)."""
    return room_key(room_id) + ":seatkeys"


def event_stream_key(account_id: int) -> str:
    """The newest event stream of each token of an account (hash: token id -> stream id);
    an older stream of the same token is closed (shared/bus/account_events.py)."""
    return f"{PREFIX}event-streams:{account_id}"


#: sorted set: account id -> when a node last saw an open event stream of it (ms); an
#: entry older than ``ONLINE_MS`` (shared/bus/account_events.py) is offline, and is
#: removed by the next beat that sees it (bounded by the accounts with streams).
ONLINE = PREFIX + "online"
