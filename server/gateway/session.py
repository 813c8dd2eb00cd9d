"""One WebSocket connection's session: validation at the edge, then the room service.

It decides how a connection's frames are taken: decoded and parsed with the protocol
schema, paced (a token bucket: a burst is read more slowly, not refused), struck when bad
(too many strikes close the socket), dispatched to the room service, seeks and chat, and
answered before anything else this connection sends is handled. Its bounds are the node
config's (``rate_per_second``, ``rate_burst``, ``pace_limit_s``, ``max_strikes``,
``strike_window_s``, ``creates_per_connection_per_minute``, ``resume_replay``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any

from aiohttp import WSCloseCode, web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.accounts.credentials import Credential
from kibitz.server.accounts.liveness import CredentialCheck
from kibitz.server.appkeys import (
    ACCOUNTS_KEY,
    CHAT_KEY,
    CONFIG_KEY,
    HUB_KEY,
    LIMITER_KEY,
    METRICS_KEY,
    MODERATION_KEY,
    NODE_KEY,
    REDIS_KEY,
    SEEKS_KEY,
    SERVICE_KEY,
)
from kibitz.server.domain import room as rooms
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Room, RoomError, new_token, seat_for_token
from kibitz.server.fanout.connection import Connection
from kibitz.server.moderation.hooks import abandoned_by_abort, abandoned_by_claim
from kibitz.server.moderation.rules import hidden_line, mute_text
from kibitz.server.services.chat import Channel, ChatRate, channel_of, check_text, sender
from kibitz.server.services.limits import LimitExceeded
from kibitz.server.services.seekers import check_penalty
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.seat_keys import SeatKeys
from kibitz.shared.protocol.client_in import (
    Abort,
    AcceptSeek,
    Chat,
    Claim,
    ClientMessage,
    Create,
    Join,
    Leave,
    Lobby,
    Offer,
    Ping,
    PlayMove,
    PoolJoin,
    PoolLeave,
    Resign,
    Resume,
    Seek,
    Unseek,
    Watch,
    parse_client_message,
)
from kibitz.shared.protocol.client_out import ChatLines, Error, Left, Pong, Seat
from kibitz.shared.protocol.codec import ProtocolError, decode

log = logging.getLogger(__name__)

_SESSION_NUMBERS = itertools.count(1)
#: How old (s) the blocks a signed-in connection hides may get before a frame reloads them.
HIDDEN_REFRESH_S = 5.0
#: The messages that read the blocks again, before they follow or speak in a room, once
#: HIDDEN_REFRESH_S old (never a move or a ping: they must not wait on the database).
HIDDEN_READ_BY = (Chat, Watch, Resume, Create, Join, Seek, AcceptSeek, PoolJoin)
#: The messages a banned account or address may not send (server/moderation/).
BAN_CHECKED = (Create, Join, Chat, Seek, AcceptSeek, PoolJoin)


def ban_checked(message: ClientMessage) -> bool:
    """Whether a banned account or address is refused ``message`` (a rematch makes a room)."""
    if isinstance(message, Offer):
        return message.kind == "rematch" and message.action != "decline"
    return isinstance(message, BAN_CHECKED)


class Session:
    """One connection's message loop: validation at the edge, then the room service."""

    def __init__(
        self,
        app: web.Application,
        conn: Connection,
        address: str,
        account: Account | None = None,
        credential: Credential | None = None,
    ) -> None:
        self.app = app
        self.conn = conn
        self.address = address  # the client's address, for per-address limits
        #: The signed-in player this socket acts for (from the session cookie or API token
        #: at the handshake: server/gateway/admission.py); None for a guest.
        self.account = account
        #: Whether the session or token the socket was opened with still holds.
        self.signed_in = CredentialCheck(credential)
        self.service = app[SERVICE_KEY]
        self.hub = app[HUB_KEY]
        self.metrics = app[METRICS_KEY]
        self.config = app[CONFIG_KEY]  # the rate, strike and replay bounds
        self.strikes = 0
        self.creates: list[float] = []
        # How the socket is closed once ``on_frame`` returns False.
        self.close_code: int = WSCloseCode.OK
        self.close_reason = b""
        self.strikes_since = time.monotonic()
        self.tokens = self.config.rate_burst
        self.refilled = time.monotonic()
        self.paced_since: float | None = None  # since when messages wait for the rate
        #: When the frame being handled arrived (server clock ms): what a move's clock
        #: counts to. (The connection's lag is ``conn.lag``, measured by the hub's pings
        #: while it holds a seat.)
        self.received_ms = self.service.clock_ms()
        self.chat_rate = ChatRate()
        self.hidden_read = float("-inf")  # when the blocks ``conn.hidden`` holds were read
        # Names this connection to other nodes (seeks): unique in the cluster, as its node is.
        self.id = f"{app[NODE_KEY]}:{next(_SESSION_NUMBERS)}"

    async def handle(self, data: str | bytes) -> bool:
        """One data frame from the client; False when the connection must close (with
        ``close_code`` and ``close_reason``)."""
        if self.hub.draining:
            # Shutting down: no new request is taken (the client sends it again on its
            # next connection); the one under way was finished before the 1001.
            self.close_code, self.close_reason = WSCloseCode.GOING_AWAY, b"shutting down"
            return False
        self.received_ms = self.service.clock_ms()
        self.conn.begin_request()
        try:
            return await self.on_frame(data)
        finally:
            self.conn.end_request()

    async def on_frame(self, data: str | bytes) -> bool:
        """Handle one frame; False when the connection must close.

        The client's replies must not pile up: the frame is handled only once what is
        queued for it has drained (a client that stopped reading is dropped instead).
        """
        if not await self.conn.drained():
            return False
        try:
            raw = decode(data)
        except ProtocolError as exc:
            if exc.code == "frame/too_large":
                self._error(exc.code, exc.message)
                self.close_code, self.close_reason = WSCloseCode.MESSAGE_TOO_BIG, b"frame too large"
                return False
            return self._strike(exc.code, exc.message)
        rid = raw.get("rid")
        rid = rid if isinstance(rid, int | str) and not isinstance(rid, bool) else None
        if not await self._pace():
            return self._strike(
                "rate/limited",
                f"more than {self.config.rate_per_second:g} messages a second for over "
                f"{self.config.pace_limit_s:g} s; slow down",
                rid,
            )
        try:
            message = parse_client_message(raw)
        except ProtocolError as exc:
            return self._strike(exc.code, exc.message, rid)
        self.metrics.count_message(message)
        # The messages a ban refuses are those that act for the account: they need the
        # socket's session or token to hold still.
        if ban_checked(message) and not await self._still_signed_in():
            return self._signed_out(message.rid)
        try:
            await self.dispatch(message)
        except ProtocolError as exc:  # RoomError included
            self._error(exc.code, exc.message, message.rid, exc.details)
        except (BusError, OSError) as exc:
            log.warning("storage unavailable: %s", exc)
            self._error("server/unavailable", "storage unavailable; try again", message.rid)
        except Exception:
            log.exception("failed to handle %s", type(message).__name__)
            self._error("server/internal", "internal error; nothing was changed", message.rid)
        return True

    async def dispatch(self, message: ClientMessage) -> None:
        service, conn = self.service, self.conn
        if ban_checked(message):
            await self._refuse_banned()
        if isinstance(message, HIDDEN_READ_BY) and self._hidden_stale():
            await self._load_hidden()  # before the room's lines can reach this connection
        if isinstance(message, Ping):
            conn.send(Pong(message.rid, service.clock_ms()).to_dict())
        elif isinstance(message, Create):
            if message.rated and self.account is None:  # refused before it is counted
                raise RoomError("auth/required", rooms.RATED_NEEDS_ACCOUNT)
            if message.rated:
                await check_penalty(self.app[MODERATION_KEY], self.account)
            await self._count_create()
            token = new_token()
            room, seat = await service.create(
                message, token, owner=self.address, account=self.account
            )
            # Followed before anyone is told the room: nothing can happen to it unseen.
            await self.hub.follow(conn, room.id, seat)
            await self.send_seat(Seat(room.id, seat, token, message.rid))
            await self.follow_seated(room, seat, {"kind": "created", "seat": seat}, True)
        elif isinstance(message, Join):
            if self.account is not None and (await service.get(message.room)).rated:
                await check_penalty(self.app[MODERATION_KEY], self.account)
            token = new_token()
            room, seat = await service.join(message, token, account=self.account)
            await self.send_seat(Seat(room.id, seat, token, message.rid))
            await self.follow_seated(room, seat, {"kind": "joined", "seat": seat})
        elif isinstance(message, Watch):
            # Watching a room this connection plays in keeps the seat (and ``you``).
            await self._follow(message.room, conn.rooms.get(message.room))
        elif isinstance(message, Resume):
            await self._resume(message)
        elif isinstance(message, PlayMove):
            await self._answer(await service.move(message, self._lag_ms(), self.received_ms))
            self.metrics.moves.inc()
        elif isinstance(message, Resign):
            await self._answer(await service.resign(message))
        elif isinstance(message, Offer):
            # A second copy of an agreed rematch changes nothing: answered with a resync.
            await self._answer(await service.offer(message), changed=message.kind != "rematch")
        elif isinstance(message, Abort):
            aborted = await service.abort(message)
            await self._answer(aborted)
            await abandoned_by_abort(self.app[MODERATION_KEY], self.account, aborted)
        elif isinstance(message, Claim):
            claimed = await service.claim(message)
            await self._answer(claimed)
            await abandoned_by_claim(self.app[MODERATION_KEY], claimed, message.token)
        elif isinstance(message, Leave):
            await self.hub.unfollow(conn, message.room)  # its room told, if it played there
            conn.send(Left(message.room, message.rid).to_dict())
        elif isinstance(message, Chat):
            await self._chat(message)
        elif isinstance(message, Seek | Unseek | AcceptSeek | Lobby | PoolJoin | PoolLeave):
            await self.app[SEEKS_KEY].handle(self, message)

    async def send_seat(self, seat: Seat) -> None:
        """Send the player the seat they were given (its token is their credential), and,
        for a signed-in account, keep the token for the lichess-compatible HTTP API
        (shared/bus/seat_keys.py), so that the account may play the room from a bot or
        board app too. Not kept: logged, the seat stands."""
        self.conn.send(seat.to_dict())
        if self.account is None:
            return
        try:
            await SeatKeys(self.app[REDIS_KEY]).put(seat.room, {seat.seat: seat.token})
        except (BusError, OSError) as exc:
            log.warning("could not keep the seat key of %s: %s", seat.room, exc)

    async def _answer(self, room: Room, changed: bool = True) -> None:
        """Answer a change to ``room`` made for this connection with the state it led to,
        before anything else this connection sends is handled (the broadcast's copy of the
        same version is then skipped; if the broadcast got here first, it was the answer).
        A request that may have changed nothing (``changed`` False: a second copy of an
        agreed rematch) is answered with the room as it is (a ``resync``)."""
        if room.id not in self.conn.rooms:
            return  # not following the room: the broadcast is not for us either
        snap = self.service.committed_state(room.id, room.version)
        if snap is not None and snap["version"] > self.conn.last_version.get(room.id, -1):
            self.hub.deliver_state(room.id, snap)  # and to the room's other followers here
        elif snap is None or not changed:
            await self._send_current(room.id, None)

    async def follow_seated(
        self, room: Room, seat: int, event: dict[str, Any], followed: bool = False
    ) -> None:
        """Follow ``room`` (as committed with ``event``: ``created``/``joined``) as the
        player just seated in ``seat`` (``followed``: already done), and send it as its
        one state with that event. The commit already showed this seat connected, so
        nobody needs a presence update."""
        if not followed:
            await self.hub.follow(self.conn, room.id, seat)
        committed = self.service.committed_state(room.id, room.version)
        if committed is not None:  # as the commit published it (this seat connected)
            snap = {**committed, "event": event}
        else:
            snap = await self.service.snapshot(room)
            snap["event"] = event
        # To the room's other followers here too (a joiner's opponent); skipped by any
        # that its broadcast reached first.
        self.hub.deliver_state(room.id, snap)
        # Where the room is now, and the chat its players read, in one round trip.
        which = channel_of(seat)
        latest, chat = await asyncio.gather(
            self.service.store.version(room.id), self.app[CHAT_KEY].history(room.id, which)
        )
        if latest is None:
            raise RoomError("room/unknown", f"no room {room.id!r}")
        # It moved on before we followed it, and its broadcast did not get here after.
        if latest > max(room.version, self.conn.last_version.get(room.id, -1)):
            await self._send_current(room.id, room.version)
        else:
            await self._load_hidden()
            self._send_chat(room.id, which, chat)

    async def follow_room(self, room_id: str, seat: int | None) -> None:
        """Follow ``room_id`` as ``seat`` and send its state (an accepted seek)."""
        await self._follow(room_id, seat)

    async def _follow(self, room_id: str, seat: int | None) -> None:
        await self.service.get(room_id)  # it exists (else room/unknown)
        if await self.hub.follow(self.conn, room_id, seat):
            await self.service.publish_presence(room_id)
        await self._send_current(room_id, None)

    async def _resume(self, message: Resume) -> None:
        room = await self.service.get(message.room)
        seat = seat_for_token(room, message.token) if message.token else None
        if await self.hub.follow(self.conn, room.id, seat):
            await self.service.publish_presence(room.id)
        await self._send_current(room.id, message.since)

    async def _send_current(self, room_id: str, since: int | None) -> None:
        """The room as it is now, loaded after following it, so no event falls in between.

        With ``since``, the event carries what happened after that version (the ``missed``
        events, up to the config's ``resume_replay`` of them), for clients that show a move history.
        """
        room = await self.service.get(room_id)
        snap = await self.service.snapshot(room)
        event: dict[str, Any] = {"kind": "resync"}
        if since is not None and since >= room.version:
            # Nothing after it: ``since`` past the version means the room lost changes
            # the client saw (a Redis failover); this snapshot is the truth.
            event["missed"] = []
        elif since is not None and room.version - since <= self.config.resume_replay:
            event["missed"] = rooms.hide_lines(
                await self.service.store.events_since(room_id, since), room.status
            )
        elif since is not None and room.version - since > self.config.resume_replay:
            # Too far back to list it all: the last ``resume_replay`` versions, and from where.
            start = room.version - self.config.resume_replay
            event["missed"] = rooms.hide_lines(
                await self.service.store.events_since(room_id, start), room.status
            )
            event["missed_from"] = start
        snap["event"] = event
        self.conn.send_state(room.id, snap)
        await self._replay_chat(room_id)

    async def _replay_chat(self, room_id: str) -> None:
        """The last lines of the room's chat channel this connection reads, if any."""
        which = channel_of(self.conn.rooms.get(room_id))
        await self._load_hidden()
        self._send_chat(room_id, which, await self.app[CHAT_KEY].history(room_id, which))

    def _send_chat(self, room_id: str, which: Channel, lines: list[dict[str, Any]]) -> None:
        lines = [line for line in lines if not hidden_line(self.conn.hidden, line)]
        if lines:
            self.conn.send(ChatLines(room_id, which, lines, replay=True).to_dict())

    async def _chat(self, message: Chat) -> None:
        """A chat line: checked, rate-limited per connection, stored and published."""
        text = check_text(message.text)
        room = await self.service.get(message.room)
        which, seat, name = sender(room, message.token, message.name)
        if which == "spectators" and self.conn.rooms.get(room.id, "absent") is not None:
            raise ProtocolError(
                "chat/invalid",
                f"to chat with the spectators of {room.id}, watch it first"
                if room.id not in self.conn.rooms
                else f"you play in {room.id}: send your seat's token to chat as a player",
            )
        await self._refuse_muted()
        self.chat_rate.take()
        account = None if self.account is None else self.account.username
        await self.app[CHAT_KEY].post(room, which, seat, name, text, account)

    async def _still_signed_in(self) -> bool:
        """False once the credential the socket acts by has ended (a guest: True)."""
        if self.account is None:
            return True
        return await self.signed_in.live(self.app[ACCOUNTS_KEY])

    def _signed_out(self, rid: str | int | None) -> bool:
        """The socket's session ended or its token was revoked: it acts for nobody now;
        the client is told (``auth/expired``) and the socket closed (1008) so that the
        page reconnects as whoever it now is."""
        self.account = None
        self._error("auth/expired", "your session ended or your token was revoked", rid)
        self.close_code, self.close_reason = WSCloseCode.POLICY_VIOLATION, b"signed out"
        return False

    async def _refuse_banned(self) -> None:
        """``auth/banned`` if this socket's account or address is banned now."""
        account_id = None if self.account is None else self.account.id
        refusal = await self.app[MODERATION_KEY].banned(account_id, self.address)
        if refusal is not None:
            raise ProtocolError("auth/banned", refusal)

    async def _refuse_muted(self) -> None:
        """``chat/muted`` (with the time left) if this socket's account is muted now."""
        if self.account is not None:
            until = await self.app[MODERATION_KEY].muted_until(self.account.id)
            if until is not None:
                raise ProtocolError("chat/muted", mute_text(until, int(time.time() * 1000)))

    def _hidden_stale(self) -> bool:
        return self.account is not None and time.monotonic() - self.hidden_read >= HIDDEN_REFRESH_S

    async def _load_hidden(self) -> None:
        """The chat this connection must not see: the accounts its account blocks or is
        blocked by (read as it follows a room, and by the HIDDEN_READ_BY messages once
        HIDDEN_REFRESH_S old; never by a move or a ping). The database failing keeps the
        blocks it had (tried again once HIDDEN_REFRESH_S has passed)."""
        if self.account is None:
            return
        try:
            self.conn.hidden = await self.app[MODERATION_KEY].hidden_names(self.account.id)
        except (SQLAlchemyError, OSError) as exc:
            log.warning("blocks unreadable, the old ones kept: %s", type(exc).__name__)
        self.hidden_read = time.monotonic()

    async def _count_create(self) -> None:
        """Rooms cost storage: one connection may open ``creates_per_connection_per_minute``
        a minute, and one address (all its connections, on every node) the configured
        number."""
        now = time.monotonic()
        self.creates = [t for t in self.creates if now - t < 60.0]
        most = self.config.creates_per_connection_per_minute
        if len(self.creates) >= most:
            raise ProtocolError("rate/limited", f"at most {most} new rooms a minute per connection")
        try:
            await self.app[LIMITER_KEY].count_create(self.address)
        except LimitExceeded as exc:
            raise ProtocolError(exc.code, exc.message) from None
        self.creates.append(now)

    def _refill(self) -> float:
        now = time.monotonic()
        self.tokens = min(
            self.config.rate_burst,
            self.tokens + (now - self.refilled) * self.config.rate_per_second,
        )
        self.refilled = now
        return now

    async def _pace(self) -> bool:
        """Take this message's token from the bucket (``rate_burst``, refilled at
        ``rate_per_second``), waiting for it when the bucket is empty: a burst is read
        more slowly, not refused. False (refuse it) once the client has been over the rate
        for ``pace_limit_s`` without a break."""
        now = self._refill()
        if self.tokens >= 1:
            self.tokens -= 1
            if self.tokens >= self.config.pace_reset_tokens:
                # A real break: the client left a second's worth of messages unsent.
                # (Not any spare token: a sleep that overshoots under load leaves one.)
                self.paced_since = None
            return True
        if self.paced_since is None:
            self.paced_since = now
        elif now - self.paced_since > self.config.pace_limit_s:
            return False
        await asyncio.sleep((1 - self.tokens) / self.config.rate_per_second)
        self._refill()
        self.tokens -= 1
        return True

    def _strike(self, code: str, text: str, rid: str | int | None = None) -> bool:
        self._error(code, text, rid)
        now = time.monotonic()
        if now - self.strikes_since > self.config.strike_window_s:
            self.strikes, self.strikes_since = 0, now
        self.strikes += 1
        if self.strikes >= self.config.max_strikes:
            self.close_code = WSCloseCode.POLICY_VIOLATION
            self.close_reason = b"too many bad messages"
            return False
        return True

    def _lag_ms(self) -> int:
        lag = self.conn.lag
        return lag.estimate_ms if lag is not None else 0

    def _error(
        self,
        code: str,
        text: str,
        rid: str | int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Send an error; ``details``: its extra fields (``rate/ai_games``: ``rooms``)."""
        self.metrics.errors.labels(code).inc()
        self.conn.send(Error(code, text, rid, details).to_dict())
