// The bots online, a panel of the lobby: the bot accounts with an open event stream (the
// lichess-compatible API, docs/bot-api.md), each with its rating in the game and time
// control chosen in the create form and a "Challenge" button.
//
//   GET  /api/bot/online?nb=50          NDJSON, one user object a line (perfs per rating pool)
//   POST /api/challenge/{bot}           form fields as the create form chose them, with
//                                       keepAliveStream=true: the answer streams the
//                                       challenge line, empty keep-alive lines, then
//                                       {"done": "accepted"|"declined"|"canceled"}
//   POST /api/challenge/{id}/cancel     the Cancel button
//   GET  /api/rooms/{id}/seat           once accepted: {"room", "seat", "token"}
//
// The calls go with the session cookie (same origin: the server's CSRF check passes). An
// accepted challenge enters the room as an accepted seek does: the seat's token is kept in
// seatStore and the room opens in "play" mode (game.js resumes it with the token).
// One challenge at a time; its progress is the status line above the list. Closing the page
// closes the stream, which cancels the challenge on the server.

import { accountKnown, currentAccount, openLogin } from "./account.js";
import { el } from "./boards/common.js";
import { TIME_CONTROLS } from "./clock.js";
import { reportError } from "./errors.js";
import { has, t } from "./i18n.js";
import { openRoom } from "./router.js";
import { seatStore } from "./storage.js";
import { store } from "./store.js";
import { $, botBadge, fetchJson, profileHref, ratingText, speedOf } from "./util.js";

const ONLINE_LIMIT = 50;
const REFRESH_MS = 30_000;
// Once accepted, the seat's key may take a moment to be readable: a few tries, then give up.
const SEAT_TRIES = 5;
const SEAT_RETRY_MS = 400;
// The colours of the API, by the create form's seat choice ("0", "1", "random").
const COLORS = { 0: "white", 1: "black", random: "random" };

const panel = {
  on: false, // the lobby shows: the list is read every REFRESH_MS
  timer: null,
  bots: [], // user objects of /api/bot/online, as last read
  // The challenge under way, or the last one's outcome:
  // {bot, id, phase: "sending"|"waiting"|"accepted"|"declined"|"canceled"|"refused"|"lost", reason, controller}
  challenge: null,
};

/** The lobby shows (true: read the list now and every 30 s) or hides (false: stop). */
export function showBots(on) {
  panel.on = on;
  clearInterval(panel.timer);
  panel.timer = null;
  if (!on) return;
  refreshBots();
  panel.timer = setInterval(refreshBots, REFRESH_MS);
}

/** The NDJSON lines of `text` as objects (empty lines are keep-alives). */
function ndjson(text) {
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line));
}

async function refreshBots() {
  if (!panel.on || $("lobby").hidden) return;
  try {
    const response = await fetch(`/api/bot/online?nb=${ONLINE_LIMIT}`, {
      headers: { Accept: "application/x-ndjson" },
      credentials: "same-origin",
    });
    if (!response.ok) return; // a server without the bot API: the list stays as it was
    panel.bots = ndjson(await response.text());
  } catch {
    return; // the list is a convenience: the next refresh may work
  }
  renderBots();
}

/**
 * The rating pool of the lobby's choice, as the API names it: chess by its speed
 * ("blitz"), the other games "<game>_<speed>" ("othello_timed").
 */
export function perfKey(gameName, clock) {
  const speed = speedOf(gameName, clock);
  return gameName === "chess" ? speed : `${gameName}_${speed}`;
}

/** The time control chosen in the create form (null: untimed). */
function chosenClock() {
  return TIME_CONTROLS[$("time-control").value] || null;
}

