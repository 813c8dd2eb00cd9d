// Helpers the screens share: the page's elements, JSON from the HTTP API, the game
// catalogue and its words in the page's language (game names, sides, AI seats and their
// levels' ratings, players: common.json), the fields the forms share, and the board
// renderers. None of them decides which screen shows (router.js) or holds shared state
// (store.js).

import { reportError } from "./errors.js";
import { formatNumber, has, t } from "./i18n.js";
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

// -- the catalogue's words ----------------------------------------------------------------------

/** A game's name in the page's language ("Chess", "Échecs"); the server's name for an unknown game. */
export function gameTitle(name) {
  const key = `common.game.${name}`;
  if (has(key)) return t(key);
  const game = store.gamesByName.get(name);
  return game ? game.title : String(name || t("common.game.unknown"));
}

/** The name of seat `seat` (0, 1) of a game in the page's language ("White", "Sud"). */
export function sideName(gameName, seat) {
  const key = `common.side.${gameName}.${seat}`;
  if (has(key)) return t(key);
  const game = store.gamesByName.get(gameName);
  return game && game.players[seat] !== undefined ? game.players[seat] : t("common.seat", { n: Number(seat) + 1 });
}

/**
 * The rating of an AI level (the catalogue's `rating`: its fixed rating in rated play, on
 * the scale the rules panel explains; `elo` where a server has no `rating`), rounded to 10,
 * or null when the catalogue has none.
 */
export function levelRating(gameName, level) {
  const game = store.gamesByName.get(gameName);
  const entry = game && Array.isArray(game.levels) ? game.levels.find((l) => l.level === level) : null;
  if (!entry) return null;
  const rating = typeof entry.rating === "number" ? entry.rating : entry.elo;
  return typeof rating === "number" ? Math.round(rating / 10) * 10 : null;
}

/** "about 1300" for a level with a rating, else "". */
export function levelStrengthText(gameName, level) {
  const rating = levelRating(gameName, level);
  return rating === null ? "" : t("common.ai.about", { rating: formatNumber(rating, { useGrouping: false }) });
}

/** "Computer, level 5, about 1300" (or "Computer, level 5" without a rating). */
export function levelText(gameName, level) {
  const rating = levelRating(gameName, level);
  return rating === null
    ? t("common.ai.level", { level })
    : t("common.ai.levelRated", { level, rating: formatNumber(rating, { useGrouping: false }) });
}

/** An AI seat's label: "Computer, level 5, about 1300", from the catalogue (not the server's name). */
export function aiSeatText(gameName, seat) {
  return levelText(gameName, seat.level);
}

/** A player of a game record: its name, the computer's level, or "Anonymous". */
export function playerLabel(info, gameName = undefined) {
  if (!info) return "?";
  if (info.kind === "ai") return gameName ? levelText(gameName, info.level) : t("common.ai.level", { level: info.level });
  return info.account || info.name || t("common.anonymous");
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

/**
 * The "BOT" badge of a bot account, or null: an image to assistive technology, named in
 * words ("bot account"), with the longer explanation as its tooltip.
 */
export function botBadge(isBot) {
  if (!isBot) return null;
  return el("span", { class: "tag bot", role: "img", "aria-label": t("common.bot.label"), title: t("common.bot.title"), testid: "bot-badge" }, [
    t("common.bot"),
  ]);
}

// -- speeds (server/domain/speeds.py) ---------------------------------------------------------

/** The games rated at the chess sites' speeds; the others are "timed" or "correspondence". */
const CLOCKED_GAMES = new Set(["chess", "draughts"]);
const CLOCKED_SPEEDS = ["bullet", "blitz", "rapid", "classical", "correspondence"];
const OTHER_SPEEDS = ["timed", "correspondence"];
/** (speed, the estimated game duration in seconds it is under), fastest first. */
const SPEED_LIMITS_S = [["bullet", 180], ["blitz", 480], ["rapid", 1500]];
const ESTIMATED_MOVES = 40;

/** The speeds `gameName` is rated in, fastest first (the catalogue's, when it lists them). */
export function speedsOf(gameName) {
  const game = store.gamesByName.get(gameName);
  if (game && Array.isArray(game.speeds) && game.speeds.length) return game.speeds;
  return CLOCKED_GAMES.has(gameName) ? CLOCKED_SPEEDS : OTHER_SPEEDS;
}

/**
 * The speed a game of `gameName` with `clock` (null: untimed, {initial_ms, increment_ms} or
 * {days_per_move}) is rated at, as the server decides it: correspondence without a Fischer
 * clock; else from the estimated duration initial + 40 x increment.
 */
export function speedOf(gameName, clock) {
  if (!clock || clock.days_per_move) return "correspondence";
  if (!speedsOf(gameName).includes("bullet")) return "timed";
  const duration = (clock.initial_ms + ESTIMATED_MOVES * (clock.increment_ms || 0)) / 1000;
  const found = SPEED_LIMITS_S.find(([, limit]) => duration < limit);
  return found ? found[0] : "classical";
}

/**
 * A seat's or a seek's player as shown in lists: the account name linked to its profile (or
 * the display name), the BOT badge and the rating ("Ann 1512", "Bob 1500?").
 */
export function playerWithRating(info, fallback = t("common.anonymous")) {
  const name = info.account
    ? el("a", { href: profileHref(info.account), class: "player-link" }, [info.account])
    : info.name || fallback;
  const rating = ratingText(info.rating, info.provisional);
  return el("span", { class: "player-with-rating" }, [
    name,
    botBadge(info.bot),
    rating ? el("span", { class: "rating muted", title: info.provisional ? t("common.rating.provisional") : t("common.rating") }, [` ${rating}`]) : null,
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
