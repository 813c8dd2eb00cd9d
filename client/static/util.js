// Helpers the screens share: the page's elements, JSON from the HTTP API, the game
// catalogue and its words (AI seats, players), the fields the forms share, and the board
// renderers. None of them decides which screen shows (router.js) or holds shared state
// (store.js).

import { reportError } from "./errors.js";
import { ServerError } from "./protocol.js";
import { prefs } from "./storage.js";
import { setGames, store } from "./store.js";
import { el } from "./boards/common.js";

const GAMES_WITH_BOARDS = ["tictactoe", "matches", "othello", "draughts", "chess", "kono", "oware"];

const boards = new Map(); // game -> renderer module, loaded on first use

export const $ = (id) => document.getElementById(id);

/** The ServerError of an error answer: the server's code and words, else the status. */
async function answerError(response, path) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says enough
  }
  if (body && body.code) {
    const retry = Number(response.headers.get("Retry-After"));
    return new ServerError(body.code, body.message, { ...body, ...(retry > 0 ? { retry_after_s: retry } : {}) });
  }
  return new ServerError("http/error", `${path} answered ${response.status}`, { status: response.status });
}

/** GET `path` as JSON; an error answer throws a ServerError with the server's code. */
export async function fetchJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (!response.ok) throw await answerError(response, path);
  return response.json();
}

/**
 * `method` ("POST", "DELETE") `path` with `body` as JSON, from this page (the browser sends
 * our Origin, which the server's cross-site check asks for); the answer's JSON, or a
 * ServerError with the server's code.
 */
export async function sendJson(method, path, body = undefined) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await answerError(response, path);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

/** The catalogue of games (GET /api/games) into the store, once; a failure is reported. */
export async function loadGames() {
  if (store.games.length) return;
  try {
    setGames(await fetchJson("/api/games"));
  } catch (err) {
    reportError(err);
  }
}

/**
 * "about 1400" for a level whose strength was measured on an absolute scale (chess: the
 * catalogue's `levels`, from `kibitz calibrate`), else "". Ratings are rounded to 50.
 */
export function levelStrengthText(gameName, level) {
  const game = store.gamesByName.get(gameName);
  const entry = game && Array.isArray(game.levels) ? game.levels.find((l) => l.level === level) : null;
  if (!entry || entry.scale !== "absolute" || typeof entry.elo !== "number") return "";
  return `about ${Math.round(entry.elo / 50) * 50}`;
}

/** An AI seat's label: its name from the server, with the level's measured strength. */
export function aiSeatText(gameName, seat) {
  const name = seat.name || `AI level ${seat.level}`;
  const strength = levelStrengthText(gameName, seat.level);
  return strength ? `${name}, ${strength}` : name;
}

/** A player of a game record: its name, the AI's name or level, or "Anonymous". */
export function playerLabel(info) {
  if (!info) return "?";
  if (info.kind === "ai") return info.name || `AI level ${info.level}`;
  return info.account || info.name || "Anonymous";
}

// -- ratings and accounts ---------------------------------------------------------------------

/** "1500" or, while the rating is provisional, "1500?"; "" when there is none. */
export function ratingText(rating, provisional = false) {
  if (typeof rating !== "number") return "";
  return `${Math.round(rating)}${provisional ? "?" : ""}`;
}

/** "+12", "-8", "±0" for a rating change. */
export function changeText(change) {
  const value = Math.round(change);
  if (value > 0) return `+${value}`;
  if (value < 0) return `\u2212${-value}`;
  return "\u00B10";
}

/** The address of `username`'s profile page. */
export function profileHref(username) {
  return `?player=${encodeURIComponent(username)}`;
}

/** The "BOT" badge of a bot account, or null. */
export function botBadge(isBot) {
  return isBot ? el("span", { class: "tag bot", title: "a bot account: a program plays it" }, ["BOT"]) : null;
}

/**
 * A seat's or a seek's player as shown in lists: the account name linked to its profile (or
 * the display name), the BOT badge and the rating ("Ann 1512", "Bob 1500?").
 */
export function playerWithRating(info, fallback = "Anonymous") {
  const name = info.account
    ? el("a", { href: profileHref(info.account), class: "player-link" }, [info.account])
    : info.name || fallback;
  const rating = ratingText(info.rating, info.provisional);
  return el("span", { class: "player-with-rating" }, [
    name,
    botBadge(info.bot),
    rating ? el("span", { class: "rating muted", title: info.provisional ? "provisional rating" : "rating" }, [` ${rating}`]) : null,
  ]);
}

// -- the fields the forms share ---------------------------------------------------------------

/** The name typed in the lobby's form or the join banner, else the one kept; at most 40 characters. */
export function playerName() {
  const typed = $("game").hidden ? $("name").value : $("join-name").value;
  const name = typed.trim() || prefs.get("name", "");
  return name ? name.slice(0, 40) : undefined;
}

/** The options of the game chosen in the lobby's create form, as the server takes them. */
export function readOptions() {
  const game = store.gamesByName.get(store.selectedGame);
  const options = {};
  for (const input of $("options").querySelectorAll("[data-option]")) {
    const name = input.dataset.option;
    const spec = game.options[name];
    if (input.type === "checkbox") options[name] = input.checked;
    else if (typeof spec.default === "number") options[name] = Number(input.value);
    else options[name] = input.value;
  }
  return options;
}

// -- boards -----------------------------------------------------------------------------------

/** The board renderer of `game` (a module from boards/), or null for a game without one. */
export async function boardFor(game) {
  if (!GAMES_WITH_BOARDS.includes(game)) return null;
  if (!boards.has(game)) boards.set(game, await import(`./boards/${game}.js`));
  return boards.get(game);
}
