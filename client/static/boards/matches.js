// Matches (misère Nim): one heap; the move is how many matches to take.
import { t } from "../i18n.js";
import { el } from "./common.js";

const MAX_DRAWN = 120; // beyond this the heap is drawn as a count only

export function render(root, ctx) {
  const { heap, max_take: maxTake, variant, last_take: lastTake } = ctx.view;
  const legal = ctx.legal.filter((m) => /^\d+$/.test(m)).sort((a, b) => a - b);
  // The heap's box has one height whatever the count (the board never grows or shrinks as
  // matches are taken or taken back); the matches get smaller as the heap gets bigger.
  const sticks = el("div", {
    class: "matches-heap",
    "data-size": heap <= 32 ? "l" : heap <= 80 ? "m" : "s",
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

  // Each fact is one unbreakable piece, its "·" separator attached to it, so a line never
  // starts or ends with a lone separator.
  const facts = el("div", { class: "matches-facts" }, [
    el("span", { class: "fact" }, [
      el("span", { class: "count", testid: "heap-count" }, [String(heap)]),
      ` ${t("boards.matches.left", { n: heap })}`,
    ]),
    heap ? el("span", { class: "fact" }, [`· ${t("boards.matches.range", { max: maxTake || 0 })}`]) : null,
    variant === "double" ? el("span", { class: "fact" }, [`· ${t("boards.matches.double")}`]) : null,
    lastTake ? el("span", { class: "fact last-take" }, [`· ${t("boards.matches.last_take", { n: lastTake })}`]) : null,
  ]);

  // The take buttons are for the players only (disabled while the other side moves, so the
  // board keeps its height); a spectator and the game page's replay see the heap alone.
  const seated = ctx.you === 0 || ctx.you === 1;
  const shown = !seated ? [] : legal.length ? legal : [...Array(Math.min(maxTake || 0, 3)).keys()].map((i) => String(i + 1));
  const buttons = el("div", {
    class: ["matches-takes", shown.length > 3 && "many"],
    role: "group",
    "aria-label": t("boards.matches.takes"),
  });
  for (const n of shown) {
    const playable = ctx.canMove && ctx.legal.includes(n);
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
        // Many choices (the double variant) show the number alone, to stay on few lines.
        [shown.length > 3 ? n : t("boards.matches.take", { n: Number(n) })],
      ),
    );
  }
  root.append(el("div", { class: "matches-board" }, [sticks, facts, seated ? buttons : null]));
}
