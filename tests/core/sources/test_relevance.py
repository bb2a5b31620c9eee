"""The relevance step (_sources/relevance.py): empty and below-floor chunks go, by id.

Most texts are decided by their first character alone (a printable ASCII character other
than a space is never blank); the property tests compare the step with `is_blank` and
the floor applied to each chunk, over texts built to reach that shortcut's edges. The
`test_floor_*` tests read the floor (`min_relevance`, off by default) through the assembler.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import (
    Chunk,
    ContextAssembler,
    Dropped,
    SourceOptions,
    TiktokenTokenizer,
)
from ctxbudget._normalised import is_blank
from ctxbudget._report import DropRun, records
from ctxbudget._sources.relevance import (
    _any_blank,
    _blank,
    _opens_visibly,
    _opens_visibly_by_index,
    relevance,
    relevant,
)
from tests.support.factories import budget_for

VISIBLE_ASCII = [chr(c) for c in range(0x21, 0x7F)]
"""Every printable ASCII character but the space: the shortcut's whole range."""

EDGES = [
    " ",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1f",
    "\x7f",  # DEL: just past the range
    "\x80",
    "\x85",
    "\u00a0",
    "\u00ad",
    "\u115f",
    "\u180e",
    "\u200b",
    "\u200d",
    "\u2028",
    "\u2060",
    "\u3000",
    "\u3164",
    "\ufe0f",
    "\ufeff",
    "\uffa0",
    "\U000e0041",
    "\U000e0100",
    "\u0301",
    "\uff01",  # fullwidth "!"
    "\u02dc",  # small tilde, a look-alike of "~"
    "\u0430",  # Cyrillic a
    "\u00e9",
    "\U0001f642",
    "!",
    "~",
    "a",
]
texts = st.text(alphabet=st.sampled_from(EDGES), max_size=6) | st.text(max_size=6)


@pytest.mark.parametrize("first", VISIBLE_ASCII)
def test_text_starting_with_printable_ascii_is_never_blank(first: str) -> None:
    for rest in ["", " ", "\u200b\u2060\ufe0f", "\U000e0041" * 3, "\u3164\u00a0\t\n", "é"]:
        assert not is_blank(first + rest)


@given(text=texts)
@example(text="")
@example(text="!")
@example(text="~")
@example(text="~\x7f")
@example(text="\x7f")
@example(text=" a")
def test_opens_visibly_agrees_with_its_plain_form_and_is_never_blank(text: str) -> None:
    shortcut = _opens_visibly(text)
    assert shortcut == _opens_visibly_by_index(text)
    if shortcut:
        assert not is_blank(text)


@given(contents=st.lists(texts.filter(bool), max_size=4))
def test_any_blank_agrees_with_blank_on_each_text(contents: list[str]) -> None:
    chunks = [Chunk(id=str(i), content=text) for i, text in enumerate(contents)]
    assert _any_blank(chunks) == any(_blank(text) for text in contents)


def straightforward(
    chunks: list[Chunk], floor: float | None
) -> tuple[list[str], list[tuple[str, str]]]:
    """The step's definition, one chunk at a time."""
    kept, dropped = [], []
    for chunk in chunks:
        score = relevance(chunk)
        if is_blank(chunk.content):
            dropped.append((chunk.id, "empty"))
        elif floor is not None and score is not None and score < floor:
            dropped.append((chunk.id, "below_floor"))
        else:
            kept.append(chunk.id)
    return kept, dropped


scores = st.none() | st.sampled_from([-1.0, 0.0, 0.2, 0.5, 1.0])


@given(
    given_chunks=st.lists(st.tuples(texts, scores, scores), max_size=8),
    floor=st.none() | st.sampled_from([0.0, 0.2, 0.6]),
)
def test_relevant_equals_blank_and_floor_checked_one_chunk_at_a_time(
    given_chunks: list[tuple[str, float | None, float | None]], floor: float | None
) -> None:
    chunks = [
        Chunk(id=f"c{i}", content=text, score=score, rerank_score=rerank)
        for i, (text, score, rerank) in enumerate(given_chunks)
    ]
    kept, dropped = relevant(chunks, floor)
    expected_kept, expected_dropped = straightforward(chunks, floor)
    assert [c.id for c in kept] == expected_kept
    assert [(d.id, d.reason) for d in records(dropped)] == expected_dropped


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
    assert [(d.id, d.reason) for d in records(dropped)] == [
        ("low", "below_floor"),
        ("blank", "empty"),
    ]


def test_relevant_without_a_floor_drops_only_empty() -> None:
    chunks = [Chunk(id="low", content="x", score=-3.0), Chunk(id="blank", content=" ")]
    kept, dropped = relevant(chunks, None)
    assert [c.id for c in kept] == ["low"]
    assert [(d.id, d.reason) for d in records(dropped)] == [("blank", "empty")]


def test_relevant_keeps_text_starting_outside_the_shortcut_when_it_is_visible() -> None:
    chunks = [Chunk(id="nbsp", content="\u00a0Returns"), Chunk(id="cafe", content="\u00e9t\u00e9")]
    kept, dropped = relevant(chunks, None)
    assert [c.id for c in kept] == ["nbsp", "cafe"]
    assert dropped == []


def test_relevant_reports_each_run_of_one_reason_together_in_order() -> None:
    chunks = [
        Chunk(id="e1", content=" "),
        Chunk(id="e2", content="\t"),
        Chunk(id="low", content="x", score=0.0),
        Chunk(id="e3", content=""),
    ]
    _, dropped = relevant(chunks, 0.5)
    runs = [d for d in dropped if isinstance(d, DropRun)]
    assert len(runs) == len(dropped)
    assert [(d.reason, list(d.ids)) for d in runs] == [
        ("empty", ["e1", "e2"]),
        ("below_floor", ["low"]),
        ("empty", ["e3"]),
    ]


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
