// How to play: the rules panel of every game, and what each level of the computer means.
//
// A modal <dialog id="rules-dialog" data-testid="rules">, made on first use: the game's
// rules in sections (goal, board and pieces, how a move is made, captures, how it ends,
// special rules, kibitz's own options), small diagrams (rules_diagrams.js) and a "Levels"
// table giving each level 1-8 its rating in rated play (the catalogue's `levels[].rating`,
// GET /api/games) with a paragraph explaining that scale. Every word comes from the
// catalogue (locales/<lang>/rules.json, keys "rules.<game>.<part>").
//
// It opens from any element with `data-rules` anywhere in the page (one listener on the
// document: the lobby's cards, the game screen's #rules-btn, the game page's
// #replay-rules-btn): `data-rules="<game>"`, or "current" / empty for the room on screen.
// Escape or the Close button closes it, and the focus goes back to the opener.

import { formatNumber, has, t } from "./i18n.js";
import { diagramsFor } from "./rules_diagrams.js";
import { store } from "./store.js";
import { gameTitle, levelRating, loadGames } from "./util.js";

/** The sections of a game's rules, in order; a game shows those its catalogue has. */
const PARTS = ["goal", "board", "moves", "captures", "end", "special", "options"];
const PART_TITLES = {
  goal: () => t("rules.part.goal"),
  board: () => t("rules.part.board"),
  moves: () => t("rules.part.moves"),
  captures: () => t("rules.part.captures"),
  end: () => t("rules.part.end"),
  special: () => t("rules.part.special"),
  options: () => t("rules.part.options"),
};
const LEVEL_WORDS = [
  () => t("rules.level.1"),
  () => t("rules.level.2"),
  () => t("rules.level.3"),
  () => t("rules.level.4"),
  () => t("rules.level.5"),
  () => t("rules.level.6"),
  () => t("rules.level.7"),
  () => t("rules.level.8"),
];

let opener = null; // the element the focus returns to

function make(tag, attrs = {}, children = []) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") element.textContent = value;
    else element.setAttribute(name, value);
  }
  element.append(...children);
  return element;
}

/** Paragraphs from a catalogue text whose paragraphs are separated by line breaks. */
function paragraphs(text) {
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => make("p", { text: line }));
}

function dialog() {
  let box = document.getElementById("rules-dialog");
  if (box) return box;
  box = make("dialog", { id: "rules-dialog", "data-testid": "rules", class: "rules-dialog", "aria-labelledby": "rules-title" });
  const close = make("button", { type: "button", class: "btn rules-close", "data-testid": "rules-close", text: t("rules.close") });
  close.addEventListener("click", () => box.close());
  const head = make("div", { class: "rules-head" }, [make("h2", { id: "rules-title" }), close]);
  // Scrolled by the keyboard too (H7): a focusable region named by the title.
  const body = make("div", { class: "rules-body", "data-testid": "rules-body", tabindex: "0", role: "region", "aria-labelledby": "rules-title" });
  box.append(head, body);
  // A click on the backdrop (outside the panel's box) closes it too.
  box.addEventListener("click", (event) => {
    if (event.target === box) box.close();
  });
  box.addEventListener("close", () => {
    const back = opener;
    opener = null;
    if (back && back.isConnected && typeof back.focus === "function") back.focus();
  });
  document.body.append(box);
  return box;
}

function section(part, title, children) {
  return make("section", { class: `rules-section rules-${part}`, "data-part": part }, [make("h3", { text: title }), ...children]);
}

/** "about 1300": a level's rating as the opponent list rounds it (util.js levelRating). */
function ratingWords(game, level) {
  const rating = levelRating(game, level);
  if (rating === null) return t("rules.levels.unknown");
  return t("rules.levels.about", { rating: formatNumber(rating, { useGrouping: false }) });
}

function levelsTable(game) {
  const head = make("tr", {}, [
    make("th", { scope: "col", text: t("rules.levels.level") }),
    make("th", { scope: "col", text: t("rules.levels.rating") }),
    make("th", { scope: "col", text: t("rules.levels.means") }),
  ]);
  const rows = LEVEL_WORDS.map((words, i) => {
    const level = i + 1;
    return make("tr", { "data-level": String(level) }, [
      make("th", { scope: "row", text: String(level) }),
      make("td", { class: "rules-rating", "data-testid": `rules-rating-${level}`, text: ratingWords(game, level) }),
      make("td", { text: words() }),
    ]);
  });
  return make("table", { class: "rules-levels", "data-testid": "rules-levels" }, [make("thead", {}, [head]), make("tbody", {}, rows)]);
}

function levelsSection(game) {
  const children = [];
  const note = `rules.${game}.levels`;
  if (has(note)) children.push(make("p", { class: "rules-note", text: t(note) }));
  const holder = make("div", { class: "rules-levels-holder" });
  if (store.games.length) {
    holder.append(levelsTable(game));
  } else {
    holder.append(make("p", { class: "muted", text: t("rules.levels.loading") }));
    loadGames().then(() => holder.replaceChildren(levelsTable(game)));
  }
  children.push(holder, ...paragraphs(t("rules.levels.scale")).map((p) => (p.classList.add("rules-scale"), p)));
  return section("levels", t("rules.levels.title"), children);
}

function fill(box, game) {
  box.dataset.game = game;
  box.querySelector("#rules-title").textContent = t("rules.title", { game: gameTitle(game) });
  const body = box.querySelector(".rules-body");
  const sections = [];
  const figures = diagramsFor(game);
  for (const part of PARTS) {
    const key = `rules.${game}.${part}`;
    if (!has(key)) continue;
    sections.push(section(part, PART_TITLES[part](), paragraphs(t(key))));
    // The diagrams go right after the section they illustrate best: how a move is made.
    if (part === "moves" && figures.length) {
      sections.push(make("div", { class: "rules-figures" }, figures));
    }
  }
  if (figures.length && !sections.some((s) => s.classList.contains("rules-figures"))) {
    sections.push(make("div", { class: "rules-figures" }, figures));
  }
  sections.push(levelsSection(game));
  body.replaceChildren(...sections);
  body.scrollTop = 0;
}

/** The game a `data-rules` value names: "current" or "" is the room on screen. */
function gameOf(value) {
  if (value && value !== "current") return value;
  return store.state ? store.state.game : store.selectedGame;
}

/**
 * Open the rules panel on `game` (a game name, e.g. "oware").
 * @param {string} game
 * @param {Element | null} [from] the element to give the focus back to on closing
 */
export function openRules(game, from = null) {
  if (!game) return;
  const box = dialog();
  opener = from || (document.activeElement instanceof HTMLElement ? document.activeElement : null);
  fill(box, game);
  if (!box.open) box.showModal();
  box.querySelector(".rules-close").focus();
}

/** Open the panel from any `[data-rules]` element of the page, by click or Enter. */
export function wireRules() {
  const activate = (event) => {
    const target = event.target instanceof Element ? event.target.closest("[data-rules]") : null;
    if (!target || target.closest("#rules-dialog")) return;
    const game = gameOf(target.dataset.rules);
    if (!game) return;
    event.preventDefault();
    openRules(game, target);
  };
  document.addEventListener("click", activate);
  document.addEventListener("keydown", (event) => {
    // A button already turns Enter into a click; other elements (a link-like span) need it.
    if (event.key !== "Enter" || event.defaultPrevented) return;
    const target = event.target instanceof Element ? event.target.closest("[data-rules]") : null;
    if (!target || target.closest("button, a[href], input, select, textarea")) return;
    activate(event);
  });
}
