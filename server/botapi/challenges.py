"""Challenges between accounts, as lichess's API serves them, and the seat keys of the
rooms they make.

- ``POST /api/challenge/{username}``: challenge an account (fields ``rated``,
  ``clock.limit`` and ``clock.increment`` in seconds, or ``days``, ``color`` (the
  challenger's), ``variant`` (any kibitz game; chess is ``standard``),
  ``keepAliveStream``), as a form or a JSON object. The answer is the challenge; with
  ``keepAliveStream=true`` it is an NDJSON stream instead: the challenge, an empty line
  every few seconds, and ``{"done": "accepted"|"declined"|"canceled"}``; the challenge
  lives while that request stays open (canceled when it closes).
- ``POST /api/challenge/{id}/accept`` (the destination): makes the room (id = the
  challenge's), both players seated, and keeps both seats' tokens (``SeatKeys``) so the
  API can play for them; the players' event streams get ``gameStart`` from the commit.
- ``POST /api/challenge/{id}/decline`` (the destination; ``reason`` a lichess reason key):
  the challenger's event stream is told; ``/cancel`` (the challenger): both sides' are.
  The line that decides a challenge reaches its challenger (``challengeDeclined``,
  ``challengeCanceled``, the room's ``gameStart``), which wakes its keep-alive request.
- ``GET /api/challenge``: the account's open challenges, ``{"in": [...], "out": [...]}``.
- ``GET /api/rooms/{id}/seat`` (ours): the caller's seat in a room and its token, for the
  browser to enter a room a challenge made.

Every challenge is an open record in the challenge store (shared/bus/challenges.py) until
exactly one of accept, decline and cancel decides it; its event lines go to both accounts'
event streams (``AccountEvents``). The rules of who may challenge whom are those of seeks
(server/services/seekers.py): no blocked pair, no banned challenger; a rated challenge is
played with the game's default options, and needs both ratings read.
"""

from __future__ import annotations

import asyncio
import logging
import random
from asyncio import FIRST_COMPLETED
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.appkeys import (
    ACCOUNTS_KEY,
    MODERATION_KEY,
    REDIS_KEY,
    SERVICE_KEY,
)
from kibitz.server.botapi import formats
from kibitz.server.botapi.errors import (
    api_account,
    api_error,
    identify,
    limit,
    ok,
    refuse_banned,
    request_fields,
)
from kibitz.server.botapi.events import (
    CHALLENGE_LINES_KEY,
    EVENT_STREAMS_KEY,
    NDJSON,
    OUTCOMES,
    Stream,
    encode,
)
from kibitz.server.botapi.game_events import seats_of
from kibitz.server.botapi.users import game_url, public_origin
from kibitz.server.domain import room as rooms
from kibitz.server.domain.players import Account
from kibitz.server.domain.room import Event, Room, RoomError, SeatAccount, new_token
from kibitz.server.http.auth import address_of
from kibitz.server.services.rooms import now_ms
from kibitz.server.services.seekers import build_room, check_not_blocked
from kibitz.shared.bus.account_events import AccountEvents
from kibitz.shared.bus.challenges import (
    KEEP_ALIVE_TTL_MS,
    OPEN_TTL_MS,
    ChallengeExists,
    ChallengeLimit,
    Challenges,
)
from kibitz.shared.bus.errors import BusError
from kibitz.shared.bus.seat_keys import SeatKeys
from kibitz.shared.games import find_game
from kibitz.shared.protocol.client_in import CLOCK_DAYS, CLOCK_INCREMENT_MS, CLOCK_INITIAL_MS
from kibitz.shared.protocol.codec import ProtocolError

log = logging.getLogger(__name__)

