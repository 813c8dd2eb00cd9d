// The players' actions besides moves: offer / accept / decline a draw, ask for a
// takeback, abort, claim when the opponent has gone, rematch; and the spectator's bar
// (watcher count, "watching", flip) and the first-move countdown.
//
// Each action is one message ({"type": "draw", "room", "token", "action": "offer"}, ...)
// whose success is the room's next broadcast state; errors come back in words.
// A panel of the game screen (game.js).

import { el } from "./boards/common.js";
import { durationWords, onTick, secondsLeft, timeControlText } from "./clock.js";
import { reportError } from "./errors.js";
import { clearNotice, setNotice, store, toggleFlip } from "./store.js";
import { $ } from "./util.js";

const NOTICE_MS = 6000;

let noticeTimer = null; // takes the decline notice away

const OFFER_WORDS = {
  draw: { theirs: (who) => `${who} offers a draw.`, mine: "You offered a draw.", spectator: (who) => `${who} offers a draw.` },
  takeback: {
    theirs: (who) => `${who} asks to take back their last move.`,
    mine: "You asked to take back your last move.",
    spectator: (who) => `${who} asks for a takeback.`,
  },
  rematch: { theirs: (who) => `${who} offers a rematch.`, mine: "You offered a rematch.", spectator: (who) => `${who} offers a rematch.` },
};

const DECLINES = {
  draw_decline: "declined the draw offer",
  takeback_decline: "declined the takeback",
  rematch_decline: "declined the rematch",
};

function seated() {
  return (store.you === 0 || store.you === 1) && Boolean(store.token);
}

function sideName(state, seat) {
  const info = state.seats[seat];
  const side = state.players[seat];
  if (info && info.kind === "ai") return `${side} (${info.name || `AI level ${info.level}`})`;
  return info && info.name ? `${side} (${info.name})` : side;
}

/** Whether the game may still be aborted: a waiting room, or not both sides have moved. */
export function mayAbort(state) {
  if (state.status === "waiting") return true;
  if (state.status !== "playing") return false;
  const movers = new Set(state.moves.map((move) => move.seat));
  return movers.size < 2;
}

function send(type, fields) {
  const state = store.state;
  if (!state || !store.token) return;
  store.conn.request({ type, room: state.room, token: store.token, ...fields }).catch(reportError);
}

export function offer(kind, action = "offer") {
  send(kind, { action });
}

// -- drawing ----------------------------------------------------------------------------------

export function renderActions(state, myTurn) {
  const you = store.you;
  const me = seated();
  const playing = state.status === "playing";
  const offers = state.offers || {};
  const pass = $("pass-btn");
  pass.hidden = !(myTurn && state.legal_moves.includes("pass"));
  pass.disabled = store.pending;
  $("resign-btn").hidden = !(me && playing);

  const draw = $("draw-btn");
  draw.hidden = !(me && playing);
  draw.disabled = offers.draw === you;
  draw.textContent = offers.draw === you ? "Draw offered" : offers.draw === 1 - you ? "Accept the draw" : "Offer a draw";

  const takeback = $("takeback-btn");
  takeback.hidden = !(me && playing && state.moves.some((move) => move.seat === you));
  takeback.disabled = offers.takeback === you;
  takeback.textContent = offers.takeback === you ? "Takeback asked" : "Ask to take back";

  $("abort-btn").hidden = !(me && mayAbort(state));

  const over = state.status === "over";
  const rematch = $("rematch-offer-btn");
  rematch.hidden = !(me && over);
  if (state.next_room) {
    rematch.textContent = "Go to the rematch";
    rematch.disabled = false;
  } else {
    rematch.textContent = offers.rematch === you ? "Rematch offered" : offers.rematch === 1 - you ? "Accept the rematch" : "Rematch";
    rematch.disabled = offers.rematch === you;
  }
  $("rematch-btn").hidden = !over;

  renderOffer(state);
  renderViewBar(state);
  renderCountdowns(state);
}

/** The pending offers, in words, with Accept / Decline for the one it is addressed to. */
function renderOffer(state) {
  const box = $("offer");
  const offers = state.offers || {};
  const lines = [];
  for (const kind of ["draw", "takeback", "rematch"]) {
    const seat = offers[kind];
    if (seat !== 0 && seat !== 1) continue;
    const words = OFFER_WORDS[kind];
    if (!seated()) {
      lines.push(el("p", { testid: `offered-${kind}` }, [words.spectator(sideName(state, seat))]));
    } else if (seat === store.you) {
      lines.push(el("p", { class: "muted", testid: `offered-${kind}` }, [`${words.mine} Waiting for an answer.`]));
    } else {
      lines.push(
        el("p", { testid: `offered-${kind}`, dataset: { kind } }, [
          words.theirs(sideName(state, seat)),
          " ",
          el("button", { type: "button", class: "btn small primary", testid: `${kind}-accept`, onclick: () => offer(kind, "accept") }, ["Accept"]),
          " ",
          el("button", { type: "button", class: "btn small", testid: `${kind}-decline`, onclick: () => offer(kind, "decline") }, ["Decline"]),
        ]),
      );
    }
  }
  const event = state.event || {};
  if (DECLINES[event.kind] && event.seat !== store.you && store.notice !== state.version) {
    // Said once, for a few seconds, when it happens.
    setNotice(state.version, `${sideName(state, event.seat)} ${DECLINES[event.kind]}.`);
    clearTimeout(noticeTimer);
    noticeTimer = setTimeout(() => {
      clearNotice();
      if (store.state) renderOffer(store.state);
    }, NOTICE_MS);
  }
  if (store.noticeText) lines.push(el("p", { class: "muted", testid: "offer-notice" }, [store.noticeText]));
  box.replaceChildren(...lines);
  box.hidden = lines.length === 0;
}

