// The state the screens share, in one place: the connection, the game catalogue, the game
// chosen in the lobby and the room on screen (its id, mode, seat, last snapshot).
//
// Every module reads it through `store` (read-only: `store.room`, `store.state`, ...) and
// changes it only through the named functions below, so a search for a function's name
// finds every place that changes a field. State that only one module needs stays in that
// module (the chat lines in chat.js, the seeks in seeks.js, the game page in gamepage.js).

import { Connection } from "./protocol.js";
import { RoomSync } from "./sync.js";

const conn = new Connection();

const fields = {
  conn,
  sync: new RoomSync(conn), // resumes the followed rooms after reconnections
  games: [], // the catalogue of GET /api/games
  gamesByName: new Map(),
  selectedGame: null, // the game chosen in the lobby
  room: null, // id of the room on screen
  mode: null, // "play" (seated or resuming), "invite" (may join), "watch"
  token: null,
  you: null, // this browser's seat in the room, or null
  state: null, // last snapshot of the room
  prevView: null, // the board before the last move, or null
  ui: {}, // the board renderer's selection, replaced at every new version
  pending: false, // a move is on its way
  flip: false, // the spectator turned the board round
  account: undefined, // the signed-in account (GET /api/auth/me), null for a guest, undefined until known
  notice: null, // the version whose decline notice was shown
  noticeText: null, // the decline notice on screen, or null
};

/** Read-only view of the shared state: `store.room = x` throws (modules are strict). */
export const store = Object.freeze(
  Object.defineProperties(
    {},
    Object.fromEntries(Object.keys(fields).map((name) => [name, { get: () => fields[name], enumerable: true }])),
  ),
);

// -- the catalogue and the lobby --------------------------------------------------------------

/** The catalogue of games, as GET /api/games lists them. */
export function setGames(games) {
  fields.games = games;
  fields.gamesByName = new Map(games.map((g) => [g.name, g]));
}

export function selectGame(name) {
  fields.selectedGame = name;
}

/** Who this browser is signed in as: an ACCOUNT object, or null for a guest. */
export function setAccount(account) {
  fields.account = account;
}

// -- the room on screen -----------------------------------------------------------------------

/** A room comes on screen: nothing known of it yet but the seat stored for it, if any. */
export function showRoom(room, mode, stored) {
  Object.assign(fields, {
    room,
    mode,
    state: null,
    ui: {},
    token: stored ? stored.token : null,
    you: stored ? stored.seat : null,
    prevView: null,
    flip: false,
    noticeText: null,
  });
}

/** No room is on screen (the lobby): messages about the last one are ignored. */
export function clearRoomId() {
  fields.room = null;
}

/** The room was left: its id, snapshot and seat are forgotten. */
export function leaveRoomState() {
  Object.assign(fields, { room: null, state: null, token: null, you: null });
}

/** This browser holds `seat` in the room on screen with `token`. */
export function takeSeat(token, seat) {
  Object.assign(fields, { token, you: seat, mode: "play" });
}

/** The stored seat is gone (an expired token): the room is followed as a spectator who may join. */
export function loseSeat() {
  Object.assign(fields, { token: null, you: null, mode: "invite" });
}

export function setMode(mode) {
  fields.mode = mode;
}

export function setYou(seat) {
  fields.you = seat;
}

/** The newest snapshot of the room, with the board before its last move (or null). */
export function setSnapshot(state, prevView) {
  fields.state = state;
  fields.prevView = prevView;
}

/** A new version: the board renderer's selection starts again. */
export function resetUi() {
  fields.ui = {};
}

export function setPending(pending) {
  fields.pending = pending;
}

export function toggleFlip() {
  fields.flip = !fields.flip;
}

/** The decline notice shown for `version`. */
export function setNotice(version, text) {
  fields.notice = version;
  fields.noticeText = text;
}

/** The decline notice goes (its version is kept, so it is not said again). */
export function clearNotice() {
  fields.noticeText = null;
}
