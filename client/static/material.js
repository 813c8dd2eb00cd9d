// Captured pieces and the material difference, for chess and draughts (display only: no
// rule is applied, everything is counted from the board the server sent).
//
// Chess: each side's pieces are counted on the board and compared with the standard set
// (8 pawns, 2 knights, 2 bishops, 2 rooks, 1 queen); what is missing was taken by the
// other side (a pawn promoted counts as missing, a count is never negative). Each seat's
// box shows the pieces it took, as small icons, and "+N" when it is ahead in material on
// the board (pawn 1, knight 3, bishop 3, rook 5, queen 9). Draughts: the pieces each side
// took (out of 20) and "+N" pieces for the side with more on the board. Other games: the
// boxes are left empty.
import { t } from "./i18n.js";
import { chessPiece, draughtsPiece } from "./boards/pieces.js";

const CHESS_SET = { p: 8, n: 2, b: 2, r: 2, q: 1 };
const CHESS_VALUES = { p: 1, n: 3, b: 3, r: 5, q: 9 };
const CHESS_ORDER = ["p", "n", "b", "r", "q"];
const DRAUGHTS_SET = 20;

const KIND_WORDS = {
  p: (n) => t("boards.material.p", { n }),
  n: (n) => t("boards.material.n", { n }),
  b: (n) => t("boards.material.b", { n }),
  r: (n) => t("boards.material.r", { n }),
  q: (n) => t("boards.material.q", { n }),
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/**
 * Chess material from the view's rows (FEN letters): for seat 0 (White) and seat 1 (Black),
 * the pieces of the other side it took ({p: 2, n: 1, ...}) and its material on the board.
 */
export function chessMaterial(rows) {
  const count = {};
  for (const row of rows) for (const letter of row) if (letter) count[letter] = (count[letter] || 0) + 1;
  const side = (white) => {
    let value = 0;
    const lost = {};
    for (const kind of CHESS_ORDER) {
      const letter = white ? kind.toUpperCase() : kind;
      const onBoard = count[letter] || 0;
      value += onBoard * CHESS_VALUES[kind];
      lost[kind] = Math.max(0, CHESS_SET[kind] - onBoard);
    }
    return { value, lost };
  };
  const white = side(true);
  const black = side(false);
  return [
    { took: black.lost, value: white.value, diff: white.value - black.value },
    { took: white.lost, value: black.value, diff: black.value - white.value },
  ];
}

/** Draughts material from the view's rows ("w", "b" men, "W", "B" kings): per seat, pieces taken and the lead. */
export function draughtsMaterial(rows) {
  const count = { w: 0, b: 0, W: 0, B: 0 };
  for (const row of rows) for (const piece of row) if (piece in count) count[piece] += 1;
  const white = count.w + count.W;
  const black = count.b + count.B;
  return [
    { took: Math.max(0, DRAUGHTS_SET - black), diff: white - black },
    { took: Math.max(0, DRAUGHTS_SET - white), diff: black - white },
  ];
}

function fillChess(root, mine, seat) {
  const words = [];
  let letters = "";
  for (const kind of CHESS_ORDER) {
    const n = mine.took[kind];
    if (!n) continue;
    // The pieces this seat took are the other colour's: seat 0 (White) took black ones.
    const letter = seat === 0 ? kind : kind.toUpperCase();
    const group = el("span", "material-group");
    group.dataset.kind = kind;
    group.dataset.count = String(n);
    for (let i = 0; i < n; i++) group.append(chessPiece(letter, "captured-icon"));
    root.append(group);
    words.push(KIND_WORDS[kind](n));
    letters += kind.repeat(n);
  }
  root.dataset.captured = letters;
  return words.length ? [t("boards.material.captured", { pieces: words.join(", ") })] : [];
}

function fillDraughts(root, mine, seat) {
  root.dataset.captured = String(mine.took);
  if (!mine.took) return [];
  const group = el("span", "material-group");
  group.dataset.kind = "man";
  group.dataset.count = String(mine.took);
  group.append(draughtsPiece(seat === 0 ? "b" : "w", "captured-icon"));
  group.append(el("span", "material-count", `×${mine.took}`));
  root.append(group);
  return [t("boards.material.pieces_captured", { n: mine.took })];
}

/**
 * Fill each seat's box with the pieces it captured and "+N" for the side ahead, from a
 * snapshot (`{game, view}`: a room's state or a replayed position). `flipped` is the
 * board's orientation (kept on the boxes as data-flipped for the layout). `roots` maps a
 * seat to its element (#material-0 and #material-1 by default); missing ones are skipped.
 */
export function renderMaterial(
  snapshot,
  flipped = false,
  roots = { 0: document.getElementById("material-0"), 1: document.getElementById("material-1") },
) {
  const game = snapshot && snapshot.game;
  const rows = snapshot && snapshot.view && snapshot.view.rows;
  let sides = null;
  if (Array.isArray(rows) && game === "chess") sides = chessMaterial(rows);
  else if (Array.isArray(rows) && game === "draughts") sides = draughtsMaterial(rows);
  for (const seat of [0, 1]) {
    const root = roots && roots[seat];
    if (!root) continue;
    root.replaceChildren();
    root.classList.add("material");
    root.dataset.flipped = flipped ? "true" : "false";
    for (const attr of ["role", "aria-label"]) root.removeAttribute(attr);
    if (!sides) {
      root.dataset.diff = "0";
      delete root.dataset.captured;
      continue;
    }
    const mine = sides[seat];
    const words = game === "chess" ? fillChess(root, mine, seat) : fillDraughts(root, mine, seat);
    const ahead = Math.max(0, mine.diff);
    root.dataset.diff = String(ahead);
    if (ahead) {
      const diff = el("span", "material-diff", `+${ahead}`);
      diff.dataset.testid = `material-diff-${seat}`;
      root.append(diff);
      words.push(
        game === "chess" ? t("boards.material.ahead", { n: ahead }) : t("boards.material.pieces_ahead", { n: ahead }),
      );
    }
    if (words.length) {
      root.setAttribute("role", "img");
      root.setAttribute("aria-label", words.join("; "));
    }
  }
}
