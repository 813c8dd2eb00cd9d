// The error toast: a plain-words title, the server's message and the stable code.

import { ServerError } from "./protocol.js";
import { el } from "./boards/common.js";

const toast = () => document.getElementById("error");

const ERROR_SHOW_MS = 9000;

const FRIENDLY_ERRORS = {
  "room/unknown": "No game with that room id",
  "room/full": "Both seats are taken",
  "room/seat_taken": "That seat is taken",
  "room/stale": "The board changed before your move arrived",
  "room/busy": "The game is busy; please try again",
  "move/illegal": "Illegal move",
  "move/invalid": "Invalid move",
  "move/not_your_turn": "It is not your turn",
  "game/over": "The game is over",
  "auth/token": "This browser holds no seat in that game",
  "options/invalid": "Invalid game option",
  "game/unknown": "Unknown game",
  "game/not_found": "No game with that id",
  "export/format": "This game has no such export format",
  "query/invalid": "Invalid request",
  "rate/limited": "Too many requests; slow down",
  "server/unavailable": "The server cannot reach its storage; please try again",
  "server/busy": "The server is busy; please try again",
  "server/internal": "Something went wrong on the server; nothing was changed",
  "client/timeout": "The server did not answer",
  "client/disconnected": "The connection dropped before the server answered",
  "client/error": "Something went wrong in this page",
  "http/error": "The server could not answer that",
  "message/invalid": "The server could not understand that request",
  "message/unknown_type": "This server does not know that request",
  "room/waiting": "The game has not started yet",
  "clock/invalid": "That time control is not possible",
  "offer/none": "There is no offer to answer",
  "offer/not_allowed": "That cannot be offered now",
  "abort/too_late": "Too late to abort: both sides have moved",
  "claim/too_early": "Too early to claim",
  "claim/not_allowed": "Nothing to claim",
  "chat/invalid": "That message cannot be sent",
  "chat/rate": "You are chatting too fast; wait a few seconds",
  "seek/unknown": "That challenge is gone",
  "seek/own": "That is your own challenge",
  "position/invalid": "That position text is not valid",
};

/** The plain-words title of an error code (codes are shown only as detail). */
export function friendlyError(code) {
  return FRIENDLY_ERRORS[code] || "Something went wrong";
}

let errorTimer = null;

export function showError(code, message) {
  const box = toast();
  box.replaceChildren(
    el("strong", {}, [friendlyError(code)]),
    el("span", { class: "detail" }, [message || ""]),
    el("small", { class: "code-detail muted" }, ["code ", el("code", { class: "code", testid: "error-code" }, [code || ""])]),
    el("button", { class: "close", type: "button", "aria-label": "Dismiss", onclick: hideError }, ["\u00D7"]),
  );
  box.dataset.code = code || "";
  box.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(hideError, ERROR_SHOW_MS);
}

export function hideError() {
  toast().hidden = true;
}

export function reportError(err) {
  if (err instanceof ServerError) showError(err.code, err.message);
  else showError("client/error", String(err && err.message ? err.message : err));
}
