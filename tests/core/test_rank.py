"""Ranking by stable sorts on one score at a time gives the order of the full key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Chunk
from ctxbudget._sources.claim import _Positions, rank

score = st.none() | st.sampled_from([0.0, -0.0, 0.5, 1.0, -1.0, 0.25])


def by_full_key(chunks: list[Chunk]) -> list[Chunk]:
    """The ranking rule as one tuple key per chunk: rerank, then score, then position."""
    order = {id(c): i for i, c in enumerate(chunks)}
    return sorted(
        chunks,
        key=lambda c: (
            c.rerank_score is None,
            -(c.rerank_score or 0.0),
            c.score is None,
            -(c.score or 0.0),
            order[id(c)],
        ),
    )


@given(scores=st.lists(st.tuples(score, score), max_size=30))
def test_rank_equals_the_full_key_order(scores: list[tuple[float | None, float | None]]) -> None:
    chunks = [
        Chunk(id=f"c{i}", content="text", score=s, rerank_score=r)
        for i, (s, r) in enumerate(scores)
    ]
    assert [c.id for c in rank(chunks)] == [c.id for c in by_full_key(chunks)]


def test_positions_index_only_as_far_as_looked_up() -> None:
    ranked = [Chunk(id=f"c{i}", content="text") for i in range(1_000)]
    positions = _Positions(ranked)
    assert positions["c2"] == 2
    assert positions["c0"] == 0
    assert len(positions._index) == 3
    assert len(positions) == 1_000
    assert list(positions)[:2] == ["c0", "c1"]


def test_positions_of_an_unknown_id_raise_key_error() -> None:
    positions = _Positions([Chunk(id="a", content="text")])
    with pytest.raises(KeyError, match="nope"):
        positions["nope"]
