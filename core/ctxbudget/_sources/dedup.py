"""Near-duplicate detection: word-shingle Jaccard, and embedding cosine when vectors exist.

Dedup runs lazily inside selection: each candidate is compared only with the
chunks already kept, so a candidate that is never reached costs nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Final, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._inputs import Chunk

__all__ = ["Dedup", "Deduplicator", "Shingles", "cosine", "jaccard", "shingles"]

Shingles: TypeAlias = frozenset[int]
"""A text's word windows, each as the hash of its words (case-folded, UTF-8 encoded)."""

_WORD: Final = re.compile(r"\w+")
_NON_WORD: Final = re.compile(r"\W")


def _fold(char: str) -> str:
    """One character as the words are read from it: case-folded, each non-word character of
    the fold a space."""
    return _NON_WORD.sub(" ", char.casefold())


_ASCII: Final = bytes(range(128))
_ASCII_FOLD: Final = bytes(ord(_fold(chr(byte))) for byte in _ASCII) + bytes(range(128, 256))
"""A `bytes.translate` table: `_fold` of every ASCII byte, the bytes of other characters kept."""
_DENSE: Final = 2
"""Text with more than one non-ASCII character in this many is read by the regular expression:
looking at its distinct characters one by one would cost more."""
_MAX_REWRITES: Final = 32
"""Distinct characters rewritten in the bytes at most: each rewrite is one pass over the text."""


def _words_by_regex(text: str) -> list[bytes]:
    """The words by their definition, `\\w+` runs of the case-folded text, UTF-8 encoded
    (words hold no whitespace, so one encode of them joined by spaces serves)."""
    return " ".join(_WORD.findall(text.casefold())).encode("utf-8").split()


def _rewrite(char: str) -> bytes:
    """What stands for the non-ASCII `char` in the folded bytes: its `_fold`, or, when that is
    all spaces, one space per byte of its encoding (any run of spaces parts words alike, and
    a replacement of the same length is the fast one)."""
    fold = _fold(char)
    if fold.isspace():
        return b" " * len(char.encode("utf-8"))
    return fold.encode("utf-8")


def _words(text: str) -> list[bytes]:
    """`_words_by_regex(text)`, for most text without the regular expression.

    The regex tests each character for `\\w` in Python's Unicode tables and builds a string
    per word, which costs more than a tiktoken encode of the text. This is exact and cheaper:
    case folding and the `\\w` test each look at one character, so the words are the runs
    of non-spaces once every character is replaced by its `_fold`. One `translate` does that
    for every ASCII byte. A non-ASCII character that is a word character and its own fold
    stays as it is; each other one (punctuation, emoji, capitals) is replaced in the UTF-8
    bytes, where its encoding can only match at a character boundary. A replacement never
    brings in a character that another one replaces, since a fold is its own fold (tests
    check this, and the rest, over every code point). `bytes.split` then parts words only at
    the spaces put there. Text that is mostly non-ASCII, or that would need many
    replacements, costs less through the regex.
    """
    try:
        folded = text.encode("utf-8").translate(_ASCII_FOLD)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 to work on
        return _words_by_regex(text)
    if not text.isascii():
        others = folded.translate(None, _ASCII)  # the UTF-8 of the non-ASCII characters
        if (len(text) - (len(folded) - len(others))) * _DENSE > len(text):
            return _words_by_regex(text)
        rewrites = [
            char
            for char in set(others.decode("utf-8"))
            if not (char.isalnum() and char.casefold() == char)  # i.e. _fold(char) != char
        ]
        if len(rewrites) > _MAX_REWRITES:
            return _words_by_regex(text)
        for char in rewrites:
            folded = folded.replace(char.encode("utf-8"), _rewrite(char))
    return folded.split()


