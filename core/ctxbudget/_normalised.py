"""The normalised view of a text, the way back from it to the text, and what it bounds.

Look-alikes are matched on this view: NFKD, invisible characters (format characters,
combining marks, variation selectors, blank fillers) removed, look-alikes folded to
the ASCII character they are read as (the Unicode confusables data, UTS #39, and the
letters of other scripts read as Latin ones, in `_confusables.py`), every line break
made ``\\n``. So a fullwidth, Cyrillic, Greek, small-capital or zero-width-split
``</retrieved_documents>`` counts as what it looks like (`_neutralise.py`). The same
view bounds how many bytes neutralising can take out of a text (`removable_bytes`) and
says whether a text holds anything a reader sees (`is_blank`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Final

from ctxbudget._confusables import LETTER_READINGS, LOOK_ALIKES
from ctxbudget._unicode import INVISIBLE_RANGES, SPACE_SEPARATORS

__all__ = [
    "STAND_IN",
    "View",
    "changed_characters",
    "is_blank",
    "removable_bytes",
    "unusual_characters",
    "view_tables",
    "view_text",
]

# --- the Unicode tables ---------------------------------------------------------------------

# Blank-looking letters that are not marks: Hangul fillers, the braille blank.
_PIECES_BEFORE_WHOLE: Final = 128
"""Pieces the normalised view builds run by run before it weighs one translate of the
whole text instead (`_CHARS_PER_PIECE`)."""

_CHARS_PER_PIECE: Final = 5
"""A Python step per run (two pieces) costs about what translating ten characters does:
once runs come more often than that, one translate of the whole text is cheaper."""

_HANGUL_THEN_SURROGATES: Final = range(0xAC00, 0xE000)
"""Hangul syllables (NFKD only makes them jamo), then surrogates: skipped whole."""

_FILLERS: Final = "\u115f\u1160\u3164\uffa0\u2800"

# Every character that starts a new line for a reader; the view makes each one "\n".
_LINE_BREAKS: Final = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_ASCII_BREAK_CHARS: Final = "\r\x0b\x0c\x1c\x1d\x1e"
_ASCII_BREAKS: Final = str.maketrans(dict.fromkeys(_ASCII_BREAK_CHARS, "\n"))

# Non-ASCII characters whose skeleton is "l" are drawn like l, I, 1 or |: the view
# writes them all as this one letter (itself one of them), which the keyword patterns
# accept wherever they expect i, l or |. ASCII text never contains it.
STAND_IN: Final = "\u01c0"

_ASTRAL: Final = "\\U00010000-\\U0010ffff"


def _ranges(spec: str) -> Iterator[int]:
    """The code points of regex class ranges written as literal characters."""
    index = 0
    while index < len(spec):
        first = ord(spec[index])
        if index + 2 < len(spec) and spec[index + 1] == "-":
            yield from range(first, ord(spec[index + 2]) + 1)
            index += 3
        else:
            yield first
            index += 1


def _class(points: set[int]) -> str:
    """A regex class body for `points`, as ranges of (escaped) characters."""
    parts: list[list[int]] = []
    for point in sorted(points):
        if parts and parts[-1][1] == point - 1:
            parts[-1][1] = point
        else:
            parts.append([point, point])
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in parts
    )


def _decomposable() -> Iterator[str]:
    """Characters NFKD changes, Hangul syllables aside (they only become jamo).

    Blocks of 128 code points are checked whole first: most need no closer look.
    """
    for block in range(0x80, 0x20000, 0x80):
        if block in _HANGUL_THEN_SURROGATES:
            continue
        chars = "".join(map(chr, range(block, block + 0x80)))
        if not unicodedata.is_normalized("NFKD", chars):
            yield from (c for c in chars if not unicodedata.is_normalized("NFKD", c))


@dataclass(frozen=True)
class _Tables:
    """What the view needs, built on the first non-ASCII text (a few tens of milliseconds)."""

    view: dict[int, str]
    """Each character whose view differs from itself, and its view ("" if invisible)."""
    changing: frozenset[str]
    """The characters `view` changes."""
    attention: re.Pattern[str]
    """Runs of characters the view may change: the keys of `view`, and every astral character."""
    resized: re.Pattern[str]
    """Runs of characters whose view is not one character, and of astral characters."""
    visible: re.Pattern[str]
    """A BMP character a reader sees: not whitespace, not invisible."""
    erasable: re.Pattern[str]
    """A character the view drops, or any astral character (for byte bounds)."""


def _viewed(char: str, fold: dict[str, str], invisible: frozenset[str]) -> str:
    """The view of one character: NFKD, invisible parts dropped, look-alikes folded."""
    if char in _LINE_BREAKS:
        return "\n"
    if char in fold:  # before NFKD, which turns a few into letters read as none (U+03F9)
        return fold[char]
    return "".join(
        fold.get(part, part)
        for part in unicodedata.normalize("NFKD", char)
        if part not in invisible
    )


# The characters the patterns look for; a character whose view holds none of these
# (nor whitespace, a digit or the stand-in) can stay itself in the view.
_STRUCTURAL: Final = frozenset("<>[]/\\|:_#*~(")


def _matters(viewed: str) -> bool:
    """Whether a character's view can take part in a match."""
    return not viewed or any(
        (c.isascii() and c.isalnum())
        or c in _STRUCTURAL
        or c.isspace()
        or c.isdecimal()
        or c == STAND_IN
        for c in viewed
    )


