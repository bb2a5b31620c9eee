"""The exact token count of a joined text from its parts' counts and a few characters per join.

tiktoken splits text into pieces with its pattern and encodes each piece on its own, so a
count is a sum over pieces. For the o200k_base and cl100k_base patterns, and the patterns
of Llama 3 (cl100k's without possessive loops), Llama 4 (o200k's) and Qwen (cl100k's with
single digits; Qwen 3.5 also counts marks as letters), some pairs of
adjacent characters can never fall in one piece, whatever surrounds them: the position
between them is *hard*, and cutting a text there splits its count exactly,
``count(x + y) == count(x) + count(y)``. Hardness depends on the two characters alone, so
it survives any concatenation. A part remembers its first and last hard positions and the
counts of the text before the first (its head) and after the last (its tail); the count of
a joined text is then the parts' counts less their heads and tails, plus one small encode
per join of the text between the two hard positions around it (docs/speed.md, "Where the
time goes").

The hard pairs, derived from every alternative of these patterns (a ``?`` prefix, letter
and mark runs, contractions, 1-3 digits, punctuation runs with trailing line breaks,
whitespace runs with their look-ahead and ``$``):

- x is not whitespace and y is whitespace other than a line break;
- x is a digit (``\\p{N}``) and y is not;
- x is neither whitespace nor a digit and y is a digit;
- x is a letter (``\\p{L}``) and y is a line break or "other" (not a letter, digit, mark,
  whitespace or apostrophe).

A character Python's tables do not assign (or a lone surrogate, or U+001C-U+001F, which
Python calls whitespace and tiktoken does not) is never part of a hard pair: an
uncertain class can only make a window larger, never a count wrong.

Qwen's tokenizer normalizes text to NFC first, which can merge characters across a cut (an
``e`` and a combining accent after it). There a position is hard only when, besides, the
character after it is a *stable* one: a starter that composes with nothing before it, so
normalizing the two sides apart gives the same text. Every other tokenizer keeps a full
encode of the joined text.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Sequence
from typing import Final, Literal, NamedTuple

import tiktoken

from ctxbudget._offline import PATTERNS
from ctxbudget._vocab import PATTERNS as VOCABULARY_PATTERNS

__all__ = [
    "SCAN",
    "Counted",
    "Ends",
    "JoinCounter",
    "Piece",
    "ends",
    "hard",
    "join_counter",
    "stable",
]

# Character classes, as the two patterns see them.
_WS, _NL, _N, _L, _M, _APOSTROPHE, _Q, _UNK = range(8)

_WHITE_SPACE: Final = frozenset(
    "\t\x0b\x0c \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Unicode White_Space (what ``\\s`` matches in tiktoken's regex engine) less ``\\r\\n``."""

_JOINABLE: Final = frozenset(
    [PATTERNS["o200k_base"], PATTERNS["cl100k_base"], *VOCABULARY_PATTERNS.values()]
)
"""The split patterns the hard-pair rules were derived from (tests/core/test_joins*.py prove
them on each)."""

SCAN: Final = 64
"""How far into each end of a part hard positions are looked for; beyond, the part is
treated as having none there (a larger window, never a wrong count)."""

_CACHE_LIMIT: Final = 65_536
"""Entries a per-character or per-short-text cache here holds before it starts over:
untrusted text may bring any of 1.1M code points, and a cold start costs microseconds."""

_SMALL: Final = 256
"""Texts up to this length have their counts kept in a plain dict (heads, tails, windows)."""


def _class(char: str) -> int:
    if char == "\r" or char == "\n":
        return _NL
    if char in _WHITE_SPACE:
        return _WS
    if "\x1c" <= char <= "\x1f":
        return _UNK
    category = unicodedata.category(char)
    if category == "Cn" or category == "Cs":
        return _UNK
    kind = category[0]
    if kind == "L":
        return _L
    if kind == "N":
        return _N
    if kind == "M":
        return _M
    return _APOSTROPHE if char == "'" else _Q


def _is_hard(x: int, y: int) -> bool:
    if x == _UNK or y == _UNK:
        return False
    if y == _WS:
        return x not in (_WS, _NL)
    if x == _N:
        return y != _N
    if y == _N:
        return x not in (_WS, _NL)
    return x == _L and y in (_NL, _Q)


_HARD: Final = tuple(_is_hard(x, y) for x in range(8) for y in range(8))
_CLASSES: dict[str, int] = {chr(code): _class(chr(code)) for code in range(128)}


def _class_of(char: str) -> int:
    found = _CLASSES.get(char)
    if found is None:
        if len(_CLASSES) >= _CACHE_LIMIT:
            _CLASSES.clear()
        found = _CLASSES[char] = _class(char)
    return found


def hard(x: str, y: str) -> bool:
    """Whether the position between characters `x` and `y` is hard: no piece spans it."""
    return _HARD[_class_of(x) * 8 + _class_of(y)]


@functools.cache
def _composes_backward() -> frozenset[str]:
    """Starters NFC may compose with the character before them: the second character of
    every primary composite, and Hangul's medial vowels and final consonants."""
    found = {chr(code) for code in range(0x1161, 0x1176)} | {
        chr(code) for code in range(0x11A8, 0x11C3)
    }
    for code in range(0x110000):
        char = chr(code)
        decomposition = unicodedata.decomposition(char).split()
        if (
            len(decomposition) == 2
            and not decomposition[0].startswith("<")
            and unicodedata.normalize("NFC", char) == char
        ):
            found.add(chr(int(decomposition[1], 16)))
    return frozenset(char for char in found if unicodedata.combining(char) == 0)


