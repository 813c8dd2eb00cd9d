// The game screen: the board, the players, the moves, sharing links and the dialog for
// choices. Every "state" snapshot redraws it; a click sends a move from legal_moves.
// It registers itself with the router as the screen "game" (show a room, join, leave).

import { renderActions, wireActions } from "./actions.js";
import { el, enableArrowKeys } from "./boards/common.js";
import { renderChat, resetChat } from "./chat.js";
import { clockElement, renderClockStrip } from "./clock.js";
import { reportError } from "./errors.js";
import { describeResult } from "./result.js";
import { leaveRoom, navigate, openRoom, registerScreen, showLobby } from "./router.js";
import { player, prefs, seatStore } from "./storage.js";
import {
  leaveRoomState,
  loseSeat,
  resetUi,
  selectGame,
  setMode,
  setPending,
  setSnapshot,
  setYou,
  showRoom,
  store,
  takeSeat,
} from "./store.js";
import { currentAccount } from "./account.js";
import { blockPlayer, reportPlayer } from "./civil.js";
import { $, aiSeatText, boardFor, botBadge, changeText, fetchJson, loadGames, playerName, profileHref, ratingText } from "./util.js";

// Boards turned round for the second seat, so each player sees their own side at the bottom.
const FLIP_FOR_SECOND_SEAT = new Set(["chess", "draughts", "oware"]);
const MOVE_PENDING_MS = 10000;
// A rated game's changes: the archiver writes them into the record within about a second
// of the end; the end screen asks for the record until they are there (bounded).
const RATINGS_POLL_MS = 800;
const RATINGS_POLLS = 15;

// The rating changes of the room on screen: {room, changes: [SEAT_CHANGE|null, ...] | null, polling}.
const ratings = { room: null, changes: null, polling: false };
let openSeatMenu = null; // the seat whose name menu is open, kept open across redraws

let pendingTimer = null; // gives up waiting for the reply to a move

// -- messages about the room on screen -------------------------------------------------------

/** A seat taken: ours by a request, or made for us (`paired`: an accepted seek, the pool). */
export function onSeat(message, paired = false) {
  const state = store.state;
  const game = state && state.room === message.room ? state.game : undefined;
  seatStore.put(message.room, { token: message.token, seat: message.seat, ...(game ? { game } : {}) });
  if (paired && message.room !== store.room) {
    // Someone accepted our seek in the lobby, or the quick pairing found us an opponent.
    openRoom(message.room, "play");
    return;
  }
  if (message.room === store.room) {
    takeSeat(message.token, message.seat);
    store.sync.follow(message.room, message.token);
  }
}

export function onState(message) {
  if (message.room !== store.room) return;
  const previous = store.state;
  if (previous && message.version < previous.version) return; // a late duplicate
  if (message.you !== undefined) setYou(message.you);
  if (store.you !== null && store.you !== undefined && store.token) {
    seatStore.put(message.room, { game: message.game, seat: store.you, over: message.status === "over" });
  }
  // The board before the last move, to show what it took (draughts captures).
  let prevView = store.prevView;
  if (previous && message.version === previous.version + 1 && message.moves.length === previous.moves.length + 1) {
    prevView = previous.view;
  } else if (!previous || message.moves.length !== previous.moves.length) {
    prevView = null;
  }
  setSnapshot(message, prevView);
  const mine = store.you !== null && store.you !== undefined && store.token ? message.seats[store.you] : null;
  if (mine && mine.player) player.remember(mine.player);
  if (!previous || previous.version !== message.version) {
    resetUi();
    clearPending();
  }
  renderGame();
  renderChat(); // the channel follows the seat
  const event = message.event || {};
  const missed = Array.isArray(event.missed) ? event.missed : [];
  if (message.next_room && (event.kind === "rematch" || missed.some((e) => e.kind === "rematch"))) {
    followRematch(message);
  }
}

/** The rematch was agreed: players resume the new room with the token they hold (the
 *  server seats each of them there with the same token, colours swapped); spectators
 *  watch it. */
function followRematch(state) {
  const next = state.next_room;
  if (!next || store.room !== state.room) return;
  if (store.token && (store.you === 0 || store.you === 1)) {
    seatStore.put(next, { token: store.token, seat: 1 - store.you, game: state.game });
    openRoom(next, "play");
  } else {
    openRoom(next, "watch");
  }
}

