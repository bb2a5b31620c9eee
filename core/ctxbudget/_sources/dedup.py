"""Near-duplicate detection: word-shingle Jaccard, and embedding cosine when vectors exist.

Dedup runs lazily inside selection: each candidate is compared only with the
chunks already kept, so a candidate that is never reached costs nothing. The verdict is
the pairwise rule's (the first kept chunk that is near), found without comparing every
pair: past a few dozen kept chunks an inverted index of shingles finds the only kept
chunks that can be near, and numpy, when installed, screens embeddings in one product.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from bisect import bisect_left, insort
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, compress, repeat
from operator import mul
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._inputs import Chunk
from ctxbudget._textcache import ShingleCache

if TYPE_CHECKING:
    from numpy.typing import NDArray

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


@functools.cache
def _numpy() -> Any:
    """numpy when it is installed, else None (embeddings are then compared in pure Python).
    Imported on the first embedding, so requests without embeddings never load it."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


_PAIRWISE: Final = 32
"""Kept chunks compared one by one up to this many: indexing a handful costs more than
intersecting them (the seed request keeps 8)."""
_SAFE_NORM: Final = (2.0**-20, 2.0**20)
"""Norms between these keep every float32 element, product and sum of a vector far from
overflow, and what underflows far below the margin, so the error bound of the numpy
screen holds (embeddings have norms near 1; others are compared in pure Python)."""
_MAX_SCREENED: Final = 2**20
"""Dimensions the float32 screen takes at most (its error bound needs n·2**-24 well
under 1)."""


def _norm(vector: Sequence[float]) -> float:
    """`math.sqrt(sum(x * x for x in vector))`, as `cosine` computes it, bit for bit."""
    return math.sqrt(sum(map(mul, vector, vector)))


def _margin(dimensions: int) -> float:
    """How far from `cosine`'s value the float32 screen's may be for `dimensions`-long vectors.

    Rounding each element to float32 moves each product by at most 2u|xᵢyᵢ| (u = 2**-24),
    and any order of summing n products errs by at most n·u·Σ|xᵢyᵢ| ≤ n·u·|a||b|; over the
    float64 norms that is (n + 2)·u of the cosine, and `cosine`'s own float64 error is far
    smaller: 4x is room to spare. Pairs within the margin are recomputed exactly.
    """
    return (dimensions + 8) * 2.0**-22


