// The kibitz browser client: a lobby and a game screen over one WebSocket.
//
// The server is the only source of truth: every "state" message is a full snapshot (board
// view, legal moves, seats, result) and the screen is redrawn from it. The client applies
// no game rule of its own; it only turns clicks into move texts taken from legal_moves.

import { Connection, ServerError } from "./protocol.js";
import { el } from "./boards/common.js";

const GAMES_WITH_BOARDS = ["tictactoe", "matches", "othello", "draughts", "chess", "kono", "oware"];
// Boards turned round for the second seat, so each player sees their own side at the bottom.
const FLIP_FOR_SECOND_SEAT = new Set(["chess", "draughts", "oware"]);
const AI_LEVELS = 8;
const ROOMS_REFRESH_MS = 4000;
const ERROR_SHOW_MS = 9000;
const MOVE_PENDING_MS = 10000;
const SEATS_KEY = "kibitz:seats";
const PREFS_KEY = "kibitz:prefs";
const KEEP_SEATS = 30;

const FRIENDLY_ERRORS = {
  "room/unknown": "No game with that room id",
  "room/full": "Both seats are taken",
  "room/seat_taken": "That seat is taken",
  "room/stale": "The board changed before your move arrived",
  "move/illegal": "Illegal move",
  "move/invalid": "Invalid move",
  "move/not_your_turn": "It is not your turn",
  "game/over": "The game is over",
  "auth/token": "This browser holds no seat in that game",
  "options/invalid": "Invalid game option",
  "game/unknown": "Unknown game",
  "client/timeout": "The server did not answer",
};

const $ = (id) => document.getElementById(id);

// -- persistent preferences and seats -------------------------------------------------------

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

