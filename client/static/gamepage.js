// The game page (?game=ID): any game, live or finished, from GET /api/games/{id}, with
// its moves to step through, the clocks, the result, the chat and the exports.
//
// The page applies no rules: the board after every ply comes from
// GET /api/games/{id}/positions and is drawn by the same renderers as the game screen,
// with no legal moves, so nothing can be clicked.
//
// A finished game can be analysed by the worker pool: "Analyse" posts
// /api/games/{id}/analysis, the page polls GET on it while it runs, then draws the
// evaluation graph (SVG, from White's / the first player's side), marks the moves (?! ? ??),
// writes under each move the evaluation after it (chess: +0.35 pawns, #3 for a mate in 3;
// other games in the analysis's unit) and, when it was not the best move found, the best
// one (the server's `best_display`: SAN in chess, else the wire notation), shows the
// current position's evaluation and best move under the board (#replay-eval) and each
// player's accuracy. A click on the graph or on a move goes to that ply. A game never
// analysed answers {"status": "none"}, so opening a page makes no failed request.
//
// An id with no game shows a "No game with this id" state with a link to the lobby, the
// step buttons hidden. Every word comes from the catalogue (locales/*/gamepage.json) and
// goes in as text (el()), never as HTML.
//
// It registers itself with the router as the screen "gamepage".

import { el, svg } from "./boards/common.js";
import { reportError } from "./errors.js";
import { formatNumber, has, t } from "./i18n.js";
import { movesText } from "./movecount.js";
import { renderMaterial } from "./material.js";
import { describeResult } from "./result.js";
import { registerScreen } from "./router.js";
import { store } from "./store.js";
import {
  $,
  boardFor,
  botBadge,
  changeText,
  fetchJson,
  gameTitle,
  loadGames,
  playerLabel,
  ratingText,
  sideName,
} from "./util.js";

const EXPORT_LABELS = { pgn: "PGN", pdn: "PDN", json: "JSON" }; // format names: not translated
const ANALYSIS_POLL_MS = 1000;
const ANALYSIS_MAX_POLLS = 900; // a quarter of an hour, then the page stops asking
const GRAPH_W = 320;
const GRAPH_H = 90;
const CLASSES = ["inaccuracy", "mistake", "blunder"];

/** "blunder", "gaffe": a move's class in words. */
function classWord(name) {
  const key = `gamepage.class.${name}`;
  return has(key) ? t(key) : String(name);
}

/** "1 blunder", "2 gaffes": how many moves of a class. */
function classCount(name, n) {
  const key = `gamepage.count.${name}`;
  return has(key) ? t(key, { n }) : `${n} ${name}`;
}

const page = {
  id: null,
  record: null,
  positions: [],
  formats: [],
  ply: 0,
  analysis: null, // the answer of GET /api/games/{id}/analysis, or null
  pollTimer: null,
};

// -- the page's parts that index.html may not have yet ---------------------------------------

/** `#replay-rules-btn`, the "How to play" button of the game head (made here if missing). */
function rulesButton() {
  let button = $("replay-rules-btn");
  if (!button) {
    button = el("button", { type: "button", class: "btn ghost small", id: "replay-rules-btn", testid: "replay-rules" }, [
      t("gamepage.rules"),
    ]);
    $("replay-title").closest(".game-head").append(button);
  }
  return button;
}

/** `#replay-eval`, the current position's evaluation and best move (made here if missing). */
function evalBox() {
  let box = $("replay-eval");
  if (!box) {
    box = el("p", { id: "replay-eval", class: "replay-eval", testid: "replay-eval", "aria-live": "polite", hidden: true });
    navBar().after(box);
  }
  return box;
}

function navBar() {
  return $("replay-first").closest(".replay-nav");
}

/** The line saying which keys step through the moves (an id of H1's, else the nav's next line). */
function keysHint() {
  const hint = $("replay-keys-hint");
  if (hint) return hint;
  const next = navBar().nextElementSibling;
  return next && next.matches("p.small:not([id])") ? next : null;
}

