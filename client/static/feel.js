// The feel of a game site, a panel of the game screen (game.js): a move that arrives alone
// is animated on the board (boards/common.js), each new snapshot plays its sound
// (sounds.js: move, capture, check, game end, an offer; low time once from the clock's
// tick), a premove may be picked while the opponent is to move in chess and draughts
// (premove.js) and is sent the moment the turn comes, and a move may wait for Confirm
// (prefs "confirmMove": in correspondence games by default). The preferences come from the
// settings dialog (settings.js). Words from the catalogue (feel.*).
//
// The game screen wires it once and calls it at fixed points; it lends it its redraws,
// its move sender and its turn rule (wireFeel), and this module never imports game.js:
//   wireFeel({redraw, redrawBoard, send, isMyTurn})  once: the Confirm bar, the mute switch, keys
//   feelOnState(previous, state, fresh)  each snapshot: animation, sound, the premove sent
//   resetFeel()                          entering a room: no premove, nothing to confirm
//   holdForConfirm(state, move)          a picked move: true when it now waits for Confirm
//   forgetConfirmation()                 a move is sent: nothing waits any more
//   renderFeel(state)                    each redraw: the Confirm bar, #premove, the mute switch
//   feelBeforeBoard(state, root, myTurn) before the board is drawn: what it offers, the old drawing
//   feelAfterBoard(root, state, before)  after: the marked squares, the animation
//   keepPremove(move)                    the board's play() while the opponent is to move

import { animateChange, captureBoard, el } from "./boards/common.js";
import { onTick, remainingMs } from "./clock.js";
import { t } from "./i18n.js";
import { PREMOVE_GAMES, matchPremove, moveSquares, pseudoMoves } from "./premove.js";
import { playSound, setSoundOn, soundOn } from "./sounds.js";
import { prefs } from "./storage.js";
import { resetUi, store } from "./store.js";
import { $ } from "./util.js";

const LOW_TIME_MS = 10_000; // your clock under this: the low-time sound, once
const NOTICE_MS = 4000; // how long "premove dropped" shows
let premove = null; // {room, move}: the one premove, sent when our turn comes
let confirming = null; // {room, version, move}: a move waiting for Confirm
let animateVersion = null; // the version whose board is drawn with its move animated
const lowTimeSounded = new Set(); // "room:seat" whose low time was sounded
let premoveNotice = null; // {text, timer}: "premove dropped" on screen

// What the game screen lends (wireFeel): its redraws, its move sender and its turn rule.
let hooks = {
  redraw: () => {},
  redrawBoard: () => {},
  send: () => {},
  isMyTurn: () => false,
};

// -- what the game screen calls ----------------------------------------------------------------

/** A new snapshot of the room on screen (`fresh`: another version than the one before):
 *  mark its move for animation, play its sound, keep or drop the move waiting for
 *  Confirm, and send the premove if the turn has come. */
export function feelOnState(previous, state, fresh) {
  const oneMove = Boolean(previous) && state.version === previous.version + 1 && state.moves.length === previous.moves.length + 1;
  animateVersion = oneMove && animationAllowed() ? state.version : null;
  if (previous && fresh) soundFor(previous, state);
  if (fresh) {
    keepConfirmation(state);
    playPremove(state);
  }
}

/** Entering a room: no premove, no move waiting for Confirm. */
export function resetFeel() {
  premove = null;
  confirming = null;
}

/** A move picked (board, pass, text): when the preferences ask for it, keep it for
 *  Confirm, redraw with the focus on Confirm and say so (true); else false. */
export function holdForConfirm(state, move) {
  if (!needsConfirmation(state)) return false;
  confirming = { room: state.room, version: state.version, move };
  hooks.redraw();
  const yes = $("confirm-move-btn");
  if (yes) yes.focus();
  return true;
}

/** A move is being sent: nothing waits for Confirm any more. */
export function forgetConfirmation() {
  confirming = null;
}

/** The Confirm bar, the premove's note in the status line and, with a snapshot, the mute switch. */
export function renderFeel(state) {
  renderConfirm(state);
  renderPremove(state);
  if (state) renderSoundButton();
}

