// Keeps the rooms this page follows in step with the server.
//
// The connection heals the socket; this heals what the app sees through it. After every
// reconnection it resumes each followed room with its seat token and the last version
// seen ("since"), so the server replays what was missed. It also asks again when a room
// has been quiet for a while or the tab is shown again: an update lost on the server's
// side (a Redis restart) is repaired by the next full state.

import { TRANSIENT_ERRORS } from "./protocol.js";

const QUIET_RESYNC_MS = 30000; // a followed room with no state for this long is asked again
const CHECK_EVERY_MS = 5000;

export class RoomSync extends EventTarget {
  constructor(conn) {
    super();
    this.conn = conn;
    this.rooms = new Map(); // room -> {token, version, heard}
    conn.addEventListener("open", (event) => {
      if (event.detail.reconnected) this.resyncAll();
    });
    conn.addEventListener("message", (event) => {
      if (event.detail.type === "state") this._heard(event.detail);
    });
    setInterval(() => this._resyncQuiet(), CHECK_EVERY_MS);
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) return;
      conn.checkNow(); // a tab that slept may hold a dead socket
      this.resyncAll();
    });
    window.addEventListener("online", () => conn.checkNow());
  }

  /** Follow `room` from now on, as its player when `token` is given. */
  follow(room, token = null) {
    const known = this.rooms.get(room);
    this.rooms.set(room, { token, version: known ? known.version : null, heard: Date.now() });
  }

  forget(room) {
    this.rooms.delete(room);
  }

  resyncAll() {
    for (const room of this.rooms.keys()) this.resync(room);
  }

  /** Ask for the room's state again from the last version seen; the reply, a "resync"
   *  state, arrives like any other state. Errors that will not heal are dispatched. */
  async resync(room) {
    const entry = this.rooms.get(room);
    if (!entry) return;
    entry.heard = Date.now(); // do not ask twice while the answer is on its way
    const message = { type: "resume", room };
    if (entry.token) message.token = entry.token;
    if (entry.version !== null) message.since = entry.version;
    try {
      await this.conn.request(message);
    } catch (err) {
      // Transient errors and lost connections: the next resync tries again.
      if (TRANSIENT_ERRORS.has(err.code) || String(err.code).startsWith("client/")) return;
      if (this.rooms.has(room)) this.dispatchEvent(new CustomEvent("error", { detail: { room, error: err } }));
    }
  }

  _heard(state) {
    const entry = this.rooms.get(state.room);
    if (!entry) return;
    entry.heard = Date.now();
    if (entry.version === null || state.version > entry.version) entry.version = state.version;
  }

  _resyncQuiet() {
    if (document.hidden || this.conn.status !== "open") return;
    const now = Date.now();
    for (const [room, entry] of this.rooms) {
      if (now - entry.heard > QUIET_RESYNC_MS) this.resync(room);
    }
  }
}
