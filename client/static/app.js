// The kibitz browser client: a lobby and a game screen over one WebSocket.
//
// The server is the only source of truth: every "state" message is a full snapshot (board
// view, legal moves, seats, result) and the screen is redrawn from it. The client applies
// no game rule of its own; it only turns clicks into move texts taken from legal_moves.
//
// The modules:
//   protocol.js  the connection: request ids, pings, reconnection with backoff
//   sync.js      resumes the followed rooms after a reconnection, re-syncs quiet ones
//   state.js     the state the screens share
//   lobby.js     the lobby screen
//   seeks.js     open challenges in the lobby and the lobby subscription
//   game.js      the game screen and its choice dialog
//   actions.js   draw, takeback, abort, claim, rematch; the spectator's bar
//   clock.js     time controls and the ticking clocks
//   chat.js      the room's chat (text only)
//   result.js    the result in words from the viewer's side
//   gamepage.js  the game page (?game=ID): a played game to step through and export
//   mygames.js   "My games" on the lobby: this browser's player's games
//   errors.js    the error toast
//   storage.js   seats and preferences kept in localStorage
//   boards/      one renderer per game
// This file routes between the screens and wires the page's buttons.

import { enableArrowKeys } from "./boards/common.js";
import { onChat, wireChat } from "./chat.js";
import { hideError, showError } from "./errors.js";
import {
  cancelChoice,
  clearPending,
  enterRoom,
  joinRoom,
  leaveRoom,
  onSeat,
  onState,
  onThinking,
  playMove,
  renderGame,
  resign,
  wireGame,
} from "./game.js";
import { showGamePage, wireGamePage } from "./gamepage.js";
import { createGame, joinByInput, refreshRooms, showLobby, watchByInput } from "./lobby.js";
import { onLobby, postSeek, wireSeeks } from "./seeks.js";
import { prefs, seatStore } from "./storage.js";
import { $, app } from "./state.js";

// -- connection -------------------------------------------------------------------------------

const CONNECTION_LABELS = { connecting: "connecting…", open: "online", reconnecting: "reconnecting…", closed: "offline" };

app.conn.addEventListener("status", (event) => {
  const pill = document.querySelector("[data-testid=connection]");
  pill.dataset.state = event.detail;
  pill.textContent = CONNECTION_LABELS[event.detail] || event.detail;
  // On the game screen, say in words why nothing moves.
  $("offline").hidden = event.detail !== "reconnecting";
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
    case "chat":
      onChat(message);
      break;
    case "lobby":
      onLobby(message);
      break;
    case "error":
      clearPending();
      showError(message.code, message.message);
      if (app.state) renderGame();
      break;
    default:
      break; // welcome, pong (the connection reads its "at" for the clocks), seek
  }
});

// A followed room that cannot be resumed any more (it expired): say so.
app.sync.addEventListener("error", (event) => {
  const { error } = event.detail;
  showError(error.code, error.message);
});

// -- routing ----------------------------------------------------------------------------------

function route() {
  const params = new URLSearchParams(window.location.search);
  const room = params.get("room");
  const watch = params.get("watch");
  const game = params.get("game");
  if (game) showGamePage(game);
  else if (room) enterRoom(room, seatStore.get(room) ? "play" : "invite");
  else if (watch) enterRoom(watch, "watch");
  else showLobby();
}

window.addEventListener("popstate", () => {
  leaveRoom(false);
  route();
});

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
  wireGamePage();
  wireGame();
  wireChat();
  enableArrowKeys($("board"));
  wireSeeks();
  $("seek-btn").addEventListener("click", postSeek);
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
  $("dialog-cancel").addEventListener("click", cancelChoice);
  $("dialog").addEventListener("click", (event) => {
    if (event.target === $("dialog")) cancelChoice();
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
  /** The server's clock minus ours, in ms, and how many pongs it was estimated from. */
  get clockOffset() {
    return { ms: app.conn.offsetMs, samples: app.conn.offsetSamples.length };
  },
  /** Drop the socket as a network failure would (tests the reconnection path). */
  dropConnection() {
    app.conn.dropSocket("dropped by a test");
  },
};