/** Before the board is drawn: whether a move waits for Confirm (`waiting`), whether the
 *  board offers premoves (`premoving`) and which (`premoves`), and the old drawing when
 *  this version's move is to be animated on it (`before`, else null). */
export function feelBeforeBoard(state, root, myTurn) {
  const waiting = Boolean(confirming && confirming.room === state.room);
  const premoving = !myTurn && canPremove(state);
  // The board before this redraw, when this version's move is to be animated on it.
  const animate = animateVersion === state.version && Number(root.dataset.version) === state.version - 1;
  const before = animate ? captureBoard(root) : null;
  if (animateVersion === state.version) animateVersion = null;
  // While the opponent is to move: any own piece to any square, kept as a premove.
  const premoves = premoving ? pseudoMoves(state.game, state.view, store.you) : [];
  return { waiting, premoving, premoves, before };
}

/** After the board is drawn: mark the premove's and the waiting move's squares, animate the move. */
export function feelAfterBoard(root, state, before) {
  markSquares(root, state);
  if (before) animateChange(root, before);
}

// -- animation, sounds, premoves, move confirmation -------------------------------------------

/** Moves are animated unless the player turned it off, asks for less motion or looks away. */
function animationAllowed() {
  if (prefs.get("animation", true) === false || document.hidden) return false;
  return !(window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches);
}

function pieceCount(view) {
  if (!view || !Array.isArray(view.rows)) return null;
  return view.rows.flat().filter(Boolean).length;
}

