"""Room chat: a players' channel and a spectators' channel per room.

A line is checked here (text only: 1-300 characters, the name rule's characters
(shared/protocol.py ``refused_character``, ``has_visible``); at most
``RATE_LINES`` lines per ``RATE_WINDOW_S`` per connection), then one Lua script appends
it to the channel's capped list in Redis (the last ``KEPT`` lines, with the room's
lifetime) and publishes it on the room's pub/sub channel, in one atomic step, so every
node's hub delivers it to the followers of that channel (players or spectators) and a
line in the list is never missing from the live stream or the other way round.

The text is stored and sent exactly as given: it is never HTML, and clients must render
it as text.

Keys (``kibitz:`` prefix): ``room:{id}:chat:players`` and ``room:{id}:chat:spectators``,
lists of JSON lines ``{"id", "seat", "name", "text", "at"}``. Their lifetime follows the
room's (the commit, archive and forget scripts in store.py treat them as room keys).

**The chat in the game record.** A game's record carries both channels (:func:`record_chat`,
each line with its ``channel``): the spectators' channel is public to the game's audience,
which anyone may join, players included (docs/protocol.md, Chat). The archiver reads the
chat when it writes the game to the database. A line said after the game ended (chat
works as long as the room exists) queues the room for archiving once more, in the same
Lua step as the line, so the archived record has it too; ``room:{id}:rearchive`` (a
string with a ``REARCHIVE_MARK_MS`` lifetime) marks such an entry as queued and not yet
read, so a burst of lines queues one entry, and the archiver deletes the mark before it
reads the chat (:func:`settle_record_chat`), so no line falls between the two.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

import redis.asyncio as aioredis

from kibitz.server.domain.room import Room, seat_for_token
from kibitz.shared.bus import keys
from kibitz.shared.bus.keys import ARCHIVE, room_key
from kibitz.shared.bus.keys import room_channel as channel
from kibitz.shared.games import find_game
from kibitz.shared.protocol import MAX_CHAT, ProtocolError, has_visible, refused_character

Channel = Literal["players", "spectators"]
CHANNELS: tuple[Channel, ...] = ("players", "spectators")
KEPT = 100  # lines kept per channel
RATE_LINES = 5  # lines a connection may send...
RATE_WINDOW_S = 10.0  # ...in this many seconds
#: How long a queued re-archiving of a finished room's chat is marked (a bound: the
#: archiver deletes the mark when it reads the entry, normally within a second).
REARCHIVE_MARK_MS = 60_000


def chat_key(room_id: str, which: Channel) -> str:
    return keys.chat_key(room_id, which)


def rearchive_key(room_id: str) -> str:
    """The mark of a finished room queued for archiving again for its chat."""
    return keys.rearchive_key(room_id)


def check_text(text: str) -> str:
    """``text`` if it is an acceptable chat line, else ProtocolError ``chat/invalid``."""
    if len(text) > MAX_CHAT:
        raise ProtocolError(
            "chat/invalid", f"a chat line has at most {MAX_CHAT} characters, not {len(text)}"
        )
    char = refused_character(text)  # the rule of names (shared/protocol.py)
    if char is not None:
        raise ProtocolError(
            "chat/invalid",
            f"chat lines are plain text on one line: character U+{ord(char):04X} is not allowed",
        )
    if not has_visible(text):
        raise ProtocolError("chat/invalid", "a chat line needs some visible text")
    return text


class ChatRate:
    """The per-connection limit: at most RATE_LINES lines in any RATE_WINDOW_S."""

    def __init__(self) -> None:
        self.sent: list[float] = []  # at most RATE_LINES (a list: lighter than a deque)

    def take(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        while self.sent and now - self.sent[0] >= RATE_WINDOW_S:
            del self.sent[0]
        if len(self.sent) >= RATE_LINES:
            wait = RATE_WINDOW_S - (now - self.sent[0])
            raise ProtocolError(
                "chat/rate",
                f"at most {RATE_LINES} chat lines per {RATE_WINDOW_S:g} s; wait {wait:.1f} s",
            )
        self.sent.append(now)


def sender(room: Room, token: str | None, name: str | None) -> tuple[Channel, int | None, str]:
    """The channel a line goes to, the sender's seat and the name shown.

    With a token: the players' channel, as the seat the token holds (its name, or the
    side's name, such as "White"); without: the spectators' channel, as ``name`` or
    "spectator".
    """
    if token is not None:
        seat = seat_for_token(room, token)  # auth/token if it holds no seat
        shown = room.seats[seat].name or find_game(room.game).players[seat]
        return "players", seat, shown
    return "spectators", None, (name or "spectator")


# KEYS: the channel's list, the room, the re-archive mark, the archive stream; ARGV: the
# line without its id (JSON), lines kept, pub/sub channel, room id, channel name, the
# mark's lifetime (ms). Numbers the line (one more than the last kept), appends it, trims
# the list, gives it the room's lifetime and publishes it. In a room whose game has ended
# (the commit that ended it set the room's ``archive`` field), it also queues the room for
# archiving again, unless such an entry is queued and not read yet (the mark); the
# entry's ttl_ms keeps the room's remaining lifetime (empty before it was archived: the
# archiver's default). Returns the line as stored (JSON), or false when the room is gone.
_APPEND = """
local ttl = redis.call('PTTL', KEYS[2])
if ttl == -2 then return false end
local id = 1
local last = redis.call('LINDEX', KEYS[1], -1)
if last then id = cjson.decode(last)['id'] + 1 end
local line = cjson.decode(ARGV[1])
line['id'] = id
local encoded = cjson.encode(line)
redis.call('RPUSH', KEYS[1], encoded)
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  redis.call('PERSIST', KEYS[1])
end
redis.call('PUBLISH', ARGV[3], '{"type":"chat","room":' .. cjson.encode(ARGV[4]) ..
  ',"channel":' .. cjson.encode(ARGV[5]) .. ',"messages":[' .. encoded .. ']}')