@functools.cache
def view_tables() -> _Tables:
    fold = {
        source: STAND_IN if target == "l" else target
        for target, sources in LOOK_ALIKES.items()
        for source in sources
    }
    fold |= {source: target for target, sources in LETTER_READINGS.items() for source in sources}
    invisible = frozenset(map(chr, _ranges(INVISIBLE_RANGES))) | frozenset(_FILLERS)
    candidates = set(fold) | set(invisible) | set(_LINE_BREAKS) | set(_decomposable())
    view: dict[int, str] = {}
    for char in candidates:
        viewed = _viewed(char, fold, invisible)
        if viewed != char and _matters(viewed):
            view[ord(char)] = viewed
    bmp = {point for point in view if point <= 0xFFFF}
    hidden = {p for p, v in view.items() if p <= 0xFFFF and not v.strip()}
    return _Tables(
        view=view,
        changing=frozenset(map(chr, view)),
        attention=re.compile(f"[{_class(bmp)}{_ASTRAL}]+"),
        resized=re.compile(f"[{_class({p for p in bmp if len(view[p]) != 1})}{_ASTRAL}]+"),
        visible=re.compile(f"[^\\s{_class(hidden)}{_ASTRAL}]"),
        erasable=re.compile(f"[{_class({p for p in hidden if not view[p]})}{_ASTRAL}]"),
    )


# --- the view and the way back to the text --------------------------------------------------


@dataclass
class View:
    """The normalised view of a text, and the way back from view indices to the text.

    Most characters give exactly one view character; the others (invisible ones,
    which give none, and expansions such as ligatures) are found only when a match
    needs mapping back, as runs: between two runs, view and text advance together.
    """

    text: str
    source: str
    _runs: list[tuple[int, int, int, int]] | None = None
    """(text start, text end, view start, view end) of each run of resized characters."""
    _starts: list[int] = field(default_factory=list)
    _offsets: dict[int, list[int]] = field(default_factory=dict)

    def start_of(self, index: int) -> tuple[int, int]:
        """(text index, view index) where the character giving view[index] starts."""
        return self._locate(index, end=False)

    def end_of(self, index: int) -> tuple[int, int]:
        """(text index, view index) where the character giving view[index - 1] ends."""
        return self._locate(index - 1, end=True)

    def _resized(self) -> list[tuple[int, int, int, int]]:
        if self._runs is None:
            self._runs = []
            if len(self.text) != len(self.source) or not self.source.isascii():
                tables = view_tables()
                shift = 0
                for match in tables.resized.finditer(self.source):
                    run = match.group()
                    viewed = run.translate(tables.view)
                    if viewed == run:
                        continue  # astral characters the view keeps
                    start, end = match.span()
                    self._runs.append((start, end, start + shift, start + shift + len(viewed)))
                    shift += len(viewed) - len(run)
            self._starts = [run[2] for run in self._runs]
        return self._runs

    def _locate(self, index: int, *, end: bool) -> tuple[int, int]:
        runs = self._resized()
        run = bisect_right(self._starts, index) - 1
        if run < 0:
            return index + end, index + end
        text_start, text_end, view_start, view_end = runs[run]
        if index >= view_end:  # after the run: shifted by what the runs so far changed
            shift = view_end - text_end
            return index - shift + end, index + end
        offsets = self._offsets.get(run)
        if offsets is None:
            table = view_tables().view
            lengths = (len(table.get(ord(c), c)) for c in self.source[text_start:text_end])
            offsets = self._offsets[run] = list(accumulate(lengths, initial=view_start))
        # The character whose view holds `index`: the last one starting at or before it.
        char = bisect_right(offsets, index) - 1
        if end:
            return text_start + char + 1, offsets[char + 1]
        return text_start + char, offsets[char]


