// The settings dialog, opened by the top bar's #settings-btn: sounds on or off, the board
// theme, move animation, premoves and move confirmation. Each choice is kept at once in
// localStorage (storage.js prefs: "sound", "boardTheme", "animation", "premove",
// "confirmMove") and said to the page with a "kibitz:prefs" event on window, so the game
// screen follows without a reload. A native modal <dialog>: Escape closes it, the focus
// stays inside it while it is open and goes back to the button after.

import { el } from "./boards/common.js";
import { has, t } from "./i18n.js";
import { setSoundOn, soundOn } from "./sounds.js";
import { prefs } from "./storage.js";
import { THEMES, applyTheme } from "./themes.js";

/** The choices of prefs "confirmMove". */
export const CONFIRM_CHOICES = ["never", "correspondence", "always"];

function changed(name) {
  window.dispatchEvent(new CustomEvent("kibitz:prefs", { detail: { name } }));
}

function checkbox(name, label, checked, onChange) {
  const input = el("input", { type: "checkbox", id: `setting-${name}`, testid: `setting-${name}` });
  input.checked = checked;
  input.addEventListener("change", () => onChange(input.checked));
  return el("label", { class: "setting setting-check", for: `setting-${name}` }, [input, el("span", {}, [label])]);
}

function select(name, label, choices, value, onChange) {
  const input = el(
    "select",
    { id: `setting-${name}`, testid: `setting-${name}` },
    choices.map(([code, words]) => el("option", { value: code }, [words])),
  );
  input.value = value;
  input.addEventListener("change", () => onChange(input.value));
  return el("label", { class: "setting setting-select", for: `setting-${name}` }, [el("span", {}, [label]), input]);
}

function themeLabel(theme) {
  return theme.labelKey && has(theme.labelKey) ? t(theme.labelKey) : theme.name;
}

/** The dialog's controls, read from the preferences as they are now. */
function controls() {
  const confirmNow = prefs.get("confirmMove", "correspondence");
  return [
    checkbox("sound", t("feel.settings.sound"), soundOn(), (on) => setSoundOn(on)),
    select(
      "theme",
      t("feel.settings.theme"),
      THEMES.map((theme) => [theme.name, themeLabel(theme)]),
      prefs.get("boardTheme", "green"),
      (name) => {
        prefs.set("boardTheme", name);
        applyTheme(name);
        changed("boardTheme");
      },
    ),
    checkbox("animation", t("feel.settings.animation"), prefs.get("animation", true) !== false, (on) => {
      prefs.set("animation", on);
      changed("animation");
    }),
    checkbox("premove", t("feel.settings.premove"), prefs.get("premove", true) !== false, (on) => {
      prefs.set("premove", on);
      changed("premove");
    }),
    select(
      "confirm",
      t("feel.settings.confirm"),
      [
        ["never", t("feel.settings.confirm.never")],
        ["correspondence", t("feel.settings.confirm.correspondence")],
        ["always", t("feel.settings.confirm.always")],
      ],
      CONFIRM_CHOICES.includes(confirmNow) ? confirmNow : "correspondence",
      (value) => {
        prefs.set("confirmMove", value);
        changed("confirmMove");
      },
    ),
  ];
}

function dialog() {
  let node = document.getElementById("settings-dialog");
  if (node) return node;
  node = el("dialog", { id: "settings-dialog", class: "settings-dialog", testid: "settings-dialog", "aria-labelledby": "settings-title" });
  node.addEventListener("click", (event) => {
    if (event.target === node) node.close(); // a click on the backdrop
  });
  document.body.append(node);
  return node;
}

/** Open the settings dialog (drawn afresh from the stored preferences). */
export function openSettings() {
  const node = dialog();
  const opener = document.activeElement;
  const close = el("button", { type: "button", class: "btn primary", testid: "settings-close", onclick: () => node.close() }, [
    t("feel.settings.close"),
  ]);
  node.replaceChildren(
    el("form", { method: "dialog", class: "settings-form" }, [
      el("h2", { id: "settings-title" }, [t("feel.settings.title")]),
      el("div", { class: "settings-list" }, controls()),
      el("p", { class: "muted small" }, [t("feel.settings.kept")]),
      el("div", { class: "btn-row" }, [close]),
    ]),
  );
  node.addEventListener(
    "close",
    () => {
      if (opener && typeof opener.focus === "function" && document.contains(opener)) opener.focus();
    },
    { once: true },
  );
  if (!node.open) node.showModal();
  const first = node.querySelector("input, select");
  if (first) first.focus();
}

/** Wire the top bar's settings button (#settings-btn) to the dialog. */
export function wireSettings() {
  const button = document.getElementById("settings-btn");
  if (!button) return;
  button.setAttribute("aria-haspopup", "dialog");
  if (!button.textContent.trim() && !button.getAttribute("aria-label")) button.setAttribute("aria-label", t("feel.settings.open"));
  button.addEventListener("click", openSettings);
}
