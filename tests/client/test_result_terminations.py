"""The client says how a game ended from ``result.termination`` and ``winner``, not by
reading ``reason``.

- No client module matches a reason-reading pattern (a reason's words in a regex or a
  string, or a comparison or test on a ``reason``), except result_legacy.js, the one
  documented place that gives records archived before terminations their code.
- In the browser, describeResult follows the code even where the words say otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.client.test_browser import NewPage, open_lobby

STATIC = Path(__file__).resolve().parents[2] / "client" / "static"
LEGACY = "result_legacy.js"

#: Words of the server's reasons: in a regex, or compared with, they read a reason.
REASON_WORDS = (
    "resigned",
    "ran out of time",
    "left the game",
    "did not move",
    "took the last match",
    "draw agreed",
    "abandoned",
    "left before the start",
    "no move can feed",
    "cannot win",
)
#: Code that reads a reason: compares it, tests it against a pattern, searches it.
READS_REASON = (
    re.compile(r"reason\s*[!=]==?"),
    re.compile(r"[!=]==?\s*[\w.]*reason\b"),
    re.compile(r"reason[\w)\]]*\.(startsWith|endsWith|includes|indexOf|match|search)\("),
    re.compile(r"\.(test|exec)\([^)]*reason"),
)


def code_of(text: str) -> str:
    """``text`` without its comments (so a comment may quote a reason)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"(?m)(^|\s)//.*$", "", text)


#: A regex literal (where an expression starts), and a string literal compared with something.
REGEX_LITERAL = re.compile(r"(?:^|[=(,:\[!&|?]|return)\s*/((?:\\.|[^/\n\\])+)/[a-z]*", re.M)
COMPARED_STRING = re.compile(r"""[!=]==?\s*(["'`])(.*?)\1|(["'`])([^"'`]*)\3\s*[!=]==?""")


def reason_reading(text: str) -> list[str]:
    """What in a JS module's code reads a result's reason (empty: nothing): a reason's
    words in a regex literal or in a string compared with something, or a comparison, test
    or search on a ``reason``."""
    code = code_of(text)
    literals = [m.group(1) for m in REGEX_LITERAL.finditer(code)]
    literals += [m.group(2) or m.group(4) or "" for m in COMPARED_STRING.finditer(code)]
    found = [word for word in REASON_WORDS for lit in literals if word in lit]
    found += [m.group(0) for pattern in READS_REASON for m in pattern.finditer(code)]
    return found


def test_the_scan_sees_reason_reading() -> None:
    assert reason_reading("const onTime = / ran out of time$/.test(reason);")
    assert reason_reading('if (reason === "aborted") return;')
    assert reason_reading("const n = /\\((\\d+)-(\\d+)\\)/.exec(result.reason || '');")
    assert reason_reading('if (result.reason.startsWith("draw")) x();')
    assert reason_reading('const why = words === "draw agreed" ? 1 : 2;')
    assert not reason_reading('return "Game abandoned: nobody played for too long.";')
    assert not reason_reading("// the reason says 'Black resigned'\nconst t = result.termination;")
    assert not reason_reading("const shown = result.reason; el.title = shown;")


def test_no_client_module_reads_a_reason() -> None:
    modules = sorted(p for p in STATIC.rglob("*.js") if p.name != LEGACY)
    assert any(p.name == "result.js" for p in modules)
    readers = {str(p.relative_to(STATIC)): reason_reading(p.read_text()) for p in modules}
    assert not {name: found for name, found in readers.items() if found}


WORDS_SCRIPT = """
async (cases) => {
  const { describeResult } = await import("/static/result.js");
  return cases.map(([state, sides, you, names]) =>
    describeResult(state, sides, you, names || sides).text);
}
"""

WB = ["White", "Black"]


def chess(winner: int | None, reason: str, termination: str, **more: Any) -> dict[str, Any]:
    result = {"winner": winner, "reason": reason, "termination": termination}
    return {"game": "chess", "result": result, **more}


def test_words_follow_the_termination(live_server: Any, new_page: NewPage) -> None:
    page = new_page()
    open_lobby(page, live_server.http_url)
    cases: list[list[Any]] = [
        [chess(0, "Black resigned", "resignation"), WB, 1],
        [chess(1, "White ran out of time", "time"), WB, None, ["White (ann)", "Black (bob)"]],
        [chess(None, "draw: White ran out of time and Black cannot win", "time", to_move=0), WB, 0],
        [chess(None, "aborted: Black did not move in time", "abort", to_move=1), WB, 1],
        [chess(None, "aborted", "abort", to_move=0), WB, 0],
        [chess(None, "abandoned", "abandon"), WB, 0],
        [chess(1, "White left the game", "claim"), WB, 0],
        # The code decides, whatever the words: no reading of "checkmate" or "aborted".
        [chess(1, "checkmate", "time"), WB, 1],
        [chess(None, "aborted", "agreement"), WB, 0],
        [
            {
                "game": "oware",
                "result": {
                    "winner": 0,
                    "reason": "threefold repetition",
                    "termination": "repetition",
                },
                "view": {"south": [1, 0, 0, 0, 0, 3], "north": [2] * 6, "stores": [20, 10]},
            },
            ["South", "North"],
            None,
        ],
    ]
    assert page.evaluate(WORDS_SCRIPT, cases) == [
        "You lose: you resigned.",
        "Black (bob) wins on time.",
        "Draw: you ran out of time and Black cannot win.",
        "Game aborted: you did not move in time.",
        "Game aborted.",
        "Game abandoned: nobody played for too long.",
        "You lose: you left the game.",
        "You win on time.",
        "Draw agreed.",
        "South wins: threefold repetition (South 24, North 22 seeds).",
    ]
