// Chess: 8x8, rank 8 first in the view; moves in UCI ("e2e4", "e7e8q"), shown in SAN.
// Pieces are kibitz's own SVG drawings (pieces.js); each square's accessible name says
// its piece in words ("e4, white pawn"), from the catalogue.
import { t } from "../i18n.js";
import { el, enableDrag, groupMoves, orient, pickHandler } from "./common.js";
import { chessPiece, chessPieceName, isWhite } from "./pieces.js";

const FILES = "abcdefgh";

const PROMOTION_NAMES = {
  q: () => t("boards.piece.queen"),
  r: () => t("boards.piece.rook"),
  b: () => t("boards.piece.bishop"),
  n: () => t("boards.piece.knight"),
};

function squareLabel(name, piece, inCheck) {
  if (!piece) return t("boards.square.empty", { square: name });
  if (inCheck) return t("boards.square.check", { square: name, piece: chessPieceName(piece) });
  return t("boards.square.piece", { square: name, piece: chessPieceName(piece) });
}

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
  // The promoting side's colour: the piece on the square the move starts from.
  const promoting = (move) => rows[8 - Number(move[1])][FILES.indexOf(move[0])] || "P";
  const click = pickHandler(ctx, byFrom, (candidates) =>
    ctx.choose({
      title: t("boards.chess.promote"),
      options: candidates
        .map((m) => m.slice(4))
        .sort((a, b) => "qrbn".indexOf(a) - "qrbn".indexOf(b))
        .map((p) => {
          const letter = isWhite(promoting(candidates[0])) ? p.toUpperCase() : p;
          return {
            label: el("span", { class: "promo-choice" }, [chessPiece(letter, "promo-icon"), ` ${PROMOTION_NAMES[p]()}`]),
            value: candidates.find((m) => m.slice(4) === p),
            testid: `promo-${p}`,
          };
        }),
    }),
  );

  const board = el("div", { class: "chess-board", role: "group", "aria-label": t("boards.chess.board") });
  const rowOrder = orient(8, ctx.flipped);
  const colOrder = orient(8, ctx.flipped);
  rowOrder.forEach((r, i) => {
    colOrder.forEach((c, j) => {
      const name = squareName(r, c);
      const piece = rows[r][c];
      const isTarget = targets.has(name);
      const movable = byFrom.has(name);
      const label = squareLabel(name, piece, check === name);
      const children = [];
      if (piece) children.push(chessPiece(piece));
      // Coordinates along the viewer's left and bottom edges (decoration: the name says it).
      if (j === 0) children.push(el("span", { class: "rank-label", "aria-hidden": "true" }, [String(8 - r)]));
      if (i === 7) children.push(el("span", { class: "file-label", "aria-hidden": "true" }, [FILES[c]]));
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
