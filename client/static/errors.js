// The error toast: the catalogue's words for the error's code (errors.<code> in
// locales/<lang>/errors.json) and, only where they help, the server's own words. The code
// itself is never shown as text: it is the toast's data-code and title (for tests and for
// reporting a problem).

import { ServerError } from "./protocol.js";
import { el } from "./boards/common.js";
import { has, t } from "./i18n.js";

const toast = () => document.getElementById("error");

const ERROR_SHOW_MS = 9000;

// Codes whose server message says something the catalogue's words cannot (which option,
// which rule of a username): the toast and forms add it after the catalogue's sentence.
const DETAIL_CODES = new Set([
  "options/invalid", "position/invalid", "clock/invalid", "request/invalid", "mod/invalid",
  "query/invalid", "message/invalid", "auth/username", "auth/password", "chat/invalid",
  "report/invalid", "pool/invalid", "export/format",
]);

/** The catalogue's words for `code`, or null when it has none. */
function catalogueWords(code) {
  const key = `errors.${code}`;
  return code && has(key) ? t(key) : null;
}

/** "Words." with a capital and a full stop. */
function sentence(words) {
  const text = String(words).trim();
  if (!text) return "";
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}${/[.!?…]$/.test(text) ? "" : "."}`;
}

/** The server's own words for an error, when they add something to the catalogue's, else "". */
function serverDetail(code, head, message) {
  if (!message || message === code || !catalogueWords(code) || !DETAIL_CODES.has(code)) return "";
  const words = String(message).trim();
  return words.toLowerCase() === head.toLowerCase() ? "" : sentence(words);
}

/** The words for an error in forms and notices: the catalogue's sentence, then the server's
 *  own words where they add something (a username rule, a wait). */
export function errorSentence(err) {
  const code = err && err.code ? err.code : "client/error";
  const message = err && err.message ? String(err.message) : "";
  const head = catalogueWords(code) || message || t("errors.fallback");
  const details = (err && err.details) || {};
  const parts = [sentence(head)];
  if (code === "auth/throttled" && details.retry_after_s) {
    const n = Math.ceil(details.retry_after_s);
    parts.push(t("errors.retryIn", { n }));
  } else {
    const detail = serverDetail(code, head, message);
    if (detail) parts.push(detail);
  }
  return parts.join(" ");
}

/** The catalogue's title of an error code (the code itself is never shown as text). */
export function friendlyError(code) {
  return catalogueWords(code) || t("errors.fallback");
}

let errorTimer = null;

/** Links to the rooms an error names ("rooms": the games that count toward a limit). */
function roomLinks(rooms) {
  if (!Array.isArray(rooms) || !rooms.length) return null;
  return el("span", { class: "detail room-links", testid: "error-rooms" }, [
    `${t("errors.roomsLead")} `,
    ...rooms.slice(0, 20).flatMap((room, i) => [
      i ? ", " : "",
      el("a", { href: `?room=${encodeURIComponent(String(room))}`, testid: `error-room-${room}` }, [String(room)]),
    ]),
    `. ${t("errors.roomsTail")}`,
  ]);
}

/** Show the toast for an error `code` with the server's `message` (and its `details`). */
export function showError(code, message, details = null) {
  const box = toast();
  box.classList.remove("notice");
  const head = catalogueWords(code) || (message ? String(message) : t("errors.fallback"));
  const detail = serverDetail(code, head, message);
  const parts = [
    el("strong", {}, [head]),
    detail ? el("span", { class: "detail" }, [detail]) : null,
    roomLinks(details && details.rooms),
    el("button", { class: "close", type: "button", "aria-label": t("common.dismiss"), onclick: hideError }, ["\u00D7"]),
  ];
  box.replaceChildren(...parts.filter(Boolean));
  box.dataset.code = code || "";
  box.title = code ? t("errors.codeTitle", { code }) : "";
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
    el("button", { class: "close", type: "button", "aria-label": t("common.dismiss"), onclick: hideError }, ["\u00D7"]),
  );
  box.classList.add("notice");
  box.dataset.code = "";
  box.title = "";
  box.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(hideError, ERROR_SHOW_MS);
}

export function reportError(err) {
  if (err instanceof ServerError) showError(err.code, err.message, err.details);
  else showError("client/error", String(err && err.message ? err.message : err));
}
