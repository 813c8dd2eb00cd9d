// How many moves a game of so many plies is, counted as each game counts them: in chess and
// draughts a move is a turn of each side (White's and Black's: fool's mate is 2 moves of 4
// plies); in the other games every turn is a move. Shared by the game page and "My games".
// A convention of notation only: no rule of any game is applied here.

import { t } from "./i18n.js";

/** The games whose moves are numbered per pair of turns (1. e4 e5). */
const PAIRED = new Set(["chess", "draughts"]);

/** The number of moves of `plies` turns of `game` (chess, draughts: ceil(plies / 2)). */
export function moveCount(game, plies) {
  const n = Math.max(0, Number(plies) || 0);
  return PAIRED.has(game) ? Math.ceil(n / 2) : n;
}

/** "2 moves", "1 move", "2 coups": the length of a game of `plies` turns, in words. */
export function movesText(game, plies) {
  return t("gamepage.moves", { n: moveCount(game, plies) });
}