#: Challenges an account may make a minute (lichess's own limit is of this order).
CHALLENGES_PER_MINUTE = 30
#: How often a ``keepAliveStream`` request looks whether its client is still there (s):
#: a look at its transport, no I/O. Its outcome wakes it (the line that decides the
#: challenge, through the node's stream registry).
POLL_S = 1.0
#: Every this many looks the request renews its challenge (which outlives it by
#: KEEP_ALIVE_TTL_MS, 20 s) and, should the renewal find it decided (a line lost while
#: the node's subscription was down, or the record expired), reads its outcome.
RENEW_POLLS = 10
#: How long a keep-alive stream that read its challenge accepted waits for the room's
#: seat keys (the acceptor stores them just before the room): then ``done`` regardless.
READY_WAIT_POLLS = 10
COMPAT = {"bot": True, "board": True}
#: The most digits a whole-number field may have (kibitz's clocks need far fewer).
MAX_DIGITS = 9
#: The longest ``variant`` a request may name (every game's id is shorter).
MAX_VARIANT = 32

#: lichess's reasons to decline (its keys), with a sentence of ours for each.
DECLINE_REASONS = {
    "generic": "I am not accepting challenges at the moment.",
    "later": "This is not a good time for me; please ask again later.",
    "tooFast": "This time control is too fast for me; please try a slower one.",
    "tooSlow": "This time control is too slow for me; please try a faster one.",
    "timeControl": "I am not accepting challenges with this time control.",
    "rated": "Please send me a rated challenge instead.",
    "casual": "Please send me a casual challenge instead.",
    "standard": "I am not accepting variant challenges right now.",
    "variant": "I am not willing to play this variant right now.",
    "noBot": "I am not accepting challenges from bots.",
    "onlyBot": "I am only accepting challenges from bots.",
}
COLOURS = ("white", "black", "random")


def challenger_seat(record: dict[str, Any]) -> int:
    """The challenger's seat: its ``final_color`` (drawn when the challenge was made), or
    for a record made before that field existed, its colour, random drawn now."""
    final = record.get("final_color") or record.get("color", "random")
    return COLOURS.index(final) if final in COLOURS[:2] else random.randrange(2)


# -- the JSON of a challenge -------------------------------------------------------------


def challenge_json(
    record: Mapping[str, Any], origin: str, direction: str | None = None
) -> dict[str, Any]:
    """lichess's Challenge object of a stored challenge ``record``; ``origin``: the site's
    (its ``url`` opens the room it becomes), ``direction``: ``in`` or ``out`` as the
    reader sees it (None: not shown)."""
    game, clock = str(record["game"]), record.get("clock")
    out: dict[str, Any] = {
        "id": record["id"],
        "url": game_url(origin, str(record["id"])),
        "status": record["status"],
        "challenger": formats.light_user(record["challenger"]),
        "destUser": formats.light_user(record["dest"]),
        "variant": formats.variant_json(game),
        "rated": bool(record.get("rated")),
        "speed": formats.speed_of_clock(game, clock),
        "timeControl": formats.time_control_json(clock),
        "color": record.get("color", "random"),
        "perf": formats.perf_json(game, clock),
    }
    if record.get("final_color"):
        out["finalColor"] = record["final_color"]
    if direction is not None:
        out["direction"] = direction
    reason = record.get("decline_reason")
    if reason:
        out["declineReason"] = DECLINE_REASONS.get(reason, DECLINE_REASONS["generic"])
        out["declineReasonKey"] = reason
    return out


async def open_challenge_lines(
    app: web.Application, account_id: int, origin: str
) -> list[dict[str, Any]]:
    """A ``challenge`` event line for each open challenge made to ``account_id`` (what a
    newly opened event stream is sent first)."""
    records = await Challenges(app[REDIS_KEY]).incoming(account_id)
    return [challenge_line(r, origin, "in") for r in records]


def challenge_line(record: Mapping[str, Any], origin: str, direction: str) -> dict[str, Any]:
    return {
        "type": "challenge",
        "challenge": challenge_json(record, origin, direction),
        "compat": COMPAT,
    }


# -- reading the request's fields (errors.request_fields) ------------------------------


def flag(fields: Mapping[str, Any], name: str, default: bool = False) -> bool:
    """A true/false field (``true``/``false`` in a form, a boolean in JSON)."""
    value = fields.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise api_error(400, f"{name}: must be true or false")


