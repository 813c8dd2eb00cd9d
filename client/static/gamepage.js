// The game page (?game=ID): any game, live or finished, from GET /api/games/{id}, with
// its moves to step through, the clocks, the result, the chat and the exports.
//
// The page applies no rules: the board after every ply comes from
// GET /api/games/{id}/positions and is drawn by the same renderers as the game screen,
// with no legal moves, so nothing can be clicked.
//
// A finished game can be analysed by the worker pool: "Analyse" posts
// /api/games/{id}/analysis, the page polls GET on it while it runs, then draws the
// evaluation graph (SVG, from White's / the first player's side), marks the moves (?! ? ??)
// and shows each player's accuracy. Every text goes in with textContent (el()), never HTML.
//
// It registers itself with the router as the screen "gamepage".

import { el, svg } from "./boards/common.js";
import { reportError } from "./errors.js";
import { describeResult } from "./result.js";
import { registerScreen } from "./router.js";
import { store } from "./store.js";
import { $, boardFor, botBadge, changeText, fetchJson, loadGames, playerLabel, ratingText } from "./util.js";

const EXPORT_LABELS = { pgn: "PGN", pdn: "PDN", json: "JSON" };
const ANALYSIS_POLL_MS = 1000;
const ANALYSIS_MAX_POLLS = 900; // a quarter of an hour, then the page stops asking
const GRAPH_W = 320;
const GRAPH_H = 90;

const page = {
  id: null,
  record: null,
  positions: [],
  formats: [],
  ply: 0,
  analysis: null, // the answer of GET /api/games/{id}/analysis, or null
  pollTimer: null,
};

async function showGamePage(id) {
  clearTimeout(page.pollTimer);
  Object.assign(page, { id, record: null, positions: [], formats: [], ply: 0, analysis: null, pollTimer: null });
  document.title = "Game · kibitz";
  $("replay-title").textContent = "Loading the game…";
  $("replay-id").textContent = `game ${id}`;
  for (const part of ["replay-result", "replay-ply", "replay-analysis-status", "replay-accuracy"]) $(part).textContent = "";
  $("replay-graph").replaceChildren();
  $("replay-analysis").hidden = true;
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
  if (page.record.status === "over") loadAnalysis(id, 0);
}

registerScreen("gamepage", { show: showGamePage });

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
  $("replay-analyse").addEventListener("click", startAnalysis);
  document.addEventListener("keydown", onKey);
}

// -- words ------------------------------------------------------------------------------------

function sides(record) {
  const game = store.gamesByName.get(record.game);
  return game ? game.players : ["First player", "Second player"];
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

/** What played an AI seat: our own searcher, or a UCI engine by its name. */
export function engineName(engine) {
  return engine === "kibitz" ? "kibitz's searcher" : String(engine);
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
  const game = store.gamesByName.get(record.game);
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
          el("span", { class: "seat-name muted" }, [playerLabel(info), botBadge(info.bot), ratingWords(record, info)]),
          info.kind === "ai" && info.engine
            ? el("span", { class: "seat-engine muted small", testid: `replay-engine-${info.seat}` }, [`played by ${engineName(info.engine)}`])
            : null,
        ]),
      ]),
    ),
  );
}

/** " 1500 → 1512 (+12)" for a rated game's player, " 1500?" before the change is known, or null. */
function ratingWords(record, info) {
  const change = Array.isArray(record.ratings) ? record.ratings[info.seat] : null;
  if (change) {
    return el("span", { class: "rating", testid: `replay-rating-${info.seat}` }, [
      ` ${change.before} \u2192 ${change.after} (${changeText(change.change)})`,
    ]);
  }
  const rating = ratingText(info.rating, info.provisional);
  return rating ? el("span", { class: "rating" }, [` ${rating}`]) : null;
}

