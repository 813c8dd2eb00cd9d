// "My games" on the lobby: the games this browser's player (or the signed-in account) played,
// newest first, from GET /api/games?player=<id>, each linking to its game page. A panel of
// the lobby screen.

import { el } from "./boards/common.js";
import { player } from "./storage.js";
import { store } from "./store.js";
import { $, fetchJson, playerLabel } from "./util.js";

const SHOWN = 20;

function outcome(record, seat) {
  const result = record.result;
  if (!result) return { word: "Unfinished", kind: "playing" };
  if (result.winner === null || result.winner === undefined) return { word: "Draw", kind: "draw" };
  return result.winner === seat ? { word: "Won", kind: "win" } : { word: "Lost", kind: "loss" };
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
      const game = store.gamesByName.get(record.game);
      const opponent = record.players[1 - seat];
      const { word, kind } = outcome(record, seat);
      const reason = record.result && record.result.reason ? ` (${record.result.reason})` : "";
      const when = record.ended_ms || record.started_ms;
      return el("li", { class: "room-item", testid: `history-${record.id}` }, [
        el("span", { class: `game-icon small icon-${record.game}`, "aria-hidden": "true" }),
        el("span", { class: "room-info" }, [
          el("strong", {}, [game ? game.title : record.game]),
          el("span", { class: "muted small" }, [
            `vs ${playerLabel(opponent)} · ${record.moves.length} moves · ${new Date(when).toLocaleDateString()}`,
          ]),
        ]),
        el("span", { class: `badge result-${kind}`, title: `${word}${reason}` }, [word]),
        el("a", { class: "btn small", href: `?game=${encodeURIComponent(record.id)}`, testid: `open-${record.id}` }, ["Review"]),
      ]);
    }),
  );
}
