"""The lexical retriever: BM25 order, a limit, copies that keep that order in the assembler."""

from __future__ import annotations

from ctxbudget import Chunk
from ctxbudget.eval import lexical_retriever
from ctxbudget.eval._retrieve import nearest, words

POOL = [
    Chunk(id="shipping", content="Shipping is free on orders over 50 euros."),
    Chunk(id="refunds", content="Refunds take 14 days after the return arrives.", rerank_score=0.1),
    Chunk(id="returns", content="Returns are accepted for 30 days.", title="Refunds and returns"),
    Chunk(id="other", content="The office is closed on Sundays.", rerank_score=0.9),
]


def test_words_are_case_folded_runs_of_word_characters() -> None:
    assert words("Refunds: 14-day window, ÉTÉ") == ["refunds", "14", "day", "window", "été"]


def test_retriever_ranks_by_shared_rare_words() -> None:
    found = lexical_retriever(POOL)("How many days do refunds take?")
    assert [c.id for c in found] == ["refunds", "returns"]


def test_retriever_reads_titles_and_headings() -> None:
    assert [c.id for c in lexical_retriever(POOL)("returns")] == ["returns"]


def test_retriever_returns_scored_copies() -> None:
    found = lexical_retriever(POOL)("refunds days")
    scores = [c.score or 0.0 for c in found]
    assert scores == sorted(scores, reverse=True)
    assert all(c.score is not None for c in found)
    assert found[0].rerank_score is None
    assert POOL[1].score is None  # the pool is not changed


def test_retriever_stops_at_the_limit_and_at_no_shared_word() -> None:
    retrieve = lexical_retriever(POOL, limit=1)
    assert [c.id for c in retrieve("refunds days")] == ["refunds"]
    assert lexical_retriever(POOL)("nothing matches") == []


def test_retriever_over_an_empty_pool_finds_nothing() -> None:
    assert lexical_retriever([])("refunds") == []


def test_nearest_orders_by_word_overlap_keeping_ties_in_order() -> None:
    target = [Chunk(id="t", content="free shipping over 50 euros")]
    order = [c.id for c in nearest(target, POOL)]
    assert order[0] == "shipping"
    assert order[1:] == ["refunds", "returns", "other"]  # no shared word: as given