/** The sound of a move, from what the snapshots show (no rule): check, capture or move. */
function moveSound(previous, state) {
  const last = state.last_move || state.moves[state.moves.length - 1] || {};
  const shown = String(last.display || last.move || "");
  if (state.game === "chess") {
    if (/[+#]/.test(shown)) return "check";
    if (shown.includes("x")) return "capture";
    return "move";
  }
  if (state.game === "draughts") return String(last.move || "").includes("x") ? "capture" : "move";
  const stores = (view) => (view && Array.isArray(view.stores) ? view.stores.reduce((a, b) => a + b, 0) : 0);
  if (state.game === "oware") return stores(state.view) > stores(previous.view) ? "capture" : "move";
  const before = pieceCount(previous.view);
  const after = pieceCount(state.view);
  return before !== null && after !== null && after < before ? "capture" : "move";
}

/** Whether the other side made an offer in this snapshot (draw, takeback, rematch). */
function newOffer(previous, state) {
  const seated = store.token && (store.you === 0 || store.you === 1);
  if (!seated) return false;
  const offers = state.offers || {};
  const before = previous.offers || {};
  return ["draw", "takeback", "rematch"].some((kind) => {
    const by = offers[kind];
    return by !== null && by !== undefined && by !== before[kind] && by !== store.you;
  });
}

/** The sound of a new snapshot of the room on screen, if any. */
function soundFor(previous, state) {
  if (previous.room !== state.room) return;
  if (state.status === "over" && previous.status !== "over") {
    playSound("end");
  } else if (state.moves.length > previous.moves.length) {
    playSound(moveSound(previous, state));
  } else if (newOffer(previous, state) || (previous.status === "waiting" && state.status === "playing")) {
    playSound("notify");
  }
}

/** Your own clock under ten seconds: the low-time sound, once a game. */
function lowTimeTick(state) {
  const clock = state.clock;
  const seat = store.you;
  if (!clock || clock.days_per_move || state.status !== "playing" || !store.token) return;
  if ((seat !== 0 && seat !== 1) || clock.running !== seat || !Array.isArray(clock.remaining_ms)) return;
  const key = `${state.room}:${seat}`;
  if (lowTimeSounded.has(key) || remainingMs(clock, seat) >= LOW_TIME_MS) return;
  lowTimeSounded.add(key);
  playSound("lowtime");
}

/** Whether this browser may premove now: seated in a chess or draughts game, the opponent to move. */
function canPremove(state) {
  return (
    prefs.get("premove", true) !== false &&
    PREMOVE_GAMES.has(state.game) &&
    state.status === "playing" &&
    Boolean(store.token) &&
    (store.you === 0 || store.you === 1) &&
    state.to_move !== store.you
  );
}

/** The renderer's play() while the opponent is to move: keep the move as the premove. */
export function keepPremove(move) {
  const state = store.state;
  if (!state || !canPremove(state)) return;
  premove = { room: state.room, move };
  clearPremoveNotice();
  hooks.redraw();
}

function cancelPremove() {
  if (!premove) return false;
  premove = null;
  if (store.state) hooks.redraw();
  return true;
}

/** Our turn has come: send the premove if it (or a move between its squares) is legal, else drop it. */
function playPremove(state) {
  if (!premove) return;
  if (premove.room !== state.room || state.status !== "playing") {
    premove = null;
    return;
  }
  if (!hooks.isMyTurn(state)) return;
  const wanted = premove.move;
  premove = null;
  const move = matchPremove(state.game, wanted, state.legal_moves);
  if (move && !store.pending) {
    hooks.send(move, false);
  } else {
    showPremoveNotice(t("feel.premove.dropped", { move: wanted }));
  }
}

function showPremoveNotice(text) {
  clearPremoveNotice();
  premoveNotice = {
    text,
    timer: setTimeout(() => {
      premoveNotice = null;
      if (store.state) renderPremove(store.state);
    }, NOTICE_MS),
  };
}

function clearPremoveNotice() {
  if (premoveNotice) clearTimeout(premoveNotice.timer);
  premoveNotice = null;
}

/** Whether a picked move waits for Confirm (prefs "confirmMove"). */
function needsConfirmation(state) {
  const mode = prefs.get("confirmMove", "correspondence");
  if (mode === "always") return true;
  if (mode === "never") return false;
  return Boolean(state.clock && state.clock.days_per_move);
}

/** A new snapshot: the move waiting for Confirm stays only while it is still ours to play. */
function keepConfirmation(state) {
  if (!confirming) return;
  if (confirming.room !== state.room || !hooks.isMyTurn(state) || !state.legal_moves.includes(confirming.move)) confirming = null;
  else confirming.version = state.version;
}

function cancelConfirmation() {
  if (!confirming) return false;
  confirming = null;
  if (store.state) hooks.redraw();
  const board = $("board");
  const square = board && board.querySelector("button:not([disabled])");
  if (square) square.focus();
  return true;
}

/** The squares (cells, points, pits) a move text names. */
function squaresOf(state, move) {
  const ends = moveSquares(state.game, move);
  return ends.length ? ends : [String(move)];
}

function squareNode(root, name) {
  const value = CSS.escape(name);
  return root.querySelector(`[data-square="${value}"], [data-point="${value}"], [data-pit="${value}"], [data-cell="${value}"]`);
}

/** Mark the premove's squares and those of the move waiting for Confirm. */
function markSquares(root, state) {
  const marks = [];
  if (premove && premove.room === state.room) marks.push([premove.move, "premove"]);
  if (confirming && confirming.room === state.room) marks.push([confirming.move, "confirm-pending"]);
  for (const [move, mark] of marks) {
    for (const name of squaresOf(state, move)) {
      const node = squareNode(root, name);
      if (node) node.classList.add(mark);
    }
  }
}

/** The floating Confirm / Cancel bar (never moves the board). */
function renderConfirm(state) {
  const bar = $("move-confirm");
  if (!bar) return;
  const show = Boolean(state && confirming && confirming.room === state.room);
  bar.hidden = !show;
  if (show) $("move-confirm-text").textContent = t("feel.confirm.prompt", { move: confirming.move });
}

/** The premove waiting, or why it was dropped: a note at the end of the status line
 *  (a live region, so it is said too). */
function renderPremove(state) {
  const old = $("premove");
  if (old) old.remove();
  let text = null;
  let mode = "none";
  if (state && premove && premove.room === state.room) {
    text = t("feel.premove.set", { move: premove.move });
    mode = "set";
  } else if (state && premoveNotice) {
    text = premoveNotice.text;
    mode = "dropped";
  }
  if (!text) return;
  $("status").append(el("span", { id: "premove", class: "premove-note", testid: "premove", dataset: { state: mode } }, [text]));
}

/** A speaker drawn in SVG: with sound waves, or crossed out when muted. */
function speakerIcon(on) {
  const ns = "http://www.w3.org/2000/svg";
  const icon = document.createElementNS(ns, "svg");
  icon.setAttribute("viewBox", "0 0 24 24");
  icon.setAttribute("aria-hidden", "true");
  icon.setAttribute("class", "speaker-icon");
  const shape = (d) => {
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d);
    icon.append(path);
  };
  shape("M4 9h4l5-4v14l-5-4H4z");
  if (on) shape("M16 8.5c1.2 1 1.8 2.2 1.8 3.5s-.6 2.5-1.8 3.5M18.5 6c2 1.6 3 3.6 3 6s-1 4.4-3 6");
  else shape("M16 9l5 6M21 9l-5 6");
  return icon;
}

/** The mute switch beside the game's title (prefs "sound", also in the settings dialog). */
function renderSoundButton() {
  const button = $("sound-btn");
  if (!button) return;
  const on = soundOn();
  button.setAttribute("aria-pressed", String(!on));
  button.setAttribute("aria-label", on ? t("feel.sound.mute") : t("feel.sound.unmute"));
  button.title = button.getAttribute("aria-label");
  button.dataset.sound = on ? "on" : "off";
  button.replaceChildren(speakerIcon(on));
}

/** Make the floating bars and the mute switch, and listen for the keys and preferences.
 *  What game.js lends: redraw() (the whole screen), redrawBoard(), send(move, redraw = true)
 *  (the move for the version on screen) and isMyTurn(state). */
export function wireFeel({ redraw, redrawBoard, send, isMyTurn }) {
  hooks = { redraw, redrawBoard, send, isMyTurn };
  const game = $("game");
  const yes = el("button", { type: "button", class: "btn primary", id: "confirm-move-btn", testid: "confirm-move" }, [t("feel.confirm.yes")]);
  const no = el("button", { type: "button", class: "btn", testid: "cancel-move" }, [t("feel.confirm.no")]);
  yes.addEventListener("click", () => {
    if (!confirming) return;
    const { move } = confirming;
    confirming = null;
    hooks.send(move);
  });
  no.addEventListener("click", () => cancelConfirmation());
  game.append(
    el("div", { id: "move-confirm", class: "feel-float move-confirm", role: "group", "aria-label": t("feel.confirm.label"), testid: "confirm-bar", hidden: true }, [
      el("span", { id: "move-confirm-text", class: "move-confirm-text" }),
      yes,
      no,
    ]),
  );
  if (!$("sound-btn")) {
    const sound = el("button", { type: "button", class: "btn ghost small sound-btn", id: "sound-btn", testid: "sound-toggle" });
    sound.addEventListener("click", () => {
      setSoundOn(!soundOn());
      renderSoundButton();
    });
    const head = game.querySelector(".game-head");
    if (head) head.append(sound);
  }
  renderSoundButton();
  const board = $("board");
  // A click on the premove's piece takes the premove back (before the board sees the click).
  board.addEventListener(
    "click",
    (event) => {
      if (!premove || !store.state) return;
      const square = event.target.closest("[data-square]");
      if (square && square.dataset.square === squaresOf(store.state, premove.move)[0]) {
        event.stopPropagation();
        event.preventDefault();
        cancelPremove();
      }
    },
    true,
  );
  board.addEventListener("contextmenu", (event) => {
    if (!store.state || !canPremove(store.state)) return;
    event.preventDefault();
    if (!cancelPremove() && store.ui.selected !== undefined) {
      resetUi();
      hooks.redrawBoard();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || $("game").hidden || !$("dialog").hidden || document.querySelector("dialog[open]")) return;
    if (cancelConfirmation() || cancelPremove()) event.preventDefault();
  });
  window.addEventListener("kibitz:prefs", () => {
    if (prefs.get("premove", true) === false) premove = null;
    renderSoundButton();
    if (store.state) hooks.redraw();
  });
  onTick(lowTimeTick);
}
