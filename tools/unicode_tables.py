"""Generate the Unicode tables of the fence: run after upgrading unicodedata2 or
confusable-homoglyphs (both in the `test` dependency group).

    .venv/bin/python -m tools.unicode_tables

writes core/ctxbudget/_unicode.py (invisible characters, space separators) and
core/ctxbudget/_confusables.py (look-alikes of ASCII characters, the letters of other
scripts read as Latin ones, warning signs). The invisible and
space tables unite the newest Unicode database at hand (unicodedata2) with the
generating interpreter's, so a table made on Python 3.11 still lists what 3.13 knows.
tests/core/test_normalised.py regenerates them in memory and compares them with the
committed modules, so none can drift from the data.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Final

ROOT = Path(__file__).resolve().parent.parent
UNICODE_MODULE = ROOT / "core" / "ctxbudget" / "_unicode.py"
CONFUSABLES_MODULE = ROOT / "core" / "ctxbudget" / "_confusables.py"

# Planes that hold Cf, Mn, Me or Zs characters: 0-3 (BMP, SMP, ideographs) and 14
# (tags, variation selectors supplement). Planes 15 and 16 are private use.
_PLANES = (range(0x40000), range(0xE0000, 0xF0000))

# Unicode names that say "this is a bracket" or "this is a small capital letter" where
# the confusables data, which pairs characters by shape alone, does not: U+00AB and
# U+276C read as angle brackets, U+3014 and U+3016 as square brackets, U+0280 (small
# capital R) as the letter it is.
_ANGLE = re.compile(r"\bANGLE (?:BRACKET|QUOTATION MARK)\b")
_BRACKET = re.compile(r"\bBRACKET\b")
_NOT_SQUARE = re.compile(r"\b(?:ANGLE|CURLY|PARENTHESIS|LESS-THAN|GREATER-THAN|TAG)\b")
_SMALL_CAPITAL = re.compile(r"^LATIN (?:LETTER SMALL CAPITAL|SMALL CAPITAL LETTER) ([A-Z])$")


def databases() -> list[ModuleType]:
    """The Unicode databases to unite: unicodedata2 (the newest) when installed, and the
    interpreter's own."""
    try:
        newest = importlib.import_module("unicodedata2")
    except ImportError:
        return [unicodedata]
    return [newest, unicodedata]


def newest_version(dbs: list[ModuleType]) -> str:
    return str(max(dbs, key=lambda db: _version_key(db.unidata_version)).unidata_version)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _code_points() -> Iterator[int]:
    for plane in _PLANES:
        yield from plane


def code_points_in(dbs: list[ModuleType], categories: Iterable[str]) -> list[int]:
    """Code points any of `dbs` puts in one of `categories`, in order."""
    wanted = frozenset(categories)
    return [
        point for point in _code_points() if any(db.category(chr(point)) in wanted for db in dbs)
    ]


def invisible_points(dbs: list[ModuleType]) -> list[int]:
    """Format characters (Cf) and combining and enclosing marks (Mn, Me)."""
    return code_points_in(dbs, ("Cf", "Mn", "Me"))


def space_points(dbs: list[ModuleType]) -> list[int]:
    """Space separators (Zs)."""
    return code_points_in(dbs, ("Zs",))


