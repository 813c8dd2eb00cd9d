"""A whole game in French: every word on screen comes from the French catalogue (issue 22).

Two players, each in a browser whose chosen language is French (localStorage
"kibitz:lang" = "fr" before the page loads), play chess at 3+2 on the real server: a few
moves, a draw offer declined, a word each in the chat, then a resignation; then the lobby,
the game page of the finished game, the sign-up form, a leaderboard and a missing profile
are opened. At each stop the test collects what a
person sees: every visible text node, the options of visible selects, the placeholder,
title, aria-label and alt of visible elements, and the document's title. Each string must
be one of:

- French: it is a value of the French catalogue (client/static/locales/fr/*.json), where a
  placeholder ({name}) stands for any text that is itself French or neutral (checked again,
  at most three levels deep);
- neutral (not words of either language): fewer than two letters (numbers, clocks "2:58",
  "3+2", signs, piece glyphs, the coordinates "a".."h"); a move in chess notation (SAN,
  with or without its number: "1.", "e4", "Nf3", "O-O", "exd5+"; or the wire's "e2e4");
  a name of a format in capitals, 2 to 5 letters ("PGN", "JSON"); an error code, which the
  error toast keeps in its title ("player/unknown"); the room id; the brand
  "kibitz"; a name or a chat line typed by the test; a date in French ("27 nov. 2026");
  the name of a language in that language (the language switch's "English", "Français");
- or several of these in one text: sentences each ending with . ! ? or … ("Noirs : e5.
  À vous de jouer."), parts joined by " · " ("Blancs 3:01 · Noirs 3:01"), or one followed
  by a number or a clock ("Blancs 3:01").

No string may be an English catalogue value that differs from its French one (with its
placeholders as wildcards): that is a word left in English. Both lists, strings left in
English and strings of neither kind, must be empty; the failure message lists each with
the stop where it was seen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.client.steps import (
    BOARD,
    NewPage,
    fill_create_form,
    in_french,
    open_invite,
    open_lobby,
    room_of,
    screenshot,
    start_game,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
LOCALES = ROOT / "client" / "static" / "locales"

NAMES = ("Alice", "Bob")
NOBODY = "nobody_here"  # a profile that does not exist
LANGUAGE_NAMES = ("English", "Français")
CHAT_LINES = ("Bonjour Bob", "Salut Alice")

PLACEHOLDER = re.compile(r"\\\{(\w+)\\\}")  # a placeholder, once re.escape()d
LETTER = re.compile(r"[^\W\d_]")
SAN = re.compile(
    r"^(\d+\.(\.\.)?\s*)?"
    r"(O-O(-O)?|[KQRBN]?[a-h]?[1-8]?x?[a-h][1-8](=[QRBN])?|[a-h]x[a-h][1-8](=[QRBN])?)"
    r"[+#]?[!?]*$"
)
SENTENCES = re.compile(r"(?<=[.!?…])\s+")
DOTS = re.compile(r"\s+·\s+")
ACRONYM = re.compile(r"^[A-Z]{2,5}$")
ERROR_CODE = re.compile(r"^[a-z]+/[a-z_]+$")  # kept in a title for reports: "room/full"
FRENCH_DATE = re.compile(
    r"^\d{1,2} (janv|févr|mars|avr|mai|juin|juil|août|sept|oct|nov|déc)\.? \d{4}"
    r"( (à )?\d{1,2}:\d{2}(:\d{2})?)?$"
)

COLLECT = """
() => {
  const seen = [];
  const visible = (el) =>
    el && el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true });
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.replace(/\\s+/g, " ").trim();
    const parent = node.parentElement;
    if (!text || !parent || parent.closest("script, style, template, option")) continue;
    if (visible(parent)) seen.push({ text, where: describe(parent) });
  }
  for (const el of document.body.querySelectorAll("*")) {
    if (!visible(el)) continue;
    for (const attr of ["placeholder", "title", "aria-label", "alt"]) {
      const value = el.getAttribute(attr);
      const where = `${describe(el)}@${attr}`;
      if (value && value.trim()) seen.push({ text: value.trim(), where });
    }
    if (el.tagName === "SELECT") {
      for (const option of el.options) {
        const text = option.textContent.replace(/\\s+/g, " ").trim();
        if (text) seen.push({ text, where: `${describe(el)}>option` });
      }
    }
  }
  if (document.title) seen.push({ text: document.title, where: "document.title" });
  return { lang: document.documentElement.lang, seen };

  function describe(el) {
    const tagged = el.closest("[data-testid], [id]");
    const name = tagged ? (tagged.dataset.testid || `#${tagged.id}`) : el.tagName.toLowerCase();
    return `${el.tagName.toLowerCase()} in ${name}`;
  }
}
"""


# -- the catalogue ------------------------------------------------------------------------------


def catalogue(lang: str) -> dict[str, list[str]]:
    """Every key of a language with its strings (a plural value: each of its forms)."""
    values: dict[str, list[str]] = {}
    for path in sorted((LOCALES / lang).glob("*.json")):
        for key, value in json.loads(path.read_text(encoding="utf-8")).items():
            forms = list(value.values()) if isinstance(value, dict) else [value]
            values[key] = [str(form).strip() for form in forms]
    return values


def squeeze(text: str) -> str:
    """Spaces as the page's text is read: every run of white space (no-break ones too) as one."""
    return re.sub(r"\s+", " ", text.replace("\u00a0", " ").replace("\u202f", " ")).strip()


