// The chat of the room on screen. Players talk on the players' channel, spectators on
// theirs; the server sends a channel's last lines when you start following the room and
// every new line after that:
//   {"type": "chat", "room", "channel": "players" | "spectators",
//    "messages": [{"id", "seat", "name", "text", "at"}]}
// Chat is text typed by other people: it is only ever put in the page as text nodes
// (el() children, textContent), never as HTML. Against the computer the players' channel
// says so: the computer does not chat. Words from the catalogue (chat.*). A panel of the
// game screen (game.js).

import { currentAccount } from "./account.js";
import { el } from "./boards/common.js";
import { reportPlayer } from "./civil.js";
import { friendlyError } from "./errors.js";
import { t } from "./i18n.js";
import { prefs } from "./storage.js";
import { store } from "./store.js";
import { $, sideName } from "./util.js";

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
    const side = sideName(state.game, line.seat);
    const name = line.account || line.name;
    return name ? t("chat.who", { name, side }) : side;
  }
  return line.account || line.name || t("chat.spectator");
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
      title: t("chat.report.title", { name: line.account }),
      "aria-label": t("chat.report.title", { name: line.account }),
      onclick: () => reportPlayer(line.account, { room: chat.room, line: String(line.text ?? "") }),
    },
    [t("chat.report")],
  );
}

/** Whether the viewer plays the computer (its seat in the players' channel reads nothing). */
function againstComputer() {
  const state = store.state;
  if (!state || myChannel() !== "players") return false;
  const other = state.seats && state.seats[1 - store.you];
  return Boolean(other && other.kind === "ai");
}

export function renderChat() {
  const channel = myChannel();
  const computer = againstComputer();
  let words = t("chat.channel.spectators");
  if (channel === "players") words = computer ? t("chat.channel.computer") : t("chat.channel.players");
  $("chat-channel").textContent = words;
  $("chat-panel").dataset.channel = channel;
  $("chat-panel").dataset.computer = String(computer);
  const list = $("chat");
  const lines = [...chat.lines[channel].values()].sort((a, b) => (a.at || 0) - (b.at || 0));
  if (!lines.length) {
    list.replaceChildren(el("li", { class: "empty muted" }, [computer ? t("chat.empty.computer") : t("chat.empty")]));
    return;
  }
  list.replaceChildren(
    ...lines.map((line) =>
      el("li", { class: ["chat-line", Number.isInteger(line.seat) && line.seat === store.you && "mine"], testid: "chat-line" }, [
        el("strong", { class: "chat-who" }, [t("chat.line.who", { who: who(line) })]),
        " ",
        el("span", { class: "chat-text" }, [String(line.text ?? "")]),
        reportButton(line),
      ]),
    ),
  );
  list.scrollTop = list.scrollHeight;
}

/** The error in words; the code and the server's own words stay out of sight (data-code,
 *  title) for tests and reports. `detail`: words of this page to add (already translated). */
function showChatError(code, message, detail = "") {
  const box = $("chat-error");
  box.replaceChildren(
    el("span", {}, [t("chat.error", { error: friendlyError(code) })]),
    detail ? el("span", { class: "detail" }, [` ${detail}`]) : null,
  );
  box.dataset.code = code || "";
  box.title = [code, message].filter(Boolean).join(": ");
  box.hidden = false;
}

async function sendChat(event) {
  event.preventDefault();
  const input = $("chat-input");
  const text = input.value.trim();
  if (!text || !store.room) return;
  if (text.length > MAX_CHARS) {
    showChatError("chat/invalid", "", t("chat.tooLong", { n: MAX_CHARS }));
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