def whole(fields: Mapping[str, Any], name: str) -> int | None:
    """A field holding a whole number from 0, of at most MAX_DIGITS digits (None:
    absent)."""
    value = fields.get(name)
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**MAX_DIGITS:
        return value
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS:
        return int(text)
    raise api_error(400, f"{name}: must be a whole number")


def game_of(fields: Mapping[str, Any]) -> str:
    """The kibitz game a ``variant`` field names (absent: chess)."""
    key = str(fields.get("variant") or "standard")
    if len(key) > MAX_VARIANT:
        raise api_error(400, f"variant: at most {MAX_VARIANT} characters")
    try:
        return formats.game_of_variant(key)
    except ValueError as exc:
        raise api_error(400, f"variant: {exc}") from None


def control(
    limit_s: int | None, increment_s: int | None, days: int | None
) -> dict[str, int] | None:
    """The room's time control from lichess's fields: a clock of ``limit_s`` +
    ``increment_s`` seconds, ``days`` per move, or none (unlimited); 400 with the reason
    when kibitz's clocks cannot hold it."""
    if limit_s is not None and days is not None:
        raise api_error(400, "Give clock.limit and clock.increment, or days, not both")
    if limit_s is None and increment_s is not None:
        raise api_error(400, "clock.increment needs clock.limit")
    if days is not None:
        _within("days", days, CLOCK_DAYS, "")
        return {"days_per_move": days}
    if limit_s is None:
        return None
    _within("clock.limit", limit_s * 1000, CLOCK_INITIAL_MS, " seconds")
    _within("clock.increment", (increment_s or 0) * 1000, CLOCK_INCREMENT_MS, " seconds")
    return {"initial_ms": limit_s * 1000, "increment_ms": (increment_s or 0) * 1000}


def _within(name: str, value: int, bounds: tuple[int, int], unit: str) -> None:
    """400 unless ``value`` lies in ``bounds`` (shown in seconds when ``unit`` says so)."""
    low, high = bounds
    if not low <= value <= high:
        scale = 1000 if unit else 1
        raise api_error(400, f"{name}: kibitz clocks take {low // scale} to {high // scale}{unit}")


# -- the rules between two accounts ----------------------------------------------------


async def refuse_blocked(request: web.Request, a: int, b: int) -> None:
    """400 when one of the two accounts blocks the other."""
    try:
        await check_not_blocked(request.app[MODERATION_KEY], a, b)
    except ProtocolError as exc:
        status = 503 if exc.code == "server/unavailable" else 400
        raise api_error(status, exc.message) from None


async def seat_of(
    request: web.Request, account: Account, game: str, clock: dict[str, int] | None, rated: bool
) -> SeatAccount:
    """The seat ``account`` takes in such a game: its rating read now."""
    try:
        holder = await request.app[SERVICE_KEY].holder(account, game, clock, rated)
    except RoomError as exc:
        raise api_error(503, exc.message) from None
    assert holder is not None  # an account always has a seat
    return holder


def user_record(holder: SeatAccount) -> dict[str, Any]:
    """An account as a challenge keeps it (the keys of a snapshot's seat, which
    :func:`formats.light_user` reads)."""
    return {
        "account_id": holder.account_id,
        "account": holder.username,
        "player": holder.player_id,
        "bot": holder.bot,
        "rating": holder.rating,
        "provisional": holder.provisional,
    }


# -- the handlers ------------------------------------------------------------------------


