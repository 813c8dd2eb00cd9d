// The players' actions besides moves: offer / accept / decline a draw, ask for a
// takeback, abort, claim when the opponent has gone, rematch; and the spectator's bar
// (watcher count, "watching", flip) and the first-move countdown.
//
// Each action is one message ({"type": "draw", "room", "token", "action": "offer"}, ...)
// whose success is the room's next broadcast state; errors come back in words. The draw
// button shows only in games where a draw can be agreed (the catalogue's `draws`).
// Words from the catalogue (actions.*). A panel of the game screen (game.js).

import { el } from "./boards/common.js";
import { durationWords, onTick, secondsLeft, timeControlText } from "./clock.js";
import { reportError } from "./errors.js";
import { t } from "./i18n.js";
import { clearNotice, setNotice, store, toggleFlip } from "./store.js";
import { $, sideName as gameSide } from "./util.js";

const NOTICE_MS = 6000;

let noticeTimer = null; // takes the notice (a decline, a takeback) away

const OFFER_WORDS = {
  draw: {
    theirs: (who) => t("actions.offer.draw.theirs", { who }),
    mine: () => t("actions.offer.draw.mine"),
    spectator: (who) => t("actions.offer.draw.spectator", { who }),
  },
  takeback: {
    theirs: (who) => t("actions.offer.takeback.theirs", { who }),
    mine: () => t("actions.offer.takeback.mine"),
    spectator: (who) => t("actions.offer.takeback.spectator", { who }),
  },
  rematch: {
    theirs: (who) => t("actions.offer.rematch.theirs", { who }),
    mine: () => t("actions.offer.rematch.mine"),
    spectator: (who) => t("actions.offer.rematch.spectator", { who }),
  },
};

const DECLINES = {
  draw_decline: (who) => t("actions.declined.draw", { who }),
  takeback_decline: (who) => t("actions.declined.takeback", { who }),
  rematch_decline: (who) => t("actions.declined.rematch", { who }),
};

function seated() {
  return (store.you === 0 || store.you === 1) && Boolean(store.token);
}

/** "White (ann)", "White (Computer, level 5)", or the side alone. */
function sideName(state, seat) {
  const info = state.seats[seat];
  const side = gameSide(state.game, seat);
  if (info && info.kind === "ai") return t("actions.side.named", { side, name: t("common.ai.level", { level: info.level }) });
  return info && info.name ? t("actions.side.named", { side, name: info.name }) : side;
}

/** Whether a draw can be agreed in this game (the catalogue's `draws`; true if unknown). */
export function drawsAllowed(gameName) {
  const game = store.gamesByName.get(gameName);
  return !(game && game.draws === false);
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
  draw.hidden = !(me && playing && drawsAllowed(state.game));
  draw.disabled = offers.draw === you;
  draw.textContent =
    offers.draw === you ? t("actions.draw.offered") : offers.draw === 1 - you ? t("actions.draw.accept") : t("actions.draw.offer");

  const takeback = $("takeback-btn");
  takeback.hidden = !(me && playing && state.moves.some((move) => move.seat === you));
  takeback.disabled = offers.takeback === you;
  takeback.textContent = offers.takeback === you ? t("actions.takeback.asked") : t("actions.takeback.ask");

  $("abort-btn").hidden = !(me && mayAbort(state));

  const over = state.status === "over";
  const rematch = $("rematch-offer-btn");
  rematch.hidden = !(me && over);
  if (state.next_room) {
    rematch.textContent = t("actions.rematch.go");
    rematch.disabled = false;
  } else {
    rematch.textContent =
      offers.rematch === you ? t("actions.rematch.offered") : offers.rematch === 1 - you ? t("actions.rematch.accept") : t("actions.rematch.offer");
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
      lines.push(el("p", { class: "muted", testid: `offered-${kind}` }, [t("actions.offer.waiting", { offer: words.mine() })]));
    } else {
      lines.push(
        el("p", { testid: `offered-${kind}`, dataset: { kind } }, [
          words.theirs(sideName(state, seat)),
          " ",
          el("button", { type: "button", class: "btn small primary", testid: `${kind}-accept`, onclick: () => offer(kind, "accept") }, [t("actions.accept")]),
          " ",
          el("button", { type: "button", class: "btn small", testid: `${kind}-decline`, onclick: () => offer(kind, "decline") }, [t("actions.decline")]),
        ]),
      );
    }
  }
  const event = state.event || {};
  const fresh = store.notice !== state.version;
  // A move or a new offer makes an earlier notice stale ("North: draw declined"): it goes.
  if (fresh && store.noticeText && (event.kind === "move" || /_offer$/.test(event.kind || ""))) {
    clearNotice();
    clearTimeout(noticeTimer);
  }
  // An agreed takeback (the computer accepts at once) moves the board back: say so.
  const noticed =
    event.kind === "takeback" ? t("actions.takenBack") : DECLINES[event.kind] && event.seat !== store.you ? DECLINES[event.kind](sideName(state, event.seat)) : null;
  if (noticed && fresh) {
    // Said once, for a few seconds, when it happens.
    setNotice(state.version, noticed);
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
  watchers.textContent = count ? t("actions.watchers", { n: count }) : "";
  watchers.hidden = count === 0;
  watchers.dataset.count = String(count);
  const control = timeControlText(state.clock);
  $("time-control-label").textContent = state.rated ? t("actions.timeControl.rated", { control }) : control;
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
  const time = durationWords(ms);
  const text =
    mover === store.you && seated()
      ? t("actions.firstMove.yours", { time })
      : t("actions.firstMove.theirs", { who: sideName(state, mover), time });
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
  const text = wait > 0 ? t("actions.claim.wait", { who, time: durationWords(wait) }) : t("actions.claim.ready", { who });
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
      title: t("actions.abort.title"),
      options: [
        { label: t("actions.abort.yes"), value: "yes", testid: "abort-yes", danger: true },
        { label: t("actions.abort.no"), value: null, testid: "abort-no" },
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