class _Vectors:
    """Kept chunks' embeddings by position, for the first one `cosine` puts at the threshold.

    With numpy, the vectors of the common length and a safe norm are float32 rows of one
    matrix (half the memory traffic of float64): one product per candidate screens them
    all, and only rows within `_margin` of the threshold are recomputed with `cosine`'s own
    expressions, so the verdict is the pure Python one on every pair. Other vectors
    ("odd") are compared in pure Python.
    """

    def __init__(self, threshold: float) -> None:
        self._threshold = threshold
        self._vectors: list[tuple[tuple[float, ...], float] | None] = []
        self._odd: list[int] = []  # ascending positions numpy does not hold
        self._dimensions = 0
        self._rows: NDArray[Any] | None = None
        self._norms: NDArray[Any] | None = None
        self._last: tuple[tuple[float, ...], NDArray[Any]] | None = None
        self._np: Any = None

    def append(self, embedding: tuple[float, ...] | None) -> None:
        position = len(self._vectors)
        if embedding is None:
            self._vectors.append(None)
            self._set_row(position, None, 0.0)
            return
        norm = _norm(embedding)
        self._vectors.append((embedding, norm))
        if (
            not self._dimensions
            and _SAFE_NORM[0] < norm < _SAFE_NORM[1]
            and len(embedding) <= _MAX_SCREENED
        ):
            self._np = _numpy()
            if self._np is not None:
                self._dimensions = len(embedding)
        if self._in_matrix(embedding, norm):
            self._set_row(position, embedding, norm)
        else:
            self._odd.append(position)
            self._set_row(position, None, 0.0)

    def truncate(self, length: int) -> None:
        del self._vectors[length:]
        del self._odd[bisect_left(self._odd, length) :]

    def _in_matrix(self, embedding: tuple[float, ...], norm: float) -> bool:
        return (
            self._np is not None
            and len(embedding) == self._dimensions
            and _SAFE_NORM[0] < norm < _SAFE_NORM[1]
        )

    def _set_row(self, position: int, embedding: tuple[float, ...] | None, norm: float) -> None:
        if self._np is None or not self._dimensions:
            return
        rows, norms = self._rows, self._norms
        if rows is None or norms is None or position >= len(rows):
            grown = self._np.zeros((max(64, 2 * position), self._dimensions), self._np.float32)
            grown_norms = self._np.zeros(len(grown))
            if rows is not None and norms is not None:
                grown[: len(rows)] = rows
                grown_norms[: len(norms)] = norms
            self._rows, self._norms = rows, norms = grown, grown_norms
        norms[position] = norm
        if embedding is None:
            rows[position] = 0.0
        else:
            rows[position] = self._array(embedding)

    def _array(self, embedding: tuple[float, ...]) -> NDArray[Any]:
        """The embedding as a float32 array (each element rounded to nearest); the last one
        is remembered, as a candidate that is kept is appended right after it was compared."""
        last = self._last
        if last is not None and last[0] is embedding:
            return last[1]
        array: NDArray[Any] = self._np.asarray(embedding, dtype=self._np.float32)
        self._last = (embedding, array)
        return array

    def first(self, embedding: tuple[float, ...], start: int, stop: int) -> int:
        """The first position in [start, stop) whose vector `cosine` puts at the threshold
        or above with `embedding`; `stop` when none does."""
        norm = _norm(embedding)
        if not self._in_matrix(embedding, norm) or self._rows is None or self._norms is None:
            return self._exact(embedding, norm, range(start, stop), stop)
        # einsum's own loops, not BLAS: a threaded BLAS waking for each candidate's one
        # product costs several times the product on a busy machine.
        dots = self._np.einsum("ij,j->i", self._rows[start:stop], self._array(embedding))
        dots = dots.astype(self._np.float64)
        products = self._norms[start:stop] * norm
        with self._np.errstate(divide="ignore", invalid="ignore"):
            near = (products != 0) & (dots / products >= self._threshold - _margin(len(embedding)))
        screened = (self._np.flatnonzero(near) + start).tolist()
        odd = self._odd[bisect_left(self._odd, start) : bisect_left(self._odd, stop)]
        return self._exact(embedding, norm, sorted(screened + odd), stop)

    def _exact(
        self, embedding: tuple[float, ...], norm: float, positions: Sequence[int], stop: int
    ) -> int:
        """The first of `positions` at the threshold by `cosine`'s expressions, norms cached."""
        for position in positions:
            known = self._vectors[position]
            if known is None or len(known[0]) != len(embedding):
                continue
            both = norm * known[1]
            if both and sum(map(mul, embedding, known[0])) / both >= self._threshold:
                return position
        return stop


