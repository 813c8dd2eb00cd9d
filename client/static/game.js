// The game screen: the board, the players, the moves, sharing links and the dialog for
// choices. Every "state" snapshot redraws it; a click sends a move from legal_moves.

import { el } from "./boards/common.js";
import { reportError } from "./errors.js";
import { loadGames, playerName, showLobby } from "./lobby.js";
import { $, app, navigate } from "./state.js";
import { player, prefs, seatStore } from "./storage.js";

const GAMES_WITH_BOARDS = ["tictactoe", "matches", "othello", "draughts", "chess", "kono", "oware"];
// Boards turned round for the second seat, so each player sees their own side at the bottom.
const FLIP_FOR_SECOND_SEAT = new Set(["chess", "draughts", "oware"]);
const MOVE_PENDING_MS = 10000;

// -- messages about the room on screen -------------------------------------------------------

export function onSeat(message) {
  const game = app.state && app.state.room === message.room ? app.state.game : undefined;
  seatStore.put(message.room, { token: message.token, seat: message.seat, ...(game ? { game } : {}) });
  if (message.room === app.room) {
    app.token = message.token;
    app.you = message.seat;
    app.mode = "play";
    app.sync.follow(message.room, message.token);
  }
}

export function onState(message) {
  if (message.room !== app.room) return;
  const previous = app.state;
  if (previous && message.version < previous.version) return; // a late duplicate
  if (message.you !== undefined) app.you = message.you;
  if (app.you !== null && app.you !== undefined && app.token) {
    seatStore.put(message.room, { game: message.game, seat: app.you });
  }
  app.state = message;
  const mine = app.you !== null && app.you !== undefined && app.token ? message.seats[app.you] : null;
  if (mine && mine.player) player.remember(mine.player);
  if (!previous || previous.version !== message.version) {
    app.ui = {};
    clearPending();
  }
  renderGame();
}

// An AI's progress on its move: shown under the status line until the next state.
export function onThinking(message) {
  if (message.room !== app.room || !app.state || message.version !== app.state.version) return;
  const seconds = (message.time_ms / 1000).toFixed(1);
  const score = message.score > 0 ? `+${message.score}` : String(message.score);
  const line = message.pv.slice(0, 6).join(" ");
  const el = $("thinking");
  el.textContent = `AI thinking: depth ${message.depth}, score ${score}, ${seconds} s — ${line}`;
  el.hidden = false;
}

export function clearPending() {
  app.pending = false;
  clearTimeout(app.pendingTimer);
}

// -- game screen ------------------------------------------------------------------------------

export async function joinRoom(room, seat = undefined) {
  const message = { type: "join", room, player_key: player.key() };
  const name = playerName();
  if (name) message.name = name;
  if (seat !== undefined) message.seat = seat;
  try {
    const reply = await app.conn.request(message);
    seatStore.put(reply.room, { token: reply.token, seat: reply.seat });
    if (app.room === reply.room) {
      app.mode = "play";
      navigate(`?room=${encodeURIComponent(reply.room)}`);
      renderGame();
    } else {
      openRoom(reply.room, "play", `?room=${encodeURIComponent(reply.room)}`);
    }
  } catch (err) {
    reportError(err);
  }
}

export function openRoom(room, mode, search) {
  navigate(search);
  enterRoom(room, mode);
}

export async function enterRoom(room, mode) {
  clearInterval(app.roomsTimer);
  if (app.room && app.room !== room) leaveRoom(false);
  const stored = seatStore.get(room);
  app.room = room;
  app.mode = mode;
  app.state = null;
  app.ui = {};
  app.token = stored ? stored.token : null;
  app.you = stored ? stored.seat : null;
  clearPending();
  $("lobby").hidden = true;
  $("replay").hidden = true;
  $("game").hidden = false;
  renderGame();
  loadGames().then(() => app.state && renderGame());
  // Followed from now on: resumed after every reconnection (see sync.js).
  app.sync.follow(room, app.token);
  try {
    if (app.token) {
      await app.conn.request({ type: "resume", room, token: app.token });
    } else {
      await app.conn.request({ type: "watch", room });
    }
  } catch (err) {
    if (app.room !== room) return;
    if (err.code === "auth/token") {
      // The stored seat is gone (an expired room): follow the room as a spectator instead.
      seatStore.drop(room);
      app.token = null;
      app.you = null;
      app.mode = "invite";
      app.sync.follow(room, null);
      try {
        await app.conn.request({ type: "watch", room });
        return;
      } catch (again) {
        err = again;
      }
    }
    reportError(err);
    if (err.code === "room/unknown") {
      app.sync.forget(room);
      seatStore.drop(room);
      navigate("");
      showLobby();
    }
  }
}

