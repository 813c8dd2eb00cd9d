// Open challenges ("seeks") in the lobby: post one with the game, options, time control
// and colour chosen in the create form, accept someone else's, cancel your own.
//
// The lobby subscribes with {"type": "lobby", "subscribe": true} while it is on screen;
// the server then pushes {"type": "lobby", "seeks": [...], "games": [...]} when they
// change. A seek accepted by someone seats both players at once: the acceptor gets the
// `seat` reply, the creator a `seat` carrying "seek" (game.js opens the room for both).
// A panel of the lobby screen (lobby.js); the live games of the same message are lobby.js's.

import { currentAccount } from "./account.js";
import { el } from "./boards/common.js";
import { TIME_CONTROLS, timeControlText } from "./clock.js";
import { reportError } from "./errors.js";
import { has, t } from "./i18n.js";
import { openRoom } from "./router.js";
import { player, prefs, seatStore } from "./storage.js";
import { store } from "./store.js";
import { $, botBadge, gameTitle, playerName, ratingText, readOptions, sideName } from "./util.js";

const lobby = {
  subscribed: false,
  seeks: [],
  mine: new Set(), // ids of the seeks this page posted
  me: null, // this browser's public player id
  pool: null, // the quick pairing this page waits in: {game, clock, rated, since}, or null
};

player.id().then((id) => (lobby.me = id), () => {});

/** Follow the lobby's seeks and games (true) or stop (false). */
export function subscribeLobby(on) {
  if (lobby.subscribed === on) return;
  lobby.subscribed = on;
  store.conn.request({ type: "lobby", subscribe: on }).catch((err) => {
    // A server without seeks: the lobby still lists the live games from /api/rooms.
    if (err.code !== "message/unknown_type") reportError(err);
  });
}

/** A "lobby" message: its seeks, when it has them (its live games are lobby.js's). */
export function onSeeks(message) {
  if (Array.isArray(message.seeks)) {
    lobby.seeks = message.seeks;
    renderSeeks();
  }
}

function isMine(seek) {
  const account = currentAccount();
  if (account && seek.player === account.player) return true;
  return lobby.mine.has(seek.id) || (lobby.me !== null && seek.player === lobby.me);
}

/** "Ann 1512?" (with the BOT badge), another seeker as the list shows them. */
function seeker(seek) {
  const rating = ratingText(seek.rating, seek.provisional);
  return el("span", {}, [
    seek.account || seek.name || t("common.anonymous"),
    botBadge(seek.bot),
    rating ? el("span", { class: "rating", testid: `seek-rating-${seek.id}` }, [` ${rating}`]) : null,
  ]);
}

/** The words `text` with the node `node` where `{name}` is: [before, node, after]. */
function withNode(text, node) {
  const at = text.indexOf("{name}");
  return at < 0 ? [text] : [text.slice(0, at), node, text.slice(at + "{name}".length)];
}

/** "You play White" for the viewer's own seek, "Ann 1512 plays White" for another's. */
function whoPlays(seek, mine) {
  const side = seek.seat === 0 || seek.seat === 1 ? sideName(seek.game, seek.seat) : null;
  if (mine) return [side ? t("lobby.seeks.minePlays", { side }) : t("lobby.seeks.mineRandom")];
  const words = side ? t("lobby.seeks.theirPlays", { side }) : t("lobby.seeks.theirRandom");
  return withNode(words, seeker(seek));
}

/** " · rated, 1400–1700" / " · casual" */
function ratedText(seek) {
  if (!seek.rated) return ` · ${t("lobby.seeks.casual")}`;
  if (!Array.isArray(seek.rating_range)) return ` · ${t("lobby.seeks.rated")}`;
  return ` · ${t("lobby.seeks.ratedRange", { min: seek.rating_range[0], max: seek.rating_range[1] })}`;
}

function optionsText(options) {
  const parts = Object.entries(options || {}).map(([name, value]) => {
    const label = has(`lobby.option.${name}`) ? t(`lobby.option.${name}`) : name.replace(/_/g, " ");
    const choice = has(`lobby.choice.${name}.${value}`) ? t(`lobby.choice.${name}.${value}`) : value;
    return `${label} ${choice}`;
  });
  return parts.length ? ` · ${parts.join(", ")}` : "";
}