def pattern(value: str) -> re.Pattern[str]:
    """A catalogue value as a regex: its placeholders capture any text."""
    return re.compile(PLACEHOLDER.sub(r"(.+?)", re.escape(squeeze(value))), re.S)


def own_letters(value: str) -> int:
    """How many letters a value has outside its placeholders."""
    return len(LETTER.findall(re.sub(r"\{\w+\}", "", value)))


class Judge:
    """Says whether a string on screen is French, neutral or English."""

    def __init__(self, room: str) -> None:
        en, fr = catalogue("en"), catalogue("fr")
        self.room = room
        self.french = [pattern(v) for forms in fr.values() for v in forms]
        self.french_plain = {squeeze(v) for forms in fr.values() for v in forms}
        french_set = {v for forms in fr.values() for v in forms}
        # English values that differ from the French ones and have words of their own.
        self.english = [
            (key, pattern(v))
            for key, forms in en.items()
            for v in forms
            if v not in french_set and own_letters(v) >= 2
        ]

    def neutral(self, text: str) -> bool:
        text = squeeze(text)
        return (
            len(LETTER.findall(text)) < 2
            or bool(SAN.match(text))
            or text in (self.room, "kibitz", *NAMES, NOBODY, *CHAT_LINES, *LANGUAGE_NAMES)
            or bool(ERROR_CODE.match(text))
            or bool(FRENCH_DATE.match(text))
            or bool(ACRONYM.match(text))
        )

    def french_or_neutral(self, text: str, depth: int = 0) -> bool:
        text = squeeze(text)
        if not text or self.neutral(text) or text in self.french_plain:
            return True
        if depth >= 3:
            return False
        for regex in self.french:
            found = regex.fullmatch(text)
            if found and all(self.french_or_neutral(part, depth + 1) for part in found.groups()):
                return True
        for splitter in (SENTENCES, DOTS):
            parts = splitter.split(text)
            if len(parts) > 1:
                return all(self.french_or_neutral(part, depth + 1) for part in parts)
        words, _, last = text.rpartition(" ")
        return (
            bool(words)
            and len(LETTER.findall(last)) == 0
            and self.french_or_neutral(words, depth + 1)
        )

    def english_key(self, text: str) -> str | None:
        text = squeeze(text)
        for key, regex in self.english:
            if regex.fullmatch(text):
                return key
        return None


def judge_all(
    judge: Judge, stops: Iterable[tuple[str, dict[str, Any]]]
) -> tuple[list[str], list[str]]:
    english: list[str] = []
    unknown: list[str] = []
    for stop, found in stops:
        assert found["lang"] == "fr", f"{stop}: the page is not in French"
        for item in found["seen"]:
            text, where = item["text"], item["where"]
            if judge.french_or_neutral(text):
                continue
            key = judge.english_key(text)
            line = f"{stop}: {where}: {text!r}"
            (english if key else unknown).append(f"{line} (en: {key})" if key else line)
    return sorted(set(english)), sorted(set(unknown))


def test_the_judge_tells_french_from_english() -> None:
    judge = Judge("k2ubu9q7cq")
    for text in ("Nxe5+", "1.", "e4", "O-O-O", "2:58", "3+2", "♞", "k2ubu9q7cq", "Alice"):
        assert judge.french_or_neutral(text), text
    assert judge.french_or_neutral("Proposer la nulle")
    assert judge.french_or_neutral("Votre adversaire, Blancs (Alice), propose la nulle.")
    assert judge.french_or_neutral("Blancs 3:01 · Noirs 2:59")
    assert judge.french_or_neutral("Proposer la nulle. Vous avez proposé la nulle.")
    assert not judge.french_or_neutral("Blancs 3:01 · Black 2:59")
    assert not judge.french_or_neutral("Proposer la nulle. Offer a draw.")
    assert not judge.french_or_neutral("Offer a draw")
    assert judge.english_key("Offer a draw") == "actions.draw.offer"
    assert judge.english_key("White (Alice) offers a draw.") is not None
    # A placeholder is no way around the check: "{error}." does not take English words.
    assert not judge.french_or_neutral("The server did not answer.")