# ASCII bytes the view keeps as they are. Deleting them from a text's UTF-8 leaves the
# encoding of every other character whole and in order: UTF-8 writes a non-ASCII
# character in bytes >= 0x80 only.
_KEPT_ASCII: Final = bytes(b for b in range(0x80) if chr(b) not in _ASCII_BREAK_CHARS)

_FEW_CHANGED: Final = 64
"""Most distinct changed characters the view makes by one str.replace each: a C pass
over the text each, where `_view_by_runs` makes one regex pass and a step per run."""


def unusual_characters(utf8: bytes) -> str:
    """Every non-ASCII character of the text encoded as `utf8`, and every ASCII line
    break but ``\\n``, in order.

    A bytes.translate, about 1 ns a byte, where a regex class scan of the text costs
    5 to 20 a character; on prose the result is a few dozen characters.
    """
    return utf8.translate(None, _KEPT_ASCII).decode("utf-8", "surrogatepass")


def changed_characters(text: str, unusual: str | None = None) -> str:
    """The distinct characters of `text` that its view changes (`unusual` is
    `unusual_characters` of `text`, if known)."""
    if text.isascii():  # a few memchr scans
        return "".join([char for char in _ASCII_BREAK_CHARS if char in text])
    if unusual is None:
        unusual = unusual_characters(text.encode("utf-8", "surrogatepass"))
    return "".join(view_tables().changing.intersection(unusual))


def view_text(text: str, changed: str) -> str:
    """The normalised view of `text`, whose changed characters are `changed`."""
    if text.isascii():
        return text.translate(_ASCII_BREAKS) if changed else text
    if len(changed) > _FEW_CHANGED:
        return _view_by_runs(text)
    view = view_tables().view
    # No view holds a character the view changes (tests/core/test_neutralise_fast.py), so
    # replacing the changed characters one after another is the one-pass translate.
    for char in changed:
        text = text.replace(char, view[ord(char)])
    return text


def _view_by_runs(text: str) -> str:
    """The view of non-ASCII `text`: one regex pass and a translate per changed run, or,
    where changed runs are dense (Cyrillic, Greek), one translate of the whole text."""
    tables = view_tables()
    pieces: list[str] = []
    cursor = 0
    for match in tables.attention.finditer(text):
        run = match.group()
        viewed = run.translate(tables.view)
        if viewed == run:
            continue  # astral characters the view keeps
        if len(pieces) > _PIECES_BEFORE_WHOLE and len(pieces) * _CHARS_PER_PIECE > match.end():
            return text.translate(tables.view)
        pieces += (text[cursor : match.start()], viewed)
        cursor = match.end()
    pieces.append(text[cursor:])
    return "".join(pieces)


# --- size bounds and blank text -------------------------------------------------------------

# The space separators but the ASCII one: up to three bytes each, that `datamark`
# (`_fence.py`) writes, a run at a time, as its two-byte marker.
_WIDE_SPACES: Final = re.compile(f"[{SPACE_SEPARATORS.replace(' ', '')}]")


def removable_bytes(text: str, *, datamarked: bool = False) -> int:
    """An upper bound on how many UTF-8 bytes neutralising (and datamarking, when
    `datamarked`) can take out of `text`, computed in C-speed scans.

    Rewrites never shorten what they replace, so only characters the normalised view
    changes can shrink: a look-alike rewritten in ASCII keeps one byte at least, an
    invisible character may vanish; every other character keeps its bytes. A size
    bound taken on ``len(text.encode()) - removable_bytes(text)`` bytes therefore
    holds for the neutralised text. 0 for ASCII text that is not datamarked.
    """
    spaces = 0
    if datamarked:  # a run of spaces becomes one two-byte marker
        spaces = text.count(" ") + text.count("\t")
    if text.isascii():
        return spaces
    tables = view_tables()
    if datamarked:
        spaces += 3 * len(_WIDE_SPACES.findall(text))
    changed = "".join(tables.attention.findall(text))
    erased = len(tables.erasable.findall(text))
    return len(changed.encode("utf-8")) - len(changed) + erased + spaces


def is_blank(text: str) -> bool:
    """Whether `text` holds nothing a reader sees: only whitespace and invisible characters."""
    if text.isascii():
        return not text or text.isspace()
    if view_tables().visible.search(text) is not None:
        return False
    return not view_text(text, changed_characters(text)).strip()
