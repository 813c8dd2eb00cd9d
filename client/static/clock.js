// Clocks: the time controls offered at create, and the players' clocks ticking locally.
//
// The clocks are the server's. Every state carries
//   "clock": {initial_ms, increment_ms | days_per_move, remaining_ms: [a, b],
//             running: seat | null, at: server epoch ms, first_move_by: epoch ms | null}
// and the page counts the running side down from `at`, on the server's time as the
// connection estimates it from pongs (conn.serverNow()), so a skewed local clock does not
// show a wrong time. Each new state re-syncs. A second ticker (onTick) drives the other
// countdowns of the game screen (first move, claims). Words from the catalogue
// (actions.clock.*).

import { has, t } from "./i18n.js";
import { store } from "./store.js";

const TICK_MS = 100;
const LOW_MS = 10_000; // under this a Fischer clock turns red
const LOW_CORRESPONDENCE_MS = 3_600_000;

/** The time control choices of the lobby's select -> the "clock" of create / seek. */
export const TIME_CONTROLS = {
  none: null,
  "1+0": { initial_ms: 60_000, increment_ms: 0 },
  "3+2": { initial_ms: 180_000, increment_ms: 2_000 },
  "10+5": { initial_ms: 600_000, increment_ms: 5_000 },
  "30+20": { initial_ms: 1_800_000, increment_ms: 20_000 },
  d1: { days_per_move: 1 },
  d3: { days_per_move: 3 },
  d7: { days_per_move: 7 },
};

/** "3+2", "1 day per move", "untimed". */
export function timeControlText(clock) {
  if (!clock) return t("actions.clock.untimed");
  if (clock.days_per_move) return t("actions.clock.daysPerMove", { n: clock.days_per_move });
  const initial = clock.initial_ms / 60_000;
  const base = Number.isInteger(initial) ? String(initial) : t("actions.clock.secondsShort", { n: Math.round(clock.initial_ms / 1000) });
  return `${base}+${Math.round((clock.increment_ms || 0) / 1000)}`;
}

/** A remaining time for people: 4:59, 0:09.3 under ten seconds, 1:02:03, 2 d 3 h. */
export function formatClock(ms) {
  const clamped = Math.max(0, ms);
  if (clamped < LOW_MS) return `0:0${(Math.floor(clamped / 100) / 10).toFixed(1)}`;
  const seconds = Math.floor(clamped / 1000);
  const days = Math.floor(seconds / 86400);
  const h = Math.floor(seconds / 3600) % 24;
  const m = Math.floor(seconds / 60) % 60;
  const s = String(seconds % 60).padStart(2, "0");
  if (days) return t("actions.clock.daysHours", { d: days, h });
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)}:${String(m).padStart(2, "0")}:${s}`;
  return `${m}:${s}`;
}

/** Seconds, rounded up, for countdowns in words. */
export function secondsLeft(ms) {
  return Math.max(0, Math.ceil(ms / 1000));
}

/** A countdown in words: "27 s", "12 min", "5 h", "3 days" (rounded up). */
export function durationWords(ms) {
  const s = secondsLeft(ms);
  if (s < 120) return t("actions.clock.seconds", { n: s });
  if (s < 7200) return t("actions.clock.minutes", { n: Math.ceil(s / 60) });
  if (s < 172800) return t("actions.clock.hours", { n: Math.ceil(s / 3600) });
  return t("actions.clock.days", { n: Math.ceil(s / 86400) });
}

/** A seat's remaining time now, on the server's clock. */
export function remainingMs(clock, seat, now = store.conn.serverNow()) {
  const base = clock.remaining_ms[seat];
  if (clock.running !== seat || typeof clock.at !== "number") return base;
  return Math.max(0, base - (now - clock.at));
}

function hasClock(state) {
  return Boolean(state && state.clock && Array.isArray(state.clock.remaining_ms));
}

/** The clock of `seat`, as drawn in its seat box (updated in place by the ticker); with
 *  `testid` null, a copy for the strip above the board on narrow screens. */
export function clockElement(state, seat, testid = `clock-${seat}`) {
  const node = document.createElement("span");
  node.className = "clock";
  node.dataset.seat = String(seat);
  if (testid) node.setAttribute("data-testid", testid);
  node.setAttribute("role", "timer");
  node.setAttribute("aria-live", "off");
  if (!hasClock(state)) {
    node.hidden = true;
    return node;
  }
  paintClock(node, state, seat);
  return node;
}

function paintClock(node, state, seat) {
  const clock = state.clock;
  const ms = remainingMs(clock, seat);
  const running = state.status === "playing" && clock.running === seat;
  const low = ms < (clock.days_per_move ? LOW_CORRESPONDENCE_MS : LOW_MS);
  const text = formatClock(ms);
  if (node.textContent !== text) node.textContent = text;
  node.dataset.running = String(running);
  node.dataset.low = String(low);
  node.dataset.ms = String(Math.round(ms));
  node.classList.toggle("running", running);
  node.classList.toggle("low", low);
  node.classList.toggle("flagged", ms <= 0);
  const side = sideWord(state, seat);
  const vars = { side, time: text };
  let label = t("actions.clock.label", vars);
  if (low && running) label = t("actions.clock.labelLowRunning", vars);
  else if (low) label = t("actions.clock.labelLow", vars);
  else if (running) label = t("actions.clock.labelRunning", vars);
  if (node.getAttribute("aria-label") !== label) node.setAttribute("aria-label", label);
}

/** A seat's side name in the page's language ("White", "Blancs"). */
function sideWord(state, seat) {
  const key = `common.side.${state.game}.${seat}`;
  return has(key) ? t(key) : state.players[seat];
}

const warned = new Set(); // "room:seat" whose low time was announced

/** Narrow screens list the seats below the board: a strip above it repeats the clocks. */
export function renderClockStrip(state, order = [0, 1]) {
  const strip = document.getElementById("clock-strip");
  if (!strip) return;
  strip.hidden = !hasClock(state);
  if (strip.hidden) return;
  strip.replaceChildren(
    ...order.map((seat) => {
      const item = document.createElement("span");
      item.className = "strip-seat";
      item.append(document.createTextNode(`${sideWord(state, seat)} `), clockElement(state, seat, null));
      return item;
    }),
  );
}

/** Say once, to screen readers too, that the viewer's own time is running low. */
function warnLowTime(state, seat) {
  const key = `${state.room}:${seat}`;
  if (warned.has(key)) return;
  warned.add(key);
  const alert = document.getElementById("clock-alert");
  if (alert) alert.textContent = t("actions.clock.lowAlert", { n: Math.ceil(remainingMs(state.clock, seat) / 1000) });
}

const tickers = new Set();

/** Call `fn()` on every tick while a game is on screen. */
export function onTick(fn) {
  tickers.add(fn);
}

function tick() {
  const state = store.state;
  if (!state || document.getElementById("game").hidden) return;
  if (hasClock(state) && state.status === "playing") {
    for (const seat of [0, 1]) {
      const node = document.querySelector(`#game [data-testid=clock-${seat}]`);
      if (node) paintClock(node, state, seat);
      const copy = document.querySelector(`#clock-strip .clock[data-seat="${seat}"]`);
      if (copy) paintClock(copy, state, seat);
      const mine = seat === store.you && Boolean(store.token);
      if (mine && state.clock.running === seat && node && node.dataset.low === "true") warnLowTime(state, seat);
    }
  }
  for (const fn of tickers) fn(state);
}

setInterval(tick, TICK_MS);
