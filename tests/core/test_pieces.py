"""Sections as parts for the join count: the parts join to exactly the rendered section."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from ctxbudget import (
    Allocation,
    Budget,
    Chunk,
    ContextAssembler,
    SourceOptions,
    Turn,
    get_tokenizer,
)
from ctxbudget._claims import text_claim
from ctxbudget._fence import SourceFormat
from ctxbudget._history import HistoryClaim
from ctxbudget._joins import Counted, Piece
from ctxbudget._layout import FRAMES
from ctxbudget._sources.claim import _around
from ctxbudget._sources.pipeline import retrieved_claim
from ctxbudget._sources.render import RenderOptions, render_source
from ctxbudget.types import CountCache

O200K = get_tokenizer("o200k_base")


def joined(pieces: list[Piece]) -> str:
    return "".join(p if isinstance(p, str) else p.text for p in pieces)


def test_text_claim_pieces_join_to_its_section() -> None:
    counter = CountCache(O200K)
    claim = text_claim(
        Allocation("system", priority=0),
        "First paragraph.\n\nSecond one.\n\n\n\nThird.",
        counter=counter,
        frame=FRAMES["system"],
    )
    fit = claim.fit(1_000)
    assert joined(claim.pieces(fit)) == claim.render(fit)
    assert "Second one." in claim.pieces(fit)


def test_question_pieces_are_the_section_whole() -> None:
    counter = CountCache(O200K)
    claim = text_claim(
        Allocation("question", priority=0), "Why?", counter=counter, frame=FRAMES["question"]
    )
    assert claim.pieces(claim.fit(100)) == ["Question: Why?"]


def test_history_pieces_join_to_its_section_with_gap_markers() -> None:
    turns = [
        Turn(role="user" if i % 2 else "assistant", content=f"Turn {i}. " * 30) for i in range(9)
    ]
    claim = HistoryClaim(Allocation("history", priority=3), turns, counter=CountCache(O200K))
    fit = claim.fit(400)
    assert "omitted" in claim.render(fit)
    assert joined(claim.pieces(fit)) == claim.render(fit)


def test_empty_fit_has_no_pieces() -> None:
    claim = HistoryClaim(Allocation("history", priority=3), [], counter=CountCache(O200K))
    assert claim.pieces(claim.fit(100)) == []


FORMATS: list[SourceFormat] = ["markdown", "xml"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_retrieved_pieces_join_to_the_rendered_fence(fmt: SourceFormat) -> None:
    chunks = [
        Chunk(
            id=f"c{i}",
            document_id=f"d{i % 2}",
            content=f"Passage {i} on refunds.",
            title="T",
            effective_date=date(2024, 1 + i, 1),
            tokens=6 if i % 2 else None,
        )
        for i in range(4)
    ]
    options = SourceOptions(source_format=fmt, conflict_policy="surface_both")
    claim, _ = retrieved_claim(
        Allocation("retrieved", max=1_000, priority=1),
        chunks,
        principal=None,
        options=options,
        counter=CountCache(O200K),
        now=datetime(2026, 1, 1, tzinfo=UTC),
    )
    fit = claim.fit(1_000)
    pieces = claim.pieces(fit)
    assert joined(pieces) == claim.render(fit)
    assert any(isinstance(p, Counted) for p in pieces)
    assert [text for _, text in claim.blocks(fit)] == [
        render_source(n, c, c.content, RenderOptions(fmt=fmt, effective_dates=True))
        for n, c in enumerate(claim.sources(fit), 1)
    ]


def test_around_splits_a_source_at_its_content_even_with_a_mark_in_the_header() -> None:
    chunk = Chunk(id="c", content="Body", title="A \x00 title")
    for fmt in FORMATS:
        options = RenderOptions(fmt=fmt)
        before, content, after = _around(3, chunk, "Body", options)
        assert before + content + after == render_source(3, chunk, "Body", options)
        assert content == "Body"


def test_history_pieces_keep_each_turn_line_whole() -> None:
    turns = [Turn(role="user", content="First paragraph.\n\nSecond paragraph.")]
    claim = HistoryClaim(Allocation("history", priority=3), turns, counter=CountCache(O200K))
    pieces = claim.pieces(claim.fit(1_000))
    assert "User: First paragraph.\n\nSecond paragraph." in pieces


def test_history_section_counts_from_the_lines_its_fit_counted() -> None:
    budget = Budget(
        total=5_000,
        allocations=(Allocation("question", priority=0), Allocation("history", priority=1)),
    )
    assembler = ContextAssembler(tokenizer=O200K, budget=budget)
    turns = [
        Turn(role="user", content=f"Question {i}? {'Details. ' * 40}\n\n" * 3) for i in range(6)
    ]
    assembler.assemble(question="First?", history=turns)
    # Four frame texts, the widest gap marker, the question and six turn lines: the joined
    # section is counted from the lines' own counts (cut at its blank lines, each paragraph
    # of a turn would be tokenized once more: 24 calls).
    assert assembler.counter.calls == 12
    before = assembler.counter.calls
    assembler.assemble(question="Second?", history=[*turns, Turn(role="user", content="More?")])
    # The new turn's line, the new question and the widest gap marker (7 turns now).
    assert assembler.counter.calls - before == 3
