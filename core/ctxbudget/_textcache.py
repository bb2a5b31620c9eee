"""What is computed from a chunk's text alone, remembered across requests by the text.

A chat's next turn retrieves mostly the same chunk texts in new `Chunk` objects; their
5-word windows (`_sources.dedup.shingles`) cost about as much as counting them, so they
are kept in a bounded LRU per assembler (by its token counter, as the counts are). It is
bounded by weight (the windows held, plus the text's length in 64-character units, so
that a long text with few words also counts), not by entries: one chunk's windows take
~25 KB, so the default 262,144 is about 20 MB at most.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final
from weakref import WeakKeyDictionary

__all__ = ["ShingleCache", "shingle_cache"]

_TEXT_UNIT: Final = 64
"""Characters of text that weigh as much as one window held."""


class ShingleCache:
    """A bounded LRU of each text's windows per window size; thread-safe.

    Two threads meeting the same new text at once may both compute it; the result is
    the same (windows are a function of the text, in one process).
    """

    def __init__(self, *, max_weight: int = 262_144) -> None:
        if max_weight < 0:
            raise ValueError(f"max_weight must be >= 0, but got {max_weight}")
        self._max = max_weight
        self._weight = 0
        self._entries: OrderedDict[tuple[str, int], tuple[frozenset[int], int]] = OrderedDict()
        self._lock = threading.Lock()
        self.calls = 0
        """How many texts were actually shingled (misses); for tests and benchmarks."""

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def weight(self) -> int:
        """What the held entries weigh: windows plus text length in 64-character units."""
        return self._weight

    def get(
        self, text: str, size: int, compute: Callable[[str, int], frozenset[int]]
    ) -> frozenset[int]:
        """`compute(text, size)`, from the cache when this text was shingled before."""
        key = (text, size)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit[0]
        value = compute(text, size)
        weight = len(value) + len(text) // _TEXT_UNIT + 1
        with self._lock:
            self.calls += 1
            if weight > self._max or key in self._entries:
                return value
            self._entries[key] = (value, weight)
            self._weight += weight
            while self._weight > self._max:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._weight -= dropped
        return value

    def clear(self) -> None:
        """Forget every text (tests start from an empty cache)."""
        with self._lock:
            self._entries.clear()
            self._weight = 0


_CACHES: WeakKeyDictionary[object, ShingleCache] = WeakKeyDictionary()
_LOCK: Final = threading.Lock()


def shingle_cache(owner: object) -> ShingleCache:
    """The shingle cache of `owner` (an assembler's token counter), made on first use and
    gone with it."""
    with _LOCK:
        cache = _CACHES.get(owner)
        if cache is None:
            cache = _CACHES[owner] = ShingleCache()
        return cache
