// Premoves for chess and draughts: while the opponent is to move, the player may pick a
// move of their own to be sent the moment their turn comes.
//
// The client knows no rules, so a premove may be any of the player's pieces to any other
// square (pseudoMoves: "e2e4", a pawn reaching the last rank promotes to a queen, "e7e8q";
// draughts "32-28"); the board renderers offer these as they offer legal moves. When the
// turn comes, matchPremove looks for the premove in the new snapshot's legal_moves (the same
// text, else a legal move between the same two squares); no match means the premove is
// dropped. These are pure functions: feel.js keeps the one premove and sends it.

const FILES = "abcdefgh";

/** The games that take premoves. */
export const PREMOVE_GAMES = new Set(["chess", "draughts"]);

function isOwn(piece, seat) {
  if (!piece) return false;
  const upper = piece === piece.toUpperCase();
  return seat === 0 ? upper : !upper;
}

function chessMoves(rows, seat) {
  const own = [];
  const all = [];
  rows.forEach((row, r) =>
    row.forEach((piece, c) => {
      const name = `${FILES[c]}${8 - r}`;
      all.push(name);
      if (isOwn(piece, seat)) own.push([name, piece.toLowerCase()]);
    }),
  );
  const lastRank = seat === 0 ? "8" : "1";
  const moves = [];
  for (const [from, kind] of own) {
    for (const to of all) {
      if (to === from) continue;
      moves.push(`${from}${to}${kind === "p" && to[1] === lastRank ? "q" : ""}`);
    }
  }
  return moves;
}

function draughtsMoves(rows, seat) {
  // White (seat 0) men are "w", kings "W"; Black "b", "B" (upper case is a king, not a side).
  const mine = seat === 0 ? "w" : "b";
  const own = [];
  const all = [];
  rows.forEach((row, r) =>
    row.forEach((piece, c) => {
      if ((r + c) % 2 !== 1) return;
      const name = String(r * 5 + Math.floor(c / 2) + 1);
      all.push(name);
      if (piece && piece.toLowerCase() === mine) own.push(name);
    }),
  );
  const moves = [];
  for (const from of own) for (const to of all) if (to !== from) moves.push(`${from}-${to}`);
  return moves;
}

/** Every move the player of `seat` may premove on this board (any own piece, any square). */
export function pseudoMoves(game, view, seat) {
  if (!view || !Array.isArray(view.rows) || (seat !== 0 && seat !== 1)) return [];
  if (game === "chess") return chessMoves(view.rows, seat);
  if (game === "draughts") return draughtsMoves(view.rows, seat);
  return [];
}

/** The first and last squares of a move text ("e2e4" -> e2, e4; "28x19x10" -> 28, 10). */
export function moveSquares(game, move) {
  if (game === "chess") return /^[a-h][1-8][a-h][1-8]/.test(move) ? [move.slice(0, 2), move.slice(2, 4)] : [];
  const parts = String(move).split(/[-x]/).filter(Boolean);
  return parts.length >= 2 ? [parts[0], parts[parts.length - 1]] : [];
}

/**
 * The legal move the premove stands for: the same text, else one between the same two
 * squares (a promotion to a queen first); null when none is legal now.
 */
export function matchPremove(game, premove, legal) {
  if (!premove || !Array.isArray(legal)) return null;
  if (legal.includes(premove)) return premove;
  const [from, to] = moveSquares(game, premove);
  if (!from) return null;
  const same = legal.filter((move) => {
    const [a, b] = moveSquares(game, move);
    return a === from && b === to;
  });
  if (!same.length) return null;
  return same.find((move) => move.endsWith("q")) || same[0];
}
