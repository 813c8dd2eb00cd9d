"""Moderation over HTTP: blocks and reports for players, the ``/api/mod/...`` paths for
moderators and admins (docs/accounts.md, Moderation).

Who may call what is decided here (server/http/identity.py: a signed-in account for
blocks and reports; the moderator role for reports' handling, mutes and marks; the admin
role for bans and the audit log); what is valid, and the changes, by the moderation
service (server/moderation/). Every refusal is the API's one error body with a
``mod/...``, ``auth/...`` or ``request/invalid`` code, and changes nothing; the database
or Redis unreachable is 503 ``server/unavailable``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from kibitz.server.appkeys import MODERATION_KEY
from kibitz.server.domain.players import ADMIN, MODERATOR, Account
from kibitz.server.http.identity import require_account, require_role
from kibitz.server.moderation.rules import ModerationError
from kibitz.server.moderation.service import Moderation
from kibitz.shared.bus.errors import BusError
from kibitz.shared.protocol.client_out import Error

log = logging.getLogger(__name__)

MAX_ID = 2**31 - 1  # the largest id a path may name (the tables' ids are 32-bit)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def register(app: web.Application) -> None:
    add = app.router
    add.add_post("/api/players/{username}/block", guarded(block))
    add.add_delete("/api/players/{username}/block", guarded(unblock))
    add.add_get("/api/blocks", guarded(list_blocks))
    add.add_post("/api/reports", guarded(file_report))
    add.add_get("/api/mod/reports", guarded(list_reports))
    add.add_post("/api/mod/reports/{id}/close", guarded(close_report))
    add.add_post("/api/mod/players/{username}/mute", guarded(mute))
    add.add_post("/api/mod/players/{username}/mark", guarded(mark))
    add.add_get("/api/mod/bans", guarded(list_bans))
    add.add_post("/api/mod/bans", guarded(ban))
    add.add_delete("/api/mod/bans/{id}", guarded(unban))
    add.add_get("/api/mod/audit", guarded(audit))


def error(status: int, code: str, message: str) -> web.Response:
    return web.json_response(Error(code, message).to_dict(), status=status)


def guarded(handler: Handler) -> Handler:
    """``handler`` with the service's refusals answered as typed errors."""

    async def guard(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except ModerationError as exc:
            return error(exc.status, exc.code, exc.message)
        except (SQLAlchemyError, BusError, OSError) as exc:
            log.warning("moderation storage unavailable: %s", type(exc).__name__)
            return error(503, "server/unavailable", "storage unavailable; try again")

    return guard


async def body_of(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; 400 ``request/invalid`` otherwise."""
    try:
        body = await request.json(loads=json.loads)
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps(Error("request/invalid", "the body must be a JSON object").to_dict()),
            content_type="application/json",
        )
    return body


def service(request: web.Request) -> Moderation:
    return request.app[MODERATION_KEY]


async def staff(request: web.Request, role: str, scope: str) -> Account:
    account = await require_account(request, scope)
    require_role(account, role)
    return account


def path_id(request: web.Request) -> int:
    """The path's ``{id}``: ASCII digits, 1 to MAX_ID, else 400 ``mod/invalid``."""
    number = ascii_number(request.match_info["id"], MAX_ID)
    if number is None or number < 1:
        raise ModerationError("mod/invalid", f"the id must be a whole number from 1 to {MAX_ID}")
    return number


def ascii_number(text: str, most: int) -> int | None:
    """``text`` as a number if it is ASCII digits (not "²", "١") worth at most ``most``."""
    if not 1 <= len(text) <= len(str(most)) or not all("0" <= c <= "9" for c in text):
        return None
    number = int(text)
    return number if number <= most else None


# -- players: blocks and reports ---------------------------------------------------------


async def block(request: web.Request) -> web.Response:
    account = await require_account(request, "play")
    name = await service(request).block(account, request.match_info["username"])
    return web.json_response({"blocked": name})


async def unblock(request: web.Request) -> web.Response:
    account = await require_account(request, "play")
    name = await service(request).unblock(account, request.match_info["username"])
    return web.json_response({"unblocked": name})


async def list_blocks(request: web.Request) -> web.Response:
    account = await require_account(request, "read")
    return web.json_response({"blocks": await service(request).blocks(account.id)})


async def file_report(request: web.Request) -> web.Response:
    account = await require_account(request, "play")
    report_id = await service(request).report(account, await body_of(request))
    return web.json_response({"report": report_id}, status=201)


# -- moderators --------------------------------------------------------------------------


async def list_reports(request: web.Request) -> web.Response:
    await staff(request, MODERATOR, "admin")
    everything = request.query.get("all", "") in ("1", "true")
    return web.json_response({"reports": await service(request).reports(everything)})


async def close_report(request: web.Request) -> web.Response:
    actor = await staff(request, MODERATOR, "admin")
    report_id = path_id(request)
    body = await body_of(request)
    await service(request).close_report(actor, report_id, body.get("resolution"))
    return web.json_response({"closed": report_id})


async def mute(request: web.Request) -> web.Response:
    actor = await staff(request, MODERATOR, "admin")
    body = await body_of(request)
    name = request.match_info["username"]
    until = await service(request).mute(actor, name, body.get("minutes"))
    return web.json_response({"username": name, "muted_until_ms": until})


async def mark(request: web.Request) -> web.Response:
    actor = await staff(request, MODERATOR, "admin")
    body = await body_of(request)
    if "mark" not in body:
        raise ModerationError("mod/invalid", "give a mark, or null to remove it")
    name = request.match_info["username"]
    value = await service(request).set_mark(actor, name, body["mark"])
    return web.json_response({"username": name, "mark": value})


# -- admins ------------------------------------------------------------------------------


async def list_bans(request: web.Request) -> web.Response:
    await staff(request, ADMIN, "admin")
    return web.json_response({"bans": await service(request).bans()})


async def ban(request: web.Request) -> web.Response:
    actor = await staff(request, ADMIN, "admin")
    body = await body_of(request)
    made = await service(request).ban(
        actor, body.get("kind"), body.get("target"), body.get("reason"), body.get("hours")
    )
    return web.json_response({"ban": made}, status=201)


async def unban(request: web.Request) -> web.Response:
    actor = await staff(request, ADMIN, "admin")
    ban_id = path_id(request)
    await service(request).unban(actor, ban_id)
    return web.json_response({"lifted": ban_id})


async def audit(request: web.Request) -> web.Response:
    await staff(request, ADMIN, "admin")
    limit = ascii_number(request.query.get("limit", "50"), MAX_ID)
    if limit is None:
        raise ModerationError("mod/invalid", "limit must be a whole number")
    return web.json_response({"audit": await service(request).audit(limit)})
