// The end of a game in plain words, from the viewer's side: "You lose on time.",
// "You win: Black resigned.", for spectators "White (ann) wins on time.", with the score where
// the game has one (Othello discs, Oware seeds). Used by the game screen and the game page.
//
// What happened is decided from the result's `termination` code and `winner` (docs/protocol.md,
// "Events and results"), never from the words of `reason`. The words shown come from the
// catalogue (actions.result.*, actions.why.*, in the page's language): a termination that
// names a side (resigned, left, out of time...) is said from its code and the seat the code
// names; the detail the code alone does not give (which counting rule, which repetition) is
// the catalogue's phrase for the reason's words, looked up as they are (numbers aside); a
// reason the catalogue does not know is shown as the server wrote it, without the leading
// label ("draw: ", "aborted: ") and the trailing count that the code and the score already
// say. A record archived before terminations were kept has none: result_legacy.js supplies
// its code. This module applies no rule of any game.

import { has, t } from "./i18n.js";
import { legacyNamedSeat, legacyTermination } from "./result_legacy.js";

// Oware's terminations after which the game was counted out (each side's store plus the
// seeds left on its own row): the final count is the score.
const COUNTED_OUT = new Set(["no-moves", "repetition"]);
// Terminations whose reason names the loser at its start ("Black resigned").
const NAMES_LOSER = new Set(["resignation", "time", "claim"]);
const LABEL = /^[a-z]+:\s*/; // "draw: ", "aborted: "
const COUNT = /\s*\(\d+-\d+\)\s*$/; // Oware's " (26-22)"

const isSeat = (seat) => seat === 0 || seat === 1;

/** The termination code of `result` (a result from before the codes: derived), or null. */
export function terminationOf(result) {
  if (!result) return null;
  return result.termination || legacyTermination(result);
}

/** Whether an Oware game ended counted out, so each side's score is store plus row. */
export function countedOut(result) {
  return COUNTED_OUT.has(terminationOf(result));
}

/** The seat the reason names at its start, known from the code and winner (or, for a
 *  draw on time or a first move not made, the side to move at the end), or null. */
function namedSeat(state, sides) {
  const result = state.result || {};
  if (!result.termination) return legacyNamedSeat(result, sides);
  if (isSeat(result.winner)) return NAMES_LOSER.has(result.termination) ? 1 - result.winner : null;
  const toMove = state.to_move;
  return (result.termination === "time" || result.termination === "abort") && isSeat(toMove) ? toMove : null;
}

/** The shown part of a reason: its words without the leading label and the trailing count,
 *  and whether it had a label (the label says what the code says: the rest is detail). */
function shownReason(reason) {
  const text = String(reason || "").trim();
  const labelled = LABEL.test(text);
  return { words: text.replace(LABEL, "").replace(COUNT, ""), labelled };
}

/** `words` with the side of seat `named` said as "you" when it is the viewer's (for a
 *  reason the catalogue does not know: shown in the server's words). */
function fromViewer(words, named, sides, you) {
  if (!isSeat(named) || named !== you || !sides[named] || !words.startsWith(`${sides[named]} `)) return words;
  return `${t("actions.why.you")}${words.slice(sides[named].length)}`;
}

/** The side names to show: the catalogue's words for the game's sides (common.side.*),
 *  else the ones given. */
function shownSides(game, sides) {
  return [0, 1].map((seat) => {
    const key = `common.side.${game}.${seat}`;
    return game && has(key) ? t(key) : sides[seat];
  });
}

// The terminations that name a side ("Black resigned"): the catalogue's words for it said by
// someone else ({side}) and by the viewer. The code says which; `when` limits it (a draw on
// time names a side, a loss on time needs no detail; an abort names one only with a label).
const NAMED_WORDS = {
  resignation: { key: "actions.why.resigned", you: "actions.why.resigned.you" },
  claim: { key: "actions.why.left", you: "actions.why.left.you" },
  "last-match": { key: "actions.why.lastMatch", you: "actions.why.lastMatch.you" },
  time: { key: "actions.why.timeCannotWin", you: "actions.why.timeCannotWin.you", when: (r, labelled) => !isSeat(r.winner) && labelled },
  abort: { key: "actions.why.noFirstMove", you: "actions.why.noFirstMove.you", when: (r, labelled) => labelled },
};

// The detail of the other terminations, by the reason's words with each number written "#"
// (docs/protocol.md lists them all): the catalogue's key; {n} and {m} are the numbers.
const DETAIL_WORDS = {
  checkmate: "actions.why.checkmate",
  stalemate: "actions.why.stalemate",
  "three in a row": "actions.why.line",
  "board full": "actions.why.boardFull",
  "more discs": "actions.why.moreDiscs",
  "equal discs": "actions.why.equalDiscs",
  "# seeds": "actions.why.seeds",
  "#-#": "actions.why.equalSeeds",
  "no moves": "actions.why.noMoves",
  blocked: "actions.why.blocked",
  "no move can feed": "actions.why.cannotFeed",
  "no seeds to sow": "actions.why.noSeeds",
  "threefold repetition": "actions.why.threefold",
  "fivefold repetition": "actions.why.fivefold",
  "insufficient material": "actions.why.material",
  "fifty-move rule": "actions.why.fiftyMoves",
  "seventy-five-move rule": "actions.why.seventyFiveMoves",
  "#-move king rule": "actions.why.kingRule",
  "#-move endgame rule": "actions.why.endgameRule",
  "# plies": "actions.why.plies",
  "# moves played": "actions.why.movesPlayed",
};

