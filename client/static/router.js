// Which screen is on show, and the one way to go from one screen to another.
//
// The page holds five screens, each a <section>: the lobby (#lobby, lobby.js), the game
// screen (#game, game.js), the game page (#replay, gamepage.js), the leaderboards and
// profiles (#players, players.js) and the account page (#account-page, accountpage.js).
// Each screen module registers itself here with registerScreen(); a screen that leads to another calls a named
// function of this module (showLobby, openRoom, joinRoom, leaveRoom, showGamePage) and
// never imports it, so the screens import this module and not each other. route() shows
// the screen the address asks for: ?game=ID, ?room=ID, ?watch=ID, ?leaderboard=GAME&speed=S,
// ?player=NAME, ?account=, or nothing (the lobby).

import { seatStore } from "./storage.js";

// screen -> <section> id
const SECTIONS = { lobby: "lobby", game: "game", gamepage: "replay", players: "players", account: "account-page" };

const screens = new Map(); // name -> its handlers

/**
 * Register screen `name` ("lobby", "game", "gamepage"). `handlers.show(...args)` draws it;
 * `handlers.hide()`, if any, runs whenever another screen is shown. The game screen also
 * gives `join(room, seat)` (take a seat) and `leave()` (leave the room on screen).
 */
export function registerScreen(name, handlers) {
  if (!(name in SECTIONS)) throw new Error(`no screen "${name}"`);
  screens.set(name, handlers);
}

function screen(name) {
  const handlers = screens.get(name);
  if (!handlers) throw new Error(`the screen "${name}" is not registered`);
  return handlers;
}

/** Show screen `name` alone: the others are hidden and told so, then it draws itself. */
function show(name, ...args) {
  for (const [other, handlers] of screens) {
    if (other !== name && handlers.hide) handlers.hide();
  }
  for (const [other, id] of Object.entries(SECTIONS)) document.getElementById(id).hidden = other !== name;
  // A screen opens at its top (on a phone the lobby may have been scrolled down to "Create").
  window.scrollTo(0, 0);
  return screen(name).show(...args);
}

/** Show `search` ("?room=ID", "" for the lobby) in the address bar, as a history entry. */
export function navigate(search) {
  const url = `${window.location.pathname}${search}`;
  if (`${window.location.pathname}${window.location.search}` !== url) {
    window.history.pushState(null, "", url);
  }
}

export function showLobby() {
  return show("lobby");
}

/** Show room `room` on the game screen in `mode` ("play", "invite", "watch"), address unchanged. */
export function enterRoom(room, mode) {
  return show("game", room, mode);
}

/** Go to room `room`: "?watch=ID" in the address bar for `mode` "watch", else "?room=ID". */
export function openRoom(room, mode) {
  navigate(`?${mode === "watch" ? "watch" : "room"}=${encodeURIComponent(room)}`);
  enterRoom(room, mode);
}

/** Take a seat in `room` (the first free one, or `seat`) and play there. */
export function joinRoom(room, seat = undefined) {
  return screen("game").join(room, seat);
}

/** Leave the room on screen; with `toLobby`, go back to the lobby. */
export function leaveRoom(toLobby = true) {
  screen("game").leave();
  if (toLobby) {
    navigate("");
    showLobby();
  }
}

/** The game page of game `id` (?game=ID). */
export function showGamePage(id) {
  return show("gamepage", id);
}

/**
 * The leaderboard of `game` and `speed` (either may be "": the first one), of people or, with
 * `bots`, of bot accounts (ranked apart): ?leaderboard=GAME&speed=S[&bots=1].
 */
export function showLeaderboard(game = "", speed = "", bots = false) {
  return show("players", { leaderboard: game, speed, bots });
}

/** The profile of `username` (?player=NAME). */
export function showProfile(username) {
  return show("players", { player: username });
}

/** The account page (?account=): password, sessions, API tokens. */
export function showAccountPage() {
  return show("account");
}

/** Show the screen the address bar names. */
export function route() {
  const params = new URLSearchParams(window.location.search);
  const room = params.get("room");
  const watch = params.get("watch");
  const game = params.get("game");
  if (params.has("player") && params.get("player")) showProfile(params.get("player"));
  else if (params.has("leaderboard")) showLeaderboard(params.get("leaderboard") || "", params.get("speed") || "", params.get("bots") === "1");
  else if (params.has("account")) showAccountPage();
  else if (game) showGamePage(game);
  else if (room) enterRoom(room, seatStore.get(room) ? "play" : "invite");
  else if (watch) enterRoom(watch, "watch");
  else showLobby();
}
