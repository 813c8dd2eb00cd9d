// Oware (Abapa): South's pits A-F left to right along the bottom, North's a-f from North's
// left, so drawn right to left along the top; the move is the pit letter. Stores show the
// seeds each side has captured. Seat 1 (North) sees the board turned round.
import { t } from "../i18n.js";
import { countedOut } from "../result.js";
import { el } from "./common.js";

const SOUTH = "ABCDEF";
const NORTH = "abcdef";
const MAX_DOTS = 15;

function seeds(count, max = MAX_DOTS) {
  const box = el("span", { class: "seeds", "aria-hidden": "true" });
  for (let i = 0; i < Math.min(count, max); i++) box.append(el("span", { class: "seed" }));
  return box;
}

export function render(root, ctx) {
  const { south, north, stores } = ctx.view;
  const legal = new Set(ctx.legal);
  const pit = (letter, count, side) => {
    const playable = legal.has(letter);
    return el(
      "button",
      {
        class: ["pit", side, playable && "playable", ctx.lastMove === letter && "last"],
        testid: `pit-${letter}`,
        dataset: { pit: letter, seeds: String(count) },
        "aria-label": t("boards.oware.pit", { pit: letter, n: count }),
        disabled: !playable,
        onclick: () => ctx.play(letter),
      },
      [seeds(count), el("span", { class: "pit-count" }, [String(count)]), el("span", { class: "pit-name" }, [letter])],
    );
  };
  // A game counted out at its end (its result's termination says so) gives each side the
  // seeds left on its own row too: the stores then show that sum, so they agree with the
  // result ("no move can feed (26-22)").
  const result = ctx.state && ctx.state.result;
  const isCountedOut = Boolean(result && countedOut(result));
  const onRow = [south.reduce((a, b) => a + b, 0), north.reduce((a, b) => a + b, 0)];
  const store = (index, label) => {
    const total = isCountedOut ? stores[index] + onRow[index] : stores[index];
    const aria = isCountedOut
      ? t("boards.oware.store_counted", { side: label, stores: stores[index], left: onRow[index], n: total })
      : t("boards.oware.store", { side: label, n: stores[index] });
    return el("div", { class: "store", testid: `store-${index}`, dataset: { total: String(total) }, "aria-label": aria }, [
      seeds(stores[index], 30),
      el("span", { class: "store-count" }, [String(total)]),
      isCountedOut && onRow[index] ? el("span", { class: "store-extra muted" }, [t("boards.oware.left", { stores: stores[index], left: onRow[index] })]) : null,
      el("span", { class: "store-name" }, [label]),
    ]);
  };

  const southPits = SOUTH.split("").map((letter, i) => pit(letter, south[i], "south"));
  const northPits = NORTH.split("").map((letter, i) => pit(letter, north[i], "north"));
  // Counter-clockwise sowing: A..F left to right at the bottom, a..f right to left on top.
  let top = northPits.slice().reverse();
  let bottom = southPits;
  let left = store(1, t("boards.oware.north"));
  let right = store(0, t("boards.oware.south"));
  if (ctx.flipped) {
    top = southPits.slice().reverse();
    bottom = northPits;
    left = store(0, t("boards.oware.south"));
    right = store(1, t("boards.oware.north"));
  }
  root.append(
    el("div", { class: "oware-board", role: "group", "aria-label": t("boards.oware.board") }, [
      left,
      el("div", { class: "pits" }, [el("div", { class: "row top" }, top), el("div", { class: "row bottom" }, bottom)]),
      right,
    ]),
  );
}