/** Show the parts of a found game, or hide them all for an id with no game. */
function showFound(found) {
  $("replay").dataset.state = found ? "found" : "missing";
  const parts = [navBar(), keysHint(), $("replay-board"), $("replay-players").closest("aside"), rulesButton()];
  for (const part of parts) if (part) part.hidden = !found;
  if (!found) {
    for (const part of ["replay-analysis", "replay-clocks", "replay-line", "replay-eval"]) if ($(part)) $(part).hidden = true;
  }
}

// -- the screen ------------------------------------------------------------------------------

async function showGamePage(id) {
  clearTimeout(page.pollTimer);
  Object.assign(page, { id, record: null, positions: [], formats: [], ply: 0, analysis: null, pollTimer: null });
  document.title = t("gamepage.docTitle");
  showFound(true);
  rulesButton().hidden = true;
  $("replay-title").textContent = t("gamepage.loading");
  $("replay-id").textContent = t("gamepage.gameId", { id });
  for (const part of ["replay-result", "replay-ply", "replay-analysis-status", "replay-accuracy"]) $(part).textContent = "";
  $("replay-graph").replaceChildren();
  $("replay-analysis").hidden = true;
  evalBox().hidden = true;
  for (const part of ["replay-board", "replay-moves", "replay-players", "replay-chat", "replay-exports"]) {
    $(part).replaceChildren();
  }
  const path = `/api/games/${encodeURIComponent(id)}`;
  try {
    const [record, extra] = await Promise.all([fetchJson(path), fetchJson(`${path}/positions`), loadGames()]);
    if (page.id !== id) return; // another page was opened meanwhile
    Object.assign(page, { record, positions: extra.positions, formats: extra.formats, ply: record.moves.length });
  } catch (err) {
    if (page.id !== id) return;
    if (err && err.code === "game/not_found") {
      showMissing(id);
    } else {
      $("replay-title").textContent = t("gamepage.loadFailed");
      reportError(err);
    }
    return;
  }
  renderPage();
  if (page.record.status === "over") loadAnalysis(id, 0);
}

registerScreen("gamepage", { show: showGamePage });

/** The page of an id with no game: says so, links to the lobby, nothing to step through. */
function showMissing(id) {
  showFound(false);
  document.title = t("gamepage.docTitleMissing");
  $("replay-title").textContent = t("gamepage.notFound");
  const result = $("replay-result");
  result.dataset.status = "missing";
  result.replaceChildren(
    el("span", {}, [t("gamepage.notFoundText", { id })]),
    el("a", { class: "btn small replay-missing-lobby", href: "/", testid: "replay-missing-lobby" }, [t("gamepage.backToLobby")]),
  );
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
  $("replay-analyse").addEventListener("click", startAnalysis);
  document.addEventListener("keydown", onKey);
  rulesButton();
  evalBox();
}

// -- words ------------------------------------------------------------------------------------

/** The server's side names (English: result.js matches the reasons of old records with them). */
function serverSides(record) {
  const game = store.gamesByName.get(record.game);
  return game ? game.players : ["", ""];
}

/** The side names in the page's language ("White", "Blancs"). */
function sides(record) {
  return [sideName(record.game, 0), sideName(record.game, 1)];
}

/** The result in words: "Black (ann) wins: checkmate.", "Draw: threefold repetition.",
 *  with the score where the game has one (from the final board). */
export function resultWords(record, finalView = null) {
  if (record.status === "waiting") return t("gamepage.waiting");
  if (record.status !== "over" || !record.result) return t("gamepage.inProgress");
  const names = sides(record);
  const labels = names.map((name, seat) => t("gamepage.sideLabel", { side: name, player: playerLabel(record.players[seat], record.game) }));
  return describeResult({ game: record.game, result: record.result, view: finalView }, serverSides(record), null, labels).text;
}

/** What played an AI seat: our own searcher, or a UCI engine by its name. */
export function engineName(engine) {
  return engine === "kibitz" ? t("gamepage.engine.kibitz") : String(engine);
}

