// The end of a game in plain words, from the viewer's side: "You lose on time.",
// "You win: Black resigned.", for spectators "White (ann) wins on time.", with the score where
// the game has one (Othello discs, Oware seeds). Used by the game screen and the game page.
//
// What happened is decided from the result's `termination` code and `winner` (docs/protocol.md,
// "Events and results"), never from the words of `reason`: the reason is only shown, as the
// server wrote it, without the leading label ("draw: ", "aborted: ") and the trailing count
// that the code and the score already say, and with the viewer's own side said as "you". A
// record archived before terminations were kept has none: result_legacy.js supplies its code.
// This module applies no rule of any game.

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

/** `words` with the side of seat `named` said as "you" when it is the viewer's. */
function fromViewer(words, named, sides, you) {
  if (!isSeat(named) || named !== you || !sides[named] || !words.startsWith(`${sides[named]} `)) return words;
  return `you${words.slice(sides[named].length)}`;
}

/** The score the game has at its end, in words ("Black 36, White 28 discs"), or "". */
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
    return `${sides[0]} ${black}, ${sides[1]} ${white} discs`;
  }
  if (game === "oware" && view.stores) {
    let [south, north] = view.stores;
    if (countedOut(result)) {
      south += (view.south || []).reduce((a, b) => a + b, 0);
      north += (view.north || []).reduce((a, b) => a + b, 0);
    }
    return `${sides[0]} ${south}, ${sides[1]} ${north} seeds`;
  }
  return "";
}

/** The words of a game that did not count: aborted or abandoned. */
function callOff(termination, shown, named, sides, you) {
  if (termination === "abandon") return "Game abandoned: nobody played for too long.";
  if (!shown.labelled) return "Game aborted.";
  return `Game aborted: ${fromViewer(shown.words, named, sides, you)}.`;
}

/**
 * The result of `state` (a room state or a game record: game, result, view, and for a room
 * to_move) in words. `sides`: the players' side names ("White", "Black"); `you`: the
 * viewer's seat or null; `names`: optional labels of the people ("White (ann)") for
 * spectators. Returns {text, outcome} with outcome "win", "loss", "draw", "decided" (for a
 * spectator) or "aborted".
 */
export function describeResult(state, sides, you, names = sides) {
  const result = state.result || {};
  const termination = terminationOf(result);
  const named = namedSeat(state, sides);
  const shown = shownReason(result.reason);
  const score = scoreWords(state.game, state.view, result, sides);
  const withScore = (text) => (score ? `${text} (${score}).` : `${text}.`);

  if (termination === "abort" || termination === "abandon") {
    return { text: callOff(termination, shown, named, sides, you), outcome: "aborted" };
  }
  const winner = result.winner;
  if (!isSeat(winner)) {
    const why = fromViewer(shown.words, named, sides, you);
    if (termination === "agreement") return { text: withScore("Draw agreed"), outcome: "draw" };
    return { text: withScore(why ? `Draw: ${why}` : "Draw"), outcome: "draw" };
  }
  const loser = 1 - winner;
  let why = shown.words;
  let whyNames = named;
  // Matches is misère: the reason says what the loser did ("took the last match").
  if (termination === "last-match" && sides[loser]) {
    why = `${sides[loser]} ${why}`;
    whyNames = loser;
  }
  const onTime = termination === "time";
  if (isSeat(you)) {
    const won = you === winner;
    const outcome = won ? "win" : "loss";
    if (onTime) return { text: withScore(won ? "You win on time" : "You lose on time"), outcome };
    const head = won ? "You win" : "You lose";
    why = fromViewer(why, whyNames, sides, you);
    return { text: withScore(why ? `${head}: ${why}` : head), outcome };
  }
  if (onTime) return { text: withScore(`${names[winner]} wins on time`), outcome: "decided" };
  return { text: withScore(why ? `${names[winner]} wins: ${why}` : `${names[winner]} wins`), outcome: "decided" };
}
