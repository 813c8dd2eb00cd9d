// The game page (?game=ID): any game, live or finished, from GET /api/games/{id}, with
// its moves to step through, the clocks, the result, the chat and the exports.
//
// The page applies no rules: the board after every ply comes from
// GET /api/games/{id}/positions and is drawn by the same renderers as the game screen,
// with no legal moves, so nothing can be clicked.

import { el } from "./boards/common.js";
import { reportError } from "./errors.js";
import { boardFor } from "./game.js";
import { fetchJson, loadGames } from "./lobby.js";
import { describeResult } from "./result.js";
import { subscribeLobby } from "./seeks.js";
import { $, app } from "./state.js";

const EXPORT_LABELS = { pgn: "PGN", pdn: "PDN", json: "JSON" };

const page = {
  id: null,
  record: null,
  positions: [],
  formats: [],
  ply: 0,
};

export async function showGamePage(id) {
  clearInterval(app.roomsTimer);
  subscribeLobby(false);
  $("lobby").hidden = true;
  $("game").hidden = true;
  $("replay").hidden = false;
  Object.assign(page, { id, record: null, positions: [], formats: [], ply: 0 });
  document.title = "Game · kibitz";
  $("replay-title").textContent = "Loading the game…";
  $("replay-id").textContent = `game ${id}`;
  for (const part of ["replay-result", "replay-ply"]) $(part).textContent = "";
  for (const part of ["replay-board", "replay-moves", "replay-players", "replay-chat", "replay-exports"]) {
    $(part).replaceChildren();
  }
  const path = `/api/games/${encodeURIComponent(id)}`;
  try {
    const [record, extra] = await Promise.all([fetchJson(path), fetchJson(`${path}/positions`), loadGames()]);
    if (page.id !== id) return; // another page was opened meanwhile
    Object.assign(page, { record, positions: extra.positions, formats: extra.formats, ply: record.moves.length });
  } catch (err) {
    $("replay-title").textContent = "No such game";
    reportError(err);
    return;
  }
  renderPage();
}

/** Move to `ply` (0 is the start position), within the game. */
export function stepTo(ply) {
  if (!page.record) return;
  page.ply = Math.max(0, Math.min(page.record.moves.length, ply));
  renderPosition();
}

function onKey(event) {
  if ($("replay").hidden || !page.record) return;
  if (event.target.closest && event.target.closest("input, textarea, select")) return;
  const moves = { ArrowLeft: page.ply - 1, ArrowRight: page.ply + 1, Home: 0, End: page.record.moves.length };
  if (!(event.key in moves)) return;
  event.preventDefault();
  stepTo(moves[event.key]);
}

export function wireGamePage() {
  $("replay-first").addEventListener("click", () => stepTo(0));
  $("replay-prev").addEventListener("click", () => stepTo(page.ply - 1));
  $("replay-next").addEventListener("click", () => stepTo(page.ply + 1));
  $("replay-last").addEventListener("click", () => stepTo(Infinity));
  document.addEventListener("keydown", onKey);
}

// -- words ------------------------------------------------------------------------------------

function sides(record) {
  const game = app.gamesByName.get(record.game);
  return game ? game.players : ["First player", "Second player"];
}

export function playerLabel(info) {
  if (!info) return "?";
  if (info.kind === "ai") return info.name || `AI level ${info.level}`;
  return info.name || "Anonymous";
}

/** The result in words: "Black (ann) wins: checkmate.", "Draw: threefold repetition.",
 *  with the score where the game has one (from the final board). */
export function resultWords(record, finalView = null) {
  if (record.status === "waiting") return "Waiting for a second player.";
  if (record.status !== "over" || !record.result) return "In progress.";
  const names = sides(record);
  const labels = names.map((name, seat) => `${name} (${playerLabel(record.players[seat])})`);
  return describeResult({ game: record.game, result: record.result, view: finalView }, names, null, labels).text;
}

