// The kibitz browser client: a lobby and a game screen over one WebSocket.
//
// The server is the only source of truth: every "state" message is a full snapshot (board
// view, legal moves, seats, result) and the screen is redrawn from it. The client applies
// no game rule of its own; it only turns clicks into move texts taken from legal_moves.
//
// The modules, from the entry down (a module imports only those below it; the screens
// never import each other, tests/client/test_js_imports.py checks it):
//   store.js       this file: wires the page and dispatches the server's messages
//   lobby.js     the lobby screen, with its panels seeks.js (open challenges, the lobby
//                subscription), mygames.js ("My games": this browser's player's games)
//                and bots.js (the bots online and challenging one over the bot API)
//   game.js      the game screen, with its panels actions.js (draw, takeback, abort,
//                claim, rematch; the spectator's bar), chat.js, choice.js (the choice
//                dialog) and feel.js (animation, sounds, premoves, move confirmation)
//   gamepage.js  the game page (?game=ID): a played game to step through and export
//   players.js   the leaderboards (?leaderboard=GAME&speed=S) and profiles (?player=NAME)
//   accountpage.js  the account page (?account=): password, sessions, API tokens
//   account.js   the account menu in the top bar: log in, sign up, log out, claim
//   civil.js     block and report a player (the game screen, the chat, profiles)
//   forms.js     small forms in a modal dialog, errors shown in words
//   router.js    which screen shows; the one way from one screen to another
//   util.js      shared helpers: $, JSON over HTTP, the catalogue's words, board renderers
//   clock.js     time controls and the ticking clocks
//   result.js    the result in words from the viewer's side
//   errors.js    the error toast
//   store.js     the state the screens share, changed through its named functions
//   sync.js      resumes the followed rooms after a reconnection, re-syncs quiet ones
//   protocol.js  the connection: request ids, pings, reconnection with backoff
//   storage.js   seats and preferences kept in localStorage
//   boards/      one renderer per game
// This file wires the page's shared parts (connection pill, error toast, copy buttons)
// and each screen, dispatches the server's messages, and routes on load and on "back".

import { loadAccount, wireAccount } from "./account.js";
import "./accountpage.js";
import { wireBots } from "./bots.js";
import { onChat, wireChat } from "./chat.js";
import { hideError, showError } from "./errors.js";
import { LANGUAGES, language, setLanguage, t, translateDom } from "./i18n.js";
import { clearPending, onSeat, onState, onThinking, renderGame, wireGame } from "./game.js";
import { wireGamePage } from "./gamepage.js";
import { onLiveGames, wireLobby } from "./lobby.js";
import "./players.js";
import { leaveRoom, route } from "./router.js";
import { wireRules } from "./rules.js";
import { onPaired, onSeeks, wireSeeks } from "./seeks.js";
import { wireSettings } from "./settings.js";
import { recentSounds } from "./sounds.js";
import { prefs } from "./storage.js";
import { store } from "./store.js";
import { applyTheme } from "./themes.js";
import { $ } from "./util.js";

// -- connection -------------------------------------------------------------------------------

// The pill's words: common.connection.<state> (connecting, open, reconnecting, closed).
const CONNECTION_KEYS = {
  idle: "common.connection.idle",
  connecting: "common.connection.connecting",
  open: "common.connection.open",
  reconnecting: "common.connection.reconnecting",
  closed: "common.connection.closed",
};

store.conn.addEventListener("status", (event) => {
  const pill = document.querySelector("[data-testid=connection]");
  pill.dataset.state = event.detail;
  pill.textContent = t(CONNECTION_KEYS[event.detail] || "common.connection.closed");
  // On the game screen, say in words why nothing moves.
  $("offline").hidden = event.detail !== "reconnecting";
});

store.conn.addEventListener("message", (event) => {
  const message = event.detail;
  switch (message.type) {
    case "seat":
      onSeat(message, onPaired(message));
      break;
    case "state":
      onState(message);
      break;
    case "thinking":
      onThinking(message);
      break;
    case "chat":
      onChat(message);
      break;
    case "lobby":
      onSeeks(message);
      onLiveGames(message);
      break;
    case "error":
      clearPending();
      showError(message.code, message.message, message);
      if (store.state) renderGame();
      break;
    default:
      break; // welcome, pong (the connection reads its "at" for the clocks), seek
  }
});

// A followed room that cannot be resumed any more (it expired): say so.
store.sync.addEventListener("error", (event) => {
  const { error } = event.detail;
  showError(error.code, error.message);
});

// -- routing ----------------------------------------------------------------------------------

window.addEventListener("popstate", () => {
  leaveRoom(false);
  route();
});

// -- wiring -----------------------------------------------------------------------------------

function copyField(id, button) {
  const input = $(id);
  const done = () => {
    const label = button.textContent;
    button.textContent = t("common.copied");
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

/**
 * The language switch of the top bar (#lang-select): the catalogue's languages, the one on
 * screen chosen; choosing another stores it and reloads the page (i18n.js setLanguage).
 * index.html holds the <select>; a page without it gets one at the end of the top bar.
 */
function wireLanguage() {
  let select = $("lang-select");
  if (!select) {
    select = document.createElement("select");
    select.id = "lang-select";
    select.className = "lang-select";
    select.dataset.testid = "lang-select";
    (document.querySelector(".topbar-end") || document.querySelector(".topbar") || document.body).append(select);
  }
  select.setAttribute("aria-label", t("common.language"));
  select.title = t("common.language");
  select.replaceChildren(
    ...LANGUAGES.map(({ code, name }) => {
      const option = document.createElement("option");
      option.value = code;
      option.lang = code;
      option.textContent = name;
      option.selected = code === language();
      return option;
    }),
  );
  select.addEventListener("change", () => setLanguage(select.value));
}

function wire() {
  translateDom();
  applyTheme(prefs.get("boardTheme", "green"));
  wireLanguage();
  const pill = document.querySelector("[data-testid=connection]");
  if (pill) pill.textContent = t(CONNECTION_KEYS[pill.dataset.state] || "common.connection.idle");
  wireAccount();
  wireGamePage();
  wireGame();
  wireChat();
  wireSeeks();
  wireBots();
  wireLobby();
  wireRules();
  wireSettings();
  $("error").addEventListener("click", (event) => {
    if (event.target.classList.contains("close")) hideError();
  });
  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", () => copyField(button.dataset.copy, button));
  }
}

wire();
store.conn.connect();
route();
loadAccount();

// For debugging in the console and for end-to-end tests: read-only peeks at the client.
window.kibitz = {
  get state() {
    return store.state;
  },
  get you() {
    return store.you;
  },
  /** The signed-in account (null: a guest; undefined: not known yet). */
  get account() {
    return store.account;
  },
  get connection() {
    return store.conn.status;
  },
  /** The server's clock minus ours, in ms, and how many pongs it was estimated from. */
  get clockOffset() {
    return { ms: store.conn.offsetMs, samples: store.conn.offsetSamples.length };
  },
  /** The names of the last sounds played ("move", "capture", ...; sounds.js), oldest first. */
  get sounds() {
    return recentSounds();
  },
  /** Drop the socket as a network failure would (tests the reconnection path). */
  dropConnection() {
    store.conn.dropSocket("dropped by a test");
  },
};
