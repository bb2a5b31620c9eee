"""The inputs both join-counting test modules share: adversarial fragments, separators, and
the (x, y) pairs the join rules call hard, drawn from every code point Python assigns."""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterator

from hypothesis import settings

FRAGMENTS = [
    # whitespace runs, line breaks and their mixtures
    " ", "  ", "   ", "\t", "\u00a0", "\u3000", "\u2028", "\x85", "\x0b", "\n", "\r\n", "\r",
    "\n\n", " \n", "\n ", "    ",
    # digits of every kind, and runs that 3-digit chunking cuts
    "1", "12", "123", "4567", "\u0663", "\u00bd", "\u2460",
    # letters: cased, titlecase, CJK, Hangul
    "a", "Z", "word", "Word", "\u00e9", "\u01c5", "\u00df", "\u0130", "\u6771\u4eac", "\uac00",
    # marks after letters and alone
    "\u0301", "e\u0301", "\u20dd",
    # contractions and apostrophes
    "'s", "'S", "'ll", "'t", "'re", "'d", "'m", "'ve", "'", "\u2019s",
    # punctuation and symbols, incl. o200k's trailing slash
    ".", "!", "/", "-", "(", ")", "[1]", "#", "\u2014", "\u20ac", "<", ">",
    # emoji, ZWJ sequences, variation selectors
    "\U0001f600", "\U0001f469\u200d\U0001f469\u200d\U0001f467", "\u200d", "\ufe0f",
    # controls, the separators Python calls whitespace, unassigned and private-use characters
    "\x00", "\x1c", "\x1f", "\u0378", "\U0010ffff", "\U000e0080", "\ue000",
]  # fmt: skip
SEPARATORS = ["\n\n", "\n", " ", "", "\n\n[2] ", "\u2014"]


@functools.cache
def classes() -> dict[str, list[str]]:
    """Every code point Python assigns, by class: "L", "N", "M", or "Q" (any other)."""
    found: dict[str, list[str]] = {"L": [], "N": [], "M": [], "Q": []}
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        if category in ("Cn", "Cs") or 0x1C <= code <= 0x1F or char.isspace() or char == "'":
            continue
        found[category[0] if category[0] in "LNM" else "Q"].append(char)
    return found


def assigned(kind: str, stride: int) -> list[str]:
    """Code points Python assigns to `kind`, every `stride`-th."""
    return classes()[kind][::stride]


def stride() -> int:
    # Every code point under the thorough profile; a stride otherwise (it is the same rule
    # for every member of a class, and the run stays short).
    return 1 if settings().max_examples >= 1_000 else 61


WHITE = "\t\x0b\x0c \x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000"
CONTEXTS = [("", ""), ("a", "b"), (" ", " "), ("9", "9"), ("'", "'s"), ("\n", "\n"), ("!", "!")]


def roles(step: int) -> Iterator[tuple[str, str]]:
    """(x, y) pairs the rules call hard: each class member as x and as y, with a partner."""
    for kind in "LNMQ":
        for char in assigned(kind, step):
            yield char, " "  # not whitespace, then whitespace
            if kind == "N":
                yield char, "a"  # a digit, then anything else
            else:
                yield char, "7"  # neither whitespace nor digit, then a digit
                yield "7", char
            if kind == "L":
                yield char, "\n"  # a letter, then a line break or "other"
                yield char, "."
            if kind == "Q":
                yield "a", char
    for space in WHITE:
        yield "a", space
        yield "'", space
    yield "a", "\r"
    yield "'", "7"
