// The lobby: pick a game and its options, create a room, join or watch one by id or
// link, the live games and "Seats to resume" (seats kept in this browser). Its panels are
// the open challenges (seeks.js) and "My games" (mygames.js). It registers itself with
// the router as the screen "lobby".

import { accountKnown, currentAccount, openLogin } from "./account.js";
import { el } from "./boards/common.js";
import { timeControlText } from "./clock.js";
import { reportError } from "./errors.js";
import { renderMyHistory } from "./mygames.js";
import { joinRoom, openRoom, registerScreen } from "./router.js";
import { chosenClock, renderSeeks, stopPooling, subscribeLobby } from "./seeks.js";
import { player, prefs, seatStore } from "./storage.js";
import { clearRoomId, selectGame, store } from "./store.js";
import { $, aiSeatText, fetchJson, levelStrengthText, loadGames, playerName, ratingText, readOptions } from "./util.js";

const AI_LEVELS = 8;
const ROOMS_REFRESH_MS = 4000;
const REFRESH_DEBOUNCE_MS = 300;
const RESUME_SHOWN = 8;

let roomsTimer = null; // reads the live games again while the lobby shows
let refreshTimer = null; // a pushed change of the live games, debounced

async function showLobby() {
  clearRoomId();
  document.title = "kibitz";
  await loadGames();
  renderGameCards();
  renderRatedChoice();
  renderSeeks();
  subscribeLobby(true);
  renderMyGames();
  renderMyHistory();
  refreshRooms();
  clearInterval(roomsTimer);
  roomsTimer = setInterval(refreshRooms, ROOMS_REFRESH_MS);
}

/** Another screen shows: stop reading the live games and following the lobby. */
function hideLobby() {
  clearInterval(roomsTimer);
  subscribeLobby(false);
  stopPooling();
}

/** Rated needs an account: the choice is off, with a way to log in, for a guest. */
function renderRatedChoice() {
  const box = $("rated");
  const hint = $("rated-hint");
  const account = currentAccount();
  box.disabled = !account;
  if (!account) box.checked = false;
  hint.replaceChildren();
  if (!account && accountKnown()) {
    hint.append(
      "Rated games need an account: ",
      el("button", { type: "button", class: "link-button", testid: "rated-login", onclick: openLogin }, ["log in"]),
      " or sign up (top right). Casual games change no rating.",
    );
  } else {
    hint.append(
      account ? "Rated games change both players' ratings; casual ones change nothing." : "Casual games change no rating.",
      " The rating range applies to challenges posted in the lobby.",
    );
  }
}

registerScreen("lobby", { show: showLobby, hide: hideLobby });

/** A "lobby" message: when the live games changed, read the list again (one source for the list, paged). */
export function onLiveGames(message) {
  if (message.games === undefined) return;
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshRooms, REFRESH_DEBOUNCE_MS);
}