export function renderSeeks() {
  const list = $("seeks");
  if (!list) return;
  const seeks = lobby.seeks;
  $("seeks-count").textContent = seeks.length ? `(${seeks.length})` : "";
  if (!seeks.length) {
    list.replaceChildren(el("li", { class: "empty muted" }, [t("lobby.seeks.none")]));
    return;
  }
  list.replaceChildren(
    ...seeks.map((seek) => {
      const mine = isMine(seek);
      return el("li", { class: ["room-item", mine && "mine"], testid: `seek-${seek.id}`, dataset: { seek: seek.id } }, [
        el("span", { class: `game-icon small icon-${seek.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [gameTitle(seek.game)]),
          el("span", { class: "muted small" }, [
            ...whoPlays(seek, mine),
            ` · ${timeControlText(seek.clock)}${ratedText(seek)}${optionsText(seek.options)}`,
          ]),
        ]),
        mine
          ? el("button", { class: "btn small", type: "button", testid: `cancel-${seek.id}`, onclick: () => cancelSeek(seek.id) }, [t("lobby.seeks.cancel")])
          : el("button", { class: "btn small primary", type: "button", testid: `accept-${seek.id}`, onclick: () => acceptSeek(seek) }, [t("lobby.seeks.accept")]),
      ]);
    }),
  );
}

/** Whether the create form's opponent is the computer (a lobby challenge is for people). */
function computerChosen() {
  const opponent = $("opponent");
  return Boolean(opponent && opponent.value.startsWith("ai:"));
}

/**
 * "Post in the lobby" is for a game against a person: with the computer as the opponent it
 * is off, and a line under the buttons says why and what to do instead.
 */
export function renderSeekChoice() {
  const button = $("seek-btn");
  if (!button) return;
  const off = computerChosen();
  let hint = $("seek-hint");
  if (!hint) {
    hint = el("p", { id: "seek-hint", class: "muted small seek-hint", testid: "seek-hint", style: "margin: 0" }, [
      t("lobby.seeks.aiHint"),
    ]);
    button.after(hint); // right under the button it explains
  }
  hint.hidden = !off;
  button.disabled = off;
  if (off) button.setAttribute("aria-describedby", "seek-hint");
  else button.removeAttribute("aria-describedby");
}

/** The "clock" of the time control chosen in the create form (null: untimed). */
export function chosenClock() {
  const choice = $("time-control").value;
  return TIME_CONTROLS[choice] || null;
}

async function postSeek() {
  if (!store.selectedGame) return;
  if (computerChosen()) {
    renderSeekChoice(); // never a human challenge for a form set up against the computer
    return;
  }
  const seat = $("seat-choice").value;
  const name = playerName();
  if (name) prefs.set("name", name);
  prefs.set("time", $("time-control").value);
  const message = {
    type: "seek",
    game: store.selectedGame,
    options: readOptions(),
    clock: chosenClock(),
    seat: seat === "random" ? "random" : Number(seat),
    player_key: player.key(),
  };
  if (name) message.name = name;
  if ($("rated").checked) {
    message.rated = true;
    const range = ratingRange();
    if (range) message.rating_range = range;
  }
  const button = $("seek-btn");
  button.disabled = true;
  try {
    const reply = await store.conn.request(message);
    const seek = reply.seek;
    if (seek && seek.id !== undefined) {
      lobby.mine.add(seek.id);
      if (!lobby.seeks.some((s) => s.id === seek.id)) lobby.seeks = [...lobby.seeks, seek];
      renderSeeks();
    }
  } catch (err) {
    reportError(err);
  } finally {
    button.disabled = false;
    renderSeekChoice();
  }
}

/** The rating range typed in the form, [min, max] (either end open: 0 / 4000), or null. */
function ratingRange() {
  const low = $("range-min").value.trim();
  const high = $("range-max").value.trim();
  if (!low && !high) return null;
  const min = low ? Math.round(Number(low)) : 0;
  const max = high ? Math.round(Number(high)) : 4000;
  return min <= max ? [min, max] : [max, min];
}

// -- quick pairing ------------------------------------------------------------------------------

/** Wait in the quick pairing pool of the chosen game and time control. */
async function joinPool() {
  if (!store.selectedGame) return;
  const rated = $("rated").checked;
  const message = { type: "pool_join", game: store.selectedGame, clock: chosenClock(), rated, player_key: player.key() };
  const name = playerName();
  if (name) message.name = name;
  const button = $("pool-btn");
  button.disabled = true;
  try {
    await store.conn.request(message);
    lobby.pool = { game: store.selectedGame, clock: message.clock, rated, since: Date.now() };
  } catch (err) {
    lobby.pool = null;
    reportError(err);
  } finally {
    button.disabled = false;
  }
  renderPool();
}

/** Leave the pool, if this page waits in one. */
export function stopPooling() {
  if (!lobby.pool) return;
  lobby.pool = null;
  renderPool();
  store.conn.request({ type: "pool_leave" }).catch(() => {});
}

/**
 * A "seat" message: whether it ends this page's wait, for an accepted seek (it names the
 * seek) or in the pool (a seat that answers no request of ours, while we wait there).
 */
export function onPaired(message) {
  const fromSeek = message.seek !== undefined;
  const fromPool = Boolean(lobby.pool) && message.rid === undefined && !fromSeek;
  if (fromPool || (fromSeek && lobby.pool)) {
    lobby.pool = null;
    renderPool();
  }
  return fromSeek || fromPool;
}

function renderPool() {
  const pool = lobby.pool;
  $("pool-status").hidden = !pool;
  $("pool-btn").hidden = Boolean(pool);
  if (!pool) return;
  $("pool-text").textContent = t("lobby.pool.looking", {
    game: gameTitle(pool.game),
    clock: timeControlText(pool.clock),
    kind: pool.rated ? t("lobby.seeks.rated") : t("lobby.seeks.casual"),
  });
}

async function cancelSeek(id) {
  try {
    await store.conn.request({ type: "unseek", seek: id });
    lobby.mine.delete(id);
    lobby.seeks = lobby.seeks.filter((seek) => seek.id !== id);
    renderSeeks();
  } catch (err) {
    reportError(err);
  }
}

async function acceptSeek(seek) {
  const message = { type: "accept", seek: seek.id, player_key: player.key() };
  const name = playerName();
  if (name) message.name = name;
  try {
    const reply = await store.conn.request(message);
    seatStore.put(reply.room, { token: reply.token, seat: reply.seat, game: seek.game });
    openRoom(reply.room, "play");
  } catch (err) {
    reportError(err);
  }
}

export function wireSeeks() {
  $("seek-btn").addEventListener("click", postSeek);
  $("pool-btn").addEventListener("click", joinPool);
  $("pool-cancel").addEventListener("click", stopPooling);
  // After a reconnection the server has forgotten the subscription (and our seeks).
  store.conn.addEventListener("open", (event) => {
    if (!event.detail.reconnected || !lobby.subscribed) return;
    lobby.subscribed = false;
    lobby.mine.clear();
    lobby.pool = null; // the server forgot the pool too
    renderPool();
    subscribeLobby(true);
  });
}
