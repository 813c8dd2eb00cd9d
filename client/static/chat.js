// The chat of the room on screen. Players talk on the players' channel, spectators on
// theirs; the server sends a channel's last lines when you start following the room and
// every new line after that:
//   {"type": "chat", "room", "channel": "players" | "spectators",
//    "messages": [{"id", "seat", "name", "text", "at"}]}
// Chat is text typed by other people: it is only ever put in the page as text nodes
// (el() children, textContent), never as HTML. A panel of the game screen (game.js).

import { currentAccount } from "./account.js";
import { el } from "./boards/common.js";
import { reportPlayer } from "./civil.js";
import { friendlyError } from "./errors.js";
import { prefs } from "./storage.js";
import { store } from "./store.js";
import { $ } from "./util.js";

const MAX_CHARS = 300;
const KEEP_LINES = 100;

const chat = {
  room: null,
  lines: { players: new Map(), spectators: new Map() }, // channel -> id -> line
};

function myChannel() {
  return (store.you === 0 || store.you === 1) && store.token ? "players" : "spectators";
}

/** Forget the lines of the room left behind. */
export function resetChat(room) {
  chat.room = room;
  chat.lines = { players: new Map(), spectators: new Map() };
  $("chat-error").hidden = true;
  $("chat-input").value = "";
  renderChat();
}

export function onChat(message) {
  if (message.room !== store.room) return;
  if (chat.room !== message.room) resetChat(message.room);
  const lines = chat.lines[message.channel];
  if (!lines) return;
  for (const line of message.messages || []) {
    const key = line.id ?? `${line.at}:${line.seat}:${line.text}`;
    lines.set(String(key), line);
  }
  while (lines.size > KEEP_LINES) lines.delete(lines.keys().next().value);
  renderChat();
}

function who(line) {
  const state = store.state;
  if (Number.isInteger(line.seat) && state) {
    const side = state.players[line.seat];
    const name = line.account || line.name;
    return name ? `${name} (${side})` : side;
  }
  return line.account || line.name || "Spectator";
}

/** A "Report" button on a line said by another account, for a signed-in reader. */
function reportButton(line) {
  const me = currentAccount();
  if (!me || !line.account || line.account.toLowerCase() === me.username.toLowerCase()) return null;
  return el(
    "button",
    {
      type: "button",
      class: "btn ghost small chat-report",
      testid: "report-line",
      title: `Report this line by ${line.account}`,
      "aria-label": `Report this line by ${line.account}`,
      onclick: () => reportPlayer(line.account, { room: chat.room, line: String(line.text ?? "") }),
    },
    ["Report"],
  );
}

export function renderChat() {
  const channel = myChannel();
  $("chat-channel").textContent = channel === "players" ? "with your opponent" : "among spectators";
  $("chat-panel").dataset.channel = channel;
  const list = $("chat");
  const lines = [...chat.lines[channel].values()].sort((a, b) => (a.at || 0) - (b.at || 0));
  if (!lines.length) {
    list.replaceChildren(el("li", { class: "empty muted" }, ["No messages yet."]));
    return;
  }
  list.replaceChildren(
    ...lines.map((line) =>
      el("li", { class: ["chat-line", Number.isInteger(line.seat) && line.seat === store.you && "mine"], testid: "chat-line" }, [
        el("strong", { class: "chat-who" }, [`${who(line)}: `]),
        el("span", { class: "chat-text" }, [String(line.text ?? "")]),
        reportButton(line),
      ]),
    ),
  );
  list.scrollTop = list.scrollHeight;
}

function showChatError(code, message) {
  const box = $("chat-error");
  box.replaceChildren(
    el("span", {}, [`${friendlyError(code)}. `]),
    el("span", { class: "detail" }, [message || ""]),
    " ",
    el("code", { class: "code", testid: "chat-error-code" }, [code || ""]),
  );
  box.dataset.code = code || "";
  box.hidden = false;
}

async function sendChat(event) {
  event.preventDefault();
  const input = $("chat-input");
  const text = input.value.trim();
  if (!text || !store.room) return;
  if (text.length > MAX_CHARS) {
    showChatError("chat/invalid", `at most ${MAX_CHARS} characters`);
    return;
  }
  const message = { type: "chat", room: store.room, text };
  if (myChannel() === "players") message.token = store.token;
  else {
    const name = prefs.get("name", "");
    if (name) message.name = name;
  }
  $("chat-error").hidden = true;
  input.value = "";
  try {
    await store.conn.request(message);
  } catch (err) {
    if (!input.value) input.value = text; // keep what was typed, to send again
    showChatError(err.code, err.message);
  }
}

export function wireChat() {
  $("chat-form").addEventListener("submit", sendChat);
}
