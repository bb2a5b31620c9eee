"""Arrangement (_sources/arrange.py): where kept sources stand.

Rank decides what is kept; this only moves it.

`sandwich` is checked against the two reference implementations it claims to match,
written out here: LangChain's `LongContextReorder` and Haystack's `LostInTheMiddleRanker`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import TypeVar, get_args

import pytest

from ctxbudget import Budget, Chunk, ContextAssembler, SourceOptions, TiktokenTokenizer
from ctxbudget._sources.arrange import Order, arrange, sandwich
from tests.support.factories import budget_for

T = TypeVar("T")


def langchain_litm(documents: list[T]) -> list[T]:
    """langchain_community.document_transformers.long_context_reorder._litm_reordering."""
    documents = list(documents)
    documents.reverse()
    reordered: list[T] = []
    for i, value in enumerate(documents):
        if i % 2 == 1:
            reordered.append(value)
        else:
            reordered.insert(0, value)
    return reordered


def haystack_litm(documents: list[T]) -> list[T]:
    """haystack.components.rankers.LostInTheMiddleRanker.run, on documents sorted best first."""
    if not documents:
        return []
    indices = [0]
    for index in range(1, len(documents)):
        insertion = len(indices) // 2 + len(indices) % 2
        indices.insert(insertion, index)
    return [documents[i] for i in indices]


# --- sandwich -----------------------------------------------------------------------------

EXPECTED_SANDWICH = {
    0: [],
    1: [0],
    2: [0, 1],
    3: [0, 2, 1],
    4: [0, 2, 3, 1],
    5: [0, 2, 4, 3, 1],
    6: [0, 2, 4, 5, 3, 1],
    7: [0, 2, 4, 6, 5, 3, 1],
}


@pytest.mark.parametrize(("n", "expected"), EXPECTED_SANDWICH.items())
def test_sandwich_exact_order(n: int, expected: list[int]) -> None:
    assert sandwich(list(range(n))) == expected


@pytest.mark.parametrize("n", range(8))
def test_sandwich_matches_haystack_every_length(n: int) -> None:
    assert sandwich(list(range(n))) == haystack_litm(list(range(n)))


@pytest.mark.parametrize("n", [1, 3, 5, 7])
def test_sandwich_matches_langchain_odd_length(n: int) -> None:
    assert sandwich(list(range(n))) == langchain_litm(list(range(n)))


@pytest.mark.parametrize("n", [2, 4, 6])
def test_sandwich_even_length_best_first_where_langchain_puts_it_last(n: int) -> None:
    ours = sandwich(list(range(n)))
    theirs = langchain_litm(list(range(n)))

    assert ours[0] == 0
    assert theirs[-1] == 0
    assert theirs == ours[::-1]


def test_sandwich_empty_matches_langchain() -> None:
    assert sandwich([]) == langchain_litm([]) == []


@pytest.mark.parametrize("n", range(1, 8))
def test_sandwich_second_best_last(n: int) -> None:
    assert sandwich(list(range(n)))[-1] == (1 if n > 1 else 0)


def test_sandwich_does_not_mutate_input() -> None:
    ranked = [3, 1, 2]

    sandwich(ranked)

    assert ranked == [3, 1, 2]


# --- arrange ------------------------------------------------------------------------------


def chunk(
    id: str,
    document_id: str | None = None,
    *,
    ordinal: int | None = None,
    effective_date: date | None = None,
    updated_at: datetime | None = None,
) -> Chunk:
    return Chunk(
        id=id,
        document_id=document_id or id,
        content=f"text of {id}",
        ordinal=ordinal,
        effective_date=effective_date,
        updated_at=updated_at,
    )


def ids(chunks: list[Chunk]) -> list[str]:
    return [c.id for c in chunks]


def test_arrange_relevance_keeps_rank_order() -> None:
    ranked = [chunk("b", "B", ordinal=3), chunk("a", "A"), chunk("b0", "B", ordinal=0)]

    assert ids(arrange(ranked, "relevance")) == ["b", "a", "b0"]


def test_arrange_sandwich_uses_sandwich() -> None:
    ranked = [chunk(f"c{i}") for i in range(6)]

    assert arrange(ranked, "sandwich") == sandwich(ranked)


def test_arrange_by_document_groups_in_order_of_best_chunk() -> None:
    ranked = [
        chunk("b1", "B", ordinal=1),
        chunk("a2", "A", ordinal=2),
        chunk("c0", "C", ordinal=0),
        chunk("a0", "A", ordinal=0),
        chunk("b0", "B", ordinal=0),
    ]

    assert ids(arrange(ranked, "by_document")) == ["b0", "b1", "a0", "a2", "c0"]


def test_arrange_by_document_ordinal_not_rank_within_group() -> None:
    ranked = [chunk("x9", "X", ordinal=9), chunk("x2", "X", ordinal=2), chunk("x5", "X", ordinal=5)]

    assert ids(arrange(ranked, "by_document")) == ["x2", "x5", "x9"]


def test_arrange_by_document_none_ordinals_after_by_rank() -> None:
    ranked = [
        chunk("n1", "A"),
        chunk("a3", "A", ordinal=3),
        chunk("n2", "A"),
        chunk("a1", "A", ordinal=1),
    ]

    assert ids(arrange(ranked, "by_document")) == ["a1", "a3", "n1", "n2"]


def test_arrange_by_document_equal_ordinals_by_rank() -> None:
    ranked = [chunk("second", "A", ordinal=0), chunk("first", "A", ordinal=0)]

    assert ids(arrange(ranked, "by_document")) == ["second", "first"]


def test_arrange_by_document_single_chunk_documents_keep_rank_order() -> None:
    ranked = [chunk("c"), chunk("a"), chunk("b")]

    assert ids(arrange(ranked, "by_document")) == ["c", "a", "b"]


def test_arrange_chronological_oldest_first() -> None:
    ranked = [
        chunk("new", effective_date=date(2024, 5, 1)),
        chunk("old", effective_date=date(2019, 1, 1)),
        chunk("mid", effective_date=date(2022, 3, 1)),
    ]

    assert ids(arrange(ranked, "chronological")) == ["old", "mid", "new"]


def test_arrange_chronological_effective_date_over_updated_at() -> None:
    ranked = [
        chunk("a", effective_date=date(2023, 1, 1), updated_at=datetime(2020, 1, 1)),
        chunk("b", effective_date=date(2021, 1, 1), updated_at=datetime(2025, 1, 1)),
    ]

    assert ids(arrange(ranked, "chronological")) == ["b", "a"]


def test_arrange_chronological_falls_back_to_updated_at() -> None:
    ranked = [
        chunk("dated", effective_date=date(2022, 6, 1)),
        chunk("updated", updated_at=datetime(2021, 6, 1, 12, 0)),
    ]

    assert ids(arrange(ranked, "chronological")) == ["updated", "dated"]


def test_arrange_chronological_mixed_aware_and_naive_compared_in_utc() -> None:
    # 2024-01-01 00:00 at UTC+5 is 2023-12-31 19:00 UTC, before the naive (UTC) 20:00.
    plus5 = timezone(timedelta(hours=5))
    ranked = [
        chunk("naive", updated_at=datetime(2023, 12, 31, 20, 0)),
        chunk("aware", updated_at=datetime(2024, 1, 1, 0, 0, tzinfo=plus5)),
        chunk("utc", updated_at=datetime(2023, 12, 31, 21, 0, tzinfo=UTC)),
    ]

    assert ids(arrange(ranked, "chronological")) == ["aware", "naive", "utc"]


def test_arrange_chronological_mixed_dates_and_datetimes() -> None:
    ranked = [
        chunk("aware", updated_at=datetime(2024, 3, 1, 9, 0, tzinfo=UTC)),
        chunk("day", effective_date=date(2024, 2, 1)),
        chunk("naive", updated_at=datetime(2024, 1, 1, 9, 0)),
    ]

    assert ids(arrange(ranked, "chronological")) == ["naive", "day", "aware"]


def test_arrange_chronological_undated_last_by_rank() -> None:
    ranked = [
        chunk("u1"),
        chunk("dated", effective_date=date(2020, 1, 1)),
        chunk("u2"),
    ]

    assert ids(arrange(ranked, "chronological")) == ["dated", "u1", "u2"]


def test_arrange_chronological_same_date_by_rank() -> None:
    day = date(2021, 1, 1)
    ranked = [chunk("first", effective_date=day), chunk("second", effective_date=day)]

    assert ids(arrange(ranked, "chronological")) == ["first", "second"]


@pytest.mark.parametrize("order", get_args(Order))
def test_arrange_empty(order: Order) -> None:
    assert arrange([], order) == []


@pytest.mark.parametrize("order", get_args(Order))
def test_arrange_is_a_permutation(order: Order) -> None:
    ranked = [
        chunk("a", "D1", ordinal=2, effective_date=date(2020, 1, 1)),
        chunk("b", "D2", ordinal=None, updated_at=datetime(2021, 1, 1, tzinfo=UTC)),
        chunk("c", "D1", ordinal=0),
        chunk("d", "D3", ordinal=1, updated_at=datetime(2019, 1, 1)),
    ]

    assert sorted(ids(arrange(ranked, order))) == ["a", "b", "c", "d"]


# --- end to end: rank keeps, arrangement places -------------------------------------------

SIX = [
    # id, document, ordinal, effective date, score: arrangement would favour the worst ones.
    ("r1", "X", 7, date(2024, 1, 1), 0.9),
    ("r2", "Y", 3, date(2023, 1, 1), 0.8),
    ("r3", "X", 2, date(2022, 1, 1), 0.7),
    ("r4", "Y", 0, date(2019, 1, 1), 0.6),
    ("r5", "X", 0, date(2018, 1, 1), 0.5),
    ("r6", "Z", 0, date(2017, 1, 1), 0.4),
]


def six_chunks() -> list[Chunk]:
    chunks = [
        Chunk(
            id=id,
            document_id=document,
            title=f"Title {id}",
            content=" ".join(f"{id}w{j}" for j in range(30)),
            ordinal=ordinal,
            effective_date=day,
            score=score,
        )
        for id, document, ordinal, day, score in SIX
    ]
    return [chunks[i] for i in (4, 1, 5, 0, 3, 2)]  # input order is not rank order


@pytest.fixture(scope="module")
def three_fit(o200k: TiktokenTokenizer) -> Budget:
    """A budget whose retrieved allocation holds exactly the three best of `six_chunks`."""
    assembler = ContextAssembler(
        tokenizer=o200k,
        budget=budget_for("retrieved", None),
        sources=SourceOptions(order="relevance"),
    )
    by_rank = sorted(six_chunks(), key=lambda c: -(c.score or 0))
    sizes = [
        assembler.assemble(question="Q?", chunks=by_rank[:k]).report.sizes["retrieved"]
        for k in (3, 4)
    ]
    return budget_for("retrieved", sum(sizes) // 2)


@pytest.mark.parametrize("order", get_args(Order))
def test_assemble_rank_decides_what_is_kept_under_every_order(
    o200k: TiktokenTokenizer, three_fit: Budget, order: Order
) -> None:
    assembler = ContextAssembler(
        tokenizer=o200k, budget=three_fit, sources=SourceOptions(order=order)
    )

    result = assembler.assemble(question="Q?", chunks=six_chunks())

    assert sorted(s.chunk.id for s in result.sources) == ["r1", "r2", "r3"]
    assert {d.id for d in result.report.dropped if d.reason == "over_budget"} == {
        "r4",
        "r5",
        "r6",
    }


EXPECTED_POSITIONS: dict[Order, list[str]] = {
    "relevance": ["r1", "r2", "r3"],
    "by_document": ["r3", "r1", "r2"],
    "sandwich": ["r1", "r3", "r2"],
    "chronological": ["r3", "r2", "r1"],
}


@pytest.mark.parametrize(("order", "expected"), EXPECTED_POSITIONS.items())
def test_assemble_arrangement_only_moves_what_was_kept(
    o200k: TiktokenTokenizer, three_fit: Budget, order: Order, expected: list[str]
) -> None:
    assembler = ContextAssembler(
        tokenizer=o200k, budget=three_fit, sources=SourceOptions(order=order)
    )

    result = assembler.assemble(question="Q?", chunks=six_chunks())

    assert [s.chunk.id for s in result.sources] == expected


@pytest.mark.parametrize("order", get_args(Order))
def test_assemble_numbering_contiguous_in_arrangement_order(
    o200k: TiktokenTokenizer, order: Order
) -> None:
    assembler = ContextAssembler(
        tokenizer=o200k, budget=budget_for("retrieved", None), sources=SourceOptions(order=order)
    )

    result = assembler.assemble(question="Q?", chunks=six_chunks())

    assert [s.n for s in result.sources] == list(range(1, 7))
    headers = re.findall(r"^\[(\d+)\] (.+)$", result.text, flags=re.MULTILINE)
    assert headers == [(str(s.n), s.chunk.title) for s in result.sources]


def test_assemble_default_order_is_by_document(o200k: TiktokenTokenizer) -> None:
    default = ContextAssembler(tokenizer=o200k, budget=budget_for("retrieved", None))
    by_document = ContextAssembler(
        tokenizer=o200k,
        budget=budget_for("retrieved", None),
        sources=SourceOptions(order="by_document"),
    )

    result = default.assemble(question="Q?", chunks=six_chunks())

    assert result.text == by_document.assemble(question="Q?", chunks=six_chunks()).text
    assert [s.chunk.id for s in result.sources] == ["r5", "r3", "r1", "r4", "r2", "r6"]


def test_assemble_sources_follow_text_order(o200k: TiktokenTokenizer) -> None:
    assembler = ContextAssembler(
        tokenizer=o200k,
        budget=budget_for("retrieved", None),
        sources=SourceOptions(order="sandwich"),
    )

    result = assembler.assemble(question="Q?", chunks=six_chunks())

    positions = [result.text.index(s.chunk.content) for s in result.sources]
    assert positions == sorted(positions)
    assert [s.chunk.id for s in result.sources] == ["r1", "r3", "r5", "r6", "r4", "r2"]


def test_assemble_unknown_order_rejected(o200k: TiktokenTokenizer) -> None:
    with pytest.raises(ValueError, match=r"order\n\s+Input should be 'by_document', 'relevance'"):
        ContextAssembler(tokenizer=o200k, sources=SourceOptions(order="random"))  # type: ignore[arg-type]
