// The choice dialog of the game screen (#dialog), a panel of game.js: a modal question with
// a few buttons (resign? abort? which promotion? which capture path?).
// `choose({title, options})` resolves with the value of the button picked, or null when
// cancelled (Cancel, Escape, a click on the backdrop); the keyboard stays inside while it
// is open and goes back where it was. The game screen passes `choose` to its boards and
// its actions panel; `wireChoice()` wires Cancel and the backdrop once.

import { el } from "./boards/common.js";
import { $ } from "./util.js";

let closeDialog = null;

/** Close the open choice, if any, as cancelled. */
function cancelChoice() {
  if (closeDialog) closeDialog(null);
}

/** Tab and Shift+Tab go round the buttons of the open choice, never to the page behind (H7). */
function keepFocusIn(box, event) {
  const items = [...box.querySelectorAll("button:not([disabled])")];
  if (!items.length) return;
  const at = items.indexOf(document.activeElement);
  const next = at < 0 ? 0 : (at + (event.shiftKey ? items.length - 1 : 1)) % items.length;
  event.preventDefault();
  items[next].focus();
}

/** Ask the user to pick one option; resolves with its value, or null when cancelled. */
export function choose({ title, options }) {
  if (closeDialog) closeDialog(null);
  const backdrop = $("dialog");
  $("dialog-title").textContent = title;
  return new Promise((resolve) => {
    const previousFocus = document.activeElement;
    closeDialog = (value) => {
      closeDialog = null;
      backdrop.hidden = true;
      document.removeEventListener("keydown", onKey);
      if (previousFocus && previousFocus.focus) previousFocus.focus();
      resolve(value);
    };
    const onKey = (event) => {
      if (event.key === "Escape" && closeDialog) closeDialog(null);
      else if (event.key === "Tab") keepFocusIn(backdrop, event); // H7: a modal keeps the keyboard
    };
    document.addEventListener("keydown", onKey);
    $("dialog-options").replaceChildren(
      ...options.map((option) =>
        el(
          "button",
          {
            type: "button",
            class: ["btn", option.danger ? "danger" : "primary"],
            testid: option.testid || `choice-${option.value}`,
            onclick: () => closeDialog && closeDialog(option.value),
          },
          [option.label],
        ),
      ),
    );
    backdrop.hidden = false;
    const first = $("dialog-options").querySelector("button");
    if (first) first.focus();
  });
}

/** Cancel and a click on the backdrop close the open choice as cancelled. */
export function wireChoice() {
  $("dialog-cancel").addEventListener("click", cancelChoice);
  $("dialog").addEventListener("click", (event) => {
    if (event.target === $("dialog")) cancelChoice();
  });
}