function clockText(ms) {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(seconds / 3600);
  const m = Math.floor(seconds / 60) % 60;
  const s = String(seconds % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

/** Per ply (index = ply - 1): the number of its row in the move list and whether it is the
 *  row's second move ("2… Qh4#"); rows start with the first player's moves. */
function moveNumbers(record) {
  const out = [];
  let row = 0;
  let filled = 0;
  for (const move of record.moves) {
    if (row === 0 || move.seat === 0 || filled >= 2) {
      row += 1;
      filled = move.seat === 1 ? 1 : 0;
    }
    filled += 1;
    out.push({ no: row, second: move.seat === 1 });
  }
  return out;
}

/** "2. g4" or "2… Qh4#": a move as the move list numbers it. */
function numberedMove(record, ply) {
  const { no, second } = moveNumbers(record)[ply - 1];
  const move = record.moves[ply - 1];
  return `${no}${second ? "\u2026" : "."} ${move.display || move.move}`;
}

// -- evaluations --------------------------------------------------------------------------------

/** The unit scores are shown in: chess's centipawns as pawns. */
function shownUnit(analysis) {
  const unit = analysis && analysis.thresholds ? analysis.thresholds.unit : "points";
  return unit === "centipawns" ? "pawns" : unit;
}

/** A unit's name in the page's language ("pawns", "pions"); the server's word if unknown.
 *  With `n`, the form that goes with that number ("0,5 pion", "-2 pions", "1.5 pawns"). */
function unitName(unit, n) {
  const counted = `gamepage.units.${unit}`;
  if (typeof n === "number" && Number.isFinite(n) && has(counted)) return t(counted, { n: Math.abs(n) });
  const key = `gamepage.unit.${unit}`;
  return has(key) ? t(key) : String(unit);
}

function unitWords(analysis) {
  return unitName(shownUnit(analysis));
}

/**
 * A position's evaluation, short, and its explanation: "+0.35" (chess, in pawns), "#3" /
 * "#-3" (a forced win in 3 moves for the first / the second player), "1-0" / "0-1" (the
 * game is won); other games "+2" in their unit. `position` as the analysis has it.
 */
function evalText(analysis, position) {
  if (!position || typeof position.score !== "number") return null;
  const game = analysis.game || (page.record && page.record.game);
  const names = page.record ? sides(page.record) : ["", ""];
  if (typeof position.mate === "number") {
    const winner = position.score >= 0 ? 0 : 1;
    if (position.mate === 0) {
      return { text: winner === 0 ? "1-0" : "0-1", title: t("gamepage.eval.won", { side: names[winner] }) };
    }
    const plies = Math.abs(position.mate);
    const moves = game === "chess" || game === "draughts" ? Math.ceil(plies / 2) : plies;
    return {
      text: `#${winner === 0 ? "" : "-"}${moves}`,
      title: t("gamepage.eval.forced", { side: names[winner], n: moves }),
    };
  }
  const pawns = analysis.thresholds && analysis.thresholds.unit === "centipawns";
  const value = pawns ? position.score / 100 : position.score;
  const text = formatNumber(value, {
    minimumFractionDigits: pawns ? 2 : 0,
    maximumFractionDigits: pawns ? 2 : 1,
    signDisplay: "exceptZero",
  });
  return { text, title: t("gamepage.eval.score", { score: text, unit: unitName(shownUnit(analysis), value) }) };
}

/** The analysis's positions by ply. */
function positionsByPly() {
  const analysis = page.analysis;
  return new Map(((analysis && analysis.positions) || []).filter((p) => typeof p.ply === "number").map((p) => [p.ply, p]));
}

/** The best move of a position in the game's notation for people (SAN in chess), else wire. */
function bestText(position) {
  if (!position || !position.best) return null;
  return position.best_display || position.best;
}

/** The best move found before ply `ply`, when the move played there was not it; else null. */
function missedBest(record, byPly, ply) {
  const before = byPly.get(ply - 1);
  const move = record.moves[ply - 1];
  if (!before || !before.best || !move || before.best === move.move) return null;
  return bestText(before);
}

function hasEvaluations() {
  const state = page.analysis ? page.analysis.status : "none";
  return state !== "none" && Array.isArray(page.analysis.positions) && page.analysis.positions.length > 0;
}

// -- drawing ----------------------------------------------------------------------------------

function renderPage() {
  const record = page.record;
  const title = gameTitle(record.game);
  $("replay-title").textContent = title;
  document.title = t("gamepage.docTitleGame", { title, id: record.id });
  rulesButton().dataset.rules = record.game;
  rulesButton().hidden = false;
  const result = $("replay-result");
  const last = page.positions[record.moves.length];
  result.textContent = resultWords(record, last ? last.view : null);
  result.dataset.status = record.status;
  if (record.status !== "over") {
    result.append(" ", el("a", { href: `?watch=${encodeURIComponent(record.id)}`, testid: "replay-watch" }, [t("gamepage.watch")]));
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
          el("span", { class: "seat-player" }, [names[info.seat], info.kind === "ai" ? el("span", { class: "tag ai" }, [t("gamepage.aiTag")]) : null]),
          el("span", { class: "seat-name muted" }, [playerLabel(info, record.game), botBadge(info.bot), ratingWords(record, info)]),
          el("span", { id: `replay-material-${info.seat}`, class: "replay-material", testid: `replay-material-${info.seat}` }),
          info.kind === "ai" && info.engine
            ? el("span", { class: "seat-engine muted small", testid: `replay-engine-${info.seat}` }, [
                t("gamepage.playedBy", { engine: engineName(info.engine) }),
              ])
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
      const name = line.name || (Number.isInteger(line.seat) ? playerLabel(record.players[line.seat], record.game) : t("gamepage.chat.spectator"));
      const who = spectator ? t("gamepage.chat.watching", { name }) : name;
      return el("li", { class: "chat-line", dataset: { channel: spectator ? "spectators" : "players" }, testid: "replay-chat-line" }, [
        el("strong", { class: "chat-who" }, [t("gamepage.chat.who", { who })]),
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

/** A move's mark (?! ? ??) from the analysis, with the loss in the game's unit as its title. */
function markOf(judgedMove, ply) {
  if (!judgedMove || !judgedMove.mark) return null;
  const loss = formatNumber(judgedMove.loss, { maximumFractionDigits: 2 });
  const title = t("gamepage.markTitle", { class: classWord(judgedMove.class), loss, unit: unitName(page.analysis.thresholds.unit, judgedMove.loss) });
  return el("span", { class: `move-mark mark-${judgedMove.class}`, title, testid: `replay-mark-${ply}` }, [judgedMove.mark]);
}

/** Under an analysed move: the evaluation after it and, when it was not the best, the best. */
function moveNotes(record, byPly, ply) {
  if (!hasEvaluations()) return null;
  const value = evalText(page.analysis, byPly.get(ply));
  const best = missedBest(record, byPly, ply);
  if (!value && !best) return null;
  return el("span", { class: "move-notes" }, [
    value ? el("span", { class: "move-eval", title: value.title, testid: `replay-eval-${ply}` }, [value.text]) : null,
    best ? el("span", { class: "move-best", title: t("gamepage.bestWas", { move: best }), testid: `replay-best-${ply}` }, [t("gamepage.bestShort", { move: best })]) : null,
  ]);
}

function renderMoves(record) {
  const list = $("replay-moves");
  const rows = [];
  let row = null;
  const judged = new Map(((page.analysis && page.analysis.moves) || []).map((m) => [m.ply, m]));
  const byPly = positionsByPly();
  list.classList.toggle("analysed", hasEvaluations());
  record.moves.forEach((move, index) => {
    const ply = index + 1;
    if (!row || move.seat === 0 || row.children.length > 2) {
      row = el("li", { class: "move-row" }, [el("span", { class: "move-no muted" }, [`${rows.length + 1}.`])]);
      if (move.seat === 1) row.append(el("span", { class: "move empty" }, ["\u2026"]));
      rows.push(row);
    }
    const current = ply === page.ply;
    row.append(
      el(
        "button",
        {
          type: "button",
          class: ["move", "move-button", current && "latest"],
          testid: `replay-move-${ply}`,
          "aria-current": current ? "step" : null,
          title: move.move,
          onclick: () => stepTo(ply),
        },
        [el("span", { class: "move-san" }, [move.display || move.move, markOf(judged.get(ply), ply)]), moveNotes(record, byPly, ply)],
      ),
    );
  });
  if (!rows.length) rows.push(el("li", { class: "empty muted" }, [t("gamepage.noMoves")]));
  list.replaceChildren(...rows);
  const current = list.querySelector("[aria-current]");
  if (current) showInBox(list, current);
}

/** Scrolls the move list's own box (never the window) so that `item` shows in it. The page
 *  opens at its top; on a phone, where the list is not a scrolling box, nothing moves. */
function showInBox(list, item) {
  let box = list;
  while (box && box !== document.body) {
    const overflow = getComputedStyle(box).overflowY;
    if ((overflow === "auto" || overflow === "scroll") && box.scrollHeight > box.clientHeight) break;
    box = box.parentElement;
  }
  if (!box || box === document.body) return;
  const top = item.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  if (top < box.scrollTop) box.scrollTop = top;
  else if (top + item.offsetHeight > box.scrollTop + box.clientHeight) box.scrollTop = top + item.offsetHeight - box.clientHeight;
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
  // The server's pv_display: the line in the game's notation (SAN in chess), like the moves.
  const shown = Array.isArray(move.pv_display) && move.pv_display.length ? move.pv_display : move.pv;
  box.textContent = t("gamepage.expected", { side: sides(record)[move.seat], line: shown.join(" ") });
}

/** Under the board: the evaluation of the position shown, its best move, and the better move
 *  the last move missed. */
function renderEval(record) {
  const box = evalBox();
  const byPly = positionsByPly();
  const position = byPly.get(page.ply);
  box.hidden = !hasEvaluations() || !position;
  if (box.hidden) {
    box.replaceChildren();
    return;
  }
  const value = evalText(page.analysis, position);
  const best = bestText(position);
  const missed = page.ply > 0 ? missedBest(record, byPly, page.ply) : null;
  box.dataset.ply = String(page.ply);
  const parts = [
    value
      ? el("span", { class: "eval-now-value", testid: "replay-now-eval", title: value.title }, [t("gamepage.evalNow", { score: value.text })])
      : el("span", { class: "muted" }, [t("gamepage.evalNone")]),
    best ? el("span", { class: "eval-now-best", testid: "replay-now-best" }, [t("gamepage.bestHere", { move: best })]) : null,
    missed
      ? el("span", { class: "eval-now-missed", testid: "replay-now-missed" }, [
          t("gamepage.insteadOf", { played: numberedMove(record, page.ply), move: missed }),
        ])
      : null,
  ];
  box.replaceChildren(...parts.filter(Boolean));
}

async function renderPosition() {
  const record = page.record;
  const total = record.moves.length;
  const ply = page.ply;
  $("replay-ply").textContent =
    ply === 0
      ? t("gamepage.plyStart", { moves: movesText(record.game, total) })
      : t("gamepage.plyAfter", { move: numberedMove(record, ply), ply, total });
  $("replay-first").disabled = $("replay-prev").disabled = ply === 0;
  $("replay-next").disabled = $("replay-last").disabled = ply === total;
  renderMoves(record);
  renderClocks(record);
  renderLine(record);
  renderEval(record);
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
  showMaterial(record, position);
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

/** Each seat's captured pieces and material lead at this ply (chess, draughts: material.js). */
function showMaterial(record, position) {
  const roots = { 0: $("replay-material-0"), 1: $("replay-material-1") };
  renderMaterial({ game: record.game, view: position.view }, false, roots);
  // The game screen's boxes use the same test ids: these get the page's own.
  for (const node of document.querySelectorAll("#replay-players [data-testid^='material-diff-']")) {
    node.dataset.testid = `replay-${node.dataset.testid}`;
  }
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
  } catch {
    if (page.id === id) $("replay-analysis-status").textContent = t("gamepage.analysis.loadFailed");
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
      const key = `errors.${body.code}`;
      $("replay-analysis-status").textContent = body.code && has(key) ? t(key) : body.message || t("gamepage.analysis.startFailed");
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

function showAnalysis(answer) {
  // A game never analysed: {"status": "none"} (a 404 from an older server).
  const analysis = answer && answer.status !== "none" ? answer : null;
  page.analysis = analysis;
  $("replay-analysis").hidden = false;
  const button = $("replay-analyse");
  const status = $("replay-analysis-status");
  const state = analysis ? analysis.status : "none";
  $("replay-analysis").dataset.status = state;
  button.hidden = state === "done" || state === "queued" || state === "running";
  button.disabled = false;
  button.textContent = state === "failed" ? t("gamepage.analysis.again") : t("gamepage.analysis.start");
  if (!analysis) {
    status.textContent = t("gamepage.analysis.none");
  } else if (state === "queued" || state === "running") {
    const { done, total } = analysis.progress;
    status.textContent = t("gamepage.analysis.running", { done, total });
  } else if (state === "failed") {
    const n = (analysis.failed_plies || []).length;
    status.textContent = t("gamepage.analysis.failed", { n });
  } else {
    const engines = (analysis.engines || []).map(engineName).join(", ") || t("gamepage.analysis.bots");
    // A solved game (matches...) has only forced wins: no unit to speak of.
    const scored = (analysis.positions || []).filter((p) => typeof p.score === "number");
    const solved = scored.length > 0 && scored.every((p) => typeof p.mate === "number");
    status.textContent = t(solved ? "gamepage.analysis.doneMate" : "gamepage.analysis.done", { engines, unit: unitWords(analysis), side: sides(page.record)[0] });
  }
  renderAccuracy();
  renderMoves(page.record);
  renderEval(page.record);
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
      const tally = CLASSES.map((name) => classCount(name, counts[name] || 0)).join(", ");
      return el("span", { class: "accuracy", testid: `replay-accuracy-${seat}` }, [
        el("strong", {}, [t("gamepage.accuracy.who", { side: names[seat] })]),
        value === null ? t("gamepage.accuracy.noMoves") : t("gamepage.accuracy.value", { value: formatNumber(value, { maximumFractionDigits: 1 }) }),
        el("span", { class: "muted" }, [` (${tally})`]),
      ]);
    }),
  );
}

/** The evaluation graph: one point per position, White's (the first player's) advantage up;
 *  a click anywhere on it (a point, a dot) goes to the ply under it. */
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
    const dot = svg("circle", { class: `eval-dot mark-${move.class}`, cx: at[0], cy: at[1], r: 3.2, dataset: { ply: String(move.ply) } });
    dot.append(svg("title", {}, []));
    dot.firstChild.textContent = t("gamepage.graph.dot", { move: numberedMove(record, move.ply), class: classWord(move.class) });
    children.push(dot);
  }
  const graph = svg(
    "svg",
    {
      viewBox: `0 0 ${GRAPH_W} ${GRAPH_H}`,
      preserveAspectRatio: "none",
      role: "img",
      "aria-label": t("gamepage.graph.label"),
      testid: "replay-graph-svg",
      dataset: { points: String(points.length) },
    },
    children,
  );
  graph.addEventListener("click", (event) => {
    const dotPly = event.target && event.target.dataset ? Number(event.target.dataset.ply) : NaN;
    if (Number.isInteger(dotPly)) {
      stepTo(dotPly);
      return;
    }
    const box = graph.getBoundingClientRect();
    if (box.width > 0) stepTo(Math.round(((event.clientX - box.left) / box.width) * total));
  });
  root.replaceChildren(graph);
}
