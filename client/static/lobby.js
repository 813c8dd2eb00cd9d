// The lobby: pick a game and its options, create a room, join or watch one by id or
// link, the live games and "Seats to resume" (seats kept in this browser). Its panels are
// the open challenges (seeks.js), "My games" (mygames.js) and the bots online (bots.js).
// It registers itself with the router as the screen "lobby".

import { accountKnown, currentAccount, openLogin } from "./account.js";
import { el } from "./boards/common.js";
import { renderBots, showBots } from "./bots.js";
import { timeControlText } from "./clock.js";
import { reportError } from "./errors.js";
import { renderMyHistory } from "./mygames.js";
import { joinRoom, openRoom, registerScreen } from "./router.js";
import { has, t } from "./i18n.js";
import { chosenClock, renderSeekChoice, renderSeeks, stopPooling, subscribeLobby } from "./seeks.js";
import { player, prefs, seatStore } from "./storage.js";
import { clearRoomId, selectGame, store } from "./store.js";
import { $, aiSeatText, botBadge, fetchJson, gameTitle, levelText, loadGames, playerName, ratingText, readOptions, sideName } from "./util.js";

const AI_LEVELS = 8;
const ROOMS_REFRESH_MS = 4000;
const REFRESH_DEBOUNCE_MS = 300;
const RESUME_SHOWN = 8;

let roomsTimer = null; // reads the live games again while the lobby shows
let refreshTimer = null; // a pushed change of the live games, debounced

async function showLobby() {
  clearRoomId();
  document.title = t("lobby.title");
  await loadGames();
  renderGameCards();
  renderRatedChoice();
  renderSeeks();
  showBots(true);
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
  showBots(false);
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
      t("lobby.rated.needAccount"),
      el("button", { type: "button", class: "link-button", testid: "rated-login", onclick: openLogin }, [t("lobby.rated.login")]),
      t("lobby.rated.orSignUp"),
    );
  } else {
    hint.append(account ? t("lobby.rated.account") : t("lobby.rated.guest"), t("lobby.rated.range"));
  }
}

registerScreen("lobby", { show: showLobby, hide: hideLobby });

/** A "lobby" message: when the live games changed, read the list again (one source for the list, paged). */
export function onLiveGames(message) {
  if (message.games === undefined) return;
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshRooms, REFRESH_DEBOUNCE_MS);
}

/**
 * The game cards: a WAI-ARIA radio group. The chosen card is the group's one tab stop
 * (roving tabindex); the arrow keys, Home and End move the choice and the focus. Next to
 * each card, a "How to play" button opens the rules panel (rules.js, any [data-rules]).
 */
function renderGameCards() {
  const box = document.querySelector(".game-cards");
  if (!store.games.length) {
    box.replaceChildren(el("p", { class: "muted" }, [t("lobby.loading")]));
    return;
  }
  const wanted = store.selectedGame || prefs.get("game", store.games[0].name);
  selectGame(store.gamesByName.has(wanted) ? wanted : store.games[0].name);
  box.replaceChildren(
    ...store.games.map((game) => {
      const chosen = game.name === store.selectedGame;
      const title = gameTitle(game.name);
      return el("div", { class: "game-card-wrap", style: "display: grid; gap: 0.2rem; align-content: start" }, [
        el(
          "button",
          {
            type: "button",
            class: ["game-card", chosen && "selected"],
            role: "radio",
            "aria-checked": chosen ? "true" : "false",
            tabindex: chosen ? "0" : "-1",
            testid: `game-${game.name}`,
            dataset: { game: game.name },
            onclick: () => chooseGame(game.name, false),
            onkeydown: onCardKey,
          },
          [
            el("span", { class: `game-icon icon-${game.name}`, "aria-hidden": "true" }),
            el("span", { class: "game-name" }, [title]),
            el("span", { class: "game-players muted" }, [
              t("common.vs", { a: sideName(game.name, 0), b: sideName(game.name, 1) }),
            ]),
          ],
        ),
        el(
          "button",
          {
            type: "button",
            class: "link-button small game-rules",
            testid: `rules-${game.name}`,
            dataset: { rules: game.name },
            "aria-label": t("lobby.rulesOf", { game: title }),
          },
          [t("lobby.rules")],
        ),
      ]);
    }),
  );
  renderCreateForm();
}

