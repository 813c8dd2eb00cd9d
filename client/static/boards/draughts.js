// International draughts: 10x10, dark squares numbered 1-50 row by row from the top-left.
// Moves "32-28", "28x19" or a full path "28x19x10"; men "w"/"b", kings "W"/"B".
import { el, enableDrag, groupMoves, orient, pickHandler } from "./common.js";

function squareNumber(r, c) {
  return (r + c) % 2 === 1 ? r * 5 + Math.floor(c / 2) + 1 : null;
}

function splitMove(move) {
  return move.split(/[-x]/).filter(Boolean);
}

export function render(root, ctx) {
  const rows = ctx.view.rows;
  const byFrom = groupMoves(ctx.legal, splitMove);
  const selected = byFrom.has(ctx.ui.selected) ? ctx.ui.selected : undefined;
  const targets = selected ? byFrom.get(selected) : new Map();
  const lastPath = ctx.lastMove ? splitMove(ctx.lastMove) : [];
  const lastFrom = lastPath[0];
  const lastTo = lastPath[lastPath.length - 1];
  const click = pickHandler(ctx, byFrom, (candidates) =>
    ctx.choose({
      title: "Which capture path?",
      options: candidates.map((m) => ({ label: m, value: m, testid: `path-${m}` })),
    }),
  );

  const board = el("div", { class: "draughts-board", role: "group", "aria-label": "Draughts board" });
  for (const r of orient(10, ctx.flipped)) {
    for (const c of orient(10, ctx.flipped)) {
      const number = squareNumber(r, c);
      if (number === null) {
        board.append(el("span", { class: "dsq light", "aria-hidden": "true" }));
        continue;
      }
      const name = String(number);
      const piece = rows[r][c];
      const movable = byFrom.has(name);
      const isTarget = targets.has(name);
      const children = [el("span", { class: "num", "aria-hidden": "true" }, [name])];
      if (piece) {
        const colour = piece.toLowerCase() === "w" ? "white" : "black";
        const king = piece === piece.toUpperCase();
        children.push(el("span", { class: ["man", colour, king && "king"], "aria-hidden": "true" }, [king ? "\u265B\uFE0E" : ""]));
      }
      const label = piece
        ? `square ${name}, ${piece.toLowerCase() === "w" ? "white" : "black"} ${piece === piece.toUpperCase() ? "king" : "man"}`
        : `square ${name}, empty`;
      board.append(
        el(
          "button",
          {
            class: [
              "dsq",
              "dark",
              (name === lastFrom || name === lastTo) && "last",
              lastPath.includes(name) && "last-path",
              selected === name && "selected",
              movable && "movable",
              isTarget && "target",
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
    }
  }
  enableDrag(board, byFrom, click);
  root.append(board);
}
