// Small board diagrams for the rules panel (rules.js): our own simple SVG drawings, one
// or two per game (Oware's sowing direction and a capture, a draughts capture that must
// take the most, the Pong Hau K'i board...). Each is an <svg role="img"> whose text
// alternative (aria-label) and visible caption come from the catalogue
// ("rules.<game>.figN.alt", "rules.<game>.figN.caption"). Only notation (squares, pit
// letters, cell numbers) is written inside a drawing; words never are.

import { t } from "./i18n.js";

const NS = "http://www.w3.org/2000/svg";

function node(tag, attrs = {}, text = undefined) {
  const element = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

function drawing(width, height, alt) {
  const root = node("svg", {
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": alt,
    class: "rules-svg",
    focusable: "false",
  });
  const defs = node("defs");
  const marker = node("marker", {
    id: `rules-arrow-${Math.random().toString(36).slice(2, 8)}`,
    viewBox: "0 0 10 10",
    refX: 8,
    refY: 5,
    markerWidth: 6,
    markerHeight: 6,
    orient: "auto-start-reverse",
  });
  marker.append(node("path", { d: "M0,0 L10,5 L0,10 z", class: "rules-arrowhead" }));
  defs.append(marker);
  root.append(defs);
  root.dataset.marker = marker.id;
  return root;
}

function arrow(root, d) {
  root.append(node("path", { d, class: "rules-arrow", "marker-end": `url(#${root.dataset.marker})` }));
}

function label(root, x, y, text, cls = "rules-label") {
  root.append(node("text", { x, y, class: cls, "text-anchor": "middle", "dominant-baseline": "central" }, text));
}

function stone(root, x, y, r, colour, extra = "") {
  root.append(node("circle", { cx: x, cy: y, r, class: `rules-stone rules-${colour} ${extra}`.trim() }));
}

// -- the drawings, one function per figure ---------------------------------------------------

function tictactoeLine() {
  const root = drawing(150, 150, t("rules.tictactoe.fig1.alt"));
  const marks = { 1: "X", 2: "O", 3: "O", 5: "X", 9: "X" };
  for (let cell = 1; cell <= 9; cell += 1) {
    const x = 15 + ((cell - 1) % 3) * 40;
    const y = 15 + Math.floor((cell - 1) / 3) * 40;
    root.append(node("rect", { x, y, width: 40, height: 40, class: "rules-cell" }));
    label(root, x + 7, y + 8, String(cell), "rules-small");
    if (marks[cell]) label(root, x + 20, y + 22, marks[cell], `rules-mark rules-mark-${marks[cell].toLowerCase()}`);
  }
  root.append(node("line", { x1: 33, y1: 35, x2: 117, y2: 119, class: "rules-win" }));
  return root;
}

function matchesFive() {
  const root = drawing(200, 110, t("rules.matches.fig1.alt"));
  for (let i = 0; i < 5; i += 1) {
    const x = 30 + i * 35;
    const last = i === 4;
    root.append(node("rect", { x: x - 3, y: 25, width: 6, height: 60, rx: 2, class: last ? "rules-match rules-hot" : "rules-match" }));
    root.append(node("circle", { cx: x, cy: 24, r: 6, class: "rules-match-head" }));
  }
  return root;
}

const KONO_POINTS = { a: [30, 30], c: [150, 30], e: [90, 90], b: [30, 150], d: [150, 150] };
const KONO_LINES = [["a", "b"], ["c", "d"], ["b", "d"], ["a", "e"], ["b", "e"], ["c", "e"], ["d", "e"]];

function konoBoard(alt, pieces) {
  const root = drawing(180, 180, alt);
  for (const [p, q] of KONO_LINES) {
    const [x1, y1] = KONO_POINTS[p];
    const [x2, y2] = KONO_POINTS[q];
    root.append(node("line", { x1, y1, x2, y2, class: "rules-line" }));
  }
  for (const [name, [x, y]] of Object.entries(KONO_POINTS)) {
    root.append(node("circle", { cx: x, cy: y, r: 5, class: "rules-point" }));
    if (pieces[name]) stone(root, x, y, 14, pieces[name]);
    label(root, x + (x < 90 ? -20 : x > 90 ? 20 : 0), y + (name === "e" ? 24 : y < 90 ? -18 : 18), name, "rules-small");
  }
  return root;
}

function konoStart() {
  return konoBoard(t("rules.kono.fig1.alt"), { a: "white", d: "white", b: "black", c: "black" });
}

function konoBlocked() {
  return konoBoard(t("rules.kono.fig2.alt"), { c: "white", d: "white", b: "black", e: "black" });
}

/** Oware: the pits as South sees them (top row f..a, bottom row A..F), with seed counts. */
function owareBoard(alt, counts, hot = []) {
  const root = drawing(300, 150, alt);
  root.append(node("rect", { x: 5, y: 20, width: 290, height: 110, rx: 18, class: "rules-oware" }));
  const top = ["f", "e", "d", "c", "b", "a"];
  const bottom = ["A", "B", "C", "D", "E", "F"];
  const pit = (name, i, y) => {
    const x = 35 + i * 46;
    root.append(node("circle", { cx: x, cy: y, r: 19, class: hot.includes(name) ? "rules-pit rules-hot" : "rules-pit" }));
    if (counts) label(root, x, y, String(counts[name]), "rules-count");
    label(root, x, y < 75 ? 10 : 140, name, "rules-small");
  };
  top.forEach((name, i) => pit(name, i, 52));
  bottom.forEach((name, i) => pit(name, i, 98));
  return root;
}

function owareSowing() {
  const root = owareBoard(t("rules.oware.fig1.alt"), null);
  // Counter-clockwise: along the bottom to the right, up, along the top to the left, down.
  arrow(root, "M40,122 L262,122");
  arrow(root, "M285,110 L285,40");
  arrow(root, "M262,28 L40,28");
  arrow(root, "M15,40 L15,110");
  return root;
}

function owareCapture() {
  // Just after the sowing: E emptied, F, a and b one seed more; a and b are taken.
  const sown = { A: 4, B: 4, C: 4, D: 4, E: 0, F: 5, a: 2, b: 3, c: 4, d: 4, e: 4, f: 4 };
  const root = owareBoard(t("rules.oware.fig2.alt"), sown, ["a", "b"]);
  // E's three seeds went to F, a and b: arrows round the outside of the pits.
  arrow(root, "M219,121 Q242,134 262,122");
  arrow(root, "M289,100 L289,56");
  arrow(root, "M262,29 Q242,17 222,27");
  return root;
}

function othelloFlip() {
  const root = drawing(180, 150, t("rules.othello.fig1.alt"));
  // Columns c-f, rows 3-6 (row 1 at the top), as the game numbers them.
  const cols = ["c", "d", "e", "f"];
  const rows = [3, 4, 5, 6];
  const discs = { d4: "white", e5: "white", d5: "black", e4: "black", d3: "black" };
  cols.forEach((c, i) => label(root, 45 + i * 30, 10, c, "rules-small"));
  rows.forEach((r, j) => label(root, 18, 35 + j * 30, String(r), "rules-small"));
  const squares = cols.flatMap((c, i) => rows.map((r, j) => [`${c}${r}`, 45 + i * 30, 35 + j * 30]));
  for (const [, x, y] of squares) root.append(node("rect", { x: x - 15, y: y - 15, width: 30, height: 30, class: "rules-green" }));
  // The line the new disc closes: from d3 through d4 to the black disc on d5.
  root.append(node("line", { x1: 75, y1: 35, x2: 75, y2: 95, class: "rules-bracket" }));
  for (const [square, x, y] of squares) {
    if (discs[square]) stone(root, x, y, 11, discs[square], square === "d3" ? "rules-new" : "");
  }
  // d4 turns: drawn half white, half black.
  root.append(node("path", { d: "M75,54 A11,11 0 0 1 75,76 z", class: "rules-stone rules-black" }));
  return root;
}

/** Draughts: part of the board, rows 2-6 and columns 0-5, squares numbered as the game. */
function draughtsCapture() {
  const root = drawing(270, 220, t("rules.draughts.fig1.alt"));
  const size = 40;
  const origin = [15, 10];
  const at = (square) => {
    const row = Math.floor((square - 1) / 5);
    const col = 2 * ((square - 1) % 5) + (row % 2 === 0 ? 1 : 0);
    return [origin[0] + col * size + size / 2, origin[1] + (row - 2) * size + size / 2];
  };
  for (let row = 2; row <= 6; row += 1) {
    for (let col = 0; col < 6; col += 1) {
      const dark = (row + col) % 2 === 1;
      root.append(node("rect", { x: origin[0] + col * size, y: origin[1] + (row - 2) * size, width: size, height: size, class: dark ? "rules-dark" : "rules-light" }));
    }
  }
  for (const square of [12, 17, 21, 23, 27, 28, 32]) {
    const [x, y] = at(square);
    root.append(node("text", { x: x - 18, y: y - 11, class: "rules-tiny", "dominant-baseline": "central" }, String(square)));
  }
  for (const square of [17, 27, 28]) stone(root, ...at(square), 12, "black");
  stone(root, ...at(32), 12, "white");
  const [x32, y32] = at(32);
  const [x21, y21] = at(21);
  const [x12, y12] = at(12);
  arrow(root, `M${x32},${y32} L${x21 + 4},${y21 + 4} L${x12 - 2},${y12 + 6}`);
  const [x23, y23] = at(23);
  root.append(node("path", { d: `M${x32},${y32} L${x23 - 4},${y23 + 4}`, class: "rules-arrow rules-wrong" }));
  return root;
}

function chessSquares(root, files, ranks, x0, y0, size) {
  files.forEach((f, i) => label(root, x0 + i * size + size / 2, y0 + ranks.length * size + 10, f, "rules-small"));
  ranks.forEach((r, j) => {
    label(root, x0 - 10, y0 + j * size + size / 2, String(r), "rules-small");
    files.forEach((f, i) => {
      const dark = ("abcdefgh".indexOf(f) + r) % 2 === 1; // a1 is dark
      root.append(node("rect", { x: x0 + i * size, y: y0 + j * size, width: size, height: size, class: dark ? "rules-dark" : "rules-light" }));
    });
  });
}

function piece(root, x, y, glyph, colour) {
  root.append(node("text", { x, y, class: `rules-piece rules-piece-${colour}`, "text-anchor": "middle", "dominant-baseline": "central" }, glyph));
}

function chessCastling() {
  const root = drawing(290, 70, t("rules.chess.fig1.alt"));
  const files = ["a", "b", "c", "d", "e", "f", "g", "h"];
  chessSquares(root, files, [1], 20, 10, 32);
  const x = (f) => 20 + files.indexOf(f) * 32 + 16;
  piece(root, x("e"), 26, "♚", "white");
  piece(root, x("h"), 26, "♜", "white");
  piece(root, x("a"), 26, "♜", "white");
  arrow(root, `M${x("e") + 6},14 C${x("f")},4 ${x("g") - 10},4 ${x("g")},12`);
  arrow(root, `M${x("h") - 6},38 C${x("g")},48 ${x("g") - 14},48 ${x("f") + 2},40`);
  return root;
}

function chessEnPassant() {
  const root = drawing(180, 160, t("rules.chess.fig2.alt"));
  const files = ["c", "d", "e", "f"];
  const ranks = [7, 6, 5, 4];
  chessSquares(root, files, ranks, 25, 10, 32);
  const x = (f) => 25 + files.indexOf(f) * 32 + 16;
  const y = (r) => 10 + ranks.indexOf(r) * 32 + 16;
  piece(root, x("e"), y(5), "♟", "white");
  piece(root, x("d"), y(5), "♟", "black");
  root.append(node("path", { d: `M${x("d")},${y(7)} L${x("d")},${y(5) - 12}`, class: "rules-arrow rules-faint" }));
  arrow(root, `M${x("e") - 4},${y(5) - 8} L${x("d") + 6},${y(6) + 6}`);
  root.append(node("line", { x1: x("d") - 9, y1: y(5) - 9, x2: x("d") + 9, y2: y(5) + 9, class: "rules-cross" }));
  return root;
}

/** The figures of each game: [drawing function, caption key]. */
const FIGURES = {
  tictactoe: [[tictactoeLine, () => t("rules.tictactoe.fig1.caption")]],
  matches: [[matchesFive, () => t("rules.matches.fig1.caption")]],
  kono: [
    [konoStart, () => t("rules.kono.fig1.caption")],
    [konoBlocked, () => t("rules.kono.fig2.caption")],
  ],
  oware: [
    [owareSowing, () => t("rules.oware.fig1.caption")],
    [owareCapture, () => t("rules.oware.fig2.caption")],
  ],
  othello: [[othelloFlip, () => t("rules.othello.fig1.caption")]],
  draughts: [[draughtsCapture, () => t("rules.draughts.fig1.caption")]],
  chess: [
    [chessCastling, () => t("rules.chess.fig1.caption")],
    [chessEnPassant, () => t("rules.chess.fig2.caption")],
  ],
};

/**
 * The diagrams of `game`, each a <figure> holding an <svg role="img"> with its text
 * alternative and a visible caption; an empty list for a game without diagrams.
 * @param {string} game
 * @returns {HTMLElement[]}
 */
export function diagramsFor(game) {
  return (FIGURES[game] || []).map(([draw, caption]) => {
    const figure = document.createElement("figure");
    figure.className = "rules-figure";
    figure.dataset.testid = "rules-diagram";
    const picture = draw();
    const text = document.createElement("figcaption");
    text.textContent = caption();
    figure.append(picture, text);
    return figure;
  });
}
