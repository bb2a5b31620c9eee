"""Escalation keeps dedup's verdicts: a near-copy of a section does not come back beside the
whole document (it would pass against the document, whose other text dilutes the overlap)."""

from __future__ import annotations

from ctxbudget import Chunk, SourceOptions, select_sources

DAMAGED = (
    "Damaged goods can be returned at any time within two years of delivery for a full refund "
    "or a replacement, whichever the customer prefers, at no cost to them."
)
SECTIONS = [
    Chunk(
        id="r1",
        document_id="returns",
        ordinal=1,
        score=0.9,
        content=" ".join(
            f"Unworn item {i} may go back within sixty days of its delivery date."
            for i in range(12)
        ),
    ),
    Chunk(id="r2", document_id="returns", ordinal=2, score=0.8, content=DAMAGED),
    Chunk(
        id="r3",
        document_id="returns",
        ordinal=3,
        score=0.7,
        content=" ".join(
            f"Refund {i} reaches the original payment method within fourteen days."
            for i in range(12)
        ),
    ),
]
COPY = Chunk(
    id="wiki",
    document_id="wiki",
    score=0.75,
    content="Support wiki > Policies > Returns. Last reviewed by the team. " + DAMAGED,
)


class Sections:
    def load_sections(self, document_id: str, principal: object) -> list[Chunk] | None:
        return SECTIONS if document_id == "returns" else None


def test_a_near_copy_of_a_section_stays_dropped_when_its_document_is_sent_whole() -> None:
    plain = select_sources([*SECTIONS, COPY], max_tokens=2_000, tokenizer="o200k_base")
    assert ("wiki", "duplicate") in {(d.id, d.reason) for d in plain.dropped}

    options = SourceOptions(loader=Sections())
    whole = select_sources(
        [*SECTIONS, COPY], max_tokens=2_000, tokenizer="o200k_base", sources=options
    )
    assert whole.escalated == "returns"
    assert [s.chunk.id for s in whole.sources] == ["returns"]
    assert ("wiki", "duplicate") in {(d.id, d.reason) for d in whole.dropped}