/** The list, with each bot's rating in the chosen game and time control; also the status line. */
export function renderBots() {
  const list = $("bots");
  if (!list) return;
  renderChallenge();
  const game = store.selectedGame;
  const key = game ? perfKey(game, chosenClock()) : null;
  $("bots-count").textContent = panel.bots.length ? `(${panel.bots.length})` : "";
  if (!panel.bots.length) {
    list.replaceChildren(el("li", { class: "empty muted" }, [t("lobby.bots.none")]));
    return;
  }
  const me = currentAccount();
  const busy = Boolean(panel.challenge && (panel.challenge.phase === "sending" || panel.challenge.phase === "waiting"));
  list.replaceChildren(
    ...panel.bots.map((bot) => {
      const perf = key && bot.perfs ? bot.perfs[key] : null;
      const rating = perf ? ratingText(perf.rating, perf.prov) : "";
      const mine = Boolean(me && me.username.toLowerCase() === bot.id);
      return el("li", { class: "room-item bot-item", testid: `bot-${bot.id}`, dataset: { bot: bot.id } }, [
        el("span", { class: "room-info" }, [
          el("strong", {}, [
            el("a", { href: profileHref(bot.username), class: "player-link" }, [bot.username]),
            botBadge(true),
          ]),
          el("span", { class: "muted small", testid: `bot-rating-${bot.id}` }, [
            rating ? t("lobby.bots.rating", { rating }) : t("lobby.bots.unrated"),
          ]),
        ]),
        mine
          ? null
          : el(
              "button",
              {
                class: "btn small primary",
                type: "button",
                testid: `challenge-${bot.id}`,
                disabled: busy,
                "aria-label": t("lobby.bots.challengeName", { name: bot.username }),
                onclick: () => challengeBot(bot),
              },
              [t("lobby.bots.challenge")],
            ),
      ]);
    }),
  );
}

// -- the challenge ------------------------------------------------------------------------------

/** The form a challenge is posted with: the create form's game, clock, colour and rated choice. */
function challengeForm() {
  const game = store.selectedGame;
  const form = new URLSearchParams();
  form.set("variant", game === "chess" ? "standard" : game);
  form.set("rated", $("rated").checked ? "true" : "false");
  form.set("color", COLORS[$("seat-choice").value] || "random");
  const clock = chosenClock();
  if (clock && clock.days_per_move) {
    form.set("days", String(clock.days_per_move));
  } else if (clock) {
    form.set("clock.limit", String(Math.round(clock.initial_ms / 1000)));
    form.set("clock.increment", String(Math.round((clock.increment_ms || 0) / 1000)));
  }
  form.set("keepAliveStream", "true");
  return form;
}

/** Challenge `bot` with the create form's choices and follow the answer to its end. */
async function challengeBot(bot) {
  if (!currentAccount()) {
    setChallenge({ bot, phase: "signin" });
    if (accountKnown()) openLogin();
    return;
  }
  if (panel.challenge && ["sending", "waiting"].includes(panel.challenge.phase)) return;
  const game = store.selectedGame;
  const controller = new AbortController();
  setChallenge({ bot, game, id: null, phase: "sending", reason: null, controller });
  let response;
  try {
    response = await fetch(`/api/challenge/${encodeURIComponent(bot.username)}`, {
      method: "POST",
      body: challengeForm(),
      headers: { Accept: "application/x-ndjson" },
      credentials: "same-origin",
      signal: controller.signal,
    });
  } catch {
    if (!controller.signal.aborted) finish("lost");
    return;
  }
  if (!response.ok) {
    finish("refused", await refusal(response));
    return;
  }
  let done = null;
  try {
    done = await readChallengeStream(response.body, controller);
  } catch {
    // the stream broke off (or was closed by Cancel): below
  }
  if (panel.challenge?.controller !== controller) return; // no longer the one on screen
  if (done === "accepted") {
    await enterChallengeRoom(panel.challenge);
  } else if (done === "declined" || done === "canceled") {
    finish(done);
  } else if (!controller.signal.aborted) {
    finish("lost");
  }
}

/**
 * Read the challenge's NDJSON stream until its `done` line: each challenge line (the first,
 * and again when its status changes) updates the status line; the outcome ("accepted",
 * "declined", "canceled"), or null when the stream ends without one.
 */
async function readChallengeStream(body, controller) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return null;
    buffered += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (!line) continue; // a keep-alive
      const message = JSON.parse(line);
      if (panel.challenge?.controller !== controller) return null; // dropped meanwhile
      if (typeof message.done === "string") {
        if (message.declineReasonKey || message.declineReason) noteReason(message);
        reader.cancel().catch(() => {});
        return message.done;
      }
      const challenge = message.challenge && message.challenge.id ? message.challenge : message;
      if (challenge.id) {
        if (challenge.declineReasonKey || challenge.declineReason) noteReason(challenge);
        setChallenge({ ...panel.challenge, id: challenge.id, phase: "waiting" });
      }
    }
  }
}

