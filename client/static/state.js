// The state the screens share: one healing connection, the room on screen, the games.

import { Connection } from "./protocol.js";
import { RoomSync } from "./sync.js";

export const $ = (id) => document.getElementById(id);

const conn = new Connection();

export const app = {
  conn,
  sync: new RoomSync(conn), // resumes the followed rooms after reconnections
  games: [],
  gamesByName: new Map(),
  selectedGame: null,
  room: null, // id of the room on screen
  mode: null, // "play" (seated or resuming), "invite" (may join), "watch"
  token: null,
  you: null,
  state: null, // last snapshot of the room
  ui: {}, // board selection, reset at every new version
  pending: false, // a move is on its way
  pendingTimer: null,
  boards: new Map(), // game -> renderer module
  roomsTimer: null,
};

/** Show `search` ("?room=ID", "" for the lobby) in the address bar, as a history entry. */
export function navigate(search) {
  const url = `${window.location.pathname}${search}`;
  if (`${window.location.pathname}${window.location.search}` !== url) {
    window.history.pushState(null, "", url);
  }
}
