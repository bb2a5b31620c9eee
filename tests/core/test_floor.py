"""The relevance floor (`min_relevance`): the second pipeline step, off by default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ctxbudget import (
    Chunk,
    ContextAssembler,
    Dropped,
    SourceOptions,
    TiktokenTokenizer,
)
from tests.support.factories import budget_for

BUDGET = budget_for("retrieved", 6_000)


def chunk(id: str, *, score: float | None = None, rerank_score: float | None = None) -> Chunk:
    return Chunk(
        id=id,
        content=f"Passage {id} explains one distinct fact about {id}.",
        score=score,
        rerank_score=rerank_score,
    )


def floored(o200k: TiktokenTokenizer, floor: float | None) -> ContextAssembler:
    return ContextAssembler(
        tokenizer=o200k, budget=BUDGET, sources=SourceOptions(min_relevance=floor)
    )


def kept(assembler: ContextAssembler, *chunks: Chunk) -> list[str]:
    result = assembler.assemble(question="Why?", chunks=list(chunks))
    return sorted(s.chunk.id for s in result.sources)


def test_floor_off_by_default_keeps_low_scores(o200k: TiktokenTokenizer) -> None:
    assembler = ContextAssembler(tokenizer=o200k, budget=BUDGET)

    assert kept(assembler, chunk("a", score=0.01), chunk("b", rerank_score=-5.0)) == ["a", "b"]


def test_floor_drops_score_below(o200k: TiktokenTokenizer) -> None:
    assert kept(floored(o200k, 0.5), chunk("low", score=0.2), chunk("high", score=0.8)) == ["high"]


def test_floor_keeps_score_equal_to_floor(o200k: TiktokenTokenizer) -> None:
    assert kept(floored(o200k, 0.5), chunk("edge", score=0.5)) == ["edge"]


def test_floor_uses_rerank_score_over_low_score(o200k: TiktokenTokenizer) -> None:
    reranked_up = chunk("up", score=0.1, rerank_score=0.9)

    assert kept(floored(o200k, 0.5), reranked_up) == ["up"]


def test_floor_uses_rerank_score_over_high_score(o200k: TiktokenTokenizer) -> None:
    reranked_down = chunk("down", score=0.9, rerank_score=0.1)
    other = chunk("other", score=0.6)

    assert kept(floored(o200k, 0.5), reranked_down, other) == ["other"]


def test_floor_keeps_chunk_without_any_score(o200k: TiktokenTokenizer) -> None:
    assert kept(floored(o200k, 0.5), chunk("unscored"), chunk("low", score=0.1)) == ["unscored"]


def test_floor_below_floor_reported_with_reason(o200k: TiktokenTokenizer) -> None:
    result = floored(o200k, 0.5).assemble(
        question="Why?", chunks=[chunk("low", score=0.2), chunk("high", score=0.8)]
    )

    assert result.report.dropped == (
        Dropped(claimant="retrieved", kind="chunk", id="low", reason="below_floor"),
    )


def test_floor_negative_scores_compared_as_numbers(o200k: TiktokenTokenizer) -> None:
    # Rerankers such as cross-encoders return logits; a floor of -1 keeps -0.5 and drops -3.
    assembler = floored(o200k, -1.0)

    assert kept(assembler, chunk("a", rerank_score=-0.5), chunk("b", rerank_score=-3.0)) == ["a"]


def test_floor_below_floor_reported_without_token_count(o200k: TiktokenTokenizer) -> None:
    assembler = floored(o200k, 0.5)
    low = chunk("low", score=0.2)

    result = assembler.assemble(question="Why?", chunks=[low, chunk("high", score=0.8)])

    assert low.content not in result.text
    assert [d.tokens for d in result.report.dropped] == [None]


def test_floor_not_finite_rejected(o200k: TiktokenTokenizer) -> None:
    with pytest.raises(ValidationError, match=r"min_relevance\n\s+Input should be a finite number"):
        floored(o200k, float("nan"))
