// kibitz's own piece set, drawn here as SVG (no font, no image file, nothing borrowed).
//
// Every piece is drawn in a 100 x 100 box standing on a common base line (y = 88), from a
// few plain paths and circles: a body filled with the side's colour and outlined, and
// "detail" strokes (a mitre's slit, a knight's eye, a crown's band) in the contrasting
// colour. The colours come from CSS (boards.css: .pc-white / .pc-black and their custom
// properties), so a board theme can change them. Pieces are decoration: aria-hidden, the
// square's accessible name says the piece in words (locales/*/boards.json).
import { t } from "../i18n.js";
import { svg } from "./common.js";

const BASE = "M23 88 Q23 79 31 78 L69 78 Q77 79 77 88 Z";

// Chess: each shape is a list of [tag, attributes, is-detail]. Our own drawings.
const CHESS = {
  p: [
    ["path", { d: BASE }],
    ["path", { d: "M36 78 C38 67 42 59 44 53 L56 53 C58 59 62 67 64 78 Z" }],
    ["rect", { x: 37, y: 47, width: 26, height: 7, rx: 3.5 }],
    ["circle", { cx: 50, cy: 35, r: 12.5 }],
  ],
  r: [
    ["path", { d: BASE }],
    ["path", { d: "M33 78 L36 42 L64 42 L67 78 Z" }],
    ["path", { d: "M29 42 L29 19 L38 19 L38 26 L45.5 26 L45.5 19 L54.5 19 L54.5 26 L62 26 L62 19 L71 19 L71 42 Z" }],
    ["path", { d: "M37 48 L63 48 M35.5 70 L64.5 70" }, true],
  ],
  n: [
    ["path", { d: BASE }],
    [
      "path",
      {
        d:
          "M31 78 Q31 70 37 64 Q48 55 50 43 Q45 47 39 47 Q34 47 30 51 L25 53 Q19 50 22 43 " +
          "L32 26 Q37 17 45 15 L48 7 L53 13 Q69 17 73 32 Q75 44 68 53 Q72 64 71 78 Z",
      },
    ],
    ["circle", { cx: 45, cy: 27, r: 3 }, true],
    ["path", { d: "M62 19 Q70 33 64 51" }, true],
    ["circle", { cx: 27, cy: 46, r: 1.6 }, true],
  ],
  b: [
    ["path", { d: BASE }],
    ["path", { d: "M38 78 Q42 69 44 63 L56 63 Q58 69 62 78 Z" }],
    ["rect", { x: 35, y: 56, width: 30, height: 8, rx: 4 }],
    ["path", { d: "M50 19 C35 29 31 44 38 56 L62 56 C69 44 65 29 50 19 Z" }],
    ["circle", { cx: 50, cy: 14, r: 5 }],
    ["path", { d: "M54 30 L45 44" }, true],
  ],
  q: [
    ["path", { d: BASE }],
    ["path", { d: "M30 78 L34 69 L66 69 L70 78 Z" }],
    ["path", { d: "M26 36 L34 62 L66 62 L74 36 L63 50 L62 28 L55 47 L50 24 L45 47 L38 28 L37 50 Z" }],
    ["rect", { x: 32, y: 62, width: 36, height: 7, rx: 2 }],
    ["circle", { cx: 26, cy: 33, r: 4 }],
    ["circle", { cx: 38, cy: 25, r: 4 }],
    ["circle", { cx: 50, cy: 20, r: 4 }],
    ["circle", { cx: 62, cy: 25, r: 4 }],
    ["circle", { cx: 74, cy: 33, r: 4 }],
  ],
  k: [
    ["path", { d: BASE }],
    ["path", { d: "M30 78 L34 68 L66 68 L70 78 Z" }],
    ["path", { d: "M34 68 C25 53 28 38 40 38 C45 38 48 42 50 46 C52 42 55 38 60 38 C72 38 75 53 66 68 Z" }],
    ["path", { d: "M47 13 L53 13 L53 20 L60 20 L60 26 L53 26 L53 39 L47 39 L47 26 L40 26 L40 20 L47 20 Z" }],
    ["path", { d: "M36 61 L64 61" }, true],
  ],
};