// An AI's progress on its move: shown under the status line until the next state.
export function onThinking(message) {
  if (message.room !== store.room || !store.state || message.version !== store.state.version) return;
  const seconds = (message.time_ms / 1000).toFixed(1);
  const score = message.score > 0 ? `+${message.score}` : String(message.score);
  // The human playing the AI gets no principal variation while the game runs (it would be
  // a hint): the server sends "pv": [] to them.
  const line = (message.pv || []).slice(0, 6).join(" ");
  const el = $("thinking");
  el.textContent = `AI thinking: depth ${message.depth}, score ${score}, ${seconds} s${line ? ` — ${line}` : ""}`;
  el.hidden = false;
}

export function clearPending() {
  setPending(false);
  clearTimeout(pendingTimer);
}

// -- entering and leaving a room (the router calls these) -------------------------------------

async function joinRoom(room, seat = undefined) {
  const message = { type: "join", room, player_key: player.key() };
  const name = playerName();
  if (name) message.name = name;
  if (seat !== undefined) message.seat = seat;
  try {
    const reply = await store.conn.request(message);
    seatStore.put(reply.room, { token: reply.token, seat: reply.seat });
    if (store.room === reply.room) {
      setMode("play");
      navigate(`?room=${encodeURIComponent(reply.room)}`);
      renderGame();
    } else {
      openRoom(reply.room, "play");
    }
  } catch (err) {
    reportError(err);
  }
}

async function enterRoom(room, mode) {
  if (store.room && store.room !== room) leave();
  showRoom(room, mode, seatStore.get(room));
  resetChat(room);
  clearPending();
  renderGame();
  loadGames().then(() => store.state && renderGame());
  // Followed from now on: resumed after every reconnection (see sync.js).
  store.sync.follow(room, store.token);
  try {
    if (store.token) {
      await store.conn.request({ type: "resume", room, token: store.token });
    } else {
      await store.conn.request({ type: "watch", room });
    }
  } catch (err) {
    if (store.room !== room) return;
    if (err.code === "auth/token") {
      // The stored seat is gone (an expired room): follow the room as a spectator instead.
      seatStore.drop(room);
      loseSeat();
      store.sync.follow(room, null);
      try {
        await store.conn.request({ type: "watch", room });
        return;
      } catch (again) {
        err = again;
      }
    }
    reportError(err);
    if (err.code === "room/unknown") {
      store.sync.forget(room);
      seatStore.drop(room);
      navigate("");
      showLobby();
    }
  }
}

/** Stop following the room on screen and tell the server so. */
function leave() {
  if (store.room) {
    store.sync.forget(store.room);
    store.conn.send({ type: "leave", room: store.room });
  }
  leaveRoomState();
}

registerScreen("game", { show: enterRoom, join: joinRoom, leave });

function gameTitle(state) {
  const game = store.gamesByName.get(state.game);
  return game ? game.title : state.game;
}

function playerText(state, seat) {
  const info = state.seats[seat];
  const player = state.players[seat];
  if (info && info.kind === "ai") return `${player} (${aiSeatText(state.game, info)})`;
  if (info && (info.account || info.name)) return `${player} (${info.account || info.name})`;
  return player;
}

function isMyTurn(state) {
  return state.status === "playing" && store.you !== null && store.you !== undefined && state.to_move === store.you;
}

function statusText(state) {
  const you = store.you;
  const seated = you !== null && you !== undefined;
  if (state.status === "waiting") {
    return seated ? "Waiting for an opponent to join: send them the invite link." : "Waiting for a second player.";
  }
  if (state.status === "over") return "Game over.";
  const mover = state.seats[state.to_move];
  if (seated && state.to_move === you) {
    return store.pending ? "Sending your move…" : `Your move: you play ${state.players[you]}.`;
  }
  if (mover && mover.kind === "ai") return `${playerText(state, state.to_move)} is thinking…`;
  if (seated) return `Waiting for ${playerText(state, state.to_move)} to move.`;
  return `${playerText(state, state.to_move)} to move.`;
}