def ranges(points: list[int]) -> list[tuple[int, int]]:
    """Sorted code points as inclusive (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for point in points:
        if runs and runs[-1][1] == point - 1:
            runs[-1] = (runs[-1][0], point)
        else:
            runs.append((point, point))
    return runs


def confusables_data() -> dict[str, list[dict[str, str]]]:
    """The UTS #39 confusables pairs as confusable-homoglyphs ships them (both directions)."""
    path = resources.files("confusable_homoglyphs").joinpath("confusables.json")
    data: dict[str, list[dict[str, str]]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def confusables_version() -> str:
    module = importlib.import_module("confusable_homoglyphs._version")
    return str(module.get_versions()["version"])


def look_alikes(dbs: list[ModuleType]) -> dict[str, str]:
    """For each printable ASCII character, the non-ASCII characters read as it.

    From the confusables data: every character whose skeleton (UTS #39) is that one
    ASCII character. From Unicode names: angle brackets and angle quotation marks
    (as < and >), other left and right brackets (as [ and ]), Latin small capitals
    (as their lowercase letter). A name rule wins over the skeleton, which pairs
    U+3014 (tortoise shell bracket) with ( although it is a bracket. Left out:
    characters NFKD already turns into something else (the fence normalises
    first), decimal digits (``\\d`` matches them as they are), whitespace, and
    invisible characters (the fence removes them).
    """
    newest = dbs[0]
    folds: dict[str, str] = {}
    for target, entries in confusables_data().items():
        if len(target) != 1 or not target.isascii() or not target.isprintable():
            continue
        for entry in entries:
            source = entry["c"].replace("\u200e", "")  # the data wraps RTL letters in LRMs
            if len(source) == 1 and not source.isascii():
                folds[source] = target
    for point in _code_points():
        char = chr(point)
        name = newest.name(char, "")
        if point < 0x80 or not name:
            continue
        side = _side(name)
        if side is not None and _ANGLE.search(name):
            folds[char] = "<" if side == "LEFT" else ">"
        elif side is not None and _BRACKET.search(name) and not _NOT_SQUARE.search(name):
            folds[char] = "[" if side == "LEFT" else "]"
        elif small := _SMALL_CAPITAL.match(name):
            folds[char] = small.group(1).lower()
    grouped: dict[str, list[str]] = {}
    for source, target in folds.items():
        if _kept(source, newest):
            grouped.setdefault(target, []).append(source)
    return {target: "".join(sorted(grouped[target])) for target in sorted(grouped)}


# How the letters of other scripts read in a Latin word, by Unicode name (script, case and
# a " WITH ..." tail taken off): the Latin letter the small form and the capital form are
# read as, "" where that form reads as none. Listed: letters drawn as a Latin letter, or as
# a small capital of one (т as ᴛ, н as ʜ, в as ʙ), upright; not letters only an italic or
# a cursive hand draws so (и as u, д as g). Where the confusables data already has a
# letter, the two agree or the data wins; an entry is here all the same so that the
# letter's variants (small capitals, letters WITH a mark NFKD keeps) read as it does.
_READINGS: Final[dict[str, dict[str, tuple[str, str]]]] = {
    "GREEK": {
        "ALPHA": ("a", "A"),
        "BETA": ("b", "B"),
        "CHI": ("x", "X"),
        "DIGAMMA": ("f", "F"),
        "DOTTED LUNATE SIGMA SYMBOL": ("c", "C"),
        "EPSILON": ("e", "E"),
        "ETA": ("n", "H"),
        "GAMMA": ("y", ""),
        "IOTA": ("i", "I"),
        "KAI SYMBOL": ("k", "K"),
        "KAPPA": ("k", "K"),
        "LUNATE SIGMA SYMBOL": ("c", "C"),
        "MU": ("u", "M"),
        "NU": ("v", "N"),
        "OMEGA": ("w", ""),
        "OMICRON": ("o", "O"),
        "RHO": ("p", "P"),
        "SAN": ("m", "M"),
        "TAU": ("t", "T"),
        "UPSILON": ("u", "Y"),
        "YOT": ("j", "J"),
        "ZETA": ("", "Z"),
    },
    "COPTIC": {
        "EIE": ("e", "E"),
        "GAMMA": ("r", ""),
        "HATE": ("h", "H"),
        "IAUDA": ("i", "I"),
        "KAPA": ("k", "K"),
        "KHI": ("x", "X"),
        "L-SHAPED HA": ("l", "L"),
        "MI": ("m", "M"),
        "NI": ("n", "N"),
        "O": ("o", "O"),
        "OOU": ("w", ""),
        "RO": ("p", "P"),
        "SIMA": ("c", "C"),
        "TAU": ("t", "T"),
        "UA": ("y", "Y"),
        "VIDA": ("b", "B"),
        "ZATA": ("z", "Z"),
    },
    "CYRILLIC": {
        "A": ("a", "A"),
        "ALEUT KA": ("k", "K"),
        "BASHKIR KA": ("k", "K"),
        "BROAD OMEGA": ("w", "W"),
        "BYELORUSSIAN-UKRAINIAN I": ("i", "I"),
        "DJE": ("h", ""),
        "DZE": ("s", "S"),
        "EM": ("m", "M"),
        "EN": ("h", "H"),
        "ER": ("p", "P"),
        "ES": ("c", "C"),
        "GHE": ("r", ""),
        "HA": ("x", "X"),
        "HWE": ("h", "h"),
        "IE": ("e", "E"),
        "IOTA": ("i", "I"),
        "IZHITSA": ("v", "V"),
        "JE": ("j", "J"),
        "KA": ("k", "K"),
        "KOMI DE": ("d", "d"),
        "NARROW O": ("o", "O"),
        "O": ("o", "O"),
        "OMEGA": ("w", "W"),
        "PE": ("n", ""),
        "QA": ("q", "Q"),
        "SHHA": ("h", "h"),
        "SOFT SIGN": ("b", "b"),
        "STRAIGHT U": ("y", "Y"),
        "TALL TE": ("t", "T"),
        "TE": ("t", "T"),
        "TSHE": ("h", ""),
        "TWE": ("t", "T"),
        "U": ("y", "Y"),
        "UKRAINIAN IE": ("e", "E"),
        "VE": ("b", "B"),
        "WE": ("w", "W"),
        "WIDE ES": ("c", "C"),
    },
    "ARMENIAN": {
        "AYB": ("w", ""),
        "CO": ("g", ""),
        "GHAD": ("n", ""),
        "GIM": ("q", ""),
        "HO": ("h", ""),
        "INI": ("h", ""),
        "KEH": ("f", ""),
        "LIWN": ("l", "L"),
        "OH": ("o", "O"),
        "RA": ("n", ""),
        "REH": ("n", ""),
        "SEH": ("u", "U"),
        "TIWN": ("", "S"),
        "VO": ("n", ""),
        "YI": ("j", ""),
        "ZA": ("q", ""),
    },
    # Beyond one letter WITH a mark (ł, ŧ, ɨ), which reads as that letter.
    "LATIN": {
        "ENG": ("n", "N"),
        "KRA": ("k", ""),
        "OPEN E": ("e", "E"),
        "U BAR": ("u", "U"),
    },
}

# Script, then a small capital's words or case words, then the letter, then any WITH tail.
_LETTER_NAME = re.compile(
    r"^(?P<script>LATIN|GREEK|COPTIC|CYRILLIC|ARMENIAN|CHEROKEE) "
    r"(?:(?P<small_capital>LETTER SMALL CAPITAL |SMALL CAPITAL LETTER )"
    r"|(?:SMALL |CAPITAL )?(?:LETTER )?)"
    r"(?P<base>.+?)(?: WITH .+)?$"
)


def letter_readings(dbs: list[ModuleType], look_alikes: dict[str, str]) -> dict[str, str]:
    """For each ASCII letter (or digit), the letters of other scripts read as it that
    `look_alikes` and NFKD leave unfolded.

    A letter reads as `_READINGS` says for its name and case, or, for a Latin letter,
    as the one letter its name ends with; the same letter WITH a mark NFKD keeps, and its
    small capital (as the capital does, in lower case), read so too. Cherokee small
    letters are drawn as small capitals of their capitals: each reads as its capital's
    skeleton does, in lower case. Lisu letters and mathematical alphanumerics need
    nothing here: the confusables data and NFKD fold them. A letter NFKD turns into a
    letter read as none (U+03F9, drawn as C, into sigma) is listed too, and the fence reads
    it before NFKD.
    """
    newest = dbs[0]
    skeletons = {source: target for target, sources in look_alikes.items() for source in sources}
    read: dict[str, str] = {}
    for point in _code_points():
        char = chr(point)
        if point >= 0x80 and newest.category(char).startswith("L"):
            reading = _reading(char, newest, skeletons)
            if reading.isalnum():  # a Cherokee small letter may read as "?"
                read[char] = reading
    grouped: dict[str, list[str]] = {}
    for char, reading in read.items():
        bare = "".join(c for c in newest.normalize("NFKD", char) if newest.category(c) != "Mn")
        read_as_none = not bare.isascii() and bare not in read and bare not in skeletons
        if char not in skeletons and (bare == char or (len(bare) == 1 and read_as_none)):
            grouped.setdefault(reading, []).append(char)
    return {target: "".join(sorted(grouped[target])) for target in sorted(grouped)}


def _reading(char: str, db: ModuleType, skeletons: dict[str, str]) -> str:
    """The Latin letter `char` reads as ("" if none), by `letter_readings`' rules."""
    name = _LETTER_NAME.match(db.name(char, ""))
    if name is None:
        return ""
    script, base = name["script"], name["base"]
    if name["small_capital"] or (script == "CHEROKEE" and db.category(char) == "Ll"):
        return _capital_reading(script, base, db, skeletons).lower()
    if db.category(char) != "Ll":
        return _capital_reading(script, base, db, skeletons)
    if script == "LATIN" and len(base) == 1:
        return base.lower()
    return _READINGS.get(script, {}).get(base, ("", ""))[0]


def _capital_reading(script: str, base: str, db: ModuleType, skeletons: dict[str, str]) -> str:
    """The Latin letter the capital letter `base` of `script` reads as ("" if none)."""
    if script == "LATIN" and len(base) == 1:
        return base
    if script in _READINGS:
        return _READINGS[script].get(base, ("", ""))[1]
    try:  # Cherokee: the capital's skeleton
        return skeletons.get(db.lookup(f"{script} LETTER {base}"), "")
    except KeyError:
        return ""


# Characters read as the header's warning sign: those Unicode names so, and the enclosing
# triangle that draws any character (an exclamation mark) inside one.
_WARNING_NAME = re.compile(r"\bWARNING SIGN\b|^COMBINING ENCLOSING UPWARD POINTING TRIANGLE$")


def warning_signs(dbs: list[ModuleType]) -> str:
    """The characters read as a warning sign, in order."""
    return "".join(
        chr(point)
        for point in _code_points()
        if any(_WARNING_NAME.search(db.name(chr(point), "")) for db in dbs)
    )


def _side(name: str) -> str | None:
    left = re.search(r"\bLEFT\b", name) is not None
    right = re.search(r"\bRIGHT\b", name) is not None
    if left == right:
        return None
    return "LEFT" if left else "RIGHT"


def _kept(char: str, db: ModuleType) -> bool:
    return (
        db.category(char) not in ("Nd", "Cf", "Mn", "Me")
        and not char.isspace()
        and db.normalize("NFKD", char) == char
    )


# --- rendering the modules ------------------------------------------------------------------

_WIDTH = 84  # characters of escapes per source line


def _escape(point: int) -> str:
    return f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}"


