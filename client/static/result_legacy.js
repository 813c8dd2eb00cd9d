// Results of games archived before the server kept a termination code (docs/protocol.md,
// "Events and results": such a record's `result` has only `winner` and `reason`). This is
// the one place in the client that reads a reason's words, and only for those old
// records: it gives them the code (and the side the reason names at its start) that a
// newer result carries, so result.js decides every result the same way.

// The reasons the server wrote, mapped to their codes; the first that matches wins.
const CODES = [
  [/^aborted(:|$)| left before the start$/, "abort"],
  [/^abandoned$/, "abandon"],
  [/^draw agreed$/, "agreement"],
  [/ resigned$/, "resignation"],
  [/ ran out of time( and .+ cannot win)?$/, "time"],
  [/ left the game$/, "claim"],
  [/^took the last match$/, "last-match"],
  [/^checkmate$/, "checkmate"],
  [/^stalemate$/, "stalemate"],
  [/^three in a row$/, "line"],
  [/^board full$/, "board-full"],
  [/^(more discs|equal discs|25 seeds|24-24)$/, "score"],
  [/^(no moves|blocked|no move can feed|no seeds to sow)\b/, "no-moves"],
  [/repetition\b/, "repetition"],
  [/ moves played$/, "move-limit"],
  [/rule$|^insufficient material$|^100 plies$/, "rule"],
];

/** The termination code of an old `result` without one (null if its reason is unknown). */
export function legacyTermination(result) {
  const reason = String((result && result.reason) || "").trim().replace(/^draw:\s*/, "");
  for (const [pattern, code] of CODES) {
    if (pattern.test(reason)) return code;
  }
  return null;
}

/** The seat an old reason names at its start ("Black resigned" -> 1), or null. */
export function legacyNamedSeat(result, sides) {
  const reason = String((result && result.reason) || "").trim().replace(/^(draw|aborted):\s*/, "");
  for (const seat of [0, 1]) {
    if (sides[seat] && reason.startsWith(`${sides[seat]} `)) return seat;
  }
  return null;
}
