// The end of a game in plain words, from the viewer's side: "You lose on time.",
// "You win: Black resigned.", for spectators "White (ann) wins on time.", with the score where
// the game has one (Othello discs, Oware seeds). Used by the game screen and the game page.
//
// The server's reasons name a side ("White ran out of time", "Black resigned", "First
// took the last match") or the rule that decided ("checkmate", "three in a row"); this
// module only rephrases them, it applies no rule.

const TIME = / ran out of time$/;

/** The seat a reason names at its start ("Black resigned" -> 1), or null. */
function namedSeat(reason, sides) {
  for (const seat of [0, 1]) {
    if (sides[seat] && reason.startsWith(`${sides[seat]} `)) return seat;
  }
  return null;
}

/** The reason with the viewer's own side said as "you": "you resigned". */
function fromViewer(reason, sides, you) {
  const seat = namedSeat(reason, sides);
  if (seat === null || seat !== you) return reason;
  return `you${reason.slice(sides[seat].length)}`;
}

/** The score the game has at its end, in words ("Black 36, White 28 discs"), or "". */
export function scoreWords(game, view, reason, sides) {
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
    // When the game is counted out, the reason carries the final count (stores plus the
    // seeds left on each side): that is the score, and the board shows both parts.
    const counted = /\((\d+)-(\d+)\)\s*$/.exec(reason || "");
    const [south, north] = counted ? [counted[1], counted[2]] : view.stores;
    return `${sides[0]} ${south}, ${sides[1]} ${north} seeds`;
  }
  return "";
}

/**
 * The result of `state` (a room state or a game record: game, result, view) in words.
 * `sides`: the players' side names ("White", "Black"); `you`: the viewer's seat or null;
 * `names`: optional labels of the people ("White (ann)") for spectators.
 * Returns {text, outcome} with outcome "win", "loss", "draw", "decided" (for a
 * spectator) or "aborted".
 */
export function describeResult(state, sides, you, names = sides) {
  const result = state.result || {};
  const seated = you === 0 || you === 1;
  let reason = String(result.reason || "").trim();
  const score = scoreWords(state.game, state.view, reason, sides);
  reason = reason.replace(/\s*\(\d+-\d+\)\s*$/, ""); // the count goes to the score
  const withScore = (text) => (score ? `${text} (${score}).` : `${text}.`);

  if (reason === "aborted" || reason === "abandoned" || reason.startsWith("aborted: ") ||
      / left before the start$/.test(reason)) {
    let why = "Game aborted";
    if (reason === "abandoned") why = "Game abandoned: nobody played for too long";
    else if (reason !== "aborted") {
      why = `Game aborted: ${fromViewer(reason.replace(/^aborted:\s*/, ""), sides, you)}`;
    }
    return { text: `${why}.`, outcome: "aborted" };
  }
  const winner = result.winner;
  if (winner !== 0 && winner !== 1) {
    let why = reason.replace(/^draw:\s*/, "");
    why = fromViewer(why, sides, you);
    if (!why) return { text: withScore("Draw"), outcome: "draw" };
    if (why === "draw agreed") return { text: withScore("Draw agreed"), outcome: "draw" };
    return { text: withScore(`Draw: ${why}`), outcome: "draw" };
  }
  const loser = 1 - winner;
  // "took the last match" (misère) says what the loser did.
  if (reason === "took the last match") reason = `${sides[loser]} took the last match`;
  const onTime = TIME.test(reason) && namedSeat(reason, sides) === loser;
  if (seated) {
    const won = you === winner;
    if (onTime) return { text: withScore(won ? "You win on time" : "You lose on time"), outcome: won ? "win" : "loss" };
    const why = fromViewer(reason, sides, you);
    const head = won ? "You win" : "You lose";
    return { text: withScore(why ? `${head}: ${why}` : head), outcome: won ? "win" : "loss" };
  }
  if (onTime) return { text: withScore(`${names[winner]} wins on time`), outcome: "decided" };
  return { text: withScore(reason ? `${names[winner]} wins: ${reason}` : `${names[winner]} wins`), outcome: "decided" };
}