class _Texts:
    """Kept chunks' shingles by position, with an inverted index once there are many.

    The index maps each shingle to the ascending positions holding it — the position
    itself when it is the only one (most windows of real text are one chunk's own: no
    list each) — and keeps the sizes sorted: a candidate probes only as many of its
    shingles as any near kept chunk must meet, and verifies each kept chunk hit with the
    exact intersection. Indexed sets share one int object per window (`_sharing`): in
    text that repeats its windows across chunks, that halves what the sets weigh.
    """

    def __init__(
        self, near: Callable[[int, int, int], bool], settings: Dedup, cache: ShingleCache
    ) -> None:
        self._near = near
        self._settings = settings
        self._cache = cache
        self._sets: list[Shingles] = []
        self._serials: list[int] = []  # each set's entry in the cache (0: not held)
        self._sizes_at: list[int] = []  # len(self._sets[p]), read once per hit
        self._index: dict[int, int | list[int]] | None = None  # values never 0 nor empty
        self._sizes: list[int] = []  # sorted, of the indexed sets
        self._shared: dict[int, int] = {}  # each window of 2+ sets: the one int object for it
        # The last probe: its shingles, what the index held for each, and the equal set
        # sharing int objects, reused when that candidate is inserted next.
        self._probed: tuple[Shingles, list[int | list[int] | None], Shingles] | None = None

    def append(self, kept: Shingles, serial: int) -> Shingles:
        """Hold `kept` at the next position; returns the set held, which may be an equal
        one sharing the int objects of windows other kept sets hold (`_sharing`)."""
        probed = self._probed
        self._sets.append(kept)
        self._serials.append(serial)
        self._sizes_at.append(len(kept))
        if self._index is None and len(self._sets) > _PAIRWISE:
            self._index = {}
            for position, each in enumerate(self._sets):
                held = self._insert(position, each)
        elif self._index is not None:
            held = self._insert(len(self._sets) - 1, kept)
        else:
            return kept
        if probed is not None and probed[0] is kept:
            self._sets[-1] = probed[2]
        else:
            self._sets[-1] = self._sharing(kept, held)
        return self._sets[-1]

    def _insert(self, position: int, kept: Shingles) -> list[int | list[int] | None]:
        """Index `kept` at `position`; returns what the index held for each of its windows
        before (from the last probe when that was of `kept`)."""
        index = self._index
        assert index is not None
        probed, self._probed = self._probed, None
        held = probed[1] if probed is not None and probed[0] is kept else list(map(index.get, kept))
        kinds = list(map(type, held))
        # Windows held by one position so far become lists, one Python step each; then
        # every present window's value is a list, appended to in C (pool prose: nearly all).
        present: Iterator[int | list[int]] = filter(None, held)
        if kinds.count(int):
            singles = compress(zip(kept, held, strict=True), map(_is_int, kinds))
            for shingle, single in cast("Iterator[tuple[int, int]]", singles):
                index[shingle] = [single]
            present = map(index.__getitem__, compress(kept, held))
        deque(map(list.append, cast("Iterator[list[int]]", present), repeat(position)), maxlen=0)
        # Position 0 goes in lists, so that every value is truthy: `filter(None)` then
        # finds the present windows at C speed, and `not` the new ones.
        new = compress(kept, map(operator.not_, held))
        index.update(zip(new, repeat(position)) if position else ((s, [0]) for s in new))
        insort(self._sizes, len(kept))
        return held

    def _sharing(self, windows: Shingles, held: list[int | list[int] | None]) -> Shingles:
        """`windows`, or an equal set holding the int objects other kept sets hold for the
        windows the index `held` (32 bytes saved a window), when there are enough of them."""
        if (len(held) - held.count(None)) * _SHARED_ENOUGH < len(held):
            return windows
        known = list(compress(windows, held))
        fresh = compress(windows, map(operator.not_, held))
        return frozenset(chain(map(self._shared.setdefault, known, known), fresh))

    def truncate(self, length: int) -> None:
        self._probed = None
        index = self._index
        if index is not None:
            # Positions were appended in ascending order: each is the tail of its postings.
            for position in range(len(self._sets) - 1, length - 1, -1):
                kept = self._sets[position]
                for shingle in kept:
                    postings = index[shingle]
                    if isinstance(postings, int):
                        del index[shingle]
                        continue
                    postings.pop()
                    if not postings:
                        del index[shingle]
                        self._shared.pop(shingle, None)
                del self._sizes[bisect_left(self._sizes, len(kept))]
        del self._sets[length:]
        del self._serials[length:]
        del self._sizes_at[length:]

    def first(self, mine: Shingles, serial: int, start: int, stop: int) -> int:
        """The first position in [start, stop) whose shingles `mine` (cache entry `serial`)
        is near; `stop` if none."""
        if start >= stop:
            return stop
        if self._index is None:
            return self._pairwise(mine, serial, range(start, stop), stop)
        original, size = mine, len(mine)
        least = self._least_overlap(size)
        if least > size:
            return stop
        probes = size - least + 1  # any this many of mine meet every kept chunk near it
        held = list(map(self._index.get, mine))
        present = cast("list[int | list[int]]", list(filter(None, held)))
        absent = size - len(present)
        # Verified against kept sets holding the same int objects, equal windows compare
        # by identity.
        mine = self._sharing(mine, held)
        self._probed = (original, held, mine)
        if absent >= probes:
            return stop
        # The shortest probes meet the fewest kept chunks: single positions first.
        kinds = list(map(type, present))
        counted = kinds.count(int)
        if counted in (0, len(present)):  # one kind only (pool prose: all lists)
            singles = cast("list[int]", present if counted else [])
            lists = cast("list[list[int]]", [] if counted else present)
        else:
            singles = cast("list[int]", list(compress(present, map(_is_int, kinds))))
            lists = cast("list[list[int]]", list(compress(present, map(_is_list, kinds))))
        lists.sort(key=len)
        probed = probes - absent
        unprobed = len(present) - probed  # a hit's overlap is at most its count plus these
        hits = Counter(singles[:probed])
        taken = max(probed - len(singles), 0)
        hits.update(chain.from_iterable(lists[:taken]))
        survivors = self._bounded(size, unprobed, hits, start, stop)
        if not survivors:
            return stop
        rest_singles, rest = singles[probed:], lists[taken:]
        if len(rest_singles) + sum(map(len, rest)) > len(survivors) * size:
            return self._verified(mine, survivors, stop)
        # Walking the other postings costs less than intersecting: it makes every count
        # the exact overlap.
        hits.update(rest_singles)
        hits.update(chain.from_iterable(rest))
        near, sizes = self._near, self._sizes_at
        return next((p for p in survivors if near(hits[p], size, sizes[p])), stop)

    def _bounded(
        self, size: int, unprobed: int, hits: Counter[int], start: int, stop: int
    ) -> list[int]:
        """The hit positions in [start, stop), ascending, whose overlap bound (the hits
        plus `unprobed`) could be near.

        A loose test in floats first, one comparison per hit: a Jaccard of J needs an
        overlap of J/(1+J)·(a+b) in real numbers, and the float ratio can pass the
        threshold only within a relative 2**-52 of that, far inside the 1 allowed here.
        The survivors are tested with the verdict's own predicate.
        """
        s, sizes, near = self._settings, self._sizes_at, self._near
        contained = size + 1 if s.containment is None else self._contained(size) - unprobed
        loose: list[int]
        if s.jaccard is None:
            loose = [p for p, count in hits.items() if count >= contained]
        else:
            factor = s.jaccard / (1 + s.jaccard)
            base = factor * size - 1 - unprobed
            loose = [
                p
                for p, count in hits.items()
                if count >= contained or count >= base + factor * sizes[p]
            ]
        return sorted(
            p
            for p in loose
            if start <= p < stop and near(min(hits[p] + unprobed, size, sizes[p]), size, sizes[p])
        )

    def _contained(self, size: int) -> int:
        """The least overlap whose share of `size` reaches the containment threshold."""
        threshold = self._settings.containment
        assert threshold is not None
        return _least(lambda o: o / size >= threshold, size)

    def _verified(self, mine: Shingles, positions: Sequence[int], stop: int) -> int:
        """The first of `positions` near `mine` by the exact intersection; `stop` if none."""
        near, sets, size = self._near, self._sets, len(mine)
        for position in positions:
            theirs = sets[position]
            if near(len(mine & theirs), size, len(theirs)):
                return position
        return stop

    def _pairwise(self, mine: Shingles, serial: int, positions: Sequence[int], stop: int) -> int:
        """The first of `positions` near `mine`, each tested as the pairwise walk does:
        by sizes first, then by the intersection, whose verdict the cache remembers for
        the next request over the same texts (a chat's next turn compares the same pairs)."""
        near, sets, serials, size = self._near, self._sets, self._serials, len(mine)
        cache, s = self._cache, self._settings
        for position in positions:
            theirs = sets[position]
            if not near(min(size, len(theirs)), size, len(theirs)):
                continue
            if not (serial and serials[position]):
                if near(len(mine & theirs), size, len(theirs)):
                    return position
                continue
            key = (serial, serials[position], s.jaccard, s.containment)
            verdict = cache.verdict(key)
            if verdict is None:
                verdict = near(len(mine & theirs), size, len(theirs))
                cache.remember(key, verdict)
            if verdict:
                return position
        return stop

    def _least_overlap(self, size: int) -> int:
        """A lower bound on the shingles a candidate of `size` shares with any indexed
        chunk it is near; `size + 1` when no indexed size allows a near pair.

        Exact in floats: every need is found by bisection on the same predicate the
        verdict uses (each ratio only grows with the overlap). Jaccard's need only grows
        with the kept size where a near pair is possible at all, so the smallest indexed
        size there gives its least; containment needs the kept side to hold that many.
        """
        s, sizes = self._settings, self._sizes
        least = size + 1
        if s.containment is not None:
            need = self._contained(size)
            if need <= size and sizes and sizes[-1] >= need:
                least = need
        if s.jaccard is not None:
            # The smallest kept size b with a possible Jaccard: fl(b/size) >= threshold.
            smallest = _least(lambda b: b / size >= s.jaccard, size)  # type: ignore[operator]
            at = bisect_left(sizes, smallest)
            if at < len(sizes):
                theirs = sizes[at]
                top = min(size, theirs)
                need = _least(lambda o: o / (size + theirs - o) >= s.jaccard, top)  # type: ignore[operator]
                least = min(least, need)
        return least


