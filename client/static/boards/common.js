// Small DOM helpers shared by the board renderers, the "click a piece, then a square" and
// drag-and-drop logic, and the move animation every board gets from its squares' data
// attributes (captureBoard before a redraw, animateChange after it).

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
let lastDrop = null; // {to, at}: the square a piece was last dropped on by a drag

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
        lastDrop = { to, at: Date.now() }; // already where it was dropped: no slide for it
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
// (data-rove: a point taken out of the Tab order below, still reached by the arrows.)
const FOCUSABLE = 'button:not([disabled]), [role="button"][tabindex="0"], [role="button"][data-rove]';

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
  // One Tab stop for the whole board (H7): the square with the focus, else the first one
  // that can be played, is in the Tab order; the arrow keys reach the others.
  const rove = () => {
    const candidates = [...container.querySelectorAll(FOCUSABLE)];
    const keep = candidates.find((node) => node === document.activeElement) || candidates[0];
    for (const node of candidates) {
      node.dataset.rove = "";
      node.setAttribute("tabindex", node === keep ? "0" : "-1");
    }
  };
  new MutationObserver(rove).observe(container, { childList: true, subtree: true });
  container.addEventListener("focusin", rove);
}

// -- move animation ------------------------------------------------------------------------------
//
// A board is drawn afresh for every snapshot, so a move is animated the FLIP way: the old
// board's squares are read before the redraw (captureBoard) and compared with the new ones
// after it (animateChange). A square is any element with data-square (data-point,
// data-pit, data-cell on some boards); what stands on it is its data-piece (data-stone,
// data-disc, data-seeds, data-mark). Where pieces move (data-piece, data-stone), a piece
// that left one square and arrived on another slides from the old place to the new; on
// the other boards (discs, seeds, marks) the cells that changed pop. No rule is applied:
// only what the two drawings show.

const SQUARE_ATTRS = ["square", "point", "pit", "cell"];
const MOVING_ATTRS = ["piece", "stone"]; // contents that travel from square to square
const CONTENT_ATTRS = [...MOVING_ATTRS, "disc", "seeds", "mark"];
const SQUARES = SQUARE_ATTRS.map((a) => `[data-${a}]`).join(", ");
const PIECE = ".piece, .man, .stone, .stone-shine, [data-anim]";
const POP = ".disc, .mark, .seeds, .piece, .man, .stone, [data-anim]";
/** How long a slide takes, and a pop. */
export const SLIDE_MS = 180;
export const POP_MS = 160;
const DROP_FRESH_MS = 3000;

function squareKey(node) {
  for (const attr of SQUARE_ATTRS) if (node.dataset[attr] !== undefined) return node.dataset[attr];
  return null;
}

function squareContent(node) {
  for (const attr of CONTENT_ATTRS) {
    if (node.dataset[attr] !== undefined) return { attr, value: node.dataset[attr] };
  }
  return { attr: null, value: "" };
}

/** What each square of the board in `root` shows now, and where its piece is drawn. */
export function captureBoard(root) {
  const squares = new Map();
  for (const node of root.querySelectorAll(SQUARES)) {
    const key = squareKey(node);
    if (key === null) continue;
    const { attr, value } = squareContent(node);
    const piece = node.querySelector(PIECE);
    squares.set(key, { attr, value, rect: (piece || node).getBoundingClientRect() });
  }
  const count = root.querySelector("[data-testid=heap-count]"); // matches: the heap's count
  if (count) squares.set("#heap", { attr: "heap", value: count.textContent, rect: count.getBoundingClientRect() });
  return squares;
}

/** The elements that draw the piece on a square (a stone and its shine), outermost only. */
function pieceParts(square) {
  const parts = [...square.querySelectorAll(PIECE)];
  return parts.filter((node) => !parts.some((other) => other !== node && other.contains(node)));
}

