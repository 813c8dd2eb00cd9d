// Helpers the screens share: the page's elements, JSON from the HTTP API, the game
// catalogue and its words (AI seats, players), the fields the forms share, and the board
// renderers. None of them decides which screen shows (router.js) or holds shared state
// (store.js).

import { reportError } from "./errors.js";
import { ServerError } from "./protocol.js";
import { prefs } from "./storage.js";
import { setGames, store } from "./store.js";

const GAMES_WITH_BOARDS = ["tictactoe", "matches", "othello", "draughts", "chess", "kono", "oware"];

const boards = new Map(); // game -> renderer module, loaded on first use

export const $ = (id) => document.getElementById(id);

/** GET `path` as JSON; an error answer throws a ServerError with the server's code. */
export async function fetchJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    let body = null;
    try {
      body = await response.json();
    } catch {
      // not JSON: the status says enough
    }
    if (body && body.code) throw new ServerError(body.code, body.message);
    throw new ServerError("http/error", `${path} answered ${response.status}`);
  }
  return response.json();
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
  return info.name || "Anonymous";
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
