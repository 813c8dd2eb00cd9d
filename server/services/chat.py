"""Room chat: a players' channel and a spectators' channel per room.

A line is checked here (text only: 1-300 characters, the name rule's characters
(shared/protocol/client_in.py ``refused_character``, ``has_visible``); at most
``RATE_LINES`` lines per ``RATE_WINDOW_S`` per connection), then the bus's
:class:`~kibitz.shared.bus.chat.ChatLog` appends it to the channel's capped list in Redis
(the last ``KEPT`` lines, with the room's lifetime) and publishes it on the room's pub/sub
channel, in one atomic step (``shared/bus/scripts/chat_append.lua``), so every node's hub
delivers it to the followers of that channel (players or spectators) and a line in the
list is never missing from the live stream or the other way round.

The text is stored and sent exactly as given: it is never HTML, and clients must render
it as text.

Keys (``kibitz:`` prefix): ``room:{id}:chat:players`` and ``room:{id}:chat:spectators``,
lists of JSON lines ``{"id", "seat", "name", "text", "at"}``. Their lifetime follows the
room's (the commit, archive and forget scripts of shared/bus/store.py treat them as room
keys).

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

import json
import time
from typing import Any, Literal

from kibitz.server.domain.room import Room, seat_for_token
from kibitz.shared.bus.chat import ChannelLines, ChatLog
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_in import MAX_CHAT, has_visible, refused_character
from kibitz.shared.protocol.codec import ProtocolError

Channel = Literal["players", "spectators"]
CHANNELS: tuple[Channel, ...] = ("players", "spectators")
KEPT = 100  # lines kept per channel
RATE_LINES = 5  # lines a connection may send...
RATE_WINDOW_S = 10.0  # ...in this many seconds
#: How long a queued re-archiving of a finished room's chat is marked (a bound: the
#: archiver deletes the mark when it reads the entry, normally within a second).
REARCHIVE_MARK_MS = 60_000


def check_text(text: str) -> str:
    """``text`` if it is an acceptable chat line, else ProtocolError ``chat/invalid``."""
    if len(text) > MAX_CHAT:
        raise ProtocolError(
            "chat/invalid", f"a chat line has at most {MAX_CHAT} characters, not {len(text)}"
        )
    char = refused_character(text)  # the rule of names (shared/protocol/client_in.py)
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


class ChatStore:
    """Appends and reads the chat lists of rooms, through the bus's :class:`ChatLog`."""

    def __init__(self, log: ChatLog) -> None:
        self.log = log

    async def post(
        self,
        room: Room,
        which: Channel,
        seat: int | None,
        name: str,
        text: str,
        account: str | None = None,
    ) -> dict[str, Any]:
        """Store and publish one line; the line as stored (with its id). ``account``: the
        sender's username when signed in (the line's ``account``: blocks hide it)."""
        line: dict[str, Any] = {"seat": seat, "name": name, "text": text}
        line["at"] = int(time.time() * 1000)
        if account is not None:
            line["account"] = account
        stored = await self.log.append(room.id, which, json.dumps(line), KEPT, REARCHIVE_MARK_MS)
        if stored is None:
            raise ProtocolError("room/unknown", f"no room {room.id!r}")
        result: dict[str, Any] = json.loads(stored)
        return result

    async def history(self, room_id: str, which: Channel) -> list[dict[str, Any]]:
        """The channel's kept lines, oldest first."""
        return [json.loads(line) for line in await self.log.lines(room_id, which)]


async def record_chat(log: ChatLog, room_id: str) -> list[dict[str, Any]]:
    """Both channels' kept lines as the game record has them: each line with its
    ``channel``, in the order they were said (by ``at``; the players' first at a tie)."""
    return _merged(await log.both(room_id))


async def settle_record_chat(log: ChatLog, room_id: str) -> list[dict[str, Any]]:
    """:func:`record_chat` for the archiver: in the same step it deletes the room's
    re-archive mark first, so a line said from now on queues the room again."""
    await log.clear_rearchive_mark(room_id)
    return await record_chat(log, room_id)


def _merged(kept: ChannelLines) -> list[dict[str, Any]]:
    lines = [
        {"channel": which, **json.loads(line)}
        for which, said in (("players", kept.players), ("spectators", kept.spectators))
        for line in said
    ]
    # A stable sort: each channel is in id order already.
    lines.sort(key=lambda line: int(line.get("at") or 0))
    return lines


def channel_of(seat: int | None) -> Channel:
    """The channel a follower reads: players read the players', spectators the spectators'."""
    return "spectators" if seat is None else "players"
