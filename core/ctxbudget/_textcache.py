"""What is computed from a chunk's text alone, remembered across requests by the text.

A chat's next turn retrieves mostly the same chunk texts in new `Chunk` objects; their
5-word windows (`_sources.dedup.shingles`) cost about as much as counting them, so they
are kept in a bounded LRU per assembler (by its token counter, as the counts are), at
most as many texts as it counts (`cache_size`) and at most a weight (the windows held,
plus the text's length in 64-character units, so that a long text with few words also
counts): one chunk's windows take ~25 KB, so the default 262,144 is about 20 MB at most.
The text test's verdict on a pair of cached texts is remembered too, by the entries'
serial numbers, so the next turn compares the same pairs at the cost of a lookup.
A `TextCache` holds what else is a function of text alone, as bounded, and reported the
same way; a `RewriteCache` is one for pure rewrites (the neutralised texts). Counts,
ends and rewrites are keyed by `text_key`.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Generic, TypeVar, cast
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from ctxbudget._tokens import CountCache

__all__ = [
    "SHORT_TEXT",
    "RewriteCache",
    "ShingleCache",
    "TextCache",
    "TextKey",
    "VerdictKey",
    "shingle_cache",
    "text_key",
]

K = TypeVar("K")
V = TypeVar("V")

SHORT_TEXT: Final = 256
"""Texts up to this length are their own key (`text_key`); the token counter also gives
pieces this short their ends and counts from small caches, without a digest."""

TextKey = str | bytes
"""A text's cache key (`text_key`)."""


def text_key(text: str) -> TextKey:
    """The cache key of `text`: a short text itself, a longer one its digest, so that a
    cache never keeps a large document alive. A str never equals a bytes digest."""
    return text if len(text) <= SHORT_TEXT else _digest(text)


def _digest(text: str) -> bytes:
    # surrogatepass: a lone surrogate (which tiktoken counts as U+FFFD) must not raise here.
    # SHA-256 cut to 128 bits: collision-resistant like blake2b's 128 bits (a forged pair of
    # texts sharing a key would share a count), and 3x faster where CPUs have SHA
    # instructions (x86 since 2016, ARMv8), which hashlib's blake2b cannot use.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


_TEXT_UNIT: Final = 64
"""Characters of text that weigh as much as one window held."""

VerdictKey = tuple[int, int, float | None, float | None]
"""A pair's verdict key: the candidate's and the kept text's serials, then the Jaccard and
containment thresholds the verdict was reached under."""


class ShingleCache:
    """A bounded LRU of each text's windows per window size, and of the text verdicts on
    pairs of them; thread-safe.

    Each entry has a serial number, never reused: a verdict keyed by serials stands for
    exactly the two window sets it was reached on, and one whose text was evicted is
    unreachable (it ages out). Two threads meeting the same new text at once may both
    compute it; the result is the same (windows are a function of the text, in one process).
    """

    def __init__(self, *, maxsize: int = 16_384, max_weight: int = 262_144) -> None:
        """`maxsize`: texts held at most, and pair verdicts held at most; `max_weight`:
        the windows (and text units) held at most."""
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, but got {maxsize}")
        if max_weight < 0:
            raise ValueError(f"max_weight must be >= 0, but got {max_weight}")
        self._maxsize = maxsize
        self._max = max_weight
        self._weight = 0
        self._entries: OrderedDict[tuple[str, int], tuple[frozenset[int], int, int]] = OrderedDict()
        self._verdicts: OrderedDict[VerdictKey, bool] = OrderedDict()
        self._serials = itertools.count(1)
        self._lock = threading.Lock()
        self.calls = 0
        """How many texts were actually shingled (misses); for tests and benchmarks."""
        self.verdict_calls = 0
        """How many pair verdicts were looked up and not found; for tests and benchmarks."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def maxsize(self) -> int:
        """Texts held at most (and pair verdicts held at most)."""
        return self._maxsize

    @property
    def max_weight(self) -> int:
        """What the held entries may weigh at most."""
        return self._max

    @property
    def weight(self) -> int:
        """What the held entries weigh: windows plus text length in 64-character units."""
        return self._weight

    @property
    def verdicts(self) -> int:
        """How many pair verdicts are held."""
        return len(self._verdicts)

    def get(
        self, text: str, size: int, compute: Callable[[str, int], frozenset[int]]
    ) -> frozenset[int]:
        """`compute(text, size)`, from the cache when this text was shingled before."""
        return self.lookup(text, size, compute)[0]

    def lookup(
        self, text: str, size: int, compute: Callable[[str, int], frozenset[int]]
    ) -> tuple[frozenset[int], int]:
        """`compute(text, size)` and the entry's serial (0 when it is not held, too heavy
        for the bound: its verdicts are then not remembered)."""
        key = (text, size)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0], hit[2]
        value = compute(text, size)
        weight = len(value) + len(text) // _TEXT_UNIT + 1
        with self._lock:
            self.calls += 1
            held = self._entries.get(key)
            if held is not None:
                return held[0], held[2]
            if weight > self._max or not self._maxsize:
                return value, 0
            serial = next(self._serials)
            self._entries[key] = (value, weight, serial)
            self._weight += weight
            while self._weight > self._max or len(self._entries) > self._maxsize:
                _, (_, dropped, _) = self._entries.popitem(last=False)
                self._weight -= dropped
        return value, serial

    def share(self, text: str, size: int, serial: int, value: frozenset[int]) -> None:
        """Hold `value`, equal to the windows held for `text` under `serial`, in their
        place (it shares its int objects with other held sets)."""
        key = (text, size)
        with self._lock:
            held = self._entries.get(key)
            if held is not None and held[2] == serial:
                self._entries[key] = (value, held[1], serial)

    def verdict(self, key: VerdictKey) -> bool | None:
        """The remembered verdict on `key`'s pair, or None (then `remember` it)."""
        with self._lock:
            hit = self._verdicts.get(key)
            if hit is None:
                self.verdict_calls += 1
                return None
            self._verdicts.move_to_end(key)
            return hit

    def remember(self, key: VerdictKey, near: bool) -> None:
        """Hold `near` as the verdict on `key`'s pair (the oldest verdict goes past `maxsize`)."""
        if not self._maxsize:
            return
        with self._lock:
            self._verdicts[key] = near
            if len(self._verdicts) > self._maxsize:
                self._verdicts.popitem(last=False)

    def clear(self) -> None:
        """Forget every text and verdict (tests start from an empty cache)."""
        with self._lock:
            self._entries.clear()
            self._verdicts.clear()
            self._weight = 0


