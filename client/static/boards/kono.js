// Kono (Pong Hau K'i): five points, a top-left, c top-right, e centre, b bottom-left,
// d bottom-right; lines a-b, c-d, b-d and each corner to e (no a-c line). Moves "a-e".
import { t } from "../i18n.js";
import { groupMoves, pickHandler, svg } from "./common.js";

const POINTS = { a: [20, 20], c: [180, 20], e: [100, 100], b: [20, 180], d: [180, 180] };
const LINES = [["a", "b"], ["c", "d"], ["b", "d"], ["a", "e"], ["b", "e"], ["c", "e"], ["d", "e"]];

function pointLabel(name, stone) {
  if (stone === "b") return t("boards.kono.black", { point: name });
  if (stone === "w") return t("boards.kono.white", { point: name });
  return t("boards.kono.empty", { point: name });
}

export function render(root, ctx) {
  const points = ctx.view.points;
  const byFrom = groupMoves(ctx.legal, (m) => m.split("-"));
  const selected = byFrom.has(ctx.ui.selected) ? ctx.ui.selected : undefined;
  const lastPath = ctx.lastMove ? ctx.lastMove.split("-") : [];
  // With one empty point, a click on it plays the move when only one piece can go there.
  const reaching = new Map();
  for (const [from, targets] of byFrom) {
    for (const [to, moves] of targets) reaching.set(to, (reaching.get(to) || []).concat(moves));
  }
  const pick = pickHandler(ctx, byFrom, async () => null);
  const click = (name) => {
    if (!selected && reaching.has(name) && reaching.get(name).length === 1) {
      ctx.play(reaching.get(name)[0]);
    } else {
      pick(name);
    }
  };
  const targets = selected
    ? new Set(byFrom.get(selected).keys())
    : new Set([...reaching].filter(([, moves]) => moves.length === 1).map(([to]) => to));

  const board = svg("svg", { viewBox: "-16 -34 232 268", class: "kono-board", role: "group", "aria-label": t("boards.kono.board") });
  for (const [p, q] of LINES) {
    const [x1, y1] = POINTS[p];
    const [x2, y2] = POINTS[q];
    const onLast = lastPath.includes(p) && lastPath.includes(q);
    board.append(svg("line", { x1, y1, x2, y2, class: ["kono-line", onLast && "last"] }));
  }
  for (const [name, [x, y]] of Object.entries(POINTS)) {
    const stone = points[name];
    const movable = byFrom.has(name);
    const isTarget = targets.has(name);
    const enabled = movable || isTarget || selected;
    const group = svg("g", {
      class: [
        "kono-point",
        movable && "movable",
        isTarget && "target",
        selected === name && "selected",
        lastPath.includes(name) && "last",
      ],
      "data-testid": `point-${name}`,
      "data-point": name,
      "data-stone": stone,
      role: "button",
      tabindex: enabled ? "0" : "-1",
      "aria-disabled": enabled ? "false" : "true",
      "aria-label": pointLabel(name, stone),
    });
    group.append(svg("circle", { cx: x, cy: y, r: 19, class: "spot" }));
    if (stone) {
      group.append(svg("circle", { cx: x, cy: y, r: 15, class: `stone stone-${stone}` }));
      group.append(svg("circle", { cx: x - 4, cy: y - 5, r: 5, class: `stone-shine stone-shine-${stone}` }));
    }
    const [lx, ly] = y < 100 ? [x, y - 25] : y > 100 ? [x, y + 36] : [x + 30, y + 5];
    const label = svg("text", { x: lx, y: ly, class: "kono-label", "aria-hidden": "true" });
    label.textContent = name;
    group.append(label);
    if (enabled) {
      group.addEventListener("click", () => click(name));
      group.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") click(name);
      });
    }
    board.append(group);
  }
  root.append(board);
}