export function leaveRoom(toLobby = true) {
  if (app.room) {
    app.sync.forget(app.room);
    app.conn.send({ type: "leave", room: app.room });
  }
  app.room = null;
  app.state = null;
  app.token = null;
  app.you = null;
  if (toLobby) {
    navigate("");
    showLobby();
  }
}

function gameTitle(state) {
  const game = app.gamesByName.get(state.game);
  return game ? game.title : state.game;
}

function playerText(state, seat) {
  const info = state.seats[seat];
  const player = state.players[seat];
  if (info && info.kind === "ai") return `${player} (${info.name || `AI level ${info.level}`})`;
  if (info && info.name) return `${player} (${info.name})`;
  return player;
}

function isMyTurn(state) {
  return state.status === "playing" && app.you !== null && app.you !== undefined && state.to_move === app.you;
}

function statusText(state) {
  const you = app.you;
  const seated = you !== null && you !== undefined;
  if (state.status === "waiting") {
    return seated ? "Waiting for an opponent to join: send them the invite link." : "Waiting for a second player.";
  }
  if (state.status === "over") return "Game over.";
  const mover = state.seats[state.to_move];
  if (seated && state.to_move === you) {
    return app.pending ? "Sending your move…" : `Your move: you play ${state.players[you]}.`;
  }
  if (mover && mover.kind === "ai") return `${playerText(state, state.to_move)} is thinking…`;
  if (seated) return `Waiting for ${playerText(state, state.to_move)} to move.`;
  return `${playerText(state, state.to_move)} to move.`;
}

function resultText(state) {
  const result = state.result || {};
  const reason = result.reason ? ` (${result.reason})` : "";
  if (result.winner === null || result.winner === undefined) return `Draw${reason}.`;
  if (app.you === result.winner) return `You win${reason}!`;
  if (app.you !== null && app.you !== undefined) return `You lose${reason}.`;
  return `${playerText(state, result.winner)} wins${reason}.`;
}

/** The board renderer of `game` (a module from boards/), or null for a game without one. */
export async function boardFor(game) {
  if (!GAMES_WITH_BOARDS.includes(game)) return null;
  if (!app.boards.has(game)) app.boards.set(game, await import(`./boards/${game}.js`));
  return app.boards.get(game);
}