async def create(request: web.Request) -> web.StreamResponse:
    """``POST /api/challenge/{username}``."""
    account, credential = await identify(request.app, request.headers, "play")
    await limit(request, account, "challenge", CHALLENGES_PER_MINUTE, 60)
    fields = await request_fields(request)
    username = request.match_info["username"]
    try:
        dest = await request.app[ACCOUNTS_KEY].by_name(username)
    except (SQLAlchemyError, OSError):
        raise api_error(503, "Accounts cannot be read now; try again") from None
    if dest is None:
        raise api_error(404, f"No such user: {username}")
    if dest.id == account.id:
        raise api_error(400, "You cannot challenge yourself")
    game = game_of(fields)
    clock = control(
        whole(fields, "clock.limit"), whole(fields, "clock.increment"), whole(fields, "days")
    )
    rated = flag(fields, "rated")
    color = str(fields.get("color") or "random")
    if color not in COLOURS:
        raise api_error(400, "color: must be white, black or random")
    if fields.get("fen"):
        raise api_error(400, "fen: kibitz challenges start from the game's initial position")
    keep_alive = flag(fields, "keepAliveStream")
    options = dict(find_game(game).normalize_options({}))
    await refuse_banned(request, account)
    await refuse_blocked(request, account.id, dest.id)
    challenger = await seat_of(request, account, game, clock, rated)
    destination = await seat_of(request, dest, game, clock, rated)
    record: dict[str, Any] = {
        "challenger": user_record(challenger),
        "dest": user_record(destination),
        "game": game,
        "options": options,
        "rated": rated,
        "clock": clock,
        "color": color,
        # The challenger's colour, drawn now for "random" (lichess's challenge always
        # carries it, and bridges such as lichess-bot read it before accepting).
        "final_color": color if color != "random" else random.choice(COLOURS[:2]),
        "keep_alive": keep_alive,
        "created_ms": now_ms(),
    }
    if not keep_alive:
        record = await _publish(request, await _store(request, record, OPEN_TTL_MS))
        return web.json_response(challenge_json(record, public_origin(request)))
    registry = request.app[EVENT_STREAMS_KEY]
    response = web.StreamResponse(headers={"Content-Type": NDJSON})
    stream = Stream(request, response, "challenge", credential=credential)
    registry.add_keepalive(stream)  # past the node's bound: 429, nothing stored
    decided: asyncio.Future[dict[str, Any]] | None = None
    try:
        record = await _store(request, record, KEEP_ALIVE_TTL_MS)
        # Waiting before anyone is told of it: no outcome can come first.
        decided = registry.wait_challenge(str(record["id"]), account.id)
        record = await _publish(request, record)
        store = Challenges(request.app[REDIS_KEY])
        origin = public_origin(request)
        return await _keep_alive(request, stream, store, record, origin, decided)
    finally:
        if decided is not None:
            registry.forget_challenge(str(record["id"]), decided)
        registry.remove(stream)


async def _publish(request: web.Request, record: dict[str, Any]) -> dict[str, Any]:
    """Tell both accounts' event streams of the new challenge ``record``."""
    origin = public_origin(request)
    dest, challenger = int(record["dest"]["account_id"]), int(record["challenger"]["account_id"])
    await AccountEvents(request.app[REDIS_KEY]).publish_each([
        (dest, challenge_line(record, origin, "in")),
        (challenger, challenge_line(record, origin, "out")),
    ])  # fmt: skip
    return record


async def _store(request: web.Request, record: dict[str, Any], ttl_ms: int) -> dict[str, Any]:
    """``record`` stored under a fresh id (the id of the room it becomes)."""
    store = Challenges(request.app[REDIS_KEY])
    for _ in range(3):
        stored = {**record, "id": rooms.new_room_id(), "status": "created"}
        try:
            await store.create(stored, now_ms(), ttl_ms)
        except ChallengeExists:
            continue
        except ChallengeLimit as exc:
            if exc.direction == "out":
                raise api_error(
                    429, "Too many open challenges; wait for them to be answered",
                    {"Retry-After": "60"},
                ) from None  # fmt: skip
            raise api_error(400, "This player has too many open challenges") from None
        return stored
    raise api_error(503, "Could not allocate a challenge id; try again")


