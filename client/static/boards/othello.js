// Othello: 8x8, columns a-h, rows 1-8 from the top; moves "d3" or "pass".
import { t } from "../i18n.js";
import { el } from "./common.js";

const FILES = "abcdefgh";

function cellLabel(name, cell) {
  if (cell === "b") return t("boards.othello.black", { square: name });
  if (cell === "w") return t("boards.othello.white", { square: name });
  return t("boards.othello.empty", { square: name });
}

export function render(root, ctx) {
  const rows = ctx.view.rows;
  const legal = new Set(ctx.legal);
  const board = el("div", { class: "othello-board", role: "group", "aria-label": t("boards.othello.board") });
  board.append(el("span", { class: "corner", "aria-hidden": "true" }));
  for (let c = 0; c < 8; c++) board.append(el("span", { class: "coord", "aria-hidden": "true" }, [FILES[c]]));
  let black = 0;
  let white = 0;
  rows.forEach((row, r) => {
    board.append(el("span", { class: "coord", "aria-hidden": "true" }, [String(r + 1)]));
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
            "aria-label": cellLabel(name, cell),
            disabled: !playable,
            onclick: () => ctx.play(name),
          },
          [cell ? el("span", { class: `disc disc-${cell}`, "aria-hidden": "true" }) : null],
        ),
      );
    });
  });
  const score = el("div", { class: "othello-score", testid: "disc-count", title: t("boards.othello.count", { black, white }) }, [
    el("span", { class: "disc disc-b mini", role: "img", "aria-label": t("boards.othello.black_discs") }),
    ` ${black}`,
    el("span", { class: "gap" }),
    el("span", { class: "disc disc-w mini", role: "img", "aria-label": t("boards.othello.white_discs") }),
    ` ${white}`,
  ]);
  root.append(el("div", { class: "othello-wrap" }, [board, score]));
}