export function renderGame() {
  $("thinking").hidden = true;
  const state = app.state;
  if (!state) {
    $("game-title").textContent = "Connecting…";
    $("room-id").textContent = app.room ? `room ${app.room}` : "";
    $("status").textContent = "Loading the game…";
    $("result").hidden = true;
    $("join-banner").hidden = true;
    $("board").replaceChildren();
    $("moves").replaceChildren();
    for (const seat of [0, 1]) $(`seat-${seat}`).replaceChildren();
    for (const id of ["pass-btn", "resign-btn", "rematch-btn"]) $(id).hidden = true;
    return;
  }
  const you = app.you;
  const seated = you !== null && you !== undefined;
  const myTurn = isMyTurn(state);
  $("game-title").textContent = gameTitle(state);
  $("room-id").textContent = `room ${state.room}`;
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
    const outcome = winner === null || winner === undefined ? "draw" : !seated ? "decided" : winner === you ? "win" : "loss";
    result.className = `result ${outcome}`;
    result.dataset.winner = winner === null || winner === undefined ? "draw" : String(winner);
    result.dataset.outcome = outcome;
    result.replaceChildren(
      el("strong", {}, [resultText(state)]),
      " ",
      el("a", { href: `?game=${encodeURIComponent(state.room)}`, class: "review-link", testid: "review-link" }, [
        "Review the game and export it",
      ]),
    );
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

function renderJoinBanner(state) {
  const banner = $("join-banner");
  const free = state.seats.filter((seat) => !seat.taken).map((seat) => seat.seat);
  const show = app.mode === "invite" && (app.you === null || app.you === undefined) && state.status === "waiting" && free.length > 0;
  banner.hidden = !show;
  if (!show) return;
  const taken = state.seats.find((seat) => seat.taken);
  const host = taken ? playerText(state, taken.seat) : "A player";
  $("join-banner-text").textContent = `${host} is waiting for an opponent. Join as ${state.players[free[0]]}?`;
  $("join-seat").textContent = `Play as ${state.players[free[0]]}`;
  $("join-seat").dataset.seat = String(free[0]);
  if (!$("join-name").value) $("join-name").value = prefs.get("name", "");
}

function renderSeats(state) {
  for (const seat of [0, 1]) {
    const info = state.seats[seat] || { taken: false, kind: "human" };
    const box = $(`seat-${seat}`);
    const turn = state.status === "playing" && state.to_move === seat;
    const connected = info.kind === "ai" || info.connected;
    let name;
    if (info.kind === "ai") name = info.name || `AI level ${info.level}`;
    else if (!info.taken) name = "Waiting for a player…";
    else name = info.name || "Anonymous";
    box.className = ["seat", turn && "turn", app.you === seat && "mine", !info.taken && "open"].filter(Boolean).join(" ");
    box.dataset.connected = String(Boolean(connected && info.taken));
    box.dataset.turn = String(turn);
    const parts = [
      el("span", { class: `swatch swatch-${state.game}-${seat}`, "aria-hidden": "true" }),
      el("span", { class: "seat-text" }, [
        el("span", { class: "seat-player" }, [
          state.players[seat],
          app.you === seat ? el("span", { class: "tag" }, ["you"]) : null,
          info.kind === "ai" ? el("span", { class: "tag ai" }, ["AI"]) : null,
        ]),
        el("span", { class: "seat-name muted" }, [name]),
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

function renderActions(state, myTurn) {
  const seated = app.you !== null && app.you !== undefined;
  const pass = $("pass-btn");
  pass.hidden = !(myTurn && state.legal_moves.includes("pass"));
  pass.disabled = app.pending;
  const resign = $("resign-btn");
  resign.hidden = !(seated && state.status === "playing");
  $("rematch-btn").hidden = state.status !== "over";
}

async function renderBoard() {
  const state = app.state;
  const root = $("board");
  const board = await boardFor(state.game);
  if (state !== app.state) return; // a newer snapshot arrived while the module loaded
  const myTurn = isMyTurn(state);
  const canMove = myTurn && !app.pending;
  root.dataset.game = state.game;
  root.dataset.version = String(state.version);
  root.dataset.status = state.status;
  root.dataset.turn = myTurn ? "you" : "other";
  root.classList.toggle("my-turn", canMove);
  root.replaceChildren();
  if (!board) {
    root.append(el("pre", { class: "position" }, [state.position]));
    return;
  }
  board.render(root, {
    state,
    view: state.view,
    you: app.you,
    flipped: app.you === 1 && FLIP_FOR_SECOND_SEAT.has(state.game),
    canMove,
    legal: canMove ? state.legal_moves : [],
    lastMove: state.last_move ? state.last_move.move : null,
    ui: app.ui,
    play: playMove,
    choose,
    rerender: renderBoard,
  });
}

export function playMove(move) {
  const state = app.state;
  if (!state || app.pending || !app.token || !isMyTurn(state)) return;
  app.pending = true;
  clearTimeout(app.pendingTimer);
  app.pendingTimer = setTimeout(() => {
    app.pending = false;
    if (app.state) renderGame();
  }, MOVE_PENDING_MS);
  // Pinned to the version on screen, so the connection may send it again (after a
  // transient error, or on a new socket) without ever playing it twice.
  const message = { type: "move", room: state.room, token: app.token, move, version: state.version };
  app.conn.request(message).catch((err) => {
    clearPending();
    // While reconnecting the banner says why; the move is still sent once the socket is back.
    if (!(err.code === "client/timeout" && app.conn.status !== "open")) reportError(err);
    if (app.state) renderGame();
  });
  renderGame();
}

export async function resign() {
  const state = app.state;
  if (!state || !app.token) return;
  const sure = await choose({
    title: "Resign this game?",
    options: [
      { label: "Resign", value: "yes", testid: "choice-yes", danger: true },
      { label: "Keep playing", value: null, testid: "choice-no" },
    ],
  });
  if (sure !== "yes" || app.state.room !== state.room) return;
  app.conn.request({ type: "resign", room: state.room, token: app.token }).catch(reportError);
}

// -- dialog -----------------------------------------------------------------------------------

let closeDialog = null;

/** Close the open choice, if any, as cancelled. */
export function cancelChoice() {
  if (closeDialog) closeDialog(null);
}

/** Ask the user to pick one option; resolves with its value, or null when cancelled. */
export function choose({ title, options }) {
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

