// The game screen: the board, the players, the moves and sharing links. Every "state"
// snapshot redraws it; a click sends a move from legal_moves.
// It registers itself with the router as the screen "game" (show a room, join, leave).
//
// Its panels: actions.js (offers, abort, claim, rematch), chat.js, choice.js (the dialog
// for choices) and feel.js (move animation, sounds, premoves, move confirmation), which
// this screen calls at fixed points and lends its redraws and its move sender.

import { renderActions, wireActions } from "./actions.js";
import { el, enableArrowKeys } from "./boards/common.js";
import { renderChat, resetChat } from "./chat.js";
import { choose, wireChoice } from "./choice.js";
import { clockElement, renderClockStrip } from "./clock.js";
import { reportError } from "./errors.js";
import {
  feelAfterBoard,
  feelBeforeBoard,
  feelOnState,
  forgetConfirmation,
  holdForConfirm,
  keepPremove,
  renderFeel,
  resetFeel,
  wireFeel,
} from "./feel.js";
import { t } from "./i18n.js";
import { renderMaterial } from "./material.js";
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
import { renderTextMove } from "./textmove.js";
import {
  $,
  aiSeatText,
  boardFor,
  botBadge,
  changeText,
  fetchJson,
  gameTitle,
  loadGames,
  playerName,
  profileHref,
  ratingText,
  sideName,
} from "./util.js";

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
  const fresh = !previous || previous.version !== message.version;
  if (fresh) {
    resetUi();
    clearPending();
  }
  feelOnState(previous, message, fresh); // animation, sound, confirmation, premove
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
  const node = $("thinking");
  const text = t("game.thinking", { depth: message.depth, score, seconds });
  node.textContent = line ? t("game.thinking.line", { text, line }) : text;
  node.hidden = false;
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
  resetFeel();
  window.scrollTo(0, 0); // a new game opens at the top of the page
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

/** The side a seat plays, in the page's language ("White", "Sud"). */
function side(state, seat) {
  return sideName(state.game, seat);
}

function playerText(state, seat) {
  const info = state.seats[seat];
  const player = side(state, seat);
  if (info && info.kind === "ai") return t("game.player", { side: player, name: aiSeatText(state.game, info) });
  if (info && (info.account || info.name)) return t("game.player", { side: player, name: info.account || info.name });
  return player;
}

function isMyTurn(state) {
  return state.status === "playing" && store.you !== null && store.you !== undefined && state.to_move === store.you;
}

function statusText(state) {
  const you = store.you;
  const seated = you !== null && you !== undefined;
  if (state.status === "waiting") return seated ? t("game.status.waitingSeated") : t("game.status.waiting");
  if (state.status === "over") return t("game.status.over");
  const mover = state.seats[state.to_move];
  if (seated && state.to_move === you) {
    return store.pending ? t("game.status.sending") : t("game.status.yourMove", { side: side(state, you) });
  }
  if (mover && mover.kind === "ai") return t("game.status.thinking", { player: playerText(state, state.to_move) });
  if (seated) return t("game.status.waitingFor", { player: playerText(state, state.to_move) });
  return t("game.status.toMove", { player: playerText(state, state.to_move) });
}

function resultWords(state) {
  const names = [0, 1].map((seat) => playerText(state, seat));
  const you = store.token ? store.you : null;
  // The server's side names: result.js translates them and reads the reasons with them.
  return describeResult(state, state.players, you, names);
}

