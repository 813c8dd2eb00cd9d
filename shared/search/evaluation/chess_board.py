"""Chess on the searcher's board (``chess_board.Board``): the chess evaluation, ported."""

from kibitz.shared.search.evaluation.chess import BoardEvaluation

EVALUATION = BoardEvaluation