function renderGameCards() {
  const box = document.querySelector(".game-cards");
  if (!store.games.length) {
    box.replaceChildren(el("p", { class: "muted" }, ["Loading games…"]));
    return;
  }
  const wanted = store.selectedGame || prefs.get("game", store.games[0].name);
  selectGame(store.gamesByName.has(wanted) ? wanted : store.games[0].name);
  box.replaceChildren(
    ...store.games.map((game) =>
      el(
        "button",
        {
          type: "button",
          class: ["game-card", game.name === store.selectedGame && "selected"],
          role: "radio",
          "aria-checked": game.name === store.selectedGame ? "true" : "false",
          testid: `game-${game.name}`,
          onclick: () => {
            selectGame(game.name);
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
  const game = store.gamesByName.get(store.selectedGame);
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

async function createGame(event) {
  event.preventDefault();
  if (!store.selectedGame) return;
  const button = document.querySelector("[data-testid=create]");
  const seat = $("seat-choice").value;
  const name = playerName();
  prefs.set("opponent", $("opponent").value);
  prefs.set("time", $("time-control").value);
  if (name) prefs.set("name", name);
  const message = {
    type: "create",
    game: store.selectedGame,
    options: readOptions(),
    opponent: $("opponent").value,
    seat: seat === "random" ? "random" : Number(seat),
    player_key: player.key(),
  };
  if (name) message.name = name;
  if ($("rated").checked) message.rated = true;
  const clock = chosenClock();
  if (clock) message.clock = clock;
  const position = $("start-position").value.trim();
  if (position) message.position = position;
  button.disabled = true;
  try {
    const reply = await store.conn.request(message);
    seatStore.put(reply.room, { token: reply.token, seat: reply.seat, game: store.selectedGame });
    openRoom(reply.room, "play");
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

function watchByInput() {
  const room = parseRoomInput($("join-room").value);
  if (room) openRoom(room, "watch");
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
      const game = store.gamesByName.get(room.game);
      const names = (room.seats || []).map((seat, i) => seatLabel(seat, game ? game.players[i] : `Seat ${i + 1}`, room.game));
      const free = room.status === "waiting" && (room.seats || []).some((seat) => !seat.taken);
      return el("li", { class: "room-item", testid: `room-${room.room}`, dataset: { room: room.room } }, [
        el("span", { class: `game-icon small icon-${room.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [game ? game.title : room.game]),
          el("span", { class: "muted small" }, [roomFacts(room, names)]),
        ]),
        room.rated ? el("span", { class: "badge rated", title: "a rated game" }, ["rated"]) : null,
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
            onclick: () => openRoom(room.room, "watch"),
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
  const rating = ratingText(seat.rating, seat.provisional);
  return `${seat.account || seat.name || player}${seat.bot ? " (BOT)" : ""}${rating ? ` ${rating}` : ""}`;
}

/** The seats kept in this browser in games not known to be over, newest first. */
function seatsToResume() {
  return Object.entries(seatStore.all())
    .filter(([, entry]) => !entry.over)
    .sort((a, b) => b[1].saved - a[1].saved);
}

/**
 * "Seats to resume": only unfinished games. A seat is marked over when the game screen
 * saw the end; the ones shown are checked with the server once (a game may have ended
 * while this page was closed: it is marked over; a room gone for good is dropped).
 */
function renderMyGames(check = true) {
  const entries = seatsToResume();
  $("mine-panel").hidden = entries.length === 0;
  const shown = entries.slice(0, RESUME_SHOWN);
  $("my-games").replaceChildren(
    ...shown.map(([room, entry]) => {
      const game = store.gamesByName.get(entry.game);
      return el("li", { class: "room-item", testid: `mine-${room}` }, [
        el("span", { class: `game-icon small icon-${entry.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [game ? game.title : entry.game || "Game"]),
          el("span", { class: "muted small" }, [`room ${room}${game ? ` · you play ${game.players[entry.seat]}` : ""}`]),
        ]),
        el(
          "button",
          { class: "btn small", type: "button", testid: `resume-${room}`, onclick: () => openRoom(room, "play") },
          ["Resume"],
        ),
      ]);
    }),
  );
  if (check) checkSeats(shown.map(([room]) => room));
}

/** Ask the server about each shown seat's game (bounded: the shown ones); redraw if any ended. */
async function checkSeats(rooms) {
  const answers = await Promise.all(
    rooms.map(async (room) => {
      try {
        const record = await fetchJson(`/api/games/${encodeURIComponent(room)}`);
        return [room, record.status === "over" ? "over" : "on"];
      } catch (err) {
        return [room, err && err.code === "game/not_found" ? "gone" : "unknown"];
      }
    }),
  );
  let changed = false;
  for (const [room, verdict] of answers) {
    if (verdict === "over") seatStore.put(room, { over: true });
    if (verdict === "gone") seatStore.drop(room);
    changed = changed || verdict === "over" || verdict === "gone";
  }
  if (changed && !$("lobby").hidden) renderMyGames(false);
}

export function wireLobby() {
  $("create-form").addEventListener("submit", createGame);
  window.addEventListener("kibitz:account", () => {
    renderRatedChoice();
    if (!$("lobby").hidden) renderMyHistory();
  });
  $("join-form").addEventListener("submit", joinByInput);
  $("watch-btn").addEventListener("click", watchByInput);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !$("lobby").hidden) refreshRooms();
  });
}