def _class_ranges(points: list[int]) -> list[str]:
    return [_escape(a) if a == b else f"{_escape(a)}-{_escape(b)}" for a, b in ranges(points)]


def _wrapped(pieces: list[str], indent: str) -> list[str]:
    """Escaped pieces as implicitly concatenated string literals, one per source line."""
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if line and len(line) + len(piece) > _WIDTH:
            lines.append(f'{indent}"{line}"')
            line = ""
        line += piece
    lines.append(f'{indent}"{line}"')
    return lines


def _string_constant(name: str, pieces: list[str], doc: str) -> list[str]:
    body = _wrapped(pieces, "    ")
    if len(body) == 1:
        return [f"{name}: Final = {body[0].strip()}", f'"""{doc}"""', ""]
    return [f"{name}: Final = (", *body, ")", f'"""{doc}"""', ""]


def unicode_module(dbs: list[ModuleType]) -> str:
    """The source of core/ctxbudget/_unicode.py."""
    lines = [
        '"""Unicode tables the fence needs. Generated by ``python -m tools.unicode_tables``;',
        "do not edit.",
        "",
        "Each table unites the newest Unicode database at hand when it was generated",
        "(unicodedata2) with the generating interpreter's, so it also lists characters",
        "that Python versions newer than the one running know. tests/core/test_normalised.py",
        "regenerates the tables and checks them against the running interpreter.",
        '"""',
        "",
        "from typing import Final",
        "",
        f'UNICODE_VERSION: Final = "{newest_version(dbs)}"',
        '"""The newest Unicode version the tables were generated from."""',
        "",
        *_string_constant(
            "INVISIBLE_RANGES",
            _class_ranges(invisible_points(dbs)),
            "Format characters (Cf), combining and enclosing marks (Mn, Me): regex class ranges.",
        ),
        *_string_constant(
            "SPACE_SEPARATORS",
            _class_ranges(space_points(dbs)),
            "Space separators (Zs), the space character included: regex class ranges.",
        ),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def _table(name: str, table: dict[str, str], doc: str) -> list[str]:
    """A generated ASCII character -> characters table as source lines."""
    lines = [f"{name}: Final[dict[str, str]] = {{"]
    for target, sources in table.items():
        key = json.dumps(target)
        pieces = [_escape(ord(c)) for c in sources]
        one_line = f'    {key}: "{"".join(pieces)}",'
        if len(one_line) <= 100:
            lines.append(one_line)
        else:
            lines += [f"    {key}: (", *_wrapped(pieces, "        "), "    ),"]
    return [*lines, "}", f'"""{doc}"""', ""]


def confusables_module(dbs: list[ModuleType]) -> str:
    """The source of core/ctxbudget/_confusables.py."""
    look_alikes_table = look_alikes(dbs)
    lines = [
        '"""Look-alikes of ASCII characters, and warning signs. Generated by',
        "``python -m tools.unicode_tables``; do not edit.",
        "",
        "LOOK_ALIKES, from the Unicode confusables data (UTS #39 skeletons, as the",
        "confusable-homoglyphs package ships it): every character whose skeleton is one",
        "printable ASCII character; and from Unicode character names: angle brackets and",
        "quotation marks as < and >, other brackets as [ and ], Latin small capitals as their",
        "letter. Characters that NFKD already folds, decimal digits, whitespace and invisible",
        "characters are left out. UTS #39 draws l, I, 1 and | with one skeleton, l: its",
        'look-alikes are listed under "l".',
        "",
        "LETTER_READINGS, from Unicode character names and a table of how Greek, Coptic,",
        "Cyrillic and Armenian letters read in a Latin word (tools/unicode_tables.py): the",
        "letters read as a Latin letter that UTS #39, which pairs shapes that are the same,",
        "and NFKD leave out (τ as t, к as k, η as n), their variants with a mark NFKD keeps",
        "(ҭ, ŧ), small capitals, and Cherokee small letters (small capitals of the capitals).",
        '"""',
        "",
        "from typing import Final",
        "",
        f'SOURCE: Final = "confusable-homoglyphs {confusables_version()}, '
        f'Unicode {newest_version(dbs)} names"',
        '"""The data the tables were generated from."""',
        "",
        *_table(
            "LOOK_ALIKES",
            look_alikes_table,
            "For each printable ASCII character, the characters read as it.",
        ),
        *_table(
            "LETTER_READINGS",
            letter_readings(dbs, look_alikes_table),
            "For each ASCII letter (or digit), the letters read as it that LOOK_ALIKES and NFKD "
            "leave out.",
        ),
        *_string_constant(
            "WARNING_SIGNS",
            [_escape(ord(c)) for c in warning_signs(dbs)],
            "Characters read as a warning sign: named so, or drawing one around a character.",
        ),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    dbs = databases()
    if len(dbs) == 1:
        raise SystemExit(
            "unicodedata2 is not installed: install the test group (pip install --group test) "
            "so the tables cover the newest Unicode, not only this interpreter's"
        )
    UNICODE_MODULE.write_text(unicode_module(dbs), encoding="utf-8")
    CONFUSABLES_MODULE.write_text(confusables_module(dbs), encoding="utf-8")
    # The layout above is close to ruff's; let it have the last word on line breaks.
    subprocess.run(
        [sys.executable, "-m", "ruff", "format", str(UNICODE_MODULE), str(CONFUSABLES_MODULE)],
        check=True,
    )
    print(f"wrote {UNICODE_MODULE.relative_to(ROOT)} and {CONFUSABLES_MODULE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
