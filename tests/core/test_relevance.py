"""The relevance step (_sources/relevance.py): empty and below-floor chunks go, by id."""

from __future__ import annotations

from ctxbudget import Chunk
from ctxbudget._sources.relevance import relevance, relevant


def test_relevance_prefers_the_rerank_score() -> None:
    assert relevance(Chunk(id="a", content="x", score=0.9, rerank_score=0.1)) == 0.1
    assert relevance(Chunk(id="a", content="x", score=0.9)) == 0.9
    assert relevance(Chunk(id="a", content="x")) is None


def test_relevant_drops_empty_and_below_floor_and_keeps_unscored() -> None:
    chunks = [
        Chunk(id="good", content="x", score=0.5),
        Chunk(id="low", content="x", score=0.1),
        Chunk(id="blank", content="\u200b \u2060"),
        Chunk(id="unscored", content="x"),
    ]
    kept, dropped = relevant(chunks, 0.2)
    assert [c.id for c in kept] == ["good", "unscored"]
    assert [(d.id, d.reason) for d in dropped] == [("low", "below_floor"), ("blank", "empty")]


def test_relevant_without_a_floor_drops_only_empty() -> None:
    chunks = [Chunk(id="low", content="x", score=-3.0), Chunk(id="blank", content=" ")]
    kept, dropped = relevant(chunks, None)
    assert [c.id for c in kept] == ["low"]
    assert [(d.id, d.reason) for d in dropped] == [("blank", "empty")]
