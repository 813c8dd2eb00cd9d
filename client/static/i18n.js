// The client's words in two languages (docs/client.md, "Languages").
//
// Every string the page shows comes from a message catalogue: one JSON file per area and
// language under locales/<lang>/<area>.json, a flat object of dotted keys
// ("lobby.create": "Create game"). A value may hold placeholders ({name}) and, where a
// number changes the words, be an object of plural forms ({"one": "{n} move", "other":
// "{n} moves"}) chosen by the language's rules (Intl.PluralRules: French says "1 coup",
// "0 coup"). The language is the one chosen with the switch (kept in localStorage), else
// the browser's first language we have, else English; a key missing in it falls back to
// English, then to the key itself (tests/client/test_i18n.py keeps both complete).
//
// The catalogue loads before any screen runs (a top-level await): every importer of this
// module sees it ready. Switching language stores the choice and reloads the page, so no
// screen has to redraw its words.

/** The languages of the client, in the order of the switch. */
export const LANGUAGES = [
  { code: "en", name: "English" },
  { code: "fr", name: "Français" },
];

/** The catalogue's areas: one JSON file each per language (add a file here and in locales/). */
const AREAS = [
  "common", "page", "lobby", "game", "actions", "chat", "errors", "account", "players",
  "gamepage", "rules", "boards", "feel", "a11y",
];

const LANG_KEY = "kibitz:lang";
const CODES = new Set(LANGUAGES.map((l) => l.code));

function storedLanguage() {
  try {
    const value = localStorage.getItem(LANG_KEY);
    return CODES.has(value) ? value : null;
  } catch {
    return null;
  }
}

function browserLanguage() {
  for (const tag of navigator.languages || [navigator.language || "en"]) {
    const code = String(tag).toLowerCase().split("-")[0];
    if (CODES.has(code)) return code;
  }
  return "en";
}

async function loadCatalogue(lang) {
  const parts = await Promise.all(
    AREAS.map(async (area) => {
      try {
        const response = await fetch(`/static/locales/${lang}/${area}.json`);
        return response.ok ? await response.json() : {};
      } catch {
        return {};
      }
    }),
  );
  return Object.assign({}, ...parts);
}

const current = storedLanguage() || browserLanguage();
const [english, messages] = await Promise.all([
  loadCatalogue("en"),
  current === "en" ? Promise.resolve(null) : loadCatalogue(current),
]);
const plurals = new Intl.PluralRules(current);
document.documentElement.lang = current;

/** The language on screen ("en", "fr"). */
export function language() {
  return current;
}

/** Store the choice and reload the page in that language. */
export function setLanguage(code) {
  if (!CODES.has(code) || code === current) return;
  try {
    localStorage.setItem(LANG_KEY, code);
  } catch {
    // Private mode: the switch still works for this page load.
  }
  location.reload();
}

function lookup(key) {
  if (messages && Object.hasOwn(messages, key)) return messages[key];
  if (Object.hasOwn(english, key)) return english[key];
  return undefined;
}

/** Whether the catalogue has this key (for words looked up by a server code). */
export function has(key) {
  return lookup(key) !== undefined;
}

function fill(text, vars) {
  return text.replace(/\{(\w+)\}/g, (whole, name) => (vars && name in vars ? String(vars[name]) : whole));
}

/**
 * The words of `key` with its placeholders filled: t("lobby.plays", {name: "Ann"}).
 * A plural value takes its form from `vars.n`.
 */
export function t(key, vars = undefined) {
  let value = lookup(key);
  if (value === undefined) return key;
  if (typeof value === "object") {
    const n = vars && typeof vars.n === "number" ? vars.n : 0;
    value = value[plurals.select(n)] ?? value.other ?? "";
  }
  return fill(String(value), vars);
}

/** A number in the language's way of writing it (1 234,5 in French). */
export function formatNumber(n, options = undefined) {
  return new Intl.NumberFormat(current, options).format(n);
}

/** A date (and time, when `withTime`) in the language's way. */
export function formatDate(date, withTime = false) {
  const options = withTime ? { dateStyle: "medium", timeStyle: "short" } : { dateStyle: "medium" };
  return new Intl.DateTimeFormat(current, options).format(date instanceof Date ? date : new Date(date));
}

/**
 * Words written into the page's HTML: `data-i18n="key"` sets the text, and
 * `data-i18n-attr="placeholder:key; title:key; aria-label:key"` sets attributes.
 */
export function translateDom(root = document) {
  for (const node of root.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  for (const node of root.querySelectorAll("[data-i18n-attr]")) {
    for (const pair of node.dataset.i18nAttr.split(";")) {
      const [attr, key] = pair.split(":").map((s) => s.trim());
      if (attr && key) node.setAttribute(attr, t(key));
    }
  }
}
