// What the browser keeps across reloads in localStorage: seat tokens and preferences.

const SEATS_KEY = "kibitz:seats";
const PREFS_KEY = "kibitz:prefs";
const KEEP_SEATS = 30;

function readJson(key, fallback) {
  try {
    const value = JSON.parse(localStorage.getItem(key));
    return value && typeof value === "object" ? value : fallback;
  } catch {
    return fallback;
  }
}

function writeJson(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Private mode or a full quota: the game still works, only reloads forget the seat.
  }
}

/** Seats taken from this browser: room id -> {token, seat, game, saved}; the newest kept. */
export const seatStore = {
  all() {
    return readJson(SEATS_KEY, {});
  },
  get(room) {
    return this.all()[room] || null;
  },
  put(room, entry) {
    const seats = this.all();
    seats[room] = { ...seats[room], ...entry, saved: Date.now() };
    const newest = Object.entries(seats)
      .sort((a, b) => b[1].saved - a[1].saved)
      .slice(0, KEEP_SEATS);
    writeJson(SEATS_KEY, Object.fromEntries(newest));
  },
  drop(room) {
    const seats = this.all();
    delete seats[room];
    writeJson(SEATS_KEY, seats);
  },
};

/** The last game, opponent and name chosen in the lobby. */
export const prefs = {
  get(name, fallback) {
    const value = readJson(PREFS_KEY, {})[name];
    return value === undefined ? fallback : value;
  },
  set(name, value) {
    writeJson(PREFS_KEY, { ...readJson(PREFS_KEY, {}), [name]: value });
  },
};

// -- the player without an account ------------------------------------------------------------

const PLAYER_KEY = "kibitz:player";

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * This browser's player: a random secret key, made once and kept in localStorage, sent
 * with "create" and "join" so the server files every game under one public player id.
 * The id (32 hex digits) is sha256("kibitz-player:" + key), cut to 16 bytes; it is worked
 * out here when the page may use WebCrypto, else remembered from a seat the server showed.
 */
export const player = {
  key() {
    const stored = readJson(PLAYER_KEY, {});
    if (typeof stored.key === "string" && /^[A-Za-z0-9_-]{16,128}$/.test(stored.key)) return stored.key;
    const key = base64url(crypto.getRandomValues(new Uint8Array(32)));
    writeJson(PLAYER_KEY, { key });
    return key;
  },
  async id() {
    const stored = readJson(PLAYER_KEY, {});
    if (stored.id) return stored.id;
    if (!(window.crypto && crypto.subtle)) return null; // plain HTTP off loopback: no WebCrypto
    const data = new TextEncoder().encode(`kibitz-player:${this.key()}`);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", data));
    const id = [...digest.slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
    this.remember(id);
    return id;
  },
  /** The id the server showed on our seat (for pages without WebCrypto). */
  remember(id) {
    const stored = readJson(PLAYER_KEY, {});
    if (id && stored.key && stored.id !== id) writeJson(PLAYER_KEY, { ...stored, id });
  },
};