export function renderGame() {
  $("thinking").hidden = true;
  const state = store.state;
  renderTextMove(state, { you: store.token ? store.you : null, pending: store.pending, play: playMove }); // H7: text moves, #announce
  if (!state) {
    $("game-title").textContent = t("game.connecting");
    $("room-id").textContent = store.room ? t("game.room", { room: store.room }) : "";
    $("status").textContent = t("game.loading");
    renderFeel(null);
    renderMaterial(null);
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
  const title = gameTitle(state.game);
  $("game-title").textContent = title;
  $("room-id").textContent = t("game.room", { room: state.room });
  $("flip-btn").hidden = !FLIP_FOR_SECOND_SEAT.has(state.game);
  const rules = $("rules-btn");
  if (rules) rules.dataset.rules = state.game; // the rules panel (rules.js) opens on this game
  const status = $("status");
  status.textContent = statusText(state);
  status.dataset.turn = myTurn ? "you" : "other";
  status.dataset.status = state.status;
  const mover = state.seats[state.to_move];
  status.dataset.thinking = String(state.status === "playing" && Boolean(mover) && mover.kind === "ai");
  document.title = myTurn ? t("game.title.yourMove", { game: title }) : `${title} \u00B7 kibitz`;

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
        t("game.review"),
      ]),
      state.next_room && !store.token
        ? el("a", { href: `?watch=${encodeURIComponent(state.next_room)}`, class: "review-link", testid: "next-room-link" }, [
            t("game.watchRematch"),
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
  renderMaterial(state, isFlipped(state)); // captured pieces and the material difference
  renderFeel(state); // the Confirm bar, the premove's note, the mute switch
  renderBoard();
}

// -- a rated game's rating changes on the end screen -------------------------------------------

/** The end screen's lines "White (ann): 1500 → 1512 (+12)", or a "working it out" line. */
function ratingChanges(state) {
  if (ratings.room !== state.room) Object.assign(ratings, { room: state.room, changes: null, polling: false });
  if (!ratings.changes) {
    if (!ratings.polling) pollRatings(state.room);
    return el("p", { class: "rating-changes muted", testid: "rating-changes", dataset: { state: "pending" } }, [
      ratings.polling === "gave-up" ? t("game.ratings.later") : t("game.ratings.pending"),
    ]);
  }
  return el(
    "ul",
    { class: "rating-changes", testid: "rating-changes", dataset: { state: "done" } },
    ratings.changes.map((change, seat) => {
      if (!change) return null;
      const info = state.seats[seat] || {};
      const who = t("game.player", { side: side(state, seat), name: info.account || info.name || "?" });
      const kind = change.change > 0 ? "up" : change.change < 0 ? "down" : "same";
      return el("li", { testid: `rating-change-${seat}`, dataset: { change: String(change.change) } }, [
        `${store.you === seat ? t("game.ratings.you", { who, before: change.before, after: change.after }) : t("game.ratings.line", { who, before: change.before, after: change.after })} `,
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
  if (!info.account) return el("span", {}, [info.name || t("common.anonymous")]);
  const me = currentAccount();
  const mine = me && me.username.toLowerCase() === info.account.toLowerCase();
  if (mine || !me) return el("a", { href: profileHref(info.account), class: "player-link", testid: `seat-name-${seat}` }, [info.account]);
  const menu = el("details", { class: "menu seat-menu", testid: `seat-menu-${seat}`, open: openSeatMenu === seat }, [
    el("summary", { class: "player-link", testid: `seat-name-${seat}`, "aria-label": t("game.seat.menu", { account: info.account }) }, [info.account]),
    el("ul", { class: "menu-list", role: "menu" }, [
      el("li", { role: "none" }, [el("a", { href: profileHref(info.account), role: "menuitem", testid: `seat-profile-${seat}` }, [t("game.seat.profile")])]),
      el("li", { role: "none" }, [
        el("button", { type: "button", class: "menu-item", role: "menuitem", testid: `seat-block-${seat}`, onclick: () => blockPlayer(info.account) }, [t("game.seat.block")]),
      ]),
      el("li", { role: "none" }, [
        el(
          "button",
          { type: "button", class: "menu-item", role: "menuitem", testid: `seat-report-${seat}`, onclick: () => reportPlayer(info.account, { room: state.room }) },
          [t("game.seat.report")],
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
  const host = taken ? playerText(state, taken.seat) : t("game.join.someone");
  $("join-banner-text").textContent = t("game.join.text", { host, side: side(state, free[0]) });
  $("join-seat").textContent = t("game.join.playAs", { side: side(state, free[0]) });
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
  // The layout (style.css) puts the player at the bottom of the board under it, the other above.
  $("game").dataset.bottom = String(bottom);
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
    } else if (!info.taken) name = t("game.seat.open");
    else name = seatName(state, seat, info);
    const rating = ratingText(info.rating, info.provisional);
    box.className = ["seat", turn && "turn", store.you === seat && "mine", !info.taken && "open"].filter(Boolean).join(" ");
    box.dataset.connected = String(Boolean(connected && info.taken));
    box.dataset.turn = String(turn);
    const parts = [
      el("span", { class: `swatch swatch-${state.game}-${seat}`, "aria-hidden": "true" }),
      el("span", { class: "seat-text" }, [
        el("span", { class: "seat-player" }, [
          side(state, seat),
          store.you === seat ? el("span", { class: "tag" }, [t("game.seat.you")]) : null,
          info.kind === "ai" ? el("span", { class: "tag ai" }, [t("game.seat.ai")]) : null,
        ]),
        el("span", { class: "seat-name muted" }, [
          name,
          botBadge(info.bot),
          rating
            ? el("span", { class: "rating", testid: `seat-rating-${seat}`, title: info.provisional ? t("common.rating.provisional") : t("common.rating") }, [` ${rating}`])
            : null,
        ]),
      ]),
      info.taken
        ? el("span", {
            class: ["dot", connected ? "on" : "off"],
            title: connected ? t("game.seat.connected") : t("game.seat.disconnected"),
            "aria-label": connected ? t("game.seat.connected") : t("game.seat.disconnected"),
            role: "img",
          })
        : null,
      turn ? el("span", { class: "turn-mark", "aria-label": t("game.seat.toMove"), role: "img" }, ["\u25C0"]) : null,
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
  if (!rows.length) rows.push(el("li", { class: "empty muted" }, [t("game.moves.none")]));
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
  const { waiting, premoving, premoves, before } = feelBeforeBoard(state, root, myTurn);
  const canMove = myTurn && !store.pending && !waiting;
  root.dataset.game = state.game;
  root.dataset.version = String(state.version);
  root.dataset.status = state.status;
  root.dataset.turn = myTurn ? "you" : "other";
  root.classList.toggle("my-turn", canMove);
  root.classList.toggle("premoving", premoving);
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
    canMove: canMove || premoving,
    premove: premoving,
    // While the opponent is to move: any own piece to any square, kept as a premove.
    legal: canMove ? state.legal_moves : premoves,
    lastMove: state.last_move ? state.last_move.move : null,
    prevView: store.prevView,
    ui: store.ui,
    play: premoving ? keepPremove : playMove,
    choose,
    rerender: renderBoard,
  });
  feelAfterBoard(root, state, before); // the marked squares, the move's animation
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
  wireChoice();
  wireFeel({ redraw: renderGame, redrawBoard: renderBoard, send: sendMove, isMyTurn });
}

/** A move picked on the board, by the pass button or as text: confirmed first when the
 *  preferences ask for it, else sent at once. */
function playMove(move) {
  const state = store.state;
  if (!state || store.pending || !store.token || !isMyTurn(state)) return;
  if (holdForConfirm(state, move)) return;
  sendMove(move);
}

/** Send `move` for the version on screen (and redraw, unless the caller will). */
function sendMove(move, redraw = true) {
  const state = store.state;
  if (!state || store.pending || !store.token || !isMyTurn(state)) return;
  forgetConfirmation();
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
  if (redraw) renderGame();
}

async function resign() {
  const state = store.state;
  if (!state || !store.token) return;
  const sure = await choose({
    title: t("game.resign.title"),
    options: [
      { label: t("game.resign.yes"), value: "yes", testid: "choice-yes", danger: true },
      { label: t("game.resign.no"), value: null, testid: "choice-no" },
    ],
  });
  if (sure !== "yes" || store.state.room !== state.room) return;
  store.conn.request({ type: "resign", room: state.room, token: store.token }).catch(reportError);
}