/** Keep a decline's reason, in words of the page's language when its key has some. */
function noteReason(record) {
  const key = `lobby.bots.reason.${record.declineReasonKey}`;
  const reason = record.declineReasonKey && has(key) ? t(key) : record.declineReason || null;
  panel.challenge = { ...panel.challenge, reason };
}

/** A refused challenge's words: the server's `error` (lichess's format), else the status. */
async function refusal(response) {
  if (response.status === 429) return t("lobby.bots.tooMany");
  try {
    const body = await response.json();
    if (body && typeof body.error === "string") return body.error;
  } catch {
    // not JSON: the status says enough
  }
  return t("lobby.bots.status", { status: response.status });
}

/** The accepted challenge's room: read our seat (a few tries), keep its token, open the room. */
async function enterChallengeRoom(challenge) {
  setChallenge({ ...challenge, phase: "accepted" });
  for (let attempt = 1; ; attempt++) {
    try {
      const seat = await fetchJson(`/api/rooms/${encodeURIComponent(challenge.id)}/seat`);
      seatStore.put(seat.room, { token: seat.token, seat: seat.seat, game: challenge.game });
      setChallenge(null);
      openRoom(seat.room, "play");
      return;
    } catch (err) {
      if (attempt >= SEAT_TRIES) {
        finish("lost");
        reportError(err);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, SEAT_RETRY_MS));
    }
  }
}

/** Cancel the challenge under way: on the server when it has an id, and stop reading. */
async function cancelChallenge() {
  const challenge = panel.challenge;
  if (!challenge || !["sending", "waiting"].includes(challenge.phase)) return;
  if (challenge.id) {
    try {
      const response = await fetch(`/api/challenge/${encodeURIComponent(challenge.id)}/cancel`, {
        method: "POST",
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      // Too late (accepted meanwhile): the stream's last line says so, and the room opens.
      if (!response.ok) return;
    } catch {
      // the stream's end cancels it on the server too
    }
  }
  challenge.controller.abort(); // closing the stream also cancels it on the server
  if (panel.challenge === challenge) finish("canceled");
}

function finish(phase, why = null) {
  if (!panel.challenge) return;
  const next = { ...panel.challenge, phase };
  if (why) next.reason = why;
  setChallenge(next);
}

function setChallenge(challenge) {
  panel.challenge = challenge;
  renderBots();
}

/** The status line above the list: "Waiting for Bob…" with Cancel, or how the last one ended. */
function renderChallenge() {
  const box = $("bot-challenge");
  if (!box) return;
  const challenge = panel.challenge;
  box.hidden = !challenge;
  if (!challenge) {
    box.replaceChildren();
    delete box.dataset.phase;
    return;
  }
  const name = challenge.bot.username;
  box.dataset.phase = challenge.phase;
  const words = {
    signin: () => t("lobby.bots.signIn"),
    sending: () => t("lobby.bots.waiting", { name }),
    waiting: () => t("lobby.bots.waiting", { name }),
    accepted: () => t("lobby.bots.accepted", { name }),
    declined: () =>
      challenge.reason ? t("lobby.bots.declinedWhy", { name, reason: challenge.reason }) : t("lobby.bots.declined", { name }),
    canceled: () => t("lobby.bots.canceled", { name }),
    refused: () => t("lobby.bots.refused", { name, reason: challenge.reason }),
    lost: () => t("lobby.bots.lost", { name }),
  }[challenge.phase];
  const open = challenge.phase === "sending" || challenge.phase === "waiting";
  box.replaceChildren(
    el("span", { testid: "bot-challenge-text" }, [words()]),
    open
      ? el("button", { class: "btn small", type: "button", testid: "bot-challenge-cancel", onclick: cancelChallenge }, [
          t("lobby.bots.cancel"),
        ])
      : el("button", { class: "link-button small", type: "button", testid: "bot-challenge-close", onclick: () => setChallenge(null) }, [
          t("lobby.bots.dismiss"),
        ]),
  );
}

export function wireBots() {
  $("time-control").addEventListener("change", renderBots);
  window.addEventListener("kibitz:account", renderBots);
}
