// Chess: 8x8, rank 8 first in the view; moves in UCI ("e2e4", "e7e8q"), shown in SAN.
import { el, enableDrag, groupMoves, orient, pickHandler } from "./common.js";

const FILES = "abcdefgh";
// Solid glyphs for both sides (coloured by CSS); U+FE0E asks for text, not emoji.
const GLYPHS = { k: "\u265A", q: "\u265B", r: "\u265C", b: "\u265D", n: "\u265E", p: "\u265F" };
const PIECE_NAMES = { k: "king", q: "queen", r: "rook", b: "bishop", n: "knight", p: "pawn" };

function squareName(r, c) {
  return `${FILES[c]}${8 - r}`;
}

function splitUci(move) {
  return /^[a-h][1-8][a-h][1-8]/.test(move) ? [move.slice(0, 2), move.slice(2, 4)] : [];
}

export function render(root, ctx) {
  const { rows, check, last } = ctx.view;
  const byFrom = groupMoves(ctx.legal, splitUci);
  const selected = byFrom.has(ctx.ui.selected) ? ctx.ui.selected : undefined;
  const targets = selected ? byFrom.get(selected) : new Map();
  const lastSquares = new Set(last || []);
  const click = pickHandler(ctx, byFrom, (candidates) =>
    ctx.choose({
      title: "Promote to",
      options: candidates
        .map((m) => m.slice(4))
        .sort((a, b) => "qrbn".indexOf(a) - "qrbn".indexOf(b))
        .map((p) => ({
          label: `${GLYPHS[p]}\uFE0E ${PIECE_NAMES[p]}`,
          value: candidates.find((m) => m.slice(4) === p),
          testid: `promo-${p}`,
        })),
    }),
  );

  const board = el("div", { class: "chess-board", role: "group", "aria-label": "Chess board" });
  const rowOrder = orient(8, ctx.flipped);
  const colOrder = orient(8, ctx.flipped);
  rowOrder.forEach((r, i) => {
    colOrder.forEach((c, j) => {
      const name = squareName(r, c);
      const piece = rows[r][c];
      const lower = piece.toLowerCase();
      const white = piece !== "" && piece === piece.toUpperCase();
      const isTarget = targets.has(name);
      const movable = byFrom.has(name);
      const label = piece ? `${name}, ${white ? "white" : "black"} ${PIECE_NAMES[lower]}` : `${name}, empty`;
      const children = [];
      if (piece) {
        children.push(
          el("span", { class: ["piece", white ? "white" : "black"], "aria-hidden": "true" }, [
            `${GLYPHS[lower]}\uFE0E`,
          ]),
        );
      }
      if (j === 0) children.push(el("span", { class: "rank-label" }, [String(8 - r)]));
      if (i === 7) children.push(el("span", { class: "file-label" }, [FILES[c]]));
      board.append(
        el(
          "button",
          {
            class: [
              "sq",
              (r + c) % 2 === 0 ? "light" : "dark",
              lastSquares.has(name) && "last",
              check === name && "check",
              selected === name && "selected",
              movable && "movable",
              isTarget && (piece ? "target capture" : "target"),
            ],
            testid: `sq-${name}`,
            dataset: { square: name, piece },
            "aria-label": label,
            disabled: !(movable || isTarget || selected),
            onclick: () => click(name),
          },
          children,
        ),
      );
    });
  });
  enableDrag(board, byFrom, click);
  root.append(board);
}
