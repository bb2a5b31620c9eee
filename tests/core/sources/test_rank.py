"""Ranking by stable sorts on one score at a time gives the order of the full key, by
position as well as by chunk; the ranked ids follow the same positions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Chunk
from ctxbudget._sources.rank import Positions, RankedIds, rank, ranking

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


known_scores = st.sampled_from([0.0, -0.0, 0.5, 1.0, -1.0, 0.25])


@given(scores=st.lists(known_scores, max_size=30))
def test_rank_of_scored_chunks_without_rerank_equals_the_full_key_order(
    scores: list[float],
) -> None:
    chunks = [Chunk(id=f"c{i}", content="text", score=s) for i, s in enumerate(scores)]
    assert [c.id for c in rank(chunks)] == [c.id for c in by_full_key(chunks)]


@given(scores=st.lists(st.tuples(score, score), max_size=30))
def test_ranking_gives_the_positions_of_rank(
    scores: list[tuple[float | None, float | None]],
) -> None:
    chunks = [
        Chunk(id=f"c{i}", content="text", score=s, rerank_score=r)
        for i, (s, r) in enumerate(scores)
    ]
    assert [chunks[p] for p in ranking(chunks)] == rank(chunks)


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([], []),
        ([None], [0]),
        ([0.5], [0]),
        ([None, None], [0, 1]),
        ([0.5, 0.5], [0, 1]),
        ([None, 0.1], [1, 0]),
        ([0.1, None, 0.9, None], [2, 0, 1, 3]),
        ([0.2, 0.9, 0.2, 0.9], [1, 3, 0, 2]),
    ],
)
def test_ranking_orders_by_score_ties_and_unscored_by_position(
    scores: list[float | None], expected: list[int]
) -> None:
    chunks = [Chunk(id=f"c{i}", content="text", score=s) for i, s in enumerate(scores)]
    assert ranking(chunks) == expected


def test_ranked_ids_name_the_ranked_chunks_by_position() -> None:
    ids = RankedIds(["a", "b", "c", "d"], [2, 0, 3, 1])
    assert list(ids) == ["c", "a", "d", "b"]
    assert len(ids) == 4
    assert ids[1] == "a"
    tail = ids[2:]
    assert isinstance(tail, RankedIds)
    assert list(tail) == ["d", "b"]


def test_positions_index_only_as_far_as_looked_up() -> None:
    ranked = [Chunk(id=f"c{i}", content="text") for i in range(1_000)]
    positions = Positions(ranked)
    assert positions["c2"] == 2
    assert positions["c0"] == 0
    assert len(positions._index) == 3
    assert len(positions) == 1_000
    assert list(positions)[:2] == ["c0", "c1"]


def test_positions_of_an_unknown_id_raise_key_error() -> None:
    positions = Positions([Chunk(id="a", content="text")])
    with pytest.raises(KeyError, match="nope"):
        positions["nope"]