/** The seat whose side name starts `words`, or null. */
function seatStarting(words, sides) {
  for (const seat of [0, 1]) {
    if (sides[seat] && words.startsWith(`${sides[seat]} `)) return seat;
  }
  return null;
}

/**
 * Why the game ended, in the page's language ("" when the reason says nothing more than
 * the code): from the code and the seat it names, else the catalogue's phrase for the
 * reason's words, else those words (the viewer's side as "you").
 */
function whyWords(result, termination, named, shown, sides, you, game) {
  const display = shownSides(game, sides);
  const words = shown.words;
  const entry = NAMED_WORDS[termination];
  if (entry && (!entry.when || entry.when(result, shown.labelled))) {
    // Matches is misère: the reason says what the loser did ("took the last match").
    const loser = termination === "last-match" && isSeat(result.winner) ? 1 - result.winner : null;
    const seat = isSeat(loser) ? loser : isSeat(named) ? named : seatStarting(words, sides);
    if (isSeat(seat)) {
      const vars = { side: display[seat], other: display[1 - seat] };
      return seat === you ? t(entry.you, vars) : t(entry.key, vars);
    }
  }
  const numbers = words.match(/\d+/g) || [];
  const shape = words.replace(/\d+/g, "#");
  const key = Object.hasOwn(DETAIL_WORDS, shape) ? DETAIL_WORDS[shape] : null;
  if (key && has(key)) return t(key, { n: numbers[0], m: numbers[1] });
  return fromViewer(words, named, sides, you);
}

/** The score the game has at its end, in words ("Black 36, White 28 discs"), or "".
 *  `sides`: the side names to write. */
export function scoreWords(game, view, result, sides) {
  if (!view) return "";
  if (game === "othello" && view.rows) {
    let black = 0;
    let white = 0;
    for (const row of view.rows) {
      for (const cell of row) {
        if (cell === "b") black += 1;
        else if (cell === "w") white += 1;
      }
    }
    return t("actions.score.discs", { a: sides[0], x: black, b: sides[1], y: white });
  }
  if (game === "oware" && view.stores) {
    let [south, north] = view.stores;
    if (countedOut(result)) {
      south += (view.south || []).reduce((a, b) => a + b, 0);
      north += (view.north || []).reduce((a, b) => a + b, 0);
    }
    return t("actions.score.seeds", { a: sides[0], x: south, b: sides[1], y: north });
  }
  return "";
}

/**
 * The result of `state` (a room state or a game record: game, result, view, and for a room
 * to_move) in words, in the page's language. `sides`: the players' side names as the server
 * writes them (state.players: "White", "Black"; shown in the catalogue's words); `you`: the
 * viewer's seat or null; `names`: optional labels of the people ("White (ann)") for
 * spectators, in the page's language. Returns {text, outcome} with outcome "win", "loss",
 * "draw", "decided" (for a spectator) or "aborted".
 */
export function describeResult(state, sides, you, names = null) {
  const result = state.result || {};
  const termination = terminationOf(result);
  const named = namedSeat(state, sides);
  const shown = shownReason(result.reason);
  const display = shownSides(state.game, sides);
  const labels = names || display;
  const score = scoreWords(state.game, state.view, result, display);
  const withScore = (text) => (score ? `${text} (${score}).` : `${text}.`);
  const why = () => whyWords(result, termination, named, shown, sides, you, state.game);

  if (termination === "abandon") return { text: t("actions.result.abandoned"), outcome: "aborted" };
  if (termination === "abort") {
    const detail = shown.labelled ? why() : "";
    return { text: detail ? t("actions.result.abortedWhy", { why: detail }) : t("actions.result.aborted"), outcome: "aborted" };
  }
  const winner = result.winner;
  if (!isSeat(winner)) {
    if (termination === "agreement") return { text: withScore(t("actions.result.drawAgreed")), outcome: "draw" };
    const detail = why();
    return { text: withScore(detail ? t("actions.result.drawWhy", { why: detail }) : t("actions.result.draw")), outcome: "draw" };
  }
  const onTime = termination === "time";
  if (isSeat(you)) {
    const won = you === winner;
    const outcome = won ? "win" : "loss";
    if (onTime) return { text: withScore(won ? t("actions.result.youWinOnTime") : t("actions.result.youLoseOnTime")), outcome };
    const detail = why();
    if (won) return { text: withScore(detail ? t("actions.result.youWinWhy", { why: detail }) : t("actions.result.youWin")), outcome };
    return { text: withScore(detail ? t("actions.result.youLoseWhy", { why: detail }) : t("actions.result.youLose")), outcome };
  }
  const name = labels[winner];
  if (onTime) return { text: withScore(t("actions.result.winsOnTime", { name })), outcome: "decided" };
  const detail = why();
  return { text: withScore(detail ? t("actions.result.winsWhy", { name, why: detail }) : t("actions.result.wins", { name })), outcome: "decided" };
}