async def _keep_alive(
    request: web.Request,
    stream: Stream,
    store: Challenges,
    record: dict[str, Any],
    origin: str,
    decided: asyncio.Future[dict[str, Any]],
) -> web.StreamResponse:
    """The challenge as an NDJSON stream that lasts as long as the challenge: the
    challenge, then ``{"done": outcome}`` (the node's keep-alive loop writes an empty line
    every few seconds meanwhile). The outcome comes with the line that decides the
    challenge, to its maker (the node's registry resolves ``decided``:
    ``EventStreams.wait_challenge``); every RENEW_POLLS looks the challenge is renewed,
    and a renewal that finds it decided reads its record instead. If the client goes
    first (or the node drains, or the maker's credential ends), the challenge is
    canceled."""
    response = stream.response
    challenge_id = str(record["id"])
    await response.prepare(request)
    await response.write(encode(challenge_json(record, origin)))
    either: list[asyncio.Future[Any]] = [stream.done, decided]
    polls = 0
    while True:
        await asyncio.wait(either, timeout=POLL_S, return_when=FIRST_COMPLETED)
        if stream.done.done() or request.transport is None or request.transport.is_closing():
            await _withdraw(request, store, challenge_id, origin)
            return response
        done = _outcome_of_line(decided.result()) if decided.done() else None
        polls += 1
        renew = done is None and polls % RENEW_POLLS == 0
        if renew and not await store.refresh(challenge_id, now_ms()):
            done = await _outcome_of_record(store, challenge_id, origin)
        if done is not None:
            await _write(response, encode(done))
            return response


def _outcome_of_line(line: Mapping[str, Any]) -> dict[str, Any]:
    """The ``done`` line of the event line that decided a challenge (events.OUTCOMES):
    a ``gameStart`` of its room is sent once the room is made, its seats' keys stored
    before it (so ``accepted`` at once), a ``challengeDeclined`` carries the reason."""
    done: dict[str, Any] = {"done": OUTCOMES[str(line["type"])]}
    challenge = line.get("challenge") or {}
    if done["done"] == "declined" and "declineReasonKey" in challenge:
        done["declineReason"] = challenge["declineReason"]
        done["declineReasonKey"] = challenge["declineReasonKey"]
    return done


async def _outcome_of_record(
    store: Challenges, challenge_id: str, origin: str
) -> dict[str, Any] | None:
    """The ``done`` line of a challenge read from its record (gone: ``canceled``), None
    while it is open. An ``accepted`` one is told once the acceptor has stored the room's
    seat keys (``ready``), waiting for it READY_WAIT_POLLS x POLL_S at most."""
    for _ in range(READY_WAIT_POLLS):
        current = await store.get(challenge_id)
        status = "canceled" if current is None else str(current["status"])
        if status != "accepted" or current is None or current.get("ready"):
            break
        await asyncio.sleep(POLL_S)  # the room is being made
    if status == "created":
        return None
    done: dict[str, Any] = {"done": status}
    if current is not None and current.get("decline_reason"):
        shown = challenge_json(current, origin)
        done["declineReason"] = shown["declineReason"]
        done["declineReasonKey"] = shown["declineReasonKey"]
    return done


async def _write(response: web.StreamResponse, data: bytes) -> bool:
    """Write ``data``; False if the client has gone."""
    try:
        await response.write(data)
    except (ConnectionError, RuntimeError):
        return False
    return True


async def _withdraw(
    request: web.Request, store: Challenges, challenge_id: str, origin: str
) -> None:
    """The maker of a keep-alive challenge went away: the challenge is canceled."""
    try:
        canceled = await store.cancel(challenge_id)
        if canceled is not None:
            await _tell(request, canceled, "challengeCanceled", "dest", origin)
    except (BusError, OSError) as exc:
        log.warning("could not cancel challenge %s: %s", challenge_id, exc)


async def _tell(
    request: web.Request, record: Mapping[str, Any], kind: str, role: str, origin: str
) -> None:
    """A ``kind`` line about ``record`` to the event streams of its ``role`` account."""
    direction = "in" if role == "dest" else "out"
    line = {"type": kind, "challenge": challenge_json(record, origin, direction)}
    await AccountEvents(request.app[REDIS_KEY]).publish([int(record[role]["account_id"])], line)