/** Choose game `name`: the cards show it (in place: the focus stays), then its form. */
function chooseGame(name, focus) {
  selectGame(name);
  prefs.set("game", name);
  for (const card of document.querySelectorAll(".game-cards [role=radio]")) {
    const chosen = card.dataset.game === name;
    card.classList.toggle("selected", chosen);
    card.setAttribute("aria-checked", chosen ? "true" : "false");
    card.tabIndex = chosen ? 0 : -1;
    if (chosen && focus) card.focus();
  }
  renderCreateForm();
}

const CARD_STEPS = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };

/** Arrow keys, Home and End in the radio group: the next, previous, first or last game (wrapping). */
function onCardKey(event) {
  if (event.altKey || event.ctrlKey || event.metaKey) return;
  const names = store.games.map((g) => g.name);
  const at = names.indexOf(event.currentTarget.dataset.game);
  let next;
  if (event.key in CARD_STEPS) next = (at + CARD_STEPS[event.key] + names.length) % names.length;
  else if (event.key === "Home") next = 0;
  else if (event.key === "End") next = names.length - 1;
  else return;
  event.preventDefault();
  chooseGame(names[next], true);
}

/** An option's name, help and choice in the page's language (the server's words when the catalogue has none). */
function optionWords(gameName, name, spec) {
  const label = has(`lobby.option.${name}`) ? t(`lobby.option.${name}`) : name.replace(/_/g, " ");
  const helpKey = `lobby.optionHelp.${gameName}.${name}`;
  const help = has(helpKey) ? t(helpKey) : spec.help;
  return { label, help };
}

function choiceText(name, choice) {
  const key = `lobby.choice.${name}.${choice}`;
  return has(key) ? t(key) : String(choice);
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
          el("option", { value: String(choice), selected: choice === spec.default }, [choiceText(name, choice)]),
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
    const words = optionWords(game.name, name, spec);
    options.append(
      el("label", { class: ["field", "option", typeof spec.default === "boolean" && "check"], for: id }, [
        el("span", {}, [words.label]),
        input,
        words.help ? el("small", { class: "muted" }, [words.help]) : null,
      ]),
    );
  }
  const opponent = $("opponent");
  const chosenOpponent = opponent.value || prefs.get("opponent", "ai:3");
  opponent.replaceChildren(
    el("option", { value: "human" }, [t("lobby.opponent.human")]),
    ...[...Array(AI_LEVELS).keys()].map((i) => el("option", { value: `ai:${i + 1}` }, [levelText(game.name, i + 1)])),
  );
  opponent.value = chosenOpponent;
  opponent.title = t("lobby.levels.title");
  renderLevelsHelp(game.name);
  renderSeekChoice();
  renderBots(); // their ratings in the chosen game
  const seat = $("seat-choice");
  const chosenSeat = seat.value || "0";
  seat.replaceChildren(
    el("option", { value: "0" }, [t("lobby.seat.first", { side: sideName(game.name, 0) })]),
    el("option", { value: "1" }, [sideName(game.name, 1)]),
    el("option", { value: "random" }, [t("lobby.seat.random")]),
  );
  seat.value = chosenSeat;
  $("name").value = $("name").value || prefs.get("name", "");
  if (!$("create-form").dataset.timeRestored) {
    $("create-form").dataset.timeRestored = "1";
    $("time-control").value = prefs.get("time", "none");
    if (!$("time-control").value) $("time-control").value = "none";
  }
}

/**
 * "What do the levels mean?" under the opponent list: opens the rules panel of the chosen
 * game at its levels (the scale of the ratings the list shows).
 */