function resultWords(state) {
  const names = [0, 1].map((seat) => playerText(state, seat));
  const you = store.token ? store.you : null;
  return describeResult(state, state.players, you, names);
}

export function renderGame() {
  $("thinking").hidden = true;
  const state = store.state;
  if (!state) {
    $("game-title").textContent = "Connecting…";
    $("room-id").textContent = store.room ? `room ${store.room}` : "";
    $("status").textContent = "Loading the game…";
    $("result").hidden = true;
    $("join-banner").hidden = true;
    $("board").replaceChildren();
    $("moves").replaceChildren();
    for (const seat of [0, 1]) $(`seat-${seat}`).replaceChildren();
    for (const id of ["pass-btn", "resign-btn", "rematch-btn", "draw-btn", "takeback-btn", "abort-btn", "rematch-offer-btn", "offer", "claim", "first-move"]) {
      $(id).hidden = true;
    }
    return;
  }
  const myTurn = isMyTurn(state);
  $("game-title").textContent = gameTitle(state);
  $("room-id").textContent = `room ${state.room}`;
  $("flip-btn").hidden = !FLIP_FOR_SECOND_SEAT.has(state.game);
  const status = $("status");
  status.textContent = statusText(state);
  status.dataset.turn = myTurn ? "you" : "other";
  status.dataset.status = state.status;
  const mover = state.seats[state.to_move];
  status.dataset.thinking = String(state.status === "playing" && Boolean(mover) && mover.kind === "ai");
  document.title = `${myTurn ? "\u25CF Your move \u2014 " : ""}${gameTitle(state)} \u00B7 kibitz`;

  const result = $("result");
  if (state.status === "over") {
    const winner = state.result ? state.result.winner : null;
    const { text, outcome } = resultWords(state);
    result.className = `result ${outcome}`;
    result.dataset.winner = winner === null || winner === undefined ? "draw" : String(winner);
    result.dataset.outcome = outcome;
    const parts = [
      el("strong", {}, [text]),
      " ",
      el("a", { href: `?game=${encodeURIComponent(state.room)}`, class: "review-link", testid: "review-link" }, [
        "Review the game and export it",
      ]),
      state.next_room && !store.token
        ? el("a", { href: `?watch=${encodeURIComponent(state.next_room)}`, class: "review-link", testid: "next-room-link" }, [
            "Watch the rematch",
          ])
        : null,
      state.rated ? ratingChanges(state) : null,
    ];
    result.replaceChildren(...parts.filter(Boolean));
    result.hidden = false;
  } else {
    result.hidden = true;
  }

  renderJoinBanner(state);
  renderSeats(state);
  renderMoves(state);
  renderShare(state);
  renderActions(state, myTurn);
  renderBoard();
}

// -- a rated game's rating changes on the end screen -------------------------------------------

/** The end screen's lines "White (ann): 1500 → 1512 (+12)", or a "working it out" line. */
function ratingChanges(state) {
  if (ratings.room !== state.room) Object.assign(ratings, { room: state.room, changes: null, polling: false });
  if (!ratings.changes) {
    if (!ratings.polling) pollRatings(state.room);
    return el("p", { class: "rating-changes muted", testid: "rating-changes", dataset: { state: "pending" } }, [
      ratings.polling === "gave-up" ? "The rating changes will show on the game's page." : "Updating the ratings…",
    ]);
  }
  return el(
    "ul",
    { class: "rating-changes", testid: "rating-changes", dataset: { state: "done" } },
    ratings.changes.map((change, seat) => {
      if (!change) return null;
      const info = state.seats[seat] || {};
      const who = `${state.players[seat]} (${info.account || info.name || "?"})`;
      const kind = change.change > 0 ? "up" : change.change < 0 ? "down" : "same";
      return el("li", { testid: `rating-change-${seat}`, dataset: { change: String(change.change) } }, [
        `${who}${store.you === seat ? ", you" : ""}: ${change.before} \u2192 ${change.after} `,
        el("strong", { class: `rating-change ${kind}` }, [`(${changeText(change.change)})`]),
      ]);
    }),
  );
}

