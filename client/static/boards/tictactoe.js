// Tic-tac-toe: a 3x3 grid; the move is the cell number 1-9, row by row.
import { t } from "../i18n.js";
import { el, svg } from "./common.js";

function mark(kind) {
  if (kind === "x") {
    return svg("svg", { viewBox: "0 0 100 100", class: "mark mark-x", "aria-hidden": "true" }, [
      svg("line", { x1: 24, y1: 24, x2: 76, y2: 76 }),
      svg("line", { x1: 76, y1: 24, x2: 24, y2: 76 }),
    ]);
  }
  if (kind === "o") {
    return svg("svg", { viewBox: "0 0 100 100", class: "mark mark-o", "aria-hidden": "true" }, [
      svg("circle", { cx: 50, cy: 50, r: 27 }),
    ]);
  }
  return null;
}

const LINES = [
  [1, 2, 3], [4, 5, 6], [7, 8, 9],
  [1, 4, 7], [2, 5, 8], [3, 6, 9],
  [1, 5, 9], [3, 5, 7],
];

/** The cells of a completed line of three (shown at the end of a won game), or none. */
export function winningLine(rows) {
  const at = (n) => rows[Math.floor((n - 1) / 3)][(n - 1) % 3];
  const line = LINES.find(([a, b, c]) => at(a) && at(a) === at(b) && at(b) === at(c));
  return new Set(line ? line.map(String) : []);
}

export function render(root, ctx) {
  const rows = ctx.view.rows;
  const won = winningLine(rows);
  const legal = new Set(ctx.legal);
  const ghost = ctx.state.to_move === 1 ? "o" : "x";
  const grid = el("div", { class: "ttt-grid", role: "group", "aria-label": t("boards.tictactoe.board") });
  rows.forEach((row, r) => {
    row.forEach((cell, c) => {
      const number = String(r * 3 + c + 1);
      const playable = legal.has(number);
      let label;
      if (!cell) label = t("boards.tictactoe.empty", { cell: number });
      else if (won.has(number)) label = t("boards.tictactoe.winning", { cell: number, mark: cell.toUpperCase() });
      else label = t("boards.tictactoe.mark", { cell: number, mark: cell.toUpperCase() });
      grid.append(
        el(
          "button",
          {
            class: [
              "ttt-cell",
              playable && "playable",
              ctx.lastMove === number && "last",
              cell && `has-${cell}`,
              won.has(number) && "win",
            ],
            testid: `cell-${number}`,
            dataset: { cell: number, mark: cell, ...(won.has(number) ? { win: "true" } : {}) },
            "aria-label": label,
            disabled: !playable,
            onclick: () => ctx.play(number),
          },
          [mark(cell), playable ? el("span", { class: "ghost", "aria-hidden": "true" }, [mark(ghost)]) : null],
        ),
      );
    });
  });
  root.append(grid);
}
