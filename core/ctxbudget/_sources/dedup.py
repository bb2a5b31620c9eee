"""Near-duplicate detection: word-shingle Jaccard, and embedding cosine when vectors exist.

Dedup runs lazily inside selection: each candidate is compared only with the
chunks already kept, so a candidate that is never reached costs nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._inputs import Chunk

__all__ = ["Dedup", "Deduplicator", "cosine", "jaccard", "shingles"]

_WORD: Final = re.compile(r"\w+")


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


def shingles(text: str, size: int = 5) -> frozenset[tuple[str, ...]]:
    """The `size`-word windows of `text`, case-folded; a text of `size` words or fewer is one."""
    words = _WORD.findall(text.casefold())
    if len(words) <= size:
        return frozenset({tuple(words)}) if words else frozenset()
    # zip builds and hashes the windows in C; this is the hot loop of dedup.
    return frozenset(zip(*(words[i:] for i in range(size)), strict=False))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
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
        self._shingles: dict[tuple[str, str], frozenset[tuple[str, ...]]] = {}
        # By identity, holding both chunks so that their ids cannot be reused.
        self._pairs: dict[tuple[int, int], tuple[Chunk, Chunk, bool]] = {}

    def _of(self, chunk: Chunk) -> frozenset[tuple[str, ...]]:
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
        inter = len(mine & theirs)
        if not inter:
            return False
        if s.jaccard is not None and inter / (len(mine) + len(theirs) - inter) >= s.jaccard:
            return True
        return s.containment is not None and inter / len(mine) >= s.containment