async def _tell_both(
    request: web.Request, record: Mapping[str, Any], kind: str, origin: str
) -> None:
    """A ``kind`` line about ``record`` to both accounts' event streams (each seeing it
    from its side), in one PUBLISH: the challenger's wakes its keep-alive request."""
    await AccountEvents(request.app[REDIS_KEY]).publish_each([
        (int(record[role]["account_id"]),
         {"type": kind, "challenge": challenge_json(record, origin, direction)})
        for role, direction in (("dest", "in"), ("challenger", "out"))
    ])  # fmt: skip


async def _open_record(request: web.Request, account: Account, role: str) -> dict[str, Any]:
    """The open challenge the path names, of which ``account`` is the ``role``: 404 if
    there is none or ``account`` is not its ``role`` (as lichess answers: a stranger
    learns nothing of it), 400 if it is no longer open."""
    challenge_id = request.match_info["id"]
    if not rooms.valid_room_id(challenge_id):
        raise api_error(404, "Challenge not found")
    record = await Challenges(request.app[REDIS_KEY]).get(challenge_id)
    if record is None:
        raise api_error(404, "Challenge not found")
    if int(record[role]["account_id"]) != account.id:
        raise api_error(404, "Challenge not found")
    if record["status"] != "created":
        raise api_error(400, f"This challenge is no longer open ({record['status']})")
    return record


async def accept(request: web.Request) -> web.Response:
    """``POST /api/challenge/{id}/accept``: the room, both seats taken."""
    account = await api_account(request)
    record = await _open_record(request, account, "dest")
    await refuse_banned(request, account)
    challenger_id = int(record["challenger"]["account_id"])
    await refuse_blocked(request, challenger_id, account.id)
    try:
        challenger_account = await request.app[ACCOUNTS_KEY].get(challenger_id)
        banned = await request.app[MODERATION_KEY].banned(challenger_id, None)
    except (SQLAlchemyError, OSError):
        raise api_error(503, "Accounts cannot be read now; try again") from None
    store = Challenges(request.app[REDIS_KEY])
    origin = public_origin(request)
    if challenger_account is None or banned is not None:
        canceled = await store.cancel(str(record["id"]))
        if canceled is not None:
            await _tell_both(request, canceled, "challengeCanceled", origin)
        raise api_error(400, "The challenger can no longer play; the challenge is canceled")
    game, clock, rated = str(record["game"]), record.get("clock"), bool(record.get("rated"))
    challenger = await seat_of(request, challenger_account, game, clock, rated)
    acceptor = await seat_of(request, account, game, clock, rated)
    service = request.app[SERVICE_KEY]
    address = address_of(request)
    try:
        counted = await service.count_room(address)
    except RoomError as exc:
        raise api_error(429, exc.message, {"Retry-After": "60"}) from None
    seat = challenger_seat(record)
    won = await store.accept(str(record["id"]), {"final_color": formats.colour(seat)})
    if won is None:
        await service.uncount_room(counted)
        raise api_error(400, "This challenge is no longer open")
    tokens = {seat: new_token(), 1 - seat: new_token()}
    facts = {
        "game": game, "options": record.get("options") or {}, "clock": clock,
        "name": challenger.username, "player": challenger.player_id, "address": address,
    }  # fmt: skip

    def build(room_id: str) -> tuple[Room, Event]:
        return build_room(
            facts, room_id, tokens[seat], tokens[1 - seat], acceptor.username,
            acceptor.player_id, service.clock_ms(), seat, service.first_move_ms,
            rated=rated, creator=challenger, acceptor=acceptor,
        )  # fmt: skip

    room_id = str(record["id"])
    try:
        if await service.store.version(room_id) is not None:
            raise RoomError("room/exists", f"a room {room_id} exists already")
        # Kept before the room is made: its commit tells both event streams the game
        # started, and the players may act at once.
        await SeatKeys(request.app[REDIS_KEY]).put(room_id, tokens)
        await service.create_built(build, room_id=room_id)
    except (RoomError, BusError, OSError) as exc:
        await service.uncount_room(counted)
        undone = await store.decide(room_id, "canceled", expected="accepted")
        if undone is not None:
            await _tell(request, undone, "challengeCanceled", "challenger", origin)
        message = exc.message if isinstance(exc, RoomError) else "Storage unavailable; try again"
        raise api_error(400 if isinstance(exc, RoomError) else 503, message) from None
    await store.decide(room_id, "accepted", {"ready": True}, expected="accepted")
    return ok()