function drawing(shapes, attrs) {
  return svg(
    "svg",
    { viewBox: "0 0 100 100", "aria-hidden": "true", focusable: "false", ...attrs },
    shapes.map(([tag, shapeAttrs, detail]) => svg(tag, { ...shapeAttrs, class: detail ? "detail" : "body" })),
  );
}

/** Whether a FEN letter is a white piece ("K") or a black one ("k"). */
export function isWhite(letter) {
  return letter !== "" && letter === letter.toUpperCase();
}

/**
 * A chess piece as an SVG element: `letter` is its FEN letter (K Q R B N P white, k q r b
 * n p black). `extra` adds classes ("captured-icon").
 */
export function chessPiece(letter, extra = "") {
  const kind = letter.toLowerCase();
  const colour = isWhite(letter) ? "white" : "black";
  return drawing(CHESS[kind], {
    class: ["piece", colour, `pc-${colour}`, `pc-${kind}`, extra],
    "data-shape": kind,
  });
}

/** A chess piece in words, from its FEN letter: "white king", "roi blanc". */
export function chessPieceName(letter) {
  const kind = { k: "king", q: "queen", r: "rook", b: "bishop", n: "knight", p: "pawn" }[letter.toLowerCase()];
  const white = isWhite(letter);
  switch (kind) {
    case "king":
      return white ? t("boards.piece.white_king") : t("boards.piece.black_king");
    case "queen":
      return white ? t("boards.piece.white_queen") : t("boards.piece.black_queen");
    case "rook":
      return white ? t("boards.piece.white_rook") : t("boards.piece.black_rook");
    case "bishop":
      return white ? t("boards.piece.white_bishop") : t("boards.piece.black_bishop");
    case "knight":
      return white ? t("boards.piece.white_knight") : t("boards.piece.black_knight");
    default:
      return white ? t("boards.piece.white_pawn") : t("boards.piece.black_pawn");
  }
}

const CROWN = "M33 58 L29 38 L40 47 L50 33 L60 47 L71 38 L67 58 Z";

/**
 * A draughts piece: "w"/"b" a man, "W"/"B" a king (a man with a crown on it), seen from
 * above: a disc with a rim and a groove.
 */
export function draughtsPiece(piece, extra = "") {
  const colour = piece.toLowerCase() === "w" ? "white" : "black";
  const king = piece === piece.toUpperCase();
  const shapes = [
    ["circle", { cx: 50, cy: 53, r: 42 }],
    ["circle", { cx: 50, cy: 48, r: 42 }],
    ["circle", { cx: 50, cy: 48, r: 30 }, true],
  ];
  if (king) shapes.push(["path", { d: CROWN, class: "crown" }]);
  const node = drawing(shapes, {
    class: ["man", colour, `pc-${colour}`, king && "king", extra],
    "data-shape": king ? "king" : "man",
  });
  if (king) node.lastChild.setAttribute("class", "crown");
  return node;
}

/** The mark left on a square whose piece the last move took: a thin cross in a ring. */
export function takenMark(piece) {
  const colour = piece.toLowerCase() === "w" ? "white" : "black";
  return svg("svg", { viewBox: "0 0 100 100", "aria-hidden": "true", focusable: "false", class: ["man", colour, "captured"] }, [
    svg("circle", { cx: 50, cy: 50, r: 38, class: "ghost-ring" }),
    svg("path", { d: "M36 36 L64 64 M64 36 L36 64", class: "ghost-cross" }),
  ]);
}

/** A draughts piece in words: "white man", "black king" ("pion blanc", "dame noire"). */
export function draughtsPieceName(piece) {
  const white = piece.toLowerCase() === "w";
  if (piece === piece.toUpperCase()) return white ? t("boards.piece.white_draughts_king") : t("boards.piece.black_draughts_king");
  return white ? t("boards.piece.white_man") : t("boards.piece.black_man");
}