function clockText(ms) {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor(seconds / 60) % 60;
  const s = String(seconds % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

// -- drawing ----------------------------------------------------------------------------------

function renderPage() {
  const record = page.record;
  const game = app.gamesByName.get(record.game);
  const title = game ? game.title : record.game;
  $("replay-title").textContent = title;
  document.title = `${title} · game ${record.id} · kibitz`;
  const result = $("replay-result");
  const last = page.positions[record.moves.length];
  result.textContent = resultWords(record, last ? last.view : null);
  result.dataset.status = record.status;
  if (record.status !== "over") {
    result.append(" ", el("a", { href: `?watch=${encodeURIComponent(record.id)}`, testid: "replay-watch" }, ["Watch it live"]));
  }
  renderPlayers(record);
  renderChat(record);
  renderExports(record);
  renderPosition();
}

function renderPlayers(record) {
  const names = sides(record);
  $("replay-players").replaceChildren(
    ...record.players.map((info) =>
      el("div", { class: "seat", testid: `replay-seat-${info.seat}` }, [
        el("span", { class: `swatch swatch-${record.game}-${info.seat}`, "aria-hidden": "true" }),
        el("span", { class: "seat-text" }, [
          el("span", { class: "seat-player" }, [names[info.seat], info.kind === "ai" ? el("span", { class: "tag ai" }, ["AI"]) : null]),
          el("span", { class: "seat-name muted" }, [playerLabel(info)]),
        ]),
      ]),
    ),
  );
}

function renderChat(record) {
  const lines = record.chat || [];
  $("replay-chat-panel").hidden = lines.length === 0;
  // Chat is text from other people: text nodes only, never HTML.
  $("replay-chat").replaceChildren(
    ...lines.map((line) => {
      const who = line.name || (Number.isInteger(line.seat) ? playerLabel(record.players[line.seat]) : "");
      return el("li", {}, [who ? el("strong", {}, [`${who}: `]) : null, String(line.text ?? "")]);
    }),
  );
}

function renderExports(record) {
  const base = `/api/games/${encodeURIComponent(record.id)}/export?format=`;
  $("replay-exports").replaceChildren(
    ...page.formats.map((format) =>
      el("a", { class: "btn small", href: base + format, download: `kibitz-${record.id}.${format}`, testid: `export-${format}` }, [
        EXPORT_LABELS[format] || format.toUpperCase(),
      ]),
    ),
  );
}

function renderMoves(record) {
  const list = $("replay-moves");
  const rows = [];
  let row = null;
  record.moves.forEach((move, index) => {
    if (!row || move.seat === 0 || row.children.length > 2) {
      row = el("li", { class: "move-row" }, [el("span", { class: "move-no muted" }, [`${rows.length + 1}.`])]);
      if (move.seat === 1) row.append(el("span", { class: "move empty" }, ["…"]));
      rows.push(row);
    }
    const current = index + 1 === page.ply;
    row.append(
      el(
        "button",
        {
          type: "button",
          class: ["move", "move-button", current && "latest"],
          testid: `replay-move-${index + 1}`,
          "aria-current": current ? "step" : null,
          title: move.move,
          onclick: () => stepTo(index + 1),
        },
        [move.display || move.move],
      ),
    );
  });
  if (!rows.length) rows.push(el("li", { class: "empty muted" }, ["No moves."]));
  list.replaceChildren(...rows);
  const current = list.querySelector("[aria-current]");
  if (current) current.scrollIntoView({ block: "nearest" });
}

function renderClocks(record) {
  const box = $("replay-clocks");
  const move = page.ply > 0 ? record.moves[page.ply - 1] : null;
  box.hidden = !(move && move.clocks_ms);
  if (box.hidden) return;
  const names = sides(record);
  box.textContent = move.clocks_ms.map((ms, seat) => `${names[seat]} ${clockText(ms)}`).join(" · ");
}

async function renderPosition() {
  const record = page.record;
  const total = record.moves.length;
  const ply = page.ply;
  $("replay-ply").textContent = ply === 0 ? `Start (${total} moves)` : `Move ${ply} of ${total}`;
  $("replay-first").disabled = $("replay-prev").disabled = ply === 0;
  $("replay-next").disabled = $("replay-last").disabled = ply === total;
  renderMoves(record);
  renderClocks(record);
  const root = $("replay-board");
  root.dataset.game = record.game;
  root.dataset.ply = String(ply);
  const position = page.positions[ply];
  const board = await boardFor(record.game);
  if (page.record !== record || page.ply !== ply) return; // moved on while the module loaded
  root.replaceChildren();
  if (!board || !position) {
    root.append(el("pre", { class: "position" }, [position ? position.position : ""]));
    return;
  }
  const noop = () => {};
  board.render(root, {
    state: { game: record.game, to_move: position.to_move, legal_moves: [] },
    view: position.view,
    you: null,
    flipped: false,
    canMove: false,
    legal: [],
    lastMove: ply > 0 ? record.moves[ply - 1].move : null,
    prevView: ply > 0 && page.positions[ply - 1] ? page.positions[ply - 1].view : null,
    ui: {},
    play: noop,
    choose: async () => null,
    rerender: noop,
  });
}