def reason_key(fields: Mapping[str, Any]) -> str:
    """The lichess decline reason a ``reason`` field names (absent: ``generic``); its
    case does not matter, as at lichess."""
    given = str(fields.get("reason") or "generic")
    for key in DECLINE_REASONS:
        if key.lower() == given.lower():
            return key
    raise api_error(400, f"reason: one of {', '.join(DECLINE_REASONS)}")


async def decline(request: web.Request) -> web.Response:
    """``POST /api/challenge/{id}/decline``: the challenger's stream gets
    ``challengeDeclined``."""
    account = await api_account(request)
    reason = reason_key(await request_fields(request))
    record = await _open_record(request, account, "dest")
    declined = await Challenges(request.app[REDIS_KEY]).decline(str(record["id"]), reason)
    if declined is None:
        raise api_error(400, "This challenge is no longer open")
    await _tell(request, declined, "challengeDeclined", "challenger", public_origin(request))
    return ok()


async def cancel(request: web.Request) -> web.Response:
    """``POST /api/challenge/{id}/cancel`` (its challenger): the destination's stream
    gets ``challengeCanceled``."""
    account = await api_account(request)
    record = await _open_record(request, account, "challenger")
    canceled = await Challenges(request.app[REDIS_KEY]).cancel(str(record["id"]))
    if canceled is None:
        raise api_error(400, "This challenge is no longer open")
    await _tell_both(request, canceled, "challengeCanceled", public_origin(request))
    return ok()


async def listing(request: web.Request) -> web.Response:
    """``GET /api/challenge``: ``{"in": [...], "out": [...]}``, oldest first."""
    account = await api_account(request)
    store, origin = Challenges(request.app[REDIS_KEY]), public_origin(request)
    incoming, outgoing = await store.incoming(account.id), await store.outgoing(account.id)
    return web.json_response({
        "in": [challenge_json(r, origin, "in") for r in incoming],
        "out": [challenge_json(r, origin, "out") for r in outgoing],
    })  # fmt: skip


async def seat(request: web.Request) -> web.Response:
    """``GET /api/rooms/{id}/seat``: ``{"room", "seat", "token"}`` of the caller's seat,
    404 when the caller holds no seat there whose key is kept."""
    account = await api_account(request)
    room_id = request.match_info["id"]
    try:
        room = await request.app[SERVICE_KEY].get(room_id)  # 404 for an id no room has
        for index in seats_of(room, account.id):
            token = await SeatKeys(request.app[REDIS_KEY]).get(room.id, index)
            if token is not None:
                return web.json_response({"room": room.id, "seat": index, "token": token})
    except RoomError:
        raise api_error(404, "Not found") from None
    except (BusError, OSError):
        raise api_error(503, "Server unavailable; try again") from None
    raise api_error(404, "You hold no seat in this room that the API can play")


def register(app: web.Application) -> None:
    """Add this module's routes, and give new event streams the open challenges."""
    app[CHALLENGE_LINES_KEY] = open_challenge_lines
    app.router.add_get("/api/challenge", listing)
    app.router.add_post("/api/challenge/{id}/accept", accept)
    app.router.add_post("/api/challenge/{id}/decline", decline)
    app.router.add_post("/api/challenge/{id}/cancel", cancel)
    app.router.add_post("/api/challenge/{username}", create)
    app.router.add_get("/api/rooms/{id}/seat", seat)
