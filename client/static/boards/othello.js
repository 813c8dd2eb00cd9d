// Othello: 8x8, columns a-h, rows 1-8 from the top; moves "d3" or "pass".
import { el } from "./common.js";

const FILES = "abcdefgh";
const NAMES = { b: "black", w: "white" };

export function render(root, ctx) {
  const rows = ctx.view.rows;
  const legal = new Set(ctx.legal);
  const board = el("div", { class: "othello-board", role: "group", "aria-label": "Othello board" });
  board.append(el("span", { class: "corner" }));
  for (let c = 0; c < 8; c++) board.append(el("span", { class: "coord" }, [FILES[c]]));
  let black = 0;
  let white = 0;
  rows.forEach((row, r) => {
    board.append(el("span", { class: "coord" }, [String(r + 1)]));
    row.forEach((cell, c) => {
      const name = `${FILES[c]}${r + 1}`;
      const playable = legal.has(name);
      if (cell === "b") black += 1;
      if (cell === "w") white += 1;
      board.append(
        el(
          "button",
          {
            class: ["oth-cell", playable && "playable", ctx.lastMove === name && "last"],
            testid: `cell-${name}`,
            dataset: { square: name, disc: cell },
            "aria-label": `${name}, ${cell ? NAMES[cell] : "empty"}`,
            disabled: !playable,
            onclick: () => ctx.play(name),
          },
          [cell ? el("span", { class: `disc disc-${cell}` }) : null],
        ),
      );
    });
  });
  const score = el("div", { class: "othello-score", testid: "disc-count" }, [
    el("span", { class: "disc disc-b mini" }),
    ` ${black}`,
    el("span", { class: "gap" }),
    el("span", { class: "disc disc-w mini" }),
    ` ${white}`,
  ]);
  root.append(el("div", { class: "othello-wrap" }, [board, score]));
}
