// The lobby: pick a game and its options, create a room, join or watch one by id or
// link, the live games and "Your games" (seats kept in this browser).

import { el } from "./boards/common.js";
import { timeControlText } from "./clock.js";
import { reportError } from "./errors.js";
import { joinRoom, openRoom } from "./game.js";
import { ServerError } from "./protocol.js";
import { $, app } from "./state.js";
import { renderMyHistory } from "./mygames.js";
import { chosenClock, renderSeeks, subscribeLobby } from "./seeks.js";
import { player, prefs, seatStore } from "./storage.js";

const AI_LEVELS = 8;
const ROOMS_REFRESH_MS = 4000;

export async function fetchJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  if (!response.ok) {
    let body = null;
    try {
      body = await response.json();
    } catch {
      // not JSON: the status says enough
    }
    if (body && body.code) throw new ServerError(body.code, body.message);
    throw new ServerError("http/error", `${path} answered ${response.status}`);
  }
  return response.json();
}

/**
 * "about 1400" for a level whose strength was measured on an absolute scale (chess: the
 * catalogue's `levels`, from `kibitz calibrate`), else "". Ratings are rounded to 50.
 */
export function levelStrengthText(gameName, level) {
  const game = app.gamesByName.get(gameName);
  const entry = game && Array.isArray(game.levels) ? game.levels.find((l) => l.level === level) : null;
  if (!entry || entry.scale !== "absolute" || typeof entry.elo !== "number") return "";
  return `about ${Math.round(entry.elo / 50) * 50}`;
}

/** An AI seat's label: its name from the server, with the level's measured strength. */
export function aiSeatText(gameName, seat) {
  const name = seat.name || `AI level ${seat.level}`;
  const strength = levelStrengthText(gameName, seat.level);
  return strength ? `${name}, ${strength}` : name;
}

export async function loadGames() {
  if (app.games.length) return;
  try {
    const games = await fetchJson("/api/games");
    app.games = games;
    app.gamesByName = new Map(games.map((g) => [g.name, g]));
  } catch (err) {
    reportError(err);
  }
}

export async function showLobby() {
  app.room = null;
  document.title = "kibitz";
  $("game").hidden = true;
  $("replay").hidden = true;
  $("lobby").hidden = false;
  await loadGames();
  renderGameCards();
  renderSeeks();
  subscribeLobby(true);
  renderMyGames();
  renderMyHistory();
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
    ...[...Array(AI_LEVELS).keys()].map((i) => {
      const strength = levelStrengthText(game.name, i + 1);
      return el("option", { value: `ai:${i + 1}` }, [
        `Computer, level ${i + 1}${strength ? `, ${strength}` : ""}` +
          `${i === 0 ? " (easiest)" : i === AI_LEVELS - 1 ? " (strongest)" : ""}`,
      ]);
    }),
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
  if (!$("create-form").dataset.timeRestored) {
    $("create-form").dataset.timeRestored = "1";
    $("time-control").value = prefs.get("time", "none");
    if (!$("time-control").value) $("time-control").value = "none";
  }
}

export function readOptions() {
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

export function playerName() {
  const typed = $("game").hidden ? $("name").value : $("join-name").value;
  const name = typed.trim() || prefs.get("name", "");
  return name ? name.slice(0, 40) : undefined;
}

export async function createGame(event) {
  event.preventDefault();
  if (!app.selectedGame) return;
  const button = document.querySelector("[data-testid=create]");
  const seat = $("seat-choice").value;
  const name = playerName();
  prefs.set("opponent", $("opponent").value);
  prefs.set("time", $("time-control").value);
  if (name) prefs.set("name", name);
  const message = {
    type: "create",
    game: app.selectedGame,
    options: readOptions(),
    opponent: $("opponent").value,
    seat: seat === "random" ? "random" : Number(seat),
    player_key: player.key(),
  };
  if (name) message.name = name;
  const clock = chosenClock();
  if (clock) message.clock = clock;
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

export async function joinByInput(event) {
  event.preventDefault();
  const room = parseRoomInput($("join-room").value);
  if (!room) return;
  await joinRoom(room);
}

export function watchByInput() {
  const room = parseRoomInput($("join-room").value);
  if (room) openRoom(room, "watch", `?watch=${encodeURIComponent(room)}`);
}

export async function refreshRooms() {
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
      const names = (room.seats || []).map((seat, i) => seatLabel(seat, game ? game.players[i] : `Seat ${i + 1}`, room.game));
      const free = room.status === "waiting" && (room.seats || []).some((seat) => !seat.taken);
      return el("li", { class: "room-item", testid: `room-${room.room}`, dataset: { room: room.room } }, [
        el("span", { class: `game-icon small icon-${room.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [game ? game.title : room.game]),
          el("span", { class: "muted small" }, [roomFacts(room, names)]),
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

/** "Ann vs Bob · 3+2 · 12 moves · 4 watching" */
function roomFacts(room, names) {
  const parts = [names.join(" vs ")];
  if (room.clock !== undefined) parts.push(timeControlText(room.clock));
  parts.push(`${room.moves || 0} moves`);
  if (room.spectators) parts.push(`${room.spectators} watching`);
  return parts.join(" · ");
}

function seatLabel(seat, player, gameName) {
  if (!seat) return player;
  if (seat.kind === "ai") return aiSeatText(gameName, seat);
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