/** Ask for the record of a finished rated game until it carries "ratings" (bounded). */
async function pollRatings(room) {
  ratings.polling = true;
  for (let attempt = 0; attempt < RATINGS_POLLS; attempt++) {
    try {
      const record = await fetchJson(`/api/games/${encodeURIComponent(room)}`);
      if (ratings.room !== room) return;
      if (Array.isArray(record.ratings)) {
        Object.assign(ratings, { changes: record.ratings, polling: false });
        if (store.state && store.state.room === room) renderGame();
        return;
      }
    } catch {
      // not archived yet (404) or a passing failure: ask again
    }
    await new Promise((resolve) => setTimeout(resolve, RATINGS_POLL_MS));
    if (ratings.room !== room) return;
  }
  ratings.polling = "gave-up";
  if (store.state && store.state.room === room) renderGame();
}

// -- a seat's player: name, rating, and the name menu (profile, block, report) ------------------

function seatName(state, seat, info) {
  if (!info.account) return el("span", {}, [info.name || "Anonymous"]);
  const me = currentAccount();
  const mine = me && me.username.toLowerCase() === info.account.toLowerCase();
  if (mine || !me) return el("a", { href: profileHref(info.account), class: "player-link", testid: `seat-name-${seat}` }, [info.account]);
  const menu = el("details", { class: "menu seat-menu", testid: `seat-menu-${seat}`, open: openSeatMenu === seat }, [
    el("summary", { class: "player-link", testid: `seat-name-${seat}`, "aria-label": `${info.account}: profile, block or report` }, [info.account]),
    el("ul", { class: "menu-list", role: "menu" }, [
      el("li", { role: "none" }, [el("a", { href: profileHref(info.account), role: "menuitem", testid: `seat-profile-${seat}` }, ["View profile"])]),
      el("li", { role: "none" }, [
        el("button", { type: "button", class: "menu-item", role: "menuitem", testid: `seat-block-${seat}`, onclick: () => blockPlayer(info.account) }, ["Block"]),
      ]),
      el("li", { role: "none" }, [
        el(
          "button",
          { type: "button", class: "menu-item", role: "menuitem", testid: `seat-report-${seat}`, onclick: () => reportPlayer(info.account, { room: state.room }) },
          ["Report"],
        ),
      ]),
    ]),
  ]);
  menu.addEventListener("toggle", () => {
    if (menu.open) openSeatMenu = seat;
    else if (openSeatMenu === seat) openSeatMenu = null;
  });
  menu.addEventListener("click", (event) => {
    if (event.target.closest("[role=menuitem]")) {
      openSeatMenu = null;
      menu.open = false;
    }
  });
  return menu;
}

function renderJoinBanner(state) {
  const banner = $("join-banner");
  const free = state.seats.filter((seat) => !seat.taken).map((seat) => seat.seat);
  const show = store.mode === "invite" && (store.you === null || store.you === undefined) && state.status === "waiting" && free.length > 0;
  banner.hidden = !show;
  if (!show) return;
  const taken = state.seats.find((seat) => seat.taken);
  const host = taken ? playerText(state, taken.seat) : "A player";
  $("join-banner-text").textContent = `${host} is waiting for an opponent. Join as ${state.players[free[0]]}?`;
  $("join-seat").textContent = `Play as ${state.players[free[0]]}`;
  $("join-seat").dataset.seat = String(free[0]);
  if (!$("join-name").value) $("join-name").value = prefs.get("name", "");
}

/** Whether the board is drawn turned round (seat 1's side at the bottom). */
function isFlipped(state) {
  return FLIP_FOR_SECOND_SEAT.has(state.game) && (store.you === 1) !== Boolean(store.flip);
}

