"""Dedup verdicts are remembered per pair: the same decisions, each pair compared once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxbudget._sources.dedup
from ctxbudget import Chunk, Dedup
from ctxbudget._sources.dedup import Deduplicator

words = st.lists(st.sampled_from(["refund", "order", "days", "policy", "the", "item"]), max_size=12)


@given(texts=st.lists(words.map(" ".join), min_size=1, max_size=8))
def test_remembered_verdicts_equal_fresh_ones(texts: list[str]) -> None:
    chunks = [Chunk(id=f"c{i}", content=t or "x") for i, t in enumerate(texts)]
    settings = Dedup(jaccard=0.5, containment=0.9)
    reused = Deduplicator(settings)
    for _ in range(2):  # the second pass is answered from memory
        for index, candidate in enumerate(chunks):
            kept = chunks[:index]
            assert reused.duplicates(candidate, kept) is Deduplicator(settings).duplicates(
                candidate, kept
            )


def test_each_pair_is_compared_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    real = Deduplicator._same

    def counted(self: Deduplicator, candidate: Chunk, other: Chunk) -> bool:
        calls.append((candidate.id, other.id))
        return real(self, candidate, other)

    monkeypatch.setattr(ctxbudget._sources.dedup.Deduplicator, "_same", counted)
    a, b, c = (Chunk(id=i, content=f"text number {i}") for i in "abc")
    dedup = Deduplicator(Dedup())
    dedup.duplicates(c, [a, b])
    dedup.duplicates(c, [a, b])
    assert calls == [("c", "a"), ("c", "b")]


def test_embedding_duplicate_is_found_without_shingles() -> None:
    a = Chunk(id="a", content="one text", embedding=(1.0, 0.0))
    b = Chunk(id="b", content="another text", embedding=(1.0, 0.0))
    dedup = Deduplicator(Dedup(jaccard=None, containment=None))
    assert dedup.duplicates(b, [a]) is a
    assert dedup._shingles == {}