# -- the game -----------------------------------------------------------------------------------


def french_page(new_page: NewPage) -> Page:
    return in_french(new_page())


def collect(page: Page) -> dict[str, Any]:
    found: dict[str, Any] = page.evaluate(COLLECT)
    return found


def move(page: Page, source: str, target: str, ply: int) -> None:
    expect(page.locator(BOARD)).to_have_attribute("data-turn", "you")
    page.click(f"[data-testid=sq-{source}]")
    page.click(f"[data-testid=sq-{target}]")
    expect(page.locator(f"[data-testid=move-{ply}]")).to_be_visible()


def say(page: Page, text: str) -> None:
    page.fill("[data-testid=chat-input]", text)
    page.click("[data-testid=chat-send]")


def test_a_game_in_french_shows_only_french(live_server: Any, new_page: NewPage) -> None:
    base = live_server.http_url
    alice, bob = french_page(new_page), french_page(new_page)
    open_lobby(alice, base)
    fill_create_form(alice, "chess", "human", seat="0", time_control="3+2", name=NAMES[0])
    stops = [("lobby (alice, before creating)", collect(alice))]
    start_game(alice, "chess")
    room = room_of(alice)
    stops.append(("game, waiting for an opponent (alice)", collect(alice)))

    open_invite(bob, f"{base}/?room={room}", NAMES[1])
    stops.append(("joining (bob)", collect(bob)))
    bob.click("[data-testid=join-seat]")
    expect(alice.locator("[data-testid=seat-1]")).to_contain_text(NAMES[1])

    move(alice, "e2", "e4", 1)
    move(bob, "e7", "e5", 2)
    move(alice, "g1", "f3", 3)
    move(bob, "b8", "c6", 4)

    alice.click("[data-testid=offer-draw]")
    expect(bob.locator("[data-testid=draw-accept]")).to_be_visible()
    stops += [("draw offered (alice)", collect(alice)), ("draw offered (bob)", collect(bob))]
    bob.click("[data-testid=draw-decline]")
    expect(alice.locator("[data-testid=offer-notice]")).to_be_visible()

    say(alice, CHAT_LINES[0])
    expect(bob.locator("[data-testid=chat-line]").last).to_contain_text(CHAT_LINES[0])
    say(bob, CHAT_LINES[1])
    expect(alice.locator("[data-testid=chat-line]").last).to_contain_text(CHAT_LINES[1])
    stops += [("playing, after the chat (alice)", collect(alice))]
    stops += [("playing, after the chat (bob)", collect(bob))]
    screenshot(alice, "french-game")

    bob.click("[data-testid=resign]")
    expect(bob.locator("[data-testid=choice-yes]")).to_be_visible()
    stops.append(("resign dialog (bob)", collect(bob)))
    bob.click("[data-testid=choice-yes]")
    for page in (alice, bob):
        expect(page.locator("[data-testid=result]")).to_be_visible()
    expect(alice.locator("[data-testid=result]")).to_have_attribute("data-outcome", "win")
    stops += [("game over (alice)", collect(alice)), ("game over (bob)", collect(bob))]
    screenshot(bob, "french-over")

    open_lobby(alice, base)
    stops.append(("lobby after the game (alice)", collect(alice)))
    alice.goto(f"{base}/?game={room}")
    expect(alice.locator("[data-testid=replay-result]")).to_be_visible()
    stops.append(("the game page (alice)", collect(alice)))
    screenshot(alice, "french-gamepage")
    # The account and players' pages: the sign-up form, a leaderboard, a missing profile.
    alice.click("[data-testid=signup-open]")
    expect(alice.locator("[data-testid=signup-form]")).to_be_visible()
    stops.append(("the sign-up form (alice)", collect(alice)))
    alice.click("[data-testid=form-cancel]")
    alice.goto(f"{base}/?leaderboard=chess&speed=blitz")
    expect(alice.locator("[data-testid=leaderboard]")).to_have_attribute("data-state", "done")
    stops.append(("a leaderboard (alice)", collect(alice)))
    alice.goto(f"{base}/?player={NOBODY}")
    expect(alice.locator("[data-testid=profile-missing]")).to_be_visible()
    stops.append(("a missing profile (alice)", collect(alice)))

    (ROOT / "test-results" / "french-strings.json").write_text(
        json.dumps(stops, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    seen = {squeeze(item["text"]) for _, found in stops for item in found["seen"]}
    # The stops saw what they were for (the words are the French catalogue's).
    fr = catalogue("fr")
    assert fr["actions.draw.accept"][0] in seen or fr["actions.accept"][0] in seen
    assert any(text.startswith(squeeze(fr["actions.result.youWinWhy"][0])[:10]) for text in seen)
    english, unknown = judge_all(Judge(room), stops)
    assert not english and not unknown, (
        "Words left in English:\n"
        + "\n".join(english)
        + "\n\nWords that are in neither catalogue:\n"
        + "\n".join(unknown)
    )


# -- the end of a game, in French, for every kind of ending --------------------------------------

WORDS_SCRIPT = """
async (cases) => {
  const { describeResult } = await import("/static/result.js");
  return cases.map(([state, sides, you, names]) => describeResult(state, sides, you, names).text);
}
"""
WB = ["White", "Black"]


def ended(game: str, winner: int | None, reason: str, termination: str, **more: Any) -> Any:
    return {
        "game": game,
        "result": {"winner": winner, "reason": reason, "termination": termination},
        **more,
    }


def test_results_are_said_in_french(live_server: Any, new_page: NewPage) -> None:
    page = french_page(new_page)
    open_lobby(page, live_server.http_url)
    oware_view = {"south": [1, 0, 0, 0, 0, 3], "north": [2] * 6, "stores": [20, 10]}
    cases: list[list[Any]] = [
        [ended("chess", 0, "Black resigned", "resignation"), WB, 1, None],
        [
            ended("chess", 0, "Black resigned", "resignation"),
            WB,
            None,
            ["Blancs (ann)", "Noirs (bob)"],
        ],
        [ended("chess", 1, "White ran out of time", "time"), WB, 0, None],
        [
            ended(
                "chess", None, "draw: White ran out of time and Black cannot win", "time", to_move=0
            ),
            WB,
            0,
            None,
        ],
        [
            ended("chess", None, "aborted: Black did not move in time", "abort", to_move=1),
            WB,
            1,
            None,
        ],
        [ended("chess", None, "aborted", "abort"), WB, 0, None],
        [ended("chess", None, "abandoned", "abandon"), WB, 0, None],
        [ended("chess", 1, "White left the game", "claim"), WB, 1, None],
        [ended("chess", 0, "checkmate", "checkmate"), WB, None, None],
        [ended("chess", None, "fifty-move rule", "rule"), WB, 0, None],
        [ended("chess", None, "draw agreed", "agreement"), WB, 0, None],
        [ended("draughts", None, "25-move king rule", "rule"), WB, None, None],
        [ended("matches", 1, "took the last match", "last-match"), ["First", "Second"], 0, None],
        [ended("tictactoe", None, "2000 moves played", "move-limit"), ["X", "O"], 0, None],
        [
            ended("oware", 0, "threefold repetition (24-22)", "repetition", view=oware_view),
            ["South", "North"],
            None,
            None,
        ],
        [ended("kono", 1, "blocked", "no-moves"), ["Black", "White"], 1, None],
    ]
    said = page.evaluate(WORDS_SCRIPT, cases)
    nb = "\u00a0"
    assert said == [
        f"Vous perdez{nb}: vous avez abandonné.",
        f"Victoire{nb}: Blancs (ann), abandon (Noirs).",
        "Vous perdez au temps.",
        f"Partie nulle{nb}: votre temps est écoulé, mais gain impossible (Noirs).",
        f"Partie annulée{nb}: vous n’avez pas joué votre premier coup à temps.",
        "Partie annulée.",
        f"Partie délaissée{nb}: personne n’a joué depuis trop longtemps.",
        f"Vous gagnez{nb}: partie quittée (Blancs).",
        f"Victoire{nb}: Blancs, échec et mat.",
        f"Partie nulle{nb}: règle des cinquante coups.",
        "Partie nulle par accord mutuel.",
        f"Partie nulle{nb}: règle des 25 coups de dames.",
        f"Vous perdez{nb}: vous avez pris la dernière allumette.",
        f"Partie nulle{nb}: 2000 coups joués.",
        f"Victoire{nb}: Sud, triple répétition (Sud 24, Nord 22 graines).",
        f"Vous gagnez{nb}: pions bloqués, plus aucun coup possible.",
    ]