function renderSeats(state) {
  // On boards with a bottom side, the seat at the bottom of the board (and its clock) is
  // listed last, nearest to it, as on a real table.
  const oriented = FLIP_FOR_SECOND_SEAT.has(state.game);
  $("seat-0").style.order = oriented && !isFlipped(state) ? "2" : "";
  $("seat-1").style.order = oriented && isFlipped(state) ? "2" : "";
  // The strip above the board (narrow screens): the side at the top of the board first.
  const bottom = oriented ? (isFlipped(state) ? 1 : 0) : store.you === 0 || store.you === 1 ? store.you : 1;
  renderClockStrip(state, [1 - bottom, bottom]);
  for (const seat of [0, 1]) {
    const info = state.seats[seat] || { taken: false, kind: "human" };
    const box = $(`seat-${seat}`);
    const turn = state.status === "playing" && state.to_move === seat;
    const connected = info.kind === "ai" || info.connected;
    let name;
    if (info.kind === "ai") {
      name = aiSeatText(state.game, info);
      // Which engine played its last move ("kibitz" is our own searcher).
      if (info.engine && info.engine !== "kibitz") name = `${name} · ${info.engine}`;
    } else if (!info.taken) name = "Waiting for a player…";
    else name = seatName(state, seat, info);
    const rating = ratingText(info.rating, info.provisional);
    box.className = ["seat", turn && "turn", store.you === seat && "mine", !info.taken && "open"].filter(Boolean).join(" ");
    box.dataset.connected = String(Boolean(connected && info.taken));
    box.dataset.turn = String(turn);
    const parts = [
      el("span", { class: `swatch swatch-${state.game}-${seat}`, "aria-hidden": "true" }),
      el("span", { class: "seat-text" }, [
        el("span", { class: "seat-player" }, [
          state.players[seat],
          store.you === seat ? el("span", { class: "tag" }, ["you"]) : null,
          info.kind === "ai" ? el("span", { class: "tag ai" }, ["AI"]) : null,
        ]),
        el("span", { class: "seat-name muted" }, [
          name,
          botBadge(info.bot),
          rating
            ? el("span", { class: "rating", testid: `seat-rating-${seat}`, title: info.provisional ? "provisional rating" : "rating" }, [` ${rating}`])
            : null,
        ]),
      ]),
      info.taken
        ? el("span", {
            class: ["dot", connected ? "on" : "off"],
            title: connected ? "connected" : "disconnected",
            "aria-label": connected ? "connected" : "disconnected",
            role: "img",
          })
        : null,
      turn ? el("span", { class: "turn-mark", "aria-label": "to move", role: "img" }, ["\u25C0"]) : null,
      clockElement(state, seat),
    ];
    box.replaceChildren(...parts.filter(Boolean));
  }
}

function renderMoves(state) {
  const list = $("moves");
  const rows = [];
  let row = null;
  state.moves.forEach((move, index) => {
    if (!row || move.seat === 0 || row.children.length > 2) {
      row = el("li", { class: "move-row" }, [el("span", { class: "move-no muted" }, [`${rows.length + 1}.`])]);
      if (move.seat === 1) row.append(el("span", { class: "move empty" }, ["…"]));
      rows.push(row);
    }
    row.append(
      el(
        "span",
        {
          class: ["move", index === state.moves.length - 1 && "latest"],
          testid: `move-${index + 1}`,
          title: move.move,
        },
        [move.display || move.move],
      ),
    );
  });
  if (!rows.length) rows.push(el("li", { class: "empty muted" }, ["No moves yet."]));
  list.replaceChildren(...rows);
  list.scrollTop = list.scrollHeight;
}

function renderShare(state) {
  const origin = window.location.origin;
  $("invite-link").value = `${origin}/?room=${encodeURIComponent(state.room)}`;
  $("watch-link").value = `${origin}/?watch=${encodeURIComponent(state.room)}`;
  $("record-link").href = `/api/rooms/${encodeURIComponent(state.room)}/record`;
  const free = state.status === "waiting" && state.seats.some((seat) => !seat.taken);
  $("invite-field").hidden = !free;
}

async function renderBoard() {
  const state = store.state;
  const root = $("board");
  const board = await boardFor(state.game);
  if (state !== store.state) return; // a newer snapshot arrived while the module loaded
  const myTurn = isMyTurn(state);
  const canMove = myTurn && !store.pending;
  root.dataset.game = state.game;
  root.dataset.version = String(state.version);
  root.dataset.status = state.status;
  root.dataset.turn = myTurn ? "you" : "other";
  root.classList.toggle("my-turn", canMove);
  // Keep the keyboard focus on the same square across redraws.
  const focused = root.contains(document.activeElement) ? document.activeElement.getAttribute("data-testid") : null;
  root.replaceChildren();
  if (!board) {
    root.append(el("pre", { class: "position" }, [state.position]));
    return;
  }
  board.render(root, {
    state,
    view: state.view,
    you: store.you,
    flipped: isFlipped(state),
    canMove,
    legal: canMove ? state.legal_moves : [],
    lastMove: state.last_move ? state.last_move.move : null,
    prevView: store.prevView,
    ui: store.ui,
    play: playMove,
    choose,
    rerender: renderBoard,
  });
  if (focused) {
    const again = root.querySelector(`[data-testid="${focused}"]`);
    if (again && !again.disabled) again.focus();
  }
}

