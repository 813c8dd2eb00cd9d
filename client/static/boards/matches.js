// Matches (misère Nim): one heap; the move is how many matches to take.
import { t } from "../i18n.js";
import { el } from "./common.js";

const MAX_DRAWN = 120; // beyond this the heap is drawn as a count only

export function render(root, ctx) {
  const { heap, max_take: maxTake, variant, last_take: lastTake } = ctx.view;
  const legal = ctx.legal.filter((m) => /^\d+$/.test(m)).sort((a, b) => a - b);
  const sticks = el("div", {
    class: "matches-heap",
    testid: "heap",
    role: "img",
    "aria-label": t("boards.matches.heap", { n: heap }),
  });
  const drawn = Math.min(heap, MAX_DRAWN);
  for (let i = 0; i < drawn; i++) {
    sticks.append(el("span", { class: "match" }, [el("span", { class: "head" })]));
  }
  // A hovered "take" button shows which matches it would remove: the last ones drawn.
  const preview = (count) => {
    const nodes = sticks.querySelectorAll(".match");
    nodes.forEach((node, i) => node.classList.toggle("to-take", i >= nodes.length - count));
  };
  if (heap > MAX_DRAWN) sticks.append(el("span", { class: "more" }, [`+${heap - MAX_DRAWN}`]));

  const facts = el("div", { class: "matches-facts" }, [
    el("span", { class: "count", testid: "heap-count" }, [String(heap)]),
    el("span", {}, [` ${t("boards.matches.left", { n: heap })}`]),
    heap ? el("span", { class: "sep" }, ["·"]) : null,
    heap ? el("span", {}, [t("boards.matches.range", { max: maxTake || 0 })]) : null,
    variant === "double" ? el("span", { class: "sep" }, ["·"]) : null,
    variant === "double" ? el("span", {}, [t("boards.matches.double")]) : null,
    lastTake ? el("span", { class: "sep" }, ["·"]) : null,
    lastTake ? el("span", { class: "last-take" }, [t("boards.matches.last_take", { n: lastTake })]) : null,
  ]);

  const buttons = el("div", { class: "matches-takes", role: "group", "aria-label": t("boards.matches.takes") });
  const shown = legal.length ? legal : [...Array(Math.min(maxTake || 0, 3)).keys()].map((i) => String(i + 1));
  for (const n of shown) {
    const playable = ctx.legal.includes(n);
    buttons.append(
      el(
        "button",
        {
          class: "btn take",
          testid: `take-${n}`,
          disabled: !playable,
          "aria-label": t("boards.matches.take_label", { n: Number(n) }),
          onclick: () => ctx.play(n),
          onmouseenter: () => preview(Number(n)),
          onfocus: () => preview(Number(n)),
          onmouseleave: () => preview(0),
          onblur: () => preview(0),
        },
        [t("boards.matches.take", { n: Number(n) })],
      ),
    );
  }
  root.append(el("div", { class: "matches-board" }, [sticks, facts, buttons]));
}
