"""Dedup verdicts are remembered per candidate: a reused Deduplicator decides as a fresh one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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
