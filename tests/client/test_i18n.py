"""The browser client's message catalogue is complete in both languages (docs/client.md,
"Languages").

No browser: this reads client/static/locales/<lang>/<area>.json and every .js and .html
file of client/static, and checks that

- both languages have the same areas, those that i18n.js loads, each a flat JSON object
  with no key written twice;
- every key starts with its area ("lobby.create" lives in lobby.json), so no two areas
  define the same key;
- every key is in both languages, with no empty value, the same placeholders ({name}) and,
  for a plural value ({"one": ..., "other": ...}), the same plural forms;
- every key the code names literally (t("..."), tn("..."), data-i18n="...",
  data-i18n-attr="attr: key; ...", a "data-i18n" attribute given to el()) is in English;
- a French value is not the English one, unless it is a word both languages write the
  same (ALLOWED_SAME, also inside a longer value) or holds no word of its own
  (placeholders, numbers, signs);
- French values put a no-break space (U+00A0, or the narrow U+202F) before ; : ! ? and
  inside « », never an ordinary space or none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "client" / "static"
LOCALES = STATIC / "locales"
LANGS = ("en", "fr")

# Values written the same in English and French: names, the brand, signs. A slice whose
# French word is rightly the English one adds it here (a small edit).
ALLOWED_SAME = frozenset(
    {
        "kibitz",
        "OK",
        "Othello",
        "Oware",
        "Pong Hau K'i",
        "Kono",
        "PGN",
        "JSON",
        "SAN",
        "FEN",
        "UCI",
        "API",
        "Elo",
        "BOT",
        "Bot",
        "Blitz",
        "blitz",
        "Bullet",
        "bullet",
        "Description",
        "Position",
        "Message",
        "Messages",
        "Note",
        "Notes",
        "Options",
        "Option",
        "Patience",
        "Second",
        "Total",
        "Type",
        "Score",
        "Format",
        "Date",
        "Info",
        "Menu",
        "Normal",
        "Minimal",
        "min",
        "points",
        "point",
        "double",
        "standard",
        "Stockfish",
        "Sunfish",
    }
)

PLURAL_FORMS = frozenset({"zero", "one", "two", "few", "many", "other"})
PLACEHOLDER = re.compile(r"\{(\w+)\}")
LETTER = re.compile(r"[^\W\d_]")

# Literal keys in code: t("a.b"), tn('a.b', ...), t(`a.b`) (no ${...} inside).
_CALL = re.compile(r"\bt[n]?\(\s*([\"'`])(?P<key>[A-Za-z0-9_.\-/]+)\1")
_DATA_I18N = re.compile(r"data-i18n\s*=\s*([\"'])(?P<key>[^\"']+)\1")
_DATA_I18N_EL = re.compile(r"[\"']data-i18n[\"']\s*:\s*([\"'])(?P<key>[^\"']+)\1")
_DATASET_I18N = re.compile(r"\bi18n\s*[:=]\s*([\"'])(?P<key>[A-Za-z0-9_.\-/]+)\1")
_DATA_I18N_ATTR = re.compile(r"data-i18n-attr\s*=\s*([\"'])(?P<pairs>[^\"']+)\1")
_DATA_I18N_ATTR_EL = re.compile(r"[\"']data-i18n-attr[\"']\s*:\s*([\"'])(?P<pairs>[^\"']+)\1")
_DATASET_I18N_ATTR = re.compile(r"\bi18nAttr\s*[:=]\s*([\"'])(?P<pairs>[^\"']+)\1")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
_LINE_COMMENT = re.compile(r"^\s*//.*$", re.M)
_AREAS_JS = re.compile(r"const AREAS = \[(?P<list>[^\]]*)\]", re.S)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"key {key!r} written twice")
        seen[key] = value
    return seen


def load(lang: str, area: str) -> dict[str, Any]:
    path = LOCALES / lang / f"{area}.json"
    data = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicates)
    assert isinstance(data, dict), f"{path}: not a JSON object"
    return data


def areas_of(lang: str) -> set[str]:
    return {path.stem for path in (LOCALES / lang).glob("*.json")}


def loaded_areas() -> list[str]:
    """The AREAS list of i18n.js: the files the page fetches."""
    found = _AREAS_JS.search((STATIC / "i18n.js").read_text(encoding="utf-8"))
    assert found, "i18n.js has no `const AREAS = [...]`"
    return re.findall(r"\"([a-z0-9_]+)\"", found.group("list"))


AREAS = sorted(areas_of("en") | areas_of("fr"))


def catalogue(lang: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for area in AREAS:
        if (LOCALES / lang / f"{area}.json").exists():
            merged.update(load(lang, area))
    return merged


def forms(value: Any) -> list[str]:
    """The strings of a value: itself, or each of its plural forms."""
    return list(value.values()) if isinstance(value, dict) else [value]


def placeholders(value: Any) -> set[str]:
    return {name for text in forms(value) for name in PLACEHOLDER.findall(str(text))}


def own_letters(text: str) -> bool:
    """Whether `text`, without its placeholders and the words of ALLOWED_SAME, has a word of
    its own: two letters or more ("X", the side of tic-tac-toe, is a sign)."""
    rest = PLACEHOLDER.sub(" ", text)
    for word in sorted(ALLOWED_SAME, key=len, reverse=True):
        rest = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", " ", rest)
    return len(LETTER.findall(rest)) >= 2


def static_files() -> Iterator[Path]:
    for path in sorted(STATIC.rglob("*")):
        if path.suffix in (".js", ".html") and "locales" not in path.parts:
            yield path


def _strip_js_comments(text: str) -> str:
    blank = _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _LINE_COMMENT.sub("", blank)


def literal_keys(path: Path) -> set[str]:
    """Every catalogue key `path` names literally."""
    return keys_in(path.read_text(encoding="utf-8"), path.suffix)


def keys_in(text: str, suffix: str) -> set[str]:
    """Every catalogue key a .js or .html text names literally."""
    if suffix == ".js":
        text = _strip_js_comments(text)
    keys = {m.group("key") for rx in (_CALL, _DATA_I18N, _DATA_I18N_EL) for m in rx.finditer(text)}
    if suffix == ".js":
        keys |= {m.group("key") for m in _DATASET_I18N.finditer(text) if "." in m.group("key")}
    for rx in (_DATA_I18N_ATTR, _DATA_I18N_ATTR_EL, _DATASET_I18N_ATTR):
        for m in rx.finditer(text):
            for pair in m.group("pairs").split(";"):
                if ":" in pair:
                    keys.add(pair.split(":", 1)[1].strip())
    return {key for key in keys if key}


# -- the files ----------------------------------------------------------------------------------


def test_both_languages_have_the_areas_i18n_js_loads() -> None:
    assert areas_of("en") == areas_of("fr"), "the two languages have different area files"
    assert set(loaded_areas()) == areas_of("en"), (
        "i18n.js AREAS and the files of locales/en differ: "
        f"{sorted(set(loaded_areas()) ^ areas_of('en'))}"
    )


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("area", AREAS)
def test_area_is_flat_and_prefixed(lang: str, area: str) -> None:
    data = load(lang, area)
    bad_prefix = [key for key in data if not key.startswith(f"{area}.")]
    assert not bad_prefix, f"{lang}/{area}.json: keys outside the area {area!r}: {bad_prefix}"
    for key, value in data.items():
        if isinstance(value, dict):
            assert value, f"{lang}/{area}.json {key}: an empty plural"
            assert set(value) <= PLURAL_FORMS, f"{lang} {key}: unknown plural forms {set(value)}"
            assert "other" in value, f"{lang} {key}: a plural without 'other'"
            assert all(isinstance(v, str) for v in value.values()), f"{lang} {key}: not text"
        else:
            assert isinstance(value, str), f"{lang} {key}: neither text nor a plural object"
        for text in forms(value):
            assert text.strip(), f"{lang} {key}: an empty value"


def test_no_two_areas_define_a_key() -> None:
    for lang in LANGS:
        owner: dict[str, str] = {}
        for area in AREAS:
            for key in load(lang, area):
                assert key not in owner, f"{lang}: {key} in both {owner[key]} and {area}"
                owner[key] = area


# -- the two languages --------------------------------------------------------------------------


def test_every_key_in_both_languages() -> None:
    en, fr = catalogue("en"), catalogue("fr")
    assert not sorted(set(en) - set(fr)), f"missing in French: {sorted(set(en) - set(fr))}"
    assert not sorted(set(fr) - set(en)), f"missing in English: {sorted(set(fr) - set(en))}"


def test_same_placeholders_and_plural_forms() -> None:
    en, fr = catalogue("en"), catalogue("fr")
    problems = []
    for key in sorted(set(en) & set(fr)):
        if placeholders(en[key]) != placeholders(fr[key]):
            problems.append(
                f"{key}: {sorted(placeholders(en[key]))} vs {sorted(placeholders(fr[key]))}"
            )
        if isinstance(en[key], dict) != isinstance(fr[key], dict):
            problems.append(f"{key}: a plural in one language only")
        elif isinstance(en[key], dict) and set(en[key]) != set(fr[key]):
            problems.append(f"{key}: plural forms {sorted(en[key])} vs {sorted(fr[key])}")
    assert not problems, "\n".join(problems)


def test_french_is_not_english() -> None:
    en, fr = catalogue("en"), catalogue("fr")
    same = []
    for key in sorted(set(en) & set(fr)):
        pairs = (
            [(en[key].get(form), fr[key][form]) for form in fr[key]]
            if isinstance(en[key], dict) and isinstance(fr[key], dict)
            else [(en[key], fr[key])]
        )
        for form_en, form_fr in pairs:
            text = str(form_fr)
            if text == str(form_en) and own_letters(text):
                same.append(f"{key}: {text!r}")
    assert not same, (
        "French values identical to the English (translate them, or add a word both languages "
        "share to ALLOWED_SAME):\n" + "\n".join(same)
    )


# A ; ! ? » (? not after a number or a placeholder: "1500?") or a : ending a word, without a
# no-break space before it; a « without one after it.
FRENCH_SPACE = re.compile(
    r"(?<![\u00a0\u202f])[;!»]|(?<![\u00a0\u202f}\d])\?|(?<![\u00a0\u202f]):(?=\s|$)|«(?![\u00a0\u202f])"
)


def test_french_spaces_before_high_punctuation() -> None:
    bad = []
    for key, value in catalogue("fr").items():
        for text in forms(value):
            if FRENCH_SPACE.search(str(text)):
                bad.append(f"{key}: {text!r}")
    assert not bad, (
        "French puts a no-break space (U+00A0) before ; : ! ? » and after «:\n" + "\n".join(bad)
    )


# -- the code -----------------------------------------------------------------------------------


def test_literal_keys_exist_in_english() -> None:
    en = catalogue("en")
    missing = []
    for path in static_files():
        for key in sorted(literal_keys(path)):
            if key not in en:
                missing.append(f"{path.relative_to(STATIC)}: {key}")
    assert not missing, "keys the code names but the English catalogue lacks:\n" + "\n".join(
        missing
    )


def test_the_key_finder_sees_every_form() -> None:
    """The patterns above find what they must (a test of this file's own reader)."""
    sample = (
        "t(\"a.one\"); tn('a.two', 2); t(`a.three`); t(`a.${x}`);\n"
        'el("p", {"data-i18n": "a.four", "data-i18n-attr": "title: a.five; aria-label:a.six"});\n'
        'node.dataset.i18n = "a.seven";\n// t("a.comment")\n'
    )
    assert keys_in(sample, ".js") == {
        "a.one",
        "a.two",
        "a.three",
        "a.four",
        "a.five",
        "a.six",
        "a.seven",
    }
    html = '<p data-i18n="b.one"></p><input data-i18n-attr="placeholder:b.two; title: b.three" />'
    assert keys_in(html, ".html") == {"b.one", "b.two", "b.three"}


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("Partie nulle !", True),
        ("Partie nulle\u00a0!", False),
        ("Abandonner?", True),
        ("{name}: bonjour", True),
        ("{name}\u00a0: bonjour", False),
        ("« oui »", True),
        ("«\u00a0oui\u00a0»", False),
        ("3:00 et 1500?", False),
        ("{rating}?", False),
        ("a ; b", True),
    ],
)
def test_the_french_space_rule(text: str, wrong: bool) -> None:
    assert bool(FRENCH_SPACE.search(text)) is wrong