const seatStore = {
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

const prefs = {
  get(name, fallback) {
    const value = readJson(PREFS_KEY, {})[name];
    return value === undefined ? fallback : value;
  },
  set(name, value) {
    writeJson(PREFS_KEY, { ...readJson(PREFS_KEY, {}), [name]: value });
  },
};

// -- application state ------------------------------------------------------------------------

const app = {
  conn: new Connection(),
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

// -- errors -----------------------------------------------------------------------------------

let errorTimer = null;

function showError(code, message) {
  const box = $("error");
  box.replaceChildren(
    el("strong", {}, [FRIENDLY_ERRORS[code] || "Error"]),
    el("span", { class: "detail" }, [message || ""]),
    el("code", { class: "code", testid: "error-code" }, [code || ""]),
    el("button", { class: "close", type: "button", "aria-label": "Dismiss", onclick: hideError }, ["\u00D7"]),
  );
  box.dataset.code = code || "";
  box.hidden = false;
  clearTimeout(errorTimer);
  errorTimer = setTimeout(hideError, ERROR_SHOW_MS);
}

function hideError() {
  $("error").hidden = true;
}

function reportError(err) {
  if (err instanceof ServerError) showError(err.code, err.message);
  else showError("client/error", String(err && err.message ? err.message : err));
}

// -- connection -------------------------------------------------------------------------------

app.conn.addEventListener("status", (event) => {
  const pill = document.querySelector("[data-testid=connection]");
  const labels = { connecting: "connecting…", open: "online", reconnecting: "reconnecting…", closed: "offline" };
  pill.dataset.state = event.detail;
  pill.textContent = labels[event.detail] || event.detail;
});

app.conn.addEventListener("open", (event) => {
  // After a reconnection, reattach to the room on screen from the last version we saw.
  if (event.detail.reconnected && app.room) {
    const message = { type: "resume", room: app.room };
    if (app.token) message.token = app.token;
    if (app.state) message.since = app.state.version;
    app.conn.sendWithRid(message);
  }
});

app.conn.addEventListener("message", (event) => {
  const message = event.detail;
  switch (message.type) {
    case "seat":
      onSeat(message);
      break;
    case "state":
      onState(message);
      break;
    case "thinking":
      onThinking(message);
      break;
    case "error":
      clearPending();
      showError(message.code, message.message);
      if (app.state) renderGame();
      break;
    default:
      break; // welcome, pong
  }
});

function onSeat(message) {
  const game = app.state && app.state.room === message.room ? app.state.game : undefined;
  seatStore.put(message.room, { token: message.token, seat: message.seat, ...(game ? { game } : {}) });
  if (message.room === app.room) {
    app.token = message.token;
    app.you = message.seat;
    app.mode = "play";
  }
}

function onState(message) {
  if (message.room !== app.room) return;
  const previous = app.state;
  if (previous && message.version < previous.version) return; // a late duplicate
  if (message.you !== undefined) app.you = message.you;
  if (app.you !== null && app.you !== undefined && app.token) {
    seatStore.put(message.room, { game: message.game, seat: app.you });
  }
  app.state = message;
  if (!previous || previous.version !== message.version) {
    app.ui = {};
    clearPending();
  }
  renderGame();
}

// An AI's progress on its move: shown under the status line until the next state.
function onThinking(message) {
  if (message.room !== app.room || !app.state || message.version !== app.state.version) return;
  const seconds = (message.time_ms / 1000).toFixed(1);
  const score = message.score > 0 ? `+${message.score}` : String(message.score);
  const line = message.pv.slice(0, 6).join(" ");
  const el = $("thinking");
  el.textContent = `AI thinking: depth ${message.depth}, score ${score}, ${seconds} s — ${line}`;
  el.hidden = false;
}

function clearPending() {
  app.pending = false;
  clearTimeout(app.pendingTimer);
}

// -- routing ----------------------------------------------------------------------------------

function route() {
  const params = new URLSearchParams(window.location.search);
  const room = params.get("room");
  const watch = params.get("watch");
  if (room) enterRoom(room, seatStore.get(room) ? "play" : "invite");
  else if (watch) enterRoom(watch, "watch");
  else showLobby();
}

function navigate(search) {
  const url = `${window.location.pathname}${search}`;
  if (`${window.location.pathname}${window.location.search}` !== url) {
    window.history.pushState(null, "", url);
  }
}

window.addEventListener("popstate", () => {
  leaveRoom(false);
  route();
});

// -- lobby ------------------------------------------------------------------------------------

async function fetchJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new ServerError("http/error", `${path} answered ${response.status}`);
  return response.json();
}

async function loadGames() {
  if (app.games.length) return;
  try {
    const games = await fetchJson("/api/games");
    app.games = games;
    app.gamesByName = new Map(games.map((g) => [g.name, g]));
  } catch (err) {
    reportError(err);
  }
}

async function showLobby() {
  app.room = null;
  document.title = "kibitz";
  $("game").hidden = true;
  $("lobby").hidden = false;
  await loadGames();
  renderGameCards();
  renderMyGames();
  refreshRooms();
  clearInterval(app.roomsTimer);
  app.roomsTimer = setInterval(refreshRooms, ROOMS_REFRESH_MS);
}

function renderGameCards() {
  const box = document.querySelector(".game-cards");
  if (!app.games.length) {
    box.replaceChildren(el("p", { class: "muted" }, ["Loading games…"]));
    return;
  }
  const wanted = app.selectedGame || prefs.get("game", app.games[0].name);
  app.selectedGame = app.gamesByName.has(wanted) ? wanted : app.games[0].name;
  box.replaceChildren(
    ...app.games.map((game) =>
      el(
        "button",
        {
          type: "button",
          class: ["game-card", game.name === app.selectedGame && "selected"],
          role: "radio",
          "aria-checked": game.name === app.selectedGame ? "true" : "false",
          testid: `game-${game.name}`,
          onclick: () => {
            app.selectedGame = game.name;
            prefs.set("game", game.name);
            renderGameCards();
          },
        },
        [
          el("span", { class: `game-icon icon-${game.name}`, "aria-hidden": "true" }),
          el("span", { class: "game-name" }, [game.title]),
          el("span", { class: "game-players muted" }, [`${game.players[0]} vs ${game.players[1]}`]),
        ],
      ),
    ),
  );
  renderCreateForm();
}

function renderCreateForm() {
  const game = app.gamesByName.get(app.selectedGame);
  const options = $("options");
  options.replaceChildren();
  for (const [name, spec] of Object.entries(game.options || {})) {
    let input;
    const id = `option-${name}`;
    if (spec.choices && spec.choices.length) {
      input = el(
        "select",
        { id, name },
        spec.choices.map((choice) =>
          el("option", { value: String(choice), selected: choice === spec.default }, [String(choice)]),
        ),
      );
    } else if (typeof spec.default === "boolean") {
      input = el("input", { id, name, type: "checkbox", checked: spec.default });
    } else if (typeof spec.default === "number") {
      input = el("input", { id, name, type: "number", value: String(spec.default), min: spec.min, max: spec.max, step: "1" });
    } else {
      input = el("input", { id, name, value: String(spec.default) });
    }
    input.setAttribute("data-testid", id);
    input.dataset.option = name;
    options.append(
      el("label", { class: ["field", "option", typeof spec.default === "boolean" && "check"], for: id }, [
        el("span", {}, [name.replace(/_/g, " ")]),
        input,
        spec.help ? el("small", { class: "muted" }, [spec.help]) : null,
      ]),
    );
  }
  const opponent = $("opponent");
  const chosenOpponent = opponent.value || prefs.get("opponent", "ai:3");
  opponent.replaceChildren(
    el("option", { value: "human" }, ["A friend (invite link)"]),
    ...[...Array(AI_LEVELS).keys()].map((i) =>
      el("option", { value: `ai:${i + 1}` }, [
        `Computer, level ${i + 1}${i === 0 ? " (easiest)" : i === AI_LEVELS - 1 ? " (strongest)" : ""}`,
      ]),
    ),
  );
  opponent.value = chosenOpponent;
  const seat = $("seat-choice");
  const chosenSeat = seat.value || "0";
  seat.replaceChildren(
    el("option", { value: "0" }, [`${game.players[0]} (moves first)`]),
    el("option", { value: "1" }, [game.players[1]]),
    el("option", { value: "random" }, ["Random"]),
  );
  seat.value = chosenSeat;
  $("name").value = $("name").value || prefs.get("name", "");
}

function readOptions() {
  const game = app.gamesByName.get(app.selectedGame);
  const options = {};
  for (const input of $("options").querySelectorAll("[data-option]")) {
    const name = input.dataset.option;
    const spec = game.options[name];
    if (input.type === "checkbox") options[name] = input.checked;
    else if (typeof spec.default === "number") options[name] = Number(input.value);
    else options[name] = input.value;
  }
  return options;
}

function playerName() {
  const typed = $("game").hidden ? $("name").value : $("join-name").value;
  const name = typed.trim() || prefs.get("name", "");
  return name ? name.slice(0, 40) : undefined;
}

async function createGame(event) {
  event.preventDefault();
  if (!app.selectedGame) return;
  const button = document.querySelector("[data-testid=create]");
  const seat = $("seat-choice").value;
  const name = playerName();
  prefs.set("opponent", $("opponent").value);
  if (name) prefs.set("name", name);
  const message = {
    type: "create",
    game: app.selectedGame,
    options: readOptions(),
    opponent: $("opponent").value,
    seat: seat === "random" ? "random" : Number(seat),
  };
  if (name) message.name = name;
  const position = $("start-position").value.trim();
  if (position) message.position = position;
  button.disabled = true;
  try {
    const reply = await app.conn.request(message);
    seatStore.put(reply.room, { token: reply.token, seat: reply.seat, game: app.selectedGame });
    openRoom(reply.room, "play", `?room=${encodeURIComponent(reply.room)}`);
  } catch (err) {
    reportError(err);
  } finally {
    button.disabled = false;
  }
}

/** A room id from what the user typed: a bare id or an invite/watch link. */
function parseRoomInput(text) {
  const value = text.trim();
  if (!value) return null;
  try {
    const url = new URL(value, window.location.href);
    const id = url.searchParams.get("room") || url.searchParams.get("watch");
    if (id) return id;
  } catch {
    // not a URL: a bare id
  }
  return value.replace(/^.*[?&](room|watch)=/, "").replace(/[&#].*$/, "");
}

async function joinByInput(event) {
  event.preventDefault();
  const room = parseRoomInput($("join-room").value);
  if (!room) return;
  await joinRoom(room);
}

async function joinRoom(room, seat = undefined) {
  const message = { type: "join", room };
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

function watchByInput() {
  const room = parseRoomInput($("join-room").value);
  if (room) openRoom(room, "watch", `?watch=${encodeURIComponent(room)}`);
}

async function refreshRooms() {
  if ($("lobby").hidden) return;
  let rooms;
  try {
    rooms = (await fetchJson("/api/rooms")).rooms || [];
  } catch {
    return; // the list is a convenience; the next refresh may work
  }
  const list = $("rooms");
  $("rooms-count").textContent = rooms.length ? `(${rooms.length})` : "";
  if (!rooms.length) {
    list.replaceChildren(el("li", { class: "empty muted" }, ["No live games right now."]));
    return;
  }
  list.replaceChildren(
    ...rooms.map((room) => {
      const game = app.gamesByName.get(room.game);
      const names = (room.seats || []).map((seat, i) => seatLabel(seat, game ? game.players[i] : `Seat ${i + 1}`));
      const free = room.status === "waiting" && (room.seats || []).some((seat) => !seat.taken);
      return el("li", { class: "room-item", testid: `room-${room.room}`, dataset: { room: room.room } }, [
        el("span", { class: `game-icon small icon-${room.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [game ? game.title : room.game]),
          el("span", { class: "muted small" }, [`${names.join(" vs ")} · ${room.moves || 0} moves`]),
        ]),
        el("span", { class: `badge ${room.status}` }, [room.status]),
        free
          ? el("button", { class: "btn small primary", type: "button", testid: `join-${room.room}`, onclick: () => joinRoom(room.room) }, ["Join"])
          : null,
        el(
          "button",
          {
            class: "btn small",
            type: "button",
            testid: `watch-${room.room}`,
            onclick: () => openRoom(room.room, "watch", `?watch=${encodeURIComponent(room.room)}`),
          },
          ["Watch"],
        ),
      ]);
    }),
  );
}

function seatLabel(seat, player) {
  if (!seat) return player;
  if (seat.kind === "ai") return seat.name || `AI level ${seat.level}`;
  if (!seat.taken) return `${player}: open`;
  return seat.name || player;
}

function renderMyGames() {
  const entries = Object.entries(seatStore.all()).sort((a, b) => b[1].saved - a[1].saved);
  $("mine-panel").hidden = entries.length === 0;
  $("my-games").replaceChildren(
    ...entries.slice(0, 8).map(([room, entry]) => {
      const game = app.gamesByName.get(entry.game);
      return el("li", { class: "room-item", testid: `mine-${room}` }, [
        el("span", { class: `game-icon small icon-${entry.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [game ? game.title : entry.game || "Game"]),
          el("span", { class: "muted small" }, [`room ${room}${game ? ` · you play ${game.players[entry.seat]}` : ""}`]),
        ]),
        el(
          "button",
          { class: "btn small", type: "button", testid: `resume-${room}`, onclick: () => openRoom(room, "play", `?room=${encodeURIComponent(room)}`) },
          ["Resume"],
        ),
      ]);
    }),
  );
}

// -- game screen ------------------------------------------------------------------------------

function openRoom(room, mode, search) {
  navigate(search);
  enterRoom(room, mode);
}

async function enterRoom(room, mode) {
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
  $("game").hidden = false;
  renderGame();
  loadGames().then(() => app.state && renderGame());
  const forThisRoom = (message) => message.type === "state" && message.room === room;
  try {
    if (app.token) {
      await app.conn.request({ type: "resume", room, token: app.token }, { match: forThisRoom });
    } else {
      await app.conn.request({ type: "watch", room }, { match: forThisRoom });
    }
  } catch (err) {
    if (app.room !== room) return;
    if (err.code === "auth/token") {
      // The stored seat is gone (an expired room): follow the room as a spectator instead.
      seatStore.drop(room);
      app.token = null;
      app.you = null;
      app.mode = "invite";
      try {
        await app.conn.request({ type: "watch", room }, { match: forThisRoom });
        return;
      } catch (again) {
        err = again;
      }
    }
    reportError(err);
    if (err.code === "room/unknown") {
      seatStore.drop(room);
      navigate("");
      showLobby();
    }
  }
}

function leaveRoom(toLobby = true) {
  if (app.room) app.conn.send({ type: "leave", room: app.room });
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

async function boardFor(game) {
  if (!GAMES_WITH_BOARDS.includes(game)) return null;
  if (!app.boards.has(game)) app.boards.set(game, await import(`./boards/${game}.js`));
  return app.boards.get(game);
}

function renderGame() {
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
    result.replaceChildren(el("strong", {}, [resultText(state)]));
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

function playMove(move) {
  const state = app.state;
  if (!state || app.pending || !app.token || !isMyTurn(state)) return;
  app.pending = true;
  clearTimeout(app.pendingTimer);
  app.pendingTimer = setTimeout(() => {
    app.pending = false;
    if (app.state) renderGame();
  }, MOVE_PENDING_MS);
  app.conn.sendWithRid({ type: "move", room: state.room, token: app.token, move, version: state.version });
  renderGame();
}

async function resign() {
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
  app.conn.sendWithRid({ type: "resign", room: state.room, token: app.token });
}

// -- dialog -----------------------------------------------------------------------------------

let closeDialog = null;

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

// -- wiring -----------------------------------------------------------------------------------

function copyField(id, button) {
  const input = $(id);
  const done = () => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => (button.textContent = label), 1400);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(input.value).then(done, () => {
      input.select();
      document.execCommand("copy");
      done();
    });
  } else {
    input.select();
    document.execCommand("copy");
    done();
  }
}

function wire() {
  $("create-form").addEventListener("submit", createGame);
  $("join-form").addEventListener("submit", joinByInput);
  $("watch-btn").addEventListener("click", watchByInput);
  $("leave-btn").addEventListener("click", () => leaveRoom(true));
  $("resign-btn").addEventListener("click", resign);
  $("pass-btn").addEventListener("click", () => playMove("pass"));
  $("rematch-btn").addEventListener("click", () => {
    if (app.state) app.selectedGame = app.state.game;
    leaveRoom(true);
  });
  $("join-seat").addEventListener("click", () => {
    const name = $("join-name").value.trim();
    if (name) prefs.set("name", name);
    joinRoom(app.room, Number($("join-seat").dataset.seat));
  });
  $("dialog-cancel").addEventListener("click", () => closeDialog && closeDialog(null));
  $("dialog").addEventListener("click", (event) => {
    if (event.target === $("dialog") && closeDialog) closeDialog(null);
  });
  $("error").addEventListener("click", (event) => {
    if (event.target.classList.contains("close")) hideError();
  });
  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", () => copyField(button.dataset.copy, button));
  }
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !$("lobby").hidden) refreshRooms();
  });
}

wire();
app.conn.connect();
route();

// For debugging in the console and for end-to-end tests: read-only peeks at the client.
window.kibitz = {
  get state() {
    return app.state;
  },
  get you() {
    return app.you;
  },
  get connection() {
    return app.conn.status;
  },
  /** Drop the socket as a network failure would (tests the reconnection path). */
  dropConnection() {
    if (app.conn.socket) app.conn.socket.close();
  },
};