function centre(rect) {
  return [rect.left + rect.width / 2, rect.top + rect.height / 2];
}

/** Slide the parts of a piece from where `fromRect` was to where the first is drawn now;
 *  returns how many parts slid. */
function slide(parts, fromRect) {
  if (!parts.length) return 0;
  const [x0, y0] = centre(fromRect);
  const [x1, y1] = centre(parts[0].getBoundingClientRect());
  let dx = x0 - x1;
  let dy = y0 - y1;
  if (parts[0].ownerSVGElement) {
    // Inside an SVG a translation is in the drawing's units, not the screen's pixels.
    const matrix = parts[0].ownerSVGElement.getScreenCTM();
    if (matrix && matrix.a && matrix.d) {
      dx /= matrix.a;
      dy /= matrix.d;
    }
  }
  if (Math.abs(dx) < 1 && Math.abs(dy) < 1) return 0;
  const frames = [{ transform: `translate(${dx}px, ${dy}px)` }, { transform: "translate(0px, 0px)" }];
  for (const node of parts) run(node, "moving", frames, SLIDE_MS);
  return parts.length;
}

function pop(node) {
  run(node, "popping", [{ transform: "scale(0.55)", opacity: 0.2 }, { transform: "scale(1)", opacity: 1 }], POP_MS);
}

function run(node, className, frames, duration) {
  if (typeof node.animate !== "function") return;
  node.classList.add(className);
  const done = () => node.classList.remove(className);
  try {
    const animation = node.animate(frames, { duration, easing: "ease-out" });
    animation.onfinish = done;
    animation.oncancel = done;
  } catch {
    done();
  }
}

/**
 * Animate what changed on the board in `root` since `before` (from captureBoard): slide the
 * pieces that moved, pop the cells that changed. Returns how many elements it animated.
 */
export function animateChange(root, before) {
  if (!before || !before.size) return 0;
  const now = new Map();
  for (const node of root.querySelectorAll(SQUARES)) {
    const key = squareKey(node);
    if (key !== null && before.has(key)) now.set(key, node);
  }
  const arrived = []; // squares whose piece is new there
  const vacated = []; // squares a piece left (empty now)
  const changed = [];
  for (const [key, node] of now) {
    const old = before.get(key);
    const { attr, value } = squareContent(node);
    if (value === old.value) continue;
    changed.push(node);
    if (!MOVING_ATTRS.includes(attr)) continue;
    if (value) arrived.push({ key, node, value });
    if (old.value && !value) vacated.push({ key, value: old.value, rect: old.rect, used: false });
  }
  let count = 0;
  const freshDrop = lastDrop && Date.now() - lastDrop.at < DROP_FRESH_MS ? lastDrop.to : null;
  const pairs = [];
  // The same piece on both squares first; then a piece that changed on the way (a
  // promotion): the only square left, or the one with the same letter in another case.
  for (const match of [
    (a, v) => v.value === a.value,
    (a, v, left) => left.length === 1,
    (a, v) => v.value.toLowerCase() === a.value.toLowerCase(),
  ]) {
    for (const a of arrived) {
      if (a.paired) continue;
      const left = vacated.filter((v) => !v.used);
      const source = left.find((v) => match(a, v, left));
      if (!source) continue;
      source.used = true;
      a.paired = true;
      pairs.push([a, source]);
    }
  }
  for (const [a, source] of pairs) {
    if (a.key === freshDrop) continue; // the hand already put it there
    count += slide(pieceParts(a.node), source.rect);
  }
  if (!pairs.length) {
    for (const node of changed) {
      if (!squareContent(node).value) continue;
      pop(node.querySelector(POP) || node);
      count += 1;
    }
    const heap = before.get("#heap");
    const counter = root.querySelector("[data-testid=heap-count]");
    if (heap && counter && counter.textContent !== heap.value) {
      pop(counter);
      count += 1;
    }
  }
  lastDrop = null;
  return count;
}