// Both channels, in the order the lines were said (the record's order): the players'
// lines under their names, the spectators' marked "(watching)".
function renderChat(record) {
  const lines = Array.isArray(record.chat) ? record.chat : [];
  $("replay-chat-panel").hidden = lines.length === 0;
  // Chat is text from other people: text nodes only, never HTML.
  $("replay-chat").replaceChildren(
    ...lines.map((line) => {
      const spectator = line.channel === "spectators";
      const name = line.name || (Number.isInteger(line.seat) ? playerLabel(record.players[line.seat]) : "spectator");
      const who = spectator ? `${name} (watching)` : name;
      return el("li", { class: "chat-line", dataset: { channel: spectator ? "spectators" : "players" }, testid: "replay-chat-line" }, [
        el("strong", { class: "chat-who" }, [`${who}: `]),
        String(line.text ?? ""),
      ]);
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
  const judged = new Map(((page.analysis && page.analysis.moves) || []).map((m) => [m.ply, m]));
  record.moves.forEach((move, index) => {
    if (!row || move.seat === 0 || row.children.length > 2) {
      row = el("li", { class: "move-row" }, [el("span", { class: "move-no muted" }, [`${rows.length + 1}.`])]);
      if (move.seat === 1) row.append(el("span", { class: "move empty" }, ["…"]));
      rows.push(row);
    }
    const current = index + 1 === page.ply;
    const judgedMove = judged.get(index + 1);
    const mark =
      judgedMove && judgedMove.mark
        ? el("span", { class: `move-mark mark-${judgedMove.class}`, title: `${judgedMove.class} (${judgedMove.loss} ${page.analysis.thresholds.unit} lost)`, testid: `replay-mark-${index + 1}` }, [judgedMove.mark])
        : null;
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
        [move.display || move.move, mark],
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

// The line an AI expected when it played the selected move (its move first). The server
// keeps it from the players while the game runs (it is a hint) and shows it once it is over.
function renderLine(record) {
  const box = $("replay-line");
  const move = page.ply > 0 ? record.moves[page.ply - 1] : null;
  box.hidden = !(move && Array.isArray(move.pv) && move.pv.length);
  if (box.hidden) return;
  box.textContent = `${sides(record)[move.seat]} expected: ${move.pv.join(" ")}`;
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
  renderLine(record);
  renderGraph();
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

// -- analysis ---------------------------------------------------------------------------------

function analysisPath(id) {
  return `/api/games/${encodeURIComponent(id)}/analysis`;
}

/** GET the analysis; keep polling while it runs (bounded by ANALYSIS_MAX_POLLS). */
async function loadAnalysis(id, polls) {
  let analysis = null;
  try {
    const response = await fetch(analysisPath(id), { headers: { Accept: "application/json" } });
    if (response.ok) analysis = await response.json();
    else if (response.status !== 404) throw new Error(`the analysis answered ${response.status}`);
  } catch (err) {
    if (page.id === id) $("replay-analysis-status").textContent = "Could not load the analysis.";
    return;
  }
  if (page.id !== id) return;
  showAnalysis(analysis);
  if (analysis && (analysis.status === "queued" || analysis.status === "running") && polls < ANALYSIS_MAX_POLLS) {
    page.pollTimer = setTimeout(() => loadAnalysis(id, polls + 1), ANALYSIS_POLL_MS);
  }
}

async function startAnalysis() {
  const id = page.id;
  if (!id) return;
  $("replay-analyse").disabled = true;
  try {
    const response = await fetch(analysisPath(id), { method: "POST", headers: { Accept: "application/json" } });
    const body = await response.json();
    if (page.id !== id) return;
    if (!response.ok) {
      $("replay-analysis-status").textContent = body.message || "The analysis could not start.";
      $("replay-analyse").disabled = false;
      return;
    }
    clearTimeout(page.pollTimer);
    showAnalysis(body);
    if (body.status === "queued" || body.status === "running") {
      page.pollTimer = setTimeout(() => loadAnalysis(id, 1), ANALYSIS_POLL_MS);
    }
  } catch (err) {
    $("replay-analyse").disabled = false;
    reportError(err);
  }
}

function showAnalysis(analysis) {
  page.analysis = analysis;
  $("replay-analysis").hidden = false;
  const button = $("replay-analyse");
  const status = $("replay-analysis-status");
  const state = analysis ? analysis.status : "none";
  $("replay-analysis").dataset.status = state;
  button.hidden = state === "done" || state === "queued" || state === "running";
  button.disabled = false;
  button.textContent = state === "failed" ? "Analyse again" : "Analyse";
  if (!analysis) {
    status.textContent = "Not analysed yet: the bots can evaluate every position of this game.";
  } else if (state === "queued" || state === "running") {
    const { done, total } = analysis.progress;
    status.textContent = `Analysing… ${done} of ${total} positions`;
  } else if (state === "failed") {
    status.textContent = `The analysis failed at ${(analysis.failed_plies || []).length} positions.`;
  } else {
    const engines = (analysis.engines || []).map(engineName).join(", ") || "the bots";
    status.textContent = `Analysed by ${engines}; scores in ${analysis.thresholds.unit}, ${sides(page.record)[0]}'s side up.`;
  }
  renderAccuracy();
  renderMoves(page.record);
  renderGraph();
}

function renderAccuracy() {
  const box = $("replay-accuracy");
  const analysis = page.analysis;
  if (!analysis || !analysis.accuracy) {
    box.replaceChildren();
    return;
  }
  const names = sides(page.record);
  box.replaceChildren(
    ...analysis.accuracy.map((value, seat) => {
      const counts = (analysis.counts && analysis.counts[seat]) || {};
      const plural = { inaccuracy: "inaccuracies", mistake: "mistakes", blunder: "blunders" };
      const tally = Object.entries(plural).map(([one, many]) => `${counts[one] || 0} ${counts[one] === 1 ? one : many}`).join(", ");
      return el("span", { class: "accuracy", testid: `replay-accuracy-${seat}` }, [
        el("strong", {}, [`${names[seat]}: `]),
        value === null ? "no moves" : `${value}% accuracy`,
        el("span", { class: "muted" }, [` (${tally})`]),
      ]);
    }),
  );
}

/** The evaluation graph: one point per position, White's (the first player's) advantage up. */
function renderGraph() {
  const root = $("replay-graph");
  const analysis = page.analysis;
  const record = page.record;
  if (!analysis || !record || !(analysis.positions || []).length) {
    root.replaceChildren();
    return;
  }
  const cap = analysis.thresholds.cap || 1;
  const total = Math.max(1, record.moves.length);
  const mid = GRAPH_H / 2;
  const x = (ply) => (ply / total) * GRAPH_W;
  const y = (score) => mid - Math.tanh((2.5 * score) / cap) * (mid - 2);
  const points = analysis.positions.filter((p) => typeof p.score === "number").map((p) => [x(p.ply), y(p.score), p]);
  const line = points.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ");
  const children = [
    svg("rect", { class: "eval-bg", x: 0, y: 0, width: GRAPH_W, height: GRAPH_H }),
    // The first player's share, filled up from the bottom to the curve.
    points.length ? svg("path", { class: "eval-area", d: `M${points[0][0].toFixed(1)},${GRAPH_H} L${line.replaceAll(" ", " L")} L${points[points.length - 1][0].toFixed(1)},${GRAPH_H} Z` }) : null,
    svg("line", { class: "eval-mid", x1: 0, y1: mid, x2: GRAPH_W, y2: mid }),
    points.length ? svg("polyline", { class: "eval-line", points: line }) : null,
    svg("line", { class: "eval-now", x1: x(page.ply), y1: 0, x2: x(page.ply), y2: GRAPH_H }),
  ];
  const byPly = new Map(points.map(([px, py, p]) => [p.ply, [px, py]]));
  for (const move of analysis.moves || []) {
    const at = byPly.get(move.ply);
    if (!move.class || !at) continue;
    const dot = svg("circle", { class: `eval-dot mark-${move.class}`, cx: at[0], cy: at[1], r: 3.2 });
    dot.append(svg("title", {}, []));
    dot.firstChild.textContent = `${move.ply}: ${move.class}`;
    children.push(dot);
  }
  const graph = svg(
    "svg",
    {
      viewBox: `0 0 ${GRAPH_W} ${GRAPH_H}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": "Evaluation after every move; click to go to a move",
      testid: "replay-graph-svg",
      dataset: { points: String(points.length) },
    },
    children,
  );
  graph.addEventListener("click", (event) => {
    const box = graph.getBoundingClientRect();
    if (box.width > 0) stepTo(Math.round(((event.clientX - box.left) / box.width) * total));
  });
  root.replaceChildren(graph);
}
