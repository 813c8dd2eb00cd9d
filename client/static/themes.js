// Board themes: the colours of the chess and draughts squares, their highlights and
// coordinates (boards.css keeps each theme's custom properties under
// [data-board-theme=...]). The choice is kept in prefs "boardTheme" (the settings dialog
// offers THEMES); applyTheme puts it on the page's root element, so every board, live or
// replayed, takes it at once without a redraw.

/** The themes on offer, in the order of the settings dialog; `labelKey` is its name in the catalogue. */
export const THEMES = [
  { name: "green", labelKey: "boards.theme.green" },
  { name: "wood", labelKey: "boards.theme.wood" },
  { name: "blue", labelKey: "boards.theme.blue" },
];

/** The theme used when none (or an unknown one) is chosen. */
export const DEFAULT_THEME = "green";

/**
 * Show the boards in theme `name` (an unknown name falls back to the default); returns
 * the name applied.
 */
export function applyTheme(name) {
  const theme = THEMES.some((t) => t.name === name) ? name : DEFAULT_THEME;
  document.documentElement.dataset.boardTheme = theme;
  return theme;
}
