"""Context size: the p95 of prompt tokens, and the pytest helper built on it."""

from __future__ import annotations

import pytest

from ctxbudget import Chunk, ContextAssembler
from ctxbudget.eval import (
    Case,
    assert_context_p95_below,
    context_size_p95,
    context_sizes,
    lexical_retriever,
)

Corpus = tuple[list[Case], list[Chunk]]


@pytest.fixture(scope="module")
def assembler() -> ContextAssembler:
    return ContextAssembler(tokenizer="o200k_base")


def test_sizes_are_the_prompt_totals_of_each_case(
    assembler: ContextAssembler, corpus: Corpus
) -> None:
    cases, _ = corpus
    expected = [
        assembler.assemble(question=c.question, chunks=list(c.gold)).report.total for c in cases
    ]
    assert context_sizes(assembler, cases) == expected


def test_sizes_use_the_retriever_and_system_prompt(
    assembler: ContextAssembler, corpus: Corpus
) -> None:
    cases, pool = corpus
    gold_only = context_sizes(assembler, cases)
    retrieved = context_sizes(assembler, cases, retrieve=lexical_retriever(pool, limit=5))
    with_system = context_sizes(
        assembler, cases, retrieve=lexical_retriever(pool, limit=5), system="Be brief."
    )
    assert all(g < r < s for g, r, s in zip(gold_only, retrieved, with_system, strict=True))


def test_p95_is_the_nearest_rank(assembler: ContextAssembler) -> None:
    # Twenty cases whose questions grow: the p95 (nearest rank) is the 19th smallest.
    cases = [
        Case(question="word " * (i + 1), keywords=["k"], gold=Chunk(id="c", content="x"))
        for i in range(20)
    ]
    sizes = sorted(context_sizes(assembler, cases))
    assert len(set(sizes)) == 20
    assert context_size_p95(assembler, cases) == sizes[18]


def test_helper_passes_and_returns_the_p95(assembler: ContextAssembler, corpus: Corpus) -> None:
    cases, _ = corpus
    p95 = context_size_p95(assembler, cases)
    assert assert_context_p95_below(assembler, cases, p95 + 1) == p95


def test_helper_fails_with_the_numbers(assembler: ContextAssembler, corpus: Corpus) -> None:
    cases, _ = corpus
    p95 = context_size_p95(assembler, cases)
    with pytest.raises(
        AssertionError,
        match=rf"p95 of prompt tokens over 8 cases is {p95:,}, not below {p95:,} \(largest: "
        r"cases\[\d\] \d+, cases\[\d\] \d+, cases\[\d\] \d+\)",
    ):
        assert_context_p95_below(assembler, cases, p95)
