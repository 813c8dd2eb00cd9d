// The error toast: a plain-words title, the server's message and, as a small detail, the
// stable code (people read the sentence; the code is for reporting a problem).

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
  // accounts, ratings and civil play (docs/accounts.md)
  "auth/required": "You need to be logged in for that",
  "auth/failed": "Wrong username or password",
  "auth/throttled": "Too many attempts: wait a little, then try again",
  "auth/csrf": "The server refused a request that did not come from its own page",
  "auth/forbidden": "Your account is not allowed to do that",
  "auth/scope": "That token is not allowed to do that",
  "auth/banned": "This account or address is banned from the server",
  "auth/taken": "That username is taken",
  "auth/username": "That username cannot be used",
  "auth/password": "That password cannot be used",
  "auth/claimed": "Those games already belong to an account",
  "auth/claims": "This account cannot take more browsers' games",
  "auth/player_key": "This browser's player key is not valid",
  "auth/token": "This browser holds no seat in that game",
  "token/limit": "You have as many tokens as an account may have: revoke one first",
  "rate/ai_games": "You have too many unfinished games against the computer",
  "mod/invalid": "Some of what you typed is not valid",
  "mod/not_found": "No such player",
  "mod/too_many": "You have blocked as many players as you can",
  "mod/throttled": "You have sent many reports recently; wait a little",
  "mod/closed": "That is closed already",
  "request/invalid": "Some of what you typed is not valid",
  "room/rated": "A rated game needs two different logged-in players",
  "seek/out_of_range": "Your rating is outside the range that challenge asks for",
  "seek/penalty": "You left rated games recently, so you must wait before looking for a new one",
  "seek/blocked": "You cannot play that player",
  "chat/muted": "A moderator has muted your chat for now",
  "chat/banned": "This account or address is banned from the server",
  "pool/invalid": "Quick pairing is not possible with those settings",
  "ai/limit": "You have too many unfinished games against the computer",
  "room/ai_limit": "You have too many unfinished games against the computer",
  "mod/self": "You cannot do that to yourself",
  "player/unknown": "No such player",
  "rating/unknown": "No ratings for that game and speed",
  "report/invalid": "That report cannot be sent",
  "report/rate": "You have sent many reports recently; wait a little",
};

/** The words for an error in forms and notices: the plain sentence, then the server's
 *  own words when they add something (a username rule, a wait). */
export function errorSentence(err) {
  const code = err && err.code ? err.code : "client/error";
  const head = FRIENDLY_ERRORS[code] || (err && err.message) || "Something went wrong";
  const details = (err && err.details) || {};
  const parts = [`${head}.`];
  if (code === "auth/throttled" && details.retry_after_s) {
    parts.push(`Try again in ${Math.ceil(details.retry_after_s)} seconds.`);
  } else if (FRIENDLY_ERRORS[code] && code !== "auth/failed" && err.message && err.message !== code) {
    const words = String(err.message).trim();
    if (words.toLowerCase() !== head.toLowerCase()) parts.push(`${words.charAt(0).toUpperCase()}${words.slice(1)}${/[.!?]$/.test(words) ? "" : "."}`);
  }
  return parts.join(" ");
}

/** The plain-words title of an error code (codes are shown only as detail). */
export function friendlyError(code) {
  return FRIENDLY_ERRORS[code] || "Something went wrong";
}

let errorTimer = null;

/** Links to the rooms an error names ("rooms": the games that count toward a limit). */
function roomLinks(rooms) {
  if (!Array.isArray(rooms) || !rooms.length) return null;
  return el("span", { class: "detail room-links", testid: "error-rooms" }, [
    "The games that count: ",
    ...rooms.slice(0, 20).flatMap((room, i) => [
      i ? ", " : "",
      el("a", { href: `?room=${encodeURIComponent(String(room))}`, testid: `error-room-${room}` }, [String(room)]),
    ]),
    ". Finish or resign one to start another.",
  ]);
}

export function showError(code, message, details = null) {
  const box = toast();
  box.classList.remove("notice");
  const parts = [
    el("strong", {}, [friendlyError(code)]),
    el("span", { class: "detail" }, [message || ""]),
    roomLinks(details && details.rooms),
    el("small", { class: "code-detail muted" }, ["code ", el("code", { class: "code", testid: "error-code" }, [code || ""])]),
    el("button", { class: "close", type: "button", "aria-label": "Dismiss", onclick: hideError }, ["\u00D7"]),
  ];
  box.replaceChildren(...parts.filter(Boolean));
  box.dataset.code = code || "";
  box.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(hideError, ERROR_SHOW_MS);
}

export function hideError() {
  toast().hidden = true;
}

/** A short good-news line in the same place as the errors ("Blocked ann."). */
export function showNotice(text) {
  const box = toast();
  box.replaceChildren(
    el("strong", { testid: "notice" }, [text]),
    el("button", { class: "close", type: "button", "aria-label": "Dismiss", onclick: hideError }, ["\u00D7"]),
  );
  box.classList.add("notice");
  box.dataset.code = "";
  box.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(hideError, ERROR_SHOW_MS);
}

export function reportError(err) {
  if (err instanceof ServerError) showError(err.code, err.message, err.details);
  else showError("client/error", String(err && err.message ? err.message : err));
}
