// Moves by text, for screen-reader and keyboard users (docs/client.md, "Accessibility"),
// and the spoken account of the game in the #announce live region.
//
// Under the board, a labelled field (#text-move) takes a move in the game's own notation:
// the texts of the snapshot's legal_moves, case-insensitive (Oware's pit letters, draughts'
// 32-28, tic-tac-toe's cells...), and in chess UCI (e2e4, e7e8q) or SAN (Nf3, exd5, e8=Q,
// O-O): a SAN text is matched against the legal UCI moves by the piece on their first square,
// so the client still applies no rule. A move that is not legal is refused in words. The same
// field takes commands, as a blind mode does: "moves" lists the legal moves, "board" reads
// the position, "clock" the clocks, "last" the last move, "turn" whose turn it is, "help"
// the commands (each also in the page's language). Every new snapshot is said once in
// #announce: the move just played ("Black played Nf6. Check."), whose turn it is, the result.

import { el } from "./boards/common.js";
import { formatClock, remainingMs } from "./clock.js";
import { has, t } from "./i18n.js";
import { describeResult } from "./result.js";

const FILES = "abcdefgh";
const KEEP_ANNOUNCEMENTS = 3; // lines kept in #announce (new lines are what is read)
const COMMANDS = ["moves", "board", "clock", "last", "turn", "help"];
const ALIASES = { pieces: "board", position: "board", clocks: "clock", time: "clock", status: "turn", "?": "help" };

// The room and version last said in #announce, and what they showed.
let said = { room: null, version: -1, moves: 0, status: null };
let current = null; // {state, you, play, pending}

// -- the side names and the form ------------------------------------------------------------

/** A seat's side in the page's language ("White", "Sud"), else the server's word. */
function side(state, seat) {
  const key = `common.side.${state.game}.${seat}`;
  return has(key) ? t(key) : String(state.players[seat] ?? seat);
}

function isSeat(seat) {
  return seat === 0 || seat === 1;
}

/** The region for announcements: #announce from index.html, made here if it is missing. */
function announceRegion() {
  let region = document.getElementById("announce");
  if (!region) {
    region = el("div", { id: "announce", class: "sr-only", "aria-live": "polite", testid: "announce" });
    document.body.append(region);
  }
  return region;
}

/** Say `text` to screen readers: a new line in #announce (the last few are kept). */
export function announce(text) {
  if (!text) return;
  const region = announceRegion();
  region.append(el("p", {}, [text]));
  while (region.children.length > KEEP_ANNOUNCEMENTS) region.firstElementChild.remove();
}

function box() {
  let node = document.getElementById("text-move-box");
  if (!node) {
    const board = document.getElementById("board");
    if (!board) return null;
    node = el("div", { id: "text-move-box", class: "text-move-box" });
    board.after(node);
  }
  if (!node.querySelector("#text-move")) buildForm(node);
  return node;
}

function buildForm(node) {
  const input = el("input", {
    id: "text-move",
    testid: "text-move",
    type: "text",
    autocomplete: "off",
    autocapitalize: "off",
    spellcheck: "false",
    enterkeyhint: "send",
    "aria-describedby": "text-move-help",
    placeholder: t("a11y.textmove.placeholder"),
  });
  const form = el("form", { class: "text-move-form", testid: "text-move-form", onsubmit: onSubmit }, [
    el("label", { for: "text-move", class: "text-move-label" }, [t("a11y.textmove.label")]),
    input,
    el("button", { type: "submit", class: "btn small", testid: "text-move-submit" }, [t("a11y.textmove.submit")]),
    el("button", { type: "button", class: "btn small ghost", testid: "text-move-list", onclick: () => respond(legalMovesText()) }, [
      t("a11y.textmove.list"),
    ]),
  ]);
  node.replaceChildren(
    form,
    el("p", { id: "text-move-help", class: "text-move-help muted small" }, [t("a11y.textmove.help")]),
    el("p", { id: "text-move-feedback", class: "text-move-feedback", testid: "text-move-feedback", role: "status", "aria-live": "polite" }),
  );
}

/** Answer the person who typed: in words under the field (a live region). */
function respond(text, refused = false) {
  const feedback = document.getElementById("text-move-feedback");
  if (!feedback) return;
  feedback.textContent = text;
  feedback.dataset.refused = String(refused);
}

/**
 * The game screen calls this on every redraw (`state` null while loading): it keeps the
 * text move form under the board and says what changed since the last snapshot.
 * `you` is the viewer's seat (null for a spectator), `pending` whether a move is on its
 * way, `play(move)` sends a legal move text.
 */