class Dedup(BaseModel):
    """Thresholds above which two chunks count as the same evidence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    jaccard: float | None = Field(default=0.5, gt=0, le=1)
    """5-word-shingle Jaccard similarity; None turns text dedup off."""
    containment: float | None = Field(default=0.9, gt=0, le=1)
    """Share of a candidate's shingles already inside one kept chunk (a sub-window of it)."""
    cosine: float | None = Field(default=0.90, gt=0, le=1)
    """Embedding cosine similarity, used when both chunks carry embeddings."""
    shingle_size: int = Field(default=5, ge=1)


def shingles(text: str, size: int = 5) -> Shingles:
    """The `size`-word windows of `text`, case-folded, each as the hash of its tuple of words;
    a text of `size` words or fewer is one window.

    A window is kept as its 64-bit hash, not as the tuple: hashing the tuple zip hands over
    (zip reuses it) builds no object per window, and sets of ints intersect twice as fast.
    Python salts the hashes of bytes per process, so two different windows share a hash
    with probability about 2**-64: across the ~10**5 window pairs of a request, never in
    practice, and one shared hash moves a Jaccard similarity by under 1%.
    """
    words = _words(text)
    if len(words) <= size:
        return frozenset({hash(tuple(words))}) if words else frozenset()
    return frozenset(map(hash, zip(*(words[i:] for i in range(size)), strict=False)))


def jaccard(a: Shingles, b: Shingles) -> float:
    """Size of the intersection over size of the union; 0 when either set is empty."""
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is zero or their lengths differ."""
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class Deduplicator:
    """Decides whether a candidate duplicates any kept chunk; caches shingles per chunk id
    and each pair's verdict (allocation packs a claimant more than once)."""

    def __init__(self, settings: Dedup) -> None:
        self._settings = settings
        # Keyed by id and text: an escalated document may share its id with one of its chunks.
        self._shingles: dict[tuple[str, str], Shingles] = {}
        # By identity, holding both chunks so that their ids cannot be reused.
        self._pairs: dict[tuple[int, int], tuple[Chunk, Chunk, bool]] = {}

    def _of(self, chunk: Chunk) -> Shingles:
        key = (chunk.id, chunk.content)
        cached = self._shingles.get(key)
        if cached is None:
            cached = shingles(chunk.content, self._settings.shingle_size)
            self._shingles[key] = cached
        return cached

    def duplicates(self, candidate: Chunk, kept: Sequence[Chunk]) -> Chunk | None:
        """The kept chunk `candidate` duplicates, or None."""
        s = self._settings
        if not kept or (s.jaccard is None and s.containment is None and s.cosine is None):
            return None
        pairs = self._pairs
        for other in kept:
            known = pairs.get((id(candidate), id(other)))
            if known is None or known[0] is not candidate or known[1] is not other:
                known = (candidate, other, self._same(candidate, other))
                pairs[id(candidate), id(other)] = known
            if known[2]:
                return other
        return None

    def _same(self, candidate: Chunk, other: Chunk) -> bool:
        """Whether `candidate` is a near-duplicate of the kept chunk `other`."""
        s = self._settings
        if (
            s.cosine is not None
            and candidate.embedding is not None
            and other.embedding is not None
            and cosine(candidate.embedding, other.embedding) >= s.cosine
        ):
            return True
        if s.jaccard is None and s.containment is None:
            return False
        mine = self._of(candidate)
        if not mine:
            return False
        theirs = self._of(other)
        # Both ratios only grow with the shingles shared, and float division is monotonic:
        # when sharing all of the smaller set would fall short, no intersection is needed.
        if not self._near(min(len(mine), len(theirs)), len(mine), len(theirs)):
            return False
        return self._near(len(mine & theirs), len(mine), len(theirs))

    def _near(self, shared: int, mine: int, theirs: int) -> bool:
        """Whether sets of `mine` and `theirs` shingles sharing `shared` are near-duplicates."""
        s = self._settings
        if s.jaccard is not None and shared / (mine + theirs - shared) >= s.jaccard:
            return True
        return s.containment is not None and shared / mine >= s.containment
