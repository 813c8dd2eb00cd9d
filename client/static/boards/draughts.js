// International draughts: 10x10, dark squares numbered 1-50 row by row from the top-left.
// Moves "32-28", "28x19" or a full path "28x19x10"; men "w"/"b", kings "W"/"B".
// Men and kings are kibitz's own SVG drawings (pieces.js), named in words on each square.
import { t } from "../i18n.js";
import { el, enableDrag, groupMoves, orient, pickHandler } from "./common.js";
import { draughtsPiece, draughtsPieceName, takenMark } from "./pieces.js";

function squareNumber(r, c) {
  return (r + c) % 2 === 1 ? r * 5 + Math.floor(c / 2) + 1 : null;
}

function splitMove(move) {
  return move.split(/[-x]/).filter(Boolean);
}

/** Row and column of square `n` (1-50). */
function squareAt(n) {
  const r = Math.floor((n - 1) / 5);
  return [r, 2 * ((n - 1) % 5) + (r % 2 === 0 ? 1 : 0)];
}

/**
 * The squares whose pieces the last move captured: the pieces of the other colour that
 * were on the board before the move and are gone now (from the previous view), or, with
 * no previous view, the square jumped over in each short hop of the path.
 */
export function capturedSquares(lastMove, rows, prevRows) {
  if (!lastMove || !lastMove.includes("x")) return new Map();
  const path = splitMove(lastMove).map(Number);
  const [tr, tc] = squareAt(path[path.length - 1]);
  const mover = (rows[tr][tc] || "").toLowerCase();
  const taken = new Map(); // square -> the piece that stood there
  if (prevRows) {
    for (let n = 1; n <= 50; n++) {
      const [r, c] = squareAt(n);
      const before = prevRows[r][c];
      if (before && before.toLowerCase() !== mover && !rows[r][c]) taken.set(String(n), before);
    }
    return taken;
  }
  for (let i = 0; i + 1 < path.length; i++) {
    const [r1, c1] = squareAt(path[i]);
    const [r2, c2] = squareAt(path[i + 1]);
    if (Math.abs(r2 - r1) !== 2 || Math.abs(c2 - c1) !== 2) continue; // a king's long jump: unknown
    const r = (r1 + r2) / 2;
    const c = (c1 + c2) / 2;
    taken.set(String(r * 5 + Math.floor(c / 2) + 1), mover === "w" ? "b" : "w");
  }
  return taken;
}

export function render(root, ctx) {
  const rows = ctx.view.rows;
  const byFrom = groupMoves(ctx.legal, splitMove);
  const selected = byFrom.has(ctx.ui.selected) ? ctx.ui.selected : undefined;
  const targets = selected ? byFrom.get(selected) : new Map();
  const lastPath = ctx.lastMove ? splitMove(ctx.lastMove) : [];
  const lastFrom = lastPath[0];
  const lastTo = lastPath[lastPath.length - 1];
  const captured = capturedSquares(ctx.lastMove, rows, ctx.prevView ? ctx.prevView.rows : null);
  const click = pickHandler(ctx, byFrom, (candidates) =>
    ctx.choose({
      title: t("boards.draughts.which_path"),
      options: candidates.map((m) => ({ label: m, value: m, testid: `path-${m}` })),
    }),
  );

  const board = el("div", { class: "draughts-board", role: "group", "aria-label": t("boards.draughts.board") });
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
        children.push(draughtsPiece(piece));
      } else if (captured.has(name)) {
        // The ghost of a piece the last move took.
        children.push(takenMark(captured.get(name)));
      }
      let label;
      if (piece) label = t("boards.draughts.square_piece", { square: name, piece: draughtsPieceName(piece) });
      else if (captured.has(name)) label = t("boards.draughts.square_captured", { square: name });
      else label = t("boards.draughts.square_empty", { square: name });
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
              captured.has(name) && "captured-square",
            ],
            testid: `sq-${name}`,
            dataset: { square: name, piece, ...(captured.has(name) ? { captured: "true" } : {}) },
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
