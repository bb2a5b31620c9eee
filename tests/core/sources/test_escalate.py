"""Whole-document escalation (_sources/escalate.py, _sources/claim.py): 3+ selected chunks
of one document and the document fits in 70% of retrieval's grant -> the document goes in
whole, in their place. Escalation keeps dedup's verdicts: a near-copy of a section does not
come back beside the whole document.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    CallableTokenizer,
    Chunk,
    ContextAssembler,
    Dropped,
    Principal,
    SourceOptions,
    TiktokenTokenizer,
    select_sources,
)
from ctxbudget._sources.claim import RetrievedClaim
from ctxbudget._sources.escalate import (
    DocumentLoader,
    Escalation,
    SectionLoader,
    as_document,
    check_loader,
    document_permitted,
    load_sections,
)
from ctxbudget._sources.permit import AccessPolicy
from tests.support.factories import FakeLoader, budget_for, parts, whole, words
from tests.support.tokenizers import fake_count


def assembler(
    o200k: TiktokenTokenizer,
    loader: DocumentLoader | SectionLoader | None,
    *,
    retrieved_max: int | None = 1_000,
    **options: Any,
) -> ContextAssembler:
    return ContextAssembler(
        tokenizer=o200k,
        budget=budget_for("retrieved", retrieved_max),
        sources=SourceOptions(loader=loader, **options),
    )


def source_ids(result: Assembled) -> list[str]:
    return [s.chunk.id for s in result.sources]


MANUAL = parts("manual", 3, score=0.9)
FAQ = parts("faq", 2, score=0.5)


# --- escalation happens -------------------------------------------------------------------


def test_escalate_three_chunks_send_whole_document(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    documents = [s for s in result.sources if s.document]
    assert len(documents) == 1
    assert documents[0].chunk.id == "manual"
    assert documents[0].covers == ("manual#0", "manual#1", "manual#2")
    assert result.report.escalated == "manual"


def test_escalate_document_replaces_its_chunks(o200k: TiktokenTokenizer) -> None:
    document = whole(MANUAL)
    loader = FakeLoader({"manual": document})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert not {"manual#0", "manual#1", "manual#2"} & set(source_ids(result))
    assert result.text.count(MANUAL[0].content) == 1
    assert words("manualintro", 20) in result.text


def test_escalate_keeps_other_documents_chunks(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert sorted(source_ids(result)) == ["faq#0", "faq#1", "manual"]
    assert all(c.content in result.text for c in FAQ)


def test_escalate_document_ids_normalised_to_document_id(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL, id="manual.pdf", document_id="elsewhere")})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    (source,) = result.sources
    assert (source.chunk.id, source.chunk.document_id) == ("manual", "manual")


def test_escalate_document_numbered_like_any_source(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader, order="relevance").assemble(
        question="Q?", chunks=[*FAQ, *MANUAL]
    )

    assert [(s.n, s.chunk.id) for s in result.sources] == [
        (1, "manual"),
        (2, "faq#0"),
        (3, "faq#1"),
    ]
    assert "[1] Manual\n" + words("manualintro", 20) in result.text


def test_escalate_document_stands_at_its_best_chunks_rank(o200k: TiktokenTokenizer) -> None:
    better = parts("faq", 1, score=0.99)
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader, order="relevance").assemble(
        question="Q?", chunks=[*MANUAL, *better]
    )

    assert source_ids(result) == ["faq#0", "manual"]


# --- escalation does not happen -----------------------------------------------------------


def test_escalate_two_chunks_not_escalated(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL[:2], *FAQ])

    assert result.report.escalated is None
    assert sorted(source_ids(result)) == ["faq#0", "faq#1", "manual#0", "manual#1"]
    assert loader.calls == []


def test_escalate_counts_selected_not_retrieved_chunks(o200k: TiktokenTokenizer) -> None:
    # Three chunks of the manual were retrieved, but only two fit: no escalation.
    big = parts("manual", 3, score=0.9)
    loader = FakeLoader({"manual": whole(big)})
    two = assembler(o200k, None, retrieved_max=None).assemble(question="Q?", chunks=big[:2])

    result = assembler(o200k, loader, retrieved_max=two.report.sizes["retrieved"]).assemble(
        question="Q?", chunks=big
    )

    assert result.report.escalated is None
    assert source_ids(result) == ["manual#0", "manual#1"]


def test_escalate_document_over_share_not_escalated(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL, intro=600)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert result.report.escalated is None
    assert sorted(source_ids(result)) == ["faq#0", "faq#1", "manual#0", "manual#1", "manual#2"]
    assert words("manualintro", 20) not in result.text


@pytest.fixture(scope="module")
def document_cost(o200k: TiktokenTokenizer) -> int:
    """What the escalated manual costs in the retrieved section (framing included)."""
    loader = FakeLoader({"manual": whole(MANUAL)})
    result = assembler(o200k, loader, retrieved_max=None).assemble(question="Q?", chunks=MANUAL)
    assert result.report.escalated == "manual"
    return result.report.sizes["retrieved"]


def test_escalate_document_exactly_at_share_escalated(
    o200k: TiktokenTokenizer, document_cost: int
) -> None:
    grant = math.ceil(document_cost / 0.7)
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader, retrieved_max=grant).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated == "manual"


def test_escalate_document_just_over_share_not_escalated(
    o200k: TiktokenTokenizer, document_cost: int
) -> None:
    grant = math.ceil(document_cost / 0.7) - 1
    assert document_cost > 0.7 * grant
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader, retrieved_max=grant).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated is None
    assert source_ids(result) == ["manual#0", "manual#1", "manual#2"]


def test_escalate_max_share_configurable(o200k: TiktokenTokenizer, document_cost: int) -> None:
    grant = math.ceil(document_cost / 0.7)
    loader = FakeLoader({"manual": whole(MANUAL)})
    strict = Escalation(max_share=0.5)

    result = assembler(o200k, loader, retrieved_max=grant, escalation=strict).assemble(
        question="Q?", chunks=MANUAL
    )

    assert result.report.escalated is None


def test_escalate_max_share_one_allows_whole_grant(
    o200k: TiktokenTokenizer, document_cost: int
) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(
        o200k, loader, retrieved_max=document_cost, escalation=Escalation(max_share=1)
    ).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated == "manual"


def test_escalate_min_chunks_lowered(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})
    eager = Escalation(min_chunks=2)

    result = assembler(o200k, loader, escalation=eager).assemble(
        question="Q?", chunks=[*MANUAL[:2], *FAQ]
    )

    assert result.report.escalated == "manual"


def test_escalate_min_chunks_raised(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})
    reluctant = Escalation(min_chunks=4)

    result = assembler(o200k, loader, escalation=reluctant).assemble(
        question="Q?", chunks=[*MANUAL, *FAQ]
    )

    assert result.report.escalated is None
    assert loader.calls == []


def test_escalate_loader_returns_none_not_escalated(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert result.report.escalated is None
    assert loader.calls == ["manual"]
    assert sorted(source_ids(result)) == ["faq#0", "faq#1", "manual#0", "manual#1", "manual#2"]


def test_escalate_loaded_document_empty_not_escalated(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL, content=" \n ")})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated is None
    assert source_ids(result) == ["manual#0", "manual#1", "manual#2"]


def test_escalate_no_loader_not_escalated(o200k: TiktokenTokenizer) -> None:
    result = assembler(o200k, None).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert result.report.escalated is None
    assert not any(s.document for s in result.sources)


def test_escalate_most_hit_document_tried_first(o200k: TiktokenTokenizer) -> None:
    guide = parts("guide", 4, score=0.8)
    loader = FakeLoader({"manual": whole(MANUAL), "guide": whole(guide)})

    result = assembler(o200k, loader, retrieved_max=2_000).assemble(
        question="Q?", chunks=[*MANUAL, *guide]
    )

    assert result.report.escalated == "guide"
    assert loader.calls == ["guide"]
    assert sorted(source_ids(result)) == ["guide", "manual#0", "manual#1", "manual#2"]


def test_escalate_next_document_tried_when_first_does_not_fit(o200k: TiktokenTokenizer) -> None:
    guide = parts("guide", 4, score=0.8)
    loader = FakeLoader({"manual": whole(MANUAL), "guide": whole(guide, intro=1_500)})

    result = assembler(o200k, loader, retrieved_max=2_000).assemble(
        question="Q?", chunks=[*MANUAL, *guide]
    )

    assert result.report.escalated == "manual"
    assert loader.calls == ["guide", "manual"]


# --- the loader contract ------------------------------------------------------------------


def test_escalate_loader_returning_non_chunk_raises(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": {"content": "the whole manual"}})

    with pytest.raises(
        TypeError,
        match=r"DocumentLoader\.load\('manual'\) returned dict; it must return a Chunk "
        r"\(id and document_id set to the document id\) or None",
    ):
        assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)


def test_escalate_loader_without_load_method_rejected(o200k: TiktokenTokenizer) -> None:
    with pytest.raises(
        TypeError,
        match=r"loader must have a load\(document_id\) -> Chunk \| None method.*; got dict",
    ):
        ContextAssembler(tokenizer=o200k, sources=SourceOptions(loader={"manual": "text"}))


def test_escalate_loader_called_once_per_document_per_assemble(
    o200k: TiktokenTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A retrieval trimmed by others is fitted more than once (its grant, then with the space others
    # held); the document must be loaded only once.
    fits: list[int] = []
    real_fit = RetrievedClaim.fit

    def counting_fit(self: RetrievedClaim, grant: int) -> Any:
        fits.append(grant)
        return real_fit(self, grant)

    monkeypatch.setattr(RetrievedClaim, "fit", counting_fit)
    filler = [Chunk(id=f"filler{i}", content=words(f"filler{i}", 60), score=0.1) for i in range(10)]
    crowded = Budget(
        total=1_400,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", max=200, priority=0),
            Allocation("retrieved", min=100, priority=1),
        ),
    )
    loader = FakeLoader({"manual": whole(MANUAL)})
    assembler = ContextAssembler(
        tokenizer=o200k, budget=crowded, sources=SourceOptions(loader=loader)
    )

    result = assembler.assemble(
        system=words("system", 150), question="Q?", chunks=[*MANUAL, *filler]
    )

    assert len(fits) >= 2
    assert result.report.escalated == "manual"
    assert loader.calls == ["manual"]


def test_escalate_loader_called_again_on_next_assemble(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})
    same = assembler(o200k, loader)

    same.assemble(question="Q?", chunks=MANUAL)
    same.assemble(question="Q?", chunks=MANUAL)

    assert loader.calls == ["manual", "manual"]


# --- budget -------------------------------------------------------------------------------


def test_escalate_document_counts_against_budget(
    o200k: TiktokenTokenizer, document_cost: int
) -> None:
    grant = math.ceil(document_cost / 0.7)
    big_faq = [
        Chunk(id=f"faq#{i}", document_id="faq", content=words(f"faq{i}", 20), score=0.5 - i / 100)
        for i in range(4)
    ]
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader, retrieved_max=grant).assemble(
        question="Q?", chunks=[*MANUAL, *big_faq]
    )

    assert result.report.escalated == "manual"
    assert result.report.sizes["retrieved"] <= result.report.granted["retrieved"] == grant
    assert result.report.total <= result.report.budget
    assert "faq#0" in source_ids(result)
    over = {d.id for d in result.report.dropped if d.reason == "over_budget"}
    assert over
    assert over.isdisjoint(source_ids(result))


def test_escalate_report_total_is_exact_count_of_text(o200k: TiktokenTokenizer) -> None:
    loader = FakeLoader({"manual": whole(MANUAL)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert result.report.total == o200k.count(result.text)


# --- permission re-check ------------------------------------------------------------------

ACME = Principal(tenant="acme", groups=frozenset({"support"}))


def test_escalate_document_of_other_tenant_not_escalated(o200k: TiktokenTokenizer) -> None:
    chunks = parts("manual", 3, tenant="acme")
    loader = FakeLoader({"manual": whole(chunks, tenant="globex")})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated is None
    assert source_ids(result) == ["manual#0", "manual#1", "manual#2"]
    assert (
        Dropped(claimant="retrieved", kind="document", id="manual", reason="forbidden")
        in result.report.dropped
    )
    assert words("manualintro", 20) not in result.text


def test_escalate_document_without_acl_when_chunks_had_one_not_escalated(
    o200k: TiktokenTokenizer,
) -> None:
    chunks = parts("manual", 3, tenant="acme", groups=frozenset({"support"}))
    loader = FakeLoader({"manual": whole(chunks, tenant=None, groups=None)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated is None
    assert [(d.kind, d.reason) for d in result.report.dropped] == [("document", "forbidden")]


def test_escalate_document_of_other_group_not_escalated(o200k: TiktokenTokenizer) -> None:
    chunks = parts("manual", 3, groups=frozenset({"support"}))
    loader = FakeLoader({"manual": whole(chunks, groups=frozenset({"legal"}))})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated is None
    assert [(d.kind, d.id, d.reason) for d in result.report.dropped] == [
        ("document", "manual", "forbidden")
    ]


def test_escalate_document_with_same_acl_escalated(o200k: TiktokenTokenizer) -> None:
    chunks = parts("manual", 3, tenant="acme", groups=frozenset({"support"}))
    loader = FakeLoader({"manual": whole(chunks)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated == "manual"
    assert result.report.dropped == ()


def test_escalate_document_checked_against_require_tenant_policy(
    o200k: TiktokenTokenizer,
) -> None:
    chunks = parts("manual", 3, tenant="acme")
    loader = FakeLoader({"manual": whole(chunks, tenant=None)})
    strict = AccessPolicy(require_tenant=True)

    result = assembler(o200k, loader, access=strict).assemble(
        question="Q?", chunks=chunks, principal=ACME
    )

    assert result.report.escalated is None


def test_document_permitted_public_chunks_public_document() -> None:
    chunks = parts("manual", 3)

    assert document_permitted(whole(chunks), chunks, None, AccessPolicy())


def test_document_permitted_requires_acl_its_chunks_carried() -> None:
    chunks = parts("manual", 3, groups=frozenset({"support"}))

    assert not document_permitted(whole(chunks, groups=None), chunks, ACME, AccessPolicy())


# --- settings -----------------------------------------------------------------------------


def test_escalation_defaults() -> None:
    assert (Escalation().min_chunks, Escalation().max_share) == (3, 0.7)


def test_escalation_min_chunks_below_two_rejected() -> None:
    with pytest.raises(
        ValidationError, match=r"min_chunks\n\s+Input should be greater than or equal to 2"
    ):
        Escalation(min_chunks=1)


@pytest.mark.parametrize("share", [0, -0.1])
def test_escalation_max_share_not_positive_rejected(share: float) -> None:
    with pytest.raises(ValidationError, match=r"max_share\n\s+Input should be greater than 0"):
        Escalation(max_share=share)


def test_escalation_max_share_above_one_rejected() -> None:
    with pytest.raises(
        ValidationError, match=r"max_share\n\s+Input should be less than or equal to 1"
    ):
        Escalation(max_share=1.2)


# --- loading a document as its sections ---------------------------------------------------


class FakeSectionLoader:
    """Serves documents as section lists and records the principal of every load."""

    def __init__(self, documents: dict[str, Any]) -> None:
        self.documents = documents
        self.calls: list[tuple[str, Principal | None]] = []

    def load_sections(self, document_id: str, principal: Principal | None) -> Any:
        self.calls.append((document_id, principal))
        return self.documents.get(document_id)


def sections(chunks: list[Chunk], *, intro: int = 20, **acl: Any) -> list[Chunk]:
    """The document the chunks were cut from, as its sections: an introduction, then them."""
    first = chunks[0]
    opening = Chunk(
        id=f"{first.document_id}#intro",
        document_id=first.document_id,
        title=first.title,
        content=words(f"{first.document_id}intro", intro),
        tenant=first.tenant,
        groups=first.groups,
    )
    return [opening.model_copy(update=acl), *chunks]


def test_escalate_sections_sent_joined_in_order(o200k: TiktokenTokenizer) -> None:
    loader = FakeSectionLoader({"manual": sections(MANUAL)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert result.report.escalated == "manual"
    (document,) = [s for s in result.sources if s.document]
    expected = "\n\n".join([words("manualintro", 20), *(c.content for c in MANUAL)])
    assert document.chunk.content == expected
    assert f"[1] Manual\n{expected}" in result.text
    assert document.covers == ("manual#0", "manual#1", "manual#2")


def test_escalate_section_loader_receives_principal(o200k: TiktokenTokenizer) -> None:
    chunks = parts("manual", 3, tenant="acme")
    loader = FakeSectionLoader({"manual": sections(chunks)})

    assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert loader.calls == [("manual", ACME)]


def test_escalate_section_loader_preferred_over_load(o200k: TiktokenTokenizer) -> None:
    class Both(FakeSectionLoader):
        def load(self, document_id: str) -> Chunk | None:
            raise AssertionError("load_sections should have been used")

    loader = Both({"manual": sections(MANUAL)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated == "manual"


@pytest.mark.parametrize("answer", [None, []], ids=["none", "no-sections"])
def test_escalate_section_loader_without_document_not_escalated(
    o200k: TiktokenTokenizer, answer: Any
) -> None:
    loader = FakeSectionLoader({"manual": answer})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated is None
    assert source_ids(result) == ["manual#0", "manual#1", "manual#2"]
    assert result.report.dropped == ()


def test_escalate_sections_blank_ones_left_out(o200k: TiktokenTokenizer) -> None:
    blank = Chunk(id="manual#blank", document_id="manual", content=" \n ")
    loader = FakeSectionLoader({"manual": [MANUAL[0], blank, *MANUAL[1:]]})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    (document,) = result.sources
    assert document.chunk.content == "\n\n".join(c.content for c in MANUAL)


def test_escalate_sections_all_blank_not_escalated(o200k: TiktokenTokenizer) -> None:
    blank = [Chunk(id=f"manual#{i}", document_id="manual", content=" ") for i in range(2)]
    loader = FakeSectionLoader({"manual": blank})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    assert result.report.escalated is None


def test_escalate_section_not_retrieved_and_forbidden_withholds_document(
    o200k: TiktokenTokenizer,
) -> None:
    # The retriever returned the three visible chunks only; the loader shows the
    # document also holds an HR-only section. The document stays out.
    chunks = parts("manual", 3, groups=frozenset({"support"}))
    loader = FakeSectionLoader({"manual": sections(chunks, groups=frozenset({"hr"}))})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated is None
    assert source_ids(result) == ["manual#0", "manual#1", "manual#2"]
    assert result.report.dropped == (
        Dropped(claimant="retrieved", kind="document", id="manual", reason="forbidden"),
    )
    assert words("manualintro", 20) not in result.text


def test_escalate_section_without_acl_when_chunks_had_one_withholds_document(
    o200k: TiktokenTokenizer,
) -> None:
    chunks = parts("manual", 3, tenant="acme")
    loader = FakeSectionLoader({"manual": sections(chunks, tenant=None)})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    assert result.report.escalated is None
    assert [(d.kind, d.reason) for d in result.report.dropped] == [("document", "forbidden")]


def test_escalate_sections_checked_against_access_policy(o200k: TiktokenTokenizer) -> None:
    # Public chunks, public sections, but the request requires groups on everything.
    loader = FakeSectionLoader({"manual": sections(MANUAL)})
    strict = AccessPolicy(require_groups=True)
    chunks = parts("manual", 3, groups=frozenset({"support"}))

    result = assembler(o200k, loader, access=strict).assemble(
        question="Q?", chunks=chunks, principal=ACME
    )

    assert result.report.escalated is None
    assert [(d.kind, d.reason) for d in result.report.dropped] == [("document", "forbidden")]


def test_escalate_sections_withheld_when_a_retrieved_chunk_was_forbidden(
    o200k: TiktokenTokenizer,
) -> None:
    # The loader's sections all admit the principal, but the retriever returned a chunk
    # of the document they may not see: what the loader says does not override that.
    visible = parts("manual", 3, groups=frozenset({"support"}))
    hidden = Chunk(id="manual#9", document_id="manual", content="x", groups=frozenset({"hr"}))
    loader = FakeSectionLoader({"manual": sections(visible)})

    result = assembler(o200k, loader).assemble(
        question="Q?", chunks=[*visible, hidden], principal=ACME
    )

    assert result.report.escalated is None


def test_escalate_permitted_sections_give_narrowest_acl(o200k: TiktokenTokenizer) -> None:
    chunks = parts("manual", 3, tenant="acme", groups=frozenset({"support", "sales"}))
    opening = sections(chunks, groups=frozenset({"support"}))
    loader = FakeSectionLoader({"manual": opening})

    result = assembler(o200k, loader).assemble(question="Q?", chunks=chunks, principal=ACME)

    (document,) = result.sources
    assert (document.chunk.tenant, document.chunk.groups) == ("acme", frozenset({"support"}))


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            "the whole manual",
            r"SectionLoader\.load_sections\('manual', \.\.\.\) returned str; it must return a "
            r"sequence of Chunk \(the document's sections in order\) or None",
        ),
        (
            {"content": "the whole manual"},
            r"SectionLoader\.load_sections\('manual', \.\.\.\) returned dict",
        ),
        (
            [MANUAL[0], {"content": "the whole manual"}],
            r"SectionLoader\.load_sections\('manual', \.\.\.\)\[1\] is a dict; every section "
            r"must be a Chunk",
        ),
    ],
    ids=["str", "dict", "list-with-dict"],
)
def test_escalate_section_loader_wrong_type_raises(
    o200k: TiktokenTokenizer, answer: Any, message: str
) -> None:
    loader = FakeSectionLoader({"manual": answer})

    with pytest.raises(TypeError, match=message) as caught:
        assembler(o200k, loader).assemble(question="Q?", chunks=MANUAL)

    assert "whole manual" not in str(caught.value)


# --- loaders as plain functions -----------------------------------------------------------


def test_check_loader_accepts_either_protocol() -> None:
    documents = FakeLoader({})
    by_sections = FakeSectionLoader({})

    assert (check_loader(documents), check_loader(by_sections)) == (documents, by_sections)


def test_check_loader_rejects_other_objects() -> None:
    with pytest.raises(
        TypeError,
        match=r"loader must have a load\(document_id\) -> Chunk \| None method \(a "
        r"DocumentLoader\) or a load_sections\(document_id, principal\) -> Sequence\[Chunk\] "
        r"\| None method \(a SectionLoader\); got dict",
    ):
        check_loader({"manual": "text"})


def test_load_sections_document_loader_gives_one_section() -> None:
    document = whole(MANUAL)

    assert load_sections(FakeLoader({"manual": document}), "manual", None) == (document,)


def test_load_sections_unknown_document_is_none() -> None:
    assert load_sections(FakeLoader({}), "manual", ACME) is None


def test_as_document_one_section_is_the_document() -> None:
    section = MANUAL[1]

    document = as_document("manual", [section])

    assert document is not None
    assert (document.id, document.document_id, document.content) == (
        "manual",
        "manual",
        section.content,
    )


def test_as_document_header_fields_from_first_titled_section() -> None:
    untitled = Chunk(id="a", content="alpha", source="wiki")
    titled = Chunk(id="b", content="beta", title="Beta", source="confluence")

    document = as_document("doc", [untitled, titled])

    assert document is not None
    assert (document.title, document.source) == ("Beta", "confluence")
    assert document.content == "alpha\n\nbeta"


def test_as_document_newest_dates_naive_read_as_utc() -> None:
    early = Chunk(id="a", content="a", updated_at=datetime(2024, 5, 1, 12), effective_date=None)
    late = Chunk(
        id="b",
        content="b",
        updated_at=datetime(2024, 5, 1, 11, tzinfo=UTC),
        effective_date=date(2024, 1, 1),
    )
    later = Chunk(id="c", content="c", updated_at=datetime(2024, 5, 1, 13))

    document = as_document("doc", [early, late, later])

    assert document is not None
    assert document.updated_at == datetime(2024, 5, 1, 13)
    assert document.effective_date == date(2024, 1, 1)


def test_as_document_parse_warnings_collected_once_each() -> None:
    a = Chunk(id="a", content="a", parse_warnings=("OCR 0.7", "table cut"))
    b = Chunk(id="b", content="b", parse_warnings=("table cut",))

    document = as_document("doc", [a, b])

    assert document is not None
    assert document.parse_warnings == ("OCR 0.7", "table cut")


def test_as_document_groups_every_section_admits() -> None:
    a = Chunk(id="a", content="a", groups=frozenset({"sales", "support"}))
    b = Chunk(id="b", content="b", groups=frozenset({"support", "hr"}))
    c = Chunk(id="c", content="c")

    document = as_document("doc", [a, b, c])

    assert document is not None
    assert (document.tenant, document.groups) == (None, frozenset({"support"}))


def test_as_document_no_acl_stays_public() -> None:
    document = as_document("doc", [Chunk(id="a", content="a"), Chunk(id="b", content="b")])

    assert document is not None
    assert (document.tenant, document.groups) == (None, None)


def test_as_document_sections_of_two_tenants_give_none() -> None:
    a = Chunk(id="a", content="a", tenant="acme")
    b = Chunk(id="b", content="b", tenant="globex")

    assert as_document("doc", [a, b]) is None


# --- a loader's token count, and the final count ------------------------------------------


def test_escalate_understated_document_tokens_decided_on_real_cost(
    o200k: TiktokenTokenizer,
) -> None:
    # Issue #6: a document given as 50 tokens that really costs over 1,000 was escalated,
    # then dropped by the final count with the chunks it covered, leaving no retrieval.
    # It is counted instead, and too large to escalate.
    document = whole(MANUAL, intro=150, tokens=50)
    assert o200k.count(document.content) > 1_000
    loader = FakeLoader({"manual": document})
    tight = ContextAssembler(
        tokenizer=o200k,
        budget=budget_for("retrieved", 1_000, total=1_100),
        sources=SourceOptions(loader=loader),
    )

    result = tight.assemble(question="Q?", chunks=[*MANUAL, *FAQ])

    assert result.report.escalated is None
    assert sorted(source_ids(result)) == ["faq#0", "faq#1", "manual#0", "manual#1", "manual#2"]
    assert result.report.final_check_drops == 0


def test_escalate_document_dropped_by_final_count_falls_back_to_its_chunks() -> None:
    # A tokenizer whose count of the whole prompt exceeds the sum of its parts while the
    # document's introduction is in it: the estimate fits, the final count does not, and
    # the document must go. Its chunks come back rather than vanish.
    intro = words("manualintro", 20)

    def surcharged(prompt: str) -> int:
        return fake_count(prompt) + (50_000 if intro in prompt and "Why?" in prompt else 0)

    tokenizer = CallableTokenizer(surcharged, name="surcharged")
    loader = FakeLoader({"manual": whole(MANUAL)})
    assembler = ContextAssembler(
        tokenizer=tokenizer,
        budget=budget_for("retrieved", 1_000),
        sources=SourceOptions(loader=loader),
    )

    result = assembler.assemble(question="Why?", chunks=[*MANUAL, *FAQ])

    # The other document's chunks rank below the manual and went first; then the manual.
    assert result.report.escalated is None
    assert result.report.total <= result.report.budget
    assert source_ids(result) == ["manual#0", "manual#1", "manual#2"]
    assert [(d.kind, d.id, d.reason) for d in result.report.dropped] == [
        ("document", "manual", "over_budget"),
        ("chunk", "faq#1", "over_budget"),
        ("chunk", "faq#0", "over_budget"),
    ]
    assert result.report.final_check_drops == 3


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
