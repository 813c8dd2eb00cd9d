// Small DOM helpers shared by the board renderers.

const SVG_NS = "http://www.w3.org/2000/svg";

/** An HTML element: el("button", {class: "cell", dataset: {testid: "cell-1"}}, ["X"]). */
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of [].concat(children)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An SVG element, same calling convention as el(). */
export function svg(tag, attrs = {}, children = []) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const child of [].concat(children)) {
    if (child) node.append(child);
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") {
      for (const [k, v] of Object.entries(value)) node.dataset[k] = v;
    } else if (key === "testid") {
      node.setAttribute("data-testid", value);
    } else if (key.startsWith("on") && typeof value === "function") {
      node.addEventListener(key.slice(2), value);
    } else if (key === "class" && Array.isArray(value)) {
      node.setAttribute("class", value.filter(Boolean).join(" "));
    } else {
      node.setAttribute(key, value === true ? "" : value);
    }
  }
}

/** Board coordinates for the viewer: flipped boards show the last row and column first. */
export function orient(count, flipped) {
  const order = [...Array(count).keys()];
  return flipped ? order.reverse() : order;
}

/**
 * Moves grouped by their first and last squares, for "click a piece, then a square" boards.
 * `split` turns a move text into its list of squares.
 */
export function groupMoves(legal, split) {
  const byFrom = new Map();
  for (const move of legal) {
    const squares = split(move);
    if (squares.length < 2) continue;
    const from = squares[0];
    const to = squares[squares.length - 1];
    if (!byFrom.has(from)) byFrom.set(from, new Map());
    const targets = byFrom.get(from);
    if (!targets.has(to)) targets.set(to, []);
    targets.get(to).push(move);
  }
  return byFrom;
}

/**
 * The click handler of a "select a piece, then a target" board. `ctx.ui.selected` keeps the
 * selection across re-renders; `resolve(candidates)` picks among several moves (promotion,
 * ambiguous capture paths) and returns a move text or null.
 */
export function pickHandler(ctx, byFrom, resolve) {
  return async (square, { select = false } = {}) => {
    const selected = ctx.ui.selected;
    if (select) {
      // A drag starts from this piece, whatever was selected before.
      ctx.ui.selected = square;
      return;
    }
    if (selected !== undefined && byFrom.has(selected) && byFrom.get(selected).has(square)) {
      const candidates = byFrom.get(selected).get(square);
      const move = candidates.length === 1 ? candidates[0] : await resolve(candidates);
      ctx.ui.selected = undefined;
      if (move) ctx.play(move);
      else ctx.rerender();
      return;
    }
    ctx.ui.selected = byFrom.has(square) && square !== selected ? square : undefined;
    ctx.rerender();
  };
}

const DRAG_THRESHOLD_PX = 6;

/**
 * Drag and drop on top of click-click: press on a movable piece, drop it on a target.
 * `click(square)` is the board's click handler (from pickHandler); a drop is played as the
 * two clicks it stands for. Squares carry `data-square`; the dragged image is a clone of
 * the square's `.piece` or `.man`.
 */
export function enableDrag(board, byFrom, click) {
  board.addEventListener("pointerdown", (down) => {
    const square = down.target.closest("[data-square]");
    if (!square || down.button !== 0 || !byFrom.has(square.dataset.square)) return;
    const piece = square.querySelector(".piece, .man");
    if (!piece) return;
    const from = square.dataset.square;
    let ghost = null;
    const move = (event) => {
      if (!ghost) {
        if (Math.hypot(event.clientX - down.clientX, event.clientY - down.clientY) < DRAG_THRESHOLD_PX) return;
        const box = piece.getBoundingClientRect();
        ghost = piece.cloneNode(true);
        ghost.classList.add("drag-ghost");
        ghost.style.width = `${box.width}px`;
        ghost.style.height = `${box.height}px`;
        document.body.append(ghost);
        piece.classList.add("dragging");
      }
      const box = ghost.getBoundingClientRect();
      ghost.style.left = `${event.clientX - box.width / 2}px`;
      ghost.style.top = `${event.clientY - box.height / 2}px`;
    };
    const up = (event) => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      window.removeEventListener("pointercancel", up);
      if (!ghost) return; // a plain click: the click handler does the work
      ghost.remove();
      piece.classList.remove("dragging");
      const over = document.elementFromPoint(event.clientX, event.clientY);
      const target = over && over.closest("[data-square]");
      const to = target && board.contains(target) ? target.dataset.square : null;
      if (event.type === "pointerup" && to && to !== from && byFrom.get(from).has(to)) {
        click(from, { select: true });
        click(to);
      }
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
    window.addEventListener("pointercancel", up);
  });
}

const ARROWS = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
const FOCUSABLE = 'button:not([disabled]), [role="button"][tabindex="0"]';

/**
 * Arrow keys move the keyboard focus between the squares of a board that can be played
 * (enabled buttons), to the nearest one on screen in that direction, whatever the board
 * and its orientation; Enter or Space then plays it. Attach once to the board's container.
 */
export function enableArrowKeys(container) {
  container.addEventListener("keydown", (event) => {
    const step = ARROWS[event.key];
    if (!step || event.altKey || event.ctrlKey || event.metaKey) return;
    const candidates = [...container.querySelectorAll(FOCUSABLE)];
    if (!candidates.length) return;
    event.preventDefault();
    const current = candidates.find((node) => node === document.activeElement || node.contains(document.activeElement));
    if (!current) {
      candidates[0].focus();
      return;
    }
    const centre = (node) => {
      const box = node.getBoundingClientRect();
      return [box.left + box.width / 2, box.top + box.height / 2];
    };
    const [x0, y0] = centre(current);
    let best = null;
    let bestScore = Infinity;
    for (const node of candidates) {
      if (node === current) continue;
      const [x, y] = centre(node);
      const along = (x - x0) * step[0] + (y - y0) * step[1];
      const across = Math.abs((x - x0) * step[1] + (y - y0) * step[0]);
      if (along <= 1) continue;
      const score = along + 2 * across;
      if (score < bestScore) {
        best = node;
        bestScore = score;
      }
    }
    if (best) best.focus();
  });
}
