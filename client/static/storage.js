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