_MISSING: Final = object()
"""What `TextCache.get` finds for a key it does not hold (a held value may be None)."""


class TextCache(Generic[K, V]):
    """A bounded LRU of values computed from text alone, keyed by the text (or its digest);
    thread-safe. Reported like the count cache: `len()`, `.calls`, `.maxsize`.

    Two threads meeting the same new key at once may both compute it; the result is the
    same (the value is a function of the key).
    """

    def __init__(self, *, maxsize: int) -> None:
        """`maxsize`: entries held at most (the assembler's `cache_size`)."""
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, but got {maxsize}")
        self._maxsize = maxsize
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self.calls = 0
        """How many values were actually computed (misses); for tests and benchmarks."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def maxsize(self) -> int:
        """Entries held at most."""
        return self._maxsize

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The value held for `key`, else `compute()`, held from then on (the least recently
        used entry goes past `maxsize`)."""
        with self._lock:
            held = self._entries.get(key, _MISSING)
            if held is not _MISSING:
                self._entries.move_to_end(key)
                return cast("V", held)
        value = compute()
        with self._lock:
            self.calls += 1
            if self._maxsize:
                self._entries[key] = value
                if len(self._entries) > self._maxsize:
                    self._entries.popitem(last=False)
        return value

    def values(self) -> list[V]:
        """The values held, least recently used first (what the cache keeps alive)."""
        with self._lock:
            return list(self._entries.values())

    def clear(self) -> None:
        """Forget every entry (tests start from an empty cache)."""
        with self._lock:
            self._entries.clear()


class RewriteCache(TextCache[tuple[Callable[[str], str], TextKey], str | None]):
    """The results of pure rewrites of texts (neutralised turns, chunk texts, tools,
    memory), by rewrite and `text_key`; a text a rewrite leaves unchanged is held as None.

    A conversation resends every turn on every request, and neutralising one scans it
    whole; almost every text comes back unchanged and then costs only its key.
    """

    def rewritten(self, text: str, rewrite: Callable[[str], str]) -> str:
        """`rewrite(text)`, from the cache when this rewrite saw this text before."""
        held = self.get((rewrite, text_key(text)), lambda: _changed(text, rewrite(text)))
        return text if held is None else held


def _changed(text: str, out: str) -> str | None:
    """`out`, or None when it equals `text` (the cache then holds no copy of the text)."""
    return None if out == text else out


_CACHES: WeakKeyDictionary[CountCache, ShingleCache] = WeakKeyDictionary()
_LOCK: Final = threading.Lock()


def shingle_cache(counter: CountCache) -> ShingleCache:
    """The shingle cache of an assembler's token `counter`, as many texts at most as it
    counts, made on first use and gone with it."""
    with _LOCK:
        cache = _CACHES.get(counter)
        if cache is None:
            cache = _CACHES[counter] = ShingleCache(maxsize=counter.maxsize)
        return cache