export function wireGame() {
  wireActions({ choose, followRematch, rerender: renderGame });
  enableArrowKeys($("board"));
  $("leave-btn").addEventListener("click", () => leaveRoom(true));
  $("resign-btn").addEventListener("click", resign);
  $("pass-btn").addEventListener("click", () => playMove("pass"));
  $("rematch-btn").addEventListener("click", () => {
    if (store.state) selectGame(store.state.game);
    leaveRoom(true);
  });
  $("join-seat").addEventListener("click", () => {
    const name = $("join-name").value.trim();
    if (name) prefs.set("name", name);
    joinRoom(store.room, Number($("join-seat").dataset.seat));
  });
  // Logged in or out: the name menus (block, report) follow.
  window.addEventListener("kibitz:account", () => {
    if (store.state) renderGame();
    renderChat();
  });
  $("dialog-cancel").addEventListener("click", cancelChoice);
  $("dialog").addEventListener("click", (event) => {
    if (event.target === $("dialog")) cancelChoice();
  });
}

function playMove(move) {
  const state = store.state;
  if (!state || store.pending || !store.token || !isMyTurn(state)) return;
  setPending(true);
  clearTimeout(pendingTimer);
  pendingTimer = setTimeout(() => {
    setPending(false);
    if (store.state) renderGame();
  }, MOVE_PENDING_MS);
  // Pinned to the version on screen, so the connection may send it again (after a
  // transient error, or on a new socket) without ever playing it twice.
  const message = { type: "move", room: state.room, token: store.token, move, version: state.version };
  store.conn.request(message).catch((err) => {
    clearPending();
    // While reconnecting the banner says why; the move is still sent once the socket is back.
    if (!(err.code === "client/timeout" && store.conn.status !== "open")) reportError(err);
    if (store.state) renderGame();
  });
  renderGame();
}

async function resign() {
  const state = store.state;
  if (!state || !store.token) return;
  const sure = await choose({
    title: "Resign this game?",
    options: [
      { label: "Resign", value: "yes", testid: "choice-yes", danger: true },
      { label: "Keep playing", value: null, testid: "choice-no" },
    ],
  });
  if (sure !== "yes" || store.state.room !== state.room) return;
  store.conn.request({ type: "resign", room: state.room, token: store.token }).catch(reportError);
}

// -- dialog -----------------------------------------------------------------------------------

let closeDialog = null;

/** Close the open choice, if any, as cancelled. */
function cancelChoice() {
  if (closeDialog) closeDialog(null);
}

/** Ask the user to pick one option; resolves with its value, or null when cancelled. */
function choose({ title, options }) {
  if (closeDialog) closeDialog(null);
  const backdrop = $("dialog");
  $("dialog-title").textContent = title;
  return new Promise((resolve) => {
    const previousFocus = document.activeElement;
    closeDialog = (value) => {
      closeDialog = null;
      backdrop.hidden = true;
      document.removeEventListener("keydown", onKey);
      if (previousFocus && previousFocus.focus) previousFocus.focus();
      resolve(value);
    };
    const onKey = (event) => {
      if (event.key === "Escape" && closeDialog) closeDialog(null);
    };
    document.addEventListener("keydown", onKey);
    $("dialog-options").replaceChildren(
      ...options.map((option) =>
        el(
          "button",
          {
            type: "button",
            class: ["btn", option.danger ? "danger" : "primary"],
            testid: option.testid || `choice-${option.value}`,
            onclick: () => closeDialog && closeDialog(option.value),
          },
          [option.label],
        ),
      ),
    );
    backdrop.hidden = false;
    const first = $("dialog-options").querySelector("button");
    if (first) first.focus();
  });
}