function renderViewBar(state) {
  const watching = !seated();
  $("watching-label").hidden = !watching;
  $("board-help").hidden = watching || state.status !== "playing";
  const count = Number(state.spectators || 0);
  const watchers = $("watchers");
  watchers.textContent = count ? `${count} watching` : "";
  watchers.hidden = count === 0;
  watchers.dataset.count = String(count);
  $("time-control-label").textContent = `${timeControlText(state.clock)}${state.rated ? " · rated" : ""}`;
  $("time-control-label").dataset.rated = String(Boolean(state.rated));
  $("flip-btn").setAttribute("aria-pressed", String(Boolean(store.flip)));
}

// -- countdowns (first move, claims), redrawn every tick ---------------------------------------

function renderCountdowns(state) {
  renderFirstMove(state);
  renderClaim(state);
}

function renderFirstMove(state) {
  const line = $("first-move");
  const clock = state.clock;
  const by = clock && clock.first_move_by;
  if (state.status !== "playing" || typeof by !== "number") {
    line.hidden = true;
    return;
  }
  const ms = by - store.conn.serverNow();
  const left = secondsLeft(ms);
  const mover = state.to_move;
  const text =
    mover === store.you && seated()
      ? `Make your first move within ${durationWords(ms)}, or the game is aborted.`
      : `${sideName(state, mover)} has ${durationWords(ms)} to make a first move, or the game is aborted.`;
  if (line.textContent !== text) line.textContent = text;
  line.dataset.seconds = String(left);
  line.classList.toggle("low", left <= 10);
  line.hidden = false;
}

/** The opponent's seat when it is a human who has been gone, or null. */
function goneOpponent(state) {
  if (!seated() || state.status !== "playing") return null;
  const seat = 1 - store.you;
  const info = state.seats[seat];
  if (!info || info.kind === "ai" || typeof info.gone_ms !== "number") return null;
  return seat;
}

function renderClaim(state) {
  const box = $("claim");
  const seat = goneOpponent(state);
  if (seat === null) {
    box.hidden = true;
    return;
  }
  const info = state.seats[seat];
  const after = Number(state.claim_after_ms || 0);
  const wait = info.gone_ms + after - store.conn.serverNow();
  const who = sideName(state, seat);
  const text =
    wait > 0
      ? `${who} has left the game. If they do not come back within ${durationWords(wait)}, you may claim the win.`
      : `${who} has left the game. You may claim the win, or call it a draw.`;
  if ($("claim-text").textContent !== text) $("claim-text").textContent = text;
  box.dataset.ready = String(wait <= 0);
  $("claim-win").hidden = wait > 0;
  $("claim-draw").hidden = wait > 0;
  box.hidden = false;
}

onTick(renderCountdowns);

// -- wiring -----------------------------------------------------------------------------------

export function wireActions({ choose, followRematch, rerender }) {
  $("draw-btn").addEventListener("click", () => offer("draw", store.state && store.state.offers && store.state.offers.draw === 1 - store.you ? "accept" : "offer"));
  $("takeback-btn").addEventListener("click", () => offer("takeback"));
  $("abort-btn").addEventListener("click", async () => {
    const sure = await choose({
      title: "Abort this game? It ends with no result.",
      options: [
        { label: "Abort", value: "yes", testid: "abort-yes", danger: true },
        { label: "Keep playing", value: null, testid: "abort-no" },
      ],
    });
    if (sure === "yes") send("abort", {});
  });
  $("claim-win").addEventListener("click", () => send("claim", { result: "win" }));
  $("claim-draw").addEventListener("click", () => send("claim", { result: "draw" }));
  $("rematch-offer-btn").addEventListener("click", () => {
    const state = store.state;
    if (!state) return;
    if (state.next_room) followRematch(state);
    else offer("rematch", state.offers && state.offers.rematch === 1 - store.you ? "accept" : "offer");
  });
  $("flip-btn").addEventListener("click", () => {
    toggleFlip();
    rerender();
  });
}