function renderLevelsHelp(gameName) {
  const opponent = $("opponent");
  let help = $("levels-help");
  if (!help) {
    help = el("button", { type: "button", id: "levels-help", class: "link-button small", testid: "levels-help" }, [
      t("lobby.levels.help"),
    ]);
    // Under the row of the opponent list (a button inside its <label> would join the list's name).
    const row = opponent.closest(".field-row") || opponent.closest(".field") || opponent;
    row.after(el("p", { class: "small levels-help", style: "margin: 0 0 0.6rem" }, [help]));
  }
  help.dataset.rules = gameName;
  help.dataset.rulesSection = "levels";
  help.title = t("lobby.levels.title");
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
    list.replaceChildren(el("li", { class: "empty muted" }, [t("lobby.rooms.none")]));
    return;
  }
  list.replaceChildren(
    ...rooms.map((room) => {
      const game = store.gamesByName.get(room.game);
      const names = (room.seats || []).map((seat, i) => seatLabel(seat, sideName(room.game, i), room.game));
      const free = room.status === "waiting" && (room.seats || []).some((seat) => !seat.taken);
      return el("li", { class: "room-item", testid: `room-${room.room}`, dataset: { room: room.room } }, [
        el("span", { class: `game-icon small icon-${room.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [gameTitle(room.game)]),
          el("span", { class: "muted small" }, roomFacts(room, names)),
        ]),
        room.rated ? el("span", { class: "badge rated", title: t("lobby.rooms.ratedTitle") }, [t("lobby.rooms.rated")]) : null,
        el("span", { class: `badge ${room.status}` }, [has(`lobby.status.${room.status}`) ? t(`lobby.status.${room.status}`) : room.status]),
        free
          ? el("button", { class: "btn small primary", type: "button", testid: `join-${room.room}`, onclick: () => joinRoom(room.room) }, [t("lobby.join")])
          : null,
        el(
          "button",
          {
            class: "btn small",
            type: "button",
            testid: `watch-${room.room}`,
            onclick: () => openRoom(room.room, "watch"),
          },
          [t("lobby.watch")],
        ),
      ]);
    }),
  );
}

// Games whose "move" counts both sides' turns (a ply is half a move): their rooms say "move 12".
const FULL_MOVE_GAMES = new Set(["chess", "draughts"]);

/**
 * "Ann vs Bob · 3+2 · move 7 · 4 watching" ("5 moves played" in games where a ply is a move):
 * the players as one text, a BOT badge after it for each bot seat, then the other facts.
 * Each is one whole phrase of the catalogue (the " · " before the facts is drawn by CSS).
 */
function roomFacts(room, names) {
  const parts = [];
  if (room.clock !== undefined) parts.push(timeControlText(room.clock));
  const plies = room.moves || 0;
  parts.push(
    FULL_MOVE_GAMES.has(room.game)
      ? t("lobby.rooms.moveNumber", { n: Math.floor(plies / 2) + 1 })
      : t("lobby.rooms.plies", { n: plies }),
  );
  if (room.spectators) parts.push(t("lobby.rooms.watching", { n: room.spectators }));
  const players = names.length === 2 ? t("common.vs", { a: names[0], b: names[1] }) : names.join(", ");
  const bots = (room.seats || []).filter((seat) => seat && seat.kind !== "ai" && seat.taken && seat.bot);
  return [players, ...bots.map(() => botBadge(true)), el("span", { class: "room-facts" }, [parts.join(" · ")])];
}

/** A seat of a live game: the computer's level, "open", or the player and their rating. */
function seatLabel(seat, player, gameName) {
  if (!seat) return player;
  if (seat.kind === "ai") return aiSeatText(gameName, seat);
  if (!seat.taken) return t("lobby.rooms.open", { side: player });
  const rating = ratingText(seat.rating, seat.provisional);
  return `${seat.account || seat.name || player}${rating ? ` ${rating}` : ""}`;
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
          el("strong", {}, [entry.game ? gameTitle(entry.game) : t("common.game.unknown")]),
          el("span", { class: "muted small" }, [
            game && entry.seat !== undefined
              ? t("lobby.mine.youPlay", { room, side: sideName(entry.game, entry.seat) })
              : t("lobby.mine.room", { room }),
          ]),
        ]),
        el(
          "button",
          { class: "btn small", type: "button", testid: `resume-${room}`, onclick: () => openRoom(room, "play") },
          [t("lobby.resume")],
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
  $("opponent").addEventListener("change", renderSeekChoice);
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