_SHARED_ENOUGH: Final = 4
"""A kept set of which one window in this many or more other kept sets hold is rebuilt
around their int objects (32 bytes each saved per window; a set costs ~70 ns a window)."""

_is_int: Final = functools.partial(operator.is_, int)
_is_list: Final = functools.partial(operator.is_, list)
"""Tests `map` and `compress` run in C: on a value, or on its `type`."""


def _near(s: Dedup, shared: int, mine: int, theirs: int) -> bool:
    """Whether sets of `mine` and `theirs` shingles sharing `shared` are near-duplicates."""
    if s.jaccard is not None and shared / (mine + theirs - shared) >= s.jaccard:
        return True
    return s.containment is not None and shared / mine >= s.containment


def _least(holds: Callable[[int], bool], top: int) -> int:
    """The least o in 1..top with `holds(o)`, for `holds` monotone; top + 1 when none."""
    low, high = 1, top + 1
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low


class Deduplicator:
    """Decides whether a candidate duplicates any kept chunk: the first kept chunk, in
    order, whose embedding cosine or shingle Jaccard or containment reaches its threshold.

    Built for one request's walks. It mirrors the kept sequence it was last given (the
    packer extends it, a repack passes a prefix, escalation a new one: what differs is
    truncated and rebuilt), and remembers per candidate the first duplicate among the
    first L kept, so a repack costs a lookup. Memory is linear in what is kept.
    """

    def __init__(self, settings: Dedup, cache: ShingleCache | None = None) -> None:
        """`cache`: shingles remembered across requests by text (`_textcache.shingle_cache`);
        by default, this Deduplicator's own."""
        self._settings = settings
        self._cache = ShingleCache() if cache is None else cache
        self._text = settings.jaccard is not None or settings.containment is not None
        self._shingles: dict[str, tuple[Shingles, int]] = {}  # and the cache entry's serial
        self._order: list[Chunk] = []
        # A function of the settings, not a bound method: the index holds no cycle back to
        # this Deduplicator, which is freed as soon as its claim lets it go.
        self._near = functools.partial(_near, settings)
        self._texts = _Texts(self._near, settings, self._cache)
        self._vectors = None if settings.cosine is None else _Vectors(settings.cosine)
        # By identity, holding the candidate so that its id cannot be reused: (candidate,
        # epoch, L, the first duplicate's position among the first L kept, L when none).
        self._memo: dict[int, tuple[Chunk, int, int, int]] = {}
        self._epoch = 0

    def _of(self, chunk: Chunk) -> tuple[Shingles, int]:
        """The chunk's shingles and their serial in the cache (0 when not held)."""
        text = chunk.content
        cached = self._shingles.get(text)
        if cached is None:
            cached = self._cache.lookup(text, self._settings.shingle_size, shingles)
            self._shingles[text] = cached
        return cached

    def duplicates(self, candidate: Chunk, kept: Sequence[Chunk]) -> Chunk | None:
        """The kept chunk `candidate` duplicates, or None."""
        if not kept or (not self._text and self._vectors is None):
            return None
        self._sync(kept)
        stop = len(kept)
        known = self._memo.get(id(candidate))
        if known is not None and known[0] is candidate and known[1] == self._epoch:
            _, _, looked, found = known
            if found < looked or stop <= looked:
                return kept[found] if found < stop else None
            start = looked
        else:
            start = 0
        found = self._first(candidate, start, stop)
        self._memo[id(candidate)] = (candidate, self._epoch, stop, found)
        return kept[found] if found < stop else None

    def _sync(self, kept: Sequence[Chunk]) -> None:
        """Mirror `kept`: extend by what it adds, or truncate at its first difference.

        Equal chunks stand for each other (same text and embedding, so same verdicts);
        the chunk returned is always the caller's.
        """
        order = self._order
        common = min(len(order), len(kept))
        head = kept[:common]
        # Compared in C, by identity first: a list only equals a list.
        if order[:common] != (head if isinstance(head, list) else list(head)):
            self._truncate(next(i for i in range(common) if order[i] != kept[i]))
        if len(kept) > len(order):
            for chunk in kept[len(order) :]:
                order.append(chunk)
                if self._text:
                    self._hold(chunk)
                if self._vectors is not None:
                    self._vectors.append(chunk.embedding)

    def _hold(self, chunk: Chunk) -> None:
        """Append the chunk's shingles to the kept sets, remembering the set held (equal, and
        sharing int objects with the others) in place of the one shingled."""
        mine, serial = self._of(chunk)
        held = self._texts.append(mine, serial)
        if held is not mine:
            self._shingles[chunk.content] = (held, serial)
            self._cache.share(chunk.content, self._settings.shingle_size, serial, held)

    def _truncate(self, length: int) -> None:
        del self._order[length:]
        self._texts.truncate(length)
        if self._vectors is not None:
            self._vectors.truncate(length)
        self._epoch += 1  # what was found among the first L kept no longer stands

    def _first(self, candidate: Chunk, start: int, stop: int) -> int:
        """The first position in [start, stop) of a kept chunk `candidate` duplicates."""
        if self._vectors is not None and candidate.embedding is not None:
            stop_text = self._vectors.first(candidate.embedding, start, stop)
        else:
            stop_text = stop
        if not self._text or start >= stop_text:
            return stop_text
        mine, serial = self._of(candidate)
        if not mine:
            return stop_text
        return self._texts.first(mine, serial, start, stop_text)
