"""What one large assembly holds at its peak (docs/speed.md, "Memory").

The result's own strings (the prompt, its tail, each source's text) are the floor; beside
them an assembly may hold little, and never a second copy of a section the prompt already
holds. Measured as traced Python allocations against the sizes of those strings, so no
figure depends on the machine.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc

import pytest

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    Chunk,
    ContextAssembler,
    get_tokenizer,
)
from ctxbudget._tokens import VERIFY_JOINS
from tests.support.factories import NO_DEDUP, words

BUDGET = Budget(
    total=1_000_000,
    allocations=(
        Allocation("system", priority=0),
        Allocation("question", priority=0),
        Allocation("retrieved", priority=1),
    ),
)


def large(n: int, *, counts: bool) -> list[Chunk]:
    """`n` chunks of ~25 KB of distinct words, with their exact counts when `counts`."""
    tokenizer = get_tokenizer("o200k_base")
    texts = [words(f"d{i}x", 3_000) for i in range(n)]
    return [
        Chunk(
            id=f"c{i}",
            document_id=f"d{i}",
            content=text,
            score=1 - i / n,
            tokens=tokenizer.count(text) if counts else None,
        )
        for i, text in enumerate(texts)
    ]


def peak_of(assembler: ContextAssembler, chunks: list[Chunk]) -> tuple[Assembled, int]:
    """The result of one assembly, and the traced memory it added at its peak."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = assembler.assemble(system="Answer briefly.", question="Why?", chunks=chunks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak - before


@pytest.mark.parametrize("counts", [True, False], ids=["ingest counts", "no counts"])
def test_a_large_prompt_is_held_once_beside_the_result(
    counts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The suite's check of every joined count encodes the whole prompt: not what is measured.
    monkeypatch.delenv(VERIFY_JOINS, raising=False)
    # Near-duplicate detection off (it keeps its own shingles): the rest of the pipeline.
    assembler = ContextAssembler(tokenizer="o200k_base", budget=BUDGET, sources=NO_DEDUP)
    assembler.assemble(question="Warm up?", chunks=large(2, counts=counts))
    chunks = large(40, counts=counts)
    result, peak = peak_of(assembler, chunks)
    assert len(result.sources) == len(chunks)
    prompt = sys.getsizeof(result.text)
    held = prompt + sys.getsizeof(result.tail) + sum(sys.getsizeof(s.text) for s in result.sources)
    # A copy of the retrieved section kept beside the prompt would add all of `prompt`.
    assert peak < held + prompt // 2