export function renderTextMove(state, { you = null, pending = false, play = null } = {}) {
  const node = box();
  current = state ? { state, you: isSeat(you) ? you : null, pending, play } : null;
  if (node) node.hidden = !state;
  if (!state) return;
  announceChanges(state, current.you);
}

// -- what the announcements say -------------------------------------------------------------

function checkWords(display) {
  if (/#$/.test(display)) return t("a11y.announce.checkmate");
  if (/\+$/.test(display)) return t("a11y.announce.check");
  return "";
}

function playedWords(state, move, you) {
  const text = move.display || move.move;
  const words = move.seat === you ? t("a11y.announce.youPlayed", { move: text }) : t("a11y.announce.played", { side: side(state, move.seat), move: text });
  return [words, checkWords(text)].filter(Boolean).join(" ");
}

function turnWords(state, you) {
  if (state.status === "waiting") return t("a11y.announce.waiting");
  if (state.status === "over") return resultWords(state, you);
  if (you !== null && state.to_move === you) return t("a11y.announce.yourMove");
  return t("a11y.announce.toMove", { side: side(state, state.to_move) });
}

function resultWords(state, you) {
  // result.js reads the server's side names and says them in the page's language itself.
  const names = [side(state, 0), side(state, 1)];
  try {
    const { text } = describeResult(state, state.players, you, names);
    if (text) return text;
  } catch {
    // a result the words module does not know: the plain "game over" below
  }
  return t("a11y.announce.over");
}

function announceChanges(state, you) {
  const fresh = said.room !== state.room;
  if (!fresh && state.version <= said.version) return;
  const before = fresh ? null : said;
  said = { room: state.room, version: state.version, moves: state.moves.length, status: state.status };
  const parts = [];
  if (!before) {
    if (you !== null) parts.push(t("a11y.announce.youPlay", { side: side(state, you) }));
    parts.push(turnWords(state, you));
    announce(parts.join(" "));
    return;
  }
  const last = state.moves[state.moves.length - 1];
  if (state.moves.length > before.moves && last) parts.push(playedWords(state, last, you));
  else if (state.moves.length < before.moves) parts.push(t("a11y.announce.takeback"));
  if (state.status === "over" && before.status !== "over") {
    parts.push(resultWords(state, you));
  } else if (state.status === "playing" && (before.status !== "playing" || parts.length)) {
    if (before.status !== "playing") parts.push(t("a11y.announce.started"));
    // After one's own move the next turn is plain; say it when it is one's own, or to a spectator.
    if (you === null || state.to_move === you) parts.push(turnWords(state, you));
  }
  if (parts.length) announce(parts.join(" "));
}

// -- typed moves ------------------------------------------------------------------------------

function onSubmit(event) {
  event.preventDefault();
  const input = document.getElementById("text-move");
  const text = input.value.trim();
  if (!text) {
    respond(t("a11y.textmove.empty"), true);
    return;
  }
  if (runCommand(text)) {
    input.value = "";
    return;
  }
  if (tryMove(text)) input.value = "";
}

/** Play `text` if it names exactly one legal move; otherwise say why not. */
function tryMove(text) {
  if (!current) return false;
  const { state, you, pending, play } = current;
  if (you === null || !play) return refuse(t("a11y.textmove.spectator"));
  if (state.status !== "playing") return refuse(t(state.status === "over" ? "a11y.textmove.over" : "a11y.textmove.waiting"));
  if (state.to_move !== you) return refuse(t("a11y.textmove.notYourTurn"));
  if (pending) return refuse(t("a11y.textmove.pending"));
  const found = matchMove(state, text);
  if (found.length === 1) {
    respond("");
    play(found[0]);
    return true;
  }
  if (found.length > 1) {
    return refuse(t("a11y.textmove.ambiguous", { move: text, moves: found.map((m) => moveName(state, m)).join(", ") }));
  }
  return refuse(t("a11y.textmove.illegal", { move: text }));
}

function refuse(words) {
  respond(words, true);
  return false;
}

/** The legal move texts that `text` names (case-insensitive; chess also by SAN). */
export function matchMove(state, text) {
  const legal = state.legal_moves || [];
  const typed = text.trim();
  const exact = legal.filter((m) => m === typed);
  if (exact.length) return exact;
  const folded = legal.filter((m) => m.toLowerCase() === typed.toLowerCase());
  if (folded.length) return folded;
  if (state.game === "chess") return matchChess(state, typed);
  // "32 28", "3228" or "32x28" for 32-28, "be" for Kono's b-e: the same text without separators.
  const bare = (text) => text.toLowerCase().replace(/[\s\-x:]/g, "");
  return bare(typed) ? legal.filter((m) => bare(m) === bare(typed)) : [];
}

// -- chess: UCI and SAN matched against the legal UCI moves ----------------------------------

function chessPiece(view, square) {
  const col = FILES.indexOf(square[0]);
  const row = 8 - Number(square[1]);
  const piece = view && view.rows && view.rows[row] ? view.rows[row][col] : "";
  return piece || "";
}

function matchChess(state, typed) {
  const legal = state.legal_moves || [];
  const text = typed.replace(/[+#!?]+$/, "").replace(/\s+/g, "");
  // UCI or long algebraic: e2e4, e2-e4, e7e8q, e7-e8=Q.
  const long = /^([a-h][1-8])[-x:]?([a-h][1-8])=?([qrbnQRBN])?$/.exec(text);
  if (long) {
    const stem = `${long[1]}${long[2]}`.toLowerCase();
    const promo = long[3] ? long[3].toLowerCase() : "";
    return legal.filter((m) => m.slice(0, 4) === stem && (promo ? m.slice(4) === promo : true));
  }
  const castle = /^[O0o]-?[O0o](-?[O0o])?$/.exec(text);
  if (castle) {
    const file = castle[1] ? "c" : "g";
    return legal.filter((m) => chessPiece(state.view, m.slice(0, 2)).toLowerCase() === "k" && m[0] === "e" && m[2] === file);
  }
  const strict = sanMatches(state, text);
  if (strict.length) return strict;
  // "nf3" for "Nf3": a lower-case piece letter, when it reads as no pawn move.
  return /^[nrqk]/.test(text) || /^b[1-8x]?[a-h]?[1-8]?[a-h][1-8]/.test(text) ? sanMatches(state, text[0].toUpperCase() + text.slice(1)) : [];
}

function sanMatches(state, text) {
  const san = /^([NBRQK])?([a-h])?([1-8])?[x:]?([a-h][1-8])(?:=?([NBRQnbrq]))?$/.exec(text);
  if (!san) return [];
  const [, piece = "P", file, rank, to, promo] = san;
  const wanted = [];
  for (const move of state.legal_moves || []) {
    const from = move.slice(0, 2);
    if (move.slice(2, 4) !== to) continue;
    if (chessPiece(state.view, from).toUpperCase() !== piece) continue;
    if (file && from[0] !== file) continue;
    if (rank && from[1] !== rank) continue;
    if (promo && move.slice(4) !== promo.toLowerCase()) continue;
    wanted.push(move);
  }
  return wanted;
}

/** SAN of a legal UCI move without the check sign (worked out from the board, no rule). */
function chessSan(state, move) {
  const from = move.slice(0, 2);
  const to = move.slice(2, 4);
  const piece = chessPiece(state.view, from).toUpperCase();
  if (!piece) return move;
  if (piece === "K" && from[0] === "e" && (to[0] === "g" || to[0] === "c") && from[1] === to[1]) {
    return to[0] === "g" ? "O-O" : "O-O-O";
  }
  const capture = Boolean(chessPiece(state.view, to)) || (piece === "P" && from[0] !== to[0]);
  const promo = move.length > 4 ? `=${move[4].toUpperCase()}` : "";
  if (piece === "P") return `${capture ? `${from[0]}x` : ""}${to}${promo}`;
  const rivals = (state.legal_moves || []).filter(
    (m) => m !== move && m.slice(2, 4) === to && m.slice(0, 2) !== from && chessPiece(state.view, m.slice(0, 2)).toUpperCase() === piece,
  );
  let from_ = "";
  if (rivals.length) {
    if (!rivals.some((m) => m[0] === from[0])) from_ = from[0];
    else if (!rivals.some((m) => m[1] === from[1])) from_ = from[1];
    else from_ = from;
  }
  return `${piece}${from_}${capture ? "x" : ""}${to}`;
}

/** A legal move as people write it: SAN in chess, the move text elsewhere. */
function moveName(state, move) {
  return state.game === "chess" ? chessSan(state, move) : move;
}

// -- commands ---------------------------------------------------------------------------------

/** The command `text` names (in English or in the page's language), or null. */
function commandOf(text) {
  const word = text.trim().toLowerCase();
  if (ALIASES[word]) return ALIASES[word];
  for (const name of COMMANDS) {
    if (word === name || word === t(`a11y.cmd.${name}`).toLowerCase()) return name;
  }
  return null;
}

function runCommand(text) {
  const name = commandOf(text);
  if (!name || !current) return false;
  const { state, you } = current;
  const answers = {
    moves: () => legalMovesText(),
    board: () => boardText(state),
    clock: () => clockText(state),
    last: () => (state.last_move ? playedWords(state, state.last_move, you) : t("a11y.textmove.noMoveYet")),
    turn: () => turnWords(state, you),
    help: () => t("a11y.textmove.commands"),
  };
  respond(answers[name]());
  return true;
}

function legalMovesText() {
  if (!current) return "";
  const { state, you } = current;
  const legal = state.legal_moves || [];
  if (state.status !== "playing" || !legal.length) return t("a11y.textmove.noLegal");
  const names = legal.map((m) => moveName(state, m)).join(", ");
  if (you !== null && state.to_move !== you) {
    return t("a11y.textmove.theirMoves", { side: side(state, state.to_move), n: legal.length, moves: names });
  }
  return t("a11y.textmove.legal", { n: legal.length, moves: names });
}

function clockText(state) {
  const clock = state.clock;
  if (!clock || !Array.isArray(clock.remaining_ms)) return t("a11y.textmove.noClock");
  return [0, 1].map((seat) => t("a11y.textmove.clockLine", { side: side(state, seat), time: formatClock(remainingMs(clock, seat)) })).join(" ");
}

const PIECE_ORDER = "KQRBNP";
// Which seat a stone of the other boards belongs to, by its letter in the view.
const OWNER = {
  draughts: { w: 0, b: 1 },
  othello: { b: 0, w: 1 },
  kono: { b: 0, w: 1 },
  tictactoe: { x: 0, o: 1 },
};

function listOrNone(items, separator = ", ") {
  return items.length ? items.join(separator) : t("a11y.board.none");
}

/** The position in words: each side's pieces and where they stand. */
export function boardText(state) {
  const view = state.view || {};
  const owner = OWNER[state.game] || {};
  const sides = (describe) => [0, 1].map((seat) => t("a11y.board.side", { side: side(state, seat), pieces: describe(seat) })).join(" ");
  if (state.game === "chess" && Array.isArray(view.rows)) {
    return sides((seat) => {
      const groups = [];
      for (const type of PIECE_ORDER) {
        const squares = [];
        view.rows.forEach((row, r) =>
          row.forEach((piece, c) => {
            if (piece && piece.toUpperCase() === type && (piece === type) === (seat === 0)) squares.push(`${FILES[c]}${8 - r}`);
          }),
        );
        if (squares.length) groups.push(`${t(`a11y.piece.${type.toLowerCase()}`, { n: squares.length })} ${squares.sort().join(", ")}`);
      }
      return listOrNone(groups, "; ");
    });
  }
  if (state.game === "draughts" && Array.isArray(view.rows)) {
    // Squares 1-50: the dark squares, row by row from the top of the board.
    return sides((seat) => {
      const men = [];
      const kings = [];
      view.rows.forEach((row, r) =>
        row.forEach((piece, c) => {
          if (!piece || owner[piece.toLowerCase()] !== seat) return;
          (piece === piece.toUpperCase() ? kings : men).push(r * 5 + Math.floor(c / 2) + 1);
        }),
      );
      const groups = [];
      if (men.length) groups.push(`${t("a11y.piece.man", { n: men.length })} ${men.join(", ")}`);
      if (kings.length) groups.push(`${t("a11y.piece.draughtsKing", { n: kings.length })} ${kings.join(", ")}`);
      return listOrNone(groups, "; ");
    });
  }
  if (view.kind === "grid" && Array.isArray(view.rows)) {
    // Othello: a1..h8 (row 1 at the top); tic-tac-toe: cells 1-9.
    const name = (r, c) => (state.game === "tictactoe" ? String(r * view.rows[0].length + c + 1) : `${FILES[c]}${r + 1}`);
    const cells = (wanted) => {
      const found = [];
      view.rows.forEach((row, r) => row.forEach((mark, c) => wanted(mark) && found.push(name(r, c))));
      return found;
    };
    return `${sides((seat) => listOrNone(cells((mark) => owner[mark] === seat)))} ${t("a11y.board.empty", { cells: listOrNone(cells((mark) => !mark)) })}`;
  }
  if (state.game === "kono" && view.points) {
    const points = Object.keys(view.points).sort();
    return `${sides((seat) => listOrNone(points.filter((p) => owner[view.points[p]] === seat)))} ${t("a11y.board.empty", {
      cells: listOrNone(points.filter((p) => !view.points[p])),
    })}`;
  }
  if (state.game === "oware" && Array.isArray(view.south)) {
    const row = (letters, counts) => counts.map((n, i) => `${letters[i]} ${n}`).join(", ");
    return [
      t("a11y.board.oware", { side: side(state, 0), pits: row("ABCDEF", view.south), store: view.stores[0] }),
      t("a11y.board.oware", { side: side(state, 1), pits: row("abcdef", view.north), store: view.stores[1] }),
    ].join(" ");
  }
  if (state.game === "matches" && typeof view.heap === "number") return t("a11y.board.matches", { n: view.heap });
  return t("a11y.board.position", { position: state.position });
}