if redis.call('HEXISTS', KEYS[2], 'archive') == 1 and
   redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[6]) then
  local keep = ''
  if ttl > 0 then keep = tostring(ttl) end
  redis.call('XADD', KEYS[4], '*', 'room', ARGV[4], 'ttl_ms', keep)
end
return encoded
"""


class ChatStore:
    """Appends and reads the chat lists of rooms."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._append = redis.register_script(_APPEND)

    async def post(
        self, room: Room, which: Channel, seat: int | None, name: str, text: str
    ) -> dict[str, Any]:
        """Store and publish one line; the line as stored (with its id)."""
        line = {"seat": seat, "name": name, "text": text, "at": int(time.time() * 1000)}
        stored = await self._append(
            keys=[chat_key(room.id, which), room_key(room.id), rearchive_key(room.id), ARCHIVE],
            args=[json.dumps(line), KEPT, channel(room.id), room.id, which, REARCHIVE_MARK_MS],
        )
        if stored is None:
            raise ProtocolError("room/unknown", f"no room {room.id!r}")
        result: dict[str, Any] = json.loads(stored)
        return result

    async def history(self, room_id: str, which: Channel) -> list[dict[str, Any]]:
        """The channel's kept lines, oldest first."""
        lines: Any = await self.redis.lrange(chat_key(room_id, which), 0, -1)
        return [json.loads(line) for line in lines]


async def record_chat(redis: aioredis.Redis, room_id: str) -> list[dict[str, Any]]:
    """Both channels' kept lines as the game record has them: each line with its
    ``channel``, in the order they were said (by ``at``; the players' first at a tie)."""
    replies: Any = await asyncio.gather(
        *(redis.lrange(chat_key(room_id, which), 0, -1) for which in CHANNELS)
    )
    return _merged(replies)


async def settle_record_chat(redis: aioredis.Redis, room_id: str) -> list[dict[str, Any]]:
    """:func:`record_chat` for the archiver: in the same step it deletes the room's
    re-archive mark first, so a line said from now on queues the room again."""
    await redis.delete(rearchive_key(room_id))
    return await record_chat(redis, room_id)


def _merged(replies: list[list[str]]) -> list[dict[str, Any]]:
    lines = [
        {"channel": which, **json.loads(line)}
        for which, kept in zip(CHANNELS, replies, strict=True)
        for line in kept
    ]
    # A stable sort: each channel is in id order already.
    lines.sort(key=lambda line: int(line.get("at") or 0))
    return lines


def chat_message(room_id: str, which: Channel, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``chat`` message: live (one line) or, after following a room, the replay."""
    return {"type": "chat", "room": room_id, "channel": which, "messages": lines}


def channel_of(seat: int | None) -> Channel:
    """The channel a follower reads: players read the players', spectators the spectators'."""
    return "spectators" if seat is None else "players"
