// "My games" on the lobby: the games this browser's player (or the signed-in account) played,
// newest first, from GET /api/games?player=<id>, each linking to its game page. A panel of
// the lobby screen.
//
// Each line says the game, the opponent (whole: a long name wraps, and its title holds it
// too), the length counted as the game counts moves (fool's mate is "2 moves": movecount.js),
// the date in the page's language and the outcome. Every word comes from the catalogue.

import { el } from "./boards/common.js";
import { formatDate, t } from "./i18n.js";
import { movesText } from "./movecount.js";
import { describeResult } from "./result.js";
import { player } from "./storage.js";
import { store } from "./store.js";
import { $, fetchJson, gameTitle, playerLabel } from "./util.js";

const SHOWN = 20;

function outcome(record, seat) {
  const result = record.result;
  if (!result) return { word: t("gamepage.history.unfinished"), kind: "playing" };
  if (result.winner === null || result.winner === undefined) return { word: t("gamepage.history.draw"), kind: "draw" };
  return result.winner === seat ? { word: t("gamepage.history.won"), kind: "win" } : { word: t("gamepage.history.lost"), kind: "loss" };
}

/** The result from this player's side ("You win: checkmate."), or "" while unfinished. */
function resultWords(record, seat) {
  if (!record.result) return "";
  const game = store.gamesByName.get(record.game);
  const sides = game ? game.players : ["", ""];
  return describeResult({ game: record.game, result: record.result, view: null }, sides, seat >= 0 ? seat : null).text;
}

export async function renderMyHistory() {
  const id = store.account ? store.account.player : await player.id();
  const panel = $("history-panel");
  if (!id) {
    panel.hidden = true;
    return;
  }
  let games;
  try {
    games = (await fetchJson(`/api/games?player=${id}&limit=${SHOWN}`)).games;
  } catch {
    panel.hidden = true; // a convenience: the lobby works without it
    return;
  }
  panel.hidden = games.length === 0;
  $("history").replaceChildren(
    ...games.map((record) => {
      const seat = record.players.findIndex((info) => info.player === id);
      const opponent = record.players[1 - seat];
      const { word, kind } = outcome(record, seat);
      const why = resultWords(record, seat);
      const when = record.ended_ms || record.started_ms;
      const who = playerLabel(opponent, record.game);
      return el("li", { class: "room-item history-item", testid: `history-${record.id}` }, [
        el("span", { class: `game-icon small icon-${record.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [gameTitle(record.game)]),
          el("span", { class: "muted small history-opponent", title: who, testid: `history-opponent-${record.id}` }, [
            t("gamepage.history.versus", { name: who }),
          ]),
          el("span", { class: "muted small history-meta" }, [
            el("span", { testid: `history-moves-${record.id}` }, [movesText(record.game, record.moves.length)]),
            " · ",
            formatDate(when),
          ]),
        ]),
        el("span", { class: `badge result-${kind}`, title: why || word }, [word]),
        el("a", { class: "btn small", href: `?game=${encodeURIComponent(record.id)}`, testid: `open-${record.id}` }, [t("gamepage.history.review")]),
      ]);
    }),
  );
}