_STABLE: dict[str, bool] = {}


def stable(char: str) -> bool:
    """Whether NFC leaves the text before `char` and from it apart: `char` is a starter
    that NFC keeps as it is and that composes with nothing before it."""
    found = _STABLE.get(char)
    if found is None:
        if len(_STABLE) >= _CACHE_LIMIT:
            _STABLE.clear()
        found = _STABLE[char] = (
            unicodedata.combining(char) == 0
            and unicodedata.is_normalized("NFC", char)
            and char not in _composes_backward()
        )
    return found


class Ends(NamedTuple):
    """Where a text can be cut without changing its count, and what its two ends cost.

    ``first`` is -1 when no hard position was found (within `SCAN` characters of either
    end): such a text is absorbed into the windows around it. ``head`` (or ``tail``) is -1
    when no hard position was found near that end: ``first == last`` then, and the window
    on that side spans the text up to (or on from) it.
    """

    first: int
    last: int
    head: int
    tail: int

    @property
    def measured(self) -> bool:
        """Both ends were measured: the text's own count is needed to count a join of it."""
        return self.first >= 0 and self.head >= 0 and self.tail >= 0


_SOFT: Final = Ends(-1, -1, 0, 0)


def ends(text: str, count: Callable[[str], int], cut: Callable[[str], bool] | None = None) -> Ends:
    """The first and last hard positions of `text` near its ends, and its head and tail counts.

    `count` is only ever given texts of at most `SCAN` + 1 characters. With `cut`, a hard
    position is used only where `cut` accepts the character after it (`stable`, for NFC).
    """
    size = len(text)
    if size < 2:
        return _SOFT
    first = last = -1
    stop = min(size, SCAN + 1)
    before = _class_of(text[0])
    for index in range(1, stop):
        now = _class_of(text[index])
        if _HARD[before * 8 + now] and (cut is None or cut(text[index])):
            first = index
            break
        before = now
    start = max(first, size - SCAN - 1, 0)
    after = _class_of(text[-1])
    for index in range(size - 1, start, -1):
        now = _class_of(text[index - 1])
        if _HARD[now * 8 + after] and (cut is None or cut(text[index])):
            last = index
            break
        after = now
    if first < 0 and last < 0:
        return _SOFT
    if last < 0:
        return Ends(first, first, count(text[:first]), -1)
    if first < 0:
        return Ends(last, last, -1, count(text[last:]))
    return Ends(first, last, count(text[:first]), count(text[last:]))


class Counted(NamedTuple):
    """A part whose token count is already known (measured at ingest)."""

    text: str
    tokens: int


Piece = str | Counted
"""A part of a joined text: its text, or its text with a known count."""


class JoinCounter:
    """Counts joined texts for one encoding whose split pattern has derived hard pairs,
    of text normalized to NFC first when `normalization` says so (Qwen)."""

    def __init__(
        self, encoding: tiktoken.Encoding, normalization: Literal["NFC"] | None = None
    ) -> None:
        ordinary = encoding.encode_ordinary
        self._encode: Callable[[str], list[int]] = (
            ordinary
            if normalization is None
            else lambda text: ordinary(unicodedata.normalize(normalization, text))
        )
        self._cut = None if normalization is None else stable
        self._small: dict[str, int] = {}
        self._ends: dict[str, Ends] = {}

    def measure(self, text: str) -> Ends:
        """`ends(text)` under this counter's rules, not cached (a long text's digest is)."""
        return ends(text, self.small, self._cut)

    def ends(self, text: str) -> Ends:
        """`ends(text)` of a short text (a header, a frame, a separator), cached."""
        found = self._ends.get(text)
        if found is None:
            if len(self._ends) >= _CACHE_LIMIT:
                self._ends.clear()
            found = self._ends[text] = self.measure(text)
        return found

    def small(self, text: str) -> int:
        """The count of a short text (a head, a tail, a window), cached while it is short."""
        if len(text) > _SMALL:
            return len(self._encode(text))
        found = self._small.get(text)
        if found is None:
            if len(self._small) >= _CACHE_LIMIT:
                self._small.clear()  # heads and tails recur; a cold start costs microseconds
            found = self._small[text] = len(self._encode(text))
        return found

    def total(self, parts: Sequence[tuple[str, int, Ends]]) -> int:
        """The exact count of the parts' texts joined, given each one's `Ends` and, where
        both ends were measured, its count (else the count is not read)."""
        total = 0
        window: list[str] = []
        known = 0  # the window's count when it holds only a measured tail
        for text, tokens, (first, last, head, tail) in parts:
            if first < 0:
                if text:
                    window.append(text)
                continue
            if head < 0:
                window.append(text[:last])
                total += self.small("".join(window))
            elif window:
                window.append(text[:first])
                total += self.small("".join(window))
            else:
                total += head
            if tail < 0:
                window, known = [text[first:]], 0
                continue
            if head >= 0:
                total += tokens - head - tail
            window, known = [text[last:]], tail
        if len(window) == 1 and known:
            return total + known
        return total + (self.small("".join(window)) if window else 0)


def join_counter(
    encoding: tiktoken.Encoding, normalization: Literal["NFC"] | None = None
) -> JoinCounter | None:
    """A `JoinCounter` for `encoding` when its split pattern is one the rules hold for."""
    return JoinCounter(encoding, normalization) if encoding._pat_str in _JOINABLE else None
